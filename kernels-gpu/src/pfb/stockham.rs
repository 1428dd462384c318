//! The radix-16 Stockham FFT the cluster kernel ([`super::cluster`]) runs on the rows of the
//! unzipped matrix in shared memory: padded slots, the butterflies' element indices, and the
//! small DFTs in registers.
//!
//! A transform of `a` complex f32 points lives at slots [`fft_slot`]`(e)`: one pad slot after
//! every 16, so the radix-16 stores `16 j + r` of 16 lanes land on 16 different bank pairs (CPU
//! test). A pass after sub-transforms of `ns` points: butterfly `j` loads inputs `r` at
//! [`stockham_load`], multiplies input `r` by `W_(16 ns)^(r (j % ns))` (none for `ns = 1`),
//! takes the 16-point DFT ([`dft16`]) and stores output `r` at [`stockham_store`]; the outputs
//! are in natural order after the last pass (Stockham autosort).

use super::arith::{cadd, csub, mul_neg_j, C32};

/// Shared-memory slot (complex f32 units) of element `e` of a spectrum: one pad slot after
/// every 16, so the radix-16 stores `16 j + r` of 16 lanes land on 16 different bank pairs.
pub const fn fft_slot(e: u32) -> u32 {
    e + e / 16
}

/// Slots of one spectrum's buffer.
pub const fn fft_buffer_slots(channels: u32) -> u32 {
    fft_slot(channels)
}

/// Element read as input `r` of Stockham butterfly `j` of a radix-`radix` pass.
pub const fn stockham_load(j: u32, r: u32, channels: u32, radix: u32) -> u32 {
    j + r * (channels / radix)
}

/// Element written as output `r` of butterfly `j` of the pass after sub-transforms of `ns`
/// points: `(j / ns) ns R + j % ns + r ns`.
pub const fn stockham_store(j: u32, r: u32, ns: u32, radix: u32) -> u32 {
    (j / ns) * ns * radix + j % ns + r * ns
}

// -------------------------------------------------------------------------------------------
// Small DFTs in registers (forward, natural order).

#[inline(always)]
fn dft2(a: C32, b: C32) -> (C32, C32) {
    (cadd(a, b), csub(a, b))
}

/// Forward 4-point DFT in natural order: `X[k] = sum_n x[n] exp(-2 pi j n k / 4)`, k = 0..4,
/// unnormalised (eight complex additions, the products by `-j` as swaps).
#[inline(always)]
pub fn dft4(x: [C32; 4]) -> [C32; 4] {
    let (s02, d02) = dft2(x[0], x[2]);
    let (s13, d13) = (cadd(x[1], x[3]), mul_neg_j(csub(x[1], x[3])));
    [cadd(s02, s13), cadd(d02, d13), csub(s02, s13), csub(d02, d13)]
}

const H: f32 = core::f32::consts::FRAC_1_SQRT_2;
const C8: f32 = 0.923_879_5; // cos(pi / 8)
const S8: f32 = 0.382_683_43; // sin(pi / 8)
/// `W_16^m = exp(-2 pi j m / 16)` for m = 0..10.
const W16: [C32; 10] = [
    [1.0, 0.0],
    [C8, -S8],
    [H, -H],
    [S8, -C8],
    [0.0, -1.0],
    [-S8, -C8],
    [-H, -H],
    [-C8, -S8],
    [-1.0, 0.0],
    [-C8, S8],
];

#[inline(always)]
fn twiddle16(x: C32, m: usize) -> C32 {
    match m {
        0 => x,
        4 => mul_neg_j(x),
        8 => [-x[0], -x[1]],
        _ => super::cmul(x, W16[m]),
    }
}

/// 16 points as 4 x 4: `X[k1 + 4 k2] = sum_r2 W_4^(r2 k2) W_16^(r2 k1) sum_r1 W_4^(r1 k1) x[4 r1 + r2]`.
#[inline(always)]
pub fn dft16(x: [C32; 16]) -> [C32; 16] {
    let a0 = dft4([x[0], x[4], x[8], x[12]]);
    let a1 = dft4([x[1], x[5], x[9], x[13]]);
    let a2 = dft4([x[2], x[6], x[10], x[14]]);
    let a3 = dft4([x[3], x[7], x[11], x[15]]);
    let c0 = dft4([a0[0], a1[0], a2[0], a3[0]]);
    let c1 = dft4([a0[1], twiddle16(a1[1], 1), twiddle16(a2[1], 2), twiddle16(a3[1], 3)]);
    let c2 = dft4([a0[2], twiddle16(a1[2], 2), twiddle16(a2[2], 4), twiddle16(a3[2], 6)]);
    let c3 = dft4([a0[3], twiddle16(a1[3], 3), twiddle16(a2[3], 6), twiddle16(a3[3], 9)]);
    [
        c0[0], c1[0], c2[0], c3[0], c0[1], c1[1], c2[1], c3[1], c0[2], c1[2], c2[2], c3[2], c0[3], c1[3],
        c2[3], c3[3],
    ]
}
