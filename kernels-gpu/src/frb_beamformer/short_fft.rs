//! The short FFT on the device (sec. 3 of Smith, CHORD FRB beamformer design note (2022)): the
//! three-factor FFT of eqs. 28-30 from a Gamma register image, the direct DFT at N = 20, and the
//! bodies of their batch (test) and register-resident (benchmark) kernels.
use super::*;
use crate::intrinsics::*;
use crate::layout::Location;
use crate::mma::*;

/// One lane's words of the Gamma register image (see [`GAMMA_WORDS`]): the constant
/// operands of the three-factor FFT, held in registers for the whole kernel.
#[derive(Clone, Copy)]
pub struct FftGammas {
    /// G1 (eq. 39): the lane's two A registers of the first factor's m16n8k8.
    pub g1: [u32; 2],
    /// `Re G2`, `Im G2` (eq. 41) and `-Im G2`, so the complex multiply is four HFMA2-class
    /// instructions with no negation in the loop.
    pub g2: [u32; 3],
    /// Eq. 45 (dense: registers 0, 1, 2; register 3 is register 0) or eqs. 46-47 (sparse:
    /// registers 0, 1).
    pub g3: [u32; 3],
    /// Universal sparse metadata (eq. 173).
    pub e: u32,
    /// Word 3 of the dense G3 (equal to word 0): a register of its own, so that the
    /// m16n8k16's four A registers are distinct and ptxas needs no copies to make them
    /// consecutive (see [`short_fft_g3w`]).
    pub g3w3: u32,
}

impl FftGammas {
    /// Reads this lane's words of a `[lane][GAMMA_WORDS]` image.
    ///
    /// # Safety
    /// `image` must hold `32 * GAMMA_WORDS` readable words.
    #[inline(always)]
    pub unsafe fn load(image: *const u32) -> FftGammas {
        let lane = lane_id();
        let w = image.add(lane as usize * GAMMA_WORDS) as *const [u32; GAMMA_WORDS];
        let w = *w;
        FftGammas {
            g1: [w[G1_WORD], w[G1_WORD + 1]],
            g2: [w[G2_WORD], w[G2_WORD + 1], hneg2(w[G2_WORD + 1])],
            g3: [w[G3_WORD], w[G3_WORD + 1], w[G3_WORD + 2]],
            e: universal_sparse_metadata(lane),
            g3w3: w[G3_WORD + 3],
        }
    }
}

/// The short FFT (eqs. 28-30): `x` in the register assignment of eq. 25, the result
/// `[Re, Im]` in that of eq. 26. Warp-collective.
#[inline(always)]
pub fn short_fft<const N: u32>(x: u32, g: &FftGammas) -> [u32; 2] {
    short_fft_g3w::<N>(x, g, false)
}

/// [`short_fft`]; with `g3w` (a constant after inlining) the dense third MMA takes its fourth A register from
/// `g.g3w3` instead of repeating `g.g3[0]` (same value, no register copies).
#[inline(always)]
pub fn short_fft_g3w<const N: u32>(x: u32, g: &FftGammas, g3w: bool) -> [u32; 2] {
    let z = mma_m16n8k8_f16(g.g1, x, [0, 0]);
    // Eq. 29 elementwise: Re W = Re G Re Z - Im G Im Z, Im W = Re G Im Z + Im G Re Z.
    let w = [hfma2(g.g2[2], z[1], hmul2(g.g2[0], z[0])), hfma2(g.g2[1], z[0], hmul2(g.g2[0], z[1]))];
    match sparse_selector(N) {
        Some(1) => mma_sp_m16n8k16_f16::<1>([g.g3[0], g.g3[1]], w, [0, 0], g.e),
        Some(_) => mma_sp_m16n8k16_f16::<2>([g.g3[0], g.g3[1]], w, [0, 0], g.e),
        None => mma_m16n8k16_f16([g.g3[0], g.g3[1], g.g3[2], if g3w { g.g3w3 } else { g.g3[0] }], w, [0, 0]),
    }
}

