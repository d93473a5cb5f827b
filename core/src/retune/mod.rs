//! Retuning checks: pure functions from the output of the real tools (`cuobjdump`, `nvcc`,
//! `clang-offload-bundler`, `llvm-readelf`, `sycl-ls`) and the device's identity to
//! [`Finding`](crate::finding::Finding)s. The agent runs the tools; this module only reads
//! what they printed, so every parser is tested on recorded real output (docs/retuning.md).

pub mod amd_occupancy;
pub mod build_errors;
pub mod cuda_build_log;
pub mod cuda_launch_bounds;
pub mod cuda_occupancy;
pub mod cuda_tools;
pub mod dispatch;
pub mod elf_sections;
pub mod hip_kernels;
pub mod hip_tools;
pub mod isa_parity;
pub mod simd_sources;
pub mod sycl_targets;

/// What one kernel of one built architecture uses, as the CUDA or AMDGPU tools report it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelResources {
    /// The kernel's symbol as the tool printed it (mangled for C++), e.g. `_Z9blur_rowsPKfPfii`.
    pub name: String,
    /// The architecture this code object is for: `sm_89`, `gfx90a`.
    pub arch: String,
    /// Registers per thread (CUDA `REG`), or VGPRs per work-item (AMDGPU).
    pub registers: u32,
    /// AMDGPU scalar registers per wave; 0 for CUDA.
    pub sgprs: u32,
    /// Bytes of stack frame per thread.
    pub stack_bytes: u32,
    /// Bytes spilled to local memory per thread (CUDA `LOCAL`, ptxas "spill stores";
    /// AMDGPU `.vgpr_spill_count` × 4).
    pub spill_bytes: u32,
    /// Static shared memory (CUDA) or LDS (AMDGPU `.group_segment_fixed_size`) per block, bytes.
    pub shared_bytes: u32,
    /// The block size the kernel was compiled for, when the code object says
    /// (AMDGPU `.max_flat_workgroup_size`, CUDA `__launch_bounds__` from ptxas), else `None`.
    pub max_block_threads: Option<u32>,
    /// AMDGPU wavefront size (32 or 64); `None` for CUDA.
    pub wavefront_size: Option<u32>,
}
pub mod ze_info;
