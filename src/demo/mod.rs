//! `radio-kernels demo`: a simulated CHORD-pathfinder observation through the whole F-X-B
//! chain, on the GPU or, without one, on the CPU references.
//!
//! [`sky`] makes 10-bit digitiser samples of a square array observing a few point sources
//! plus receiver noise. The chain: the PFB channelizer (every dish), the correlator
//! (visibilities), the baseband beamformer (int4 voltages, beams on and off the sources), the
//! FRB beamformer's first kernel (intensity on the half-integer grid) and second kernel
//! (resampled to the same beam list), and the delay beamformer (int8 voltages). On the GPU each
//! stage is checked against its CPU reference on a few channels. The science checks: the
//! correlator's visibilities, imaged, peak at the brightest source; the FRB map peaks at its
//! half-integer pixel; beams on sources have more power than beams off them.
pub mod plot;
pub mod sky;

use half::f16;
use radio_kernels_gpu::packing::{pack_ci4, pack_f16x2, unpack_ci4};
use radio_kernels_host::baseband_beamformer::{self as bb, BasebandBeamformer, BeamformerConfig};
use radio_kernels_host::correlator::{self as xc, Correlator, CorrelatorConfig, Format, Order};
use radio_kernels_host::delay_beamformer::{self as db, Beam, DelayBeamformer, DelayBeamformerConfig, Plan};
use radio_kernels_host::frb_beamformer::quantize::{
    quantize_reference, Format as CodeFormat, QuantizeConfig, Quantizer,
};
use radio_kernels_host::frb_beamformer::resample::{
    resample_reference, FusedResampler, ResampleConfig, Resampler,
};
use radio_kernels_host::frb_beamformer::{
    frb_intensity_reference, FrbBeamformer, FrbConfig, FrbResampling, FRB_REL_L2_BOUND,
};
use radio_kernels_host::pfb::{self, Channelizer, ChannelizerConfig, DelayModel, OutputFormat};
use radio_kernels_host::streaming::{self, Engine};
use radio_kernels_host::{Error, Gpu, Result};
use sky::{Array, Source, LIGHT, SAMPLE_RATE};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// PFB taps (MeerKAT's 16).
const TAPS: u32 = 16;
/// Beams of every beamformer: the sources, then off-source directions.
const BEAMS: u32 = 8;
/// FRB time downsampling (spectra per output sample).
const T_DS: u32 = 64;
/// Slots of the streaming engines' rings.
const DEPTH: usize = 3;
/// A stage's steady state is timed over at least this many chunks and seconds.
const SUSTAIN_CHUNKS: u64 = 12;
const SUSTAIN_SECONDS: f64 = 0.3;
/// Channels each GPU stage is checked on against its CPU reference.
const CHECK_CHANNELS: u32 = 2;
/// The most spectra an observation may hold (every stage keeps the whole observation in
/// host memory, and the CPU references run it all).
pub const MAX_SPECTRA: u32 = 16384;

/// What to observe and where to write the figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Dishes on a square grid: 64 (8 x 8, the pathfinder) or 256 (16 x 16).
    pub dishes: u32,
    /// PFB channels (a power of two, 64 ..= 8192).
    pub channels: u32,
    /// Spectra per PFB heap (128 or 256) and heaps: the observation is their product.
    pub spectra_per_heap: u32,
    pub heaps: u32,
    /// Point sources, 1 ..= 8.
    pub sources: u32,
    pub out: PathBuf,
    pub seed: u64,
}

impl Options {
    /// The GPU default: the pathfinder, 1024 channels, 512 spectra (0.33 ms of sky).
    pub fn gpu_default() -> Options {
        Options {
            dishes: 64,
            channels: 1024,
            spectra_per_heap: 256,
            heaps: 2,
            sources: 3,
            out: "demo-out".into(),
            seed: 1,
        }
    }
    /// The CPU default: the pathfinder, 128 channels, 128 spectra.
    pub fn cpu_default() -> Options {
        Options { channels: 128, spectra_per_heap: 128, heaps: 1, ..Options::gpu_default() }
    }
    /// Sets the heaps to cover `seconds` of sky: the fewest whole heaps of
    /// `spectra_per_heap` spectra (each `2 channels / SAMPLE_RATE` seconds) that reach it.
    ///
    /// Errors, leaving `self` unchanged, when `seconds` is not a finite number above 0, when
    /// `channels` or `spectra_per_heap` is 0, or when the heaps needed would hold more than
    /// [`MAX_SPECTRA`] spectra (the message names `--seconds` and `--channels` and says how
    /// many seconds fit). The heap count is computed in `f64` and compared before any
    /// conversion, so no size wraps.
    pub fn set_seconds(&mut self, seconds: f64) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if !seconds.is_finite() || seconds <= 0.0 {
            return bad(format!("--seconds must be a finite number above 0, got {seconds}"));
        }
        if self.channels == 0 || self.spectra_per_heap == 0 {
            return bad(format!(
                "--seconds needs channels and spectra per heap above 0, got {} and {}",
                self.channels, self.spectra_per_heap
            ));
        }
        let per_heap = 2.0 * f64::from(self.channels) * f64::from(self.spectra_per_heap) / SAMPLE_RATE;
        let heaps = (seconds / per_heap).ceil();
        let max_heaps = MAX_SPECTRA / self.spectra_per_heap;
        if heaps > f64::from(max_heaps) {
            return bad(format!(
                "--seconds {seconds} at --channels {} needs {heaps:.0} heaps of {} spectra ({:.0} \
                 spectra), past the demo's {MAX_SPECTRA}: at most {:.6} s at {} channels",
                self.channels,
                self.spectra_per_heap,
                heaps * f64::from(self.spectra_per_heap),
                f64::from(max_heaps) * per_heap,
                self.channels,
            ));
        }
        // 1 <= heaps <= max_heaps: a whole number that fits in u32.
        self.heaps = (heaps as u32).max(1);
        Ok(())
    }
    /// Checks every field and that the observation's size fits: `spectra_per_heap x heaps`
    /// (computed checked) in 128 ..= [`MAX_SPECTRA`].
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if self.dishes != 64 && self.dishes != 256 {
            return bad(format!("--dishes must be 64 (8 x 8) or 256 (16 x 16), got {}", self.dishes));
        }
        if !self.channels.is_power_of_two() || !(64..=8192).contains(&self.channels) {
            return bad(format!("--channels must be a power of two in 64..=8192, got {}", self.channels));
        }
        if !(1..=8).contains(&self.sources) {
            return bad(format!("--sources must be 1..=8, got {}", self.sources));
        }
        let spectra = self.spectra_per_heap.checked_mul(self.heaps);
        let fits = spectra.is_some_and(|t| (128..=MAX_SPECTRA).contains(&t));
        if !self.spectra_per_heap.is_multiple_of(128) || !fits {
            return bad(format!(
                "{} heaps of {} spectra ({} spectra): use a multiple of 128 spectra per heap and \
                 128 ..= {MAX_SPECTRA} spectra",
                self.heaps,
                self.spectra_per_heap,
                self.spectra()
            ));
        }
        Ok(())
    }
    /// Spectra in the observation, `spectra_per_heap x heaps` (exact for every value).
    pub fn spectra(&self) -> u64 {
        u64::from(self.spectra_per_heap) * u64::from(self.heaps)
    }
    fn array(&self) -> Result<Array> {
        Array::new(if self.dishes == 64 { 8 } else { 16 })
    }
    /// Seconds of sky the observation covers (computed in `f64`: no wrap for any value).
    pub fn duration(&self) -> f64 {
        2.0 * f64::from(self.channels) * self.spectra() as f64 / SAMPLE_RATE
    }
    /// The channel of the figures and the position checks: 3/4 of the band (1.2 GHz),
    /// `floor(3 channels / 4)` (computed without overflow).
    pub fn reference_channel(&self) -> u32 {
        self.channels / 4 * 3 + self.channels % 4 * 3 / 4
    }
}

