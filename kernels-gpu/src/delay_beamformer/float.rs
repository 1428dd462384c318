//! Float arithmetic, identical on the host (CPU tests) and the device: a correctly rounded
//! FMA, `rint`, `sincospi`, the steering phase and coefficient, and the quantiser.
use crate::packing::saturate_symmetric;

/// `a * b + c` rounded once: `fma.rn.f32` on the device; on the host, the exact product in
/// f64, the sum rounded to odd (its error found by TwoSum), then rounded to f32, which is
/// the correctly rounded fused result (f64 has more than 2 * 24 + 2 bits).
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::intrinsics::fma_rn_f32(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let p = a as f64 * b as f64;
        let c = c as f64;
        let s = p + c;
        let bb = s - p;
        let err = (p - (s - bb)) + (c - bb);
        let bits = s.to_bits();
        let odd = if err != 0.0 && bits & 1 == 0 {
            // Move one ulp toward the exact value: away from zero when err has s's sign.
            if (err > 0.0) == (s > 0.0) {
                bits + 1
            } else {
                bits - 1
            }
        } else {
            bits
        };
        f64::from_bits(odd) as f32
    }
}

/// Round to the nearest integer, ties to even, in f32 (every |x| >= 2^23 is an integer).
#[inline(always)]
pub fn rint_f32(x: f32) -> f32 {
    const TWO_23: f32 = 8_388_608.0;
    let a = x.abs();
    if a < TWO_23 {
        // a + 2^23 lies in [2^23, 2^24), where the f32 spacing is 1: the addition rounds.
        ((a + TWO_23) - TWO_23).copysign(x)
    } else {
        x
    }
}

const PI_HI: f32 = core::f32::consts::PI;
/// pi - PI_HI.
const PI_LO: f32 = -8.742_278e-8;
/// Taylor coefficients of sin(pi f) / f - pi and (cos(pi f) - 1) / f^2 in f^2, for |f| <= 1/4
/// (truncation below 2e-9).
const SIN: [f32; 4] = [-5.167_712_7, 2.550_164, -0.599_264_5, 0.082_145_885];
const COS: [f32; 5] = [-4.934_802, 4.058_712, -1.335_262_8, 0.235_330_63, -0.025_806_89];

/// `(sin(pi x), cos(pi x))` in f32 for |x| < 2^22: x = q/2 + f with |f| <= 1/4 exactly, two
/// polynomials in f ([`sincospi_reduced`]), then the quadrant q mod 4, chosen with selects
/// (a `match` here became an indirect branch on the device). Max error about 1 ulp (CPU test:
/// `sincospi_is_accurate_to_about_one_ulp`).
#[inline(always)]
pub fn sincospi(x: f32) -> (f32, f32) {
    let q = rint_f32(x + x);
    let f = fma_f32(q, -0.5, x); // exact: |f| <= 1/4 and a multiple of x's ulp
    let (s, c) = sincospi_reduced(f);
    let q = q as i32;
    // Quadrant 1: (c, -s); 2: (-s, -c); 3: (-c, s) = the swap of odd quadrants, then the
    // negation of quadrants 2 and 3.
    let (s, c) = if q & 1 != 0 { (c, -s) } else { (s, c) };
    if q & 2 != 0 {
        (-s, -c)
    } else {
        (s, c)
    }
}

/// `(sin(pi f), cos(pi f))` in f32 for |f| <= 1/4, without range reduction.
#[inline(always)]
pub fn sincospi_reduced(f: f32) -> (f32, f32) {
    let f2 = f * f;
    let mut ps = SIN[3];
    ps = fma_f32(ps, f2, SIN[2]);
    ps = fma_f32(ps, f2, SIN[1]);
    ps = fma_f32(ps, f2, SIN[0]);
    let t = fma_f32(f2, ps, PI_LO);
    let s = fma_f32(f, PI_HI, f * t);
    let mut pc = COS[4];
    pc = fma_f32(pc, f2, COS[3]);
    pc = fma_f32(pc, f2, COS[2]);
    pc = fma_f32(pc, f2, COS[1]);
    pc = fma_f32(pc, f2, COS[0]);
    let c = fma_f32(f2, pc, 1.0);
    (s, c)
}

/// `channel * d` modulo 2 (in half turns), in [-2, 2], with one rounding: the product is
/// split exactly into `p + e` by an FMA, both parts are reduced modulo 2 exactly, and only
/// their sum rounds. So the phase keeps f32 accuracy however large `channel * d` is.
#[inline(always)]
pub fn half_turns(channel: u32, d: f32) -> f32 {
    let c = channel as f32; // exact below 2^24 (validated)
    let p = c * d;
    let e = fma_f32(c, d, -p);
    // x - 2 rint(x / 2) is exact: a multiple of x's ulp, at most 1 in magnitude.
    let reduce = |x: f32| fma_f32(-2.0, rint_f32(x * 0.5), x);
    reduce(p) + reduce(e)
}

