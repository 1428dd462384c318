//! The post-processing arithmetic (complex products, the unzip DFT, the R2C fix-up, rotations
//! and quantisation), identical on the host (CPU tests, reference checks) and the device, and
//! the device's complex f32 loads and stores.

use crate::delay_beamformer::{fma_f32, sincospi, sincospi_reduced};
use crate::packing::saturate_symmetric;

/// A complex f32 value `[re, im]`, the element of the post-processing arithmetic (8 bytes,
/// re first, the layout of CUDA's `float2` and cuFFT's `cufftComplex`).
pub type C32 = [f32; 2];

/// `fma(a, b, -(c d))`. On the device one inline block: LLVM moves the negation onto `d`,
/// and where `d` was loaded or shuffled (an integer register to LLVM) it becomes an integer
/// `xor` (a `LOP3` per product in the SASS) instead of the `FFMA` operand modifier it is here.
#[inline(always)]
fn fma_minus_product(a: f32, b: f32, c: f32, d: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: pure ALU instructions.
        unsafe {
            core::arch::asm!("{{ .reg .f32 t; mul.rn.f32 t, {3}, {4}; neg.f32 t, t; fma.rn.f32 {0}, {1}, {2}, t; }}",
                out(reg32) out, in(reg32) a, in(reg32) b, in(reg32) c, in(reg32) d, options(pure, nomem, nostack))
        };
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    fma_f32(a, b, -(c * d))
}

/// Complex product with two FMAs (Rust never contracts `a * b + c` by itself).
#[inline(always)]
pub fn cmul(a: C32, b: C32) -> C32 {
    [fma_minus_product(a[0], b[0], a[1], b[1]), fma_f32(a[0], b[1], a[1] * b[0])]
}

/// `a * conj(b)`.
#[inline(always)]
pub fn cmul_conj(a: C32, b: C32) -> C32 {
    [fma_f32(a[0], b[0], a[1] * b[1]), fma_minus_product(a[1], b[0], a[0], b[1])]
}

#[inline(always)]
pub(crate) fn cadd(a: C32, b: C32) -> C32 {
    [a[0] + b[0], a[1] + b[1]]
}

#[inline(always)]
pub(crate) fn csub(a: C32, b: C32) -> C32 {
    [a[0] - b[0], a[1] - b[1]]
}

/// `-j x`.
#[inline(always)]
pub(crate) fn mul_neg_j(x: C32) -> C32 {
    [x[1], -x[0]]
}

/// `exp(j pi x)` as a complex value.
#[inline(always)]
pub fn expj_pi(x: f32) -> C32 {
    let (s, c) = sincospi(x);
    [c, s]
}

/// The fine-delay and fringe rotations `exp(j pi (phase - fine k / n))` of channels
/// `u + a v` and `w + a v` (v = 0..4, w the second column of `post_columns`), from the
/// spectrum's `fringe = exp(j pi phase)` and `step = exp(-j pi fine / 4)` (precomputed on the
/// host in f64) and one short polynomial: `|fine u / n| <= 1/16` needs no range reduction,
/// and the mirror's `exp(-j pi fine w / n) = step conj(exp(-j pi fine u / n))` (thread 0's
/// column n/8 gets the polynomial, its column 0 the fringe alone).
#[inline(always)]
pub fn rotations(u: u32, channels: u32, fine: f32, fringe: C32, step: C32) -> ([C32; 4], [C32; 4]) {
    // Thread 0's second column is n/8 ([`post_columns`]): its own polynomial, |fine / 8| <= 1/16.
    let x = if u == 0 { 0.125 } else { u as f32 / channels as f32 };
    let (s, c) = sincospi_reduced(-fine * x);
    let ru = [c, s];
    let rot = if u == 0 { fringe } else { cmul(fringe, ru) };
    let rotm = cmul(fringe, if u == 0 { ru } else { cmul_conj(step, ru) });
    // Written out, not looped (see `post_pair`).
    let (rot1, rotm1) = (cmul(rot, step), cmul(rotm, step));
    let (rot2, rotm2) = (cmul(rot1, step), cmul(rotm1, step));
    let (rot3, rotm3) = (cmul(rot2, step), cmul(rotm2, step));
    ([rot, rot1, rot2, rot3], [rotm, rotm1, rotm2, rotm3])
}

