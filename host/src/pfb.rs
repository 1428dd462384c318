//! PFB channelizer (F-engine; Merry, "Efficient channelization on a graphics processing
//! unit"): configuration and validation, sample packing, PFB weights, the delay model,
//! lost-data flags, the f64 CPU reference, the [`Channelizer`] that runs the GPU path on a
//! stream of chunks, and its streaming engine [`ChannelizerStream`] (pinned rings, copies
//! overlapped with the kernels). The GPU path is the three-kernel path (FIR, cuFFT C2C,
//! post-processing) or the fused path ([`PfbPath::Fused`], n <= 4096: FIR, FFT and
//! post-processing in one launch). The fused path runs, on sm_90 at n = 1024, the cluster
//! kernel (`radio_kernels_gpu::pfb::cluster`, at most 16 taps and 12-bit input, heaps of whole
//! batches of 8 spectra), the default there ([`PfbPath::for_config`]); otherwise the sm_80
//! fused kernel (`radio_kernels_gpu::pfb::fused`), slower than the three kernels and so only
//! when asked. Device side, formulas and layouts: `radio_kernels_gpu::pfb`.
//!
//! Time: stream sample 0 is the first sample of the first chunk; spectrum m's window nominally
//! starts at sample `2 n m` (critically sampled, sec. 2.1). The delay model of each
//! polarisation is evaluated at the window's nominal centre `2 n m + n T`; the delay `d` (in
//! samples, the delay to apply: output(t) = input(t - d)) is split into `coarse = round(d)`
//! (ties to even), applied as an index offset (the window starts at `2 n m - coarse`), and
//! `fine = d - coarse` in [-1/2, 1/2], applied with the fringe phase as
//! `exp(j (phase - pi k fine / n))` on channel k (sec. 2.1 step 4).
//!
//! Streaming (Fig. 2): the channelizer keeps, per polarisation, a device buffer holding the
//! samples from shortly before the next output chunk's earliest window to the newest input.
//! Each output chunk (`heaps_per_chunk` heaps of `spectra_per_heap` spectra) is computed by
//! the same launches from that buffer as soon as its last window has arrived, so a
//! stream cut into any chunk size gives the same bytes as one long buffer. A push is checked
//! whole (lengths, room, every schedule it needs) before anything changes, so an invalid push
//! (e.g. a delay past `max_delay`) leaves the stream as it was; only a device error part-way
//! breaks it, and then it refuses further pushes until `reset` ([`Channelizer::push`]).
//! One push completes at most [`ChannelizerConfig::max_outputs_per_push`] output chunks.
//!
//! Sizes: [`ChannelizerConfig::validate`] computes every size in 128-bit arithmetic and
//! rejects an output chunk past 2^31 complex values ([`MAX_OUTPUT_VALUES`]: int8 output up to
//! 2^32 bytes, f32 intermediates up to 16 GiB each) and a kept input past 2^32 - 32 samples
//! per polarisation ([`MAX_CAPACITY_SAMPLES`]: the kernels take window offsets as u32
//! samples). Past those, every device index (output bytes, intermediate values, input bits and
//! words) is 64-bit. The size helpers never panic: on a configuration `validate` rejects they
//! saturate (each says how).
//!
//! Non-finite values: weights, gains and delay models must be finite ([`Error::NonFinite`],
//! naming the argument and the first bad index) and weights and gains at most
//! [`MAX_COEFFICIENT`] = 2^32 in magnitude, which keeps every f32 product of the GPU path
//! finite; a delay model whose delay or phase becomes non-finite at some spectrum is rejected
//! by [`Schedule::new`]. So the quantiser never sees NaN or an infinity from accepted inputs.
//! Were it to, the kernels' quantiser and [`quantise_reference`] agree: an infinity saturates
//! to `+-max` and NaN gives 0, and both count as clipped.
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{
    allow_dynamic_shared, launch_1d, DeviceBuffer, DeviceBufferMut, Gpu, LaunchConfig, PushKernelArg, Stream,
};
use crate::size;
use cudarc::cufft::{result as cufft, sys as cufft_sys};
use cudarc::driver::{CudaFunction, DevicePtrMut};
use radio_kernels_gpu::pfb as layout;
use radio_kernels_gpu::pfb::cluster as cluster_layout;
use radio_kernels_gpu::pfb::fused as fused_layout;
pub use radio_kernels_gpu::pfb::fused::{FUSED_MAX_CHANNELS, FUSED_THREADS};
pub use radio_kernels_gpu::pfb::{
    BITS, FIR_VARIANTS, MAX_CHANNELS, MAX_TAPS, MIN_CHANNELS, SAMPLE_GRANULE, SPECTRA_PER_POST_THREAD,
    THREADS, UNZIP,
};
pub use rustfft::num_complex::Complex;
use rustfft::FftPlanner;

mod streaming;
pub use streaming::{ChannelizerStream, PfbInput, PfbOutput, MAX_OUTPUT_SLOTS};

/// Output sample format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// Complex int8, saturated to [-127, 127]: 2 bytes per value.
    Ci8,
    /// Complex int4, saturated to [-7, 7]: 1 byte per value, real in the low nibble.
    Ci4,
}

impl OutputFormat {
    pub fn bytes_per_value(self) -> usize {
        match self {
            OutputFormat::Ci8 => 2,
            OutputFormat::Ci4 => 1,
        }
    }
    pub fn max(self) -> i32 {
        match self {
            OutputFormat::Ci8 => 127,
            OutputFormat::Ci4 => 7,
        }
    }
}

/// What one channelizer (one antenna, two polarisations) computes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelizerConfig {
    /// Output channels n: a power of two, 64 ..= 65536 (the FFT is 2n real points).
    pub channels: u32,
    /// PFB taps T, 1 ..= 32.
    pub taps: u32,
    /// Input sample width: 4, 8, 10, 12 or 16 bits, packed MSB first.
    pub bits: u32,
    /// Spectra per output heap S (a multiple of `SPECTRA_PER_POST_THREAD` = 4; MeerKAT: 256).
    pub spectra_per_heap: u32,
    /// Heaps per output chunk (one GPU launch of each kernel).
    pub heaps_per_chunk: u32,
    /// Input samples per polarisation in each pushed chunk: a multiple of `packet_samples`
    /// and of 32 (so chunks are whole u32 words at every width).
    pub chunk_samples: u32,
    /// Samples per input packet, the unit of lost-data marking (MeerKAT: 4096).
    pub packet_samples: u32,
    /// Largest |coarse delay| in samples the stream may ask for; sizes the kept overlap.
    pub max_delay: u32,
    pub output: OutputFormat,
}

impl ChannelizerConfig {
    /// MeerKAT-like defaults for `channels`: 16 taps, 10 bits, 256 spectra per heap, one heap
    /// per output chunk, 4096-sample packets, input chunks of one heap's samples (clamped to
    /// 2^16 ..= 2^24), int8 output, coarse delays up to 65536 samples.
    pub fn new(channels: u32) -> ChannelizerConfig {
        let heap_samples = 2 * channels as u64 * 256;
        ChannelizerConfig {
            channels,
            taps: 16,
            bits: 10,
            spectra_per_heap: 256,
            heaps_per_chunk: 1,
            chunk_samples: heap_samples.clamp(1 << 16, 1 << 24) as u32,
            packet_samples: 4096,
            max_delay: 65536,
            output: OutputFormat::Ci8,
        }
    }

    /// Checks every parameter; the first violation is returned as `InvalidConfig`. Every size
    /// is computed in 128-bit arithmetic here, so a configuration this accepts has sizes that
    /// fit the helpers' types and the kernels' index widths.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::InvalidConfig(message));
        let n = self.channels;
        if !n.is_power_of_two() || !(MIN_CHANNELS..=MAX_CHANNELS).contains(&n) {
            return bad(format!(
                "channels must be a power of two in {MIN_CHANNELS}..={MAX_CHANNELS}, got {n}"
            ));
        }
        if !(1..=MAX_TAPS).contains(&self.taps) {
            return bad(format!("taps must be 1..={MAX_TAPS}, got {}", self.taps));
        }
        if !BITS.contains(&self.bits) {
            return bad(format!("bits must be one of {BITS:?}, got {}", self.bits));
        }
        if self.spectra_per_heap == 0 || !self.spectra_per_heap.is_multiple_of(SPECTRA_PER_POST_THREAD) {
            return bad(format!(
                "spectra_per_heap must be a positive multiple of {SPECTRA_PER_POST_THREAD}, got {}",
                self.spectra_per_heap
            ));
        }
        if self.heaps_per_chunk == 0 {
            return bad("heaps_per_chunk must be positive".into());
        }
        if self.packet_samples == 0 {
            return bad("packet_samples must be positive".into());
        }
        if self.chunk_samples == 0
            || !self.chunk_samples.is_multiple_of(self.packet_samples)
            || !self.chunk_samples.is_multiple_of(SAMPLE_GRANULE)
        {
            return bad(format!(
                "chunk_samples must be a positive multiple of packet_samples ({}) and of {SAMPLE_GRANULE}, got {}",
                self.packet_samples, self.chunk_samples
            ));
        }
        let spectra = self.spectra_per_chunk();
        let values = self.output_values_exact();
        if values > MAX_OUTPUT_VALUES as u128 {
            return bad(format!(
                "an output chunk of {spectra} spectra x {n} channels x 2 polarisations is {values} complex \
                 values, past 2^31 (an int8 output of 2^32 bytes and f32 intermediates of 16 GiB each: the \
                 largest chunk the GPU tests cover); use fewer heaps per chunk"
            ));
        }
        let capacity = self.capacity_exact();
        if capacity > MAX_CAPACITY_SAMPLES as u128 {
            return bad(format!(
                "the kept input (one chunk's windows, 2 x max_delay = {}, one pushed chunk and {} \
                 samples of alignment slack) would hold {capacity} samples per polarisation, past \
                 2^32 - 32: the kernels take window offsets in that buffer as 32-bit sample indices; \
                 lower max_delay, chunk_samples or heaps_per_chunk",
                2 * self.max_delay as u64,
                2 * SAMPLE_GRANULE
            ));
        }
        Ok(())
    }

    /// Spectra of one output chunk, `spectra_per_heap x heaps_per_chunk` (exact in u64 for any
    /// field values; at most 2^24 for a valid configuration).
    pub fn spectra_per_chunk(&self) -> u64 {
        self.spectra_per_heap as u64 * self.heaps_per_chunk as u64
    }
    /// Samples of one PFB window, `2 n T`: exact where it fits u64 (always for a valid
    /// configuration, at most 2^22), else saturated at `u64::MAX`.
    pub fn window(&self) -> u64 {
        (2 * self.channels as u64).saturating_mul(self.taps as u64)
    }
    /// Bytes of one pushed chunk per polarisation, `chunk_samples x bits / 8` (exact in u64 for
    /// any field values; saturated at `usize::MAX` only where usize is narrower).
    pub fn chunk_bytes(&self) -> usize {
        size::saturate(self.chunk_samples as u128 * self.bits as u128 / 8)
    }
    /// Packets of one pushed chunk per polarisation, `chunk_samples / packet_samples`; 0 when
    /// `packet_samples` is 0 (a configuration [`validate`](Self::validate) rejects).
    pub fn chunk_packets(&self) -> usize {
        self.chunk_samples.checked_div(self.packet_samples).map_or(0, |p| p as usize)
    }
    /// Complex values of one output chunk (both polarisations), `2 n x spectra_per_chunk`:
    /// exact where it fits usize (always for a valid configuration, at most 2^31), else
    /// saturated at `usize::MAX`.
    pub fn output_values(&self) -> usize {
        size::saturate(self.output_values_exact())
    }
    /// Output bytes of one chunk, [`output_values`](Self::output_values) times the format's
    /// bytes per value: exact where it fits usize (always for a valid configuration, at most
    /// 2^32), else saturated at `usize::MAX`.
    pub fn output_bytes(&self) -> usize {
        size::saturate(self.output_values_exact() * self.output.bytes_per_value() as u128)
    }
    /// Samples the device buffer of each polarisation holds: one output chunk's windows,
    /// the delay range on both sides, one pushed chunk, and word-alignment slack, rounded up
    /// to whole granules: `2n (spectra - 1) + 2nT + 2 max_delay + chunk_samples + 64`. Below
    /// 2^32 for a valid configuration; for one [`validate`](Self::validate) rejects, exact where
    /// it fits u64 (with no spectra, the `2n (spectra - 1)` term is 0), else `u64::MAX`.
    pub fn capacity_samples(&self) -> u64 {
        u64::try_from(self.capacity_exact()).unwrap_or(u64::MAX)
    }
    /// The most output chunks one pushed (or submitted) input chunk can complete,
    /// `ceil((chunk_samples + 2 max_delay) / (2 n spectra_per_chunk))`, at least 1.
    ///
    /// Output chunk j is complete once the stream reaches its last window's end,
    /// `2n ((j + 1) S - 1) + 2nT - coarse` for some coarse delay in `[-max_delay, max_delay]`
    /// (any delay model, changed at any time). A push that moves the end from `E` to `E + C`
    /// completes chunks `j0 ..= j1` where chunk `j0` was not complete at `E` (so its nominal
    /// end passes `E - max_delay`) and chunk `j1` is at `E + C` (so its nominal end is at most
    /// `E + C + max_delay`): `2 n S (j1 - j0) < C + 2 max_delay`. With no spectra or channels
    /// (a configuration [`validate`](Self::validate) rejects) it saturates at `usize::MAX`.
    pub fn max_outputs_per_push(&self) -> usize {
        let per_chunk = 2 * self.channels as u128 * self.spectra_per_chunk() as u128;
        if per_chunk == 0 {
            return usize::MAX;
        }
        let span = self.chunk_samples as u128 + 2 * self.max_delay as u128;
        size::saturate(span.div_ceil(per_chunk).max(1))
    }
    /// Index of output value (heap, channel, spectrum in heap, pol) in a chunk's output,
    /// `((heap n + channel) S + s) 2 + pol`: exact where it fits usize (always for in-range
    /// arguments of a valid configuration), else saturated at `usize::MAX`; arguments are not
    /// checked against the configuration.
    pub fn output_index(&self, heap: u32, channel: u32, s: u32, pol: u32) -> usize {
        let n = self.channels as u128;
        let index = ((heap as u128 * n + channel as u128) * self.spectra_per_heap as u128 + s as u128) * 2
            + pol as u128;
        size::saturate(index)
    }

    /// `2 n x spectra_per_chunk`, exact.
    fn output_values_exact(&self) -> u128 {
        2 * self.channels as u128 * self.spectra_per_chunk() as u128
    }
    /// [`capacity_samples`](Self::capacity_samples), exact.
    fn capacity_exact(&self) -> u128 {
        let n2 = 2 * self.channels as u128;
        let span = n2 * (self.spectra_per_chunk() as u128).saturating_sub(1)
            + n2 * self.taps as u128
            + 2 * self.max_delay as u128;
        (span + self.chunk_samples as u128 + 2 * SAMPLE_GRANULE as u128)
            .next_multiple_of(SAMPLE_GRANULE as u128)
    }
    /// Spectra per chunk as the kernels take them (u32; only for a validated configuration,
    /// where it is at most 2^24).
    fn spectra_u32(&self) -> u32 {
        u32::try_from(self.spectra_per_chunk()).unwrap_or(u32::MAX)
    }
}

/// Most complex values of one output chunk (both polarisations) [`ChannelizerConfig::validate`]
/// accepts: 2^31 (int8: 2^32 bytes).
pub const MAX_OUTPUT_VALUES: u64 = 1 << 31;
/// Most samples per polarisation the kept input may hold: the largest multiple of
/// [`SAMPLE_GRANULE`] below 2^32, since the kernels take window offsets as u32 samples.
pub const MAX_CAPACITY_SAMPLES: u64 = (1 << 32) - SAMPLE_GRANULE as u64;

// ---------------------------------------------------------------------------------------------
// Sample packing

