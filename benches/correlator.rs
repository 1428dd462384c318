//! `cargo bench --bench correlator`: X-engine throughput in useful TOPS
//! (`8 N (N + 1) / 2 P^2 C T` per launch) as a fraction of this GPU's s8 m16n8k32 ceiling
//! (from `ceilings.json`; run the ceilings bench first), and the streaming pipeline's
//! end-to-end rate including host-to-device transfers.
mod common;

use common::{median_ms, read_ceiling};
use criterion::{Criterion, Throughput};
use radio_kernels::correlator::{Correlator, CorrelatorConfig, Format, Order};
use radio_kernels::{launch_1d, DeviceBuffer, Gpu, PushKernelArg};
use std::time::{Duration, Instant};

const REPS: usize = 7;
const T: u32 = 65472; // the largest multiple of 64 with exact int32 sums for int8

fn fill_random(gpu: &Gpu, buffer: &mut DeviceBuffer<u8>, seed: u32) {
    let function = gpu.function("bench_fill_random").expect("bench_fill_random in the PTX");
    let words = (buffer.len() / 4) as u64;
    let mut launch = gpu.stream().launch_builder(&function);
    launch.arg(buffer.raw_mut()).arg(&words).arg(&seed);
    // SAFETY: matches `bench_fill_random(out, words, seed)`; the buffer holds `4 * words` bytes.
    unsafe { launch.launch(launch_1d(gpu.sm_count() * 8, 256, 0)) }.expect("fill launch");
}

fn main() {
    let gpu = match radio_kernels::open(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            println!("correlator bench: no GPU ({e}); nothing to measure");
            return;
        }
    };
    let peak = read_ceiling("mma s8 m16n8k32");
    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let mut group = criterion.benchmark_group("correlator");
    let mut rows = Vec::new();

    let cases = [
        (
            "N=512 P=2 C=16 int8 [t][c][s][p]",
            CorrelatorConfig {
                stations: 512,
                pols: 2,
                channels: 16,
                times: T,
                format: Format::Ci8,
                order: Order::StationPol,
            },
        ),
        (
            "N=512 P=2 C=16 int8 [t][c][p][s]",
            CorrelatorConfig {
                stations: 512,
                pols: 2,
                channels: 16,
                times: T,
                format: Format::Ci8,
                order: Order::PolStation,
            },
        ),
        (
            "N=512 P=2 C=16 int4 [t][c][s][p]",
            CorrelatorConfig {
                stations: 512,
                pols: 2,
                channels: 16,
                times: T,
                format: Format::Ci4,
                order: Order::StationPol,
            },
        ),
        (
            "N=64 P=2 C=1024 int8 [t][c][s][p]",
            CorrelatorConfig {
                stations: 64,
                pols: 2,
                channels: 1024,
                times: T,
                format: Format::Ci8,
                order: Order::StationPol,
            },
        ),
        (
            "N=2048 P=2 C=4 int8 [t][c][s][p]",
            CorrelatorConfig {
                stations: 2048,
                pols: 2,
                channels: 4,
                times: T,
                format: Format::Ci8,
                order: Order::StationPol,
            },
        ),
    ];
    for (label, config) in cases {
        let correlator = Correlator::new(&gpu, config).expect("valid configuration");
        let mut input = gpu.alloc::<u8>(config.input_bytes(), 0).expect("input");
        fill_random(&gpu, &mut input, 17);
        let mut output = gpu.alloc::<[i32; 2]>(config.output_len(), 0).expect("output");
        let ms = median_ms(&gpu, REPS, || correlator.correlate(&input, &mut output).expect("launch"));
        let tops = config.useful_ops() / ms / 1e9;
        rows.push((label.to_string(), ms, tops));
        group.throughput(Throughput::Elements(config.useful_ops() as u64));
        group.bench_function(label, |b| {
            b.iter_custom(|n| {
                common::event_time(&gpu, n, || correlator.correlate(&input, &mut output).expect("launch"))
            })
        });
    }
    group.finish();

    // Streaming: 8 host chunks of T = 8192 through pinned buffers, wall clock including the
    // host-to-device copies; and the copies alone for comparison.
    let chunk = CorrelatorConfig {
        stations: 512,
        pols: 2,
        channels: 16,
        times: 8192,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    let chunks = 8;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let host: Vec<u8> = (0..chunk.input_bytes() * chunks)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let parts: Vec<&[u8]> = host.chunks(chunk.input_bytes()).collect();
    let correlator = Correlator::new(&gpu, chunk).expect("valid configuration");
    correlator.integrate(&parts[..2]).expect("warm-up");
    let mut walls: Vec<f64> = (0..3)
        .map(|_| {
            let start = Instant::now();
            correlator.integrate(&parts).expect("integrate");
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    walls.sort_by(f64::total_cmp);
    let wall = walls[1];
    let ops = chunk.useful_ops() * chunks as f64;
    let mut device = gpu.alloc::<u8>(chunk.input_bytes(), 0).expect("alloc");
    let copy_ms = median_ms(&gpu, 3, || device.upload(parts[0]).expect("upload")) * chunks as f64;
    rows.push((format!("streaming N=512 C=16, {chunks} x T=8192, end to end"), wall, ops / wall / 1e9));

    println!("\nCorrelator on {} ({} SMs), medians of {REPS} launches:", gpu.name(), gpu.sm_count());
    for (label, ms, tops) in &rows {
        let fraction = peak
            .map(|p| format!("{:5.1}% of {p:.0}", 100.0 * tops / p))
            .unwrap_or_else(|| "no ceiling".into());
        println!("  {label:50} {ms:9.3} ms {tops:8.1} TOPS  {fraction}");
    }
    println!("  (streaming: host-to-device copies alone take {copy_ms:.1} ms from pageable memory)");
    criterion.final_summary();
}
