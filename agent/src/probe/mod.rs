//! Hardware probe parsers: each probe turns one tool's recorded or live output into a typed,
//! serde-serialisable result, and says `Absent { reason }` when the tool is missing or fails.
//!
//! The parsers are pure functions over strings so they can be tested on real captures kept in
//! `fixtures/probes/` (see its `SOURCES.md`); [`HardwareInventory::from_dir`] replays such a
//! capture set and [`HardwareInventory::live`] runs the real tools.

pub mod amd;
pub mod cpu;
pub mod intel;
pub mod inventory;
pub mod nvidia;
pub mod outcome;
pub mod toolchain;
pub mod uarch;
pub mod vulkan;

pub use amd::{parse_rocminfo, AmdGpu};
pub use cpu::{
    apply_cpu_sysfs, parse_cpuinfo, parse_sve_default_vector_length, ArmIdent, CpuArch,
    CpuFactSource, CpuFrequency, CpuInfo, CpuProbe, CpuSysfsText, IsaFeatures, X86Ident,
};
pub use intel::{parse_clinfo, parse_sycl_ls, IntelArch, IntelGpu};
pub use inventory::HardwareInventory;
pub use nvidia::{
    parse_nvidia_smi_csv, parse_nvidia_smi_q_text, parse_nvidia_smi_xml, ComputeCapabilitySource,
    NvidiaGpu,
};
pub use outcome::Probe;
pub use toolchain::{parse_tool_version, ToolVersion, TOOLS};