/// Packs `samples` (each in the signed `bits`-bit range) MSB first, as the digitiser does.
/// Errors on an unsupported width or an out-of-range sample.
pub fn pack_samples(samples: &[i32], bits: u32) -> Result<Vec<u8>> {
    if !BITS.contains(&bits) {
        return Err(Error::InvalidConfig(format!("bits must be one of {BITS:?}, got {bits}")));
    }
    let (lo, hi) = (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1);
    if let Some(bad) = samples.iter().find(|&&s| s < lo || s > hi) {
        return Err(Error::InvalidConfig(format!("sample {bad} does not fit {bits} bits")));
    }
    let total_bits = samples.len().checked_mul(bits as usize).ok_or_else(|| {
        Error::InvalidConfig(format!("{} samples of {bits} bits overflow usize bits", samples.len()))
    })?;
    let mut out = vec![0u8; total_bits.div_ceil(8)];
    let mut bit = 0usize;
    for &s in samples {
        for b in (0..bits).rev() {
            if (s >> b) & 1 == 1 {
                out[bit / 8] |= 0x80 >> (bit % 8);
            }
            bit += 1;
        }
    }
    Ok(out)
}

/// The reference unpacker, one bit at a time: sample `i` of MSB-first packed `bytes`. Errors
/// on an unsupported width or when sample `i` does not lie wholly inside `bytes`.
pub fn unpack_sample(bytes: &[u8], bits: u32, i: usize) -> Result<i32> {
    if !BITS.contains(&bits) {
        return Err(Error::InvalidConfig(format!("bits must be one of {BITS:?}, got {bits}")));
    }
    let end = i.checked_add(1).and_then(|k| k.checked_mul(bits as usize));
    if end.is_none_or(|end| end.div_ceil(8) > bytes.len()) {
        return Err(Error::InvalidConfig(format!(
            "sample {i} of {bits} bits lies past the {} packed bytes",
            bytes.len()
        )));
    }
    let mut v = 0i32;
    for b in 0..bits as usize {
        let bit = i * bits as usize + b;
        v = (v << 1) | ((bytes[bit / 8] >> (7 - bit % 8)) & 1) as i32;
    }
    // Sign-extend from `bits`.
    Ok((v << (32 - bits)) >> (32 - bits))
}

// ---------------------------------------------------------------------------------------------
// Weights

/// Largest magnitude [`Channelizer`] and [`reference_chunk`] accept for a PFB weight or a gain
/// component (2^32). With samples below 2^15 in magnitude, at most 32 taps and a 2^17-point
/// transform, every f32 intermediate of the GPU path then stays below 2^40 x 2^32 x 2^32 =
/// 2^104, far from f32's 2^128: finite inputs give finite products, so the quantiser never
/// sees NaN or an infinity (see the module documentation).
pub const MAX_COEFFICIENT: f32 = 4_294_967_296.0;

/// The first value of `values` (flattened) that is not finite ([`Error::NonFinite`]) or whose
/// magnitude passes [`MAX_COEFFICIENT`] (`InvalidConfig`).
fn check_coefficients(what: &'static str, values: impl Iterator<Item = f32>) -> Result<()> {
    for (index, v) in values.enumerate() {
        if !v.is_finite() {
            return Err(Error::NonFinite { what, index });
        }
        if v.abs() > MAX_COEFFICIENT {
            return Err(Error::InvalidConfig(format!(
                "{what}[{index}] = {v:e} is beyond 2^32 in magnitude: the f32 FIR, FFT and gain \
                 products could overflow"
            )));
        }
    }
    Ok(())
}

/// The PFB weights `w[t + 2n j]` (length `2 n T`): a Hann window times a sinc whose main lobe
/// spans one channel, computed in f64 and normalised to unit sum of squares (so white noise
/// keeps its power through the FIR), then rounded to f32. Defined for channel and tap counts
/// a valid [`ChannelizerConfig`] may hold (1 ..= 65536 channels, 1 ..= 32 taps): outside that
/// range (including 0) it returns an empty vector, which every caller that needs `2 n T`
/// weights rejects by length.
pub fn hann_sinc_weights(channels: u32, taps: u32) -> Vec<f32> {
    if !(1..=MAX_CHANNELS).contains(&channels) || !(1..=MAX_TAPS).contains(&taps) {
        return Vec::new();
    }
    let step = 2.0 * channels as f64;
    let len = 2 * channels as usize * taps as usize;
    let raw: Vec<f64> = (0..len)
        .map(|i| {
            let i = i as f64;
            let hann = (std::f64::consts::PI * (i + 0.5) / len as f64).sin().powi(2);
            let x = (i + 0.5) / step - taps as f64 / 2.0;
            let sinc =
                if x == 0.0 { 1.0 } else { (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x) };
            hann * sinc
        })
        .collect();
    let norm = raw.iter().map(|w| w * w).sum::<f64>().sqrt();
    raw.iter().map(|w| (w / norm) as f32).collect()
}

// ---------------------------------------------------------------------------------------------
// Delay model

