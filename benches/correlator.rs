//! `cargo bench --bench correlator`: X-engine throughput in useful TOPS
//! (`8 N (N + 1) / 2 P^2 C T` per launch) as a fraction of this GPU's matching ceiling, s8
//! m16n8k32 `mma.sync` or, for the wgmma kernels, s8 m64n256k32 `wgmma` (from `ceilings.json`;
//! run the ceilings bench first), and the streaming pipeline's
//! end-to-end rate including host-to-device transfers. On Hopper the int8 cases run the
//! sm_90a `wgmma` kernel; the rows marked `sm_80` run the `mma.sync` kernel (the path Ampere
//! GPUs take) on the same GPU for comparison. `RADIO_KERNELS_BENCH_ONLY=<row label>` (e.g.
//! `N=64 P=2 C=1024 int8 [t][c][s][p]`) times that row alone, without the streaming rows.
mod common;

use common::{fill_random, median_ms, read_ceiling};
use criterion::Throughput;
use radio_kernels::correlator::{Correlator, CorrelatorConfig, Format, Order};
use radio_kernels::Complex;
use std::time::Instant;

const REPS: usize = 7;
const T: u32 = 65472; // the largest multiple of 64 with exact int32 sums for int8

const STREAMED: [CorrelatorConfig; 2] = [
    CorrelatorConfig {
        stations: 512,
        pols: 2,
        channels: 16,
        times: 8192,
        format: Format::Ci8,
        order: Order::StationPol,
    },
    CorrelatorConfig {
        stations: 2048,
        pols: 2,
        channels: 4,
        times: 8192,
        format: Format::Ci8,
        order: Order::StationPol,
    },
];