/// One row of the summary table.
#[derive(Clone, Debug)]
pub struct Stage {
    pub name: &'static str,
    pub shape: String,
    /// Milliseconds per chunk in the steady state of the stage's streaming engine (wall
    /// clock, copies in and out included), or per kernel where `throughput` says so; `None`
    /// on the CPU path.
    pub ms: Option<f64>,
    pub throughput: String,
    /// `Ok(detail)` or `Err(detail)`.
    pub check: std::result::Result<String, String>,
}

/// What the demo found.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub stages: Vec<Stage>,
    pub sources: Vec<Source>,
    /// Peak of the correlator's dirty image near the reference channel, and the brightest
    /// source's true direction cosines (l, m).
    pub image_peak: (f64, f64),
    /// The FRB map's brightest half-integer pixel at the reference channel, and where the
    /// brightest source should be.
    pub frb_peak: (u32, u32),
    pub frb_expected: (u32, u32),
    /// Mean power per beam (sources first) of the baseband, FRB and delay beamformers.
    pub beam_power: [Vec<f64>; 3],
    pub images: Vec<PathBuf>,
    pub duration: f64,
}

impl Outcome {
    /// All stage checks passed.
    pub fn checks_passed(&self) -> bool {
        self.stages.iter().all(|s| s.check.is_ok())
    }
}

/// Beam directions (l, m): the sources, then off-source points between them.
fn beam_directions(sources: &[Source], options: &Options, side: u32) -> Vec<(f64, f64)> {
    let lambda = LIGHT / sky::channel_frequency(options.reference_channel(), options.channels);
    let mut beams: Vec<(f64, f64)> = sources.iter().map(|s| (s.l, s.m)).collect();
    // Off-source: grid points no source occupies, a quarter turn of the grid away.
    let mut k = 0;
    while beams.len() < BEAMS as usize {
        let (theta, theta_prime) = (-3.0 + 1.75 * (k % 4) as f64 + 0.25, -3.25 + 2.0 * (k / 4) as f64);
        beams.push(sky::frb_direction(theta, theta_prime, side, lambda));
        k += 1;
    }
    beams
}

fn percent(x: f64) -> String {
    format!("{:.3}%", 100.0 * x)
}

