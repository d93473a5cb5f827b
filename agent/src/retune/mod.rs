//! Retuning checks on this host: run the real inspectors on the fork's per-backend build
//! artifacts and turn their output into findings (core::retune does the reading).

pub mod build_log;
pub mod cuda;
pub mod hip;
pub mod sycl;
