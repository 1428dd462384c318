//! `cargo bench --bench delay_beamformer`: delay-beamformer throughput in GB/s (input read
//! once plus output written once) as a fraction of this GPU's device-copy ceiling (from
//! `ceilings.json`; run the ceilings bench first), for 8, 16, 64 and 256 single-pol beams from
//! 64 dual-pol antennas, with dither (and 8 beams without, to show the cost of the states).
mod common;

use common::{fill_random, median_ms, read_ceiling};
use criterion::Throughput;
use radio_kernels::delay_beamformer::{Beam, DelayBeamformer, DelayBeamformerConfig};
use radio_kernels::Complex;

const REPS: usize = 21;

fn main() {
    let Some(gpu) = common::open_gpu("delay beamformer bench") else {
        return;
    };
    let copy = read_ceiling("device copy");
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("delay_beamformer");
    let mut rows = Vec::new();

    let case = |beams: u32, dither: bool| DelayBeamformerConfig {
        antennas: 64,
        pols: 2,
        channels: 512,
        first_channel: 1024,
        times: 4096,
        beams: (0..beams).map(|b| Beam { pol: b % 2, dither }).collect(),
    };
    let mut input = gpu.alloc::<Complex<i8>>(case(8, true).input_len(), 0).expect("input");
    fill_random(&gpu, input.borrow_mut(), 23);
    // (beams, dither).
    let all = [(8, true), (8, false), (16, true), (64, true), (256, true)];
    // DELAY_BF_CASES=0,4 runs only those rows (e.g. under a profiler).
    let chosen: Option<Vec<usize>> = std::env::var("DELAY_BF_CASES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    for (n, &(beams, dither)) in all.iter().enumerate() {
        if chosen.as_ref().is_some_and(|c| !c.contains(&n)) {
            continue;
        }
        let config = case(beams, dither);
        let beamformer = DelayBeamformer::new(&gpu, config.clone()).expect("valid configuration");
        let plan = beamformer.plan().clone();
        let n = config.steering_len();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let w: Vec<Complex<f32>> = (0..n).map(|_| Complex::new(0.02 * next(), 0.02 * next())).collect();
        let d: Vec<f32> = (0..n).map(|_| 4.0 * next()).collect();
        // Checked once here, so the timed launches do not wait for a download of w and d.
        let steering = beamformer.upload_steering(&w, &d).expect("finite steering");
        let mut dither_state = beamformer.dither_state(7, 0, 0).expect("dither states");
        let mut output = gpu.alloc::<Complex<i8>>(config.output_len(), 0).expect("output");
        let mut saturated = gpu.alloc::<u32>(beams as usize, 0).expect("counts");
        let mut run = || {
            beamformer
                .beamform_steered(&input, &steering, Some(&mut dither_state), &mut output, &mut saturated)
                .expect("launch")
        };
        let ms = median_ms(&gpu, REPS, &mut run);
        let label = format!("A=64 P=2 C=512 T=4096 B={beams}{}", if dither { " dither" } else { "" });
        rows.push((label.clone(), plan, config.bytes(), ms));
        group.throughput(Throughput::Bytes(config.bytes()));
        group.bench_function(&label, |b| b.iter_custom(|iters| common::event_time(&gpu, iters, &mut run)));
        output.download().expect("the launches ran");
    }
    group.finish();

    println!("\nDelay beamformer on {} ({} SMs), medians of {REPS} launches:", gpu.name(), gpu.sm_count());
    for (label, plan, bytes, ms) in &rows {
        let gbps = *bytes as f64 / ms / 1e6;
        let fraction = copy
            .map(|c| format!("{:5.1}% of {c:.0} GB/s copy", 100.0 * gbps / c))
            .unwrap_or_else(|| "no ceiling".into());
        println!(
            "  {label:43} {ms:8.3} ms {gbps:7.0} GB/s  {fraction}  [{} slots x{} samples, {} batches, {} groups of {} tiles]",
            plan.variant().slots(),
            plan.variant().times_per_thread(),
            plan.batches(),
            plan.groups(),
            plan.tiles_per_group()
        );
    }
    criterion.final_summary();
}
