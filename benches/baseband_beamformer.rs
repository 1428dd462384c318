//! `cargo bench --bench baseband_beamformer`: time per launch, real-time fraction (kernel
//! time over `T * 4096 / 2.4 GHz`) and useful TOPS (`8 * 2 * F * B * D * T`) as a fraction of
//! this GPU's s8 m16n8k32 ceiling, plus DRAM traffic (E read + J written) as a fraction of
//! the copy ceiling (from `ceilings.json`; run the ceilings bench first).
mod common;

use common::{fill_random, median_ms, read_ceiling};
use criterion::Throughput;
use radio_kernels::baseband_beamformer::{BasebandBeamformer, BeamformerConfig};
use radio_kernels::{Ci4, Complex, Shift};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REPS: usize = 9;
const T: u32 = 32768;

fn main() {
    let Some(gpu) = common::open_gpu("baseband beamformer bench") else {
        return;
    };
    let peak = read_ceiling("mma s8 m16n8k32");
    let copy = read_ceiling("device copy");
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("baseband_beamformer");
    let mut rows = Vec::new();
    let cases = [
        ("full CHORD D=512 B=96 F=16", BeamformerConfig::chord(T)),
        ("pathfinder D=64 B=16 F=128", BeamformerConfig::pathfinder(T)),
        ("D=512 B=128 F=16", BeamformerConfig { beams: 128, ..BeamformerConfig::chord(T) }),
        ("D=512 B=16 F=16", BeamformerConfig { beams: 16, ..BeamformerConfig::chord(T) }),
        ("D=1024 B=64 F=16", BeamformerConfig { dishes: 1024, beams: 64, ..BeamformerConfig::chord(T) }),
    ];
    let mut rng = StdRng::seed_from_u64(7);
    for (label, config) in cases {
        let weights: Vec<Complex<i8>> =
            (0..config.weights_len()).map(|_| Complex::new(rng.random(), rng.random())).collect();
        let shifts = vec![Shift::new(12).expect("shift"); config.shifts_len()];
        let beamformer = match BasebandBeamformer::new(&gpu, config, &weights, &shifts) {
            Ok(beamformer) => beamformer,
            Err(error) => {
                println!("{label}: skipped, {error}");
                continue;
            }
        };
        let mut e = gpu.alloc::<Ci4>(config.e_len(), 0).expect("E");
        fill_random(&gpu, e.borrow_mut(), 17);
        let mut j = gpu.alloc::<Ci4>(config.output_len(), 0).expect("J");
        if let Err(error) = beamformer.beamform(&e, &mut j).and_then(|_| gpu.synchronize()) {
            println!("{label}: skipped, {error}");
            continue;
        }
        let ms = median_ms(&gpu, REPS, || beamformer.beamform(&e, &mut j).expect("launch"));
        rows.push((label, config, ms));
        group.throughput(Throughput::Elements(config.useful_ops() as u64));
        group.bench_function(label, |b| {
            b.iter_custom(|n| {
                common::event_time(&gpu, n, || beamformer.beamform(&e, &mut j).expect("launch"))
            })
        });
    }
    group.finish();

    println!("\nbaseband beamformer on {} (T = {T} per launch, medians of {REPS})", gpu.name());
    println!(
        "{:<28} {:>10} {:>10} {:>8} {:>10} {:>8} {:>10}",
        "case", "time us", "real-time", "TOPS", "of s8 pk", "GB/s", "of copy"
    );
    for (label, config, ms) in rows {
        let tops = config.useful_ops() / ms / 1e9;
        let bytes = (config.e_len() + config.output_len()) as f64;
        let gbs = bytes / ms / 1e6;
        let fraction =
            |v: f64, c: Option<f64>| c.map_or("n/a".to_string(), |c| format!("{:.1}%", 100.0 * v / c));
        println!(
            "{:<28} {:>10.1} {:>9.2}% {:>8.0} {:>10} {:>8.0} {:>10}",
            label,
            ms * 1e3,
            100.0 * ms / 1e3 / config.real_time_s(),
            tops,
            fraction(tops, peak),
            gbs,
            fraction(gbs, copy)
        );
    }
}
