//! Sample formats, rounding rules and bit-level instruction models shared by host and device.
//!
//! Formats (byte order is memory order; a multi-byte value read as an integer is little-endian):
//! - **ci4** (complex int4+4): one byte per sample. Real part in bits 0..4 (low nibble),
//!   imaginary part in bits 4..8 (high nibble), each 4-bit two's complement in `[-8, 7]`.
//!   Four samples read as a `u32`: sample `n` is byte `n`.
//! - **ci8** (complex int8+8): two bytes per sample, real at the lower address, imaginary at the
//!   higher; read as a `u16` that is real in bits 0..8, imaginary in bits 8..16, each `i8`.
//! - **f16x2**: two IEEE binary16 values in one `u32`, the first (`lo`) in bits 0..16.
//!
//! Why this ci4 layout: CHORD's production baseband beamformer reads int4+4 with the real part
//! in the low nibble, so that is our in-memory convention; data in other conventions (real in
//! the high nibble, or offset binary) is converted once at the boundary with the helpers below.
//!
//! Everything here is compiled for the host and for nvptx64: `core` only, no allocation, no
//! float functions from `std`, and no input can panic (not even with overflow checks on), so a
//! kernel never traps on data.

// ---------------------------------------------------------------------------------------------
// ci4: complex int4+4
// ---------------------------------------------------------------------------------------------

/// Packs one ci4 sample: `re` into the low nibble, `im` into the high nibble.
///
/// Only the low 4 bits of each argument are kept, so values outside `[-8, 7]` wrap modulo 16
/// (e.g. `8` is stored as `-8`, `-9` as `7`). Callers validate; this stays branch-free.
#[inline]
pub const fn pack_ci4(re: i8, im: i8) -> u8 {
    ((re as u8) & 0x0f) | ((im as u8) << 4)
}

/// Unpacks one ci4 sample into sign-extended `(re, im)`, each in `[-8, 7]`.
#[inline]
pub const fn unpack_ci4(byte: u8) -> (i8, i8) {
    // Arithmetic right shift of the nibble moved to the top does the sign extension.
    (((byte << 4) as i8) >> 4, (byte as i8) >> 4)
}

/// One ci4 sample (complex int4+4) as a typed byte: the real part in the low nibble, the
/// imaginary part in the high nibble, each 4-bit two's complement in `[-8, 7]`.
///
/// `#[repr(transparent)]` over `u8`, so a slice of raw capture bytes in this layout is a
/// slice of `Ci4` (`From<u8>`, `bytemuck::cast_slice` with the host's `bytemuck` feature) and
/// a `Ci4` buffer is exactly the bytes the kernels read. Every byte is a valid sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Ci4(pub u8);

impl Ci4 {
    /// The sample `re + i im` with each part wrapped to 4 bits, as [`pack_ci4`] packs it:
    /// values outside `[-8, 7]` wrap modulo 16, which is what a packer of already-quantised
    /// data wants. [`Ci4::new`] refuses them instead.
    #[inline]
    pub const fn wrapping(re: i8, im: i8) -> Ci4 {
        Ci4(pack_ci4(re, im))
    }
    /// The sample `re + i im`, or `None` when either part is outside `[-8, 7]`.
    #[inline]
    pub const fn new(re: i8, im: i8) -> Option<Ci4> {
        if re < -8 || re > 7 || im < -8 || im > 7 {
            None
        } else {
            Some(Ci4::wrapping(re, im))
        }
    }
    /// The real part, sign-extended, in `[-8, 7]`.
    #[inline]
    pub const fn re(self) -> i8 {
        unpack_ci4(self.0).0
    }
    /// The imaginary part, sign-extended, in `[-8, 7]`.
    #[inline]
    pub const fn im(self) -> i8 {
        unpack_ci4(self.0).1
    }
    /// The packed byte.
    #[inline]
    pub const fn to_bits(self) -> u8 {
        self.0
    }
    /// Reinterprets raw ci4 bytes as samples (no copy).
    #[inline]
    pub fn from_bytes(bytes: &[u8]) -> &[Ci4] {
        // SAFETY: Ci4 is repr(transparent) over u8, so size, alignment and validity agree.
        unsafe { core::slice::from_raw_parts(bytes.as_ptr().cast(), bytes.len()) }
    }
    /// Reinterprets mutable raw ci4 bytes as samples (no copy).
    #[inline]
    pub fn from_bytes_mut(bytes: &mut [u8]) -> &mut [Ci4] {
        // SAFETY: Ci4 is repr(transparent) over u8, so size, alignment and validity agree.
        unsafe { core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast(), bytes.len()) }
    }
    /// Reinterprets samples as their raw bytes (no copy).
    #[inline]
    pub fn as_bytes(samples: &[Ci4]) -> &[u8] {
        // SAFETY: Ci4 is repr(transparent) over u8.
        unsafe { core::slice::from_raw_parts(samples.as_ptr().cast(), samples.len()) }
    }
}

impl From<u8> for Ci4 {
    #[inline]
    fn from(byte: u8) -> Ci4 {
        Ci4(byte)
    }
}

