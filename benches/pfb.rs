//! `cargo bench --bench pfb`: PFB channelizer, the three-kernel path (FIR, cuFFT C2C,
//! post-processing) for n in {1024, 4096, 32768} and the fused path (the cluster kernel) at
//! n = 1024 on sm_90, 16 taps, 10-bit input, int8 output, on device-resident random input of about 2^27 samples
//! per polarisation per launch; the fused rows give their speed-up over the three-kernel
//! path (kernel times and whole `run` calls).
//! Reports Msample/s per polarisation, each kernel's bandwidth (bytes it must read and write
//! once) as a fraction of this GPU's device-copy ceiling (from `ceilings.json`; run the
//! ceilings bench first), and bytes moved per input sample against the minimum (input read
//! once, output written once).
mod common;

use common::{fill_random, median_ms, read_ceiling};
use criterion::Throughput;
use radio_kernels::pfb::{cluster_kernel_applies, Channelizer, ChannelizerConfig, OutputFormat, PfbPath};

const REPS: usize = 21;

fn main() {
    let Some(gpu) = common::open_gpu("pfb bench") else {
        return;
    };
    let copy = read_ceiling("device copy");
    let mut criterion = common::kernel_criterion();
    let mut group = criterion.benchmark_group("pfb");
    let mut rows = Vec::new();
    let mut fused_rows = Vec::new();
    for channels in [1024u32, 4096, 32768] {
        let spectra_per_heap = 256;
        let heaps = (1u32 << 27) / (2 * channels * spectra_per_heap);
        let config = ChannelizerConfig {
            channels,
            taps: 16,
            bits: 10,
            spectra_per_heap,
            heaps_per_chunk: heaps,
            chunk_samples: 1 << 16,
            packet_samples: 4096,
            max_delay: 4096,
            output: OutputFormat::Ci8,
        };
        let three = PfbPath::ThreeKernel.kernel(&gpu, &config).expect("a FIR for 16 taps");
        let mut ch = match Channelizer::with_kernel(&gpu, config.clone(), None, three) {
            Ok(ch) => ch,
            Err(e) => {
                println!("pfb bench: cannot build the channelizer ({e}); nothing to measure");
                return;
            }
        };
        ch.fill_input_with(|buffer| fill_random(&gpu, buffer, 17)).expect("fill");
        // Random words include the 10-bit extremes; a gain of 1/64 keeps the output in range.
        ch.set_gains(&vec![radio_kernels::Complex::new(1.0 / 64.0, 0.0); 2 * channels as usize])
            .expect("gains");
        ch.run().expect("first run");
        let samples = 2 * channels as u64 * config.spectra_per_chunk(); // per polarisation
        let all = median_ms(&gpu, REPS, || ch.run().expect("run"));
        let fir = median_ms(&gpu, REPS, || ch.run_fir().expect("fir"));
        let fft = median_ms(&gpu, REPS, || ch.run_fft().expect("fft"));
        let post = median_ms(&gpu, REPS, || ch.run_post().expect("post"));
        let label = format!("n={channels} T=16 10-bit");
        group.throughput(Throughput::Elements(samples));
        group.bench_function(&label, |b| {
            b.iter_custom(|iters| common::event_time(&gpu, iters, || ch.run().expect("run")))
        });
        ch.output().download().expect("the launches ran");
        let three_output = ch.output().download().expect("output");
        rows.push((label, samples, ch.kernel_bytes(), config.output_bytes() as u64, [all, fir, fft, post]));
        drop(ch);
        // The fused path: the cluster kernel, where it applies (n = 1024 on sm_90).
        if cluster_kernel_applies(&gpu, &config) {
            let cluster = PfbPath::Fused.kernel(&gpu, &config).expect("the cluster kernel");
            let mut ch = Channelizer::with_kernel(&gpu, config.clone(), None, cluster).expect("fused");
            ch.fill_input_with(|buffer| fill_random(&gpu, buffer, 17)).expect("fill");
            ch.set_gains(&vec![radio_kernels::Complex::new(1.0 / 64.0, 0.0); 2 * channels as usize])
                .expect("gains");
            ch.run().expect("first fused run");
            let out = ch.output().download().expect("fused output");
            let close =
                out.iter().zip(&three_output).all(|(&a, &b)| (a as i8 as i32 - b as i8 as i32).abs() <= 1);
            let equal = out.iter().zip(&three_output).filter(|(a, b)| a == b).count();
            let f_all = median_ms(&gpu, REPS, || ch.run().expect("run"));
            let f_kernel = median_ms(&gpu, REPS, || ch.run_fused().expect("fused"));
            if let Some(clusters) = ch.resident_clusters() {
                println!("cluster kernel: {clusters} clusters of 4 blocks resident");
            }
            let label = format!("fused (cluster) n={channels} T=16 10-bit");
            group.throughput(Throughput::Elements(samples));
            group.bench_function(&label, |b| {
                b.iter_custom(|iters| common::event_time(&gpu, iters, || ch.run_fused().expect("fused")))
            });
            fused_rows.push((
                format!("n={channels} cluster"),
                samples,
                ch.fused_bytes(),
                f_all,
                f_kernel,
                all,
                fir + fft + post,
                close,
                equal as f64 / out.len() as f64,
            ));
        }
    }
    group.finish();

    println!(
        "\nPFB channelizer on {} ({} SMs), medians of {REPS} launches, ~2^27 samples per pol:",
        gpu.name(),
        gpu.sm_count()
    );
    let fraction = |bytes: u64, ms: f64| {
        let gbps = bytes as f64 / ms / 1e6;
        match copy {
            Some(c) => format!("{gbps:6.0} GB/s {:5.1}%", 100.0 * gbps / c),
            None => format!("{gbps:6.0} GB/s (no ceiling)"),
        }
    };
    for (label, samples, (b_fir, b_fft, b_post), out_bytes, [all, fir, fft, post]) in &rows {
        let msps = *samples as f64 / all / 1e3;
        let total = b_fir + b_fft + b_post;
        let minimum = 2 * samples * 10 / 8 + out_bytes;
        println!(
            "  {label}: all {all:.3} ms = {msps:.0} Msample/s per pol; {:.2} B/sample moved vs {:.2} minimum ({:.1}x); \
             total {}",
            total as f64 / (2 * samples) as f64,
            minimum as f64 / (2 * samples) as f64,
            total as f64 / minimum as f64,
            fraction(total, *all)
        );
        println!("    FIR  {fir:.3} ms  {}", fraction(*b_fir, *fir));
        println!("    FFT  {fft:.3} ms  {}", fraction(*b_fft, *fft));
        println!("    post {post:.3} ms  {}", fraction(*b_post, *post));
    }
    println!("\nFused kernel (same input, gains and GPU; ratios against the three-kernel rows above):");
    for (label, samples, bytes, all, kernel, three_all, three_sum, close, equal) in &fused_rows {
        println!(
            "  {label}: run {all:.3} ms = {:.0} Msample/s per pol ({:.2}x the three-kernel run); kernel \
             {kernel:.3} ms = {:.0} Msample/s per pol, {:.1} Gsample/s both pols ({:.2}x the three kernels' sum \
             {three_sum:.3} ms); {} moved once; output within one LSB of the three-kernel path: {close} \
             ({:.3}% of bytes equal)",
            *samples as f64 / all / 1e3,
            three_all / all,
            *samples as f64 / kernel / 1e3,
            2.0 * *samples as f64 / kernel / 1e6,
            three_sum / kernel,
            fraction(*bytes, *kernel),
            100.0 * equal
        );
    }
    criterion.final_summary();
}