/// Runs the demo: on `gpu` if given, else on the CPU references. `progress` receives a line
/// when a stage starts.
///
/// Checks `options` and that the output folder is writable ([`check_out`]) before any work.
pub fn run(options: &Options, gpu: Option<&Gpu>, progress: &dyn Fn(&str)) -> Result<Outcome> {
    options.validate()?;
    check_out(&options.out)
        .map_err(|why| Error::InvalidConfig(format!("the output folder {}: {why}", options.out.display())))?;
    let array = options.array()?;
    let t_n = u32::try_from(options.spectra())
        .map_err(|_| Error::InvalidConfig(format!("{} spectra do not fit in u32", options.spectra())))?;
    let (d_n, n) = (array.dishes(), options.channels);
    let k_ref = options.reference_channel();
    let lambda_ref = LIGHT / sky::channel_frequency(k_ref, n);
    let sources = sky::sources(options.sources, array.side(), sky::channel_frequency(k_ref, n))?;
    let directions = beam_directions(&sources, options, array.side());
    let duration = options.duration();
    let check_first = k_ref; // channels checked against the CPU: k_ref, k_ref + 1
    let mut stages = Vec::new();

    // ---- sky ---------------------------------------------------------------------------------
    progress(&format!(
        "simulating {} dishes x 2 pols, {:.3} ms of sky, {} sources",
        d_n,
        1e3 * duration,
        sources.len()
    ));
    // Samples per polarisation: (T + taps) x 2N, at most 16400 x 16384 after `validate`.
    let chunk_samples =
        t_n.checked_add(TAPS).and_then(|t| t.checked_mul(n)).and_then(|t| t.checked_mul(2)).ok_or_else(
            || Error::InvalidConfig(format!("({t_n} + {TAPS}) x 2 x {n} samples overflow u32")),
        )?;
    let samples = chunk_samples as usize;
    let started = Instant::now();
    let voltages = sky::observe(array, &sources, samples, options.seed)?;
    let packed: Vec<[Vec<u8>; 2]> = voltages
        .iter()
        .map(|v| [0, 1].map(|p| pfb::pack_samples(&v[p], 10).expect("10-bit samples")))
        .collect();
    stages.push(Stage {
        name: "sky (CPU)",
        shape: format!("{d_n} dishes x 2 pols x {samples} samples, 10-bit"),
        ms: None,
        throughput: format!("{:.1} s on the CPU", started.elapsed().as_secs_f64()),
        check: Ok("-".into()),
    });

    // ---- PFB ---------------------------------------------------------------------------------
    progress("PFB channelizer");
    let pfb_config = ChannelizerConfig {
        channels: n,
        taps: TAPS,
        bits: 10,
        spectra_per_heap: options.spectra_per_heap,
        heaps_per_chunk: options.heaps,
        chunk_samples,
        packet_samples: 2 * n,
        max_delay: 0,
        output: OutputFormat::Ci8,
    };
    // Channel rms equals the input rms (unit-norm weights); 0.5 puts it near 20 in int8.
    let gains = vec![[0.5f32, 0.0]; 2 * n as usize];
    let present = vec![true; samples / (2 * n) as usize];
    let pfb_weights = pfb::hann_sinc_weights(n, TAPS);
    let reference_pfb = |d: usize| {
        pfb::reference_chunk(
            &pfb_config,
            &pfb_weights,
            &gains,
            &[DelayModel::default(); 2],
            [&voltages[d][0], &voltages[d][1]],
            [&present, &present],
            0,
        )
    };
    let shape = format!("{d_n} x 2 x {samples} 10-bit -> {n} ch x {t_n} spectra int8");
    let channelized: Vec<Vec<u8>> = match gpu {
        Some(gpu) => {
            let mut channelizer = Channelizer::new(gpu, pfb_config.clone(), None)?;
            channelizer.set_gains(&gains)?;
            let mut engine = channelizer.streaming(DEPTH)?;
            // Each dish is a stream of its own: one chunk, one output chunk.
            let submit = |engine: &mut pfb::ChannelizerStream, p: &[Vec<u8>; 2]| -> Result<()> {
                let input = engine.input()?;
                for ((samples, present), packed) in input.samples.into_iter().zip(input.present).zip(p) {
                    samples.copy_from_slice(packed);
                    present.fill(true);
                }
                engine.submit()
            };
            let mut out = Vec::new();
            for p in &packed {
                engine.reset()?;
                submit(&mut engine, p)?;
                let chunk =
                    engine.output()?.ok_or_else(|| Error::InvalidConfig("PFB gave no chunk".into()))?;
                out.push(chunk.data.to_vec());
                if engine.pending() != 0 {
                    return Err(Error::InvalidConfig("PFB gave more than one chunk".into()));
                }
            }
            // The steady state: dish 0's chunk in every slot, one continuing stream.
            engine.reset()?;
            for _ in 0..DEPTH {
                submit(&mut engine, &packed[0])?;
                while engine.output()?.is_some() {}
            }
            let ms = sustained_ms(&mut engine)?;
            let mut worst = 0;
            for d in [0, d_n as usize - 1] {
                let r = reference_pfb(d)?;
                for i in 0..pfb_config.output_values() {
                    let (a, b) = (
                        pfb::output_value(&out[d], OutputFormat::Ci8, i),
                        pfb::output_value(&r.output, OutputFormat::Ci8, i),
                    );
                    worst = worst.max((a.0 - b.0).abs()).max((a.1 - b.1).abs());
                }
            }
            // One dish's chunk per `ms`; the array needs all `d_n` dishes in real time.
            let rate = samples as f64 / (ms * 1e-3) / 1e9;
            let chunk_seconds = samples as f64 / SAMPLE_RATE;
            stages.push(Stage {
                name: "PFB channelizer",
                shape,
                ms: Some(ms),
                throughput: real_time(
                    format!("{rate:.1} Gsample/s/pol per dish"),
                    d_n as f64 * ms * 1e-3 / chunk_seconds,
                ),
                check: if worst <= 1 {
                    Ok(format!("2 dishes within {worst} LSB of f64"))
                } else {
                    Err(format!("off by {worst} LSB"))
                },
            });
            out
        }
        None => {
            let out: Vec<Vec<u8>> =
                (0..d_n as usize).map(|d| reference_pfb(d).map(|r| r.output)).collect::<Result<_>>()?;
            stages.push(cpu_stage("PFB channelizer", shape));
            out
        }
    };
    // x[d][c][t][p] as (re, im).
    let s_heap = options.spectra_per_heap;
    let value = |d: u32, c: u32, t: u32, p: u32| -> (i32, i32) {
        let i = pfb_config.output_index(t / s_heap, c, t % s_heap, p);
        pfb::output_value(&channelized[d as usize], OutputFormat::Ci8, i)
    };

    // ---- correlator --------------------------------------------------------------------------
    progress("correlator");
    let xc_config = CorrelatorConfig {
        stations: d_n,
        pols: 2,
        channels: n,
        times: t_n,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    let xc_input = |channels: std::ops::Range<u32>| {
        let c = CorrelatorConfig { channels: channels.len() as u32, ..xc_config };
        let mut input = vec![0u8; c.input_bytes()];
        for t in 0..t_n {
            for (ci, ch) in channels.clone().enumerate() {
                for d in 0..d_n {
                    for p in 0..2 {
                        let (re, im) = value(d, ch, t, p);
                        let at = c.input_offset(t, ci as u32, d, p);
                        input[at] = re as i8 as u8;
                        input[at + 1] = im as i8 as u8;
                    }
                }
            }
        }
        (c, input)
    };
    let (_, full_input) = xc_input(0..n);
    let shape = format!("N={d_n} P=2 C={n} T={t_n} int8 -> {} baselines", xc_config.baselines());
    let visibilities: Vec<[i64; 2]> = match gpu {
        Some(gpu) => {
            let correlator = Correlator::new(gpu, xc_config)?;
            // Integrations of one chunk (the observation), the chunk in every slot.
            let mut engine = correlator.streaming(1, DEPTH)?;
            for _ in 0..DEPTH {
                engine.input()?.copy_from_slice(&full_input);
                engine.submit()?;
            }
            let v = engine.output()?.ok_or_else(|| Error::InvalidConfig("no integration".into()))?.to_vec();
            while engine.output()?.is_some() {}
            let ms = sustained_ms(&mut engine)?;
            let (sub, sub_input) = xc_input(check_first..check_first + CHECK_CHANNELS);
            let reference = xc::correlate_reference(&sub, &sub_input)?;
            let mut mismatches = 0;
            for c in 0..CHECK_CHANNELS {
                for i in 0..d_n {
                    for j in 0..=i {
                        for (pi, pj) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                            let got = v[xc_config.output_index(check_first + c, i, j, pi, pj)];
                            mismatches += (got != reference[sub.output_index(c, i, j, pi, pj)]) as usize;
                        }
                    }
                }
            }
            stages.push(Stage {
                name: "correlator",
                shape,
                ms: Some(ms),
                throughput: real_time(
                    format!("{:.0} TOPS", xc_config.useful_ops() / (ms * 1e-3) / 1e12),
                    ms * 1e-3 / duration,
                ),
                check: if mismatches == 0 {
                    Ok(format!("{CHECK_CHANNELS} channels bit-exact"))
                } else {
                    Err(format!("{mismatches} values differ"))
                },
            });
            v
        }
        None => {
            stages.push(cpu_stage("correlator", shape));
            xc::correlate_reference(&xc_config, &full_input)?
        }
    };
    // Dirty image near the reference channel: sum over baselines i > j and both pols of
    // Re V exp(-2 pi i f (r_i - r_j) . s / c), on a grid of directions. The phase factor is
    // e_i conj(e_j) with e_d = exp(-2 pi i f r_d . s / c), the same for both pols: the pols
    // are summed first (V_00 + V_11 per baseline, i > j in order), and each direction and
    // channel needs one e_d per dish.
    let image_channels: Vec<u32> = (k_ref.saturating_sub(2)..(k_ref + 3).min(n)).collect();
    let pol_sums: Vec<Vec<(f64, f64)>> = image_channels
        .iter()
        .map(|&c| {
            (0..d_n)
                .flat_map(|i| (0..i).map(move |j| (i, j)))
                .map(|(i, j)| {
                    let (x, y) = (
                        visibilities[xc_config.output_index(c, i, j, 0, 0)],
                        visibilities[xc_config.output_index(c, i, j, 1, 1)],
                    );
                    ((x[0] + y[0]) as f64, (x[1] + y[1]) as f64)
                })
                .collect()
        })
        .collect();
    let span = image_span(&sources);
    let steps = IMAGE_STEPS;
    let mut image_peak = (0.0, 0.0, f64::MIN);
    let mut phasors = vec![(0.0, 0.0); d_n as usize];
    for a in 0..=steps {
        for b in 0..=steps {
            let (l, m) =
                (-span + 2.0 * span * a as f64 / steps as f64, -span + 2.0 * span * b as f64 / steps as f64);
            let mut sum = 0.0;
            for (&c, v) in image_channels.iter().zip(&pol_sums) {
                let f = sky::channel_frequency(c, n);
                for (d, e) in (0..d_n).zip(phasors.iter_mut()) {
                    let (s, co) = (-std::f64::consts::TAU * f * array.lead(d, l, m)).sin_cos();
                    *e = (co, s);
                }
                let mut baselines = v.iter();
                for (i, &(ci, si)) in phasors.iter().enumerate() {
                    for (&(cj, sj), &(re, im)) in phasors[..i].iter().zip(&mut baselines) {
                        // Re V (ci + i si)(cj - i sj)
                        sum += re * (ci * cj + si * sj) - im * (si * cj - ci * sj);
                    }
                }
            }
            if sum > image_peak.2 {
                image_peak = (l, m, sum);
            }
        }
    }

    // ---- int4 voltages for the baseband and FRB beamformers ----------------------------------
    // E [tau][f][p][d] complex int4: the int8 channels / 8, round half to even, +-7.
    let bb_config = BeamformerConfig { dishes: d_n, beams: BEAMS, freqs: n, times: t_n };
    let to_int4 = |x: i32| pfb::quantise_reference(x as f64 / 8.0, 7).0 as i8;
    let mut e = vec![0u8; bb_config.e_len()];
    for tau in 0..t_n {
        for f in 0..n {
            for p in 0..2 {
                for d in 0..d_n {
                    let (re, im) = value(d, f, tau, p);
                    e[bb_config.e_index(tau, f, p, d)] = pack_ci4(to_int4(re), to_int4(im));
                }
            }
        }
    }
    // On the GPU, E is uploaded once for the FRB beamformer's kernel-by-kernel stages.
    let e_dev = gpu.map(|gpu| gpu.upload(&e)).transpose()?;
    // Products in usize: E at the largest valid size holds 2^36 values.
    let e_channels = |config_freqs: u32, first: u32, count: u32| -> Vec<u8> {
        let width = count as usize * 2 * d_n as usize;
        let mut out = Vec::with_capacity(t_n as usize * width);
        for tau in 0..t_n as usize {
            let row = (tau * config_freqs as usize + first as usize) * 2 * d_n as usize;
            out.extend_from_slice(&e[row..row + width]);
        }
        out
    };

    // ---- baseband beamformer -----------------------------------------------------------------
    progress("baseband beamformer");
    let mut weights = vec![[0i8; 2]; bb_config.weights_len()];
    for f in 0..n {
        let freq = sky::channel_frequency(f, n);
        for p in 0..2 {
            for (beam, &(l, m)) in directions.iter().enumerate() {
                for d in 0..d_n {
                    // Undo the source's phase exp(+2 pi i f lead).
                    let phase = -std::f64::consts::TAU * freq * array.lead(d, l, m);
                    let w = [(127.0 * phase.cos()).round() as i8, (127.0 * phase.sin()).round() as i8];
                    weights[bb_config.weight_index(f, p, beam as u32, d)] = w;
                }
            }
        }
    }
    let shifts = vec![12i32; bb_config.shifts_len()];
    let shape = format!("D={d_n} B={BEAMS} F={n} T={t_n} int4 -> int4");
    let baseband: Vec<u8> = match gpu {
        Some(gpu) => {
            let beamformer = BasebandBeamformer::new(gpu, bb_config, &weights, &shifts)?;
            let mut engine = beamformer.streaming(DEPTH)?;
            for _ in 0..DEPTH {
                engine.input()?.copy_from_slice(&e);
                engine.submit()?;
            }
            let got = engine.output()?.ok_or_else(|| Error::InvalidConfig("no J".into()))?.to_vec();
            while engine.output()?.is_some() {}
            let ms = sustained_ms(&mut engine)?;
            let sub = BeamformerConfig { freqs: CHECK_CHANNELS, ..bb_config };
            let sub_weights: Vec<[i8; 2]> = (0..CHECK_CHANNELS)
                .flat_map(|c| {
                    let at = bb_config.weight_index(check_first + c, 0, 0, 0);
                    weights[at..at + (2 * BEAMS * d_n) as usize].to_vec()
                })
                .collect();
            let sub_shifts = vec![12i32; sub.shifts_len()];
            let reference = bb::beamform_reference(
                &sub,
                &e_channels(n, check_first, CHECK_CHANNELS),
                &sub_weights,
                &sub_shifts,
            )?;
            let mut mismatches = 0;
            for beam in 0..BEAMS {
                for c in 0..CHECK_CHANNELS {
                    for p in 0..2 {
                        for tau in 0..t_n {
                            mismatches += (got[bb_config.output_index(beam, check_first + c, p, tau)]
                                != reference[sub.output_index(beam, c, p, tau)])
                                as usize;
                        }
                    }
                }
            }
            stages.push(Stage {
                name: "baseband beamformer",
                shape,
                ms: Some(ms),
                throughput: real_time(
                    format!("{:.0} TOPS", bb_config.useful_ops() / (ms * 1e-3) / 1e12),
                    ms * 1e-3 / duration,
                ),
                check: if mismatches == 0 {
                    Ok(format!("{CHECK_CHANNELS} channels bit-exact"))
                } else {
                    Err(format!("{mismatches} bytes differ"))
                },
            });
            got
        }
        None => {
            stages.push(cpu_stage("baseband beamformer", shape));
            bb::beamform_reference(&bb_config, &e, &weights, &shifts)?
        }
    };
    let baseband_power: Vec<f64> = (0..BEAMS)
        .map(|beam| {
            let mut sum = 0.0;
            for f in n / 4..n {
                for p in 0..2 {
                    for tau in 0..t_n {
                        let (re, im) = unpack_ci4(baseband[bb_config.output_index(beam, f, p, tau)]);
                        sum += (re as f64).powi(2) + (im as f64).powi(2);
                    }
                }
            }
            sum / (3 * n / 4 * 2 * t_n) as f64
        })
        .collect();

    // ---- FRB beamformer, first kernel ----------------------------------------------------------
    progress("FRB beamformer (intensity on the half-integer grid)");
    let side = array.side();
    let frb_config = FrbConfig { dishes: d_n, m: side, n: side, freqs: n, times: t_n, t_ds: T_DS };
    let grid: Vec<(u32, u32)> = (0..d_n).map(|d| array.cell(d)).collect();
    let w_frb = pack_f16x2(f16::from_f64(1.0 / d_n as f64).to_bits(), 0);
    let frb_weights = vec![w_frb; frb_config.weights_len()];
    let tbar = t_n / T_DS;
    let (k2, q2) = (2 * side, 2 * side);
    let shape = format!("D={d_n} grid {side}x{side} F={n} T={t_n} T_ds={T_DS} -> I {k2}x{q2}");
    let intensity: Vec<u16> = match (gpu, &e_dev) {
        (Some(gpu), Some(e_dev)) => {
            let frb = FrbBeamformer::new(gpu, frb_config, &grid, &frb_weights)?;
            let mut out = gpu.alloc::<u16>(frb_config.output_len(), 0x7e)?;
            let ((), ms) = timed(gpu, || frb.beamform(e_dev, &mut out))?;
            let got = out.download()?;
            let sub = FrbConfig { freqs: CHECK_CHANNELS, ..frb_config };
            let sub_weights = vec![w_frb; sub.weights_len()];
            let reference = frb_intensity_reference(
                &sub,
                &e_channels(n, check_first, CHECK_CHANNELS),
                &grid,
                &sub_weights,
            )?;
            // I is channel-major, so the checked channels are one contiguous run.
            let first = frb_config.output_index(check_first, 0, 0, 0);
            let rel = relative_l2(
                reference.iter().enumerate().map(|(i, &r)| (f16::from_bits(got[first + i]).to_f64(), r)),
            );
            stages.push(Stage {
                name: "FRB beamformer 1",
                shape,
                ms: Some(ms),
                throughput: format!("kernel only, {} of real time", percent(ms * 1e-3 / duration)),
                check: if rel < FRB_REL_L2_BOUND {
                    Ok(format!("rel. L2 {rel:.1e} (< {FRB_REL_L2_BOUND:.1e})"))
                } else {
                    Err(format!("rel. L2 {rel:.1e}"))
                },
            });
            got
        }
        _ => {
            stages.push(cpu_stage("FRB beamformer 1", shape));
            frb_intensity_reference(&frb_config, &e, &grid, &frb_weights)?
                .iter()
                .map(|&v| f16::from_f64(v).to_bits())
                .collect()
        }
    };
    let mut frb_map = vec![0.0; (k2 * q2) as usize];
    for tb in 0..tbar {
        for p in 0..k2 {
            for q in 0..q2 {
                frb_map[(p * q2 + q) as usize] +=
                    f16::from_bits(intensity[frb_config.output_index(k_ref, tb, p, q)]).to_f64();
            }
        }
    }
    let best = (0..frb_map.len()).max_by(|&a, &b| frb_map[a].total_cmp(&frb_map[b])).unwrap_or(0) as u32;
    let frb_peak = (best / q2, best % q2);
    let pixel = |(l, m): (f64, f64)| {
        let (theta, theta_prime) = sky::frb_coordinates(l, m, side, lambda_ref);
        ((2.0 * theta).round().rem_euclid(k2 as f64), (2.0 * theta_prime).round().rem_euclid(q2 as f64))
    };
    let expected = pixel((sources[0].l, sources[0].m));
    let frb_expected = (expected.0 as u32, expected.1 as u32);

    // ---- FRB beamformer, second kernel ---------------------------------------------------------
    progress("FRB beamformer (resampling to the beams)");
    let rs_config = ResampleConfig { channels: n, times: tbar, m: side, n: side, beams: BEAMS };
    let mut theta = vec![0f32; rs_config.positions_len()];
    let mut theta_prime = vec![0f32; rs_config.positions_len()];
    for f in 0..n {
        let lambda = LIGHT / sky::channel_frequency(f.max(1), n);
        for (beam, &(l, m)) in directions.iter().enumerate() {
            let (a, b) = sky::frb_coordinates(l, m, side, lambda);
            theta[(f * BEAMS) as usize + beam] = a as f32;
            theta_prime[(f * BEAMS) as usize + beam] = b as f32;
        }
    }
    let shape = format!("{k2}x{q2} grid -> {BEAMS} beams, F={n} x {tbar} samples");
    let resampled: Vec<f64> = match gpu {
        Some(gpu) => {
            let (theta_dev, theta_prime_dev) = (gpu.upload(&theta)?, gpu.upload(&theta_prime)?);
            let i_dev = gpu.upload(&intensity)?;
            let mut out = gpu.alloc::<u16>(rs_config.output_len(), 0x7e)?;
            // The faster path of each GPU family (host module docs): on Hopper the fused one,
            // which also needs no W memory; elsewhere the W path.
            let ((), ms) = if gpu.wgmma_enabled() {
                let mut fused = FusedResampler::new(gpu, rs_config)?;
                fused.set_beams(&theta_dev, &theta_prime_dev)?;
                timed(gpu, || fused.resample(&i_dev, &mut out))?
            } else {
                let mut resampler = Resampler::new(gpu, rs_config)?;
                resampler.set_beams(&theta_dev, &theta_prime_dev)?;
                timed(gpu, || resampler.resample(&i_dev, &mut out))?
            };
            let got: Vec<f64> = out.download()?.iter().map(|&b| f16::from_bits(b).to_f64()).collect();
            let sub = ResampleConfig { channels: CHECK_CHANNELS, ..rs_config };
            let k = rs_config.k() as usize;
            let rows = (tbar as usize) * k;
            let first = check_first as usize;
            let sub_i = &intensity[first * rows..(first + CHECK_CHANNELS as usize) * rows];
            let sub_pos = |v: &[f32]| {
                v[first * BEAMS as usize..(first + CHECK_CHANNELS as usize) * BEAMS as usize].to_vec()
            };
            let reference = resample_reference(&sub, sub_i, &sub_pos(&theta), &sub_pos(&theta_prime))?;
            let offset = first * (tbar * BEAMS) as usize;
            let rel = relative_l2(reference.iter().enumerate().map(|(i, &r)| (got[offset + i], r)));
            stages.push(Stage {
                name: "FRB beamformer 2",
                shape,
                ms: Some(ms),
                throughput: format!("kernel only, {} of real time", percent(ms * 1e-3 / duration)),
                check: if rel < 1.0 / 512.0 {
                    Ok(format!("rel. L2 {rel:.1e} (< 2.0e-3)"))
                } else {
                    Err(format!("rel. L2 {rel:.1e}"))
                },
            });
            got
        }
        None => {
            stages.push(cpu_stage("FRB beamformer 2", shape));
            resample_reference(&rs_config, &intensity, &theta, &theta_prime)?
        }
    };
    // ---- FRB beamformer, streamed: E to quantised beams --------------------------------------
    let codes = QuantizeConfig { channels: n, times: tbar, beams: BEAMS, format: CodeFormat::U8 };
    let shape = format!("E -> I -> {BEAMS} beams -> u8 codes, F={n} x {tbar} samples");
    match gpu {
        Some(gpu) => {
            progress("FRB beamformer (streaming engine)");
            let (scale, offset) = (vec![1.0f32; codes.params_len()], vec![0.0f32; codes.params_len()]);
            let quantizer = Quantizer::new(gpu, codes)?;
            let first = FrbBeamformer::new(gpu, frb_config, &grid, &frb_weights)?;
            let (theta_dev, theta_prime_dev) = (gpu.upload(&theta)?, gpu.upload(&theta_prime)?);
            // The resampler of the stage above: fused on Hopper, the W path elsewhere.
            let (mut fused, mut weights_path) = (None, None);
            let resampling: FrbResampling = if gpu.wgmma_enabled() {
                let r = fused.insert(FusedResampler::new(gpu, rs_config)?);
                r.set_beams(&theta_dev, &theta_prime_dev)?;
                (&*r).into()
            } else {
                let r = weights_path.insert(Resampler::new(gpu, rs_config)?);
                r.set_beams(&theta_dev, &theta_prime_dev)?;
                (&*r).into()
            };
            let mut engine = first.streaming(resampling, &quantizer, &scale, &offset, DEPTH)?;
            for _ in 0..DEPTH {
                engine.input()?.copy_from_slice(&e);
                engine.submit()?;
            }
            let got =
                engine.output()?.ok_or_else(|| Error::InvalidConfig("no FRB codes".into()))?.beams.to_vec();
            while engine.output()?.is_some() {}
            let ms = sustained_ms(&mut engine)?;
            // The stage above's beams (f16, exact in f64) quantised on the CPU.
            let j: Vec<u16> = resampled.iter().map(|&v| f16::from_f64(v).to_bits()).collect();
            let want = quantize_reference(&codes, &j, &scale, &offset)?.output;
            let differ =
                got.iter().zip(&want).filter(|(a, b)| a != b).count() + got.len().abs_diff(want.len());
            stages.push(Stage {
                name: "FRB engine",
                shape,
                ms: Some(ms),
                throughput: real_time(
                    format!("{:.1} GB/s of E", e.len() as f64 / (ms * 1e-3) / 1e9),
                    ms * 1e-3 / duration,
                ),
                check: if differ == 0 {
                    Ok("codes bit-exact (stage 2 quantised)".into())
                } else {
                    Err(format!("{differ} codes differ"))
                },
            });
        }
        None => stages.push(cpu_stage("FRB engine", shape)),
    }
    let frb_power: Vec<f64> = (0..BEAMS as usize)
        .map(|beam| {
            let mut sum = 0.0;
            for f in n as usize / 4..n as usize {
                for tb in 0..tbar as usize {
                    sum += resampled[(f * tbar as usize + tb) * BEAMS as usize + beam];
                }
            }
            sum / (3 * n as usize / 4 * tbar as usize) as f64
        })
        .collect();

    // ---- delay beamformer ----------------------------------------------------------------------
    progress("delay beamformer");
    let beams: Vec<Beam> = (0..BEAMS).map(|_| Beam { pol: 0, dither: false }).collect();
    let db_config =
        DelayBeamformerConfig { antennas: d_n, pols: 2, channels: n, first_channel: 0, times: t_n, beams };
    let db_input = |first: u32, count: u32| -> Vec<[i8; 2]> {
        let mut x = Vec::with_capacity(d_n as usize * count as usize * t_n as usize * 2);
        for a in 0..d_n {
            for c in first..first + count {
                for t in 0..t_n {
                    for p in 0..2 {
                        let (re, im) = value(a, c, t, p);
                        x.push([re as i8, im as i8]);
                    }
                }
            }
        }
        x
    };
    let steer = |config: &DelayBeamformerConfig| {
        let count = config.steering_len();
        let delay: Vec<f64> = (0..count)
            .map(|i| {
                -array.lead(
                    i as u32 / BEAMS,
                    directions[i % BEAMS as usize].0,
                    directions[i % BEAMS as usize].1,
                )
            })
            .collect();
        db::steering(
            config,
            &vec![[1.0, 0.0]; count],
            &vec![1.0 / 16.0; BEAMS as usize],
            &delay,
            &vec![0.0; count],
            SAMPLE_RATE / (2 * n) as f64,
        )
    };
    let (w, dl) = steer(&db_config)?;
    let full = db_input(0, n);
    let shape = format!("A={d_n} P=2 C={n} T={t_n} int8 -> {BEAMS} beams int8");
    let delay_out: Vec<[i8; 2]> = match gpu {
        Some(gpu) => {
            let beamformer = DelayBeamformer::new(gpu, db_config.clone())?;
            let steering = beamformer.upload_steering(&w, &dl)?;
            let mut engine = beamformer.streaming(&steering, None, DEPTH)?;
            for _ in 0..DEPTH {
                engine.input()?.copy_from_slice(&full);
                engine.submit()?;
            }
            let got = engine.output()?.ok_or_else(|| Error::InvalidConfig("no beams".into()))?.beams.to_vec();
            while engine.output()?.is_some() {}
            let ms = sustained_ms(&mut engine)?;
            let sub = DelayBeamformerConfig {
                channels: CHECK_CHANNELS,
                first_channel: check_first,
                ..db_config.clone()
            };
            let (sw, sd) = steer(&sub)?;
            let plan = Plan::new(&sub, 1)?;
            let reference =
                db::beamform_reference(&sub, &plan, &db_input(check_first, CHECK_CHANNELS), &sw, &sd, None)?;
            let (mut off_by_one, mut worse) = (0, 0);
            for beam in 0..BEAMS {
                for c in 0..CHECK_CHANNELS {
                    for t in 0..t_n {
                        let (g, r) = (
                            got[db_config.output_index(beam, check_first + c, t)],
                            reference.output[sub.output_index(beam, c, t)],
                        );
                        for k in 0..2 {
                            match (g[k] as i32 - r[k] as i32).abs() {
                                0 => {}
                                1 => off_by_one += 1,
                                _ => worse += 1,
                            }
                        }
                    }
                }
            }
            stages.push(Stage {
                name: "delay beamformer",
                shape,
                ms: Some(ms),
                throughput: real_time(
                    format!("{:.0} GB/s", db_config.bytes() as f64 / (ms * 1e-3) / 1e9),
                    ms * 1e-3 / duration,
                ),
                check: if worse == 0 {
                    Ok(format!("{CHECK_CHANNELS} channels within 1 LSB ({off_by_one} ties)"))
                } else {
                    Err(format!("{worse} values off by more than 1"))
                },
            });
            got
        }
        None => {
            stages.push(cpu_stage("delay beamformer", shape));
            let plan = Plan::new(&db_config, 1)?;
            db::beamform_reference(&db_config, &plan, &full, &w, &dl, None)?.output
        }
    };
    let delay_power: Vec<f64> = (0..BEAMS)
        .map(|beam| {
            let mut sum = 0.0;
            for c in n / 4..n {
                for t in 0..t_n {
                    let y = delay_out[db_config.output_index(beam, c, t)];
                    sum += (y[0] as f64).powi(2) + (y[1] as f64).powi(2);
                }
            }
            sum / (3 * n / 4 * t_n) as f64
        })
        .collect();

    // ---- figures ---------------------------------------------------------------------------------
    progress(&format!("writing figures to {}", options.out.display()));
    // Checked at the start; a folder removed since then is made again, and a figure that
    // cannot be written is reported and skipped, so the results are never lost.
    if let Err(e) = std::fs::create_dir_all(&options.out) {
        eprintln!("radio-kernels demo: cannot create {}: {e}", options.out.display());
    }
    let mut images = Vec::new();
    let mut figure = |result: std::result::Result<PathBuf, Box<dyn std::error::Error>>| match result {
        Ok(path) => images.push(path),
        Err(e) => eprintln!("radio-kernels demo: a figure failed: {e}"),
    };
    let (offsets, db_response) = channel_response(n)?;
    figure(plot::channel_response(&options.out.join("pfb_channel_response.png"), &offsets, &db_response));
    let lead0 = |d: u32| array.lead(d, sources[0].l, sources[0].m);
    let f_ref = sky::channel_frequency(k_ref, n);
    let points: Vec<(f64, f64, f64, f64)> = (0..d_n)
        .flat_map(|i| (0..i).map(move |j| (i, j)))
        .map(|(i, j)| {
            let v = visibilities[xc_config.output_index(k_ref, i, j, 0, 0)];
            let (pi, pj) = (array.position(i), array.position(j));
            let length = ((pi.0 - pj.0).powi(2) + (pi.1 - pj.1).powi(2)).sqrt();
            let predicted = (std::f64::consts::TAU * f_ref * (lead0(i) - lead0(j)) + std::f64::consts::PI)
                .rem_euclid(std::f64::consts::TAU)
                - std::f64::consts::PI;
            (length, (v[0] as f64).hypot(v[1] as f64), (v[1] as f64).atan2(v[0] as f64), predicted)
        })
        .collect();
    figure(plot::visibilities(
        &options.out.join("visibilities.png"),
        &format!("visibilities at {:.0} MHz (pol 0 x pol 0)", f_ref / 1e6),
        &points,
    ));
    let marks: Vec<(f64, f64)> = sources.iter().map(|s| pixel((s.l, s.m))).collect();
    figure(plot::intensity_map(
        &options.out.join("frb_map.png"),
        &format!("FRB intensity at {:.0} MHz on the half-integer grid (circles: sources)", f_ref / 1e6),
        &frb_map,
        k2,
        q2,
        &marks,
    ));
    let names: Vec<String> = (0..BEAMS as usize)
        .map(|b| if b < sources.len() { format!("src{b}") } else { format!("off{}", b - sources.len()) })
        .collect();
    let labelled = |power: &[f64]| names.iter().cloned().zip(power.iter().copied()).collect::<Vec<_>>();
    figure(plot::beam_power(
        &options.out.join("beam_power.png"),
        &[
            ("baseband beamformer (int4 beams, mean |J|^2)", labelled(&baseband_power)),
            ("FRB beamformer (resampled intensity)", labelled(&frb_power)),
            ("delay beamformer (int8 beams, mean |y|^2)", labelled(&delay_power)),
        ],
    ));

    Ok(Outcome {
        stages,
        sources,
        image_peak: (image_peak.0, image_peak.1),
        frb_peak,
        frb_expected,
        beam_power: [baseband_power, frb_power, delay_power],
        images,
        duration,
    })
}

