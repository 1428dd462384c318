//! What every stage of the demo shares: the observation ([`Chain`]: array, sizes, sources,
//! beam directions, the channels checked against the CPU), and the helpers that time a
//! stage on the GPU and compare it with its CPU reference.
use super::sky::{self, Array, Source, LIGHT};
use super::{Options, Stage, BEAMS, DEPTH, SUSTAIN_CHUNKS, SUSTAIN_SECONDS};
use radio_kernels_host::streaming::{self, Engine};
use radio_kernels_host::{Error, Gpu, Result};
use std::time::Instant;

/// The observation every stage runs on, derived once from the (validated) [`Options`].
pub(super) struct Chain<'a> {
    pub options: &'a Options,
    /// The GPU the stages run on; `None`: the CPU references.
    pub gpu: Option<&'a Gpu>,
    pub array: Array,
    /// Dishes, channels and spectra of the observation.
    pub d_n: u32,
    pub n: u32,
    pub t_n: u32,
    /// The reference channel ([`Options::reference_channel`]) and its wavelength (m).
    pub k_ref: u32,
    pub lambda_ref: f64,
    pub sources: Vec<Source>,
    /// Beam directions (l, m) of every beamformer: the sources, then off-source points.
    pub directions: Vec<(f64, f64)>,
    /// Seconds of sky.
    pub duration: f64,
    /// The first of the [`CHECK_CHANNELS`](super::CHECK_CHANNELS) channels each GPU stage is
    /// checked on: `k_ref`, `k_ref + 1`.
    pub check_first: u32,
}

impl<'a> Chain<'a> {
    /// The observation `options` (already validated) describe, on `gpu` if given.
    pub fn new(options: &'a Options, gpu: Option<&'a Gpu>) -> Result<Chain<'a>> {
        let array = options.array()?;
        let t_n = u32::try_from(options.spectra())
            .map_err(|_| Error::InvalidConfig(format!("{} spectra do not fit in u32", options.spectra())))?;
        let (d_n, n) = (array.dishes(), options.channels);
        let k_ref = options.reference_channel();
        let lambda_ref = LIGHT / sky::channel_frequency(k_ref, n);
        let sources = sky::sources(options.sources, array.side(), sky::channel_frequency(k_ref, n))?;
        let directions = beam_directions(&sources, options, array.side());
        Ok(Chain {
            options,
            gpu,
            array,
            d_n,
            n,
            t_n,
            k_ref,
            lambda_ref,
            sources,
            directions,
            duration: options.duration(),
            check_first: k_ref,
        })
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

pub(super) fn percent(x: f64) -> String {
    format!("{:.3}%", 100.0 * x)
}

/// Steady-state wall-clock milliseconds per chunk of `engine`, whose input slots already
/// hold the stage's data: a warm-up, then at least [`SUSTAIN_CHUNKS`] chunks and
/// [`SUSTAIN_SECONDS`] through [`streaming::pump`] (copies in and out overlapped with the
/// kernels, outputs released unread).
pub(super) fn sustained_ms(engine: &mut dyn Engine) -> Result<f64> {
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
pub(super) fn real_time(rate: String, share: f64) -> String {
    let verdict = if share <= 1.0 { "keeps up" } else { "falls behind" };
    format!("{rate}, {} of real time: {verdict}", percent(share))
}

/// Runs `work` between two CUDA events: its result and the GPU milliseconds.
pub(super) fn timed<T>(gpu: &Gpu, work: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let timer = gpu.timer()?;
    timer.start()?;
    let out = work()?;
    Ok((out, timer.stop()? as f64))
}

/// `||got - want|| / ||want||` over the pairs (got, want).
pub(super) fn relative_l2(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (err, norm) = pairs.fold((0.0, 0.0), |(e, n), (g, w)| (e + (g - w) * (g - w), n + w * w));
    (err / norm).sqrt()
}

/// The row of a stage run on the CPU, which is its own reference.
pub(super) fn cpu_stage(name: &'static str, shape: String) -> Stage {
    Stage {
        name,
        shape,
        ms: None,
        throughput: "CPU reference".into(),
        check: Ok("(is the reference)".into()),
    }
}
