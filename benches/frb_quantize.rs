//! `cargo bench --bench frb_quantize`: the FRB beamformer's third kernel (the network quantiser),
//! transpose + quantise of one second of J for full CHORD (F = 256, 917 slow samples, 5760
//! beams) to U8 and U4 rows. Reports the median time (and real-time fraction) and the bytes
//! the kernel must move (J read once, codes and per-(f, beta) scale and offset) as a fraction of
//! this GPU's device-copy ceiling (`ceilings.json`; run the ceilings bench first).
mod common;

use common::{median_ms, read_ceiling};
use criterion::Throughput;
use radio_kernels::frb_beamformer::quantize::{Format, QuantizeConfig, Quantizer};

const REPS: usize = 9;

fn main() {
    let Some(gpu) = common::open_gpu("FRB quantise bench") else {
        return;
    };
    let copy = read_ceiling("device copy");
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("frb_quantize");
    let mut rows = Vec::new();
    for (label, format) in [("full CHORD U8", Format::U8), ("full CHORD U4", Format::U4)] {
        let config = QuantizeConfig { channels: 256, times: 917, beams: 5760, format };
        let q = Quantizer::new(&gpu, config).expect("quantizer");
        // J in [0, 2) (valid f16 bits), scale 100: codes over the whole U8 range, U4 clips.
        let j = radio_kernels::summary::random_intensities(config.input_len(), 0x9e37_79b9);
        let j = gpu.upload(&j).expect("J");
        let scale = gpu.upload(&vec![100.0f32; config.params_len()]).expect("scale");
        let offset = gpu.upload(&vec![0.0f32; config.params_len()]).expect("offset");
        let mut out = gpu.alloc::<u8>(config.output_len(), 0).expect("out");
        let mut sat = gpu.alloc::<u32>(config.params_len(), 0).expect("counts");
        let ms =
            median_ms(&gpu, REPS, || q.quantize(&j, &scale, &offset, &mut out, &mut sat).expect("launch"));
        rows.push((label, config, ms));
        group.throughput(Throughput::Bytes(config.bytes_moved() as u64));
        group.sample_size(10);
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                common::event_time(&gpu, iters, || {
                    q.quantize(&j, &scale, &offset, &mut out, &mut sat).expect("launch")
                })
            })
        });
    }
    group.finish();

    println!(
        "\nFRB quantise (J -> Q[f][beta][tbar]) on {}, one second of data per launch, medians of {REPS}:",
        gpu.name()
    );
    println!(
        "{:<16} {:>9} {:>10} {:>10} {:>9} {:>10}",
        "case", "ms", "real time", "MB moved", "GB/s", "of copy"
    );
    for (label, config, ms) in rows {
        let gbps = config.bytes_moved() as f64 / ms / 1e6;
        println!(
            "{:<16} {:>9.3} {:>9.3}% {:>10.1} {:>9.0} {:>10}",
            label,
            ms,
            ms / 10.0,
            config.bytes_moved() as f64 / 1e6,
            gbps,
            copy.map_or("n/a".into(), |c| format!("{:.1}%", 100.0 * gbps / c))
        );
    }
    criterion.final_summary();
}