impl From<Ci4> for u8 {
    #[inline]
    fn from(sample: Ci4) -> u8 {
        sample.0
    }
}

// SAFETY: repr(transparent) over u8: no padding, every bit pattern valid, zero is a sample.
#[cfg(feature = "bytemuck")]
unsafe impl bytemuck::Zeroable for Ci4 {}
// SAFETY: as above; Ci4 is Copy and 'static.
#[cfg(feature = "bytemuck")]
unsafe impl bytemuck::Pod for Ci4 {}

/// Converts a sample stored with the real part in the HIGH nibble (imaginary low, both two's
/// complement) to ci4. This is a nibble swap.
#[inline]
pub const fn ci4_from_real_high(byte: u8) -> u8 {
    byte.rotate_left(4)
}

/// Converts a ci4 sample to the real-in-high-nibble convention (the inverse nibble swap).
#[inline]
pub const fn ci4_to_real_high(byte: u8) -> u8 {
    byte.rotate_left(4)
}

/// Converts a sample whose nibbles are offset binary (stored `v` in `0..16` means `v - 8`,
/// real in the low nibble) to ci4.
///
/// Offset binary and two's complement differ only in the top bit of each nibble, so this is
/// `byte ^ 0x88`, its own inverse.
#[inline]
pub const fn ci4_from_offset_binary(byte: u8) -> u8 {
    byte ^ 0x88
}

/// Converts a ci4 sample to offset-binary nibbles (real in the low nibble): `byte ^ 0x88`.
#[inline]
pub const fn ci4_to_offset_binary(byte: u8) -> u8 {
    byte ^ 0x88
}

/// Sign-extends the low nibble of every byte lane of `x` (high nibbles must be zero) to a
/// full signed byte, without carries or borrows crossing lanes.
///
/// Flipping bit 3 turns two's complement `t` into `t + 8` in `0..16`; adding `0x78` gives
/// `t + 0x80` in `0x78..0x88`, which never carries out of the lane; flipping bit 7 subtracts
/// the `0x80` back modulo 256.
#[inline]
const fn sign_extend_nibbles(x: u32) -> u32 {
    ((x ^ 0x0808_0808).wrapping_add(0x7878_7878)) ^ 0x8080_8080
}

/// Unpacks four ci4 samples (`word` byte `n` = sample `n`) into two words of four `i8` each:
/// `(re, im)`, where byte `n` of `re` is the real part of sample `n` and byte `n` of `im` its
/// imaginary part.
///
/// Branch-free and lane-local (no carry crosses a byte), so it costs a handful of integer
/// instructions in a kernel's inner loop and its output feeds int8 tensor-core fragments.
#[inline]
pub const fn unpack_ci4_word_to_i8x4(word: u32) -> (u32, u32) {
    (sign_extend_nibbles(word & 0x0f0f_0f0f), sign_extend_nibbles((word >> 4) & 0x0f0f_0f0f))
}

// ---------------------------------------------------------------------------------------------
// ci8: complex int8+8
// ---------------------------------------------------------------------------------------------

/// Packs one ci8 sample: `re` in bits 0..8 (lower address), `im` in bits 8..16.
#[inline]
pub const fn pack_ci8(re: i8, im: i8) -> u16 {
    (re as u8 as u16) | ((im as u8 as u16) << 8)
}

/// Unpacks one ci8 sample into `(re, im)`.
#[inline]
pub const fn unpack_ci8(v: u16) -> (i8, i8) {
    (v as u8 as i8, (v >> 8) as u8 as i8)
}

/// Converts a ci8 sample with offset-binary bytes (stored `v` in `0..256` means `v - 128`,
/// real in the low byte) to ci8: `v ^ 0x8080`, its own inverse.
#[inline]
pub const fn ci8_from_offset_binary(v: u16) -> u16 {
    v ^ 0x8080
}

/// Converts a ci8 sample to offset-binary bytes (real in the low byte): `v ^ 0x8080`.
#[inline]
pub const fn ci8_to_offset_binary(v: u16) -> u16 {
    v ^ 0x8080
}

// ---------------------------------------------------------------------------------------------
// Rounding and saturation
// ---------------------------------------------------------------------------------------------

/// Rounding right shift: `(x + 2^(s-1)) >> s` with an arithmetic shift, and `x` for `s = 0`.
///
/// This is round-half-up (toward +infinity) on ties: `-3 / 2 -> -1`, `3 / 2 -> 2`,
/// `-1 / 2 -> 0`. It is the rule of footnote 1 of Smith's CHORD baseband beamformer design note
/// (2022), so host references and kernels agree bit for bit. The sum is formed in `i64`, so no `x`
/// overflows. `s > 31` is treated as `s = 31` (a shift of an `i32` by 32 or more has no meaning
/// here, and must not trap on the device).
#[inline]
pub const fn round_shift_i32(x: i32, s: u32) -> i32 {
    let s = if s < 31 { s } else { 31 };
    // (1 << s) >> 1 is 2^(s-1) for s >= 1 and 0 for s = 0: one branch-free expression.
    let half = (1i64 << s) >> 1;
    // For s >= 1 the result lies in [-2^30, 2^30], so the cast back is exact.
    ((x as i64 + half) >> s) as i32
}

