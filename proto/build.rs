//! Compiles `proto/abfleet/v1/abfleet.proto` with protox (a pure-Rust protobuf compiler), so
//! building abfleet never needs a system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/abfleet/v1/abfleet.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
