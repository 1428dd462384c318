//! The delay model, the per-spectrum schedule it gives (coarse offsets, fine delays,
//! rotations) and the lost-data flags of each output spectrum and heap.
use super::*;

/// Linear delay and fringe-phase model of one polarisation.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct DelayModel {
    /// Stream sample at which `delay` and `phase` hold.
    pub reference_sample: f64,
    /// Delay to apply at `reference_sample`, in samples (may be negative).
    pub delay: f64,
    /// Rate of change of `delay`, in samples per sample (dimensionless).
    pub delay_rate: f64,
    /// Fringe phase at `reference_sample`, in radians.
    pub phase: f64,
    /// Rate of change of `phase`, in radians per sample.
    pub phase_rate: f64,
}

/// Where spectrum m of one polarisation reads, and the rotation it gets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpectrumDelay {
    /// Coarse delay in samples (the window starts at `2 n m - coarse`).
    pub coarse: i64,
    /// Residual delay in samples, in [-1/2, 1/2].
    pub fine: f64,
    /// Fringe phase in radians.
    pub phase: f64,
}

/// The fields of a [`DelayModel`] in the order the `index` of [`Error::NonFinite`] counts them
/// (for both polarisations' models, `5 pol + field`).
pub const DELAY_MODEL_FIELDS: &str =
    "delay model [pol][reference_sample, delay, delay_rate, phase, phase_rate]";

impl DelayModel {
    /// Whether all five fields are finite (no NaN or infinity); launchers reject a model that
    /// is not with [`Error::NonFinite`].
    pub fn is_finite(&self) -> bool {
        self.first_non_finite().is_none()
    }
    /// The first field (0 ..= 4 in declaration order) that is NaN or infinite.
    pub fn first_non_finite(&self) -> Option<usize> {
        [self.reference_sample, self.delay, self.delay_rate, self.phase, self.phase_rate]
            .iter()
            .position(|v| !v.is_finite())
    }
    /// The split of the module comment for spectrum `m` (never panics; for a model or a
    /// spectrum far enough out the delay or phase may be infinite or NaN, which
    /// [`Schedule::new`] rejects).
    pub fn spectrum(&self, config: &ChannelizerConfig, m: i64) -> SpectrumDelay {
        let n = config.channels as f64;
        let t = 2.0 * n * m as f64 + n * config.taps as f64 - self.reference_sample;
        let d = self.delay + self.delay_rate * t;
        let coarse = d.round_ties_even();
        SpectrumDelay { coarse: coarse as i64, fine: d - coarse, phase: self.phase + self.phase_rate * t }
    }
}

/// Checks both delay models are finite: [`Error::NonFinite`] on [`DELAY_MODEL_FIELDS`] with
/// index `5 pol + field`.
pub(super) fn check_models(models: &[DelayModel; 2]) -> Result<()> {
    for (pol, model) in models.iter().enumerate() {
        if let Some(field) = model.first_non_finite() {
            return Err(Error::NonFinite { what: DELAY_MODEL_FIELDS, index: 5 * pol + field });
        }
    }
    Ok(())
}

/// Per-spectrum launch parameters of one output chunk, both polarisations, as the kernels
/// take them: window starts (absolute samples), fine delays in samples, and the rotations
/// `(exp(j phase), exp(-j pi fine / 4))` computed in f64 (see `radio_kernels_gpu::pfb::rotations`).
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// `starts[pol][i]`: stream sample at which spectrum `first_spectrum + i`'s window of
    /// `2 n T` samples starts, `2 n m - coarse` (may be negative near the stream's start).
    pub starts: [Vec<i64>; 2],
    /// `fine[pol][i]`: residual delay in samples, in `[-1/2, 1/2]`.
    pub fine: [Vec<f32>; 2],
    /// `rotation[pol][i]`: `[re, im]` of `exp(j phase)` followed by `[re, im]` of
    /// `exp(-j pi fine / 4)`, the step between the post-processing kernel's channel columns.
    pub rotation: [Vec<[f32; 4]>; 2],
}

impl Schedule {
    /// The chunk of `config.spectra_per_chunk()` spectra from `first_spectrum`. Errors when the
    /// configuration is invalid, a model is not finite ([`Error::NonFinite`], see
    /// [`DELAY_MODEL_FIELDS`]), a spectrum's delay or phase is not finite, a coarse delay
    /// exceeds `max_delay` (the kept input would not hold its window), or a window's samples
    /// are past the i64 stream positions.
    pub fn new(
        config: &ChannelizerConfig,
        models: &[DelayModel; 2],
        first_spectrum: i64,
    ) -> Result<Schedule> {
        let mut s = Schedule::with_capacity(0);
        s.fill(config, models, first_spectrum)?;
        Ok(s)
    }