/// Clamps `x` to `[-max, max]`. A negative `max` is treated as 0 (callers pass `max >= 0`;
/// this keeps every input panic-free).
#[inline]
pub const fn saturate_symmetric(x: i32, max: i32) -> i32 {
    let m = if max < 0 { 0 } else { max };
    // -m cannot overflow since 0 <= m <= i32::MAX.
    if x > m {
        m
    } else if x < -m {
        -m
    } else {
        x
    }
}

/// The int4+4 output rule of the CHORD baseband beamformer: rounding shift by `s`
/// ([`round_shift_i32`]) then saturation to `[-7, 7]`.
///
/// The range is symmetric, so the result is never `-8`: negating an output never overflows
/// and `-8` never appears in the output stream.
#[inline]
pub const fn shift_round_saturate_i4(x: i32, s: u32) -> i8 {
    saturate_symmetric(round_shift_i32(x, s), 7) as i8
}

/// Same rule for int8+8 output: rounding shift by `s`, then saturation to `[-127, 127]`
/// (never `-128`).
#[inline]
pub const fn shift_round_saturate_i8(x: i32, s: u32) -> i8 {
    saturate_symmetric(round_shift_i32(x, s), 127) as i8
}

// ---------------------------------------------------------------------------------------------
// f16 without the `half` crate
// ---------------------------------------------------------------------------------------------

/// Converts an `f32` to IEEE binary16 bits with round-to-nearest-even.
///
/// Bit-identical to `half::f16::from_f32(x).to_bits()` (software and F16C paths) for every
/// input: subnormal results are rounded correctly, magnitudes rounding to `>= 65520` become
/// infinity, signed zeros keep their sign, NaNs stay NaN, are made quiet (bit 9 set) and keep
/// the top 10 bits of their payload. The device needs this without depending on `half`.
#[inline]
pub const fn f16_bits_from_f32(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = (bits >> 23) & 0xff;
    let man = bits & 0x007f_ffff;

    if exp == 0xff {
        // Infinity, or NaN: keep the payload's top bits and force quiet so it stays NaN.
        let nan_bit = if man == 0 { 0 } else { 0x0200 };
        return sign | 0x7c00 | nan_bit | (man >> 13) as u16;
    }

    // Biased f16 exponent; exp is in 0..255, so this cannot overflow.
    let half_exp = exp as i32 - 127 + 15;
    if half_exp >= 0x1f {
        return sign | 0x7c00;
    }

    if half_exp <= 0 {
        // Subnormal (or zero) result: the value is m * 2^-24 with m = full >> (14 - half_exp).
        let shift = 14 - half_exp; // >= 14
        if shift > 24 {
            // Below half the smallest subnormal (2^-25): rounds to zero. An exact 2^-25 has
            // shift 24 and is handled below as a tie to even (zero).
            return sign;
        }
        let full = man | 0x0080_0000;
        let half_man = full >> shift;
        let round_bit = 1u32 << (shift - 1);
        // Round up if the first dropped bit is set and either a lower dropped bit or the kept
        // lsb is set (ties go to even). 3 * round_bit - 1 spans both.
        let up = (full & round_bit) != 0 && (full & (3 * round_bit - 1)) != 0;
        return sign | (half_man + up as u32) as u16;
    }

    let rounded = ((half_exp as u32) << 10) | (man >> 13);
    let up = (man & 0x1000) != 0 && (man & 0x2fff) != 0;
    // A carry out of the mantissa increments the exponent, which is exactly right, including
    // 65504 + ulp/2 -> 0x7c00 (infinity). rounded <= 0x7bff, so no u16 overflow.
    sign | (rounded + up as u32) as u16
}

/// Converts IEEE binary16 bits to `f32`. Exact for every non-NaN input (every f16 is an f32).
///
/// NaNs stay NaN with the payload kept and the quiet bit set, as `half` and the hardware do;
/// hence `f16_bits_from_f32(f32_from_f16_bits(h)) == h | 0x0200` for a NaN `h`, and `== h`
/// otherwise.
#[inline]
pub const fn f32_from_f16_bits(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x03ff) as u32;

    let bits = if exp == 0x1f {
        if man == 0 {
            sign | 0x7f80_0000
        } else {
            sign | 0x7fc0_0000 | (man << 13)
        }
    } else if exp != 0 {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    } else if man == 0 {
        sign
    } else {
        // Subnormal m * 2^-24: normalise so the leading 1 lands on the implicit bit (bit 10
        // of the f16 mantissa field). man <= 0x3ff, so e is in 1..=10.
        let e = man.leading_zeros() - 21;
        sign | ((127 - 15 + 1 - e) << 23) | (((man << e) & 0x3ff) << 13)
    };
    f32::from_bits(bits)
}

/// Packs two f16 bit patterns into one word, `lo` in bits 0..16 (the first element in memory).
#[inline]
pub const fn pack_f16x2(lo: u16, hi: u16) -> u32 {
    (lo as u32) | ((hi as u32) << 16)
}