/// `W = w exp(j pi channel d)` in f32.
#[inline(always)]
pub fn steering_coefficient(w: [f32; 2], d: f32, channel: u32) -> [f32; 2] {
    let (s, c) = sincospi(half_turns(channel, d));
    [fma_f32(w[0], c, -(w[1] * s)), fma_f32(w[0], s, w[1] * c)]
}

/// Q of the module comment: round to nearest even, saturate to [-127, 127]. Returns the
/// value and whether it was clipped. Non-finite values count as clipped: +-infinity gives
/// +-127 (reached for weights near `f32::MAX`), NaN gives 0 (not reached from checked
/// steering, see the module comment, but the rule is total).
#[inline(always)]
pub fn quantise(v: f32) -> (i8, bool) {
    // cvt.rni.s32.f32 is this rounding with the same saturation and NaN -> 0 in one instruction.
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_s32_f32(v);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = rint_f32(v) as i32; // Rust's cast saturates and maps NaN to 0
    let q = saturate_symmetric(r, 127);
    (q as i8, q != r || v.is_nan())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::*;
    use proptest::prelude::*;

    #[test]
    fn fma_emulation_rounds_once() {
        // A double-rounding trap: a*b + c lies just above a midpoint of f32 by less than an
        // f64 ulp of the sum; rounding to f64 first would land on the midpoint and round even.
        let a = 1.0 + 2f32.powi(-12);
        let b = 1.0 + 2f32.powi(-12);
        let c = -2f32.powi(-60);
        // a*b = 1 + 2^-11 + 2^-24 (exact): a midpoint of f32 near 1, plus c below it.
        assert_eq!(fma_f32(a, b, c), 1.0 + 2f32.powi(-11));
        assert_eq!(fma_f32(a, b, 0.0), 1.0 + 2f32.powi(-11)); // tie to even
        assert_eq!(fma_f32(a, b, 2f32.powi(-60)), 1.0 + 2f32.powi(-11) + 2f32.powi(-23));
        assert_eq!(fma_f32(3.0, 5.0, -15.0), 0.0);
    }

    #[test]
    fn rint_rounds_ties_to_even() {
        for (x, r) in [(0.5f32, 0.0f32), (1.5, 2.0), (2.5, 2.0), (-0.5, -0.0), (-1.5, -2.0), (-2.5, -2.0)] {
            assert_eq!(rint_f32(x), r);
            assert_eq!(rint_f32(x).to_bits(), r.to_bits(), "{x}");
        }
        assert_eq!(rint_f32(0.499_999_97), 0.0);
        assert_eq!(rint_f32(8_388_607.5), 8_388_608.0);
        assert_eq!(rint_f32(1e30), 1e30);
        assert!(rint_f32(f32::NAN).is_nan());
    }

    /// Error of sincospi against f64 over a dense sweep, in units of the f32 spacing at the
    /// true value (and absolutely, since the rotation adds the errors of both polynomials).
    #[test]
    fn sincospi_is_accurate_to_about_one_ulp() {
        let ulp = |x: f64| {
            let f = (x.abs() as f32).max(f32::MIN_POSITIVE);
            (f32::from_bits(f.to_bits() + 1) - f) as f64
        };
        let (mut worst_ulps, mut worst_abs) = (0.0f64, 0.0f64);
        let mut check = |x: f32| {
            let (s, c) = sincospi(x);
            // Reduce exactly by quarter turns first, so exact zeros stay exact:
            // x = n/2 + r with |r| <= 1/4 (exact in f64), then the angle-sum identities.
            let n = (2.0 * x as f64).round();
            let r = x as f64 - n / 2.0;
            let (sr, cr) = (core::f64::consts::PI * r).sin_cos();
            let (es, ec) = match (n as i64).rem_euclid(4) {
                0 => (sr, cr),
                1 => (cr, -sr),
                2 => (-sr, -cr),
                _ => (-cr, sr),
            };
            for (got, expected) in [(s as f64, es), (c as f64, ec)] {
                worst_ulps = worst_ulps.max((got - expected).abs() / ulp(expected));
                worst_abs = worst_abs.max((got - expected).abs());
            }
            assert!(s.abs() <= 1.0 && c.abs() <= 1.0);
        };
        let n = 1 << 20;
        for i in -n..=n {
            check(i as f32 / n as f32);
            check(i as f32 / n as f32 * 3.0 + 0.1);
        }
        for x in [0.25f32, 0.5, 0.75, 1.0, -0.25, 1e-30, 0.0, -0.0, 2f32.powi(-24), 0.249_999_98] {
            check(x);
        }
        std::println!("sincospi: worst {worst_ulps:.3} ulp, {worst_abs:e} absolute");
        assert!(worst_ulps <= 1.5 && worst_abs <= 1.5 * 2f64.powi(-24), "{worst_ulps} ulp, {worst_abs:e}");
        assert_eq!(sincospi(0.0), (0.0, 1.0));
        assert_eq!(sincospi(0.5), (1.0, -0.0));
        assert_eq!(sincospi(1.0).1, -1.0);
    }

    #[test]
    fn half_turns_keeps_the_phase_exact_for_large_products() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..20000 {
            let channel = (next() % 65536) as u32;
            let d = f32::from_bits((next() as u32 & 0x807f_ffff) | (((next() % 40) as u32 + 107) << 23));
            let exact = (channel as f64 * d as f64).rem_euclid(2.0); // exact: 40-bit product
            let got = half_turns(channel, d) as f64;
            assert!(got.abs() <= 2.0);
            let diff = (got - exact).rem_euclid(2.0);
            let diff = diff.min(2.0 - diff);
            assert!(diff <= 2f64.powi(-24), "channel {channel} d {d}: {got} vs {exact}");
            let w = [0.3f32, -0.7];
            let coefficient = steering_coefficient(w, d, channel);
            let (s, c) = (core::f64::consts::PI * exact).sin_cos();
            let (er, ei) = (w[0] as f64 * c - w[1] as f64 * s, w[0] as f64 * s + w[1] as f64 * c);
            assert!((coefficient[0] as f64 - er).abs() < 3e-7 && (coefficient[1] as f64 - ei).abs() < 3e-7);
        }
    }

    #[test]
    fn quantise_rounds_even_and_saturates_symmetrically() {
        let cases = [
            (0.5f32, 0, false),
            (1.5, 2, false),
            (-2.5, -2, false),
            (126.5, 126, false),
            (127.49, 127, false),
            (127.5, 127, true),
            (-127.5, -127, true),
            (-127.49, -127, false),
            (1e9, 127, true),
            (-1e30, -127, true),
            (f32::INFINITY, 127, true),
            (f32::NEG_INFINITY, -127, true),
            (f32::NAN, 0, true),
        ];
        for (v, q, s) in cases {
            assert_eq!(quantise(v), (q, s), "{v}");
        }
    }

    proptest! {
        #[test]
        fn prop_fma_is_correctly_rounded(a in -1e6f32..1e6, b in -1e6f32..1e6, c in -1e12f32..1e12) {
            // std's mul_add is the C library's correctly rounded fmaf.
            prop_assert_eq!(fma_f32(a, b, c).to_bits(), a.mul_add(b, c).to_bits());
        }

        #[test]
        fn prop_rint_matches_f64(x in -1e8f32..1e8) {
            prop_assert_eq!(rint_f32(x) as f64, (x as f64).round_ties_even());
        }

        #[test]
        fn prop_quantise_matches_the_rule(v in -300.0f32..300.0) {
            let r = (v as f64).round_ties_even();
            prop_assert_eq!(quantise(v), (r.clamp(-127.0, 127.0) as i8, r.abs() > 127.0));
        }

        #[test]
        fn prop_limbs_of_fixed_point_coefficients(w in -1.0f32..1.0, scale in 1e-3f32..1e3, x in -128i32..128) {
            // A coefficient at most its scale becomes at most 2^22 (+1 ulp) and three int8 limbs
            // whose product sums with any input are exact.
            let unit = scale / (1u32 << FIXED_BITS) as f32;
            let f = fixed_point(w * scale, 1.0 / unit);
            prop_assert!(f.abs() <= (1 << FIXED_BITS) + 2);
            let l = limbs(f);
            prop_assert!(l[0].unsigned_abs() <= 65);
            let acc = l.map(|d| d as i32 * x);
            prop_assert_eq!(((acc[0] as i64) << 16) + ((acc[1] as i64) << 8) + acc[2] as i64, f as i64 * x as i64);
            let y = combine_limbs(acc, unit) as f64;
            let exact = (w * scale) as f64 * x as f64;
            prop_assert!((y - exact).abs() <= scale as f64 * 128.0 * 2f64.powi(-22) + exact.abs() * 2f64.powi(-23));
        }
    }
}
