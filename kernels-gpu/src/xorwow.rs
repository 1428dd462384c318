//! XORWOW, the generator behind curand's default `curandState` (Marsaglia 2003, xorshift on
//! five words plus a Weyl sequence), and the symmetric dither mapping of the MeerKAT GPU beamformer design ("Dithering").
//!
//! Matched bit for bit to curand's device API (`curand_kernel.h`):
//! - `curand()`: `t = v0 ^ (v0 >> 2)`, shift `v` down one word, `v4 = (v4 ^ (v4 << 4)) ^ (t ^ (t << 1))`,
//!   `d += 362437`, return `v4 + d` ([`Xorwow::next_u32`]).
//! - `curand_init(seed, subsequence, offset)`: the salted seeding of [`Xorwow::seeded`], then
//!   the xorshift part `v` jumps `subsequence * 2^67 + offset` steps (GF(2)-linear: a 160 x 160
//!   bit matrix, [`Jump`]) and `d += 362437 * offset` (a subsequence jump moves `d` by a
//!   multiple of 2^32, so not at all). The jump matrices are powers of [`step_matrix`] built by
//!   repeated squaring on the host (`radio_kernels_host::delay_beamformer::curand_init`); the
//!   device only applies them ([`apply`]).
//!
//! Dither ([`dither`]): the 2^32 outputs `r`, read as `i32`, become `r + (r < 0)`, which lies in
//! (-2^31, 2^31) with zero reached twice (from -1 and 0), so the set of values is exactly
//! symmetric about zero; that integer is converted to f32 toward zero (so no value rounds up to
//! +-2^31) and scaled by 2^-32, giving a zero-mean, symmetric value in (-0.5, 0.5).
//! `curand_uniform(state) - 0.5f` is neither.
//!
//! Everything here is `core` only and identical on the host and the device, except the
//! int-to-float conversion in [`dither`], which is one `cvt.rz` on the device and its exact
//! integer emulation on the host (the GPU tests compare the two on 10^8 draws).
//!
//! How the match with curand is verified: `scripts/curand_xorwow.cu`, built with nvcc 13.0
//! and run on an H200, printed curand's own state after `curand_init` and its first eight
//! `curand()` outputs for 18 (seed, subsequence, offset) cases, including subsequences past
//! 2^32 and 2^63, offsets past 2^40 and all-ones arguments; the host test `curand_known_answers`
//! holds those lines and compares `radio_kernels_host::delay_beamformer::curand_init`. The GPU
//! tests then compare the device's initialised states and 10^8 device draws with the host.

/// The Weyl increment of `d` per draw.
pub const WEYL: u32 = 362_437;
/// Words of the xorshift part of the state.
pub const WORDS: usize = 5;
/// Bits of the xorshift part: the side of a jump matrix.
pub const BITS: usize = 32 * WORDS;
/// Words of a stored state: `v[0..5]`, then `d`.
pub const STATE_WORDS: usize = WORDS + 1;

/// A GF(2)-linear map of the 160-bit xorshift state: row `i` is the image of bit `i % 32` of
/// word `i / 32` (curand's `precalc_xorwow_matrix` convention), so the image of a state is
/// the xor of the rows of its set bits.
pub type Jump = [[u32; WORDS]; BITS];

/// One XORWOW generator: the xorshift words `v` and the Weyl counter `d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Xorwow {
    /// The xorshift words `v0..v4` (curand's `v[5]`), the GF(2)-linear part of the state.
    pub v: [u32; WORDS],
    /// The Weyl counter (curand's `d`), advanced by [`WEYL`] per draw modulo 2^32.
    pub d: u32,
}

impl Xorwow {
    /// `curand_init(seed, 0, 0)`: the seed's halves salted and mixed by curand's constants.
    pub const fn seeded(seed: u64) -> Xorwow {
        let s0 = (seed as u32) ^ 0xaad2_6b49;
        let s1 = ((seed >> 32) as u32) ^ 0xf7dc_efdd;
        let t0 = 1_099_087_573u32.wrapping_mul(s0);
        let t1 = 2_591_861_531u32.wrapping_mul(s1);
        Xorwow {
            v: [
                123_456_789u32.wrapping_add(t0),
                362_436_069 ^ t0,
                521_288_629u32.wrapping_add(t1),
                88_675_123 ^ t1,
                5_783_321u32.wrapping_add(t0),
            ],
            d: 6_615_241u32.wrapping_add(t1).wrapping_add(t0),
        }
    }