    /// An empty schedule with room for `count` spectra per polarisation.
    pub(super) fn with_capacity(count: usize) -> Schedule {
        Schedule {
            starts: [Vec::with_capacity(count), Vec::with_capacity(count)],
            fine: [Vec::with_capacity(count), Vec::with_capacity(count)],
            rotation: [Vec::with_capacity(count), Vec::with_capacity(count)],
        }
    }

    /// [`Schedule::new`] into `self`, reusing its vectors (no allocation once they hold a
    /// chunk). On error `self` holds part of a chunk. A sine and cosine whose argument equals
    /// the previous spectrum's (bit for bit: a constant delay or phase) are reused, which gives
    /// the same bits as computing them again.
    pub(super) fn fill(
        &mut self,
        config: &ChannelizerConfig,
        models: &[DelayModel; 2],
        first_spectrum: i64,
    ) -> Result<()> {
        config.validate()?;
        check_models(models)?;
        let count = config.spectra_per_chunk() as usize;
        let n2 = 2 * config.channels as i64;
        let window = config.window() as i64;
        for p in 0..2 {
            self.starts[p].clear();
            self.fine[p].clear();
            self.rotation[p].clear();
            self.starts[p].reserve(count);
            self.fine[p].reserve(count);
            self.rotation[p].reserve(count);
        }
        let sin_cos = |memo: &mut Option<(u64, (f64, f64))>, x: f64| match *memo {
            Some((bits, value)) if bits == x.to_bits() => value,
            _ => {
                let value = x.sin_cos();
                *memo = Some((x.to_bits(), value));
                value
            }
        };
        for (p, model) in models.iter().enumerate() {
            let (mut phase_memo, mut fine_memo) = (None, None);
            for i in 0..count as i64 {
                let past = || {
                    Error::InvalidConfig(format!(
                        "spectrum {first_spectrum} + {i} lies past the i64 stream positions"
                    ))
                };
                let m = first_spectrum.checked_add(i).ok_or_else(past)?;
                let d = model.spectrum(config, m);
                if !(d.fine.is_finite() && d.phase.is_finite()) {
                    return Err(Error::InvalidConfig(format!(
                        "the delay model of polarisation {p} gives spectrum {m} a delay of {} + {} \
                         samples and a phase of {} rad: not finite",
                        d.coarse, d.fine, d.phase
                    )));
                }
                if d.coarse.unsigned_abs() > config.max_delay as u64 {
                    return Err(Error::InvalidConfig(format!(
                        "spectrum {m} of polarisation {p} asks for a coarse delay of {} samples, beyond \
                         max_delay = {}: the kept input is too short for it",
                        d.coarse, config.max_delay
                    )));
                }
                // |coarse| <= max_delay < 2^32: only the product can leave i64.
                let start = n2.checked_mul(m).and_then(|x| x.checked_sub(d.coarse)).ok_or_else(past)?;
                start.checked_add(window).ok_or_else(past)?;
                self.starts[p].push(start);
                self.fine[p].push(d.fine as f32);
                let (fs, fc) = sin_cos(&mut phase_memo, d.phase);
                let (ss, sc) = sin_cos(&mut fine_memo, -std::f64::consts::FRAC_PI_4 * d.fine);
                self.rotation[p].push([fc as f32, fs as f32, sc as f32, ss as f32]);
            }
        }
        Ok(())
    }

    /// The first sample any window reads and one past the last (both polarisations).
    pub(super) fn span(&self, window: i64) -> (i64, i64) {
        let starts = self.starts.iter().flatten();
        starts.fold((i64::MAX, i64::MIN), |(a, b), &s| (a.min(s), b.max(s + window)))
    }
}

/// Longest window [`lost_flags`] takes: the largest PFB window, `2 x 65536 x 32` samples.
pub const MAX_WINDOW: u64 = 2 * MAX_CHANNELS as u64 * MAX_TAPS as u64;