/// Splits a word of two f16 bit patterns into `(lo, hi)`, `lo` from bits 0..16.
#[inline]
pub const fn unpack_f16x2(w: u32) -> (u16, u16) {
    (w as u16, (w >> 16) as u16)
}

// ---------------------------------------------------------------------------------------------
// Host models of GPU instructions
// ---------------------------------------------------------------------------------------------

/// Host model of PTX `prmt.b32` in its default mode (what CUDA's `__byte_perm` compiles to).
///
/// The eight source bytes are `a`'s bytes 0..4 then `b`'s bytes 0..4 (indices 0..8). For result
/// byte `n`, the selector nibble `s = (selector >> 4n) & 0xf` picks source byte `s & 7`; if
/// `s & 8` is set (msb mode) the result byte is that source byte's sign bit replicated
/// (`0xff` or `0x00`) instead of the byte itself. Selector bits 16..32 are ignored. CUDA's
/// documentation mentions only the 3-bit index, but the instruction has the msb mode, and
/// the GPU tests check this model against the hardware.
#[inline]
pub const fn byte_perm(a: u32, b: u32, selector: u32) -> u32 {
    let src = (a as u64) | ((b as u64) << 32);
    let mut out = 0u32;
    let mut n = 0;
    while n < 4 {
        let s = (selector >> (4 * n)) & 0xf;
        let byte = (src >> (8 * (s & 7))) as u8;
        let byte = if s & 8 != 0 { ((byte as i8) >> 7) as u8 } else { byte };
        out |= (byte as u32) << (8 * n);
        n += 1;
    }
    out
}

/// `lop3` truth-table operand for `a` (use with [`LOP3_B`], [`LOP3_C`]).
pub const LOP3_A: u8 = 0xf0;
/// `lop3` truth-table operand for `b`.
pub const LOP3_B: u8 = 0xcc;
/// `lop3` truth-table operand for `c`.
pub const LOP3_C: u8 = 0xaa;

