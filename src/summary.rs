//! `radio-kernels bench`: the headline configuration of each kernel family in BENCHMARKS.md,
//! measured on this GPU (medians of CUDA-event-timed launches on device-filled random data),
//! each as a fraction of the matching ceiling measured in the same run. A quick check: the
//! criterion benches (`cargo bench`, the source of BENCHMARKS.md) run longer and cover more
//! configurations; on a GPU that has just started, clocks may still be ramping up here.
use crate::baseband_beamformer::{BasebandBeamformer, BeamformerConfig};
use crate::correlator::{Correlator, CorrelatorConfig, Format, Order};
use crate::delay_beamformer::{Beam, DelayBeamformer, DelayBeamformerConfig};
use crate::frb_beamformer::resample::{FusedResampler, ResampleConfig, Resampler};
use crate::frb_beamformer::{FrbBeamformer, FrbConfig};
use crate::pfb::{Channelizer, ChannelizerConfig, OutputFormat};
use crate::{
    launch_1d, Ci4, Complex, CudaFunction, DeviceBuffer, DeviceBufferMut, DriverContext, Gpu, PushKernelArg,
    Result, Shift,
};
use half::f16;
use radio_kernels_gpu::ceilings_hopper::{
    OPS_PER_ITERATION as WGMMA_CEILING_OPS_PER_ITERATION, SHARED_BYTES as WGMMA_CEILING_SHARED,
    THREADS as WGMMA_CEILING_THREADS,
};
use radio_kernels_gpu::modules::{tools, KernelSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Launches per median.
const REPS: usize = 5;

/// Fills `buffer` with random bytes on the device (kernel `bench_fill_random`): whole
/// 32-bit words, so a trailing part of a word is left as it was.
pub fn fill_random<T: bytemuck::Pod>(gpu: &Gpu, mut buffer: DeviceBufferMut<'_, T>, seed: u32) -> Result<()> {
    gpu.check_owner(&buffer, "buffer to fill")?;
    let function = gpu.kernel(&tools::BENCH_FILL_RANDOM)?;
    let words = (buffer.len() * std::mem::size_of::<T>() / 4) as u64;
    let mut launch = gpu.stream().launch_builder(&function);
    // SAFETY: the allocation is only passed to the kernel, never replaced.
    launch.arg(unsafe { buffer.raw_mut() }).arg(&words).arg(&seed);
    // SAFETY: matches `bench_fill_random(out, words, seed)`; the buffer holds at least
    // `4 * words` bytes.
    unsafe { launch.launch(launch_1d(gpu.sm_count() * 8, 256, 0)) }
        .during("filling a buffer with random bytes")?;
    Ok(())
}

/// Median over `reps` launches of the GPU time (ms) of `launch`, after one warm-up launch.
pub fn median_ms(gpu: &Gpu, reps: usize, mut launch: impl FnMut() -> Result<()>) -> Result<f64> {
    if reps == 0 {
        return Err(crate::Error::InvalidConfig("a median needs at least one launch (reps = 0)".into()));
    }
    let timer = gpu.timer()?;
    launch()?;
    gpu.synchronize()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        timer.start()?;
        launch()?;
        times.push(timer.stop()? as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// `len` FRB intensities in [0, 2) (valid, positive f16), from a xorshift stream.
pub fn random_intensities(len: usize, seed: u32) -> Vec<f16> {
    let mut state = seed.max(1);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            f16::from_bits((state & 0x3fff) as u16)
        })
        .collect()
}

/// One line of the summary.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// What was measured: a ceiling or a kernel at its headline configuration.
    pub name: String,
    /// The median GPU time of one launch, milliseconds.
    pub ms: f64,
    /// The figure of merit, in words (rate, fraction of the matching ceiling, peer's figure).
    pub result: String,
}

impl Row {
    /// The row as `radio-kernels bench` prints it: name, time and result in columns.
    pub fn line(&self) -> String {
        format!("  {:<44} {:>10.3} ms  {}", self.name, self.ms, self.result)
    }
}

/// Threads per block of the ceiling kernels.
pub const CEILING_THREADS: u32 = 256;
/// Independent accumulator chains per warp in the `ceiling_mma_*` kernels.
pub const CEILING_CHAINS: u64 = 8;