/// Lost-data flags of spectra whose windows start at `starts[pol][i]`: a spectrum is
/// lost when either polarisation's window `[start, start + window)` touches a sample before
/// the stream or a packet `present[pol]` marks missing (packets past the end of `present`
/// count as missing too). Returns (per spectrum, per heap of `spectra_per_heap`; a last,
/// partial heap gets its own flag). Errors when `packet_samples` or `spectra_per_heap` is 0,
/// `window` is 0 or past [`MAX_WINDOW`], the polarisations have different spectrum counts, or a
/// window ends past the i64 stream positions.
pub fn lost_flags(
    starts: &[Vec<i64>; 2],
    window: u64,
    packet_samples: u32,
    present: [&dyn Fn(i64) -> bool; 2],
    spectra_per_heap: u32,
) -> Result<(Vec<bool>, Vec<bool>)> {
    let count = check_lost_flag_args(starts, window, packet_samples, spectra_per_heap)?;
    let p = packet_samples as i64;
    let mut spectra = Vec::with_capacity(count);
    for (&s0, &s1) in starts[0].iter().zip(&starts[1]) {
        let mut lost = false;
        for (pol, start) in [s0, s1].into_iter().enumerate() {
            let end = start.checked_add(window as i64 - 1).ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "lost_flags: window from {start} ends past the i64 stream positions"
                ))
            })?;
            lost |= start < 0 || (start / p..=end / p).any(|packet| !present[pol](packet));
        }
        spectra.push(lost);
    }
    let heaps = spectra.chunks(spectra_per_heap as usize).map(|h| h.iter().any(|&l| l)).collect();
    Ok((spectra, heaps))
}

/// The argument checks of [`lost_flags`] (and its streaming form): positive packet and heap
/// sizes, a window within [`MAX_WINDOW`], as many window starts for both polarisations;
/// returns the number of spectra.
pub(super) fn check_lost_flag_args(
    starts: &[Vec<i64>; 2],
    window: u64,
    packet_samples: u32,
    spectra_per_heap: u32,
) -> Result<usize> {
    if packet_samples == 0 || spectra_per_heap == 0 {
        return Err(Error::InvalidConfig(format!(
            "lost_flags needs positive packet_samples and spectra_per_heap, got {packet_samples} and \
             {spectra_per_heap}"
        )));
    }
    if !(1..=MAX_WINDOW).contains(&window) {
        return Err(Error::InvalidConfig(format!(
            "lost_flags: window must be 1..={MAX_WINDOW}, got {window}"
        )));
    }
    let count = starts[0].len();
    if starts[1].len() != count {
        return Err(Error::ShapeMismatch {
            what: "lost_flags window starts of polarisation 1",
            expected: count,
            actual: starts[1].len(),
        });
    }
    Ok(count)
}

/// [`lost_flags`] into `spectra` and `heaps` (cleared first; no allocation once they hold a
/// chunk), with `arrived(pol, packet)`; in time linear in the spectra and the packets the
/// windows cover rather than in spectra x packets per window (the streaming path's host work).
/// Errors as [`lost_flags`].
#[allow(clippy::too_many_arguments)]
pub(super) fn lost_flags_into(
    starts: &[Vec<i64>; 2],
    window: u64,
    packet_samples: u32,
    spectra_per_heap: u32,
    arrived: impl Fn(usize, i64) -> bool,
    spectra: &mut Vec<bool>,
    heaps: &mut Vec<bool>,
) -> Result<()> {
    let count = check_lost_flag_args(starts, window, packet_samples, spectra_per_heap)?;
    let p = packet_samples as i64;
    spectra.clear();
    spectra.resize(count, false);
    for (pol, starts) in starts.iter().enumerate() {
        let mut scan = MissingScan::default();
        for (lost, &start) in spectra.iter_mut().zip(starts) {
            let end = start.checked_add(window as i64 - 1).ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "lost_flags: window from {start} ends past the i64 stream positions"
                ))
            })?;
            if start < 0 || scan.any_missing(start / p, end / p, |packet| !arrived(pol, packet)) {
                *lost = true;
            }
        }
    }
    heaps.clear();
    heaps.extend(spectra.chunks(spectra_per_heap as usize).map(|h| h.iter().any(|&l| l)));
    Ok(())
}

/// Packets `[from, to)` scanned, and the first missing one among them: answers "is a packet
/// of `[a, b]` missing" for windows that mostly move forward, each packet looked at about once.
#[derive(Default)]
pub(super) struct MissingScan {
    pub(super) from: i64,
    pub(super) to: i64,
    pub(super) first: Option<i64>,
}

impl MissingScan {
    pub(super) fn any_missing(&mut self, a: i64, b: i64, missing: impl Fn(i64) -> bool) -> bool {
        // Invariant: `first` is the first missing packet of `[from, to)`, if any.
        if a < self.from || a > self.to || self.first.is_some_and(|k| k < a) {
            *self = MissingScan { from: a, to: a, first: None };
        }
        // Now `from <= a <= to`, and no packet of `[a, first)` (or `[a, to)`) is missing.
        if let Some(k) = self.first {
            return k <= b;
        }
        while self.to <= b {
            let packet = self.to;
            self.to += 1;
            if missing(packet) {
                self.first = Some(packet);
                return true;
            }
        }
        false
    }
}
