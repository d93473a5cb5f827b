//! Compiles `proto/abfleet/v1/abfleet.proto` with protox (a pure-Rust protobuf compiler), so
//! building abfleet never needs a system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/abfleet/v1/abfleet.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    // The encoded descriptors serve gRPC reflection, so `grpcurl` works without the .proto.
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("abfleet_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