/// Only the ceiling kernels of one family (`prefix`), which share one signature, may be
/// launched by name: any other kernel would read its arguments differently.
fn check_ceiling_name(kernel: &KernelSpec, prefix: &str) -> Result<()> {
    if kernel.family == radio_kernels_gpu::modules::Family::Tools && kernel.name.starts_with(prefix) {
        Ok(())
    } else {
        Err(crate::Error::InvalidConfig(format!("`{}` is not a `{prefix}*` ceiling kernel", kernel.name)))
    }
}

/// Blocks of a ceiling launch: 16 per SM.
pub fn ceiling_blocks(gpu: &Gpu) -> u32 {
    gpu.sm_count() * 16
}

/// A ceiling kernel's output holds a word per thread of [`ceiling_blocks`] x
/// [`CEILING_THREADS`].
fn check_word_per_thread(gpu: &Gpu, out: &DeviceBuffer<u32>) -> Result<()> {
    gpu.check_owner(out, "ceiling output")?;
    let threads = (ceiling_blocks(gpu) * CEILING_THREADS) as usize;
    if out.len() < threads {
        return Err(crate::Error::ShapeMismatch {
            what: "ceiling output (a word per thread)",
            expected: threads,
            actual: out.len(),
        });
    }
    Ok(())
}

/// One launch of `ceiling_mma_*` kernel `kernel`: `iterations` rounds of [`CEILING_CHAINS`]
/// MMAs per warp, one result word per thread into `out`.
pub fn launch_mma(
    gpu: &Gpu,
    kernel: &'static KernelSpec,
    iterations: u32,
    out: &mut DeviceBuffer<u32>,
) -> Result<()> {
    check_ceiling_name(kernel, "ceiling_mma_")?;
    let function = gpu.kernel(kernel)?;
    let blocks = ceiling_blocks(gpu);
    check_word_per_thread(gpu, out)?;
    let mut launch = gpu.stream().launch_builder(&function);
    // SAFETY: the allocation is passed to the kernel, never replaced.
    launch.arg(&iterations).arg(unsafe { out.raw_mut() });
    // SAFETY: matches `ceiling_mma_*(iterations, out)`; `out` holds a word per thread.
    unsafe { launch.launch(launch_1d(blocks, CEILING_THREADS, 0)) }
        .during("launching an mma ceiling kernel")?;
    Ok(())
}

/// One launch of `ceiling_copy`: `src` to `dst` (equal lengths, a multiple of 4 words).
pub fn launch_copy(gpu: &Gpu, src: &DeviceBuffer<u32>, dst: &mut DeviceBuffer<u32>) -> Result<()> {
    if dst.len() != src.len() || !src.len().is_multiple_of(4) {
        return Err(crate::Error::ShapeMismatch {
            what: "ceiling copy destination",
            expected: src.len(),
            actual: dst.len(),
        });
    }
    gpu.check_owner(src, "ceiling copy source")?;
    gpu.check_owner(dst, "ceiling copy destination")?;
    let function = gpu.kernel(&tools::CEILING_COPY)?;
    let vectors = (src.len() / 4) as u64;
    let mut launch = gpu.stream().launch_builder(&function);
    // SAFETY: the allocation is passed to the kernel, never replaced.
    launch.arg(src.raw()).arg(unsafe { dst.raw_mut() }).arg(&vectors);
    // SAFETY: matches `ceiling_copy(src, dst, n_vec)`; both buffers hold `4 * n_vec` words.
    unsafe { launch.launch(launch_1d(ceiling_blocks(gpu), CEILING_THREADS, 0)) }
        .during("launching the copy ceiling")?;
    Ok(())
}

/// One launch of `ceiling_l2_read`: `passes` reads of `src` (a multiple of 4 words, at
/// most 2^32 vectors) from L2, a word per thread of [`ceiling_blocks`] x [`CEILING_THREADS`]
/// into `out`.
pub fn launch_l2_read(
    gpu: &Gpu,
    src: &DeviceBuffer<u32>,
    passes: u32,
    out: &mut DeviceBuffer<u32>,
) -> Result<()> {
    let vectors = u32::try_from(src.len() / 4).ok().filter(|_| src.len().is_multiple_of(4));
    let Some(vectors) = vectors else {
        return Err(crate::Error::InvalidConfig(format!(
            "L2 read ceiling source of {} words: not a multiple of 4 words below 2^34",
            src.len()
        )));
    };
    gpu.check_owner(src, "L2 read ceiling source")?;
    check_word_per_thread(gpu, out)?;
    let function = gpu.kernel(&tools::CEILING_L2_READ)?;
    let mut launch = gpu.stream().launch_builder(&function);
    // SAFETY: the allocation is passed to the kernel, never replaced.
    launch.arg(src.raw()).arg(&vectors).arg(&passes).arg(unsafe { out.raw_mut() });
    // SAFETY: matches `ceiling_l2_read(src, n_vec, passes, out)`; `src` holds `4 n_vec` words
    // and `out` a word per thread.
    unsafe { launch.launch(launch_1d(ceiling_blocks(gpu), CEILING_THREADS, 0)) }
        .during("launching the L2 read ceiling")?;
    Ok(())
}