fn main() {
    let Some(gpu) = common::open_gpu("correlator bench") else {
        return;
    };
    let peak = read_ceiling("mma s8 m16n8k32");
    // The wgmma kernels' matching ceiling (Hopper; `ceilings.json` has it from the ceilings bench).
    let wgmma_peak = read_ceiling("wgmma s8 m64n256k32");
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("correlator");
    let mut rows = Vec::new();
    let mut streaming = Vec::new();

    let dual_pol = |stations, channels, format, order| CorrelatorConfig {
        stations,
        pols: 2,
        channels,
        times: T,
        format,
        order,
    };
    let hopper = gpu.wgmma_enabled();
    let cases = [
        ("N=512 P=2 C=16 int8 [t][c][s][p]", dual_pol(512, 16, Format::Ci8, Order::StationPol), true),
        ("N=512 P=2 C=16 int8 [t][c][p][s]", dual_pol(512, 16, Format::Ci8, Order::PolStation), true),
        ("N=512 P=2 C=16 int4 [t][c][s][p]", dual_pol(512, 16, Format::Ci4, Order::StationPol), true),
        ("N=64 P=2 C=1024 int8 [t][c][s][p]", dual_pol(64, 1024, Format::Ci8, Order::StationPol), true),
        ("N=2048 P=2 C=4 int8 [t][c][s][p]", dual_pol(2048, 4, Format::Ci8, Order::StationPol), true),
        ("N=512 P=2 C=16 int8 [t][c][s][p] sm_80", dual_pol(512, 16, Format::Ci8, Order::StationPol), false),
        (
            "N=64 P=2 C=1024 int8 [t][c][s][p] sm_80",
            dual_pol(64, 1024, Format::Ci8, Order::StationPol),
            false,
        ),
    ];
    // `RADIO_KERNELS_BENCH_ONLY=label`: only that row, no streaming (quick comparisons).
    let only = std::env::var("RADIO_KERNELS_BENCH_ONLY").ok();
    for (label, config, wgmma) in cases {
        if only.as_deref().is_some_and(|only| label != only) {
            continue;
        }
        if !wgmma && !hopper {
            continue; // the main rows already ran the sm_80 kernel
        }
        let mut correlator = Correlator::new(&gpu, config).expect("valid configuration");
        if !wgmma {
            let ampere = config.kernel(false).expect("valid configuration");
            correlator = correlator.with_kernel(&ampere.spec).expect("the sm_80 kernel fits");
        }
        let label = match correlator.wgmma_kind() {
            Some(kind) => format!("{label} wgmma {kind:?}"),
            None => label.to_string(),
        };
        let mut input = gpu.alloc::<u8>(config.input_bytes(), 0).expect("input");
        fill_random(&gpu, input.borrow_mut(), 17);
        let mut output = gpu.alloc::<Complex<i32>>(config.output_len(), 0).expect("output");
        let ms = median_ms(&gpu, REPS, || correlator.correlate(&input, &mut output).expect("launch"));
        let tops = config.useful_ops() / ms / 1e9;
        rows.push((label.clone(), ms, tops));
        group.throughput(Throughput::Elements(config.useful_ops() as u64));
        group.bench_function(&label, |b| {
            b.iter_custom(|n| {
                common::event_time(&gpu, n, || correlator.correlate(&input, &mut output).expect("launch"))
            })
        });
    }
    group.finish();

    // Streaming: chunks written straight into the integration's pinned buffers (as a packet
    // receiver would; the data is written once and reused), timed by the host clock from the
    // first submit to the last kernel's end, next to the kernel alone and the pinned upload
    // alone. The pipeline is as fast as the slower of the two when the overlap works.
    let chunks = 8;
    let streamed = if only.is_some() { &[][..] } else { &STREAMED[..] };
    for &chunk in streamed {
        let correlator = Correlator::new(&gpu, chunk).expect("valid configuration");
        let mut integration = correlator.integration().expect("pinned buffers");
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2 {
            for byte in integration.buffer().expect("buffer").iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *byte = state as u8;
            }
            integration.submit().expect("submit");
        }
        integration.finish().expect("warm-up");
        let mut walls: Vec<f64> = (0..3)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..chunks {
                    integration.buffer().expect("buffer");
                    integration.submit().expect("submit");
                }
                gpu.synchronize().expect("pipeline");
                let wall = start.elapsed().as_secs_f64() * 1e3 / chunks as f64;
                integration.finish().expect("finish"); // result download, not timed
                wall
            })
            .collect();
        walls.sort_by(f64::total_cmp);
        let wall = walls[1];
        let mut device = gpu.alloc::<u8>(chunk.input_bytes(), 0).expect("alloc");
        let mut accumulator = gpu.alloc::<Complex<i64>>(chunk.output_len(), 0).expect("alloc");
        let kernel = median_ms(&gpu, 5, || correlator.accumulate(&device, &mut accumulator).expect("launch"));
        let copy = {
            let mut times: Vec<f64> = (0..5)
                .map(|_| {
                    let start = Instant::now();
                    device.upload(integration.buffer().expect("buffer")).expect("pinned upload");
                    gpu.synchronize().expect("upload");
                    start.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            times.sort_by(f64::total_cmp);
            times[2]
        };
        let gbps = chunk.input_bytes() as f64 / copy / 1e6;
        streaming.push(format!(
            "  streaming N={} C={} T={} x {chunks}: {wall:.2} ms/chunk end to end ({:.1} TOPS); kernel {kernel:.2} ms, \
             pinned upload {copy:.2} ms ({gbps:.1} GB/s): overlap hides {:.0}% of the shorter",
            chunk.stations,
            chunk.channels,
            chunk.times,
            chunk.useful_ops() / wall / 1e9,
            100.0 * ((kernel + copy - wall) / kernel.min(copy)).clamp(0.0, 1.0),
        ));
    }

    println!("\nCorrelator on {} ({} SMs), medians of {REPS} launches:", gpu.name(), gpu.sm_count());
    for (label, ms, tops) in &rows {
        let (peak, name) = match wgmma_peak {
            Some(p) if label.contains(" wgmma ") => (Some(p), "wgmma s8"),
            _ => (peak, "mma.sync s8"),
        };
        let fraction = peak
            .map(|p| format!("{:5.1}% of {name} {p:.0}", 100.0 * tops / p))
            .unwrap_or_else(|| "no ceiling".into());
        println!("  {label:50} {ms:9.3} ms {tops:8.1} TOPS  {fraction}");
    }
    for line in &streaming {
        println!("{line}");
    }
    criterion.final_summary();
}
