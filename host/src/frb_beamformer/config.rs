//! [`FrbConfig`]: one launch of the first kernel, its validation and its sizes, and the
//! checks of its dish map and weights.
use super::*;

/// Polarisations of the FRB beamformer.
pub const FRB_POLS: u32 = 2;

/// Largest T per launch of the first FRB kernel, 2^31: the kernels count time samples in
/// 32 bits and step a phase of up to 8 samples past the last one. E and I may exceed 2^32
/// bytes and values (the kernels' row offsets are 64-bit), but their rows are counted in 32
/// bits: `validate` also requires `T F < 2^32` ([`FRB_MAX_ROWS`]), which only an E of at
/// least 512 GB would break.
pub const FRB_MAX_TIMES: u32 = 1 << 31;

/// Largest number of `(tau, f)` rows of E, `T F` (`2^32 - 1`: the kernels' 32-bit row
/// indices; I has fewer rows, `F T / T_ds`).
pub const FRB_MAX_ROWS: u64 = u32::MAX as u64;

/// Largest number of blocks of one first-kernel launch (the grid's x dimension, `2^31 - 1`).
pub const FRB_MAX_BLOCKS: u64 = (1 << 31) - 1;

/// The first complex f16 value whose real or imaginary part is not finite.
pub(super) fn first_non_finite_c16(values: &[Complex<f16>]) -> Option<usize> {
    values.iter().position(|w| !w.re.is_finite() || !w.im.is_finite())
}

/// One launch of the first FRB kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrbConfig {
    /// Dishes D and grid (M, N): one of the cases of Table 2 of Smith's FRB note ([`FRB_CASES`]).
    pub dishes: u32,
    /// Grid half-size M: dishes sit on an `M x N` grid, beams on the `2M x 2N` half-integer
    /// grid (I's rows p).
    pub m: u32,
    /// Grid half-size N (I's columns q); see `m`.
    pub n: u32,
    /// Frequency channels F (one thread block each), 1..=65535.
    pub freqs: u32,
    /// Time samples T per launch: a positive multiple of the case's outer block and of T_ds,
    /// at most [`FRB_MAX_TIMES`].
    pub times: u32,
    /// Time downsampling factor T_ds (any positive integer).
    pub t_ds: u32,
}

impl FrbConfig {
    /// The Table 2 case, or `InvalidConfig` naming the supported ones.
    pub fn case(&self) -> Result<FrbCase> {
        frb_case(self.dishes, self.m, self.n).ok_or_else(|| {
            let cases: Vec<String> =
                FRB_CASES.iter().map(|c| format!("({}, {}, {})", c.dishes, c.m, c.n)).collect();
            Error::InvalidConfig(format!(
                "(D, M, N) = ({}, {}, {}) is not one of the compiled cases {}",
                self.dishes,
                self.m,
                self.n,
                cases.join(", ")
            ))
        })
    }

    /// Checks every parameter; the first violation is returned as `InvalidConfig`.
    pub fn validate(&self) -> Result<()> {
        let case = self.case()?;
        let bad = |message: String| Err(Error::InvalidConfig(message));
        if self.freqs == 0 || self.freqs > 65535 {
            return bad(format!("freqs must be 1..=65535, got {}", self.freqs));
        }
        if self.t_ds == 0 {
            return bad("the time downsampling factor T_ds must be positive".into());
        }
        if self.times == 0 || !self.times.is_multiple_of(case.t_outer) {
            return bad(format!(
                "times per launch must be a positive multiple of the outer block {} of (D, M, N) = ({}, {}, {}), got {}",
                case.t_outer, self.dishes, self.m, self.n, self.times
            ));
        }
        if !self.times.is_multiple_of(self.t_ds) {
            return bad(format!(
                "times per launch ({}) must be a multiple of T_ds ({}): no partial sums are kept between launches",
                self.times, self.t_ds
            ));
        }
        if self.times > FRB_MAX_TIMES {
            return bad(format!(
                "times per launch ({}) must be at most 2^31: the kernels count time samples in 32 bits",
                self.times
            ));
        }
        let rows = self.times as u64 * self.freqs as u64;
        if rows > FRB_MAX_ROWS {
            return bad(format!(
                "T F = {rows} rows of E exceed 2^32 - 1, the kernels' 32-bit row indices (E would hold {:.3e} bytes)",
                self.e_len_exact() as f64
            ));
        }
        let per_channel = self.out_times() as u64 * 4 * self.m as u64 * self.n as u64;
        if per_channel > u32::MAX as u64 {
            return bad(format!(
                "one channel of I would hold {per_channel} values (T / T_ds x 4MN), past 2^32 - 1: the \
                 first kernel addresses a channel's I with 32-bit offsets (split the launch in time)"
            ));
        }
        // E and I address 64-bit rows on the device; on the host they must fit `usize`.
        for (what, unit, len) in
            [("E", "bytes", self.e_len_exact()), ("I", "values", self.output_len_exact())]
        {
            if len > usize::MAX as u128 {
                return bad(format!("{what} would hold {len} {unit}, past this platform's address space"));
            }
        }
        Ok(())
    }

