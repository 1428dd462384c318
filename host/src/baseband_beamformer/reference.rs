//! The baseband beamformer's exact CPU reference.
use super::{BeamformerConfig, POLS};
use crate::error::Result;
use crate::Shift;
use num_complex::Complex;
use radio_kernels_gpu::packing::{shift_round_saturate_i4, Ci4};

/// The exact CPU reference: the formula of the module comment with i64 sums.
pub fn beamform_reference(
    config: &BeamformerConfig,
    e: &[Ci4],
    weights: &[Complex<i8>],
    shifts: &[Shift],
) -> Result<Vec<Ci4>> {
    config.validate()?;
    config.check_len("beamformer E (values)", config.e_len(), e.len())?;
    config.check_weights(weights, shifts)?;
    let c = config;
    let mut out = vec![Ci4::default(); c.output_len()];
    let mut row = vec![(0i64, 0i64); c.dishes as usize];
    for tau in 0..c.times {
        for f in 0..c.freqs {
            for p in 0..POLS {
                // E[tau][f][p][..] is `dishes` consecutive samples.
                let samples = &e[c.e_index(tau, f, p, 0)..][..c.dishes as usize];
                for (x, &sample) in row.iter_mut().zip(samples) {
                    *x = (sample.re() as i64, sample.im() as i64);
                }
                for beam in 0..c.beams {
                    let a = &weights[c.weight_index(f, p, beam, 0)..][..c.dishes as usize];
                    let (mut re, mut im) = (0i64, 0i64);
                    for (a, &(er, ei)) in a.iter().zip(&row) {
                        let (ar, ai) = (a.re as i64, a.im as i64);
                        re += ar * er - ai * ei;
                        im += ar * ei + ai * er;
                    }
                    // |re|, |im| <= 1024 * 2 * 128 * 8 = 2^21: exact in i32.
                    let s = shifts[c.shift_index(f, p, beam)].get();
                    out[c.output_index(beam, f, p, tau)] = Ci4::wrapping(
                        shift_round_saturate_i4(re as i32, s),
                        shift_round_saturate_i4(im as i32, s),
                    );
                }
            }
        }
    }
    Ok(out)
}