/// Host model of PTX `lop3.b32`: bit `n` of the result is bit `(a_n << 2) | (b_n << 1) | c_n`
/// of `lut`.
///
/// Build `lut` by evaluating the wanted expression on the constants `A = 0xf0`, `B = 0xcc`,
/// `C = 0xaa` ([`LOP3_A`], [`LOP3_B`], [`LOP3_C`]): e.g. `(a & b) | c` uses
/// `lut = (0xf0 & 0xcc) | 0xaa = 0xea`.
#[inline]
pub const fn lop3(a: u32, b: u32, c: u32, lut: u8) -> u32 {
    let mut out = 0u32;
    let mut i = 0;
    // Each lut entry i selects the bit positions where (a, b, c) equals i's three bits.
    while i < 8 {
        if (lut >> i) & 1 != 0 {
            let ma = if i & 4 != 0 { a } else { !a };
            let mb = if i & 2 != 0 { b } else { !b };
            let mc = if i & 1 != 0 { c } else { !c };
            out |= ma & mb & mc;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;

    // Compile-time use proves these really are const fns.
    const _: () = {
        assert!(pack_ci4(-8, 7) == 0x78);
        assert!(f16_bits_from_f32(1.0) == 0x3c00);
        assert!(round_shift_i32(-3, 1) == -1);
        assert!(byte_perm(1, 2, 0x0004) == 0x0101_0102);
    };

    // ----- ci4 -----

    fn wrap4(v: i8) -> i8 {
        // Independent of the bit tricks: arithmetic modulo 16 into [-8, 7].
        (((v as i32 + 8).rem_euclid(16)) - 8) as i8
    }

    #[test]
    fn ci4_round_trips_every_value() {
        for re in -8..=7i8 {
            for im in -8..=7i8 {
                let b = pack_ci4(re, im);
                assert_eq!(unpack_ci4(b), (re, im));
                // Layout: real in the low nibble, imaginary in the high nibble.
                assert_eq!(b & 0x0f, (re as u8) & 0x0f);
                assert_eq!(b >> 4, (im as u8) & 0x0f);
            }
        }
        for b in 0..=255u8 {
            let (re, im) = unpack_ci4(b);
            assert!((-8..=7).contains(&re) && (-8..=7).contains(&im));
            assert_eq!(pack_ci4(re, im), b);
        }
        assert_eq!(unpack_ci4(0x88), (-8, -8));
        assert_eq!(unpack_ci4(0x7f), (-1, 7));
    }

    #[test]
    fn ci4_pack_wraps_out_of_range() {
        for re in i8::MIN..=i8::MAX {
            for im in i8::MIN..=i8::MAX {
                assert_eq!(pack_ci4(re, im), pack_ci4(wrap4(re), wrap4(im)));
            }
        }
        assert_eq!(unpack_ci4(pack_ci4(8, -9)), (-8, 7));
    }

    #[test]
    fn ci4_real_high_conversion() {
        for b in 0..=255u8 {
            // Independent reading of the other convention: real high, imaginary low.
            let re = (b as i8) >> 4;
            let im = (((b & 0x0f) as i8) ^ 8) - 8;
            assert_eq!(ci4_from_real_high(b), pack_ci4(re, im));
            assert_eq!(ci4_to_real_high(ci4_from_real_high(b)), b);
            assert_eq!(ci4_from_real_high(ci4_to_real_high(b)), b);
        }
        assert_eq!(ci4_from_real_high(0x12), 0x21);
    }

    #[test]
    fn ci4_offset_binary_conversion() {
        for b in 0..=255u8 {
            let re = (b & 0x0f) as i8 - 8;
            let im = (b >> 4) as i8 - 8;
            assert_eq!(ci4_from_offset_binary(b), pack_ci4(re, im));
            assert_eq!(ci4_to_offset_binary(ci4_from_offset_binary(b)), b);
        }
        for re in -8..=7i8 {
            for im in -8..=7i8 {
                let ob = ((re + 8) as u8) | (((im + 8) as u8) << 4);
                assert_eq!(ci4_to_offset_binary(pack_ci4(re, im)), ob);
            }
        }
        // Offset-binary zero (0x88) is complex zero.
        assert_eq!(ci4_from_offset_binary(0x88), 0);
    }

    fn unpack_word_reference(word: u32) -> (u32, u32) {
        let mut re = [0u8; 4];
        let mut im = [0u8; 4];
        for (n, b) in word.to_le_bytes().into_iter().enumerate() {
            let (r, i) = unpack_ci4(b);
            re[n] = r as u8;
            im[n] = i as u8;
        }
        (u32::from_le_bytes(re), u32::from_le_bytes(im))
    }

    #[test]
    fn ci4_word_unpack_every_adjacent_byte_pair() {
        // Bytes [b0, b1, b0, b1]: every lane boundary (0|1, 1|2, 2|3) sees every ordered pair
        // of neighbours, which is where a carry or borrow leaking across lanes would show.
        for p in 0..=u16::MAX {
            let word = (p as u32) * 0x0001_0001;
            assert_eq!(unpack_ci4_word_to_i8x4(word), unpack_word_reference(word));
            let word = word.rotate_left(8);
            assert_eq!(unpack_ci4_word_to_i8x4(word), unpack_word_reference(word));
        }
        // Sample order: byte n is sample n.
        let w = u32::from_le_bytes([pack_ci4(1, -1), pack_ci4(-8, 7), pack_ci4(0, -8), pack_ci4(7, 3)]);
        let (re, im) = unpack_ci4_word_to_i8x4(w);
        assert_eq!(re.to_le_bytes().map(|b| b as i8), [1, -8, 0, 7]);
        assert_eq!(im.to_le_bytes().map(|b| b as i8), [-1, 7, -8, 3]);
    }

    // ----- ci8 -----

    #[test]
    fn ci8_round_trips_every_value() {
        for re in i8::MIN..=i8::MAX {
            for im in i8::MIN..=i8::MAX {
                let v = pack_ci8(re, im);
                assert_eq!(unpack_ci8(v), (re, im));
                assert_eq!(v.to_le_bytes(), [re as u8, im as u8]);
                let ob = ((re as i16 + 128) as u16) | (((im as i16 + 128) as u16) << 8);
                assert_eq!(ci8_to_offset_binary(v), ob);
                assert_eq!(ci8_from_offset_binary(ob), v);
            }
        }
        for v in 0..=u16::MAX {
            let (re, im) = unpack_ci8(v);
            assert_eq!(pack_ci8(re, im), v);
            assert_eq!(ci8_from_offset_binary(ci8_to_offset_binary(v)), v);
            let ob_re = (v & 0xff) as i16 - 128;
            let ob_im = (v >> 8) as i16 - 128;
            assert_eq!(unpack_ci8(ci8_from_offset_binary(v)), (ob_re as i8, ob_im as i8));
        }
        assert_eq!(unpack_ci8(0x8080), (-128, -128));
    }

    // ----- rounding -----

    fn round_shift_ref_i128(x: i32, s: u32) -> i32 {
        let s = s.min(31);
        if s == 0 {
            return x;
        }
        let d = 1i128 << s;
        // floor((x + d/2) / d), i.e. round half toward +infinity.
        (x as i128 + d / 2).div_euclid(d) as i32
    }

    fn round_shift_ref_f64(x: i32, s: u32) -> i32 {
        // x / 2^s and + 0.5 are exact in f64 (at most 32 significant bits).
        let q = x as f64 / (1u64 << s.min(31)) as f64;
        (q + 0.5).floor() as i32
    }

    const EDGES: [i32; 12] =
        [i32::MIN, i32::MIN + 1, i32::MIN / 2, -3, -2, -1, 0, 1, 2, 3, i32::MAX - 1, i32::MAX];

    #[test]
    fn round_shift_examples_and_edges() {
        assert_eq!(round_shift_i32(-3, 1), -1);
        assert_eq!(round_shift_i32(3, 1), 2);
        assert_eq!(round_shift_i32(-1, 1), 0);
        assert_eq!(round_shift_i32(-5, 1), -2);
        assert_eq!(round_shift_i32(-6, 2), -1);
        assert_eq!(round_shift_i32(-7, 2), -2);
        assert_eq!(round_shift_i32(i32::MAX, 31), 1);
        assert_eq!(round_shift_i32(i32::MIN, 31), -1);
        assert_eq!(round_shift_i32(i32::MAX, 1), 1 << 30);
        assert_eq!(round_shift_i32(i32::MIN, 0), i32::MIN);
        for s in 0..=40u32 {
            for &x in &EDGES {
                assert_eq!(round_shift_i32(x, s), round_shift_ref_i128(x, s), "x={x} s={s}");
                assert_eq!(round_shift_i32(x, s), round_shift_ref_f64(x, s), "x={x} s={s}");
            }
        }
        for &x in &EDGES {
            assert_eq!(round_shift_i32(x, u32::MAX), round_shift_i32(x, 31));
        }
    }

    #[test]
    fn saturation_never_produces_the_asymmetric_minimum() {
        for &x in &EDGES {
            for s in 0..=32u32 {
                assert!(shift_round_saturate_i4(x, s) >= -7);
                assert!(shift_round_saturate_i8(x, s) >= -127);
            }
        }
        assert_eq!(shift_round_saturate_i4(-8, 0), -7);
        assert_eq!(shift_round_saturate_i4(8, 0), 7);
        assert_eq!(shift_round_saturate_i4(-15, 1), -7);
        assert_eq!(shift_round_saturate_i4(-13, 1), -6);
        assert_eq!(shift_round_saturate_i8(-128, 0), -127);
        assert_eq!(shift_round_saturate_i8(i32::MIN, 0), -127);
        assert_eq!(shift_round_saturate_i8(i32::MAX, 0), 127);
        assert_eq!(saturate_symmetric(5, -3), 0);
        assert_eq!(saturate_symmetric(i32::MIN, i32::MAX), -i32::MAX);
        assert_eq!(saturate_symmetric(i32::MIN, 0), 0);
    }

    // ----- f16 -----

    /// f16 value from its fields, by f64 arithmetic only (no bit tricks shared with the code
    /// under test). None for NaN.
    fn f16_value_ref(h: u16) -> Option<f64> {
        let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let e = ((h >> 10) & 0x1f) as i32;
        let m = (h & 0x3ff) as f64;
        let v = match e {
            0x1f if m == 0.0 => f64::INFINITY,
            0x1f => return None,
            0 => m * 2f64.powi(-24),
            _ => (1024.0 + m) * 2f64.powi(e - 25),
        };
        Some(sign * v)
    }

    /// Round-to-nearest-even f32 -> f16 by search over the f16 values, in f64.
    fn f16_from_f32_ref(x: f32) -> u16 {
        let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
        if x.is_nan() {
            return sign | 0x7e00 | ((x.to_bits() & 0x7f_ffff) >> 13) as u16;
        }
        let a = (x as f64).abs();
        if a.is_infinite() {
            return sign | 0x7c00;
        }
        // Largest positive finite f16 code lo with value(lo) <= a (codes 0..=0x7bff are
        // monotone in value). 0x7c00 stands for the next value after 65504, i.e. 65536.
        let (mut lo, mut hi) = (0u16, 0x7c00u16);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if f16_value_ref(mid).unwrap() <= a {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let vlo = f16_value_ref(lo).unwrap();
        if vlo == a {
            return sign | lo;
        }
        let vhi = if hi == 0x7c00 { 65536.0 } else { f16_value_ref(hi).unwrap() };
        // Both differences are exact in f64.
        let (dlo, dhi) = (a - vlo, vhi - a);
        let code = if dlo < dhi || (dlo == dhi && lo & 1 == 0) { lo } else { hi };
        sign | code
    }

    #[test]
    fn f16_decode_matches_field_formula_and_round_trips() {
        for h in 0..=u16::MAX {
            let f = f32_from_f16_bits(h);
            match f16_value_ref(h) {
                Some(v) => {
                    assert_eq!(f as f64, v, "h={h:#06x}");
                    assert_eq!(f.is_sign_negative(), h & 0x8000 != 0);
                    assert_eq!(f16_bits_from_f32(f), h, "h={h:#06x}");
                }
                None => {
                    assert!(f.is_nan());
                    assert_eq!(f.to_bits() >> 31, (h >> 15) as u32);
                    assert_eq!(f16_bits_from_f32(f), h | 0x0200, "h={h:#06x}");
                }
            }
        }
        assert_eq!(f16_bits_from_f32(-0.0), 0x8000);
        assert_eq!(f16_bits_from_f32(0.0), 0x0000);
        assert_eq!(f32_from_f16_bits(0x8000).to_bits(), 0x8000_0000);
        assert_eq!(f32_from_f16_bits(0x0001), 2f32.powi(-24));
        assert_eq!(f32_from_f16_bits(0x7bff), 65504.0);
    }

    fn next_up(x: f32) -> f32 {
        // Positive finite x only.
        f32::from_bits(x.to_bits() + 1)
    }

    fn next_down(x: f32) -> f32 {
        // Positive nonzero x only.
        f32::from_bits(x.to_bits() - 1)
    }

    #[test]
    fn f16_midpoints_round_to_even() {
        for h in 0..0x7bffu16 {
            let lo = f16_value_ref(h).unwrap();
            let hi = f16_value_ref(h + 1).unwrap();
            let mid = ((lo + hi) / 2.0) as f32;
            assert_eq!(mid as f64, (lo + hi) / 2.0, "midpoint not exact in f32");
            let even = if h & 1 == 0 { h } else { h + 1 };
            for (sign, m) in [(0u16, mid), (0x8000, -mid)] {
                assert_eq!(f16_bits_from_f32(m), sign | even, "h={h:#06x}");
            }
            assert_eq!(f16_bits_from_f32(next_up(mid)), h + 1, "h={h:#06x}");
            assert_eq!(f16_bits_from_f32(next_down(mid)), h, "h={h:#06x}");
            assert_eq!(f16_bits_from_f32(-next_up(mid)), 0x8000 | (h + 1));
            assert_eq!(f16_bits_from_f32(-next_down(mid)), 0x8000 | h);
        }
        // Overflow threshold: 65520 is the midpoint between 65504 and 2^16, ties to "even" inf.
        assert_eq!(f16_bits_from_f32(65520.0), 0x7c00);
        assert_eq!(f16_bits_from_f32(-65520.0), 0xfc00);
        assert_eq!(f16_bits_from_f32(next_down(65520.0)), 0x7bff);
        assert_eq!(f16_bits_from_f32(f32::MAX), 0x7c00);
        assert_eq!(f16_bits_from_f32(f32::INFINITY), 0x7c00);
        assert_eq!(f16_bits_from_f32(f32::NEG_INFINITY), 0xfc00);
        // Underflow: 2^-25 is a tie between 0 and the smallest subnormal.
        let tiny = 2f32.powi(-25);
        assert_eq!(f16_bits_from_f32(tiny), 0x0000);
        assert_eq!(f16_bits_from_f32(next_up(tiny)), 0x0001);
        assert_eq!(f16_bits_from_f32(-tiny), 0x8000);
        assert_eq!(f16_bits_from_f32(f32::from_bits(1)), 0x0000);
        assert_eq!(f16_bits_from_f32(-f32::from_bits(1)), 0x8000);
        // Largest subnormal rounding up to the smallest normal.
        assert_eq!(f16_bits_from_f32(next_up(2f32.powi(-14) - 2f32.powi(-25))), 0x0400);
        // NaNs: quiet, payload top bits kept, sign kept.
        assert_eq!(f16_bits_from_f32(f32::NAN), 0x7e00);
        assert_eq!(f16_bits_from_f32(f32::from_bits(0x7f80_0001)), 0x7e00);
        assert_eq!(f16_bits_from_f32(f32::from_bits(0xffa0_2000)), 0xff01);
    }

    #[test]
    fn f16x2_packing() {
        assert_eq!(pack_f16x2(0x3c00, 0xc000), 0xc000_3c00);
        for w in [0u32, 1, 0xffff, 0x1_0000, 0xdead_beef, u32::MAX] {
            let (lo, hi) = unpack_f16x2(w);
            assert_eq!(pack_f16x2(lo, hi), w);
            assert_eq!(w.to_le_bytes()[..2], lo.to_le_bytes());
        }
    }

    // ----- instruction models -----

    fn byte_perm_ref(a: u32, b: u32, selector: u32) -> u32 {
        let mut src = [0u8; 8];
        src[..4].copy_from_slice(&a.to_le_bytes());
        src[4..].copy_from_slice(&b.to_le_bytes());
        let mut out = [0u8; 4];
        for (n, o) in out.iter_mut().enumerate() {
            let s = ((selector >> (4 * n)) & 0xf) as usize;
            let byte = src[s & 7];
            *o = if s & 8 != 0 {
                if byte & 0x80 != 0 {
                    0xff
                } else {
                    0
                }
            } else {
                byte
            };
        }
        u32::from_le_bytes(out)
    }

    #[test]
    fn byte_perm_documented_examples() {
        let a = 0x0302_0100;
        let b = 0x0706_0504;
        assert_eq!(byte_perm(a, b, 0x3210), a);
        assert_eq!(byte_perm(a, b, 0x7654), b);
        assert_eq!(byte_perm(a, b, 0x0123), a.swap_bytes());
        assert_eq!(byte_perm(a, b, 0x5140), 0x0501_0400);
        assert_eq!(byte_perm(a, b, 0xdead_3210), a, "upper selector bits ignored");
        // msb mode: bytes ff, 80, 7f, 01 -> signs ff, ff, 00, 00.
        let x = 0x017f_80ff;
        assert_eq!(byte_perm(x, 0, 0xba98), 0x0000_ffff);
        assert_eq!(byte_perm(0, x, 0xfedc), 0x0000_ffff);
        // Sign-extend byte 1 of a into a 16-bit lane: copy it, then replicate its sign.
        assert_eq!(byte_perm(0x0000_8000, 0, 0x0091), 0x0000_ff80);
        for sel in 0..=0xffffu32 {
            assert_eq!(
                byte_perm(0x8911_f27a, 0x3cc4_e605, sel),
                byte_perm_ref(0x8911_f27a, 0x3cc4_e605, sel)
            );
        }
    }

    fn lop3_ref(a: u32, b: u32, c: u32, lut: u8) -> u32 {
        let mut out = 0;
        for n in 0..32 {
            let idx = (((a >> n) & 1) << 2) | (((b >> n) & 1) << 1) | ((c >> n) & 1);
            out |= (((lut >> idx) & 1) as u32) << n;
        }
        out
    }

    #[test]
    fn lop3_lut_constants() {
        const A: u8 = LOP3_A;
        const B: u8 = LOP3_B;
        const C: u8 = LOP3_C;
        // The operand constants themselves select the operands.
        let (a, b, c) = (0x1234_5678, 0x9abc_def0, 0x0f0f_f0f0);
        assert_eq!(lop3(a, b, c, A), a);
        assert_eq!(lop3(a, b, c, B), b);
        assert_eq!(lop3(a, b, c, C), c);
        assert_eq!(lop3(a, b, c, 0), 0);
        assert_eq!(lop3(a, b, c, 0xff), u32::MAX);
        assert_eq!((A & B) | C, 0xea);
    }

    proptest! {
        #[test]
        fn prop_ci4_word_unpack_matches_bytewise(word in any::<u32>()) {
            prop_assert_eq!(unpack_ci4_word_to_i8x4(word), unpack_word_reference(word));
        }

        #[test]
        fn prop_round_shift_matches_references(x in any::<i32>(), s in 0u32..=31) {
            prop_assert_eq!(round_shift_i32(x, s), round_shift_ref_i128(x, s));
            prop_assert_eq!(round_shift_i32(x, s), round_shift_ref_f64(x, s));
        }

        #[test]
        fn prop_round_shift_large_s_clamps(x in any::<i32>(), s in 32u32..) {
            prop_assert_eq!(round_shift_i32(x, s), round_shift_i32(x, 31));
        }

        #[test]
        fn prop_saturated_outputs(x in any::<i32>(), s in 0u32..=40, max in any::<i32>()) {
            let r = round_shift_ref_i128(x, s);
            let q4 = shift_round_saturate_i4(x, s);
            let q8 = shift_round_saturate_i8(x, s);
            prop_assert!((-7..=7).contains(&q4));
            prop_assert!((-127..=127).contains(&q8));
            prop_assert_eq!(q4 as i32, r.clamp(-7, 7));
            prop_assert_eq!(q8 as i32, r.clamp(-127, 127));
            let m = max.max(0);
            prop_assert_eq!(saturate_symmetric(x, max), x.clamp(-m, m));
        }

        #[test]
        fn prop_f16_any_bits(bits in any::<u32>()) {
            let x = f32::from_bits(bits);
            prop_assert_eq!(f16_bits_from_f32(x), f16_from_f32_ref(x), "x bits {:#010x}", bits);
        }

        #[test]
        fn prop_f16_near_range(exp in 95u32..=145, man in 0u32..(1 << 23), neg in any::<bool>()) {
            // Exponents around the f16 range: deep underflow, subnormal, normal and overflow.
            let x = f32::from_bits(((neg as u32) << 31) | (exp << 23) | man);
            prop_assert_eq!(f16_bits_from_f32(x), f16_from_f32_ref(x), "x = {:e}", x);
        }

        #[test]
        fn prop_f16_values(x in -70000.0f32..70000.0) {
            prop_assert_eq!(f16_bits_from_f32(x), f16_from_f32_ref(x), "x = {:e}", x);
        }

        #[test]
        fn prop_byte_perm_matches_reference(a in any::<u32>(), b in any::<u32>(), sel in any::<u32>()) {
            prop_assert_eq!(byte_perm(a, b, sel), byte_perm_ref(a, b, sel));
        }

        #[test]
        fn prop_lop3_matches_expressions(a in any::<u32>(), b in any::<u32>(), c in any::<u32>(), lut in any::<u8>()) {
            const A: u8 = LOP3_A;
            const B: u8 = LOP3_B;
            const C: u8 = LOP3_C;
            prop_assert_eq!(lop3(a, b, c, lut), lop3_ref(a, b, c, lut));
            prop_assert_eq!(lop3(a, b, c, (A & B) | C), (a & b) | c);
            prop_assert_eq!(lop3(a, b, c, A ^ B ^ C), a ^ b ^ c);
            prop_assert_eq!(lop3(a, b, c, A & !B & C), a & !b & c);
            prop_assert_eq!(lop3(a, b, c, (A & B) | (!A & C)), (a & b) | (!a & c));
            prop_assert_eq!(lop3(a, b, c, !(A | B) ^ C), !(a | b) ^ c);
        }

        #[test]
        fn prop_f16x2_round_trip(lo in any::<u16>(), hi in any::<u16>()) {
            prop_assert_eq!(unpack_f16x2(pack_f16x2(lo, hi)), (lo, hi));
        }
    }
}
