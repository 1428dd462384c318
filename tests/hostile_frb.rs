//! Hostile inputs to the FRB beamformer's CPU-side API, no GPU needed. For arbitrary field
//! values of every FRB configuration type (`FrbConfig`, `ResampleConfig`, `FactorizedConfig`,
//! and `QuantizeConfig`): 0, 1, the limits, products past 2^32
//! and 2^64, NaN and infinities in float fields, `validate()` (or the constructor) either
//! errors or every size helper is exact (checked against u128 arithmetic), and nothing
//! panics. The public CPU helpers (the short-FFT emulations and matrices, the references) on
//! short, inconsistent or non-finite input return typed errors. The streaming engine's chain
//! check accepts exactly the stages whose shapes agree.
use proptest::prelude::*;
use radio_kernels::frb_beamformer::factorized::{factorized_reference, FactorizedConfig, MAX_GRID_AXIS};
use radio_kernels::frb_beamformer::quantize::{quantize_reference, Format, QuantizeConfig};
use radio_kernels::frb_beamformer::resample::{resample_reference, u_closed_form, ResampleConfig};
use radio_kernels::frb_beamformer::streaming::{check_chain, ResamplingShape};
use radio_kernels::frb_beamformer::{
    check_fft_buffers, compress_sparse, decompress_universal, direct_image_f64, emulate_direct_dft,
    emulate_eo_dft, emulate_warp_fft, ffts_per_group, frb_intensity_reference,
    frb_intensity_reference_sample, frb_output_samples_per_block, gamma1, gamma2, gamma3, gamma3_matrix,
    gamma_image, gamma_image_f64, three_factor_fft, FftMethod, FrbConfig, C64, FRB_CASES, FRB_MAX_ROWS,
    FRB_MAX_TIMES, FRB_POLS,
};
use radio_kernels::{f16, Ci4, Complex, Error};

/// A complex f16 from its packed word (real part in bits 0..16).
fn c16(word: u32) -> Complex<f16> {
    Complex::new(f16::from_bits(word as u16), f16::from_bits((word >> 16) as u16))
}

/// u32 values a hostile caller would try: 0, 1, the limits and their neighbours, values
/// whose products pass 2^32 and 2^64, and anything.
fn field() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            0u32,
            1,
            2,
            8,
            12,
            16,
            20,
            24,
            48,
            64,
            256,
            512,
            65535,
            65536,
            262_176,
            1 << 24,
            1 << 31,
            (1 << 31) + 48,
            u32::MAX - 1,
            u32::MAX
        ]),
        0u32..100_000,
        any::<u32>(),
    ]
}

fn saturate(x: u128) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

// --- FrbConfig ----------------------------------------------------------------------------

/// Arbitrary fields, or a valid configuration (a case of Table 2 of Smith's FRB note, T a multiple
/// of T_outer and T_ds, up to the 2^31 limit), so that both branches are exercised.
fn frb_config() -> impl Strategy<Value = FrbConfig> {
    let hostile = (field(), field(), field(), field(), field(), field())
        .prop_map(|(dishes, m, n, freqs, times, t_ds)| FrbConfig { dishes, m, n, freqs, times, t_ds });
    let valid = (0..FRB_CASES.len(), 1u32..=65535, prop_oneof![1u32..=4, 1u32..=200], any::<u32>()).prop_map(
        |(k, freqs, t_ds, blocks)| {
            let case = FRB_CASES[k];
            let step = lcm(case.t_outer, t_ds);
            let most = FRB_MAX_TIMES.min((FRB_MAX_ROWS / freqs as u64) as u32);
            let times = (1 + blocks % (most / step)) * step;
            FrbConfig { dishes: case.dishes, m: case.m, n: case.n, freqs, times, t_ds }
        },
    );
    let case_fields = (0..FRB_CASES.len(), field(), field(), field()).prop_map(|(k, freqs, times, t_ds)| {
        let case = FRB_CASES[k];
        FrbConfig { dishes: case.dishes, m: case.m, n: case.n, freqs, times, t_ds }
    });
    prop_oneof![hostile, valid, case_fields]
}

