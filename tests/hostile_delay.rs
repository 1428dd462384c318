//! Hostile inputs for the delay beamformer's CPU side (no GPU): arbitrary configuration
//! fields (0, 1, the limits and past them, products past 2^32 and 2^64), where `validate()`
//! either errors or every size helper is exact (against u128 arithmetic) and the others
//! saturate without panicking; the last configuration inside each limit and the first outside;
//! steering with NaN, infinities and huge values, which either errors or returns finite
//! coefficients that the launcher accepts; the CPU reference on extreme weights and delays
//! (finite values, consistent saturation counts) and on short or inconsistent arguments; the
//! time model of the streaming engine (chunks are the long launch cut along time, with one
//! steering for every chunk length; the dither states belong to a plan, not to absolute
//! time), and that the engine can move to a worker thread.
use proptest::prelude::*;
use radio_kernels::delay_beamformer::{
    beamform_reference, check_steering, coefficient_reference, reference_states, steering, Beam,
    DelayBeamformerConfig, DelayOutput, DelayStream, Plan, MAX_GROUPS, THREADS,
};
use radio_kernels::{Complex, Error};

/// A u32 field: small values, the limits and around them, and anything.
fn field() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(2),
        Just(3),
        Just(8),
        Just(65535),
        Just(65536),
        Just((1 << 24) - 1),
        Just(1 << 24),
        Just(u32::MAX - 7),
        Just(u32::MAX),
        0u32..70000,
        any::<u32>(),
    ]
}

/// Times: multiples of 8 (small, at the u32 limit, anywhere) and anything.
fn times() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => (1u32..600).prop_map(|t| 8 * t),
        1 => Just(u32::MAX - 7),
        1 => Just(65536),
        1 => Just(65544),
        1 => (0u32..=u32::MAX / 8).prop_map(|t| 8 * t),
        1 => field(),
    ]
}

/// Beams: (count, polarisation pattern modulus, dither every k-th, an out-of-range pol).
fn beams() -> impl Strategy<Value = Vec<Beam>> {
    let count = prop_oneof![Just(0usize), Just(1), 2usize..20, Just(65535), Just(65536)];
    (count, 1u32..4, 0usize..4, proptest::option::weighted(0.2, any::<u32>())).prop_map(
        |(n, modulus, every, bad)| {
            let mut beams: Vec<Beam> = (0..n)
                .map(|b| Beam { pol: b as u32 % modulus, dither: every > 0 && b % every == 0 })
                .collect();
            if let (Some(pol), Some(last)) = (bad, beams.last_mut()) {
                last.pol = pol;
            }
            beams
        },
    )
}

fn config() -> impl Strategy<Value = DelayBeamformerConfig> {
    (field(), prop_oneof![Just(1u32), Just(2), field()], field(), field(), times(), beams()).prop_map(
        |(antennas, pols, channels, first_channel, times, beams)| DelayBeamformerConfig {
            antennas,
            pols,
            channels,
            first_channel,
            times,
            beams,
        },
    )
}

/// `value` as the helpers report it: exact when it fits, else saturated.
fn saturated(value: Option<u128>) -> usize {
    value.and_then(|v| usize::try_from(v).ok()).unwrap_or(usize::MAX)
}