/// Twiddles of column `u`: `W_n^(u r)` for rows r = 1, 2, 3, and `exp(-j pi u / n)`.
#[inline(always)]
pub fn column_twiddles(u: u32, channels: u32) -> ([C32; 3], C32) {
    let x = u as f32 / channels as f32; // exact: n is a power of two
    ([expj_pi(-2.0 * x), expj_pi(-4.0 * x), expj_pi(-6.0 * x)], expj_pi(-x))
}

/// Steps 3-5 of the six-step FFT for one column: twiddles, then the 4-point DFT across the
/// rows: `Z[u + a v] = sum_r (-j)^(v r) W_n^(u r) Y_r[u]`.
#[inline(always)]
pub fn unzip_column(y: [C32; 4], twiddles: &[C32; 3]) -> [C32; 4] {
    let a0 = y[0];
    let a1 = cmul(y[1], twiddles[0]);
    let a2 = cmul(y[2], twiddles[1]);
    let a3 = cmul(y[3], twiddles[2]);
    let (s02, d02) = (cadd(a0, a2), csub(a0, a2));
    let (s13, d13) = (cadd(a1, a3), mul_neg_j(csub(a1, a3)));
    [cadd(s02, s13), cadd(d02, d13), csub(s02, s13), csub(d02, d13)]
}

/// `exp(-j pi v / 4)` for v = 0..4 (the row part of the R2C twiddle of channel `u + a v`).
const ROW_TWIDDLE: [C32; 4] = [
    [1.0, 0.0],
    [core::f32::consts::FRAC_1_SQRT_2, -core::f32::consts::FRAC_1_SQRT_2],
    [0.0, -1.0],
    [-core::f32::consts::FRAC_1_SQRT_2, -core::f32::consts::FRAC_1_SQRT_2],
];

/// R2C fix-up of one channel: `X = (z + m*) / 2 - j/2 t (z - m*)` with `z = Z[k]`,
/// `m = Z[n-k]`, `t = exp(-j pi k / n)`.
#[inline(always)]
pub fn r2c_fixup(z: C32, m: C32, t: C32) -> C32 {
    let even = [0.5 * (z[0] + m[0]), 0.5 * (z[1] - m[1])];
    let odd = [0.5 * (z[0] - m[0]), 0.5 * (z[1] + m[1])];
    cadd(even, mul_neg_j(cmul(t, odd)))
}

/// The R2C fix-up of channel `k` and of its mirror `n - k` at once, from `z = Z[k]`,
/// `m = Z[n-k]` and `t = exp(-j pi k / n)`: with `even = (z + m*) / 2`, `odd = (z - m*) / 2`
/// and `p = t odd`, `X[k] = even - j p` ([`r2c_fixup`], bit for bit) and
/// `X[n-k] = conj(even + j p)`: one complex product for both. The second is
/// `r2c_fixup(m, z, -conj(t))` bit for bit (its halves and product are these, negated
/// exactly), `-conj(t)` being the mirror's twiddle.
#[inline(always)]
pub fn r2c_fixup_pair(z: C32, m: C32, t: C32) -> (C32, C32) {
    let even = [0.5 * (z[0] + m[0]), 0.5 * (z[1] - m[1])];
    let odd = [0.5 * (z[0] - m[0]), 0.5 * (z[1] + m[1])];
    fixup_from_halves(even, odd, t)
}

/// Twice [`r2c_fixup_pair`], bit for bit (the halves are exact, so the caller folds them into
/// its gains).
#[inline(always)]
pub fn r2c_fixup_pair_x2(z: C32, m: C32, t: C32) -> (C32, C32) {
    let even = [z[0] + m[0], z[1] - m[1]];
    let odd = [z[0] - m[0], z[1] + m[1]];
    fixup_from_halves(even, odd, t)
}