fn lcm(a: u32, b: u32) -> u32 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

fn frb_exact_output_index(c: &FrbConfig, f: u32, tbar: u32, p: u32, q: u32) -> u128 {
    let out_times = (c.times / c.t_ds) as u128;
    ((f as u128 * out_times + tbar as u128) * 2 * c.m as u128 + p as u128) * 2 * c.n as u128 + q as u128
}

// --- ResampleConfig, FactorizedConfig, QuantizeConfig ---------------------------------------

fn grid_m_n() -> impl Strategy<Value = (u32, u32)> {
    prop_oneof![
        prop::sample::select(FRB_CASES.iter().map(|c| (c.m, c.n)).collect::<Vec<_>>()),
        (field(), field()),
    ]
}

fn resample_config() -> impl Strategy<Value = ResampleConfig> {
    let hostile = (field(), field(), grid_m_n(), field())
        .prop_map(|(channels, times, (m, n), beams)| ResampleConfig { channels, times, m, n, beams });
    let valid = (1u32..=65535, 1u32..=1 << 16, grid_m_n(), 1u32..=1 << 16)
        .prop_map(|(channels, times, (m, n), beams)| ResampleConfig { channels, times, m, n, beams });
    prop_oneof![hostile, valid]
}

fn factorized_config() -> impl Strategy<Value = FactorizedConfig> {
    let hostile =
        (field(), field(), grid_m_n(), field(), field()).prop_map(|(channels, times, (m, n), g, g_prime)| {
            FactorizedConfig { channels, times, m, n, g, g_prime }
        });
    let valid = (1u32..=65535, 1u32..=65536, grid_m_n(), 1..=MAX_GRID_AXIS, 1..=MAX_GRID_AXIS).prop_map(
        |(channels, times, (m, n), g, g_prime)| FactorizedConfig { channels, times, m, n, g, g_prime },
    );
    prop_oneof![hostile, valid]
}

fn quantize_config() -> impl Strategy<Value = QuantizeConfig> {
    let format = prop_oneof![Just(Format::U8), Just(Format::U4)];
    let hostile = (field(), field(), field(), format.clone())
        .prop_map(|(channels, times, beams, format)| QuantizeConfig { channels, times, beams, format });
    let valid = (1u32..=65535, 1u32..=65535 * 128, 1u32..=1 << 20, format)
        .prop_map(|(channels, times, beams, format)| QuantizeConfig { channels, times, beams, format });
    prop_oneof![hostile, valid]
}

