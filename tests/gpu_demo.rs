//! The main job's GPU path: the same science as the CPU path, every stage's GPU-versus-CPU
//! check passing, and the beam powers within 2% of the CPU path's on the same simulated sky.
mod common;

use common::*;
use radio_kernels::demo::{self, Options};

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_chain_matches_the_cpu_chain_and_finds_the_sources() {
    let gpu = gpu();
    let out = std::env::temp_dir().join(format!("radio-kernels-gpu-demo-{}", std::process::id()));
    let options = Options {
        channels: 128,
        spectra_per_heap: 128,
        heaps: 2,
        out: out.clone(),
        ..Options::gpu_default()
    };
    let stages = std::cell::Cell::new(0u64);
    let on_gpu =
        demo::run(&options, Some(&gpu), &|_| stages.set(stages.get() + 1)).expect("the GPU chain runs");
    assert_eq!(stages.get(), demo::stage_count(true), "the GPU chain announces every stage once");
    println!("{}", demo::report(&on_gpu));
    assert!(on_gpu.checks_passed(), "a GPU stage disagrees with its CPU reference");
    assert!(demo::science_ok(&on_gpu));
    let on_cpu =
        demo::run(&Options { out: out.join("cpu"), ..options }, None, &|_| {}).expect("the CPU chain runs");
    assert_eq!(on_gpu.frb_peak, on_cpu.frb_peak);
    assert_eq!(on_gpu.image_peak, on_cpu.image_peak);
    for (g, c) in on_gpu.beam_power.iter().zip(&on_cpu.beam_power) {
        for (a, b) in g.iter().zip(c) {
            assert!((a - b).abs() <= 0.02 * b.abs().max(1e-9), "beam power {a} on the GPU, {b} on the CPU");
        }
    }
    let _ = std::fs::remove_dir_all(out);
}
