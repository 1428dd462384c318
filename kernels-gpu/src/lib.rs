//! Device code of radio-kernels and the pure functions it shares with the host.
//!
//! Built twice:
//! - for `nvptx64-nvidia-cuda` by the root `build.rs` (as a cdylib whose output is one PTX
//!   module): everything below, including the `extern "ptx-kernel"` entry points;
//! - for the host as an ordinary rlib: only the pure modules (`layout`, `packing`, `bank`),
//!   so that host code and CPU tests use exactly the index math the kernels use.
#![no_std]
#![warn(missing_docs)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch))]

pub mod bank;
pub mod baseband_beamformer;
pub mod correlator;
pub mod delay_beamformer;
pub mod frb_beamformer;
pub mod layout;
pub mod modules;
pub mod packing;
pub mod pfb;
pub mod wgmma;
pub mod xorwow;

#[cfg(target_arch = "nvptx64")]
pub mod intrinsics;
#[cfg(target_arch = "nvptx64")]
pub mod mma;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod ceilings;
#[path = "ceilings/hopper.rs"]
pub mod ceilings_hopper;
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod selftest;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: trap aborts the kernel; the host sees CUDA_ERROR_ILLEGAL_INSTRUCTION (or LAUNCH_FAILED).
    unsafe { core::arch::nvptx::trap() }
}