    pub(super) fn e_len_exact(&self) -> u128 {
        self.times as u128 * self.freqs as u128 * FRB_POLS as u128 * self.dishes as u128
    }
    /// Exact below 2^128; saturates at `u128::MAX` past it (F T_ds m n can reach 2^130, far
    /// beyond what `validate` accepts).
    pub(super) fn output_len_exact(&self) -> u128 {
        (self.freqs as u128 * self.out_times() as u128 * 4 * self.m as u128).saturating_mul(self.n as u128)
    }

    // The size and index helpers below are exact for every configuration [`validate`]
    // accepts (and indices inside it); for others they neither panic nor wrap: sizes and
    // indices past `usize` saturate at `usize::MAX`, and `out_times` is 0 when T_ds = 0.

    /// Downsampled samples per launch, `T / T_ds` (0 when T_ds = 0, which `validate` rejects).
    ///
    /// [`validate`]: FrbConfig::validate
    pub fn out_times(&self) -> u32 {
        self.times.checked_div(self.t_ds).unwrap_or(0)
    }
    /// E size: number of [`Ci4`] values (one byte each), `[tau][f][pol][d]` (saturates at
    /// `usize::MAX`).
    pub fn e_len(&self) -> usize {
        size::saturate(self.e_len_exact())
    }
    /// W size: number of `Complex<f16>` values, `[f][pol][m][n]` (saturates at `usize::MAX`).
    pub fn weights_len(&self) -> usize {
        size::saturate(self.freqs as u128 * FRB_POLS as u128 * self.m as u128 * self.n as u128)
    }
    /// I size: number of `f16` values, `[f][tbar][p][q]` (saturates at `usize::MAX`).
    pub fn output_len(&self) -> usize {
        size::saturate(self.output_len_exact())
    }
    /// Position in E of `(tau, f, pol, d)` (saturates at `usize::MAX`).
    pub fn e_index(&self, tau: u32, f: u32, pol: u32, d: u32) -> usize {
        size::row_major(&[(tau, 1), (f, self.freqs), (pol, FRB_POLS), (d, self.dishes)])
    }
    /// Entry of W holding `(f, pol, m, n)` (saturates at `usize::MAX`).
    pub fn weight_index(&self, f: u32, pol: u32, m: u32, n: u32) -> usize {
        size::row_major(&[(f, 1), (pol, FRB_POLS), (m, self.m), (n, self.n)])
    }
    /// Entry of I holding `(f, tbar, p, q)` (saturates at `usize::MAX`).
    pub fn output_index(&self, f: u32, tbar: u32, p: u32, q: u32) -> usize {
        size::row_major(&[
            (f, 1),
            (tbar, self.out_times()),
            (p, self.m.saturating_mul(2)),
            (q, self.n.saturating_mul(2)),
        ])
    }

    /// Checks a dish-to-grid map: D entries `(m, n)`, each inside the M x N grid, no two
    /// dishes on one grid point.
    pub fn check_grid(&self, grid: &[(u32, u32)]) -> Result<()> {
        self.case()?;
        if grid.len() != self.dishes as usize {
            return Err(Error::ShapeMismatch {
                what: "dish grid map",
                expected: self.dishes as usize,
                actual: grid.len(),
            });
        }
        let mut owner = vec![None; (self.m * self.n) as usize];
        for (d, &(m, n)) in grid.iter().enumerate() {
            if m >= self.m || n >= self.n {
                return Err(Error::InvalidConfig(format!(
                    "dish {d} is mapped to ({m}, {n}), outside the {} x {} grid",
                    self.m, self.n
                )));
            }
            let slot = &mut owner[(m * self.n + n) as usize];
            if let Some(other) = *slot {
                return Err(Error::InvalidConfig(format!(
                    "dishes {other} and {d} are both mapped to ({m}, {n})"
                )));
            }
            *slot = Some(d);
        }
        Ok(())
    }
}

/// Blocks of a first-kernel launch of `config` with `tbar_per_block` output samples per
/// block, `F ceil(out_times / tbar_per_block)` (exact in 64 bits).
pub(super) fn frb_blocks(config: &FrbConfig, tbar_per_block: u32) -> u64 {
    config.freqs as u64 * config.out_times().div_ceil(tbar_per_block.max(1)) as u64
}

/// Checks the FRB weights: one `Complex<f16>` per `(f, pol, m, n)`, both parts finite.
pub(super) fn check_weights(config: &FrbConfig, weights: &[Complex<f16>]) -> Result<()> {
    if weights.len() != config.weights_len() {
        return Err(Error::ShapeMismatch {
            what: "FRB weights",
            expected: config.weights_len(),
            actual: weights.len(),
        });
    }
    match first_non_finite_c16(weights) {
        Some(index) => Err(Error::NonFinite { what: "FRB weights", index }),
        None => Ok(()),
    }
}