/// The wgmma ceilings (label, kernel, ops 2 m n k per wgmma): s8, and f16 with f32
/// accumulate, both at m64n256 with A and B in shared memory.
pub const WGMMA_CEILINGS: [(&str, &KernelSpec, u64); 2] = [
    ("s8 m64n256k32", &tools::CEILING_WGMMA_M64N256K32_S8, 2 * 64 * 256 * 32),
    ("f16 m64n256k16 f32-acc", &tools::CEILING_WGMMA_M64N256K16_F16_F32, 2 * 64 * 256 * 16),
];

/// A wgmma ceiling kernel of the sm_90a module (`None` where the GPU has none) and its grid:
/// as many one-warpgroup blocks as fit on every SM at once.
fn wgmma_ceiling_grid(gpu: &Gpu, kernel: &'static KernelSpec) -> Result<Option<(CudaFunction, u32)>> {
    check_ceiling_name(kernel, "ceiling_wgmma_")?;
    if !gpu.wgmma_enabled() {
        return Ok(None);
    }
    let function = gpu.kernel(kernel)?;
    let per_sm = function
        .occupancy_max_active_blocks_per_multiprocessor(
            WGMMA_CEILING_THREADS,
            WGMMA_CEILING_SHARED as usize,
            None,
        )
        .during("querying a wgmma ceiling's occupancy")?;
    Ok(Some((function, per_sm.max(1) * gpu.sm_count())))
}

/// One launch of `ceiling_wgmma_*` kernel `function` on `blocks` blocks: `iterations`
/// iterations per warpgroup, one word per thread into `out`.
fn launch_wgmma_ceiling(
    gpu: &Gpu,
    function: &CudaFunction,
    blocks: u32,
    iterations: u32,
    out: &mut DeviceBuffer<u32>,
) -> Result<()> {
    if out.len() < (blocks * WGMMA_CEILING_THREADS) as usize {
        return Err(crate::Error::ShapeMismatch {
            what: "wgmma ceiling output (a word per thread)",
            expected: (blocks * WGMMA_CEILING_THREADS) as usize,
            actual: out.len(),
        });
    }
    let mut launch = gpu.stream().launch_builder(function);
    // SAFETY: the allocation is passed to the kernel, never replaced.
    launch.arg(&iterations).arg(unsafe { out.raw_mut() });
    // SAFETY: matches `ceiling_wgmma_*(iterations, out)`: one warpgroup per block, its shared
    // memory given, `out` holding a word per thread.
    unsafe { launch.launch(launch_1d(blocks, WGMMA_CEILING_THREADS, WGMMA_CEILING_SHARED)) }
        .during("launching a wgmma ceiling kernel")?;
    Ok(())
}

/// A wgmma ceiling (sm_90a module, operands in shared memory): (TOPS, median ms) over `reps`
/// launches of about 20 ms, or `None` where the GPU has no wgmma module. `ops_per_wgmma` is
/// 2 m n k of the kernel's shape.
pub fn wgmma_ceiling(
    gpu: &Gpu,
    kernel: &'static KernelSpec,
    ops_per_wgmma: u64,
    reps: usize,
) -> Result<Option<(f64, f64)>> {
    let Some((function, blocks)) = wgmma_ceiling_grid(gpu, kernel)? else {
        return Ok(None);
    };
    let mut out = gpu.alloc::<u32>((blocks * WGMMA_CEILING_THREADS) as usize, 0)?;
    let iterations =
        iterations_for_20_ms(gpu, |n| launch_wgmma_ceiling(gpu, &function, blocks, n, &mut out))?;
    let ms = median_ms(gpu, reps, || launch_wgmma_ceiling(gpu, &function, blocks, iterations, &mut out))?;
    out.download()?;
    let ops =
        blocks as f64 * iterations as f64 * (WGMMA_CEILING_OPS_PER_ITERATION as u64 * ops_per_wgmma) as f64;
    Ok(Some((ops / ms / 1e9, ms)))
}

