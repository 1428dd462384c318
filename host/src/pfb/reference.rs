//! The f64 CPU reference of one output chunk, and its quantiser.
use super::*;

/// The reference result of one output chunk.
#[derive(Clone, Debug)]
pub struct Reference {
    /// Values before quantisation, f64, `[heap][channel][spectrum][pol]`.
    pub values: Vec<Complex<f64>>,
    /// Quantised output bytes in the kernel's format.
    pub output: Vec<u8>,
    /// Saturated values per `[heap][pol]`.
    pub saturated: Vec<u32>,
    /// Per spectrum of the chunk (`heaps_per_chunk x spectra_per_heap`): true when either
    /// polarisation's window touched a missing packet or a sample before the stream.
    pub lost_spectra: Vec<bool>,
    /// Per heap of the chunk: true when any of its spectra is lost.
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
    gains: &[Complex<f32>],
    models: &[DelayModel; 2],
    samples: [&[i32]; 2],
    present: [&[bool]; 2],
    first_spectrum: i64,
) -> Result<Reference> {
    reference_chunk_from(config, weights, gains, models, samples, present, first_spectrum, 0)
}

/// [`reference_chunk`] from a part of the stream, so that a CPU F-engine keeps only the
/// samples its next windows read: `samples[pol]` hold stream samples `first_sample ..` and
/// `present[pol]` the packets from `first_sample / packet_samples` (`first_sample` a
/// multiple of `packet_samples`, at least 0). Every window must start at or after
/// `first_sample` (or before sample 0, whose samples are zeros, only when `first_sample` is
/// 0); the result is the bytes [`reference_chunk`] gives from the whole stream.
#[allow(clippy::too_many_arguments)]
pub fn reference_chunk_from(
    config: &ChannelizerConfig,
    weights: &[f32],
    gains: &[Complex<f32>],
    models: &[DelayModel; 2],
    samples: [&[i32]; 2],
    present: [&[bool]; 2],
    first_spectrum: i64,
    first_sample: i64,
) -> Result<Reference> {
    config.validate()?;
    if first_sample < 0 || first_sample % config.packet_samples as i64 != 0 {
        return Err(Error::InvalidConfig(format!(
            "first_sample must be a multiple of packet_samples ({}) and at least 0, got {first_sample}",
            config.packet_samples
        )));
    }
    let first_packet = first_sample / config.packet_samples as i64;
    let n = config.channels as usize;
    check_weights(config, weights)?;
    check_gains(config, gains)?;
    let schedule = Schedule::new(config, models, first_spectrum)?;
    let window = config.window() as i64;
    for (pol, (starts, samples)) in schedule.starts.iter().zip(samples).enumerate() {
        // The samples the windows read (those before the stream are zeros).
        let last = starts.iter().map(|&s| s + window).max().unwrap_or(0);
        if last > first_sample + samples.len() as i64 {
            return Err(Error::InvalidConfig(format!(
                "samples of polarisation {pol} hold stream samples {first_sample} .. {}; the chunk's \
                 windows read up to sample {}",
                first_sample + samples.len() as i64,
                last - 1
            )));
        }
        let earliest = starts.iter().copied().min().unwrap_or(first_sample);
        if first_sample > 0 && earliest < first_sample {
            return Err(Error::InvalidConfig(format!(
                "samples of polarisation {pol} start at stream sample {first_sample}; the chunk's \
                 windows read from sample {earliest}"
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
            let sample = |t: i64| if t < 0 { 0.0 } else { samples[pol][(t - first_sample) as usize] as f64 };
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
                let y = x * Complex::from_polar(1.0, angle) * Complex::new(g.re as f64, g.im as f64);
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
    let arrived = |pol: usize| {
        move |packet: i64| packet >= 0 && present[pol].get((packet - first_packet) as usize) == Some(&true)
    };
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
pub(super) fn check_weights(config: &ChannelizerConfig, weights: &[f32]) -> Result<()> {
    let expected = config.window() as usize;
    if weights.len() != expected {
        return Err(Error::ShapeMismatch { what: "PFB weights", expected, actual: weights.len() });
    }
    check_coefficients("PFB weights", weights.iter().copied())
}

/// `gains` are `2 n` complex values `[pol][channel]`, finite and within [`MAX_COEFFICIENT`]
/// (the index of an error is the f32 component's, `2 (pol n + channel) + (0 re, 1 im)`).
pub(super) fn check_gains(config: &ChannelizerConfig, gains: &[Complex<f32>]) -> Result<()> {
    let expected = 2 * config.channels as usize;
    if gains.len() != expected {
        return Err(Error::ShapeMismatch { what: "PFB gains", expected, actual: gains.len() });
    }
    check_coefficients("PFB gains (re, im)", gains.iter().flat_map(|g| [g.re, g.im]))
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