/// Makes sure figures can be written to `dir` before any work: creates the folder (and its
/// parents), then creates and removes a probe file in it. `Err` says which step failed and
/// why (e.g. a parent that is a regular file, a read-only file system).
pub fn check_out(dir: &Path) -> std::result::Result<(), String> {
    if dir.as_os_str().is_empty() {
        return Err("the folder name is empty".into());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the folder: {e}"))?;
    let probe = dir.join(format!(".radio-kernels-write-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| format!("cannot create a file in it: {e}"))?;
    std::fs::remove_file(&probe).map_err(|e| format!("cannot remove the probe file {}: {e}", probe.display()))
}

/// Steady-state wall-clock milliseconds per chunk of `engine`, whose input slots already
/// hold the stage's data: a warm-up, then at least [`SUSTAIN_CHUNKS`] chunks and
/// [`SUSTAIN_SECONDS`] through [`streaming::pump`] (copies in and out overlapped with the
/// kernels, outputs released unread).
fn sustained_ms(engine: &mut dyn Engine) -> Result<f64> {
    streaming::pump(engine, 2 * DEPTH as u64, |_| {})?;
    let start = Instant::now();
    streaming::pump(engine, SUSTAIN_CHUNKS, |_| {})?;
    let estimate = start.elapsed().as_secs_f64() / SUSTAIN_CHUNKS as f64;
    let chunks = ((SUSTAIN_SECONDS / estimate.max(1e-9)).ceil() as u64).clamp(SUSTAIN_CHUNKS, 1 << 20);
    let start = Instant::now();
    streaming::pump(engine, chunks, |_| {})?;
    Ok(start.elapsed().as_secs_f64() * 1e3 / chunks as f64)
}

/// A streamed stage's throughput column: its rate, the share of real time it takes and
/// whether it keeps up.
fn real_time(rate: String, share: f64) -> String {
    let verdict = if share <= 1.0 { "keeps up" } else { "falls behind" };
    format!("{rate}, {} of real time: {verdict}", percent(share))
}

/// Runs `work` between two CUDA events: its result and the GPU milliseconds.
fn timed<T>(gpu: &Gpu, work: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let timer = gpu.timer()?;
    timer.start()?;
    let out = work()?;
    Ok((out, timer.stop()? as f64))
}

/// `||got - want|| / ||want||` over the pairs (got, want).
fn relative_l2(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (err, norm) = pairs.fold((0.0, 0.0), |(e, n), (g, w)| (e + (g - w) * (g - w), n + w * w));
    (err / norm).sqrt()
}

fn cpu_stage(name: &'static str, shape: String) -> Stage {
    Stage {
        name,
        shape,
        ms: None,
        throughput: "CPU reference".into(),
        check: Ok("(is the reference)".into()),
    }
}

/// The PFB prototype filter's response around one channel, in dB: the Fourier transform of
/// the Hann-windowed sinc weights, zero-padded 16x, normalised to 0 dB at the centre.
/// `channels` must be one a channelizer may have ([`pfb::hann_sinc_weights`]: 1 ..= 65536).
pub fn channel_response(channels: u32) -> Result<(Vec<f64>, Vec<f64>)> {
    use rustfft::num_complex::Complex;
    let weights = pfb::hann_sinc_weights(channels, TAPS);
    if weights.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "channel response: {channels} channels is outside the channelizer's range"
        )));
    }
    let len = weights.len() * 16;
    let mut x: Vec<Complex<f64>> = weights.iter().map(|&w| Complex::new(w as f64, 0.0)).collect();
    x.resize(len, Complex::new(0.0, 0.0));
    rustfft::FftPlanner::new().plan_fft_forward(len).process(&mut x);
    // Bin b is b / (16 T) channels (a channel is 2n / window = 1 / T of the transform's bins x16).
    let per_channel = 16 * TAPS as usize;
    let reach = 4 * per_channel;
    let peak = x[0].norm_sqr();
    let mut offsets = Vec::new();
    let mut db = Vec::new();
    for b in -(reach as i64)..=reach as i64 {
        let v = x[b.rem_euclid(len as i64) as usize].norm_sqr();
        offsets.push(b as f64 / per_channel as f64);
        db.push(10.0 * (v / peak).max(1e-30).log10());
    }
    Ok((offsets, db))
}