/// Iterations that make one call of `launch(iterations)` take about 20 ms (probed with 64).
fn iterations_for_20_ms(gpu: &Gpu, mut launch: impl FnMut(u32) -> Result<()>) -> Result<u32> {
    let probe = 64u32;
    let probe_ms = median_ms(gpu, 3, || launch(probe))?;
    Ok(((probe as f64 * 20.0 / probe_ms) as u32).clamp(64, 1 << 20))
}

/// Iterations that make one launch of `kernel` take about 20 ms (probed with 64).
pub fn mma_iterations(gpu: &Gpu, kernel: &'static KernelSpec, out: &mut DeviceBuffer<u32>) -> Result<u32> {
    iterations_for_20_ms(gpu, |n| launch_mma(gpu, kernel, n, out))
}

/// Operations of one launch of `iterations` rounds, `ops_per_mma` each.
pub fn mma_ops(gpu: &Gpu, iterations: u32, ops_per_mma: u64) -> f64 {
    ((ceiling_blocks(gpu) * CEILING_THREADS / 32) as u64 * CEILING_CHAINS * iterations as u64 * ops_per_mma)
        as f64
}

/// An mma ceiling: (TOPS, median ms).
fn ceiling_mma(gpu: &Gpu, kernel: &'static KernelSpec, ops_per_mma: u64) -> Result<(f64, f64)> {
    let mut out = gpu.alloc::<u32>((ceiling_blocks(gpu) * CEILING_THREADS) as usize, 0)?;
    let iterations = mma_iterations(gpu, kernel, &mut out)?;
    let ms = median_ms(gpu, REPS, || launch_mma(gpu, kernel, iterations, &mut out))?;
    Ok((mma_ops(gpu, iterations, ops_per_mma) / ms / 1e9, ms))
}

