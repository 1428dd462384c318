//! `cargo bench --bench ceilings`: this GPU's device-copy and L2-read bandwidth, mma.sync
//! throughput per shape and, on Hopper, wgmma throughput: the ceilings every other benchmark
//! reports its fraction of.
//!
//! Timed with CUDA events around each launch; each figure is the median of `REPS` launches
//! after a warm-up, sized to run about 20 ms so launch overhead is negligible. The copy moves
//! 2 x 1 GiB (well past the 50-60 MB L2). Results go to
//! `$RADIO_KERNELS_BENCH_OUT/ceilings.json` (default `target/radio-kernels-bench/`), which
//! other benchmarks read, and to criterion for its usual statistics.
mod common;

use common::{median_ms, write_ceilings, Ceiling};
use criterion::Throughput;
use radio_kernels::gpu_shared::modules::{tools, KernelSpec};
use radio_kernels::summary::{self, CEILING_THREADS};
use radio_kernels::{DeviceBuffer, Gpu};
use std::time::Duration;

const REPS: usize = 21;

/// An mma shape: kernel name and operations (2 m n k) per warp-level instruction.
struct Shape {
    label: &'static str,
    kernel: &'static KernelSpec,
    ops_per_mma: u64,
}

const SHAPES: [Shape; 7] = [
    Shape { label: "s8 m16n8k32", kernel: &tools::CEILING_MMA_M16N8K32_S8, ops_per_mma: 2 * 16 * 8 * 32 },
    Shape { label: "s8 m8n8k16", kernel: &tools::CEILING_MMA_M8N8K16_S8, ops_per_mma: 2 * 8 * 8 * 16 },
    Shape { label: "s4 m16n8k64", kernel: &tools::CEILING_MMA_M16N8K64_S4, ops_per_mma: 2 * 16 * 8 * 64 },
    Shape {
        label: "f16 m16n8k16 f16-acc",
        kernel: &tools::CEILING_MMA_M16N8K16_F16,
        ops_per_mma: 2 * 16 * 8 * 16,
    },
    Shape {
        label: "f16 m16n8k16 f32-acc",
        kernel: &tools::CEILING_MMA_M16N8K16_F16_F32,
        ops_per_mma: 2 * 16 * 8 * 16,
    },
    Shape { label: "f16 m16n8k8", kernel: &tools::CEILING_MMA_M16N8K8_F16, ops_per_mma: 2 * 16 * 8 * 8 },
    // Dense-equivalent operations: the sparse MMA computes a 16x16 by 16x8 product.
    Shape {
        label: "f16 mma.sp m16n8k16",
        kernel: &tools::CEILING_MMA_SP_M16N8K16_F16,
        ops_per_mma: 2 * 16 * 8 * 16,
    },
];

fn launch_mma(gpu: &Gpu, kernel: &'static KernelSpec, iterations: u32, out: &mut DeviceBuffer<u32>) {
    summary::launch_mma(gpu, kernel, iterations, out).expect("mma ceiling launch");
}

fn launch_copy(gpu: &Gpu, src: &DeviceBuffer<u32>, dst: &mut DeviceBuffer<u32>) {
    summary::launch_copy(gpu, src, dst).expect("copy ceiling launch");
}

fn main() {
    let Some(gpu) = common::open_gpu("ceilings") else {
        return;
    };
    let mut criterion = common::criterion_with(Duration::from_millis(300), Duration::from_secs(1));
    let mut ceilings = Vec::new();

    // Device copy: bytes read plus bytes written.
    let words = 1usize << 28; // 1 GiB
    let src = gpu.upload(&(0..words as u32).collect::<Vec<u32>>()).expect("upload");
    let mut dst = gpu.alloc::<u32>(words, 0x5a).expect("alloc");
    let bytes = 2.0 * (words * 4) as f64;
    let ms = median_ms(&gpu, REPS, || launch_copy(&gpu, &src, &mut dst));
    ceilings.push(Ceiling {
        name: "device copy".into(),
        unit: "GB/s",
        value: bytes / ms / 1e6,
        median_ms: ms,
    });
    let mut group = criterion.benchmark_group("ceilings");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("device copy", |b| {
        b.iter_custom(|n| common::event_time(&gpu, n, || launch_copy(&gpu, &src, &mut dst)))
    });
    drop((src, dst));

    // A word per thread of the L2 read and mma ceiling launches (16 blocks per SM).
    let blocks = summary::ceiling_blocks(&gpu);
    let mut out = gpu.alloc::<u32>((blocks * CEILING_THREADS) as usize, 0).expect("alloc");

    // L2-to-SM reads: 16 MiB (inside the 50-60 MB L2) read `passes` times per launch.
    let l2_words = 1usize << 22;
    let l2_src = gpu.upload(&(0..l2_words as u32).collect::<Vec<u32>>()).expect("upload");
    let passes = 1000;
    let l2_read = |out: &mut DeviceBuffer<u32>| {
        summary::launch_l2_read(&gpu, &l2_src, passes, out).expect("L2 read ceiling launch")
    };
    let bytes = passes as f64 * (l2_words * 4) as f64;
    let ms = median_ms(&gpu, REPS, || l2_read(&mut out));
    ceilings.push(Ceiling { name: "L2 read".into(), unit: "GB/s", value: bytes / ms / 1e6, median_ms: ms });
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("L2 read", |b| b.iter_custom(|n| common::event_time(&gpu, n, || l2_read(&mut out))));
    drop(l2_src);

    // mma.sync throughput per shape: 8 warps per block, 16 blocks per SM.
    for shape in &SHAPES {
        // Calibrate to about 20 ms per launch.
        let iterations = summary::mma_iterations(&gpu, shape.kernel, &mut out).expect("probe");
        let ops = summary::mma_ops(&gpu, iterations, shape.ops_per_mma);
        let ms = median_ms(&gpu, REPS, || launch_mma(&gpu, shape.kernel, iterations, &mut out));
        ceilings.push(Ceiling {
            name: format!("mma {}", shape.label),
            unit: "TOPS",
            value: ops / ms / 1e9,
            median_ms: ms,
        });
        group.throughput(Throughput::Elements(ops as u64));
        group.bench_function(shape.label, |b| {
            b.iter_custom(|n| {
                common::event_time(&gpu, n, || launch_mma(&gpu, shape.kernel, iterations, &mut out))
            })
        });
    }
    group.finish();
    // Every launch above wrote `out`; reading it back surfaces any asynchronous error.
    out.download().expect("ceiling kernels ran");

    // wgmma throughput (Hopper only): the ceilings of the project's wgmma kernels.
    for (label, kernel, ops) in summary::WGMMA_CEILINGS {
        if let Some((tops, ms)) = summary::wgmma_ceiling(&gpu, kernel, ops, REPS).expect("wgmma ceiling") {
            ceilings.push(Ceiling {
                name: format!("wgmma {label}"),
                unit: "TOPS",
                value: tops,
                median_ms: ms,
            });
        }
    }

    let path = write_ceilings(&gpu, &ceilings);
    println!("\nCeilings on {} ({} SMs), medians of {REPS} launches:", gpu.name(), gpu.sm_count());
    for c in &ceilings {
        println!("  {:28} {:10.1} {:5}  ({:.3} ms)", c.name, c.value, c.unit, c.median_ms);
    }
    println!("written to {}", path.display());
    criterion.final_summary();
}