    /// `curand(state)`: advances one step and returns 32 random bits.
    #[inline(always)]
    pub fn next_u32(&mut self) -> u32 {
        self.v = xorshift(self.v);
        self.d = self.d.wrapping_add(WEYL);
        self.v[4].wrapping_add(self.d)
    }

    /// The state as stored in device memory: `v[0..5]`, `d`.
    pub const fn to_words(self) -> [u32; STATE_WORDS] {
        [self.v[0], self.v[1], self.v[2], self.v[3], self.v[4], self.d]
    }

    /// The state read back from its stored form `[v0, v1, v2, v3, v4, d]`: the inverse of
    /// [`Xorwow::to_words`].
    pub const fn from_words(w: [u32; STATE_WORDS]) -> Xorwow {
        Xorwow { v: [w[0], w[1], w[2], w[3], w[4]], d: w[5] }
    }
}

/// The linear (xorshift) part of one step.
#[inline(always)]
pub const fn xorshift(v: [u32; WORDS]) -> [u32; WORDS] {
    let t = v[0] ^ (v[0] >> 2);
    [v[1], v[2], v[3], v[4], (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1))]
}

/// The image of `v` under `m`: the xor of the rows of `v`'s set bits. Branch-free (a mask per
/// bit), so every lane of a warp reads the same row at the same time (a broadcast load), and
/// written word by word so no state word is ever indexed at run time (it stays in registers).
#[inline(always)]
pub fn apply(m: &Jump, v: [u32; WORDS]) -> [u32; WORDS] {
    let mut out = [0u32; WORDS];
    let mut add_word = |word: u32, rows: &[[u32; WORDS]]| {
        let mut bit = 0;
        while bit < 32 {
            let mask = 0u32.wrapping_sub((word >> bit) & 1);
            let r = &rows[bit];
            out[0] ^= r[0] & mask;
            out[1] ^= r[1] & mask;
            out[2] ^= r[2] & mask;
            out[3] ^= r[3] & mask;
            out[4] ^= r[4] & mask;
            bit += 1;
        }
    };
    add_word(v[0], &m[0..32]);
    add_word(v[1], &m[32..64]);
    add_word(v[2], &m[64..96]);
    add_word(v[3], &m[96..128]);
    add_word(v[4], &m[128..160]);
    out
}

/// The matrix of one step (`xorshift` of each unit vector).
pub fn step_matrix() -> Jump {
    let mut m = [[0u32; WORDS]; BITS];
    for (row, image) in m.iter_mut().enumerate() {
        let mut unit = [0u32; WORDS];
        unit[row / 32] = 1 << (row % 32);
        *image = xorshift(unit);
    }
    m
}

/// `first` followed by `then` (for powers of one matrix the order does not matter).
pub fn compose(first: &Jump, then: &Jump) -> Jump {
    let mut m = [[0u32; WORDS]; BITS];
    for (out, row) in m.iter_mut().zip(first.iter()) {
        *out = apply(then, *row);
    }
    m
}

/// `i` converted to f32 toward zero (`cvt.rz.f32.s32`).
#[inline(always)]
pub fn i32_to_f32_toward_zero(i: i32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::intrinsics::cvt_rz_f32_s32(i)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // Keep the 24 leading significant bits of |i| (truncation is rounding toward zero);
        // the rest converts exactly.
        let magnitude = i.unsigned_abs();
        let significant = 32 - magnitude.leading_zeros();
        let kept = if significant > 24 {
            let drop = significant - 24;
            (magnitude >> drop) << drop
        } else {
            magnitude
        };
        let f = kept as f32;
        if i < 0 {
            -f
        } else {
            f
        }
    }
}

/// The scale of [`dither_units`]: 2^-32.
pub const DITHER_UNIT: f32 = 1.0 / 4_294_967_296.0;