/// Grid steps per axis of the correlator's dirty-image search.
const IMAGE_STEPS: u32 = 60;

/// Half-width (direction cosine) of the dirty-image search: 1.5 times the farthest source.
fn image_span(sources: &[Source]) -> f64 {
    1.5 * sources.iter().map(|s| s.l.abs().max(s.m.abs())).fold(0.0, f64::max).max(0.005)
}

/// How far (direction cosine) the dirty image's peak may lie from the brightest source: two
/// grid steps of the image search.
pub fn image_tolerance(outcome: &Outcome) -> f64 {
    2.0 * 2.0 * image_span(&outcome.sources) / IMAGE_STEPS as f64
}

/// The science checks: the correlator image and the FRB map find the brightest source where
/// it is, and in every beamformer the beam on it has more than twice the power of any
/// off-source beam.
pub fn science_ok(outcome: &Outcome) -> bool {
    let s = outcome.sources[0];
    let (l, m) = outcome.image_peak;
    let image = (l - s.l).hypot(m - s.m) <= image_tolerance(outcome);
    let beams = outcome.beam_power.iter().all(|power| {
        let off = power[outcome.sources.len()..].iter().copied().fold(0.0, f64::max);
        power[0] > 2.0 * off
    });
    image && outcome.frb_peak == outcome.frb_expected && beams
}