#[inline(always)]
fn fixup_from_halves(even: C32, odd: C32, t: C32) -> (C32, C32) {
    let p = cmul(t, odd);
    ([even[0] + p[1], even[1] - p[0]], [even[0] - p[1], -(even[1] + p[0])])
}

/// The R2C twiddles `exp(-j pi (col + a v) / n)` of channels `col` and `col + a` (v = 0, 1)
/// from the column's `e = exp(-j pi col / n)`, as [`fixup_pair`] forms them (so a table of
/// them gives its values bit for bit).
#[inline(always)]
pub fn r2c_twiddles(e: C32) -> [C32; 2] {
    [e, cmul(e, ROW_TWIDDLE[1])]
}

/// The R2C fix-up of channels `u + a v` and `w + a v` (v = 0..4; `w` from `post_columns`)
/// from the unzipped values `z[v] = Z[u + a v]`, `zm[v] = Z[w + a v]` and the columns'
/// twiddles `e = exp(-j pi u / n)`, `em = exp(-j pi w / n)`. For u > 0 the mirror of
/// `u + a v` is `w + a (3 - v)`, and each mirrored pair is fixed up at once
/// ([`r2c_fixup_pair`] or [`r2c_fixup_pair_x2`] as `fixup`) with the twiddle of its channel
/// `u`, `u + a`, `w` or `w + a` ([`fixup_columns`]). For u = 0 (columns 0 and n/8): channels 0
/// and 2a are their own mirrors, a and 3a each other's, and in column n/8 `n/8 + a v` and
/// `n/8 + a (3 - v)`. Shared by the three-kernel post ([`post_pair`]) and the fused kernels.
#[inline(always)]
pub fn fixup_pair(
    u: u32,
    z: [C32; 4],
    zm: [C32; 4],
    e: C32,
    em: C32,
    fixup: impl Fn(C32, C32, C32) -> (C32, C32),
) -> ([C32; 4], [C32; 4]) {
    let first = u == 0;
    // Selecting the values, not the arrays: a select of two arrays became a select of their
    // addresses, which puts them in local memory.
    let pick =
        |first: bool, a: C32, b: C32| [if first { a[0] } else { b[0] }, if first { a[1] } else { b[1] }];
    let (t, tm) = (r2c_twiddles(e), r2c_twiddles(em));
    let a = fixup(z[0], pick(first, z[0], zm[3]), t[0]);
    let b = fixup(z[1], pick(first, z[3], zm[2]), t[1]);
    let c = fixup(zm[0], pick(first, zm[3], z[3]), tm[0]);
    let d = fixup(zm[1], pick(first, zm[2], z[2]), tm[1]);
    // Column 0's channel 2a, its own mirror (unused for u > 0).
    let own = fixup(z[2], z[2], cmul(e, ROW_TWIDDLE[2])).0;
    let x = [a.0, b.0, pick(first, own, d.1), pick(first, b.1, c.1)];
    let xm = [c.0, d.0, pick(first, d.1, b.1), pick(first, c.1, a.1)];
    (x, xm)
}

/// [`fixup_pair`] for u > 0 from the channels' R2C twiddles `t` (of `u`, [`r2c_twiddles`])
/// and `tm` (of `w`). For `u = w` (column n/8 as its own mirror, with `tm = t`) both halves
/// are the same values, bit for bit.
#[inline(always)]
pub fn fixup_columns(
    z: [C32; 4],
    zm: [C32; 4],
    t: &[C32; 2],
    tm: &[C32; 2],
    fixup: impl Fn(C32, C32, C32) -> (C32, C32),
) -> ([C32; 4], [C32; 4]) {
    let a = fixup(z[0], zm[3], t[0]);
    let b = fixup(z[1], zm[2], t[1]);
    let c = fixup(zm[0], z[3], tm[0]);
    let d = fixup(zm[1], z[2], tm[1]);
    ([a.0, b.0, d.1, c.1], [c.0, d.0, b.1, a.1])
}