/// The dither of one draw in units of [`DITHER_UNIT`]: `r` read as `i32`, negative values
/// moved up by one (-2^31..-1 -> -2^31+1..0, the mirror of 0..2^31-1), converted toward zero.
#[inline(always)]
pub fn dither_units(r: u32) -> f32 {
    let i = r as i32;
    i32_to_f32_toward_zero(i.wrapping_add((r >> 31) as i32))
}

/// The symmetric dither value of one draw, in (-0.5, 0.5) (see the module comment); exact
/// `dither_units(r) * 2^-32`.
#[inline(always)]
pub fn dither(r: u32) -> f32 {
    dither_units(r) * DITHER_UNIT
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    /// Marsaglia's xorwow (JSS 2003, p. 5) with curand's seed-0 state: the same recurrence
    /// written with named words, as an independent model of `next`.
    #[test]
    fn next_matches_the_published_recurrence() {
        let s = Xorwow::seeded(0x0123_4567_89ab_cdef);
        let (mut x, mut y, mut z, mut w, mut v) = (s.v[0], s.v[1], s.v[2], s.v[3], s.v[4]);
        let mut d = s.d;
        let mut g = s;
        for _ in 0..1000 {
            let t = x ^ (x >> 2);
            x = y;
            y = z;
            z = w;
            w = v;
            v = (v ^ (v << 4)) ^ (t ^ (t << 1));
            d = d.wrapping_add(362_437);
            assert_eq!(g.next_u32(), v.wrapping_add(d));
        }
    }

    #[test]
    fn every_seed_bit_reaches_the_state() {
        let base = Xorwow::seeded(0);
        for bit in 0..64 {
            assert_ne!(Xorwow::seeded(1 << bit), base, "seed bit {bit}");
        }
        assert_eq!(Xorwow::from_words(base.to_words()), base);
    }

    #[test]
    fn step_matrix_is_one_step_and_composition_adds_steps() {
        let a = step_matrix();
        let a2 = compose(&a, &a);
        let a3 = compose(&a2, &a);
        let a5 = compose(&a2, &a3);
        let mut g = Xorwow::seeded(0x1234_5678_9abc_def0);
        let start = g.v;
        assert_eq!(apply(&a, start), xorshift(start));
        for _ in 0..5 {
            g.next_u32();
        }
        assert_eq!(apply(&a5, start), g.v);
        assert_eq!(apply(&compose(&a3, &a2), start), g.v);
    }

    #[test]
    fn dither_extremes_and_zero() {
        assert_eq!(dither(0), 0.0);
        assert_eq!(dither(u32::MAX), 0.0); // -1 -> 0: zero is reached twice
        assert_eq!(dither(1), 1.0 / 4_294_967_296.0);
        assert_eq!(dither(0x7fff_ffff), -dither(0x8000_0000));
        assert!(dither(0x7fff_ffff) < 0.5 && dither(0x8000_0000) > -0.5);
        assert_eq!(dither(0x7fff_ffff), 0.5 - 2f32.powi(-25)); // toward zero, not up to 0.5
        assert_eq!(i32_to_f32_toward_zero(i32::MIN), -2_147_483_648.0);
        assert_eq!(i32_to_f32_toward_zero(16_777_217), 16_777_216.0);
        assert_eq!(i32_to_f32_toward_zero(-16_777_219), -16_777_218.0);
    }

    proptest! {
        /// The mapping pairs every draw with its mirror: r >= 0 as i32 with -r - 1.
        #[test]
        fn prop_dither_is_symmetric(v in 0u32..0x8000_0000) {
            let mirror = (-(v as i64) - 1) as i32 as u32;
            prop_assert_eq!(dither(mirror), -dither(v));
            prop_assert!(dither(v).abs() < 0.5);
        }

        /// Toward-zero conversion: never larger in magnitude, within one f32 ulp below.
        #[test]
        fn prop_toward_zero_conversion(i in any::<i32>()) {
            let f = i32_to_f32_toward_zero(i) as f64;
            let x = i as f64;
            prop_assert!(f.abs() <= x.abs());
            prop_assert!(x.abs() - f.abs() < (x.abs() * 2f64.powi(-23)).max(1.0));
            prop_assert_eq!(f as i64 as f64, f);
        }
    }
}