/// Test kernel: FFT `batch` arrays. `x` is complex f16 (re in the low half) `[batch][N]`,
/// `y` `[batch][2N]`; warp w of the grid does FFTs `w * 2^(5-r) + s`.
#[inline(always)]
pub(super) unsafe fn fft_batch<const N: u32>(gammas: *const u32, x: *const u32, y: *mut u32, batch: u32) {
    let g = FftGammas::load(gammas);
    let lane = lane_id();
    let warp = global_thread_x() / 32;
    // Input and output lanes hold different spectators (eqs. 25, 26).
    let (c, d, s_in) = x_coordinates(N, lane);
    let fft_in = warp * ffts_per_warp(N) + s_in;
    let input = if fft_in < batch && d < N / 4 { *x.add((fft_in * N + (N / 4) * c + d) as usize) } else { 0 };
    // The fences keep the MMAs out of the conditional code around them: they are
    // warp-collective, and the wrappers are `pure`, so LLVM may otherwise sink them into
    // the store's branch, where only some lanes would run them.
    let out = converged(short_fft::<N>(converged([input])[0], &g));
    let (u, v, s_out, _) = y_coordinates(N, Location { lane, register: 0, element: 0 });
    let fft_out = warp * ffts_per_warp(N) + s_out;
    if fft_out < batch && u < N / 4 {
        let at = y.add((fft_out * 2 * N + 8 * u + v) as usize);
        // (Re, Im) of v and of v + 1 (b <-> v0) as complex words.
        *at = prmt(out[0], out[1], 0x5410);
        *at.add(1) = prmt(out[0], out[1], 0x7632);
    }
}

/// Benchmark kernel: each warp runs `4 * iterations` FFTs from registers. Lane l reads
/// four input registers `x[4 t .. 4 t + 4]` (t the global thread) and writes one word.
/// Each FFT's input is `x_k ^ (i & salt)` (fresh data per iteration when `salt` flips
/// low mantissa bits) and both output registers are folded into an xor, so nothing is
/// loop-invariant or dead; the four chains are independent.
#[inline(always)]
pub(super) unsafe fn fft_loop<const N: u32>(
    gammas: *const u32,
    x: *const u32,
    y: *mut u32,
    iterations: u32,
    salt: u32,
) {
    let g = FftGammas::load(gammas);
    let t = global_thread_x() as usize;
    let xs = ld_global_nc_v4(x.add(4 * t));
    let mut acc = 0u32;
    let mut i = 0;
    while i < iterations {
        unroll!(k in [0, 1, 2, 3] {
            let out = short_fft::<N>(lop3::<0x78>(xs[k], i, salt), &g);
            acc = lop3::<0x96>(acc, out[0], out[1]);
        });
        i += 1;
    }
    *y.add(t) = acc;
}

/// Reads this lane's [`direct_words`] words of a `[word][lane]` direct-DFT image.
///
/// # Safety
/// `image` must hold `32 * direct_words(N)` readable words.
#[inline(always)]
pub unsafe fn direct_load<const N: u32>(image: *const u32) -> [u32; DIRECT_MAX_WORDS] {
    let lane = lane_id() as usize;
    let mut f = [0u32; DIRECT_MAX_WORDS];
    // A trip count of exactly the used words unrolls fully (f stays in registers).
    let mut k = 0;
    while k < direct_words(N) as usize {
        f[k] = *image.add(32 * k + lane);
        k += 1;
    }
    f
}

/// The direct DFT of eight FFTs (the direct DFT of `layout`): `x[n / 4]` in the B map, the result's
/// row tile T in `y[T]` (registers Re, Im). Warp-collective.
#[inline(always)]
pub fn direct_dft<const N: u32>(f: &[u32; DIRECT_MAX_WORDS], x: &[u32; 6]) -> [[u32; 2]; 6] {
    let mut y = [[0u32; 2]; 6];
    let k16 = direct_k16_tiles(N) as usize;
    let tw = direct_tile_words(N) as usize;
    unroll_pairs::<6>(|tile| {
        if tile < (N / 4) as usize {
            let a = tile * tw;
            let mut acc = [0u32; 2];
            unroll_pairs::<3>(|kt| {
                if kt < k16 {
                    let a = a + 4 * kt;
                    acc = mma_m16n8k16_f16(
                        [f[a], f[a + 1], f[a + 2], f[a + 3]],
                        [x[2 * kt], x[2 * kt + 1]],
                        acc,
                    );
                }
            });
            if direct_has_k8(N) {
                let a = a + 4 * k16;
                acc = mma_m16n8k8_f16([f[a], f[a + 1]], x[2 * k16], acc);
            }
            y[tile] = acc;
        }
    });
    y
}

