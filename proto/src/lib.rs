//! The wire contract.
pub mod pb {
    tonic::include_proto!("abfleet.v1");
}