fn only_config_errors(result: &Result<(), Error>) -> Result<(), TestCaseError> {
    match result {
        Ok(()) => Ok(()),
        Err(Error::InvalidConfig(message)) => {
            prop_assert!(!message.is_empty());
            Ok(())
        }
        Err(other) => Err(TestCaseError::fail(format!("unexpected error {other:?}"))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    /// `FrbConfig`: `validate()` errors, or every size and index helper is exact; no helper
    /// panics either way.
    #[test]
    fn frb_validate_errors_or_every_size_is_exact(
        c in frb_config(),
        at in (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
    ) {
        let _ = (c.out_times(), c.e_len(), c.weights_len(), c.output_len());
        let _ = (c.e_index(at.0, at.1, at.2, at.3), c.weight_index(at.0, at.1, at.2, at.3));
        let _ = c.output_index(at.0, at.1, at.2, at.3);
        let _ = c.check_grid(&[(at.0, at.1)]);
        let _ = frb_output_samples_per_block(&c, at.0);
        let _ = frb_intensity_reference(&c, &[], &[], &[]);
        let _ = frb_intensity_reference_sample(&c, &[], &[], &[], at.0, at.1);
        let result = c.validate();
        only_config_errors(&result)?;
        if result.is_ok() {
            prop_assert!(c.times <= FRB_MAX_TIMES && c.t_ds >= 1 && c.freqs >= 1);
            prop_assert!(c.times as u64 * c.freqs as u64 <= FRB_MAX_ROWS);
            prop_assert_eq!(c.out_times(), c.times / c.t_ds);
            let e = c.times as u128 * c.freqs as u128 * FRB_POLS as u128 * c.dishes as u128;
            prop_assert_eq!(c.e_len(), saturate(e));
            prop_assert_eq!(c.e_len() as u128, e);
            prop_assert_eq!(c.weights_len() as u128, c.freqs as u128 * 2 * c.m as u128 * c.n as u128);
            let i = c.freqs as u128 * c.out_times() as u128 * 4 * c.m as u128 * c.n as u128;
            prop_assert_eq!(c.output_len() as u128, i);
            // In-range indices are exact and inside; the last ones end the arrays.
            let (f, tbar) = (at.0 % c.freqs, at.1 % c.out_times());
            let (p, q) = (at.2 % (2 * c.m), at.3 % (2 * c.n));
            prop_assert_eq!(c.output_index(f, tbar, p, q) as u128, frb_exact_output_index(&c, f, tbar, p, q));
            prop_assert_eq!(
                c.output_index(c.freqs - 1, c.out_times() - 1, 2 * c.m - 1, 2 * c.n - 1) + 1,
                c.output_len()
            );
            prop_assert_eq!(c.e_index(c.times - 1, c.freqs - 1, 1, c.dishes - 1) + 1, c.e_len());
            prop_assert_eq!(c.weight_index(c.freqs - 1, 1, c.m - 1, c.n - 1) + 1, c.weights_len());
            // The block split is in range and within the grid's limit.
            for slots in [1, 528, at.2.max(1)] {
                let k = frb_output_samples_per_block(&c, slots).unwrap();
                prop_assert!(k >= 1 && k <= c.out_times());
                let blocks = c.freqs as u64 * c.out_times().div_ceil(k) as u64;
                prop_assert!(blocks < 1 << 31);
            }
        } else {
            prop_assert!(frb_output_samples_per_block(&c, 528).is_err());
        }
    }

    /// `ResampleConfig`: `validate()` errors, or every size helper is exact.
    #[test]
    fn resample_validate_errors_or_every_size_is_exact(c in resample_config()) {
        let _ = (c.k(), c.intensity_len(), c.weights_len(), c.u_len(), c.positions_len(), c.output_len(), c.flops());
        let _ = resample_reference(&c, &[], &[], &[]);
        let result = c.validate();
        only_config_errors(&result)?;
        if result.is_ok() {
            let (f, t, b) = (c.channels as u128, c.times as u128, c.beams as u128);
            let k = 4 * c.m as u128 * c.n as u128;
            prop_assert_eq!(c.k() as u128, k);
            prop_assert_eq!(c.intensity_len() as u128, f * t * k);
            prop_assert_eq!(c.weights_len() as u128, f * b * k);
            prop_assert_eq!(c.u_len() as u128, f * b * (2 * c.m as u128 + 2 * c.n as u128));
            prop_assert_eq!(c.positions_len() as u128, f * b);
            prop_assert_eq!(c.output_len() as u128, f * t * b);
            // The arrays the GEMMs index with 32-bit rows and TMA coordinates stay inside.
            prop_assert!(t * k <= u32::MAX as u128 && b * k <= u32::MAX as u128);
        }
    }

    /// `FactorizedConfig`: `validate()` errors, or every size helper is exact.
    #[test]
    fn factorized_validate_errors_or_every_size_is_exact(c in factorized_config()) {
        let _ = (c.beams(), c.intensity_len(), c.theta_len(), c.theta_prime_len(), c.output_len(), c.flops());
        let _ = c.expand(&[], &[]);
        let _ = factorized_reference(&c, &[], &[], &[]);
        let result = c.validate();
        only_config_errors(&result)?;
        if result.is_ok() {
            let (f, t) = (c.channels as u128, c.times as u128);
            prop_assert_eq!(c.beams() as u128, c.g as u128 * c.g_prime as u128);
            prop_assert_eq!(c.intensity_len() as u128, f * t * 4 * c.m as u128 * c.n as u128);
            prop_assert_eq!(c.theta_len() as u128, f * c.g as u128);
            prop_assert_eq!(c.theta_prime_len() as u128, f * c.g_prime as u128);
            prop_assert_eq!(c.output_len() as u128, f * t * c.g as u128 * c.g_prime as u128);
            // The kernel's sample index `f T + t` is 32-bit.
            prop_assert!(f * t <= u32::MAX as u128);
        }
    }

    /// `QuantizeConfig`: `validate()` errors, or every size helper is exact.
    #[test]
    fn quantize_validate_errors_or_every_size_is_exact(c in quantize_config()) {
        let _ = (c.row_bytes(), c.input_len(), c.params_len(), c.output_len(), c.bytes_moved());
        let _ = quantize_reference(&c, &[], &[], &[]);
        let result = c.validate();
        only_config_errors(&result)?;
        if result.is_ok() {
            let (f, t, b) = (c.channels as u128, c.times as u128, c.beams as u128);
            let row = (t * c.format.bits() as u128).div_ceil(8).div_ceil(16) * 16;
            prop_assert_eq!(c.row_bytes() as u128, row);
            prop_assert_eq!(c.input_len() as u128, f * t * b);
            prop_assert_eq!(c.params_len() as u128, f * b);
            prop_assert_eq!(c.output_len() as u128, f * b * row);
            prop_assert_eq!(c.bytes_moved() as u128, 2 * f * t * b + f * b * row + 8 * f * b);
        }
    }

    /// The short-FFT helpers with arbitrary sizes, lengths and selectors: typed errors, no
    /// panic; the Gamma entries for any indices are unit phases or zero.
    #[test]
    fn short_fft_helpers_never_panic(
        n in prop_oneof![field(), prop::sample::select(vec![8u32, 12, 16, 20, 24, 28, 32])],
        len in prop_oneof![0usize..600, Just(512usize), Just(400usize), Just(2048usize)],
        f in field(),
        (c, d, v) in (field(), field(), field()),
        batch in prop_oneof![any::<usize>(), 0usize..100, Just(1usize << 26), Just((1usize << 26) + 1)],
    ) {
        for g in [gamma1(c, v), gamma2(n, d, v), gamma3(n, d, v)] {
            let r = g.0.hypot(g.1);
            prop_assert!(g.0.is_finite() && g.1.is_finite() && (r == 0.0 || (r - 1.0).abs() < 1e-9));
        }
        let values = vec![0.5f64; len];
        let complex: Vec<C64> = vec![(0.25, -0.5); len];
        let _ = gamma3_matrix(n);
        let _ = gamma_image(n);
        let _ = gamma_image_f64(n);
        let _ = direct_image_f64(n);
        let _ = ffts_per_group(n, FftMethod::ThreeFactor);
        let _ = ffts_per_group(n, FftMethod::Direct);
        let _ = compress_sparse(&values, f);
        let _ = decompress_universal(&values, f);
        let _ = emulate_warp_fft(n, &values, &complex, true);
        let _ = emulate_direct_dft(n, &values, &complex);
        let _ = emulate_eo_dft(&values, &[[(1.0, 0.0); 24]; 8]);
        if len <= 64 {
            let _ = three_factor_fft(&complex);
        }
        let _ = check_fft_buffers(n, batch, len, 2 * len);
        if len == 256 && f < 4 {
            prop_assert!(compress_sparse(&values, f).is_ok());
        }
    }

    /// The closed-form U function at arbitrary sizes and positions (NaN and infinities
    /// included) returns a value and never panics.
    #[test]
    fn u_closed_form_never_panics((m, n) in grid_m_n(), theta in any::<f64>()) {
        let _ = u_closed_form(n, m, theta);
    }
}

/// Each FRB limit: the last value inside is accepted, the first outside rejected; the two
/// launches that passed 2^32 bytes of E and 2^32 values of I are valid (and their sizes
/// exact), as are the largest T and the largest channel of I.
#[test]
fn frb_limits_accept_the_last_value_inside_and_reject_the_first_outside() {
    let chord = |freqs, times, t_ds| FrbConfig { dishes: 512, m: 24, n: 24, freqs, times, t_ds };
    let big_e = chord(16, 262_176, 48);
    assert!(big_e.validate().is_ok());
    assert_eq!(big_e.e_len() as u128, 262_176u128 * 16 * 2 * 512);
    assert!(big_e.e_len() as u128 > 1 << 32);
    let big_i = chord(16, 120_000, 1);
    assert!(big_i.validate().is_ok());
    assert_eq!(big_i.output_len() as u128, 16u128 * 120_000 * 2304);
    assert!(big_i.output_len() as u128 > 1 << 32);
    let top = FRB_MAX_TIMES / 3072 * 3072;
    // One channel of I below 2^32 values: out_times 4MN <= 2^32 - 1.
    let per_channel = (u32::MAX / 2304) * 48;
    for (inside, outside) in [
        (chord(65535, 48, 1), chord(65536, 48, 1)),
        (chord(1, 48, 1), chord(0, 48, 1)),
        (chord(1, top, 3072), chord(1, top + 3072, 3072)),
        (chord(1, per_channel, 48), chord(1, per_channel + 48, 48)),
        (chord(1, 48, 48), chord(1, 48, 0)),
        (chord(1, 48, 1), chord(1, 0, 1)),
        (chord(2, top, 3072), chord(3, top, 3072)),
        (chord(65535, 65520, 1), chord(65535, 65568, 1)),
    ] {
        assert!(inside.validate().is_ok(), "{inside:?}");
        assert!(matches!(outside.validate(), Err(Error::InvalidConfig(_))), "{outside:?}");
    }
    // T_ds = 0: out_times is 0 and nothing divides by it.
    let zero = chord(1, 48, 0);
    assert_eq!((zero.out_times(), zero.output_len()), (0, 0));
    assert!(frb_output_samples_per_block(&zero, 528).is_err());
}

/// Non-finite FRB weights and beam positions are `NonFinite` naming the argument and the
/// first bad index, in every CPU reference.
#[test]
fn non_finite_floats_are_rejected_with_their_index() {
    let config = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 1, times: 48, t_ds: 1 };
    let grid: Vec<(u32, u32)> = (0..64).map(|d| (d / 12, d % 12)).collect();
    let e = vec![Ci4(0x11); config.e_len()];
    for bad in [0x7c00u32, 0xfc00, 0x7e00, 0x7c00 << 16, 0x7fff << 16] {
        let mut weights = vec![c16(0x3c00); config.weights_len()];
        weights[37] = c16(bad);
        weights[90] = c16(bad);
        let r = frb_intensity_reference(&config, &e, &grid, &weights);
        assert!(matches!(r, Err(Error::NonFinite { what: "FRB weights", index: 37 })), "{bad:#x}: {r:?}");
        let r = frb_intensity_reference_sample(&config, &e, &grid, &weights, 0, 0);
        assert!(matches!(r, Err(Error::NonFinite { what: "FRB weights", index: 37 })), "{bad:#x}");
    }
    // The largest finite halves pass.
    let weights = vec![c16(0x7bff_fbff); config.weights_len()];
    let i = frb_intensity_reference(&config, &e, &grid, &weights).unwrap();
    assert!(i.iter().all(|v| v.is_finite()));
    let rs = ResampleConfig { channels: 2, times: 1, m: 8, n: 12, beams: 3 };
    let intensity = vec![f16::ZERO; rs.intensity_len()];
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut theta = vec![0.5f32; rs.positions_len()];
        theta[4] = bad;
        let ok = vec![1.5f32; rs.positions_len()];
        let r = resample_reference(&rs, &intensity, &theta, &ok);
        assert!(matches!(r, Err(Error::NonFinite { what: "theta", index: 4 })), "{r:?}");
        let r = resample_reference(&rs, &intensity, &ok, &theta);
        assert!(matches!(r, Err(Error::NonFinite { what: "theta'", index: 4 })), "{r:?}");
    }
    let mut far = vec![0.5f32; rs.positions_len()];
    far[1] = 4096.5;
    assert!(matches!(resample_reference(&rs, &intensity, &far, &far), Err(Error::InvalidConfig(_))));
    let fc = FactorizedConfig { channels: 1, times: 1, m: 8, n: 8, g: 2, g_prime: 3 };
    let fi = vec![f16::ZERO; fc.intensity_len()];
    let r = factorized_reference(&fc, &fi, &[0.0, f32::INFINITY], &[0.0; 3]);
    assert!(matches!(r, Err(Error::NonFinite { what: "theta", index: 1 })), "{r:?}");
}

/// The short-FFT emulations and matrices on short or wrong input: typed errors.
#[test]
fn short_fft_helpers_reject_short_input() {
    let image = gamma_image_f64(16).unwrap();
    let x: Vec<C64> = vec![(1.0, 0.0); 2 * 16];
    assert!(emulate_warp_fft(16, &image, &x, false).is_ok());
    for short in [0, 1, image.len() - 1] {
        let r = emulate_warp_fft(16, &image[..short], &x, false);
        assert!(matches!(r, Err(Error::ShapeMismatch { .. })), "{short}");
    }
    assert!(matches!(emulate_warp_fft(16, &image, &x[1..], false), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(emulate_warp_fft(10, &image, &x, false), Err(Error::InvalidConfig(_))));
    let direct = direct_image_f64(20).unwrap();
    let x20: Vec<C64> = vec![(1.0, 0.0); 8 * 20];
    assert!(emulate_direct_dft(20, &direct, &x20).is_ok());
    assert!(matches!(emulate_direct_dft(20, &direct[1..], &x20), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(emulate_direct_dft(16, &direct, &x20), Err(Error::InvalidConfig(_))));
    assert!(matches!(emulate_eo_dft(&[0.0; 10], &[[(0.0, 0.0); 24]; 8]), Err(Error::ShapeMismatch { .. })));
    let dense = gamma3_matrix(16).unwrap();
    assert!(matches!(compress_sparse(&dense[1..], 2), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(compress_sparse(&dense, 4), Err(Error::InvalidConfig(_))));
    let asp = compress_sparse(&dense, 2).unwrap();
    assert!(matches!(decompress_universal(&asp[..100], 2), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(decompress_universal(&asp, u32::MAX), Err(Error::InvalidConfig(_))));
    assert!(matches!(gamma3_matrix(0), Err(Error::InvalidConfig(_))));
    assert!(matches!(ffts_per_group(u32::MAX, FftMethod::ThreeFactor), Err(Error::InvalidConfig(_))));
    assert!(matches!(ffts_per_group(16, FftMethod::Direct), Err(Error::InvalidConfig(_))));
    assert_eq!(ffts_per_group(20, FftMethod::Direct).unwrap(), 8);
}

/// Short or inconsistent arrays in the CPU references: typed errors.
#[test]
fn references_reject_short_arrays() {
    let config = FrbConfig { dishes: 64, m: 8, n: 8, freqs: 2, times: 64, t_ds: 4 };
    let grid: Vec<(u32, u32)> = (0..64).map(|d| (d / 8, d % 8)).collect();
    let e = vec![Ci4::default(); config.e_len()];
    let w = vec![c16(0x3c00); config.weights_len()];
    assert!(frb_intensity_reference_sample(&config, &e, &grid, &w, 1, 15).is_ok());
    assert!(matches!(
        frb_intensity_reference_sample(&config, &e, &grid, &w, 2, 0),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        frb_intensity_reference_sample(&config, &e, &grid, &w, 0, 16),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(frb_intensity_reference(&config, &e[1..], &grid, &w), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(frb_intensity_reference(&config, &e, &grid[1..], &w), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(frb_intensity_reference(&config, &e, &grid, &w[1..]), Err(Error::ShapeMismatch { .. })));
    let q = QuantizeConfig { channels: 1, times: 3, beams: 2, format: Format::U8 };
    assert!(matches!(
        quantize_reference(&q, &[f16::ZERO; 6], &[1.0; 2], &[0.0; 1]),
        Err(Error::ShapeMismatch { .. })
    ));
    let fc = FactorizedConfig { channels: 1, times: 1, m: 8, n: 8, g: 2, g_prime: 3 };
    assert!(matches!(fc.expand(&[0.0; 2], &[0.0; 2]), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(FactorizedConfig { g: 0, ..fc }.expand(&[], &[0.0; 3]), Err(Error::InvalidConfig(_))));
}

/// The three stages of a streaming engine, chained from `c` with `beams` beams, and one field
/// (chosen by `which`; 7 and up: none) replaced by `value`.
fn chained(
    c: &FrbConfig,
    beams: u32,
    format: Format,
    which: u8,
    value: u32,
) -> (ResamplingShape, QuantizeConfig) {
    let mut r = ResamplingShape { channels: c.freqs, times: c.out_times(), m: c.m, n: c.n, beams };
    let mut q = QuantizeConfig { channels: c.freqs, times: c.out_times(), beams, format };
    match which {
        0 => r.channels = value,
        1 => r.times = value,
        2 => r.m = value,
        3 => r.n = value,
        4 => q.channels = value,
        5 => q.times = value,
        6 => q.beams = value,
        _ => {}
    }
    (r, q)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    /// `check_chain` on stages derived from any first-kernel configuration with one field
    /// possibly changed to anything: `Ok` exactly when both configurations are valid and
    /// every shared size agrees; otherwise `InvalidConfig` or `ShapeMismatch`; never a panic.
    #[test]
    fn chain_check_accepts_exactly_the_stages_that_agree(
        c in frb_config(),
        beams in prop_oneof![1u32..=6000, field()],
        u4 in any::<bool>(),
        which in 0u8..10,
        value in field(),
    ) {
        let format = if u4 { Format::U4 } else { Format::U8 };
        let (r, q) = chained(&c, beams, format, which, value);
        let agree = r.channels == c.freqs
            && r.times == c.out_times()
            && (r.m, r.n) == (c.m, c.n)
            && q.channels == c.freqs
            && q.times == c.out_times()
            && q.beams == r.beams;
        let result = check_chain(&c, r, &q);
        match &result {
            Ok(()) => prop_assert!(c.validate().is_ok() && q.validate().is_ok() && agree),
            Err(Error::InvalidConfig(_)) => prop_assert!(c.validate().is_err() || q.validate().is_err()),
            Err(Error::ShapeMismatch { expected, actual, .. }) => {
                prop_assert!(!agree && expected != actual, "{result:?}")
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }
}

/// Each mismatch names its field; shapes convert from both resampling configurations.
#[test]
fn chain_mismatches_name_the_field() {
    let c = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 4, times: 96, t_ds: 3 };
    for (which, field) in [
        (0, "resampling channels"),
        (1, "resampling slow samples"),
        (2, "resampling grid M"),
        (3, "resampling grid N"),
        (4, "quantiser channels"),
        (5, "quantiser slow samples"),
        (6, "quantiser beams"),
    ] {
        let (r, q) = chained(&c, 100, Format::U8, which, 7);
        assert!(
            matches!(check_chain(&c, r, &q), Err(Error::ShapeMismatch { what, expected, actual: 7 })
                if what.starts_with(field) && expected != 7),
            "{field}"
        );
    }
    let (r, q) = chained(&c, 100, Format::U4, 9, 0);
    assert!(check_chain(&c, r, &q).is_ok());
    let rc = ResampleConfig { channels: 4, times: 32, m: 8, n: 12, beams: 100 };
    assert_eq!(ResamplingShape::from(&rc), r);
    let fc = FactorizedConfig { channels: 4, times: 32, m: 8, n: 12, g: 10, g_prime: 10 };
    assert_eq!(ResamplingShape::from(&fc), r);
    assert!(matches!(check_chain(&FrbConfig { t_ds: 5, ..c }, r, &q), Err(Error::InvalidConfig(_))));
    assert!(matches!(check_chain(&c, r, &QuantizeConfig { channels: 0, ..q }), Err(Error::InvalidConfig(_))));
}