/// Test kernel of the direct DFT: warp w does FFTs `8 w .. 8 w + 8` of `x` `[batch][N]`
/// into `y` `[batch][2N]` (complex f16 words).
#[inline(always)]
pub(super) unsafe fn direct_batch<const N: u32>(image: *const u32, x: *const u32, y: *mut u32, batch: u32) {
    let f = direct_load::<N>(image);
    let lane = lane_id();
    let warp = global_thread_x() / 32;
    let fft_in = warp * DIRECT_FFTS_PER_WARP + lane / 4;
    let mut input = [0u32; 6];
    unroll_pairs::<6>(|m| {
        if (m as u32) < N / 4 && fft_in < batch {
            input[m] = *x.add((fft_in * N + 4 * m as u32 + lane % 4) as usize);
        }
    });
    let input = converged(input);
    // As in `fft_batch`: keep the MMAs out of the stores' branches.
    let out = converged_pairs(direct_dft::<N>(&f, &input));
    let s0 = warp * DIRECT_FFTS_PER_WARP + 2 * (lane % 4);
    unroll_pairs::<6>(|tile| {
        if (tile as u32) < N / 4 {
            let q = 8 * tile as u32 + lane / 4;
            if s0 < batch {
                *y.add((s0 * 2 * N + q) as usize) = prmt(out[tile][0], out[tile][1], 0x5410);
            }
            if s0 + 1 < batch {
                *y.add(((s0 + 1) * 2 * N + q) as usize) = prmt(out[tile][0], out[tile][1], 0x7632);
            }
        }
    });
}

/// Benchmark kernel of the direct DFT, as `fft_loop`: four independent groups of eight
/// FFTs per iteration; group k's input register m is `x[4 t + (k + m) % 4] ^ (i & salt)`,
/// and every output register is folded into the xor.
#[inline(always)]
pub(super) unsafe fn direct_loop<const N: u32>(
    image: *const u32,
    x: *const u32,
    y: *mut u32,
    iterations: u32,
    salt: u32,
) {
    let f = direct_load::<N>(image);
    let t = global_thread_x() as usize;
    let xs = ld_global_nc_v4(x.add(4 * t));
    let mut acc = 0u32;
    let mut i = 0;
    while i < iterations {
        unroll!(k in [0, 1, 2, 3] {
            let mut input = [0u32; 6];
            unroll_pairs::<6>(|m| {
                if (m as u32) < N / 4 {
                    input[m] = lop3::<0x78>(xs[(k + m) & 3], i, salt);
                }
            });
            let out = direct_dft::<N>(&f, &input);
            unroll_pairs::<6>(|tile| {
                if (tile as u32) < N / 4 {
                    acc = lop3::<0x96>(acc, out[tile][0], out[tile][1]);
                }
            });
        });
        i += 1;
    }
    *y.add(t) = acc;
}

/// [`converged`] over `U` register pairs.
#[inline(always)]
pub(super) fn converged_pairs<const U: usize>(mut y: [[u32; 2]; U]) -> [[u32; 2]; U] {
    unroll_pairs::<U>(|j| y[j] = converged(y[j]));
    y
}

/// Runs `body(j)` for j in 0..P with a constant j (P is at most 4 here).
#[inline(always)]
pub(super) fn unroll_pairs<const P: usize>(mut body: impl FnMut(usize)) {
    let mut j = 0;
    while j < P {
        body(j);
        j += 1;
    }
}