/// Every size helper against u128 arithmetic: exact when `validate()` accepts, saturated
/// (and never a panic) otherwise; plans of accepted configurations are consistent.
fn check_sizes(c: &DelayBeamformerConfig) -> Result<(), TestCaseError> {
    let (a, p, ch, t, b) =
        (c.antennas as u128, c.pols as u128, c.channels as u128, c.times as u128, c.beams.len() as u128);
    let input = a.checked_mul(ch).and_then(|x| x.checked_mul(t)).and_then(|x| x.checked_mul(p));
    let output = b.checked_mul(ch).and_then(|x| x.checked_mul(t));
    let steering_len = a.checked_mul(b);
    prop_assert_eq!(c.input_len(), saturated(input));
    prop_assert_eq!(c.output_len(), saturated(output));
    prop_assert_eq!(c.steering_len(), saturated(steering_len));
    let bytes = input.zip(output).and_then(|(i, o)| i.checked_add(o)).and_then(|s| s.checked_mul(2));
    prop_assert_eq!(c.bytes(), bytes.and_then(|v| u64::try_from(v).ok()).unwrap_or(u64::MAX));
    // The last index of each array, from the u128 formula.
    let last = |v: u32| v.saturating_sub(1) as u128;
    let input_last = (((last(c.antennas) * ch + last(c.channels)) * t + last(c.times)) * p) + last(c.pols);
    let output_last =
        (last(c.beams.len().min(u32::MAX as usize) as u32) * ch + last(c.channels)) * t + last(c.times);
    let input_index = c.input_index(
        c.antennas.saturating_sub(1),
        c.channels.saturating_sub(1),
        c.times.saturating_sub(1),
        c.pols.saturating_sub(1),
    );
    prop_assert_eq!(input_index, saturated(Some(input_last)));
    let beam = (c.beams.len().min(u32::MAX as usize) as u32).saturating_sub(1);
    let output_index = c.output_index(beam, c.channels.saturating_sub(1), c.times.saturating_sub(1));
    prop_assert_eq!(output_index, saturated(Some(output_last)));
    let _ = c.dithered();

    match c.validate() {
        Err(e) => {
            prop_assert!(matches!(e, Error::InvalidConfig(_)), "{e}");
            prop_assert!(matches!(Plan::new(c, 100), Err(Error::InvalidConfig(_))));
        }
        Ok(()) => {
            // Exact and below the kernel's limits.
            prop_assert!(input.is_some_and(|n| n == c.input_len() as u128 && 2 * n < 1 << 50));
            prop_assert!(output.is_some_and(|n| n == c.output_len() as u128 && 2 * n < 1 << 49));
            prop_assert_eq!(input_index as u128 + 1, input.unwrap());
            prop_assert_eq!(output_index as u128 + 1, output.unwrap());
            prop_assert!(c.first_channel as u64 + c.channels as u64 <= 1 << 24);
            prop_assert!(c.channels as u64 * c.times as u64 <= u32::MAX as u64);
            // Plans (the tile search is linear in the tiles: keep it short here).
            if c.times <= 1 << 20 {
                check_plan(c)?;
            }
        }
    }
    Ok(())
}

fn check_plan(c: &DelayBeamformerConfig) -> Result<(), TestCaseError> {
    for blocks in [1, 396, u32::MAX] {
        match Plan::new(c, blocks) {
            Ok(plan) => {
                let v = plan.variant();
                prop_assert_eq!(v.pols(), c.pols);
                prop_assert_eq!(plan.tiles(), c.times.div_ceil(v.time_tile()));
                prop_assert!(plan.groups() <= MAX_GROUPS);
                prop_assert!(plan.groups() as u64 * plan.tiles_per_group() as u64 >= plan.tiles() as u64);
                prop_assert!(((plan.groups() - 1) * plan.tiles_per_group()) < plan.tiles());
                let states =
                    c.channels as u128 * plan.groups() as u128 * plan.batches() as u128 * THREADS as u128;
                prop_assert_eq!(plan.state_count() as u128, states);
                prop_assert!(!c.dithered() || states <= u32::MAX as u128);
                prop_assert_eq!(plan.slot_table().len() as u64, plan.batches() as u64 * v.slots() as u64);
                prop_assert!(plan.check(c).is_ok());
            }
            // Only too many dither states can stop a plan of a valid configuration.
            Err(e) => prop_assert!(c.dithered() && matches!(e, Error::InvalidConfig(_)), "{e}"),
        }
    }
    prop_assert!(matches!(Plan::new(c, 0), Err(Error::InvalidConfig(_))));
    prop_assert!(matches!(Plan::with_tiles_per_group(c, 0), Err(Error::InvalidConfig(_))));
    let tiles = c.times.div_ceil(256);
    prop_assert!(matches!(Plan::with_tiles_per_group(c, tiles + 1), Err(Error::InvalidConfig(_))));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sizes_are_exact_when_valid_and_never_panic(c in config()) {
        check_sizes(&c)?;
    }
}