/// Measures the summary on `gpu`: the ceilings, then each family's headline configuration.
/// `on_row` hears of each row as it is done (the command prints it, [`Row::line`]); the rows
/// are returned in the same order. Prints nothing.
pub fn run(gpu: &Gpu, on_row: &mut dyn FnMut(&Row)) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut push = |row: Row| {
        log::debug!("bench row done: {} ({:.3} ms)", row.name, row.ms);
        on_row(&row);
        rows.push(row);
    };

    // Ceilings.
    let words = 1usize << 28; // 1 GiB
    let mut src = gpu.alloc::<u32>(words, 0)?;
    fill_random(gpu, src.borrow_mut(), 3)?;
    let mut dst = gpu.alloc::<u32>(words, 0)?;
    let ms = median_ms(gpu, REPS, || launch_copy(gpu, &src, &mut dst))?;
    drop((src, dst));
    let copy = 2.0 * (words * 4) as f64 / ms / 1e6;
    push(Row { name: "ceiling: device copy (read + write)".into(), ms, result: format!("{copy:.0} GB/s") });
    let (s8, ms) = ceiling_mma(gpu, &tools::CEILING_MMA_M16N8K32_S8, 2 * 16 * 8 * 32)?;
    push(Row { name: "ceiling: mma.sync s8 m16n8k32".into(), ms, result: format!("{s8:.0} TOPS") });
    let (f16_peak, ms) = ceiling_mma(gpu, &tools::CEILING_MMA_M16N8K16_F16_F32, 2 * 16 * 8 * 16)?;
    push(Row {
        name: "ceiling: mma.sync f16 m16n8k16, f32 acc.".into(),
        ms,
        result: format!("{f16_peak:.0} TOPS"),
    });
    // On Hopper the correlator and the resampler run wgmma kernels: their matching ceilings.
    let mut wgmma_peak = |(label, kernel, ops): (&str, &'static KernelSpec, u64)| -> Result<Option<f64>> {
        let peak = wgmma_ceiling(gpu, kernel, ops, REPS)?;
        if let Some((tops, ms)) = peak {
            push(Row { name: format!("ceiling: wgmma {label} (SS)"), ms, result: format!("{tops:.0} TOPS") });
        }
        Ok(peak.map(|(tops, _)| tops))
    };
    let [s8_shape, f16_shape] = WGMMA_CEILINGS;
    let (s8_matching, s8_name) = match wgmma_peak(s8_shape)? {
        Some(tops) => (tops, "wgmma s8"),
        None => (s8, "s8"),
    };
    let (f16_matching, f16_name) = match wgmma_peak(f16_shape)? {
        Some(tops) => (tops, "wgmma f16"),
        None => (f16_peak, "f16"),
    };

    // Correlator: N=512 dual-pol, C=16, the largest exact int8 T.
    let config = CorrelatorConfig {
        stations: 512,
        pols: 2,
        channels: 16,
        times: 65472,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    let correlator = Correlator::new(gpu, config)?;
    let mut input = gpu.alloc::<u8>(config.input_bytes(), 0)?;
    fill_random(gpu, input.borrow_mut(), 5)?;
    let mut out = gpu.alloc::<Complex<i32>>(config.output_len(), 0)?;
    let ms = median_ms(gpu, REPS, || correlator.correlate(&input, &mut out))?;
    let tops = config.useful_ops() / ms / 1e9;
    push(Row {
        name: "correlator N=512 P=2 C=16 T=65472 int8".into(),
        ms,
        result: format!(
            "{tops:.0} TOPS, {:.1}% of {s8_name} (TCC on an H200: 508)",
            100.0 * tops / s8_matching
        ),
    });
    drop((correlator, input, out));

    // Baseband beamformer: full CHORD.
    let config = BeamformerConfig::chord(32768);
    let mut rng = StdRng::seed_from_u64(7);
    let weights: Vec<Complex<i8>> =
        (0..config.weights_len()).map(|_| Complex::new(rng.random(), rng.random())).collect();
    let beamformer =
        BasebandBeamformer::new(gpu, config, &weights, &vec![Shift::new(12)?; config.shifts_len()])?;
    let mut e = gpu.alloc::<Ci4>(config.e_len(), 0)?;
    fill_random(gpu, e.borrow_mut(), 7)?;
    let mut j = gpu.alloc::<Ci4>(config.output_len(), 0)?;
    let ms = median_ms(gpu, REPS, || beamformer.beamform(&e, &mut j))?;
    let tops = config.useful_ops() / ms / 1e9;
    push(Row {
        name: "baseband beamformer, full CHORD".into(),
        ms,
        result: format!(
            "{:.2}% of real time, {tops:.0} TOPS, {:.1}% of s8 (CHORD's kernel: 1689 us)",
            100.0 * ms * 1e-3 / config.real_time_s(),
            100.0 * tops / s8
        ),
    });
    drop((beamformer, e, j));

    // Delay beamformer: MeerKAT's 8 dithered beams.
    let config = DelayBeamformerConfig {
        antennas: 64,
        pols: 2,
        channels: 512,
        first_channel: 1024,
        times: 4096,
        beams: (0..8).map(|b| Beam { pol: b % 2, dither: true }).collect(),
    };
    let beamformer = DelayBeamformer::new(gpu, config.clone())?;
    let mut input = gpu.alloc::<Complex<i8>>(config.input_len(), 0)?;
    fill_random(gpu, input.borrow_mut(), 9)?;
    let n = config.steering_len();
    let w: Vec<Complex<f32>> =
        (0..n).map(|i| Complex::new(0.01 * (i % 7) as f32, -0.004 * (i % 5) as f32)).collect();
    let d: Vec<f32> = (0..n).map(|i| (i % 11) as f32 * 0.3 - 1.5).collect();
    let steering = beamformer.upload_steering(&w, &d)?; // checked once, as a pipeline does
    let mut state = beamformer.dither_state(7, 0, 0)?;
    let mut y = gpu.alloc::<Complex<i8>>(config.output_len(), 0)?;
    let mut saturated = gpu.alloc::<u32>(8, 0)?;
    let ms = median_ms(gpu, REPS, || {
        beamformer.beamform_steered(&input, &steering, Some(&mut state), &mut y, &mut saturated)
    })?;
    let gbs = config.bytes() as f64 / ms / 1e6;
    push(Row {
        name: "delay beamformer, 8 dithered beams".into(),
        ms,
        result: format!("{gbs:.0} GB/s, {:.1}% of copy", 100.0 * gbs / copy),
    });
    drop((beamformer, input, y));

    // PFB: 32768 channels, 16 taps, 10-bit input.
    let channels = 32768;
    let config = ChannelizerConfig {
        channels,
        taps: 16,
        bits: 10,
        spectra_per_heap: 256,
        heaps_per_chunk: (1u32 << 27) / (2 * channels * 256),
        chunk_samples: 1 << 16,
        packet_samples: 4096,
        max_delay: 4096,
        output: OutputFormat::Ci8,
    };
    let mut channelizer = Channelizer::new(gpu, config.clone(), None)?;
    let mut failure = None;
    channelizer.fill_input_with(|buffer| {
        if let Err(e) = fill_random(gpu, buffer, 17) {
            failure = Some(e);
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    channelizer.set_gains(&vec![Complex::new(1.0 / 64.0, 0.0); 2 * channels as usize])?;
    let ms = median_ms(gpu, REPS, || channelizer.run())?;
    let samples = 2.0 * 2.0 * channels as f64 * config.spectra_per_chunk() as f64; // both pols
    push(Row {
        name: "PFB, 32768 channels, 16 taps, 10-bit".into(),
        ms,
        result: format!("{:.0} Gsample/s (both pols; CuPy: about 7 per pol)", samples / ms / 1e6),
    });
    drop(channelizer);

    // FRB first kernel: full CHORD (24 x 24 grid, F = 256, T_ds = 40).
    let config = FrbConfig { dishes: 512, m: 24, n: 24, freqs: 256, times: 1920, t_ds: 40 };
    let grid: Vec<(u32, u32)> = (0..512).map(|d| (d / 24, d % 24)).collect();
    let w = f16::from_f64(1e-3);
    let frb = FrbBeamformer::new(gpu, config, &grid, &vec![Complex::new(w, w); config.weights_len()])?;
    let mut e = gpu.alloc::<Ci4>(config.e_len(), 0)?;
    fill_random(gpu, e.borrow_mut(), 11)?;
    let mut intensity = gpu.alloc::<f16>(config.output_len(), 0)?;
    let ms = median_ms(gpu, REPS, || frb.beamform(&e, &mut intensity))?;
    push(Row {
        name: "FRB beamformer 1, full CHORD (T=1920)".into(),
        ms,
        result: format!("{:.1}% of real time (CHORD's kernel: 4.6%)", 100.0 * ms / (1920.0 * 27.3067e-3)),
    });
    drop((frb, e, intensity));

    // FRB second kernel: full CHORD, 5760 beams, one second of data.
    let config = ResampleConfig { channels: 256, times: 917, m: 24, n: 24, beams: 5760 };
    let mut resampler = Resampler::new(gpu, config)?;
    let theta = gpu
        .upload(&(0..config.positions_len()).map(|i| (i % 97) as f32 * 0.49 - 23.0).collect::<Vec<f32>>())?;
    let theta_prime = gpu
        .upload(&(0..config.positions_len()).map(|i| (i % 89) as f32 * 0.53 - 23.0).collect::<Vec<f32>>())?;
    resampler.set_beams(&theta, &theta_prime)?;
    let values = random_intensities(config.intensity_len(), 0x9e37_79b9);
    let intensity = gpu.upload(&values)?;
    let mut beams = gpu.alloc::<f16>(config.output_len(), 0)?;
    let ms = median_ms(gpu, REPS, || resampler.resample(&intensity, &mut beams))?;
    let tflops = config.flops() / ms / 1e9;
    push(Row {
        name: "FRB beamformer 2, full CHORD, 5760 beams".into(),
        ms,
        result: format!(
            "{:.2}% of real time, {tflops:.0} TFLOP/s, {:.1}% of {f16_name} (cuBLAS: 9.2-10.2 ms)",
            ms / 10.0,
            100.0 * tflops / f16_matching
        ),
    });
    drop(resampler);

    // The same with W formed on the fly (no W in device memory).
    let mut fused = FusedResampler::new(gpu, config)?;
    fused.set_beams(&theta, &theta_prime)?;
    let ms = median_ms(gpu, REPS, || fused.resample(&intensity, &mut beams))?;
    let tflops = config.flops() / ms / 1e9;
    push(Row {
        name: "FRB beamformer 2, fused (no W), full CHORD".into(),
        ms,
        result: format!(
            "{:.2}% of real time, {tflops:.0} TFLOP/s, {:.1}% of {f16_name}",
            ms / 10.0,
            100.0 * tflops / f16_matching
        ),
    });
    Ok(rows)
}
