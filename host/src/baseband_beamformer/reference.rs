//! The baseband beamformer's exact CPU reference.
use super::{BeamformerConfig, POLS};
use crate::error::Result;
use radio_kernels_gpu::packing::{pack_ci4, shift_round_saturate_i4, unpack_ci4};

/// The exact CPU reference: the formula of the module comment with i64 sums.
pub fn beamform_reference(
    config: &BeamformerConfig,
    e: &[u8],
    weights: &[[i8; 2]],
    shifts: &[i32],
) -> Result<Vec<u8>> {
    config.validate()?;
    config.check_len("beamformer E (bytes)", config.e_len(), e.len())?;
    config.check_weights(weights, shifts)?;
    let c = config;
    let mut out = vec![0u8; c.output_len()];
    let mut row = vec![(0i64, 0i64); c.dishes as usize];
    for tau in 0..c.times {
        for f in 0..c.freqs {
            for p in 0..POLS {
                // E[tau][f][p][..] is `dishes` consecutive bytes.
                let samples = &e[c.e_index(tau, f, p, 0)..][..c.dishes as usize];
                for (x, &byte) in row.iter_mut().zip(samples) {
                    let (re, im) = unpack_ci4(byte);
                    *x = (re as i64, im as i64);
                }
                for beam in 0..c.beams {
                    let a = &weights[c.weight_index(f, p, beam, 0)..][..c.dishes as usize];
                    let (mut re, mut im) = (0i64, 0i64);
                    for (&[ar, ai], &(er, ei)) in a.iter().zip(&row) {
                        let (ar, ai) = (ar as i64, ai as i64);
                        re += ar * er - ai * ei;
                        im += ar * ei + ai * er;
                    }
                    // |re|, |im| <= 1024 * 2 * 128 * 8 = 2^21: exact in i32.
                    let s = shifts[c.shift_index(f, p, beam)] as u32;
                    out[c.output_index(beam, f, p, tau)] = pack_ci4(
                        shift_round_saturate_i4(re as i32, s),
                        shift_round_saturate_i4(im as i32, s),
                    );
                }
            }
        }
    }
    Ok(out)
}