/// Configurations inside every limit, at and near the maxima: `validate()` must accept them.
fn valid_config() -> impl Strategy<Value = DelayBeamformerConfig> {
    let limit = |max: u32| prop_oneof![Just(1u32), Just(max), Just(max - 1), 1..=max];
    // Beams: the maxima now and then (every plan walks all of them), mostly a few.
    let beams = prop_oneof![1 => Just(65535u32), 1 => Just(65534), 5 => 1u32..=64, 1 => 1u32..=65535];
    (limit(65535), 1u32..=2, limit(65535), beams, any::<u32>(), any::<u32>(), any::<u64>()).prop_map(
        |(antennas, pols, channels, beams, first, times, pattern)| {
            let first_channel = first % ((1 << 24) - channels + 1);
            // A positive multiple of 8 with channels * times <= u32::MAX, often the largest.
            let most = u32::MAX / channels / 8;
            let times = 8 * if times % 3 == 0 { most } else { 1 + times % most };
            let beams = (0..beams)
                .map(|b| Beam {
                    pol: (pattern >> (b % 64)) as u32 % pols,
                    dither: (pattern >> (b % 61)) & 4 != 0,
                })
                .collect();
            DelayBeamformerConfig { antennas, pols, channels, first_channel, times, beams }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn valid_configurations_at_the_limits_have_exact_sizes(c in valid_config()) {
        prop_assert!(c.validate().is_ok(), "{:?}", (c.antennas, c.pols, c.channels, c.first_channel, c.times, c.beams.len()));
        check_sizes(&c)?;
    }
}

fn small(
    antennas: u32,
    pols: u32,
    channels: u32,
    first_channel: u32,
    times: u32,
    beams: usize,
) -> DelayBeamformerConfig {
    DelayBeamformerConfig {
        antennas,
        pols,
        channels,
        first_channel,
        times,
        beams: (0..beams).map(|b| Beam { pol: b as u32 % pols, dither: false }).collect(),
    }
}

#[test]
fn validate_accepts_the_last_configuration_inside_each_limit_and_rejects_the_first_outside() {
    let base = small(4, 2, 3, 0, 64, 3);
    let pairs: Vec<(DelayBeamformerConfig, DelayBeamformerConfig)> = vec![
        (
            DelayBeamformerConfig { antennas: 65535, ..base.clone() },
            DelayBeamformerConfig { antennas: 65536, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { antennas: 1, ..base.clone() },
            DelayBeamformerConfig { antennas: 0, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { channels: 65535, ..base.clone() },
            DelayBeamformerConfig { channels: 65536, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { pols: 1, beams: small(1, 1, 1, 0, 8, 2).beams, ..base.clone() },
            DelayBeamformerConfig { pols: 3, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { first_channel: (1 << 24) - 3, ..base.clone() },
            DelayBeamformerConfig { first_channel: (1 << 24) - 2, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { times: 8, ..base.clone() },
            DelayBeamformerConfig { times: 4, ..base.clone() },
        ),
        // channels * times at most u32::MAX: 3 * 1431655760 = 2^32 - 16.
        (
            DelayBeamformerConfig { channels: 3, times: 1431655760, ..base.clone() },
            DelayBeamformerConfig { channels: 3, times: 1431655768, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { channels: 65535, times: 65536, ..base.clone() },
            DelayBeamformerConfig { channels: 65535, times: 65544, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { channels: 1, times: u32::MAX - 7, ..base.clone() },
            DelayBeamformerConfig { channels: 2, times: u32::MAX - 7, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { beams: small(1, 2, 1, 0, 8, 65535).beams, ..base.clone() },
            DelayBeamformerConfig { beams: small(1, 2, 1, 0, 8, 65536).beams, ..base.clone() },
        ),
        (
            DelayBeamformerConfig { beams: small(1, 2, 1, 0, 8, 1).beams, ..base.clone() },
            DelayBeamformerConfig { beams: vec![], ..base.clone() },
        ),
    ];
    for (inside, outside) in pairs {
        assert!(
            inside.validate().is_ok(),
            "{:?}",
            (inside.antennas, inside.channels, inside.times, inside.beams.len())
        );
        let message = match outside.validate() {
            Err(Error::InvalidConfig(message)) => message,
            other => panic!("{other:?} for {:?}", (outside.antennas, outside.channels, outside.times)),
        };
        assert!(!message.is_empty());
    }
}

/// Every limit at once: the largest input (2^50 bytes) is exact and a plan exists (at most
/// 65535 time groups); with dither, more than 2^32 states are refused (without, no states
/// are needed and the plan stands).
#[test]
fn the_largest_valid_configuration_is_exact_and_planned_within_the_grid() {
    let c = small(65535, 2, 1, (1 << 24) - 1, u32::MAX - 7, 65535);
    c.validate().unwrap();
    assert_eq!(c.input_len() as u128, 65535 * 2 * (u32::MAX as u128 - 7));
    assert_eq!(c.output_len() as u128, 65535 * (u32::MAX as u128 - 7));
    assert_eq!(c.bytes() as u128, 2 * (65535 * 3 * (u32::MAX as u128 - 7)));
    let plan = Plan::new(&c, 396).unwrap();
    assert!(plan.groups() <= MAX_GROUPS && plan.groups() * plan.tiles_per_group() >= plan.tiles());
    assert_eq!(plan.tiles(), 1 << 24);
    // One tile per group would need 2^24 groups.
    assert!(matches!(Plan::with_tiles_per_group(&c, 1), Err(Error::InvalidConfig(_))));
    assert!(Plan::with_tiles_per_group(&c, 257).is_ok());
    // Dithered, 65535 channels x 8192 beam batches: at least 2^36 states, refused.
    let mut c = small(65535, 2, 65535, 0, 65536, 65535);
    c.beams[0].dither = true;
    c.validate().unwrap();
    match Plan::new(&c, 396) {
        Err(Error::InvalidConfig(message)) => assert!(message.contains("2^32"), "{message}"),
        Err(other) => panic!("{other}"),
        Ok(plan) => panic!("a plan of {} states", plan.state_count()),
    }
    c.beams[0].dither = false;
    assert!(Plan::new(&c, 396).unwrap().state_count() > u32::MAX as u64);
}

/// An f64 steering parameter: ordinary, huge, tiny, NaN and infinities.
fn parameter() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => -10.0f64..10.0,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(1e300),
        1 => Just(-1e40),
        1 => Just(3.5e38),
        1 => Just(1e-320),
        1 => any::<f64>(),
    ]
}

/// (configuration, weight, gain, delay, phase, channel width) of one `steering` call.
type SteeringCase = (DelayBeamformerConfig, Vec<Complex<f64>>, Vec<f64>, Vec<f64>, Vec<f64>, f64);

fn steering_case() -> impl Strategy<Value = SteeringCase> {
    (1u32..4, 1u32..3, 1u32..4, prop_oneof![Just(0u32), Just((1 << 24) - 8), 0u32..100000], 1usize..4)
        .prop_flat_map(|(antennas, pols, channels, first_channel, beams)| {
            let c = small(antennas, pols, channels, first_channel, 8, beams);
            let n = c.steering_len();
            (
                Just(c),
                proptest::collection::vec(
                    [parameter(), parameter()].prop_map(|[re, im]| Complex::new(re, im)),
                    n,
                ),
                proptest::collection::vec(prop_oneof![4 => 0.01f64..10.0, 1 => parameter()], beams),
                proptest::collection::vec(prop_oneof![4 => -1e-6f64..1e-6, 1 => parameter()], n),
                proptest::collection::vec(parameter(), n),
                prop_oneof![4 => Just(208e3), 1 => Just(1e40), 1 => Just(1e30), 1 => parameter()],
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn steering_errors_or_returns_finite_launchable_coefficients(
        (c, weight, gain, delay, phase, width) in steering_case()
    ) {
        match steering(&c, &weight, &gain, &delay, &phase, width) {
            Ok((w, d)) => {
                prop_assert!(w.iter().flat_map(|w| [&w.re, &w.im]).chain(&d).all(|v| v.is_finite()));
                prop_assert!(check_steering(&c, &w, &d).is_ok());
                let inputs_finite = weight.iter().flat_map(|w| [&w.re, &w.im]).chain(&gain).chain(&delay).chain(&phase).all(|v| v.is_finite());
                prop_assert!(inputs_finite && width.is_finite());
            }
            Err(e) => prop_assert!(matches!(e, Error::NonFinite { .. }), "{e}"),
        }
    }
}

/// An f32 weight or delay component: ordinary, huge, NaN and infinities.
fn extreme_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => -2.0f32..2.0,
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
        1 => Just(f32::MAX),
        1 => Just(-2e38f32),
        1 => Just(1e37f32),
        1 => Just(1e-40f32),
    ]
}

/// An input component, extremes included.
fn sample() -> impl Strategy<Value = i8> {
    prop_oneof![Just(-128i8), Just(127), any::<i8>()]
}

/// (configuration, input, weights, delays) of one reference call.
type ReferenceCase = (DelayBeamformerConfig, Vec<Complex<i8>>, Vec<Complex<f32>>, Vec<f32>);

fn reference_case() -> impl Strategy<Value = ReferenceCase> {
    (1u32..4, 1u32..3, 1u32..3, prop_oneof![Just(0u32), Just((1 << 24) - 4), 0u32..1000], 1usize..4)
        .prop_flat_map(|(antennas, pols, channels, first_channel, beams)| {
            let c = small(antennas, pols, channels, first_channel, 8, beams);
            let (n, len) = (c.steering_len(), c.input_len());
            (
                Just(c),
                proptest::collection::vec(
                    [sample(), sample()].prop_map(|[re, im]| Complex::new(re, im)),
                    len,
                ),
                proptest::collection::vec(
                    [extreme_f32(), extreme_f32()].prop_map(|[re, im]| Complex::new(re, im)),
                    n,
                ),
                proptest::collection::vec(
                    prop_oneof![4 => -3.0f32..3.0, 1 => extreme_f32(), 1 => Just(1e31f32)],
                    n,
                ),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, failure_persistence: None, ..ProptestConfig::default() })]

    /// Inputs the launcher accepts give finite reference values and a saturation count for
    /// every clipped output; the others are refused with NonFinite, as the launcher refuses.
    #[test]
    fn the_reference_is_finite_and_counts_every_clipped_output((c, input, w, d) in reference_case()) {
        let plan = Plan::new(&c, 1).unwrap();
        let checked = check_steering(&c, &w, &d);
        match beamform_reference(&c, &plan, &input, &w, &d, None) {
            Ok(r) => {
                prop_assert!(checked.is_ok());
                prop_assert!(r.values.iter().all(|v| v.re.is_finite() && v.im.is_finite()));
                let per_beam = (c.channels * c.times) as usize;
                let mut counts = vec![0u32; c.beams.len()];
                for (o, (v, q)) in r.values.iter().zip(&r.output).enumerate() {
                    let rounded = [v.re.round_ties_even(), v.im.round_ties_even()];
                    let [re, im] = rounded.map(|x| x.clamp(-127.0, 127.0) as i8);
                    prop_assert_eq!(*q, Complex::new(re, im));
                    counts[o / per_beam] += rounded.iter().any(|x| x.abs() > 127.0) as u32;
                }
                prop_assert_eq!(counts, r.saturated);
            }
            Err(e) => {
                prop_assert!(matches!(e, Error::NonFinite { .. }), "{e}");
                prop_assert!(checked.is_err());
            }
        }
    }
}

#[test]
fn steering_reports_the_argument_and_index_of_a_non_finite_value() {
    let c = small(2, 1, 1, 0, 8, 2);
    let ok = |v: f64| vec![v; 4];
    let weight = vec![Complex::new(1.0, 0.0); 4];
    let cases: Vec<(Result<_, Error>, &str, usize)> = vec![
        (
            steering(
                &c,
                &[
                    Complex::new(1.0, 0.0),
                    Complex::new(1.0, f64::NAN),
                    Complex::new(1.0, 0.0),
                    Complex::new(1.0, 0.0),
                ],
                &[1.0; 2],
                &ok(0.0),
                &ok(0.0),
                1.0,
            ),
            "steering weights",
            1,
        ),
        (steering(&c, &weight, &[1.0, f64::INFINITY], &ok(0.0), &ok(0.0), 1.0), "beam gains", 1),
        (steering(&c, &weight, &[1.0; 2], &[0.0, 0.0, f64::NAN, 0.0], &ok(0.0), 1.0), "steering delays", 2),
        (
            steering(&c, &weight, &[1.0; 2], &ok(0.0), &[0.0, 0.0, 0.0, f64::NEG_INFINITY], 1.0),
            "steering phases",
            3,
        ),
        (steering(&c, &weight, &[1.0; 2], &ok(0.0), &ok(0.0), f64::NAN), "channel width", 0),
    ];
    for (result, what, index) in cases {
        match result {
            Err(Error::NonFinite { what: got, index: i }) => assert_eq!((got, i), (what, index)),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Finite inputs whose results overflow f32: a gain of 1e300, a channel width of 1e40.
    let r = steering(&c, &weight, &[1.0, 1e300], &ok(0.0), &ok(0.0), 1.0);
    assert!(matches!(r, Err(Error::NonFinite { index: 1, .. })), "{r:?}");
    let r = steering(&c, &weight, &[1.0; 2], &[0.0, 1.0, 0.0, 0.0], &ok(0.0), 1e40);
    assert!(matches!(r, Err(Error::NonFinite { index: 1, .. })), "{r:?}");
    // |Re w| + |Im w| past f32::MAX although each part is finite.
    let r = steering(
        &c,
        &[Complex::new(3e38, 0.0), Complex::new(1.0, 0.0), Complex::new(2e38, 2e38), Complex::new(1.0, 0.0)],
        &[1.0; 2],
        &ok(0.0),
        &ok(0.0),
        1.0,
    );
    assert!(matches!(r, Err(Error::NonFinite { index: 2, .. })), "{r:?}");
    // A delay whose phase at the last channel overflows f32 (d = 1e32, channel 2^24 - 1).
    let far = small(1, 1, 1, (1 << 24) - 1, 8, 1);
    let r = steering(&far, &[Complex::new(1.0, 0.0)], &[1.0], &[1e32 / 2.0], &[0.0], 1.0);
    assert!(matches!(r, Err(Error::NonFinite { index: 0, .. })), "{r:?}");
    // At channel 0 (only channel) any finite d has a finite phase.
    assert!(steering(
        &small(1, 1, 1, 0, 8, 1),
        &[Complex::new(1.0, 0.0)],
        &[1.0],
        &[1e32 / 2.0],
        &[0.0],
        1.0
    )
    .is_ok());
    assert!(coefficient_reference(Complex::new(f32::NAN, 0.0), 1.0, 3).re.is_nan());
    // no panic
}

#[test]
fn the_reference_refuses_short_and_inconsistent_arguments() {
    let c = DelayBeamformerConfig {
        beams: vec![Beam { pol: 0, dither: true }, Beam { pol: 1, dither: false }],
        ..small(3, 2, 2, 5, 16, 2)
    };
    let plan = Plan::new(&c, 10).unwrap();
    let input = vec![Complex::new(1i8, -1); c.input_len()];
    let w = vec![Complex::new(0.5f32, 0.0); c.steering_len()];
    let d = vec![0.1f32; c.steering_len()];
    let mut states = reference_states(3, 0, 0, plan.state_count() as usize).unwrap();
    assert!(beamform_reference(&c, &plan, &input, &w, &d, Some(&mut states)).is_ok());
    let shape = |r: Result<_, Error>| matches!(r, Err(Error::ShapeMismatch { .. }));
    assert!(shape(beamform_reference(&c, &plan, &input[1..], &w, &d, Some(&mut states))));
    assert!(shape(beamform_reference(&c, &plan, &input, &w[1..], &d, Some(&mut states))));
    assert!(shape(beamform_reference(&c, &plan, &input, &w, &d[1..], Some(&mut states))));
    assert!(shape(beamform_reference(&c, &plan, &input, &w, &d, Some(&mut states[1..]))));
    assert!(matches!(beamform_reference(&c, &plan, &input, &w, &d, None), Err(Error::InvalidConfig(_))));
    let mut bad_w = w.clone();
    bad_w[4] = Complex::new(0.0, f32::NAN);
    assert!(matches!(
        beamform_reference(&c, &plan, &input, &bad_w, &d, Some(&mut states)),
        Err(Error::NonFinite { what: "delay beamformer weights", index: 4 })
    ));
    let mut bad_d = d.clone();
    bad_d[5] = f32::NEG_INFINITY;
    assert!(matches!(
        beamform_reference(&c, &plan, &input, &w, &bad_d, Some(&mut states)),
        Err(Error::NonFinite { what: "delay beamformer delays", index: 5 })
    ));
    // A plan of another configuration (more channels; other beams) is refused, not indexed.
    for other in [
        DelayBeamformerConfig { channels: 3, ..c.clone() },
        DelayBeamformerConfig { times: 512, ..c.clone() },
        DelayBeamformerConfig { beams: vec![Beam { pol: 1, dither: true }; 9], ..c.clone() },
    ] {
        let foreign = Plan::new(&other, 10).unwrap();
        assert!(matches!(
            beamform_reference(&c, &foreign, &input, &w, &d, Some(&mut states)),
            Err(Error::InvalidConfig(_))
        ));
    }
    // An invalid configuration is refused before its sizes are used.
    let invalid = DelayBeamformerConfig { times: 12, ..c.clone() };
    assert!(matches!(
        beamform_reference(&invalid, &plan, &input, &w, &d, None),
        Err(Error::InvalidConfig(_))
    ));
    // Reference states: the last subsequence must exist; an impossible count is an error.
    assert!(matches!(reference_states(1, u64::MAX - 2, 0, 4), Err(Error::InvalidConfig(_))));
    assert_eq!(reference_states(1, u64::MAX - 3, 0, 4).unwrap().len(), 4);
    assert!(matches!(reference_states(1, 0, 0, usize::MAX), Err(Error::InvalidConfig(_))));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Chunks of `T` spectra streamed `k` at a time against the launch of `k T` spectra: x
    /// sample `(a, c, t, p)` of chunk n is the long launch's `(a, c, n T + t, p)`, each chunk's
    /// `(a, c)` row of `T x P` samples is contiguous (so the long x is the chunks' rows
    /// interleaved), and y `(b, c, t)` likewise; the steering has one shape for every chunk
    /// length.
    #[test]
    fn chunks_are_the_long_launch_cut_along_time(
        shape in (1u32..=700, 1u32..=2, 1u32..=300, 1u32..=2048, 1u32..=40, 1usize..=70),
        at in (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
    ) {
        let (antennas, pols, channels, times8, k, beams) = shape;
        let c = DelayBeamformerConfig {
            antennas,
            pols,
            channels,
            first_channel: 7,
            times: 8 * times8,
            beams: (0..beams).map(|b| Beam { pol: b as u32 % pols, dither: b % 3 == 0 }).collect(),
        };
        c.validate().unwrap();
        let long = DelayBeamformerConfig { times: c.times * k, ..c.clone() };
        long.validate().unwrap();
        prop_assert_eq!(long.input_len() as u128, k as u128 * c.input_len() as u128);
        prop_assert_eq!(long.output_len() as u128, k as u128 * c.output_len() as u128);
        prop_assert_eq!(long.steering_len(), c.steering_len());
        let (n, a, ch, t, p) = (at.0 % k, at.1 % antennas, at.2 % channels, at.3 % c.times, at.4 % pols);
        let beam = at.4 % beams as u32;
        let (pols, times, long_t) = (pols as usize, c.times as usize, (n * c.times + t) as usize);
        let row = c.input_index(a, ch, 0, 0);
        prop_assert_eq!(c.input_index(a, ch, t, p), row + t as usize * pols + p as usize);
        prop_assert_eq!(row, (a as usize * channels as usize + ch as usize) * times * pols);
        prop_assert_eq!(
            long.input_index(a, ch, n * c.times + t, p),
            long.input_index(a, ch, 0, 0) + long_t * pols + p as usize
        );
        prop_assert_eq!(long.output_index(beam, ch, n * c.times + t), long.output_index(beam, ch, 0) + long_t);
        prop_assert_eq!(c.output_index(beam, ch, t), c.output_index(beam, ch, 0) + t as usize);
    }
}

/// The streaming engine is `Send` and its outputs are plain borrowed slices (documented: the
/// engine may move to a worker thread).
#[test]
fn the_streaming_engine_can_move_to_a_worker_thread() {
    use std::marker::PhantomData;
    fn send<T: Send>(_: PhantomData<T>) {}
    fn share<T: Send + Sync + Copy>(_: PhantomData<T>) {}
    send(PhantomData::<DelayStream<'static, 'static>>);
    share(PhantomData::<DelayOutput<'static>>);
}