/// The spectra of column `u` and its mirror `w` (see `post_columns`): from the FFT rows
/// `y[r]` at column u and `ym[r]` at column w, channels `u + a v` and `w + a v` for v = 0..4.
/// `tw`/`twm` and `e`/`em` are the columns' [`column_twiddles`].
#[inline(always)]
pub fn post_pair(
    u: u32,
    y: [C32; 4],
    ym: [C32; 4],
    tw: &[C32; 3],
    twm: &[C32; 3],
    e: C32,
    em: C32,
) -> ([C32; 4], [C32; 4]) {
    fixup_pair(u, unzip_column(y, tw), unzip_column(ym, twm), e, em, r2c_fixup_pair)
}

/// Twice [`post_pair`], bit for bit ([`r2c_fixup_pair_x2`]).
#[inline(always)]
pub fn post_pair_x2(
    u: u32,
    y: [C32; 4],
    ym: [C32; 4],
    tw: &[C32; 3],
    twm: &[C32; 3],
    e: C32,
    em: C32,
) -> ([C32; 4], [C32; 4]) {
    fixup_pair(u, unzip_column(y, tw), unzip_column(ym, twm), e, em, r2c_fixup_pair_x2)
}

/// [`rotations`] for the columns of `post_thread_columns` (`u >= 1`): for `u = n/8` the
/// mirror's rotations are the column's own, bit for bit, so both halves of that thread give
/// the same values (its saturation counts are halved).
#[inline(always)]
pub fn post_rotations(u: u32, channels: u32, fine: f32, fringe: C32, step: C32) -> ([C32; 4], [C32; 4]) {
    let x = u as f32 / channels as f32;
    let (s, c) = sincospi_reduced(-fine * x);
    let ru = [c, s];
    let rot = cmul(fringe, ru);
    let other = cmul_conj(step, ru);
    let own = 8 * u == channels;
    let rotm = cmul(fringe, [if own { ru[0] } else { other[0] }, if own { ru[1] } else { other[1] }]);
    let (rot1, rotm1) = (cmul(rot, step), cmul(rotm, step));
    let (rot2, rotm2) = (cmul(rot1, step), cmul(rotm1, step));
    let (rot3, rotm3) = (cmul(rot2, step), cmul(rotm2, step));
    ([rot, rot1, rot2, rot3], [rotm, rotm1, rotm2, rotm3])
}

/// Round to nearest even and saturate to `[-max, max]`; returns the value and whether it
/// clipped. NaN gives 0 and counts as clipped.
#[inline(always)]
pub fn quantise(v: f32, max: i32) -> (i32, bool) {
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_s32_f32(v);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = crate::delay_beamformer::rint_f32(v) as i32; // saturating cast, NaN -> 0
    let q = saturate_symmetric(r, max);
    (q, q != r || v.is_nan())
}

/// `rint(v)` saturated to [-128, 127], NaN to 0: one conversion on the device.
#[inline(always)]
fn rint_sat_s8(v: f32) -> i32 {
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_sat_s8_f32(v);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = (crate::delay_beamformer::rint_f32(v) as i32).clamp(-128, 127); // `as`: NaN -> 0
    r
}

/// 1 when the larger magnitude of `x`'s components reaches `limit` or either is NaN, else 0.
#[inline(always)]
fn clips(x: C32, limit: f32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    let c = 0u32.wrapping_sub(crate::intrinsics::abs_max_at_least(x[0], x[1], limit));
    #[cfg(not(target_arch = "nvptx64"))]
    let c = (x[0].is_nan() || x[1].is_nan() || x[0].abs().max(x[1].abs()) >= limit) as u32;
    c
}