/// The summary table, the science checks and the figures, as printed by the CLI.
pub fn report(outcome: &Outcome) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{:<22} {:<58} {:>10}  {:<38} check",
        "stage", "shape", "time", "throughput, real time"
    );
    for stage in &outcome.stages {
        let time = stage.ms.map_or("-".to_string(), |ms| format!("{ms:.3} ms"));
        let check = match &stage.check {
            Ok(detail) => format!("OK   {detail}"),
            Err(detail) => format!("FAIL {detail}"),
        };
        let _ = writeln!(
            out,
            "{:<22} {:<58} {:>10}  {:<38} {check}",
            stage.name, stage.shape, time, stage.throughput
        );
    }
    let s = outcome.sources[0];
    let (l, m) = outcome.image_peak;
    let verdict = |ok: bool| if ok { "OK  " } else { "FAIL" };
    let _ = writeln!(
        out,
        "\nsky: {:.3} ms of data, {} sources; the brightest at (l, m) = ({:+.4}, {:+.4})",
        1e3 * outcome.duration,
        outcome.sources.len(),
        s.l,
        s.m
    );
    let _ = writeln!(
        out,
        "{} correlator image peak at ({:+.4}, {:+.4}) (within {:.4})",
        verdict((l - s.l).hypot(m - s.m) <= image_tolerance(outcome)),
        l,
        m,
        image_tolerance(outcome)
    );
    let _ = writeln!(
        out,
        "{} FRB map peak at half-integer pixel {:?}, expected {:?}",
        verdict(outcome.frb_peak == outcome.frb_expected),
        outcome.frb_peak,
        outcome.frb_expected
    );
    for (name, power) in ["baseband", "FRB", "delay"].iter().zip(&outcome.beam_power) {
        let off = power[outcome.sources.len()..].iter().copied().fold(0.0, f64::max);
        let on: Vec<String> = power[..outcome.sources.len()].iter().map(|p| format!("{p:.3}")).collect();
        let _ = writeln!(
            out,
            "{} {name} beams: on sources [{}], strongest off-source {off:.3}",
            verdict(power[0] > 2.0 * off),
            on.join(", ")
        );
    }
    if !outcome.images.is_empty() {
        let _ = writeln!(out, "figures:");
        for image in &outcome.images {
            let _ = writeln!(out, "  {}", image.display());
        }
    }
    out
}