/// Linear delay and fringe-phase model of one polarisation.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct DelayModel {
    /// Stream sample at which `delay` and `phase` hold.
    pub reference_sample: f64,
    /// Delay to apply, in samples (may be negative), and its rate in samples per sample.
    pub delay: f64,
    pub delay_rate: f64,
    /// Fringe phase in radians and its rate in radians per sample.
    pub phase: f64,
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
fn check_models(models: &[DelayModel; 2]) -> Result<()> {
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
    pub starts: [Vec<i64>; 2],
    pub fine: [Vec<f32>; 2],
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
    fn with_capacity(count: usize) -> Schedule {
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
    fn fill(
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
    fn span(&self, window: i64) -> (i64, i64) {
        let starts = self.starts.iter().flatten();
        starts.fold((i64::MAX, i64::MIN), |(a, b), &s| (a.min(s), b.max(s + window)))
    }
}

/// Longest window [`lost_flags`] takes: the largest PFB window, `2 x 65536 x 32` samples.
pub const MAX_WINDOW: u64 = 2 * MAX_CHANNELS as u64 * MAX_TAPS as u64;

/// Lost-data flags (sec. 3.7) of spectra whose windows start at `starts[pol][i]`: a spectrum is
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
fn check_lost_flag_args(
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
fn lost_flags_into(
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
struct MissingScan {
    from: i64,
    to: i64,
    first: Option<i64>,
}

impl MissingScan {
    fn any_missing(&mut self, a: i64, b: i64, missing: impl Fn(i64) -> bool) -> bool {
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

// ---------------------------------------------------------------------------------------------
// CPU reference

/// The reference result of one output chunk.
#[derive(Clone, Debug)]
pub struct Reference {
    /// Values before quantisation, f64, `[heap][channel][spectrum][pol]`.
    pub values: Vec<Complex<f64>>,
    /// Quantised output bytes in the kernel's format.
    pub output: Vec<u8>,
    /// Saturated values per `[heap][pol]`.
    pub saturated: Vec<u32>,
    pub lost_spectra: Vec<bool>,
    pub lost_heaps: Vec<bool>,
}

/// Round half to even and saturate to `[-max, max]`, in f64; (value, clipped). As the kernels'
/// quantiser (`radio_kernels_gpu::pfb::quantise_complex`): an infinity saturates and counts as
/// clipped, NaN gives 0 and counts as clipped. (Neither arises from inputs the channelizer
/// accepts: see the module documentation.) A negative `max` is taken as 0, as the kernels'
/// `saturate_symmetric` does.
pub fn quantise_reference(v: f64, max: i32) -> (i32, bool) {
    let max = max.max(0);
    let r = v.round_ties_even();
    if r.is_nan() {
        (0, true)
    } else if r > max as f64 {
        (max, true)
    } else if r < -(max as f64) {
        (-max, true)
    } else {
        (r as i32, false)
    }
}

/// The f64 reference of output chunk `first_spectrum ..` (the module formula, plainly): for
/// each polarisation and spectrum, unpack the window from the whole stream `samples[pol]`
/// (samples before the stream are 0), FIR with `weights`, a 2n-point FFT (rustfft), the fine
/// delay, fringe phase and gain rotation, quantisation. `present[pol][packet]` marks arrived
/// packets for the flags. `gains[pol][channel]`.
pub fn reference_chunk(
    config: &ChannelizerConfig,
    weights: &[f32],
    gains: &[[f32; 2]],
    models: &[DelayModel; 2],
    samples: [&[i32]; 2],
    present: [&[bool]; 2],
    first_spectrum: i64,
) -> Result<Reference> {
    config.validate()?;
    let n = config.channels as usize;
    check_weights(config, weights)?;
    check_gains(config, gains)?;
    let schedule = Schedule::new(config, models, first_spectrum)?;
    let window = config.window() as i64;
    for (pol, (starts, samples)) in schedule.starts.iter().zip(samples).enumerate() {
        // The samples the windows read (those before the stream are zeros).
        let last = starts.iter().map(|&s| s + window).max().unwrap_or(0);
        if last > samples.len() as i64 {
            return Err(Error::InvalidConfig(format!(
                "samples of polarisation {pol} hold {} samples; the chunk's windows read up to sample {}",
                samples.len(),
                last - 1
            )));
        }
    }
    let count = config.spectra_per_chunk() as usize;
    let mut fft = FftPlanner::<f64>::new().plan_fft_forward(2 * n);
    let mut values = vec![Complex::new(0.0, 0.0); config.output_values()];
    let mut buffer = vec![Complex::new(0.0, 0.0); 2 * n];
    for pol in 0..2 {
        for i in 0..count {
            let m = first_spectrum + i as i64;
            let d = models[pol].spectrum(config, m);
            let start = schedule.starts[pol][i];
            let sample = |t: i64| if t < 0 { 0.0 } else { samples[pol][t as usize] as f64 };
            for (t, b) in buffer.iter_mut().enumerate() {
                let g: f64 = (0..config.taps as usize)
                    .map(|j| sample(start + (t + 2 * n * j) as i64) * weights[t + 2 * n * j] as f64)
                    .sum();
                *b = Complex::new(g, 0.0);
            }
            fft.process(&mut buffer);
            let (heap, s) = (i as u32 / config.spectra_per_heap, i as u32 % config.spectra_per_heap);
            for (k, x) in buffer[..n].iter().enumerate() {
                let angle = d.phase - std::f64::consts::PI * k as f64 * d.fine / n as f64;
                let g = gains[pol * n + k];
                let y = x * Complex::from_polar(1.0, angle) * Complex::new(g[0] as f64, g[1] as f64);
                values[config.output_index(heap, k as u32, s, pol as u32)] = y;
            }
        }
    }
    fft = FftPlanner::<f64>::new().plan_fft_forward(1); // release the large plan early
    drop(fft);
    let max = config.output.max();
    let mut output = vec![0u8; config.output_bytes()];
    let mut saturated = vec![0u32; 2 * config.heaps_per_chunk as usize];
    let per_heap = config.spectra_per_heap as usize * n * 2;
    for (i, y) in values.iter().enumerate() {
        let (re, cr) = quantise_reference(y.re, max);
        let (im, ci) = quantise_reference(y.im, max);
        if cr || ci {
            saturated[(i / per_heap) * 2 + i % 2] += 1;
        }
        match config.output {
            OutputFormat::Ci8 => {
                output[2 * i] = re as i8 as u8;
                output[2 * i + 1] = im as i8 as u8;
            }
            OutputFormat::Ci4 => output[i] = radio_kernels_gpu::packing::pack_ci4(re as i8, im as i8),
        }
    }
    let arrived =
        |pol: usize| move |packet: i64| packet >= 0 && present[pol].get(packet as usize) == Some(&true);
    let (a0, a1) = (arrived(0), arrived(1));
    let (lost_spectra, lost_heaps) = lost_flags(
        &schedule.starts,
        config.window(),
        config.packet_samples,
        [&a0, &a1],
        config.spectra_per_heap,
    )?;
    Ok(Reference { values, output, saturated, lost_spectra, lost_heaps })
}

/// `weights` are `2 n T` values, finite and within [`MAX_COEFFICIENT`].
fn check_weights(config: &ChannelizerConfig, weights: &[f32]) -> Result<()> {
    let expected = config.window() as usize;
    if weights.len() != expected {
        return Err(Error::ShapeMismatch { what: "PFB weights", expected, actual: weights.len() });
    }
    check_coefficients("PFB weights", weights.iter().copied())
}

/// `gains` are `2 n` complex values `[pol][channel]`, finite and within [`MAX_COEFFICIENT`]
/// (the index of an error is the f32 component's, `2 (pol n + channel) + (0 re, 1 im)`).
fn check_gains(config: &ChannelizerConfig, gains: &[[f32; 2]]) -> Result<()> {
    let expected = 2 * config.channels as usize;
    if gains.len() != expected {
        return Err(Error::ShapeMismatch { what: "PFB gains", expected, actual: gains.len() });
    }
    check_coefficients("PFB gains (re, im)", gains.iter().flatten().copied())
}

/// Complex value `i` of a chunk's output bytes as (re, im). An `i` past the output (which
/// holds `output.len() / format.bytes_per_value()` values) reads as `(0, 0)`: check it against
/// [`ChannelizerConfig::output_values`] first.
pub fn output_value(output: &[u8], format: OutputFormat, i: usize) -> (i32, i32) {
    let byte = |k: Option<usize>| k.and_then(|k| output.get(k)).copied();
    match format {
        OutputFormat::Ci8 => {
            let first = i.checked_mul(2);
            match (byte(first), byte(first.and_then(|k| k.checked_add(1)))) {
                (Some(re), Some(im)) => (re as i8 as i32, im as i8 as i32),
                _ => (0, 0),
            }
        }
        OutputFormat::Ci4 => match byte(Some(i)) {
            Some(b) => {
                let (re, im) = radio_kernels_gpu::packing::unpack_ci4(b);
                (re as i32, im as i32)
            }
            None => (0, 0),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// GPU: cuFFT plan

/// A batched C2C cuFFT plan, executed on the stream of each call.
struct FftPlan {
    handle: cufft_sys::cufftHandle,
    /// The stream the plan is set to (`CUstream` as an address, so the plan stays `Send`).
    stream: usize,
}

impl FftPlan {
    fn new(gpu: &Gpu, size: u32, batch: u32) -> Result<FftPlan> {
        // SAFETY: only probes whether the shared library can be opened.
        if !unsafe { cufft_sys::is_culib_present() } {
            return Err(Error::MissingLibrary("cufft"));
        }
        gpu.context().bind_to_thread().during("binding the CUDA context")?;
        let mut n = [size as i32];
        // SAFETY: a 1-D contiguous batched layout (null embeds), sizes checked by the config.
        let handle = unsafe {
            cufft::plan_many(
                1,
                n.as_mut_ptr(),
                std::ptr::null_mut(),
                1,
                size as i32,
                std::ptr::null_mut(),
                1,
                size as i32,
                cufft_sys::cufftType::CUFFT_C2C,
                batch as i32,
            )
        }
        .map_err(fft_error("creating the cuFFT plan"))?;
        let mut plan = FftPlan { handle, stream: usize::MAX };
        plan.set_stream(gpu.stream())?;
        Ok(plan)
    }

    /// Makes the plan run on `stream` (`cufftSetStream`) unless it already does.
    fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        let raw = stream.cu_stream();
        if self.stream != raw as usize {
            // SAFETY: the stream is alive and belongs to the plan's context; every execution
            // sets its own stream first, so a stream dropped later is never used by the plan.
            unsafe { cufft::set_stream(self.handle, raw as _) }
                .map_err(fft_error("setting the cuFFT stream"))?;
            self.stream = raw as usize;
        }
        Ok(())
    }

    /// Enqueues the forward transform of `input` into `output` on `stream`.
    fn forward(
        &mut self,
        stream: &Stream,
        input: &mut DeviceBuffer<[f32; 2]>,
        output: &mut DeviceBuffer<[f32; 2]>,
    ) -> Result<()> {
        stream.context().bind_to_thread().during("binding the CUDA context")?;
        self.set_stream(stream)?;
        let (i, _a) = input.arg_mut().device_ptr_mut(stream);
        let (o, _b) = output.arg_mut().device_ptr_mut(stream);
        // SAFETY: both buffers hold `size * batch` complex values (the Channelizer sizes them).
        unsafe { cufft::exec_c2c(self.handle, i as *mut _, o as *mut _, -1) }
            .map_err(fft_error("running the C2C transform"))
    }
}

/// The typed error of a failed cuFFT call.
fn fft_error(during: &'static str) -> impl Fn(cufft::CufftError) -> Error {
    move |e| Error::Library { library: "cufft", during, code: e.0 as i32 }
}

impl Drop for FftPlan {
    fn drop(&mut self) {
        // SAFETY: the handle came from plan_many and is destroyed once.
        let _ = unsafe { cufft::destroy(self.handle) };
    }
}

// ---------------------------------------------------------------------------------------------
// GPU: the channelizer

/// Which kernels a [`Channelizer`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfbPath {
    /// One kernel (FIR, FFT and post-processing with the spectra in shared memory), for
    /// n <= [`FUSED_MAX_CHANNELS`]: the cluster kernel where it applies (sm_90, n = 1024,
    /// at most 16 taps and 12-bit input, heaps of whole batches of 8 spectra), else the sm_80
    /// fused kernel.
    Fused,
    /// FIR, cuFFT C2C and post-processing kernels (any n).
    ThreeKernel,
}

impl PfbPath {
    /// The default: the fused path where the cluster kernel applies (sm_90, n = 1024, at most
    /// 16 taps and 12-bit input, heaps of whole batches of 8 spectra; on the H200 faster than
    /// the three kernels with 8x less device-memory traffic, BENCHMARKS.md), else the
    /// three-kernel path (the sm_80 fused kernel is slower than it: opt-in through
    /// [`Channelizer::with_path`]).
    pub fn for_config(gpu: &Gpu, config: &ChannelizerConfig) -> PfbPath {
        if cluster_kernel_applies(gpu, config) {
            PfbPath::Fused
        } else {
            PfbPath::ThreeKernel
        }
    }
}

/// The three-kernel path's kernels, cuFFT plan and intermediate buffers.
struct ThreeKernel {
    fir: CudaFunction,
    post: CudaFunction,
    fft: FftPlan,
    fir_out: DeviceBuffer<[f32; 2]>,
    fft_out: DeviceBuffer<[f32; 2]>,
}

/// The fused kernel, its twiddle table `exp(-j pi k / n)` (`k < 2n`, f64 rounded to f32) and
/// its spectra per block.
struct Fused {
    kernel: CudaFunction,
    twiddles: DeviceBuffer<[f32; 2]>,
    spectra_per_block: u32,
    /// The cluster kernel (`radio_kernels_gpu::pfb::cluster`) instead, with the clusters that
    /// are resident at once.
    clusters: Option<u32>,
}

/// Whether the fused path runs the cluster kernel: the sm_90a kernels are in use, n is
/// [`cluster_layout::CLUSTER_CHANNELS`], at most 16 taps and 12-bit input, and heaps are
/// whole batches.
fn cluster_kernel_applies(gpu: &Gpu, config: &ChannelizerConfig) -> bool {
    gpu.wgmma_enabled()
        && config.channels == cluster_layout::CLUSTER_CHANNELS
        && config.taps <= cluster_layout::CLUSTER_MAX_TAPS
        && config.bits <= cluster_layout::CLUSTER_MAX_BITS
        && config.spectra_per_heap.is_multiple_of(cluster_layout::CLUSTER_BATCH)
}

/// The fused kernel's twiddle table for `channels`: `exp(-j pi k / n)` for `k < 2n`. Errors
/// unless `channels` is a power of two in `MIN_CHANNELS ..= MAX_CHANNELS`.
pub fn fused_twiddles(channels: u32) -> Result<Vec<[f32; 2]>> {
    if !channels.is_power_of_two() || !(MIN_CHANNELS..=MAX_CHANNELS).contains(&channels) {
        return Err(Error::InvalidConfig(format!(
            "channels must be a power of two in {MIN_CHANNELS}..={MAX_CHANNELS}, got {channels}"
        )));
    }
    Ok((0..2 * channels as u64)
        .map(|k| {
            let (s, c) = (-std::f64::consts::PI * k as f64 / channels as f64).sin_cos();
            [c as f32, s as f32]
        })
        .collect())
}

/// One output chunk, downloaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputChunk {
    pub first_spectrum: i64,
    /// `[heap][channel][spectrum][pol]` in the configured format.
    pub data: Vec<u8>,
    /// Saturated values per `[heap][pol]`.
    pub saturated: Vec<u32>,
    pub lost_spectra: Vec<bool>,
    pub lost_heaps: Vec<bool>,
}

/// What a checked push (or submit) will do: the kept input's base once room is made for the
/// chunk, and the number of output chunks it completes, whose schedules are the first
/// `complete` of the channelizer's schedule pool, followed by the pending chunk's.
pub(crate) struct PushPlan {
    base: i64,
    complete: usize,
}

impl PushPlan {
    /// Output chunks the push completes.
    pub(crate) fn complete(&self) -> usize {
        self.complete
    }
}

/// The kernels and the state they share across chunks: the three-kernel path's or the fused
/// path's kernels, the weights and the gains.
struct Kernels {
    three: Option<ThreeKernel>,
    fused: Option<Fused>,
    weights: DeviceBuffer<f32>,
    gains: DeviceBuffer<[f32; 2]>,
}

/// The buffers one output chunk's launches read and write: the kept input, the chunk's
/// schedule (offsets into the kept input, fine delays, rotations, `2 x spectra_per_chunk`
/// each, polarisation 0 first) and its output and saturation counts.
struct Launch<'a> {
    inputs: &'a [DeviceBuffer<u32>; 2],
    offsets: &'a DeviceBuffer<u32>,
    fine: &'a DeviceBuffer<f32>,
    rotation: &'a DeviceBuffer<[f32; 4]>,
    output: &'a mut DeviceBuffer<u8>,
    saturated: &'a mut DeviceBuffer<u32>,
}

impl Kernels {
    /// The three-kernel path's state, or a typed error on the fused path.
    fn three_kernel(&mut self) -> Result<&mut ThreeKernel> {
        self.three.as_mut().ok_or_else(|| {
            Error::InvalidConfig(
                "the three-kernel launches need a channelizer on PfbPath::ThreeKernel".into(),
            )
        })
    }

    /// Every launch of one output chunk on `stream`, the intermediates and output poisoned
    /// first with `poison`, if any.
    fn run(
        &mut self,
        c: &ChannelizerConfig,
        mut l: Launch<'_>,
        poison: Option<u8>,
        stream: &Stream,
    ) -> Result<()> {
        if let Some(byte) = poison {
            if let Some(three) = &mut self.three {
                three.fir_out.poison_on(stream, byte)?;
                three.fft_out.poison_on(stream, byte)?;
            }
            l.output.poison_on(stream, byte)?;
        }
        if self.fused.is_some() {
            return self.fused(c, &mut l, stream);
        }
        self.fir(c, &l, stream)?;
        self.fft(stream)?;
        self.post(c, &mut l, stream)
    }

    /// The fused (or cluster) kernel; clears the saturation counts first.
    fn fused(&self, c: &ChannelizerConfig, l: &mut Launch<'_>, stream: &Stream) -> Result<()> {
        let Some(fused) = &self.fused else {
            return Err(Error::InvalidConfig("run_fused needs a channelizer on PfbPath::Fused".into()));
        };
        let spectra = c.spectra_u32();
        let g = fused.spectra_per_block;
        l.saturated.poison_on(stream, 0)?;
        // The cluster kernel: one wave, each cluster a run of whole batches (g divides the
        // heap and so the chunk). The sm_80 kernel: one block per g spectra of one heap.
        let run = fused.clusters.map(|resident| {
            let batches = spectra / g;
            batches.div_ceil(resident.min(batches)) * g
        });
        let cfg = match run {
            Some(run) => launch_1d(
                cluster_layout::CLUSTER_BLOCKS * spectra.div_ceil(run),
                cluster_layout::CLUSTER_BLOCK_THREADS,
                cluster_layout::cluster_shared_bytes(c.bits),
            ),
            None => launch_1d(spectra / g, FUSED_THREADS, fused_layout::fused_shared_bytes(c.channels, g)),
        };
        let mut launch = stream.launch_builder(&fused.kernel);
        launch
            .arg(l.inputs[0].raw())
            .arg(l.inputs[1].raw())
            .arg(l.offsets.raw())
            .arg(self.weights.raw())
            .arg(fused.twiddles.raw())
            .arg(self.gains.raw())
            .arg(l.fine.raw())
            .arg(l.rotation.raw())
            .arg(l.output.arg_mut())
            .arg(l.saturated.arg_mut());
        match &run {
            Some(run) => launch.arg(&c.taps).arg(&spectra).arg(&c.spectra_per_heap).arg(&c.bits).arg(run),
            None => launch
                .arg(&c.channels)
                .arg(&c.taps)
                .arg(&spectra)
                .arg(&c.spectra_per_heap)
                .arg(&c.bits)
                .arg(&g),
        };
        // SAFETY: matches `pfb_cluster_t*_ci*(input0, input1, offsets, weights, twiddles, gains,
        // fine, rotation, out, saturated, taps, spectra, spectra_per_heap, bits, run)` (n = 1024,
        // heap and run whole batches) or `pfb_fused_t*_ci*(.., saturated, channels, taps,
        // spectra, spectra_per_heap, bits, g)`; the callers checked every window lies in the
        // inputs; twiddles hold 2n values, the schedule 2 x spectra entries each, the output
        // and saturation counts a chunk's (every `Launch` is built from buffers of those sizes).
        unsafe { launch.launch(cfg) }.during("launching the fused PFB kernel")?;
        Ok(())
    }

    /// The FIR launch.
    fn fir(&mut self, c: &ChannelizerConfig, l: &Launch<'_>, stream: &Stream) -> Result<()> {
        let weights = &self.weights;
        let three = self.three.as_mut().ok_or_else(|| {
            Error::InvalidConfig(
                "the three-kernel launches need a channelizer on PfbPath::ThreeKernel".into(),
            )
        })?;
        let spectra = c.spectra_u32();
        let per_thread = layout::fir_spectra_per_thread(c.channels, c.taps, spectra);
        let width = layout::fir_block_width(c.channels);
        let threads = c.channels as u64 * spectra.div_ceil(per_thread) as u64;
        let cfg = LaunchConfig {
            // `width` divides n, so a block's threads share their spectra.
            grid_dim: ((threads / width as u64) as u32, 2, 1),
            block_dim: (width, 1, 1),
            shared_mem_bytes: layout::fir_shared_bytes(c.bits, width, layout::fir_variant(c.taps)),
        };
        let mut launch = stream.launch_builder(&three.fir);
        launch
            .arg(l.inputs[0].raw())
            .arg(l.inputs[1].raw())
            .arg(l.offsets.raw())
            .arg(weights.raw())
            .arg(three.fir_out.arg_mut())
            .arg(&c.channels)
            .arg(&c.taps)
            .arg(&spectra)
            .arg(&per_thread)
            .arg(&c.bits);
        // SAFETY: matches `pfb_fir_t*(input0, input1, offsets, weights, out, channels, taps,
        // spectra, per_thread, bits)`; the callers checked every window lies in the inputs, the
        // offsets hold 2 x spectra entries and fir_out 2 x spectra x n values.
        unsafe { launch.launch(cfg) }.during("launching the PFB FIR")?;
        Ok(())
    }

    /// The cuFFT C2C launch.
    fn fft(&mut self, stream: &Stream) -> Result<()> {
        let three = self.three_kernel()?;
        three.fft.forward(stream, &mut three.fir_out, &mut three.fft_out)
    }

    /// The post-processing launch; clears the saturation counts first.
    fn post(&mut self, c: &ChannelizerConfig, l: &mut Launch<'_>, stream: &Stream) -> Result<()> {
        let gains = &self.gains;
        let three = self.three.as_mut().ok_or_else(|| {
            Error::InvalidConfig(
                "the three-kernel launches need a channelizer on PfbPath::ThreeKernel".into(),
            )
        })?;
        let spectra = c.spectra_u32();
        l.saturated.poison_on(stream, 0)?;
        let tile = layout::POST_TILE_LOG2;
        let cfg = LaunchConfig {
            grid_dim: (layout::post_blocks(c.channels, spectra, tile), 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: layout::POST_SHARED_BYTES,
        };
        let mut launch = stream.launch_builder(&three.post);
        launch
            .arg(three.fft_out.raw())
            .arg(gains.raw())
            .arg(l.fine.raw())
            .arg(l.rotation.raw())
            .arg(l.output.arg_mut())
            .arg(l.saturated.arg_mut())
            .arg(&c.channels)
            .arg(&spectra)
            .arg(&c.spectra_per_heap)
            .arg(&tile);
        // SAFETY: matches `pfb_post_ci*(fft, gains, fine, rotation, out, saturated, channels,
        // spectra, spectra_per_heap, tile_log2)` with the sizes allocated in `with_path`.
        unsafe { launch.launch(cfg) }.during("launching the PFB post-processing")?;
        Ok(())
    }
}

/// The schedule, output and saturation buffers of the one-shot calls (`push`, `run`).
struct OwnChunk {
    offsets: DeviceBuffer<u32>,
    fine: DeviceBuffer<f32>,
    rotation: DeviceBuffer<[f32; 4]>,
    output: DeviceBuffer<u8>,
    saturated: DeviceBuffer<u32>,
    /// Host staging of the schedule's launch parameters (reused).
    host_offsets: Vec<u32>,
    host_fine: Vec<f32>,
    host_rotation: Vec<[f32; 4]>,
}

/// Enqueues the copy of `data` (pageable host memory) into `buffer` (same length) on `stream`.
fn upload_on<T: bytemuck::Pod>(
    stream: &Stream,
    data: &[T],
    buffer: &mut DeviceBuffer<T>,
    what: &'static str,
) -> Result<()> {
    if data.len() != buffer.len() {
        return Err(Error::ShapeMismatch { what, expected: buffer.len(), actual: data.len() });
    }
    if data.is_empty() {
        return Ok(());
    }
    let bytes: &[u8] = bytemuck::cast_slice(data);
    let mut view = buffer.arg_mut().slice_mut(0..bytes.len());
    stream.memcpy_htod(bytes, &mut view).during("copying to the device")
}

/// Copies `buffer` into a new vector on `stream` (which the caller synchronises).
fn download_on<T: bytemuck::Pod>(stream: &Stream, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
    let mut out = vec![T::zeroed(); buffer.len()];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
    if !bytes.is_empty() {
        let view = buffer.raw().slice(0..bytes.len());
        stream.memcpy_dtoh(&view, bytes).during("copying an output chunk to the host")?;
    }
    Ok(out)
}

/// The F-engine of one antenna on one GPU (rustfft-style planner object: it owns the weights,
/// gains, kernels (and the cuFFT plan of the three-kernel path), device buffers and the
/// overlap between input chunks). Its own calls run on one stream ([`set_stream`](Self::set_stream));
/// the streaming engine [`ChannelizerStream`] runs it from pinned memory at the PCIe limit.
pub struct Channelizer<'g> {
    gpu: &'g Gpu,
    config: ChannelizerConfig,
    models: [DelayModel; 2],
    kernels: Kernels,
    inputs: [DeviceBuffer<u32>; 2],
    spare: [DeviceBuffer<u32>; 2],
    /// Absolute sample of word 0 of `inputs` (a multiple of 32) and one past the newest sample.
    base: i64,
    end: i64,
    /// Arrival flags per packet from packet `present_first`.
    present: [Vec<bool>; 2],
    present_first: i64,
    next_spectrum: i64,
    own: OwnChunk,
    /// Schedules of the output chunks a plan completes, then the pending chunk's (reused;
    /// grows to the most chunks one push completes, plus one).
    schedules: Vec<Schedule>,
    /// The first spectrum and the models of `schedules[0]`, when it holds the pending chunk's
    /// schedule.
    cached: Option<(i64, [DelayModel; 2])>,
    poison: Option<u8>,
    /// Why the stream broke, after a device error part-way through a push or run.
    failed: Option<String>,
    /// The stream of the channelizer's own calls.
    stream: Stream,
}

impl<'g> Channelizer<'g> {
    /// Validates `config`, loads the kernels (fused for n <= [`FUSED_MAX_CHANNELS`], see
    /// [`PfbPath::for_config`]), plans cuFFT (three-kernel path) and allocates every buffer.
    /// `weights`: `2 n T` f32 (`w[t + 2n j]`), or `None` for [`hann_sinc_weights`]. Gains
    /// start at 1 and delay models at 0.
    pub fn new(gpu: &'g Gpu, config: ChannelizerConfig, weights: Option<&[f32]>) -> Result<Channelizer<'g>> {
        let path = PfbPath::for_config(gpu, &config);
        Channelizer::with_path(gpu, config, weights, path)
    }

    /// As [`new`](Self::new) on the given path; [`PfbPath::Fused`] needs n <=
    /// [`FUSED_MAX_CHANNELS`].
    pub fn with_path(
        gpu: &'g Gpu,
        config: ChannelizerConfig,
        weights: Option<&[f32]>,
        path: PfbPath,
    ) -> Result<Channelizer<'g>> {
        config.validate()?;
        if path == PfbPath::Fused && config.channels > FUSED_MAX_CHANNELS {
            return Err(Error::InvalidConfig(format!(
                "the fused PFB path needs channels <= {FUSED_MAX_CHANNELS}, got {}",
                config.channels
            )));
        }
        let n = config.channels as usize;
        let weights = match weights {
            Some(w) => {
                check_weights(&config, w)?;
                w.to_vec()
            }
            None => hann_sinc_weights(config.channels, config.taps),
        };
        let spectra = config.spectra_per_chunk() as usize;
        let values = 2 * spectra * n;
        let int4 = config.output == OutputFormat::Ci4;
        let (three, fused) = match path {
            PfbPath::ThreeKernel => {
                let fir = gpu.function(layout::fir_kernel_name(layout::fir_variant(config.taps)))?;
                // The 16-tap FIR's batches of 16 need up to 64 KB (16-bit input). The function
                // is shared by every channelizer of this GPU, so the limit is the most any of
                // them needs.
                let fir_shared = layout::fir_shared_bytes(16, THREADS, layout::fir_variant(config.taps));
                allow_dynamic_shared(&fir, fir_shared, "raising the PFB FIR's shared-memory limit")?;
                let three = ThreeKernel {
                    fir,
                    post: gpu.function(layout::post_kernel_name(int4))?,
                    fft: FftPlan::new(gpu, config.channels / UNZIP, 2 * spectra as u32 * UNZIP)?,
                    fir_out: gpu.alloc(values, 0)?,
                    fft_out: gpu.alloc(values, 0)?,
                };
                (Some(three), None)
            }
            PfbPath::Fused if cluster_kernel_applies(gpu, &config) => {
                let variant = layout::fir_variant(config.taps);
                let kernel = gpu.hopper_function(cluster_layout::cluster_kernel_name(variant, int4))?;
                // As above: the most any channelizer of this GPU needs (the widest input).
                allow_dynamic_shared(
                    &kernel,
                    cluster_layout::cluster_shared_bytes(cluster_layout::CLUSTER_MAX_BITS),
                    "raising the cluster PFB kernel's shared-memory limit",
                )?;
                let probe = launch_1d(
                    cluster_layout::CLUSTER_BLOCKS,
                    cluster_layout::CLUSTER_BLOCK_THREADS,
                    cluster_layout::cluster_shared_bytes(config.bits),
                );
                let clusters = kernel
                    .occupancy_max_active_clusters(probe, gpu.stream())
                    .during("querying the cluster PFB kernel's resident clusters")?;
                if clusters == 0 {
                    return Err(Error::InvalidConfig(
                        "the cluster PFB kernel cannot be resident on this GPU".into(),
                    ));
                }
                let fused = Fused {
                    kernel,
                    twiddles: gpu.upload(&fused_twiddles(config.channels)?)?,
                    spectra_per_block: cluster_layout::CLUSTER_BATCH,
                    clusters: Some(clusters),
                };
                (None, Some(fused))
            }
            PfbPath::Fused => {
                let kernel = gpu.function(fused_layout::fused_kernel_for(config.taps, int4))?;
                // As above: the most any channelizer of this GPU needs.
                allow_dynamic_shared(
                    &kernel,
                    fused_layout::FUSED_MAX_SHARED,
                    "raising the fused PFB kernel's shared-memory limit",
                )?;
                let fused = Fused {
                    kernel,
                    twiddles: gpu.upload(&fused_twiddles(config.channels)?)?,
                    spectra_per_block: fused_layout::fused_spectra_per_block(
                        config.channels,
                        config.spectra_per_heap,
                    ),
                    clusters: None,
                };
                (None, Some(fused))
            }
        };
        // One word of padding for the pair unpacker, then whole 16-byte chunks plus 64 bytes for
        // the FIR's staged rows (`fir_row_chunks` copies up to 28 bytes past the last word).
        let words =
            ((config.capacity_samples() * config.bits as u64 / 32) as usize + 1).next_multiple_of(4) + 16;
        let alloc_input = || gpu.alloc::<u32>(words, 0);
        // The most packets the kept flags hold: the kept input's, one chunk's and the partial
        // packets at both ends (reserved once, so pushes never grow them).
        let packets =
            (config.capacity_samples() / config.packet_samples as u64) as usize + config.chunk_packets() + 2;
        let mut ch = Channelizer {
            gpu,
            models: [DelayModel::default(); 2],
            kernels: Kernels {
                three,
                fused,
                weights: gpu.upload(&weights)?,
                gains: gpu.upload(&vec![[1.0f32, 0.0]; 2 * n])?,
            },
            inputs: [alloc_input()?, alloc_input()?],
            spare: [alloc_input()?, alloc_input()?],
            base: 0,
            end: 0,
            present: [Vec::with_capacity(packets), Vec::with_capacity(packets)],
            present_first: 0,
            next_spectrum: 0,
            own: OwnChunk {
                offsets: gpu.alloc(2 * spectra, 0)?,
                fine: gpu.alloc(2 * spectra, 0)?,
                rotation: gpu.alloc(2 * spectra, 0)?,
                output: gpu.alloc(config.output_bytes(), 0)?,
                saturated: gpu.alloc(2 * config.heaps_per_chunk as usize, 0)?,
                host_offsets: Vec::new(),
                host_fine: Vec::new(),
                host_rotation: Vec::new(),
            },
            schedules: Vec::new(),
            cached: None,
            poison: None,
            failed: None,
            stream: gpu.stream().clone(),
            config,
        };
        ch.reset()?;
        Ok(ch)
    }

    pub fn config(&self) -> &ChannelizerConfig {
        &self.config
    }

    /// Clusters of the fused path's cluster kernel resident at once (its launches are one
    /// wave of them), or `None` where the fused path runs the sm_80 kernel or the
    /// three-kernel path runs.
    pub fn resident_clusters(&self) -> Option<u32> {
        self.kernels.fused.as_ref().and_then(|f| f.clusters)
    }

    /// The kernels this channelizer runs.
    pub fn path(&self) -> PfbPath {
        if self.kernels.fused.is_some() {
            PfbPath::Fused
        } else {
            PfbPath::ThreeKernel
        }
    }

    /// Runs the channelizer's own calls ([`push`](Self::push), [`run`](Self::run), the
    /// `run_*` launches, [`set_gains`](Self::set_gains), [`reset`](Self::reset)) on `stream`
    /// (the GPU's default stream until set): every launch, memset, cuFFT execution and copy,
    /// so that callers can order their own work with ours; [`Error::WrongDevice`] for a stream
    /// of another GPU. The streaming engine ([`ChannelizerStream`]) uses its own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "channelizer stream")
    }

    /// The stream of the channelizer's own calls.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Starts a new stream at sample 0 (delay models and gains are kept), and clears a failure
    /// ([`failure`](Self::failure)) once the buffers are reset.
    pub fn reset(&mut self) -> Result<()> {
        let stream = self.stream.clone();
        self.reset_on(&stream)
    }

    /// [`reset`](Self::reset) with the kept input zeroed on `stream`.
    fn reset_on(&mut self, stream: &Stream) -> Result<()> {
        // The samples before the stream are zeros (and flagged lost).
        self.base = -((self.config.max_delay as u64).next_multiple_of(SAMPLE_GRANULE as u64) as i64);
        self.end = 0;
        for buffer in &mut self.inputs {
            buffer.poison_on(stream, 0)?;
        }
        for p in &mut self.present {
            p.clear();
        }
        self.present_first = 0;
        self.next_spectrum = 0;
        self.cached = None;
        self.failed = None;
        Ok(())
    }

    /// Why the stream stopped, if a device error struck part-way through a push or run: the
    /// kept input may then be inconsistent, so [`push`](Self::push), [`run`](Self::run) and
    /// [`fill_input_with`](Self::fill_input_with) refuse to continue until [`reset`](Self::reset).
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// The typed error of a failed channelizer.
    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(why) => Err(Error::StreamBroken { engine: "channelizer", cause: why.clone() }),
        }
    }

    /// Records a device error that struck after the stream's state began to change.
    fn fail<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.failed = Some(e.to_string());
        }
        result
    }

    /// Sets the delay model of polarisation `pol` (from the next output chunk on). A model
    /// with a NaN or infinite field is rejected ([`Error::NonFinite`] on
    /// [`DELAY_MODEL_FIELDS`], index `5 pol + field`).
    pub fn set_delay_model(&mut self, pol: usize, model: DelayModel) -> Result<()> {
        if pol > 1 {
            return Err(Error::InvalidConfig(format!("polarisation must be 0 or 1, got {pol}")));
        }
        if let Some(field) = model.first_non_finite() {
            return Err(Error::NonFinite { what: DELAY_MODEL_FIELDS, index: 5 * pol + field });
        }
        self.models[pol] = model;
        Ok(())
    }

    pub fn delay_models(&self) -> &[DelayModel; 2] {
        &self.models
    }

    /// Sets the complex bandpass gains, `[pol][channel]`: finite ([`Error::NonFinite`], index
    /// of the f32 component `2 (pol n + channel) + (0 re, 1 im)`) and at most
    /// [`MAX_COEFFICIENT`] in magnitude. They apply from the next output chunk computed.
    pub fn set_gains(&mut self, gains: &[[f32; 2]]) -> Result<()> {
        let stream = self.stream.clone();
        self.set_gains_on(gains, &stream)
    }

    /// [`set_gains`](Self::set_gains), the copy enqueued on `stream`.
    fn set_gains_on(&mut self, gains: &[[f32; 2]], stream: &Stream) -> Result<()> {
        check_gains(&self.config, gains)?;
        upload_on(stream, gains, &mut self.kernels.gains, "PFB gains")
    }

    /// Appends one input chunk per polarisation (`chunk_bytes()` packed bytes each) with its
    /// packet arrival flags (`chunk_packets()` each), and returns every output chunk that is
    /// now complete, in order: the one-shot path (a pageable copy in, synchronous copies out);
    /// [`ChannelizerStream`] gives the same bytes at the PCIe limit.
    ///
    /// A push is checked whole before anything changes: the lengths, room for the chunk in the
    /// kept input, and the schedule (delays within `max_delay`, finite) of every output chunk
    /// it will complete and of the one after them. If any is invalid, the push returns that
    /// error and leaves the channelizer exactly as it was (set a valid delay model and push the
    /// same chunk again: the stream continues as if the failed push never happened), so an
    /// error never loses completed output or input. Only a device error (driver or cuFFT) can
    /// strike once the state has begun to change; it leaves the channelizer
    /// [`failure`](Self::failure)d, refusing further pushes with [`Error::StreamBroken`] until
    /// [`reset`](Self::reset).
    pub fn push(&mut self, chunk: [&[u8]; 2], present: [&[bool]; 2]) -> Result<Vec<OutputChunk>> {
        self.check_usable()?;
        let expected = self.config.chunk_bytes();
        for bytes in chunk {
            if bytes.len() != expected {
                return Err(Error::ShapeMismatch {
                    what: "PFB input chunk (bytes)",
                    expected,
                    actual: bytes.len(),
                });
            }
        }
        self.check_flags(present)?;
        let plan = self.plan()?;
        let result = self.execute_push(&plan, chunk, present);
        self.fail(result)
    }

    /// The packet flags of one chunk per polarisation have `chunk_packets()` entries each.
    fn check_flags(&self, present: [&[bool]; 2]) -> Result<()> {
        let expected = self.config.chunk_packets();
        for flags in present {
            if flags.len() != expected {
                return Err(Error::ShapeMismatch { what: "PFB packet flags", expected, actual: flags.len() });
            }
        }
        Ok(())
    }

    /// Everything a push will do, computed without changing the stream: the new base of the
    /// kept input and the output chunks it completes, whose schedules (then the pending
    /// chunk's) it leaves in the schedule pool. Only the pool changes (the pending chunk's
    /// cached schedule is dropped when it is recomputed).
    fn plan(&mut self) -> Result<PushPlan> {
        let c = &self.config;
        let capacity = c.capacity_samples() as i64;
        let chunk = c.chunk_samples as i64;
        let overflow = || Error::InvalidConfig("the stream passed the i64 sample positions".into());
        let end = self.end.checked_add(chunk).ok_or_else(overflow)?;
        let base = if end <= self.base + capacity {
            self.base
        } else {
            // Drop input older than the next chunk's earliest possible window.
            let earliest = (2 * c.channels as i64)
                .checked_mul(self.next_spectrum)
                .and_then(|x| x.checked_sub(c.max_delay as i64))
                .ok_or_else(overflow)?;
            let new_base = earliest.div_euclid(SAMPLE_GRANULE as i64) * SAMPLE_GRANULE as i64;
            let new_base = new_base.clamp(self.base, self.end);
            if end > new_base + capacity {
                return Err(Error::InvalidConfig(
                    "the kept input outgrew its buffer (internal error)".into(),
                ));
            }
            new_base
        };
        let window = c.window() as i64;
        let mut complete = 0;
        let mut next = self.next_spectrum;
        loop {
            if self.schedules.len() == complete {
                self.schedules.push(Schedule::with_capacity(c.spectra_per_chunk() as usize));
            }
            // Any invalid schedule fails the whole push before it changes anything: a push that
            // completed only the chunks before it would leave a backlog of input the kept
            // buffer is not sized for.
            if complete > 0 || self.cached != Some((next, self.models)) {
                if complete == 0 {
                    self.cached = None;
                }
                self.schedules[complete].fill(c, &self.models, next)?;
            }
            let (first, last) = self.schedules[complete].span(window);
            if last > end {
                break;
            }
            if first < base {
                return Err(Error::InvalidConfig(format!(
                    "a window from sample {first} starts before the kept input (from {base}) (internal error)"
                )));
            }
            complete += 1;
            next = next.checked_add(c.spectra_per_chunk() as i64).ok_or_else(overflow)?;
        }
        Ok(PushPlan { base, complete })
    }

    /// Keeps the pending chunk's schedule (left after `plan`'s completed ones) for the next
    /// plan, once the chunks before it have run.
    fn finish_plan(&mut self, plan: &PushPlan) {
        self.schedules.swap(0, plan.complete);
        self.cached = Some((self.next_spectrum, self.models));
    }

    /// Grows the schedule pool to `count` schedules (at construction of an engine, so that its
    /// plans never allocate).
    fn reserve_schedules(&mut self, count: usize) {
        let spectra = self.config.spectra_per_chunk() as usize;
        while self.schedules.len() < count {
            self.schedules.push(Schedule::with_capacity(spectra));
        }
    }

    /// Runs a checked push: moves the kept input, uploads the chunk, computes and downloads
    /// each complete output chunk. Only device errors can fail here.
    fn execute_push(
        &mut self,
        plan: &PushPlan,
        chunk: [&[u8]; 2],
        present: [&[bool]; 2],
    ) -> Result<Vec<OutputChunk>> {
        let stream = self.stream.clone();
        self.move_kept_input(plan.base, &stream)?;
        let at = self.append_at();
        let bytes = self.config.chunk_bytes();
        for (pol, data) in chunk.iter().enumerate() {
            let mut view = self.inputs[pol].arg_mut().slice_mut(4 * at..4 * at + bytes);
            stream.memcpy_htod(*data, &mut view).during("copying an input chunk to the device")?;
        }
        self.append_flags(present);
        let mut out = Vec::with_capacity(plan.complete);
        for i in 0..plan.complete {
            self.run_pooled(i)?;
            out.push(self.download(i)?);
            self.next_spectrum += self.config.spectra_per_chunk() as i64;
        }
        self.finish_plan(plan);
        Ok(out)
    }

    /// The word of `inputs` where the next chunk goes (`end - base` is a multiple of 32).
    fn append_at(&self) -> usize {
        ((self.end - self.base) as u64 * self.config.bits as u64 / 32) as usize
    }

    /// Appends a chunk's packet flags and advances the end of the stream by a chunk (its
    /// samples were copied to [`append_at`](Self::append_at)).
    fn append_flags(&mut self, present: [&[bool]; 2]) {
        for (kept, flags) in self.present.iter_mut().zip(present) {
            kept.extend_from_slice(flags);
        }
        self.end += self.config.chunk_samples as i64;
    }

    /// Moves the kept input from `new_base` on to the front of the spare buffers (on
    /// `stream`) and swaps them in (nothing when `new_base` is the current base); drops the
    /// packet flags wholly before it.
    fn move_kept_input(&mut self, new_base: i64, stream: &Stream) -> Result<()> {
        if new_base == self.base {
            return Ok(());
        }
        let c = &self.config;
        let bits = c.bits as i64;
        let (from, to) =
            (((new_base - self.base) * bits / 32) as usize, ((self.end - self.base) * bits / 32) as usize);
        for pol in 0..2 {
            if to > from {
                let src = self.inputs[pol].raw().slice(4 * from..4 * to);
                let mut dst = self.spare[pol].arg_mut().slice_mut(0..4 * (to - from));
                stream.memcpy_dtod(&src, &mut dst).during("moving the kept input")?;
            }
        }
        for pol in 0..2 {
            std::mem::swap(&mut self.inputs[pol], &mut self.spare[pol]);
        }
        self.base = new_base;
        // Packets wholly before the new base are no longer needed for flags.
        let keep_from = self.base.div_euclid(c.packet_samples as i64).max(0);
        if keep_from > self.present_first {
            let drop = (keep_from - self.present_first) as usize;
            for p in &mut self.present {
                p.drain(..drop.min(p.len()));
            }
            self.present_first = keep_from;
        }
        Ok(())
    }

    /// Writes the kernels' window offsets of `schedule` (`2 x spectra_per_chunk`, polarisation
    /// 0 first) into `offsets`; errors, changing nothing else, when a window is not wholly in
    /// the kept input.
    fn write_offsets(&self, schedule: &Schedule, offsets: &mut [u32]) -> Result<()> {
        let window = self.config.window() as i64;
        for (offset, &start) in offsets.iter_mut().zip(schedule.starts.iter().flatten()) {
            if start < self.base || start + window > self.end {
                return Err(Error::InvalidConfig(format!(
                    "window [{start}, {}) is outside the kept input [{}, {}): the buffer is too short \
                     for the delays asked",
                    start + window,
                    self.base,
                    self.end
                )));
            }
            // Below the capacity, < 2^32 (validate).
            *offset = (start - self.base) as u32;
        }
        Ok(())
    }

    /// The lost-data flags of the chunk of `schedule`, from the kept packet flags, into
    /// `spectra` and `heaps`.
    fn lost_flags(&self, schedule: &Schedule, spectra: &mut Vec<bool>, heaps: &mut Vec<bool>) -> Result<()> {
        let (present, present_first) = (&self.present, self.present_first);
        let arrived = |pol: usize, packet: i64| {
            packet >= present_first && present[pol].get((packet - present_first) as usize) == Some(&true)
        };
        let c = &self.config;
        lost_flags_into(
            &schedule.starts,
            c.window(),
            c.packet_samples,
            c.spectra_per_heap,
            arrived,
            spectra,
            heaps,
        )
    }

    /// Launches the fused kernel, or FIR, FFT and post-processing, for the next output chunk
    /// into the device output (no download): the benchmark hook after
    /// [`fill_input_with`](Self::fill_input_with). Errors, changing nothing, when its schedule
    /// is invalid or its windows are not all in the kept input.
    pub fn run(&mut self) -> Result<()> {
        self.check_usable()?;
        let first = self.next_spectrum;
        self.reserve_schedules(1);
        if self.cached != Some((first, self.models)) {
            self.cached = None;
            self.schedules[0].fill(&self.config, &self.models, first)?;
            self.cached = Some((first, self.models));
        }
        self.run_pooled(0)
    }

    /// Uploads the launch parameters of the pool's schedule `i` and launches the chunk's
    /// kernels on the channelizer's stream. Checks first (changing nothing) that every window
    /// lies in the kept input; a device error after that marks the channelizer failed.
    fn run_pooled(&mut self, i: usize) -> Result<()> {
        let spectra = 2 * self.config.spectra_per_chunk() as usize;
        let mut offsets = std::mem::take(&mut self.own.host_offsets);
        offsets.resize(spectra, 0);
        let checked = self.write_offsets(&self.schedules[i], &mut offsets);
        self.own.host_offsets = offsets;
        checked?;
        let schedule = &self.schedules[i];
        let own = &mut self.own;
        own.host_fine.clear();
        own.host_rotation.clear();
        for p in 0..2 {
            own.host_fine.extend_from_slice(&schedule.fine[p]);
            own.host_rotation.extend_from_slice(&schedule.rotation[p]);
        }
        let result = self.launch_own();
        self.fail(result)
    }

    /// Uploads the host schedule staging and runs the kernels into the own output.
    fn launch_own(&mut self) -> Result<()> {
        let Channelizer { kernels, inputs, own, config, stream, poison, .. } = self;
        upload_on(stream, &own.host_offsets, &mut own.offsets, "PFB window offsets")?;
        upload_on(stream, &own.host_fine, &mut own.fine, "PFB fine delays")?;
        upload_on(stream, &own.host_rotation, &mut own.rotation, "PFB rotations")?;
        let launch = Launch {
            inputs,
            offsets: &own.offsets,
            fine: &own.fine,
            rotation: &own.rotation,
            output: &mut own.output,
            saturated: &mut own.saturated,
        };
        kernels.run(config, launch, *poison, stream)
    }

    /// The channelizer's own launch buffers, for the `run_*` hooks.
    fn own_launch(&mut self) -> (&mut Kernels, Launch<'_>, &ChannelizerConfig, &Stream) {
        let Channelizer { kernels, inputs, own, config, stream, .. } = self;
        let launch = Launch {
            inputs,
            offsets: &own.offsets,
            fine: &own.fine,
            rotation: &own.rotation,
            output: &mut own.output,
            saturated: &mut own.saturated,
        };
        (kernels, launch, config, stream)
    }

    /// The fused launch alone (for timing); clears the saturation counts first. `run` uploads
    /// its offsets and rotations first.
    pub fn run_fused(&mut self) -> Result<()> {
        let (kernels, mut launch, config, stream) = self.own_launch();
        kernels.fused(config, &mut launch, stream)
    }

    /// The FIR launch alone (for timing); `run` uploads its offsets first.
    pub fn run_fir(&mut self) -> Result<()> {
        let (kernels, launch, config, stream) = self.own_launch();
        kernels.fir(config, &launch, stream)
    }

    /// The cuFFT C2C launch alone (for timing).
    pub fn run_fft(&mut self) -> Result<()> {
        let stream = self.stream.clone();
        self.kernels.fft(&stream)
    }

    /// The post-processing launch alone (for timing); clears the saturation counts first.
    pub fn run_post(&mut self) -> Result<()> {
        let (kernels, mut launch, config, stream) = self.own_launch();
        kernels.post(config, &mut launch, stream)
    }

    /// Downloads the last run's output chunk (the pool's schedule `i`, from spectrum
    /// `next_spectrum`) with its flags, waiting for the channelizer's stream.
    fn download(&mut self, i: usize) -> Result<OutputChunk> {
        let (mut lost_spectra, mut lost_heaps) = (Vec::new(), Vec::new());
        self.lost_flags(&self.schedules[i], &mut lost_spectra, &mut lost_heaps)?;
        let data = download_on(&self.stream, &self.own.output)?;
        let saturated = download_on(&self.stream, &self.own.saturated)?;
        self.stream.synchronize().during("waiting for an output chunk")?;
        Ok(OutputChunk { first_spectrum: self.next_spectrum, data, saturated, lost_spectra, lost_heaps })
    }

    /// Benchmark hook: lets `fill` write the input buffers directly (e.g. random words) through
    /// [`DeviceBufferMut`] borrows (which cannot replace them), then treats them as a full
    /// stream of arrived samples from the current base, so [`run`](Self::run) can be timed
    /// without host transfers. The borrows cannot be swapped for other buffers (which would
    /// leave the channelizer's sizes describing another allocation):
    ///
    /// ```compile_fail,E0596
    /// # fn f(ch: &mut radio_kernels_host::pfb::Channelizer, other: &mut radio_kernels_host::DeviceBuffer<u32>) {
    /// ch.fill_input_with(|mut input| std::mem::swap(&mut *input, other));
    /// # }
    /// ```
    pub fn fill_input_with(&mut self, mut fill: impl FnMut(DeviceBufferMut<'_, u32>)) -> Result<()> {
        self.check_usable()?;
        for buffer in &mut self.inputs {
            fill(buffer.borrow_mut());
        }
        let c = &self.config;
        self.end = self.base + (c.capacity_samples() - c.chunk_samples as u64) as i64;
        let packets = (self.end.div_euclid(c.packet_samples as i64) + 1).max(0) as usize;
        self.present = [vec![true; packets], vec![true; packets]];
        self.present_first = 0;
        Ok(())
    }

    /// Test hook: fill the intermediate and output buffers with `byte` before every run, so
    /// values a kernel fails to write show up.
    pub fn poison_before_runs(&mut self, byte: Option<u8>) {
        self.poison = byte;
    }

    /// The device output of the last run: `[heap][channel][spectrum][pol]`.
    pub fn output(&self) -> &DeviceBuffer<u8> {
        &self.own.output
    }

    /// Bytes each kernel of the three-kernel path reads and writes once per output chunk, (FIR,
    /// FFT, post): the minimum traffic the bench compares achieved bandwidth with. (The fused
    /// kernel's minimum is the input once plus the output once: [`Self::fused_bytes`].)
    pub fn kernel_bytes(&self) -> (u64, u64, u64) {
        let c = &self.config;
        let spectra = c.spectra_per_chunk();
        let values = 2 * spectra * c.channels as u64; // complex per chunk, both pols
        let input = 2 * spectra * 2 * c.channels as u64 * c.bits as u64 / 8; // new samples, once
        (input + 8 * values, 16 * values, 8 * values + c.output_bytes() as u64)
    }

    /// Bytes the fused kernel must read and write once per output chunk: the new input
    /// samples of both polarisations and the output.
    pub fn fused_bytes(&self) -> u64 {
        let c = &self.config;
        let spectra = c.spectra_per_chunk();
        2 * spectra * 2 * c.channels as u64 * c.bits as u64 / 8 + c.output_bytes() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn rng() -> StdRng {
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
        println!("seed {seed}");
        StdRng::seed_from_u64(seed)
    }

    #[test]
    fn pack_and_unpack_agree_at_every_width_including_the_extremes() {
        let mut rng = rng();
        for bits in BITS {
            let (lo, hi) = (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1);
            let mut samples: Vec<i32> = (0..997).map(|_| rng.random_range(lo..=hi)).collect();
            samples[..6].copy_from_slice(&[lo, hi, 0, -1, 1, lo]);
            samples[996] = hi;
            let bytes = pack_samples(&samples, bits).unwrap();
            let mut padded = bytes.clone();
            padded.resize(bytes.len().next_multiple_of(4) + 4, 0);
            let word = |i: usize| u32::from_le_bytes(padded[4 * i..4 * i + 4].try_into().unwrap());
            for (i, &s) in samples.iter().enumerate() {
                assert_eq!(
                    unpack_sample(&bytes, bits, i).unwrap(),
                    s,
                    "reference unpack, bits {bits}, sample {i}"
                );
                if i + 1 < samples.len() {
                    let pair = layout::unpack_pair(word, i as u64, bits);
                    assert_eq!(pair, (s, samples[i + 1]), "kernel unpack, bits {bits}, sample {i}");
                }
            }
        }
    }

    /// The post kernel's columns ([`layout::post_thread_columns`]: no thread with the
    /// self-mirrored column 0) cover every column once, n/8 twice (as its own mirror), and
    /// give bit for bit the values of the thread-0 formulation ([`layout::post_columns`],
    /// checked against rustfft in `unzipped_fft_and_r2c_fixup_match_a_real_fft`): column 0 from its own
    /// unzip alone, column n/8 as a thread whose mirror is itself, with the same rotations in
    /// both halves, and every other column with [`layout::post_rotations`].
    #[test]
    fn post_thread_columns_give_the_values_of_the_thread_0_formulation() {
        let mut rng = rng();
        for n in [64u32, 1024, 32768] {
            let a = n / UNZIP;
            let mut seen = vec![0u32; a as usize];
            seen[0] += 1; // column 0, computed apart
            for t in 0..layout::post_threads_per_group(n) {
                let (u, w) = layout::post_thread_columns(t, n);
                seen[u as usize] += 1;
                seen[w as usize] += 1;
            }
            assert!(
                seen.iter().enumerate().all(|(c, &k)| k == if c as u32 == a / 2 { 2 } else { 1 }),
                "n {n}"
            );
            let bits = |v: &[[f32; 2]; 4]| v.map(|x| x.map(f32::to_bits));
            for _ in 0..100 {
                let u = rng.random_range(1..a / 2);
                let mut c = || [rng.random_range(-3e4f32..3e4), rng.random_range(-3e4f32..3e4)];
                let (y, ym) = ([c(), c(), c(), c()], [c(), c(), c(), c()]);
                let (fine, fringe, step) = (c()[0] / 3e4 * 0.5, c(), c());
                // Thread 0 of the other formulation: columns 0 and n/8.
                let (tw0, e0) = layout::column_twiddles(0, n);
                let (tw8, e8) = layout::column_twiddles(a / 2, n);
                let (x0, x8) = layout::post_pair_x2(0, y, ym, &tw0, &tw8, e0, e8);
                let (_, r8) = layout::rotations(0, n, fine, fringe, step);
                let z0 = layout::unzip_column(y, &tw0);
                let (c0, _) = layout::fixup_pair(0, z0, z0, e0, e0, layout::r2c_fixup_pair_x2);
                assert_eq!(bits(&c0), bits(&x0), "n {n}: column 0");
                let z8 = layout::unzip_column(ym, &tw8);
                let (d, dm) = layout::fixup_pair(1, z8, z8, e8, e8, layout::r2c_fixup_pair_x2);
                assert_eq!(bits(&d), bits(&x8), "n {n}: column n/8");
                assert_eq!(bits(&dm), bits(&x8), "n {n}: column n/8 as its own mirror");
                let (s8, s8m) = layout::post_rotations(a / 2, n, fine, fringe, step);
                assert_eq!(bits(&s8), bits(&r8), "n {n}: rotations of column n/8");
                assert_eq!(bits(&s8m), bits(&r8), "n {n}: its mirror's rotations");
                // Any other thread.
                let (tw, e) = layout::column_twiddles(u, n);
                let (twm, em) = layout::column_twiddles(a - u, n);
                let (x, xm) = layout::post_pair_x2(u, y, ym, &tw, &twm, e, em);
                let (z, zm) = (layout::unzip_column(y, &tw), layout::unzip_column(ym, &twm));
                let (h, hm) = layout::fixup_pair(1, z, zm, e, em, layout::r2c_fixup_pair_x2);
                assert_eq!((bits(&h), bits(&hm)), (bits(&x), bits(&xm)), "n {n} u {u}");
                let (r, rm) = layout::rotations(u, n, fine, fringe, step);
                let (q, qm) = layout::post_rotations(u, n, fine, fringe, step);
                assert_eq!((bits(&q), bits(&qm)), (bits(&r), bits(&rm)), "n {n} u {u}");
            }
        }
    }

    /// The paired fix-up gives channel k's value of the single-channel fix-up and its mirror's
    /// with the mirror's twiddle `-conj(t)`, bit for bit, and twice both without the halving.
    #[test]
    fn paired_r2c_fixup_is_both_single_fixups() {
        let mut rng = rng();
        let bits = |x: [f32; 2]| x.map(f32::to_bits);
        for _ in 0..20_000 {
            let mut c = || [rng.random_range(-3e4f32..3e4), rng.random_range(-3e4f32..3e4)];
            let (z, m) = (c(), c());
            let phase = rng.random_range(0.0..std::f64::consts::TAU);
            let t = [phase.cos() as f32, phase.sin() as f32];
            let (x, xm) = layout::r2c_fixup_pair(z, m, t);
            assert_eq!(bits(x), bits(layout::r2c_fixup(z, m, t)));
            assert_eq!(bits(xm), bits(layout::r2c_fixup(m, z, [-t[0], t[1]])));
            let (x2, xm2) = layout::r2c_fixup_pair_x2(z, m, t);
            assert_eq!(bits(x2), bits(x.map(|v| 2.0 * v)));
            assert_eq!(bits(xm2), bits(xm.map(|v| 2.0 * v)));
        }
    }

    /// The 32-bit unpack equals the 64-bit one for every width, bit offset and word pair, and
    /// twice the post arithmetic is the post arithmetic doubled, bit for bit (the halves are
    /// exact).
    #[test]
    fn unpack_words32_and_post_pair_x2_are_exact() {
        let mut rng = rng();
        for bits in BITS {
            for shift in 0..32 {
                for _ in 0..200 {
                    let (a, b) = (rng.random::<u32>(), rng.random::<u32>());
                    assert_eq!(
                        layout::unpack_words32(a, b, shift, bits),
                        layout::unpack_words(a, b, shift, bits),
                        "bits {bits} shift {shift}"
                    );
                }
            }
        }
        for n in [64u32, 1024, 32768] {
            for _ in 0..200 {
                let u = rng.random_range(0..layout::post_threads_per_group(n));
                let (_, w) = layout::post_columns(u, n);
                let mut c = || [rng.random_range(-3e4f32..3e4), rng.random_range(-3e4f32..3e4)];
                let (y, ym) = ([c(), c(), c(), c()], [c(), c(), c(), c()]);
                let (tw, e) = layout::column_twiddles(u, n);
                let (twm, em) = layout::column_twiddles(w, n);
                let (x, xm) = layout::post_pair(u, y, ym, &tw, &twm, e, em);
                let (x2, xm2) = layout::post_pair_x2(u, y, ym, &tw, &twm, e, em);
                for (a, b) in x.iter().chain(&xm).zip(x2.iter().chain(&xm2)) {
                    for k in 0..2 {
                        assert_eq!((2.0 * a[k]).to_bits(), b[k].to_bits(), "n {n} u {u}");
                        let g = c();
                        let (half, full) = ([0.5 * g[0], 0.5 * g[1]], g);
                        let r = c();
                        let one = layout::cmul(*a, layout::cmul(full, r));
                        let two = layout::cmul(*b, layout::cmul(half, r));
                        assert_eq!(
                            [one[0].to_bits(), one[1].to_bits()],
                            [two[0].to_bits(), two[1].to_bits()]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn ten_bit_packing_is_msb_first() {
        // 0x1ff (511), -512 (0x200), 1, -1 (0x3ff): bits 0111111111 1000000000 0000000001 1111111111
        let bytes = pack_samples(&[511, -512, 1, -1], 10).unwrap();
        assert_eq!(bytes, vec![0x7f, 0xe0, 0x00, 0x07, 0xff]);
        assert!(pack_samples(&[512], 10).is_err());
        assert!(matches!(pack_samples(&[0], 9), Err(Error::InvalidConfig(_))));
    }

    #[test]
    fn weights_are_normalised_symmetric_and_peak_in_the_middle() {
        for (n, t) in [(64, 1), (64, 4), (1024, 16)] {
            let w = hann_sinc_weights(n, t);
            assert_eq!(w.len(), 2 * n as usize * t as usize);
            let energy: f64 = w.iter().map(|&v| v as f64 * v as f64).sum();
            assert!((energy - 1.0).abs() < 1e-6, "energy {energy}");
            for i in 0..w.len() {
                assert_eq!(w[i], w[w.len() - 1 - i], "symmetric at {i}");
            }
            let peak = w.iter().cloned().fold(f32::MIN, f32::max);
            assert_eq!(peak, w[w.len() / 2]);
        }
    }

    /// The post-processing arithmetic (unzip + R2C fix-up) against rustfft of the real input.
    #[test]
    fn unzipped_fft_and_r2c_fixup_match_a_real_fft() {
        let mut rng = rng();
        for n in [64u32, 256, 4096] {
            let a = (n / 4) as usize;
            let g: Vec<f64> = (0..2 * n).map(|_| rng.random_range(-1.0..1.0)).collect();
            // z[q] = g[2q] + j g[2q+1], unzipped rows, each row FFT'd (what cuFFT does).
            let mut rows = vec![Complex::new(0.0f64, 0.0); n as usize];
            for q in 0..n {
                rows[layout::fft_index(q, n) as usize] =
                    Complex::new(g[2 * q as usize], g[2 * q as usize + 1]);
            }
            let fft_a = FftPlanner::<f64>::new().plan_fft_forward(a);
            for r in rows.chunks_mut(a) {
                fft_a.process(r);
            }
            let mut full: Vec<Complex<f64>> = g.iter().map(|&v| Complex::new(v, 0.0)).collect();
            FftPlanner::<f64>::new().plan_fft_forward(2 * n as usize).process(&mut full);
            let c32 = |c: Complex<f64>| [c.re as f32, c.im as f32];
            let scale = (2.0 * n as f64).sqrt();
            let mut seen = vec![false; n as usize];
            for u in 0..layout::post_threads_per_group(n) {
                let (_, w) = layout::post_columns(u, n);
                let y: [_; 4] = std::array::from_fn(|r| c32(rows[r * a + u as usize]));
                let ym: [_; 4] = std::array::from_fn(|r| c32(rows[r * a + w as usize]));
                let (tw, e) = layout::column_twiddles(u, n);
                let (twm, em) = layout::column_twiddles(w, n);
                let (x, xm) = layout::post_pair(u, y, ym, &tw, &twm, e, em);
                for v in 0..4 {
                    let mut check = |col: u32, got: [f32; 2]| {
                        let k = (col + a as u32 * v) as usize;
                        let want = full[k];
                        let err =
                            ((got[0] as f64 - want.re).powi(2) + (got[1] as f64 - want.im).powi(2)).sqrt();
                        assert!(err < 1e-5 * scale, "n {n} channel {k}: got {got:?}, want {want}");
                        seen[k] = true;
                    };
                    check(u, x[v as usize]);
                    if w != u {
                        check(w, xm[v as usize]);
                    }
                }
            }
            assert!(seen.iter().all(|&s| s), "every channel is produced");
        }
    }

    #[test]
    fn rotations_match_the_f64_phase_of_every_channel() {
        let mut rng = rng();
        for n in [64u32, 4096, 65536] {
            for _ in 0..200 {
                let fine = rng.random_range(-0.5..=0.5f64);
                let phase = rng.random_range(-10.0..10.0f64);
                let u = rng.random_range(0..layout::post_threads_per_group(n));
                let (_, w) = layout::post_columns(u, n);
                let fringe = [phase.cos() as f32, phase.sin() as f32];
                let step = [
                    (-std::f64::consts::FRAC_PI_4 * fine).cos() as f32,
                    (-std::f64::consts::FRAC_PI_4 * fine).sin() as f32,
                ];
                let (r, rm) = layout::rotations(u, n, fine as f32, fringe, step);
                for v in 0..4 {
                    for (col, got) in [(u, r[v as usize]), (w, rm[v as usize])] {
                        let k = (col + n / 4 * v) as f64;
                        let angle = phase - std::f64::consts::PI * fine * k / n as f64;
                        let err = (got[0] as f64 - angle.cos()).hypot(got[1] as f64 - angle.sin());
                        assert!(err < 2e-6, "n {n} u {u} column {col} v {v}: error {err}");
                    }
                }
            }
        }
    }

    #[test]
    fn fir_threads_take_whole_batches_and_follow_the_seed_heuristic() {
        for (n, taps, spectra) in
            [(64u32, 1u32, 8u32), (1024, 16, 65536), (32768, 16, 2048), (65536, 32, 8), (4096, 3, 16)]
        {
            let batch = layout::fir_batch(layout::fir_variant(taps));
            let k = layout::fir_spectra_per_thread(n, taps, spectra);
            assert!(k >= batch && k.is_multiple_of(batch), "n {n} T {taps}: {k} spectra per thread");
            // 16T spectra (32T outputs) per thread, rounded up to whole batches, unless that
            // leaves fewer than 2^17 threads.
            let by_threads = ((n as u64 * spectra as u64) >> 17) as u32;
            if by_threads >= 16 * taps {
                assert_eq!(k, (16 * taps).div_ceil(batch) * batch, "n {n} T {taps}");
            } else {
                assert_eq!(k, by_threads.max(1).div_ceil(batch) * batch, "n {n} T {taps}");
            }
            assert!(k < 16 * taps + batch, "n {n} T {taps}: no more than the heuristic asks, rounded up");
        }
        assert_eq!(layout::fir_variant(3), 4);
        assert_eq!(layout::fir_variant(17), 32);
        assert_eq!(layout::fir_kernel_name(layout::fir_variant(16)), "pfb_fir_t16");
    }

    /// The FIR's staged rows: copying whole 16-byte chunks from `fir_row_start` and reading
    /// each thread's pair at `fir_row_word` gives the pair `unpack_pair` reads from the whole
    /// stream, within `fir_row_chunks`, for every width, block width and bit offset; rows of
    /// one batch share the offset; the warp's shared-memory reads are conflict-free.
    #[test]
    fn staged_fir_rows_unpack_like_the_stream_and_read_conflict_free() {
        use radio_kernels_gpu::bank::is_conflict_free;
        let mut rng = rng();
        for bits in BITS {
            let stream: Vec<u32> = (0..4096).map(|_| rng.random()).collect();
            for width in [64u32, 128] {
                let chunks = layout::fir_row_chunks(bits, width);
                for start in (0..600u64).chain((0..50).map(|_| rng.random_range(600..2000u64))) {
                    let (chunk, offset) = layout::fir_row_start(start, bits);
                    assert!(offset < 128);
                    let row: Vec<u32> = stream[4 * chunk as usize..][..4 * chunks as usize].to_vec();
                    for t in 0..width {
                        let at = layout::fir_row_word(0, offset, t, bits);
                        let word = (at / 4) as usize;
                        assert!(word + 1 < row.len(), "bits {bits} width {width} start {start} thread {t}");
                        let bit = ((offset + 2 * t * bits) % 32) as u64;
                        let got = layout::unpack_pair_at(|i| row[word + i], bit, bits);
                        let want = layout::unpack_pair(|i| stream[i], start + 2 * t as u64, bits);
                        assert_eq!(got, want, "bits {bits} width {width} start {start} thread {t}");
                    }
                    for warp in 0..width / 32 {
                        for second in [0, 4] {
                            let addresses: [u32; 32] = std::array::from_fn(|l| {
                                layout::fir_row_word(0, offset, 32 * warp + l as u32, bits) + second
                            });
                            assert!(is_conflict_free(&addresses, 4), "bits {bits} offset {offset}");
                        }
                    }
                }
            }
            for n in [64u32, 1024, 65536] {
                let (c0, o0) = layout::fir_row_start(12345, bits);
                let (c1, o1) = layout::fir_row_start(12345 + 2 * n as u64, bits);
                assert_eq!(o0, o1, "next spectrum's row has the same offset");
                assert_eq!(16 * (c1 - c0), (n * bits / 4) as u64, "and starts n bits / 4 bytes later");
            }
        }
        // Window ring rows and the post scratch: one 8- or 4-byte word per lane, consecutive.
        let ring: [u32; 32] = std::array::from_fn(|l| 5 * layout::FIR_RING_ROW + 8 * l as u32);
        assert!(is_conflict_free(&ring, 8));
        for c in 0..8 {
            for j in 0..SPECTRA_PER_POST_THREAD {
                let scratch: [u32; 32] =
                    std::array::from_fn(|l| 4 * layout::post_scratch_word(c, j, 32 + l as u32));
                assert!(is_conflict_free(&scratch, 4));
            }
        }
        assert_eq!(
            4 * layout::post_scratch_word(7, SPECTRA_PER_POST_THREAD - 1, THREADS - 1) + 4,
            layout::POST_SCRATCH_BYTES
        );
    }

    /// The 16-tap FIR's row-per-warp order: a permutation of a full block's pairs (identity
    /// otherwise); each warp's 32 outputs are consecutive in one row of the unzipped matrix;
    /// its staged-row reads need at most `bits / 4` wavefronts (none extra at 4 and 12 bits).
    #[test]
    fn fir_warp_rows_store_contiguously_and_read_with_few_conflicts() {
        use radio_kernels_gpu::bank::wavefronts;
        assert!(layout::fir_warp_rows(16));
        assert!(FIR_VARIANTS.iter().filter(|&&t| t != 16).all(|&t| !layout::fir_warp_rows(t)));
        let mut seen = [false; THREADS as usize];
        for tid in 0..THREADS {
            let t = layout::fir_pair_of_thread(tid, THREADS, true);
            assert!(!seen[t as usize], "pair {t} taken twice");
            seen[t as usize] = true;
            assert_eq!(layout::fir_pair_of_thread(tid % 64, 64, true), tid % 64);
            assert_eq!(layout::fir_pair_of_thread(tid, THREADS, false), tid);
        }
        for n in [128u32, 1024, 65536] {
            for q0 in (0..n).step_by(THREADS as usize).take(8) {
                for warp in 0..THREADS / 32 {
                    let at: Vec<u32> = (0..32)
                        .map(|l| {
                            layout::fft_index(
                                q0 + layout::fir_pair_of_thread(32 * warp + l, THREADS, true),
                                n,
                            )
                        })
                        .collect();
                    assert!(at.windows(2).all(|p| p[1] == p[0] + 1), "n {n} q0 {q0} warp {warp}");
                }
            }
        }
        for bits in BITS {
            let most = match bits {
                4 | 12 => 1,
                8 | 10 => 2,
                _ => 4,
            };
            let mut worst = 0;
            for offset in 0..128 {
                for warp in 0..THREADS / 32 {
                    for second in [0, 4] {
                        let addresses: [u32; 32] = std::array::from_fn(|l| {
                            let t = layout::fir_pair_of_thread(32 * warp + l as u32, THREADS, true);
                            layout::fir_row_word(0, offset, t, bits) + second
                        });
                        worst = worst.max(wavefronts(&addresses, 4));
                    }
                }
            }
            assert_eq!(worst, most, "bits {bits}");
            assert!(worst <= bits.div_ceil(4));
        }
    }

    #[test]
    fn fft_index_is_a_permutation_and_post_columns_cover_each_column_once() {
        for n in [64u32, 1024, 65536] {
            let mut seen = vec![false; n as usize];
            for q in 0..n {
                let i = layout::fft_index(q, n) as usize;
                assert!(!seen[i]);
                seen[i] = true;
            }
            let a = n / 4;
            let mut owned = vec![0; a as usize];
            for u in 0..layout::post_threads_per_group(n) {
                let (c, w) = layout::post_columns(u, n);
                owned[c as usize] += 1;
                if w != c {
                    owned[w as usize] += 1;
                }
            }
            assert!(owned.iter().all(|&o| o == 1), "n {n}");
        }
    }

    #[test]
    fn quantisation_rounds_half_to_even_and_saturates_symmetrically() {
        for (v, want) in [(0.5, (0, false)), (1.5, (2, false)), (-2.5, (-2, false)), (127.49, (127, false))] {
            assert_eq!(quantise_reference(v, 127), want);
            assert_eq!(layout::quantise(v as f32, 127), want);
        }
        for (v, want) in
            [(127.5, (127, true)), (-128.0, (-127, true)), (1e30, (127, true)), (-7.5, (-7, true))]
        {
            let max = if v == -7.5 { 7 } else { 127 };
            assert_eq!(quantise_reference(v, max), want);
            assert_eq!(layout::quantise(v as f32, max), want);
        }
        assert_eq!(layout::quantise(f32::NAN, 127), (0, true));
        assert_eq!(quantise_reference(f64::NAN, 127), (0, true));
        assert_eq!(layout::quantise_complex([f32::NAN, 1.0], false), (0x0100, 1));
        assert_eq!(layout::quantise_complex([2.0, f32::NAN], true), (0x02, 1));
        assert_eq!(layout::quantise_complex([-7.6, 6.6], true), (0x79, 1));
        assert_eq!(layout::quantise_complex([-1.0, 2.0], false), (0x02ff, 0));
    }

    /// `quantise_complex` (a saturating conversion, a bound, one compare for both components)
    /// gives `quantise`'s values and saturation of each component, on every half-integer edge,
    /// the extremes, NaN and random values.
    #[test]
    fn complex_quantisation_matches_the_component_rule() {
        let component_rule = |x: [f32; 2], int4: bool| {
            let max = if int4 { 7 } else { 127 };
            let ((re, sr), (im, si)) = (layout::quantise(x[0], max), layout::quantise(x[1], max));
            let (mask, shift) = if int4 { (0xf, 4) } else { (0xff, 8) };
            ((re as u32 & mask) | ((im as u32 & mask) << shift), (sr | si) as u32)
        };
        let mut values = vec![0.0f32, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN];
        for k in -140..=140 {
            let h = k as f32 + 0.5;
            values.extend([k as f32, h, h.next_up(), h.next_down()]);
        }
        let mut rng = rng();
        values.extend((0..2000).map(|_| rng.random_range(-300.0f32..300.0)));
        for int4 in [false, true] {
            for (i, &re) in values.iter().enumerate() {
                for im in [values[(7 * i + 3) % values.len()], 0.0, f32::NAN, 127.5, -7.5] {
                    let x = [re, im];
                    assert_eq!(
                        layout::quantise_complex(x, int4),
                        component_rule(x, int4),
                        "{x:?} int4 {int4}"
                    );
                }
            }
        }
    }

    #[test]
    fn delay_split_rounds_to_the_nearest_sample_and_evaluates_at_the_window_centre() {
        let config = ChannelizerConfig { taps: 4, ..ChannelizerConfig::new(64) };
        let model = DelayModel {
            reference_sample: 256.0,
            delay: 10.4,
            delay_rate: 0.001,
            phase: 1.0,
            phase_rate: 0.01,
        };
        // Spectrum 0's window centre is n T = 256 = the reference.
        let d = model.spectrum(&config, 0);
        assert_eq!(d.coarse, 10);
        assert!((d.fine - 0.4).abs() < 1e-12 && (d.phase - 1.0).abs() < 1e-12);
        // Spectrum 1: 128 samples later: delay 10.528 -> 11 and -0.472.
        let d = model.spectrum(&config, 1);
        assert_eq!(d.coarse, 11);
        assert!((d.fine + 0.472).abs() < 1e-12 && (d.phase - 2.28).abs() < 1e-12);
        let half = DelayModel { delay: -2.5, ..Default::default() };
        assert_eq!(half.spectrum(&config, 3).coarse, -2, "ties to even");
        let s = Schedule::new(&config, &[model, half], 0).unwrap();
        assert_eq!(s.starts[0][1], 128 - 11);
        assert_eq!(s.starts[1][0], 2);
    }

    /// The schedule reuses a sine and cosine only for an argument equal bit for bit: every
    /// entry equals the plain per-spectrum computation, for constant, slowly and quickly
    /// changing delays and phases (and a pool schedule refilled from another chunk).
    #[test]
    fn schedule_fill_gives_the_bits_of_the_plain_computation() {
        let mut rng = rng();
        let config = ChannelizerConfig { taps: 4, max_delay: 5000, ..ChannelizerConfig::new(64) };
        let models = [
            DelayModel { delay: 12.3, phase: 0.4, ..Default::default() },
            DelayModel { delay: -0.0, phase: -0.0, ..Default::default() },
            DelayModel { delay: 7.5, delay_rate: 1e-9, phase: 1.0, phase_rate: 0.0, reference_sample: 3.0 },
            DelayModel {
                delay: -40.0,
                delay_rate: 3e-3,
                phase: 2.0,
                phase_rate: 1e-2,
                reference_sample: 0.0,
            },
        ];
        let mut pool = Schedule::with_capacity(0);
        for _ in 0..20 {
            let pair = [models[rng.random_range(0..4)], models[rng.random_range(0..4)]];
            let first = rng.random_range(-100..10_000i64);
            pool.fill(&config, &pair, first).unwrap();
            for (p, model) in pair.iter().enumerate() {
                for i in 0..config.spectra_per_chunk() as usize {
                    let d = model.spectrum(&config, first + i as i64);
                    let (fs, fc) = d.phase.sin_cos();
                    let (ss, sc) = (-std::f64::consts::FRAC_PI_4 * d.fine).sin_cos();
                    let want = [fc as f32, fs as f32, sc as f32, ss as f32].map(f32::to_bits);
                    assert_eq!(pool.rotation[p][i].map(f32::to_bits), want, "pol {p} spectrum {i}");
                    assert_eq!(pool.fine[p][i].to_bits(), (d.fine as f32).to_bits());
                    assert_eq!(pool.starts[p][i], 128 * (first + i as i64) - d.coarse);
                }
            }
            assert_eq!(Schedule::new(&config, &pair, first).unwrap(), pool);
        }
    }

    /// The streaming path's lost-flag scan gives [`lost_flags`]'s flags for windows that move
    /// forward, step back and forth (delay changes), start before the stream or overlap, with
    /// packets lost at random, in runs, or none.
    #[test]
    fn lost_flag_scan_equals_lost_flags() {
        let mut rng = rng();
        for case in 0..300 {
            let packet = [1u32, 7, 64, 256][case % 4];
            let window = rng.random_range(1..2000u64);
            let count = rng.random_range(0..60usize);
            let heap = rng.random_range(1..9u32);
            let loss = [0u32, 2, 10, 1000][rng.random_range(0..4)];
            let packets = 20_000usize;
            let present: [Vec<bool>; 2] = std::array::from_fn(|_| {
                let mut run = 0;
                (0..packets)
                    .map(|_| {
                        if run > 0 {
                            run -= 1;
                            return false;
                        }
                        if loss > 0 && rng.random_range(0..loss) == 0 {
                            run = rng.random_range(0..4);
                            return false;
                        }
                        true
                    })
                    .collect()
            });
            let first = rng.random_range(0..50i64);
            let starts: [Vec<i64>; 2] = std::array::from_fn(|_| {
                let mut at = rng.random_range(-3000..3000i64);
                (0..count)
                    .map(|_| {
                        at += match rng.random_range(0..10) {
                            0 => rng.random_range(-1500..0),
                            1 => rng.random_range(0..1500),
                            _ => rng.random_range(0..200),
                        };
                        at
                    })
                    .collect()
            });
            let arrived =
                |pol: usize, k: i64| k >= first && present[pol].get((k - first) as usize) == Some(&true);
            let (a0, a1) = (|k| arrived(0, k), |k| arrived(1, k));
            let want = lost_flags(&starts, window, packet, [&a0, &a1], heap).unwrap();
            let (mut spectra, mut heaps) = (vec![true; 3], Vec::new());
            lost_flags_into(&starts, window, packet, heap, arrived, &mut spectra, &mut heaps).unwrap();
            assert_eq!((spectra, heaps), want, "case {case}");
        }
        let (mut s, mut h) = (Vec::new(), Vec::new());
        let none = |_: usize, _: i64| true;
        assert!(lost_flags_into(&[vec![0], vec![]], 8, 4, 1, none, &mut s, &mut h).is_err());
        assert!(lost_flags_into(&[vec![0], vec![0]], 0, 4, 1, none, &mut s, &mut h).is_err());
        assert!(lost_flags_into(&[vec![0], vec![0]], 8, 0, 1, none, &mut s, &mut h).is_err());
        assert!(lost_flags_into(&[vec![i64::MAX], vec![0]], 8, 4, 1, none, &mut s, &mut h).is_err());
    }

    /// The bound on output chunks per push, for the shapes the streaming engine runs.
    #[test]
    fn max_outputs_per_push_counts_the_chunk_and_the_delay_range() {
        let c =
            ChannelizerConfig { heaps_per_chunk: 128, chunk_samples: 1 << 24, ..ChannelizerConfig::new(256) };
        assert_eq!(2 * 256 * c.spectra_per_chunk(), 1 << 24);
        assert_eq!(c.max_outputs_per_push(), 2, "one chunk, and one more across a delay change");
        assert_eq!(ChannelizerConfig { max_delay: 0, ..c.clone() }.max_outputs_per_push(), 1);
        assert_eq!(
            ChannelizerConfig { heaps_per_chunk: 8, max_delay: 0, ..c.clone() }.max_outputs_per_push(),
            16
        );
        assert_eq!(ChannelizerConfig { heaps_per_chunk: 8, ..c.clone() }.max_outputs_per_push(), 17);
        assert_eq!(ChannelizerConfig { heaps_per_chunk: 0, ..c.clone() }.max_outputs_per_push(), usize::MAX);
        assert_eq!(ChannelizerConfig { chunk_samples: 32, max_delay: 0, ..c }.max_outputs_per_push(), 1);
    }

    #[test]
    fn delays_beyond_max_delay_are_typed_errors() {
        let config = ChannelizerConfig { max_delay: 100, ..ChannelizerConfig::new(64) };
        let far = DelayModel { delay: 100.6, ..Default::default() };
        assert!(matches!(
            Schedule::new(&config, &[far, DelayModel::default()], 0),
            Err(Error::InvalidConfig(_))
        ));
        let near = DelayModel { delay: -100.4, ..Default::default() };
        assert!(Schedule::new(&config, &[near, near], 0).is_ok());
        let nan = DelayModel { delay: f64::NAN, ..Default::default() };
        assert!(matches!(
            Schedule::new(&config, &[near, nan], 0),
            Err(Error::NonFinite { what: DELAY_MODEL_FIELDS, index: 6 })
        ));
        // Finite models whose delay or phase overflows at the chunk: typed errors.
        let steep = DelayModel { delay_rate: 1e308, ..Default::default() };
        assert!(matches!(Schedule::new(&config, &[steep, near], 1 << 40), Err(Error::InvalidConfig(_))));
        let spin = DelayModel { phase_rate: f64::MAX, ..Default::default() };
        assert!(matches!(Schedule::new(&config, &[near, spin], 1 << 40), Err(Error::InvalidConfig(_))));
        // Past the i64 stream positions.
        assert!(matches!(Schedule::new(&config, &[near, near], i64::MAX - 3), Err(Error::InvalidConfig(_))));
        assert!(matches!(Schedule::new(&config, &[near, near], i64::MAX / 64), Err(Error::InvalidConfig(_))));
    }

    #[test]
    fn invalid_configurations_are_rejected() {
        let ok = ChannelizerConfig::new(1024);
        ok.validate().unwrap();
        let cases = [
            ChannelizerConfig { channels: 32, ..ok.clone() },
            ChannelizerConfig { channels: 131072, ..ok.clone() },
            ChannelizerConfig { channels: 1000, ..ok.clone() },
            ChannelizerConfig { taps: 0, ..ok.clone() },
            ChannelizerConfig { taps: 33, ..ok.clone() },
            ChannelizerConfig { bits: 9, ..ok.clone() },
            ChannelizerConfig { bits: 0, ..ok.clone() },
            ChannelizerConfig { spectra_per_heap: 10, ..ok.clone() },
            ChannelizerConfig { spectra_per_heap: 0, ..ok.clone() },
            ChannelizerConfig { heaps_per_chunk: 0, ..ok.clone() },
            ChannelizerConfig { packet_samples: 0, ..ok.clone() },
            ChannelizerConfig { chunk_samples: 4096 + 32, ..ok.clone() },
            ChannelizerConfig { chunk_samples: 48, packet_samples: 48, ..ok.clone() },
            ChannelizerConfig { channels: 65536, heaps_per_chunk: 128, ..ok.clone() },
            ChannelizerConfig { max_delay: u32::MAX, ..ok.clone() },
        ];
        for c in cases {
            assert!(matches!(c.validate(), Err(Error::InvalidConfig(_))), "{c:?}");
        }
    }

    #[test]
    fn lost_flags_match_a_sample_by_sample_check() {
        let mut rng = rng();
        for _ in 0..20 {
            let packet = [16u32, 64, 100][rng.random_range(0..3)];
            let window = rng.random_range(1..400u64);
            let heap = 4;
            let starts: [Vec<i64>; 2] =
                std::array::from_fn(|_| (0..16).map(|_| rng.random_range(-50..2000)).collect());
            let present: [Vec<bool>; 2] =
                std::array::from_fn(|_| (0..30).map(|_| rng.random_range(0..8) != 0).collect());
            let arrived = |pol: usize| {
                let p = &present[pol];
                move |packet: i64| packet >= 0 && p.get(packet as usize) == Some(&true)
            };
            let (a0, a1) = (arrived(0), arrived(1));
            let (spectra, heaps) = lost_flags(&starts, window, packet, [&a0, &a1], heap).unwrap();
            for i in 0..16 {
                let want = (0..2).any(|pol| {
                    (starts[pol][i]..starts[pol][i] + window as i64).any(|t| {
                        t < 0 || !present[pol].get((t / packet as i64) as usize).copied().unwrap_or(false)
                    })
                });
                assert_eq!(spectra[i], want, "spectrum {i}");
            }
            for h in 0..4 {
                assert_eq!(heaps[h], spectra[4 * h..4 * h + 4].iter().any(|&l| l));
            }
        }
    }

    /// The CPU reference itself: a tone at a channel centre lands in that channel with the
    /// amplitude `A/2 sum(w)` and the phase of its delay.
    #[test]
    fn reference_puts_a_delayed_tone_in_its_channel_with_the_delay_phase() {
        let config = ChannelizerConfig {
            taps: 4,
            bits: 16,
            spectra_per_heap: 8,
            max_delay: 64,
            ..ChannelizerConfig::new(64)
        };
        let n = 64usize;
        let k0 = 20usize;
        let amp = 10000.0;
        let len = 2 * n * 16 + 256;
        let samples: Vec<i32> = (0..len)
            .map(|t| (amp * (std::f64::consts::PI * k0 as f64 * t as f64 / n as f64).cos()).round() as i32)
            .collect();
        let weights = hann_sinc_weights(64, 4);
        let gains = vec![[1.0 / 4096.0, 0.0]; 2 * n];
        let present = vec![true; 64];
        let d = 7.3;
        let models = [DelayModel::default(), DelayModel { delay: d, ..Default::default() }];
        let r = reference_chunk(
            &config,
            &weights,
            &gains,
            &models,
            [&samples, &samples],
            [&present, &present],
            1,
        )
        .unwrap();
        let sum: f64 = weights.iter().map(|&w| w as f64).sum();
        for s in 0..8 {
            let y0 = r.values[config.output_index(0, k0 as u32, s, 0)];
            let y1 = r.values[config.output_index(0, k0 as u32, s, 1)];
            assert!((y0.norm() * 4096.0 / (amp / 2.0 * sum) - 1.0).abs() < 1e-3, "amplitude {}", y0.norm());
            let want = -std::f64::consts::PI * k0 as f64 * d / n as f64;
            let got = (y1 / y0).arg();
            let diff = (got - want).rem_euclid(std::f64::consts::TAU);
            assert!(diff.min(std::f64::consts::TAU - diff) < 1e-3, "phase {got} vs {want}");
        }
        assert!(r.lost_spectra.iter().all(|&l| !l));
    }

    /// The fused kernel's FFT, emulated pass by pass as the device runs it (slots with pads,
    /// Stockham radix-16 passes with the last radix 2, 4 or 8, twiddles from the f64 table,
    /// then the R2C fix-up), matches a 2n-point real f64 FFT; every pass's stores are a
    /// permutation of the spectrum.
    #[test]
    fn fused_fft_passes_match_a_real_fft() {
        use fused_layout::*;
        let mut rng = rng();
        for log2 in 6..=12u32 {
            let n = 1u32 << log2;
            let tw = fused_twiddles(n).unwrap();
            let g: Vec<f64> = (0..2 * n).map(|_| rng.random_range(-1000.0..1000.0)).collect();
            let mut smem = vec![[f32::NAN; 2]; fused_buffer_slots(n) as usize];
            for q in 0..n {
                smem[fused_slot(q) as usize] = [g[2 * q as usize] as f32, g[2 * q as usize + 1] as f32];
            }
            let mut ns = 1;
            while ns < n {
                let radix = fused_radix(n, ns);
                let mut next = smem.clone();
                let mut written = vec![false; n as usize];
                for j in 0..n / radix {
                    let mut v = [[0.0f32; 2]; 16];
                    let w = stockham_twiddles(|at| tw[at as usize], j, ns, n, radix);
                    for r in 0..radix {
                        v[r as usize] = smem[fused_slot(stockham_load(j, r, n, radix)) as usize];
                        if ns > 1 {
                            v[r as usize] = layout::cmul(v[r as usize], w[r as usize]);
                        }
                    }
                    let v = dft_radix(v, radix);
                    for r in 0..radix {
                        let e = stockham_store(j, r, ns, radix);
                        assert!(!written[e as usize], "n {n}, ns {ns}: element {e} written twice");
                        written[e as usize] = true;
                        next[fused_slot(e) as usize] = v[r as usize];
                    }
                }
                smem = next;
                ns *= radix;
            }
            let mut want: Vec<Complex<f64>> = g.iter().map(|&x| Complex::new(x, 0.0)).collect();
            FftPlanner::<f64>::new().plan_fft_forward(2 * n as usize).process(&mut want);
            let (mut err, mut norm) = (0.0, 0.0);
            for k in 0..n {
                let z = smem[fused_slot(k) as usize];
                let m = smem[fused_slot((n - k) & (n - 1)) as usize];
                let x = layout::r2c_fixup(z, m, tw[k as usize]);
                err +=
                    (x[0] as f64 - want[k as usize].re).powi(2) + (x[1] as f64 - want[k as usize].im).powi(2);
                norm += want[k as usize].norm_sqr();
            }
            let rel = (err / norm).sqrt();
            println!("n {n}: relative L2 error {rel:.2e}");
            assert!(rel < 2e-6, "n {n}: relative L2 error {rel:.2e}");
        }
    }

    /// Every shared-memory access of the fused FFT passes (8-byte loads and stores of each
    /// warp of each round, spectra of one block side by side), the FIR's stores and the post
    /// loads of `Z[k]` are bank-conflict free; the post loads of the mirror `Z[n - k]` cross a
    /// pad in each half-warp phase: at most 2-way (4 wavefronts instead of 2).
    #[test]
    fn fused_shared_memory_accesses_are_conflict_free() {
        use fused_layout::*;
        use radio_kernels_gpu::bank::wavefronts;
        for log2 in 6..=12u32 {
            let n = 1u32 << log2;
            let g = fused_spectra_per_block(n, 256);
            let buffer = 8 * fused_buffer_slots(n);
            let buffers = 2 * g;
            let mut ns = 1;
            while ns < n {
                let radix = fused_radix(n, ns);
                let per_buffer = n / radix;
                let per_round = FUSED_THREADS / per_buffer;
                let mut first = 0;
                while first < buffers {
                    for warp in 0..FUSED_THREADS / 32 {
                        let lanes: Vec<(u32, u32)> = (0..32)
                            .map(|l| {
                                let tid = 32 * warp + l;
                                (first + tid / per_buffer, tid % per_buffer)
                            })
                            .filter(|&(b, _)| b < buffers && b < first + per_round)
                            .collect();
                        if lanes.len() < 32 {
                            // Partial warps only at the end of a round of small spectra.
                            assert!(per_buffer < 32 || lanes.is_empty(), "n {n} ns {ns}");
                            continue;
                        }
                        for r in 0..radix {
                            let load: [u32; 32] = std::array::from_fn(|l| {
                                let (b, j) = lanes[l];
                                b * buffer + 8 * fused_slot(stockham_load(j, r, n, radix))
                            });
                            let store: [u32; 32] = std::array::from_fn(|l| {
                                let (b, j) = lanes[l];
                                b * buffer + 8 * fused_slot(stockham_store(j, r, ns, radix))
                            });
                            assert_eq!(wavefronts(&load, 8), 2, "n {n}, ns {ns}, radix {radix}: loads");
                            assert_eq!(wavefronts(&store, 8), 2, "n {n}, ns {ns}, radix {radix}: stores");
                        }
                    }
                    first += per_round;
                }
                ns *= radix;
            }
            for warp in 0..n.div_ceil(32) {
                let z: [u32; 32] = std::array::from_fn(|l| 8 * fused_slot((32 * warp + l as u32) % n));
                assert_eq!(wavefronts(&z, 8), 2, "n {n}: FIR stores / post loads");
                let m: [u32; 32] =
                    std::array::from_fn(|l| 8 * fused_slot((n - 32 * warp - l as u32) & (n - 1)));
                let w = wavefronts(&m, 8);
                assert!(w <= 4, "n {n}, warp {warp}: post mirror loads take {w} wavefronts");
            }
        }
    }

    /// The cluster kernel's output slots: the four blocks together hold every channel, each
    /// once, except the self-mirrored column n/8's (the same values twice, from one thread);
    /// gain slots are a bijection onto the gain table; shared memory fits an SM for every bit
    /// width, with 16-byte aligned stages.
    #[test]
    fn cluster_blocks_cover_every_channel_and_fit_shared_memory() {
        use cluster_layout::*;
        let n = CLUSTER_CHANNELS;
        let a = n / UNZIP;
        let mut seen = vec![0u32; n as usize];
        for rank in 0..CLUSTER_BLOCKS {
            let slots = cluster_block_slots(rank);
            let mut gains = vec![false; CLUSTER_GAIN_SLOTS as usize];
            for slot in 0..slots {
                seen[cluster_slot_channel(slot, rank) as usize] += 1;
                for p in 0..2 {
                    let g = cluster_gain_slot(p, slot) as usize;
                    assert!(!gains[g], "rank {rank} slot {slot} pol {p}: gain slot {g} twice");
                    gains[g] = true;
                }
            }
            if rank == 0 {
                assert!(gains.iter().all(|&g| g));
            }
        }
        for (k, &count) in seen.iter().enumerate() {
            let twice = k as u32 % a == a / 2;
            assert_eq!(count, if twice { 2 } else { 1 }, "channel {k}");
        }
        for lane in 0..CLUSTER_POST_COLUMNS {
            for side in 0..2 {
                for v in 0..4 {
                    let slot = cluster_out_slot(lane, side, v);
                    let u = lane + 1; // rank 0
                    assert_eq!(cluster_slot_channel(slot, 0), if side == 0 { u } else { a - u } + a * v);
                }
            }
        }
        assert!(cluster_shared_bytes(16) > 227 * 1024, "16-bit input would fit too");
        for bits in layout::BITS.into_iter().filter(|&b| b <= CLUSTER_MAX_BITS) {
            assert!(
                cluster_shared_bytes(bits) <= 227 * 1024,
                "{bits}-bit: {} bytes",
                cluster_shared_bytes(bits)
            );
            // Rows a whole number of chunks apart, so one run stages the batch; every pair's two
            // words of the last row, at every offset within the first chunk, lie inside it.
            assert_eq!(cluster_row_step(bits) % 16, 0);
            assert!(cluster_stage_chunks(bits) <= CLUSTER_STAGE_COPIES * CLUSTER_THREADS);
            for offset in 0..128 {
                let last = (CLUSTER_BATCH - 1) * cluster_row_step(bits);
                let word = layout::fir_row_word(0, offset, CLUSTER_CHANNELS - 1, bits);
                assert!(last + word + 8 <= 16 * cluster_stage_chunks(bits), "{bits}-bit offset {offset}");
            }
        }
        assert_eq!(CLUSTER_STAGE_OFFSET % 16, 0);
        assert_eq!(CLUSTER_FFT_BYTES % 16, 0);
        assert_eq!(CLUSTER_POST_THREADS, 32 * CLUSTER_BATCH, "one post warp per spectrum of a batch");
        assert_eq!(CLUSTER_THREADS, CLUSTER_POINTS, "one row twiddle per thread");
        assert_eq!(CLUSTER_THREADS, 16 * CLUSTER_TRANSFORMS, "one radix-16 butterfly per FIR thread");
        // Warpgroups of 128 threads take their register budgets (`setmaxnreg`) together.
        assert_eq!(CLUSTER_THREADS % 128, 0);
        assert_eq!(CLUSTER_POST_THREADS % 128, 0);
        assert_eq!(CLUSTER_BLOCK_THREADS * CLUSTER_LAUNCH_REGISTERS, 65536, "the register file");
    }

    /// Every shared-memory access of the cluster kernel's loop, as its warps issue them: the FIR
    /// stores, both FFT passes' loads and stores, the post's gain loads and output-staging
    /// stores and the copy-out's loads are conflict-free; the post's (remote) loads of columns
    /// u and n/4 - u at most 2-way.
    #[test]
    fn cluster_shared_memory_accesses_are_conflict_free() {
        use cluster_layout::*;
        use fused_layout::{fused_slot, stockham_load, stockham_store};
        use radio_kernels_gpu::bank::wavefronts;
        let a = CLUSTER_POINTS;
        let buffer = 8 * fused_layout::fused_buffer_slots(a);
        for warp in 0..CLUSTER_THREADS / 32 {
            let tid = |l: usize| 32 * warp + l as u32;
            for b in 0..CLUSTER_TRANSFORMS {
                let fir: [u32; 32] = std::array::from_fn(|l| b * buffer + 8 * fused_slot(tid(l)));
                assert_eq!(wavefronts(&fir, 8), 2, "FIR stores");
            }
            for ns in [1, 16] {
                for r in 0..16 {
                    let at = |l: usize, e: u32| (tid(l) / 16) * buffer + 8 * fused_slot(e);
                    let load: [u32; 32] =
                        std::array::from_fn(|l| at(l, stockham_load(tid(l) % 16, r, a, 16)));
                    let store: [u32; 32] =
                        std::array::from_fn(|l| at(l, stockham_store(tid(l) % 16, r, ns, 16)));
                    assert_eq!(wavefronts(&load, 8), 2, "pass {ns}, r {r}: loads");
                    assert_eq!(wavefronts(&store, 8), 2, "pass {ns}, r {r}: stores");
                }
            }
        }
        for r in 1..16 {
            // Second-pass twiddles: lanes 16-31 repeat lanes 0-15 (a broadcast).
            let twiddle: [u32; 32] = std::array::from_fn(|l| 8 * cluster_row_twiddle(r, l as u32 % 16));
            assert_eq!(wavefronts(&twiddle, 8), 2, "row twiddles, r {r}");
        }
        for slot in 0..CLUSTER_COLUMN_TWIDDLES {
            let (side, j) = (slot / (CLUSTER_COLUMN_TWIDDLES / 2), slot % (CLUSTER_COLUMN_TWIDDLES / 2));
            let column: [u32; 32] = std::array::from_fn(|l| 8 * cluster_column_twiddle(side, j, l as u32));
            assert_eq!(wavefronts(&column, 8), 2, "column twiddles");
        }
        for rank in 0..CLUSTER_BLOCKS {
            let u = |l: usize| rank * CLUSTER_POST_COLUMNS + l as u32 + 1;
            let column: [u32; 32] = std::array::from_fn(|l| 8 * fused_slot(u(l)));
            let mirror: [u32; 32] = std::array::from_fn(|l| 8 * fused_slot(a - u(l)));
            // Columns u = 32 c + 1 .. 32 c + 32 straddle a pad slot in each half-warp phase:
            // 2-way, as the fused kernel's mirror loads.
            assert!(wavefronts(&column, 8) <= 4, "rank {rank}: post loads of u");
            assert!(wavefronts(&mirror, 8) <= 4, "rank {rank}: post loads of n/4 - u");
        }
        for s in 0..CLUSTER_BATCH {
            for side in 0..2 {
                for v in 0..4 {
                    let stage: [u32; 32] =
                        std::array::from_fn(|l| 4 * cluster_out_word(s, cluster_out_slot(l as u32, side, v)));
                    assert_eq!(wavefronts(&stage, 4), 1, "output staging stores");
                    for p in 0..2 {
                        let gain: [u32; 32] = std::array::from_fn(|l| {
                            8 * cluster_gain_slot(p, cluster_out_slot(l as u32, side, v))
                        });
                        assert_eq!(wavefronts(&gain, 8), 2, "gain loads");
                    }
                }
            }
            for first in (0..CLUSTER_OUT_SLOTS).step_by(32) {
                let copy: [u32; 32] =
                    std::array::from_fn(|l| 4 * cluster_out_word(s, (first + l as u32) % CLUSTER_OUT_SLOTS));
                assert!(wavefronts(&copy, 4) <= 2, "copy-out loads");
            }
        }
    }

    /// The cluster kernel's row FFT as the device runs it (two radix-16 Stockham passes over
    /// padded slots, the first into a scratch buffer and the second back; the second pass's
    /// twiddles `W_(n/4)^(j r)` from the table the kernel builds, entry `8 j r` of the n-point
    /// one) matches an f64 DFT of n/4 points.
    #[test]
    fn cluster_row_fft_matches_a_dft() {
        use cluster_layout::*;
        use fused_layout::*;
        let mut rng = rng();
        let a = CLUSTER_POINTS;
        let tw = fused_twiddles(CLUSTER_CHANNELS).unwrap();
        let z: Vec<[f64; 2]> =
            (0..a).map(|_| [rng.random_range(-1000.0..1000.0), rng.random_range(-1000.0..1000.0)]).collect();
        let mut smem = vec![[f32::NAN; 2]; fused_buffer_slots(a) as usize];
        for q in 0..a {
            smem[fused_slot(q) as usize] = [z[q as usize][0] as f32, z[q as usize][1] as f32];
        }
        for ns in [1, 16] {
            let mut next = smem.clone();
            let table: Vec<[f32; 2]> = (0..256u32)
                .map(|slot| {
                    let (r, j) = (slot / 16, slot % 16);
                    assert_eq!(cluster_row_twiddle(r, j), slot);
                    tw[(8 * r * j) as usize]
                })
                .collect();
            for j in 0..a / 16 {
                let mut v = [[0.0f32; 2]; 16];
                for r in 0..16 {
                    v[r as usize] = smem[fused_slot(stockham_load(j, r, a, 16)) as usize];
                    if ns > 1 {
                        let w = table[cluster_row_twiddle(r, j % ns) as usize];
                        v[r as usize] = layout::cmul(v[r as usize], w);
                    }
                }
                let v = dft_radix(v, 16);
                for r in 0..16 {
                    next[fused_slot(stockham_store(j, r, ns, 16)) as usize] = v[r as usize];
                }
            }
            smem = next;
        }
        let (mut err, mut norm) = (0.0f64, 0.0f64);
        for k in 0..a {
            let mut want = [0.0f64; 2];
            for (q, zq) in z.iter().enumerate() {
                let (s, c) =
                    (-std::f64::consts::TAU * (q as u64 * k as u64 % a as u64) as f64 / a as f64).sin_cos();
                want[0] += zq[0] * c - zq[1] * s;
                want[1] += zq[0] * s + zq[1] * c;
            }
            let got = smem[fused_slot(k) as usize];
            err += (got[0] as f64 - want[0]).powi(2) + (got[1] as f64 - want[1]).powi(2);
            norm += want[0].powi(2) + want[1].powi(2);
        }
        let rel = (err / norm).sqrt();
        assert!(rel < 1e-6, "relative L2 error {rel}");
    }

    #[test]
    fn fused_blocks_share_a_heap_and_fit_shared_memory() {
        use fused_layout::*;
        for log2 in 6..=12u32 {
            let n = 1u32 << log2;
            for s in [4, 8, 12, 16, 24, 256] {
                let g = fused_spectra_per_block(n, s);
                assert_eq!(s % g, 0);
                assert!(fused_shared_bytes(n, g) <= FUSED_MAX_SHARED);
                assert!(g >= 2 || n == 4096, "n {n} S {s}: g {g}");
            }
        }
        assert_eq!(fused_spectra_per_block(512, 256), 4);
        assert_eq!(fused_spectra_per_block(1024, 256), 4);
        assert_eq!(fused_spectra_per_block(4096, 256), 1);
    }

    /// The fused post's per-thread fix-up (columns u and its mirror, [`layout::post_columns`])
    /// covers every channel once, reads each spectrum value once, and gives each channel
    /// `r2c_fixup(Z[k], Z[n - k], exp(-j pi k / n))` (within the f32 rounding of the row
    /// twiddle products).
    #[test]
    fn fused_post_pairs_cover_every_channel_with_its_mirror() {
        let mut rng = rng();
        for log2 in 6..=12u32 {
            let n = 1u32 << log2;
            let a = n / 4;
            let tw = fused_twiddles(n).unwrap();
            let z: Vec<[f32; 2]> =
                (0..n).map(|_| [rng.random_range(-1e3..1e3), rng.random_range(-1e3..1e3)]).collect();
            let mut seen = vec![0u32; n as usize];
            for u in 0..n / 8 {
                let (_, w) = layout::post_columns(u, n);
                let zu: [[f32; 2]; 4] = std::array::from_fn(|v| z[(u + a * v as u32) as usize]);
                let zw: [[f32; 2]; 4] = std::array::from_fn(|v| z[(w + a * v as u32) as usize]);
                let (x, xm) =
                    layout::fixup_pair(u, zu, zw, tw[u as usize], tw[w as usize], layout::r2c_fixup_pair);
                for v in 0..4u32 {
                    for (k, got) in [(u + a * v, x[v as usize]), (w + a * v, xm[v as usize])] {
                        seen[k as usize] += 1;
                        let want =
                            layout::r2c_fixup(z[k as usize], z[((n - k) & (n - 1)) as usize], tw[k as usize]);
                        for c in 0..2 {
                            assert!((got[c] - want[c]).abs() <= 1e-3, "n {n} k {k}: {got:?} vs {want:?}");
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "n {n}: every channel exactly once");
        }
    }
}
