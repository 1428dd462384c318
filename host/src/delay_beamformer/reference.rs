//! The CPU reference of the beamformer, its coefficients, dither and quantiser.
use super::*;

/// The CPU reference's result.
#[derive(Clone, Debug)]
pub struct Reference {
    /// The value before quantisation, `[beam][channel][time]`: the f64 beam sum plus the
    /// dither (exactly the kernel's f32 dither values). Finite: the steering is checked.
    pub values: Vec<Complex<f64>>,
    /// `sum_a |W| (|Re x| + |Im x|)` per output: the scale of f32 rounding errors.
    pub magnitude: Vec<f64>,
    /// Round half to even, saturate to [-127, 127] (non-finite values count as clipped).
    pub output: Vec<Complex<i8>>,
    /// Samples with either component saturated, per beam.
    pub saturated: Vec<u32>,
}

/// The plain CPU reference: the beam sums in f64 with f64 coefficients
/// ([`coefficient_reference`]), plus the dither of `states` replayed in the kernel's order
/// (module comment of `radio_kernels_gpu::delay_beamformer`), which advances `states` as a
/// launch advances the GPU's. Channels are summed on all CPU cores.
///
/// Checks as the launcher does, before any work: `plan` must be a plan of `config`
/// ([`Plan::check`]), `input` of `config.input_len()` samples, `weights` and `delays` must
/// pass [`check_steering`], and `states` (required when a beam is dithered) must number
/// `plan.state_count()`.
pub fn beamform_reference(
    config: &DelayBeamformerConfig,
    plan: &Plan,
    input: &[Complex<i8>],
    weights: &[Complex<f32>],
    delays: &[f32],
    states: Option<&mut [Xorwow]>,
) -> Result<Reference> {
    plan.check(config)?;
    if input.len() != config.input_len() {
        return Err(Error::ShapeMismatch {
            what: "reference input",
            expected: config.input_len(),
            actual: input.len(),
        });
    }
    check_steering(config, weights, delays)?;
    let states = match states {
        Some(states) if config.dithered() => {
            if states.len() as u64 != plan.state_count() {
                return Err(Error::ShapeMismatch {
                    what: "reference dither states",
                    expected: plan.state_count() as usize,
                    actual: states.len(),
                });
            }
            Some(states)
        }
        None if config.dithered() => {
            return Err(Error::InvalidConfig("dithered beams need reference dither states".into()))
        }
        _ => None,
    };
    let (a_n, b_n, t_n) = (config.antennas as usize, config.beams.len(), config.times as usize);
    let mut values = vec![Complex::new(0.0f64, 0.0); config.output_len()];
    let mut magnitude = vec![0.0f64; config.output_len()];

    // Beam sums, one channel at a time on each worker.
    let next = std::sync::atomic::AtomicU32::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(config.channels as usize);
    // (channel, [beam][time] sums, [beam][time] magnitudes) per finished channel.
    type ChannelSums = (u32, Vec<Complex<f64>>, Vec<f64>);
    let sums: Vec<Vec<ChannelSums>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let c = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if c >= config.channels {
                            return done;
                        }
                        let channel = config.first_channel + c;
                        let mut v = vec![Complex::new(0.0f64, 0.0); b_n * t_n];
                        let mut m = vec![0.0f64; b_n * t_n];
                        for a in 0..a_n {
                            for (b, beam) in config.beams.iter().enumerate() {
                                let k = a * b_n + b;
                                let Complex { re: wr, im: wi } =
                                    coefficient_reference(weights[k], delays[k], channel);
                                let scale = (wr * wr + wi * wi).sqrt();
                                for t in 0..t_n {
                                    let Complex { re: xr, im: xi } =
                                        input[config.input_index(a as u32, c, t as u32, beam.pol)];
                                    let (xr, xi) = (xr as f64, xi as f64);
                                    let o = b * t_n + t;
                                    v[o].re += wr * xr - wi * xi;
                                    v[o].im += wr * xi + wi * xr;
                                    m[o] += scale * (xr.abs() + xi.abs());
                                }
                            }
                        }
                        done.push((c, v, m));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    for (c, v, m) in sums.into_iter().flatten() {
        for b in 0..b_n {
            let o = config.output_index(b as u32, c, 0);
            values[o..o + t_n].copy_from_slice(&v[b * t_n..(b + 1) * t_n]);
            magnitude[o..o + t_n].copy_from_slice(&m[b * t_n..(b + 1) * t_n]);
        }
    }

    // Dither, replayed per state in the kernel's order.
    if let Some(states) = states {
        let v = plan.variant;
        for c in 0..config.channels {
            for g in 0..plan.groups {
                for batch in 0..plan.batches {
                    for thread in 0..THREADS {
                        let i = layout::state_index(c, g, batch, thread, plan.groups, plan.batches) as usize;
                        let rng = &mut states[i];
                        let first_tile = g * plan.tiles_per_group;
                        for tile in first_tile..(first_tile + plan.tiles_per_group).min(plan.tiles) {
                            let t0 = layout::first_time(v, tile, thread);
                            if t0 >= config.times {
                                continue;
                            }
                            for slot in 0..v.slots() {
                                let entry = plan.slot_table[(batch * v.slots() + slot) as usize];
                                if entry == layout::EMPTY_SLOT || entry & layout::DITHER_FLAG == 0 {
                                    continue;
                                }
                                let beam = entry & layout::BEAM_MASK;
                                for j in 0..v.times_per_thread() {
                                    let o = config.output_index(beam, c, t0 + j);
                                    values[o].re += dither(rng.next_u32()) as f64;
                                    values[o].im += dither(rng.next_u32()) as f64;
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    let mut saturated = vec![0u32; b_n];
    let mut output = Vec::with_capacity(values.len());
    for (o, value) in values.iter().enumerate() {
        let q = [value.re.round_ties_even(), value.im.round_ties_even()];
        if q.iter().any(|r| r.abs() > 127.0 || r.is_nan()) {
            saturated[o / (config.channels as usize * t_n)] += 1;
        }
        // `as` saturates and maps NaN to 0, as the kernel's conversion does.
        let [re, im] = q.map(|r| r.clamp(-127.0, 127.0) as i8);
        output.push(Complex::new(re, im));
    }
    Ok(Reference { values, magnitude, output, saturated })
}
