//! The first kernel's CPU reference (eqs. 50-51 of Smith, CHORD FRB beamformer design note (2022), in f64).
use super::*;

/// The CPU reference of eqs. 50-51 in f64 (a direct, separable DFT of the gridded, weighted
/// field: [`padded_dft`] along n, then along m), `I[f][tbar][p][q]`. Weights with a NaN or
/// infinite half are `NonFinite` (as in [`FrbBeamformer::new`]); for every other input the
/// result is finite.
pub fn frb_intensity_reference(
    config: &FrbConfig,
    e: &[Ci4],
    grid: &[(u32, u32)],
    weights: &[Complex<f16>],
) -> Result<Vec<f64>> {
    check_reference_args(config, e, grid, weights)?;
    let c = config;
    let w = unpack_c16(weights);
    let k = 4 * (c.m * c.n) as usize;
    let mut out = vec![0.0; c.output_len()];
    for (row, sample) in out.chunks_mut(k).enumerate() {
        let (f, tbar) = ((row / c.out_times() as usize) as u32, (row % c.out_times() as usize) as u32);
        accumulate_sample(c, e, grid, &w, f, tbar, sample);
    }
    Ok(out)
}

/// One output sample of [`frb_intensity_reference`], `I[f][tbar][p][q]` for every `(p, q)`
/// (`2M x 2N` values, the same sums in the same order): for checking chosen samples of a
/// launch whose whole reference would take too long (E of gigabytes). `f` and `tbar` outside
/// the launch are `InvalidConfig`.
pub fn frb_intensity_reference_sample(
    config: &FrbConfig,
    e: &[Ci4],
    grid: &[(u32, u32)],
    weights: &[Complex<f16>],
    f: u32,
    tbar: u32,
) -> Result<Vec<f64>> {
    check_reference_args(config, e, grid, weights)?;
    if f >= config.freqs || tbar >= config.out_times() {
        return Err(Error::InvalidConfig(format!(
            "output sample (f, tbar) = ({f}, {tbar}) is outside the launch's {} x {}",
            config.freqs,
            config.out_times()
        )));
    }
    let mut out = vec![0.0; 4 * (config.m * config.n) as usize];
    accumulate_sample(config, e, grid, &unpack_c16(weights), f, tbar, &mut out);
    Ok(out)
}

/// The checks of the CPU references: a valid configuration and map, E and finite W of its
/// sizes.
pub(super) fn check_reference_args(
    config: &FrbConfig,
    e: &[Ci4],
    grid: &[(u32, u32)],
    weights: &[Complex<f16>],
) -> Result<()> {
    config.validate()?;
    config.check_grid(grid)?;
    if e.len() != config.e_len() {
        return Err(Error::ShapeMismatch {
            what: "FRB E (bytes)",
            expected: config.e_len(),
            actual: e.len(),
        });
    }
    check_weights(config, weights)
}

/// Adds output sample `(f, tbar)` (`[p][q]`, `2M x 2N`) of a checked configuration to `out`:
/// its T_ds time samples in order, each polarisation's `|Et|^2`.
pub(super) fn accumulate_sample(
    c: &FrbConfig,
    e: &[Ci4],
    grid: &[(u32, u32)],
    w: &[C64],
    f: u32,
    tbar: u32,
    out: &mut [f64],
) {
    let (m_len, n_len) = (c.m as usize, c.n as usize);
    let mut field = vec![(0.0, 0.0); m_len * n_len];
    for tau in tbar * c.t_ds..(tbar + 1) * c.t_ds {
        for pol in 0..FRB_POLS {
            field.iter_mut().for_each(|x| *x = (0.0, 0.0));
            for (d, &(m, n)) in grid.iter().enumerate() {
                let (re, im) =
                    radio_kernels_gpu::packing::unpack_ci4(e[c.e_index(tau, f, pol, d as u32)].into());
                field[m as usize * n_len + n as usize] =
                    cmul(w[c.weight_index(f, pol, m, n)], (re as f64, im as f64));
            }
            // Eq. 56 along n, then eq. 57 along m.
            let g: Vec<Vec<C64>> = field.chunks(n_len).map(padded_dft).collect();
            for q in 0..2 * n_len {
                let column: Vec<C64> = g.iter().map(|row| row[q]).collect();
                for (p, value) in padded_dft(&column).into_iter().enumerate() {
                    out[p * 2 * n_len + q] += value.0 * value.0 + value.1 * value.1;
                }
            }
        }
    }
}
