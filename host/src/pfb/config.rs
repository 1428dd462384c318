//! The channelizer's configuration: output format, sizes and their validation.
use super::*;

/// Output sample format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputFormat {
    /// Complex int8, saturated to [-127, 127]: 2 bytes per value.
    Ci8,
    /// Complex int4, saturated to [-7, 7]: 1 byte per value, real in the low nibble.
    Ci4,
}

impl OutputFormat {
    /// Bytes of one complex output value: 2 for [`Ci8`](Self::Ci8) (real byte first), 1 for
    /// [`Ci4`](Self::Ci4) (one [`Ci4`](crate::Ci4)).
    pub fn bytes_per_value(self) -> usize {
        match self {
            OutputFormat::Ci8 => 2,
            OutputFormat::Ci4 => 1,
        }
    }
    /// The largest magnitude of each part after saturation (127 or 7): parts lie in
    /// `[-max, max]`, symmetric, so -128 and -8 never occur.
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
    /// Sample format of the output chunks ([`OutputFormat::Ci8`] by default).
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
    pub(super) fn output_values_exact(&self) -> u128 {
        2 * self.channels as u128 * self.spectra_per_chunk() as u128
    }
    /// [`capacity_samples`](Self::capacity_samples), exact.
    pub(super) fn capacity_exact(&self) -> u128 {
        let n2 = 2 * self.channels as u128;
        let span = n2 * (self.spectra_per_chunk() as u128).saturating_sub(1)
            + n2 * self.taps as u128
            + 2 * self.max_delay as u128;
        (span + self.chunk_samples as u128 + 2 * SAMPLE_GRANULE as u128)
            .next_multiple_of(SAMPLE_GRANULE as u128)
    }
    /// Spectra per chunk as the kernels take them (u32; only for a validated configuration,
    /// where it is at most 2^24).
    pub(super) fn spectra_u32(&self) -> u32 {
        u32::try_from(self.spectra_per_chunk()).unwrap_or(u32::MAX)
    }
}

/// Most complex values of one output chunk (both polarisations) [`ChannelizerConfig::validate`]
/// accepts: 2^31 (int8: 2^32 bytes).
pub const MAX_OUTPUT_VALUES: u64 = 1 << 31;
/// Most samples per polarisation the kept input may hold: the largest multiple of
/// [`SAMPLE_GRANULE`] below 2^32, since the kernels take window offsets as u32 samples.
pub const MAX_CAPACITY_SAMPLES: u64 = (1 << 32) - SAMPLE_GRANULE as u64;
