//! The job spec: what an A/B run compares (two sources and how to build them), on what
//! inputs (fixtures), with which workloads, and under which measurement discipline.
//!
//! Parsed from TOML with unknown keys rejected (`raw`), then resolved and checked
//! (`validate`) into a [`JobSpec`] (`model`) whose relative paths are already resolved
//! against the spec's directory. The validated spec travels to agents as JSON (`json`),
//! and reading that JSON runs the same checks again, so no `JobSpec` skips them. The TOML
//! form is documented in `docs/job-spec.md`.

mod backends;
mod error;
mod json;
pub use json::SpecJson;
mod model;
mod raw;
mod sweep;
mod validate;

pub use backends::{
    default_levels, default_toolchain, BackendsSpec, CpuDispatchSpec, DispatchLevel,
    GpuBackendSpec, KernelLaunch,
};
pub use error::SpecError;
pub use model::{
    Allowance, AllowedMissing, BuildRecipe, CommandSpec, Fanout, FixtureFile, FixtureLocation,
    FixtureSpec, Generator, JobSpec, MeasureSpec, OutputFormat, ParitySpec, PixelFormat, SideSpec,
    SourceSpec, TargetSpec, WorkloadSpec, DEFAULT_MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES_PER_FRAME,
    TEMPLATE_PLACEHOLDERS,
};
pub use sweep::{
    SearchStrategy, SweepSpec, Tunable, TunableKind, CONFIGURATIONS_LIMIT,
    DEFAULT_MAX_CONFIGURATIONS, VALUE_PLACEHOLDER,
};
