//! The exact CPU reference of the correlator.
use super::CorrelatorConfig;
use crate::error::Result;
use num_complex::Complex;

/// The exact CPU reference: `V[c][b(i,j)][pi][pj] = sum_t x_i,pi conj(x_j,pj)` in i64.
pub fn correlate_reference(config: &CorrelatorConfig, input: &[u8]) -> Result<Vec<Complex<i64>>> {
    config.validate()?;
    config.check_input_len(input.len())?;
    let (n, p) = (config.stations, config.pols);
    let mut out = vec![Complex::new(0i64, 0); config.output_len()];
    let mut x = vec![(0i64, 0i64); (n * p) as usize];
    for c in 0..config.channels {
        for t in 0..config.times {
            for i in 0..n {
                for pi in 0..p {
                    x[(i * p + pi) as usize] = config.decode(input, t, c, i, pi);
                }
            }
            // Baselines b(i, j) in increasing order: channel c's values are consecutive
            // blocks of p^2 from `output_index(c, 0, 0, 0, 0)`.
            let mut at = config.output_index(c, 0, 0, 0, 0);
            for i in 0..n {
                for j in 0..=i {
                    for pi in 0..p {
                        let (a1, b1) = x[(i * p + pi) as usize];
                        for pj in 0..p {
                            let (a2, b2) = x[(j * p + pj) as usize];
                            let v = &mut out[at];
                            at += 1;
                            v.re += a1 * a2 + b1 * b2;
                            v.im += b1 * a2 - a1 * b2;
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{Format, Order};
    use super::*;
    use rand::{Rng, SeedableRng};

    fn config(stations: u32, pols: u32, format: Format, order: Order) -> CorrelatorConfig {
        CorrelatorConfig { stations, pols, channels: 2, times: 64, format, order }
    }

    /// The same samples in the two memory orders and the two formats give the same V.
    #[test]
    fn reference_is_independent_of_order_and_format() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let base = config(5, 2, Format::Ci4, Order::StationPol);
        let samples: Vec<(i8, i8)> = (0..base.times * base.channels * 10)
            .map(|_| (rng.random_range(-8..8), rng.random_range(-8..8)))
            .collect();
        let mut results = Vec::new();
        for format in [Format::Ci4, Format::Ci8] {
            for order in [Order::StationPol, Order::PolStation] {
                let c = CorrelatorConfig { format, order, ..base };
                let mut input = vec![0u8; c.input_bytes()];
                let mut n = 0;
                for t in 0..c.times {
                    for ch in 0..c.channels {
                        for s in 0..c.stations {
                            for p in 0..c.pols {
                                let (re, im) = samples[n];
                                n += 1;
                                let at = c.input_offset(t, ch, s, p);
                                match format {
                                    Format::Ci4 => input[at] = radio_kernels_gpu::packing::pack_ci4(re, im),
                                    Format::Ci8 => {
                                        input[at] = re as u8;
                                        input[at + 1] = im as u8;
                                    }
                                }
                            }
                        }
                    }
                }
                results.push(correlate_reference(&c, &input).unwrap());
            }
        }
        assert!(results.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn reference_autos_are_real_and_cross_pols_hermitian() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let c = config(4, 2, Format::Ci8, Order::PolStation);
        let input: Vec<u8> = (0..c.input_bytes()).map(|_| rng.random()).collect();
        let v = correlate_reference(&c, &input).unwrap();
        for ch in 0..c.channels {
            for i in 0..c.stations {
                for p in 0..2 {
                    let auto = v[c.output_index(ch, i, i, p, p)];
                    assert!(auto.re >= 0 && auto.im == 0);
                }
                let (x01, x10) = (v[c.output_index(ch, i, i, 0, 1)], v[c.output_index(ch, i, i, 1, 0)]);
                assert_eq!(x01, x10.conj());
            }
        }
    }
}
