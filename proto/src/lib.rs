//! The wire contract: the generated tonic/prost code for `proto/abfleet/v1/abfleet.proto`
//! and the conversions between wire messages and domain types. Only this crate knows
//! protobuf; everything else speaks `abfleet_core`.
#![forbid(unsafe_code)]

pub mod agent_link;
pub mod control_link;
mod control_views;
mod convert;
mod link_error;
pub mod transport;

pub use convert::{agent_message, parse_id, WireError};
pub use link_error::{LinkError, LinkErrorKind};

/// The encoded `FileDescriptorSet` of the wire contract, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/abfleet_descriptor.bin"));

/// Generated code. Use the domain types outside the services' edges.
pub mod pb {
    #![allow(clippy::all, clippy::pedantic)]
    tonic::include_proto!("abfleet.v1");
}