/// One output value: quantised complex and 1 if it saturated (else 0). int8: two bytes
/// (re, im) in bits 0..16; int4: one byte, re in the low nibble. Each component is
/// [`quantise`]'s, with fewer instructions: a saturating conversion and a bound, and one
/// compare for both components, since a component clips exactly when `|v| >= max + 1/2`
/// (round to nearest even takes `max + 1/2` to the even `max + 1`). Non-finite components: an
/// infinity saturates to `+-max` and NaN gives 0, and both count as clipped (the host's
/// `quantise_reference` does the same; the host bounds weights and gains so that neither
/// arises).
#[inline(always)]
pub fn quantise_complex(x: C32, int4: bool) -> (u32, u32) {
    let bound = |v: f32| {
        let r = rint_sat_s8(v);
        if int4 {
            r.clamp(-7, 7)
        } else {
            r.max(-127)
        }
    };
    let (re, im) = (bound(x[0]), bound(x[1]));
    let packed = if int4 {
        (re as u32 & 0xf) | ((im as u32 & 0xf) << 4)
    } else {
        (re as u32 & 0xff) | ((im as u32 & 0xff) << 8)
    };
    (packed, clips(x, if int4 { 7.5 } else { 127.5 }))
}

/// Complex f32 loads and stores of the PFB kernels (both PTX modules).
#[cfg(target_arch = "nvptx64")]
pub(crate) mod c32 {
    //! The loads give f32 registers, not bit patterns: LLVM turns the negation of a value
    //! reinterpreted from an integer into an integer `xor` (a `LOP3` in the SASS), where the
    //! negation of a float is a free operand modifier of the `FFMA` that uses it.
    use super::C32;
    #[cfg(radio_sm90a)]
    use crate::intrinsics::st_shared_v2;
    use core::arch::asm;

    /// From an 8-byte aligned shared-window address.
    #[inline(always)]
    pub(crate) unsafe fn ld_c32(address: u32) -> C32 {
        let (x, y): (f32, f32);
        asm!("ld.shared.v2.f32 {{{0}, {1}}}, [{2}];", out(reg32) x, out(reg32) y, in(reg32) address,
            options(readonly, nostack));
        [x, y]
    }

    #[cfg(radio_sm90a)]
    #[inline(always)]
    pub(crate) unsafe fn st_c32(address: u32, v: C32) {
        st_shared_v2(address, [v[0].to_bits(), v[1].to_bits()]);
    }

    /// Through the read-only path (for buffers no thread writes during the launch).
    #[inline(always)]
    pub(crate) unsafe fn ld_global_c32(ptr: *const [f32; 2]) -> C32 {
        let (x, y): (f32, f32);
        asm!("ld.global.nc.v2.f32 {{{0}, {1}}}, [{2}];", out(reg32) x, out(reg32) y, in(reg64) ptr,
            options(readonly, nostack));
        [x, y]
    }

    /// `ld.shared::cluster`: from the 8-byte aligned shared-window address `address` of block
    /// `rank` of the cluster (distributed shared memory, sm_90; `mapa` each load).
    ///
    /// # Safety
    /// `address` must lie inside the shared memory of block `rank`, which must still be running.
    #[cfg(radio_sm90a)]
    #[inline(always)]
    pub(crate) unsafe fn ld_cluster_c32(address: u32, rank: u32) -> C32 {
        let (x, y): (f32, f32);
        asm!("{{ .reg .b32 remote; mapa.shared::cluster.u32 remote, {2}, {3}; ld.shared::cluster.v2.f32 {{{0}, {1}}}, [remote]; }}",
            out(reg32) x, out(reg32) y, in(reg32) address, in(reg32) rank, options(readonly, nostack));
        [x, y]
    }

    /// `shfl.sync.idx` of an f32 over the full warp.
    #[cfg(radio_sm90a)]
    #[inline(always)]
    pub(crate) fn shfl_idx_f32(value: f32, src_lane: u32) -> f32 {
        let out: f32;
        // SAFETY: warp-collective over the full warp.
        unsafe {
            asm!("shfl.sync.idx.b32 {0}, {1}, {2}, 0x1f, 0xffffffff;", out(reg32) out, in(reg32) value,
                in(reg32) src_lane, options(nomem, nostack))
        };
        out
    }
}
