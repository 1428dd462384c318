//! Hostile inputs to the correlator's CPU-side API, no GPU needed: for arbitrary field values
//! of `CorrelatorConfig` (0, 1, the limits, products past 2^32 and 2^64) `validate()` either
//! errors or every size helper is exact (checked against u128 arithmetic), and nothing
//! panics; the limits themselves (last value accepted, first rejected); `time_slices` over
//! every input; and the public CPU helpers (`sample`, `correlate_reference`) on short or
//! inconsistent input return typed errors.
use proptest::prelude::*;
use radio_kernels::correlator::{
    correlate_reference, time_slices, CorrelatorConfig, Format, Order, TIME_TILE,
};
use radio_kernels::{Complex, Error};

/// u32 values a hostile caller would try: 0, 1, the limits and their neighbours, values
/// whose products pass 2^32 and 2^64, and anything.
fn field() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            0u32,
            1,
            2,
            3,
            63,
            64,
            65,
            65472,
            65535,
            65536,
            16_777_152,
            16_777_216,
            1 << 31,
            u32::MAX - 1,
            u32::MAX
        ]),
        0u32..70_000,
        (1u32..=262_144).prop_map(|k| k * TIME_TILE),
        any::<u32>(),
    ]
}

fn format() -> impl Strategy<Value = Format> {
    prop_oneof![Just(Format::Ci8), Just(Format::Ci4)]
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::StationPol), Just(Order::PolStation)]
}

/// Arbitrary fields, or fields drawn from the valid ranges (so that both branches of the
/// property are well exercised).
fn any_config() -> impl Strategy<Value = CorrelatorConfig> {
    let hostile = (field(), field(), field(), field());
    let valid = (1u32..=65535, 1u32..=2, 1u32..=65535, prop_oneof![1u32..=1023, 1u32..=262_143])
        .prop_map(|(s, p, c, k)| (s, p, c, k * TIME_TILE));
    (prop_oneof![hostile, valid], format(), order()).prop_map(
        |((stations, pols, channels, times), format, order)| CorrelatorConfig {
            stations,
            pols,
            channels,
            times,
            format,
            order,
        },
    )
}

/// The exact sizes in u128.
fn exact_input_bytes(c: &CorrelatorConfig) -> u128 {
    c.times as u128 * c.channels as u128 * c.stations as u128 * c.pols as u128 * c.format.bytes() as u128
}
fn exact_baselines(c: &CorrelatorConfig) -> u128 {
    c.stations as u128 * (c.stations as u128 + 1) / 2
}
fn exact_output_len(c: &CorrelatorConfig) -> u128 {
    c.channels as u128 * exact_baselines(c) * c.pols as u128 * c.pols as u128
}
fn exact_output_index(c: &CorrelatorConfig, channel: u32, i: u32, j: u32, pi: u32, pj: u32) -> u128 {
    let b = i as u128 * (i as u128 + 1) / 2 + j as u128;
    ((channel as u128 * exact_baselines(c) + b) * c.pols as u128 + pi as u128) * c.pols as u128 + pj as u128
}
fn exact_input_offset(c: &CorrelatorConfig, t: u32, channel: u32, station: u32, pol: u32) -> u128 {
    let row = t as u128 * c.channels as u128 + channel as u128;
    let element = match c.order {
        Order::StationPol => (row * c.stations as u128 + station as u128) * c.pols as u128 + pol as u128,
        Order::PolStation => (row * c.pols as u128 + pol as u128) * c.stations as u128 + station as u128,
    };
    element * c.format.bytes() as u128
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// `validate()` errors, or every size helper is exact; no helper panics either way.
    #[test]
    fn validate_errors_or_every_size_is_exact(
        c in any_config(),
        // Index fractions: positions inside the configuration, and arbitrary ones.
        at in (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
    ) {
        // Whatever the configuration, the helpers return (saturated where they must).
        let _ = (c.baselines(), c.input_bytes(), c.output_len(), c.useful_ops());
        let _ = c.output_index(at.0, at.1, at.2, at.3, at.4);
        let _ = c.input_offset(at.0, at.1, at.2, at.3);
        let _ = c.sample(&[], at.0, at.1, at.2, at.3);
        prop_assert_eq!(c.baselines() as u128, exact_baselines(&c));
        match c.validate() {
            Err(Error::InvalidConfig(message)) => prop_assert!(!message.is_empty()),
            Err(other) => prop_assert!(false, "{c:?}: unexpected error {other:?}"),
            Ok(()) => {
                prop_assert_eq!(c.input_bytes() as u128, exact_input_bytes(&c));
                prop_assert_eq!(c.output_len() as u128, exact_output_len(&c));
                let ops = 8.0 * exact_baselines(&c) as f64 * (c.pols * c.pols) as f64
                    * c.channels as f64 * c.times as f64;
                prop_assert!((c.useful_ops() - ops).abs() <= 1e-12 * ops);
                // In-range indices: exact positions, inside the sizes.
                let i = at.1 % c.stations;
                let j = at.2 % (i + 1);
                let (channel, pi, pj) = (at.0 % c.channels, at.3 % c.pols, at.4 % c.pols);
                let index = c.output_index(channel, i, j, pi, pj);
                prop_assert_eq!(index as u128, exact_output_index(&c, channel, i, j, pi, pj));
                prop_assert!(index < c.output_len());
                let (t, station, pol) = (at.4 % c.times, at.1 % c.stations, at.3 % c.pols);
                let offset = c.input_offset(t, channel, station, pol);
                prop_assert_eq!(offset as u128, exact_input_offset(&c, t, channel, station, pol));
                prop_assert!(offset + c.format.bytes() as usize <= c.input_bytes());
                // The last element is the last one of the input.
                let last = c.input_offset(c.times - 1, c.channels - 1, c.stations - 1, c.pols - 1);
                prop_assert_eq!(last + c.format.bytes() as usize, c.input_bytes());
                prop_assert_eq!(
                    c.output_index(c.channels - 1, c.stations - 1, c.stations - 1, c.pols - 1, c.pols - 1) + 1,
                    c.output_len()
                );
            }
        }
    }

    /// Arbitrary (blocks, slots, stages): an error exactly when there is no stage or no
    /// slot, otherwise slices that cover every stage once, none empty, at most 16.
    #[test]
    fn time_slices_never_panic_and_cover_every_stage(
        blocks in prop_oneof![Just(0u64), Just(1u64), Just(u64::MAX), any::<u64>(), 0u64..100_000],
        slots in prop_oneof![Just(0u64), Just(1u64), Just(u64::MAX), any::<u64>(), 0u64..2_000],
        stages in prop_oneof![Just(0u32), Just(1u32), Just(u32::MAX), any::<u32>(), 0u32..300_000],
    ) {
        match time_slices(blocks, slots, stages) {
            Err(Error::InvalidConfig(_)) => prop_assert!(stages == 0 || slots == 0),
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
            Ok((slices, per_slice)) => {
                prop_assert!(stages > 0 && slots > 0);
                prop_assert!((1..=16).contains(&slices) && per_slice >= 1);
                let (slices, per_slice) = (slices as u64, per_slice as u64);
                prop_assert!((slices - 1) * per_slice < stages as u64);
                prop_assert!(slices * per_slice >= stages as u64);
            }
        }
    }
}

fn good() -> CorrelatorConfig {
    CorrelatorConfig {
        stations: 5,
        pols: 2,
        channels: 3,
        times: 64,
        format: Format::Ci8,
        order: Order::StationPol,
    }
}

fn accepted(c: CorrelatorConfig) -> bool {
    match c.validate() {
        Ok(()) => true,
        Err(Error::InvalidConfig(_)) => false,
        Err(other) => panic!("{c:?}: {other:?}"),
    }
}

/// Each limit: the last value inside is accepted, the first outside rejected.
#[test]
fn limits_accept_the_last_value_inside_and_reject_the_first_outside() {
    let g = good();
    for (inside, outside) in [
        (CorrelatorConfig { stations: 1, ..g }, CorrelatorConfig { stations: 0, ..g }),
        (CorrelatorConfig { stations: 65535, ..g }, CorrelatorConfig { stations: 65536, ..g }),
        (CorrelatorConfig { pols: 1, ..g }, CorrelatorConfig { pols: 0, ..g }),
        (CorrelatorConfig { pols: 2, ..g }, CorrelatorConfig { pols: 3, ..g }),
        (CorrelatorConfig { channels: 1, ..g }, CorrelatorConfig { channels: 0, ..g }),
        (CorrelatorConfig { channels: 65535, ..g }, CorrelatorConfig { channels: 65536, ..g }),
        (CorrelatorConfig { times: 64, ..g }, CorrelatorConfig { times: 0, ..g }),
        (CorrelatorConfig { times: 128, ..g }, CorrelatorConfig { times: 127, ..g }),
        (CorrelatorConfig { times: 65472, ..g }, CorrelatorConfig { times: 65536, ..g }),
        (
            CorrelatorConfig { times: 16_777_152, format: Format::Ci4, ..g },
            CorrelatorConfig { times: 16_777_216, format: Format::Ci4, ..g },
        ),
    ] {
        assert!(accepted(inside), "{inside:?} should be accepted");
        assert!(!accepted(outside), "{outside:?} should be rejected");
    }
}

/// The largest configurations are accepted and their sizes, far past 2^32, are exact (the
/// kernels index with 64-bit offsets; the GPU tests cross 2^32 on the device).
#[test]
fn the_largest_configurations_have_exact_sizes() {
    for (times, format) in [(65472, Format::Ci8), (16_777_152, Format::Ci4)] {
        for order in [Order::StationPol, Order::PolStation] {
            let c = CorrelatorConfig { stations: 65535, pols: 2, channels: 65535, times, format, order };
            c.validate().unwrap();
            assert_eq!(c.input_bytes() as u128, exact_input_bytes(&c));
            assert_eq!(c.output_len() as u128, exact_output_len(&c));
            assert!(c.output_len() as u128 > 1 << 32 && c.input_bytes() as u128 > 1 << 32);
            assert_eq!(c.baselines(), 65535 * 65536 / 2);
        }
    }
}

#[test]
fn baselines_of_zero_stations_is_zero() {
    assert_eq!(CorrelatorConfig { stations: 0, ..good() }.baselines(), 0);
    assert_eq!(CorrelatorConfig { stations: u32::MAX, ..good() }.baselines(), u32::MAX as u64 * (1 << 31));
}

#[test]
fn sizes_of_invalid_configurations_saturate() {
    let c = CorrelatorConfig {
        stations: u32::MAX,
        pols: u32::MAX,
        channels: u32::MAX,
        times: u32::MAX,
        ..good()
    };
    assert_eq!(c.input_bytes(), usize::MAX);
    assert_eq!(c.output_len(), usize::MAX);
    assert_eq!(c.input_offset(u32::MAX, u32::MAX, u32::MAX, u32::MAX), usize::MAX);
    assert_eq!(c.output_index(u32::MAX, u32::MAX, u32::MAX, u32::MAX, u32::MAX), usize::MAX);
    assert!(c.useful_ops().is_finite());
}

#[test]
fn sample_checks_its_input() {
    let c = good();
    let mut input = vec![0u8; c.input_bytes()];
    let at = c.input_offset(0, 2, 4, 1);
    input[at] = 0x80;
    input[at + 1] = 0x7f;
    assert_eq!(c.sample(&input, 0, 2, 4, 1).unwrap(), Complex::new(-128, 127));
    assert!(matches!(c.sample(&input[..input.len() - 1], 0, 2, 4, 1), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(c.sample(&[], 0, 0, 0, 0), Err(Error::ShapeMismatch { .. })));
    let mut long = input.clone();
    long.push(0);
    assert!(matches!(c.sample(&long, 0, 0, 0, 0), Err(Error::ShapeMismatch { .. })));
    for (t, channel, station, pol, word) in
        [(64, 0, 0, 0, "t"), (0, 3, 0, 0, "channel"), (0, 0, 5, 0, "station"), (0, 0, 0, 2, "pol")]
    {
        match c.sample(&input, t, channel, station, pol) {
            Err(Error::InvalidConfig(m)) => assert!(m.contains(word), "{m}"),
            other => panic!("({t}, {channel}, {station}, {pol}): {other:?}"),
        }
    }
    let invalid = CorrelatorConfig { pols: 0, ..c };
    assert!(matches!(invalid.sample(&input, 0, 0, 0, 0), Err(Error::InvalidConfig(_))));
    // int4: one byte, real part in the low nibble.
    let c4 = CorrelatorConfig { format: Format::Ci4, order: Order::PolStation, ..c };
    let mut input = vec![0u8; c4.input_bytes()];
    input[c4.input_offset(63, 1, 3, 0)] = 0x8f; // re = -1, im = -8
    assert_eq!(c4.sample(&input, 63, 1, 3, 0).unwrap(), Complex::new(-1, -8));
}

#[test]
fn reference_rejects_short_long_and_invalid_input() {
    let c = good();
    let input = vec![1u8; c.input_bytes()];
    assert_eq!(correlate_reference(&c, &input).unwrap().len(), c.output_len());
    for bad in [&input[..0], &input[..input.len() - 1]] {
        assert!(matches!(correlate_reference(&c, bad), Err(Error::ShapeMismatch { .. })));
    }
    let long = vec![1u8; c.input_bytes() + 2];
    assert!(matches!(correlate_reference(&c, &long), Err(Error::ShapeMismatch { .. })));
    for invalid in [
        CorrelatorConfig { stations: 0, ..c },
        CorrelatorConfig { times: 0, ..c },
        CorrelatorConfig { channels: 0, ..c },
        CorrelatorConfig { pols: 0, ..c },
    ] {
        assert!(matches!(correlate_reference(&invalid, &[]), Err(Error::InvalidConfig(_))), "{invalid:?}");
    }
}

/// The reference agrees with the formula evaluated per output through `sample` and
/// `output_index`, for both orders and formats and one or two polarisations.
#[test]
fn reference_matches_the_formula_through_the_public_helpers() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut byte = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 24) as u8
    };
    for format in [Format::Ci8, Format::Ci4] {
        for order in [Order::StationPol, Order::PolStation] {
            for pols in [1, 2] {
                let c = CorrelatorConfig { stations: 6, pols, channels: 2, times: 64, format, order };
                let input: Vec<u8> = (0..c.input_bytes()).map(|_| byte()).collect();
                let v = correlate_reference(&c, &input).unwrap();
                let mut seen = 0;
                for channel in 0..c.channels {
                    for i in 0..c.stations {
                        for j in 0..=i {
                            for pi in 0..pols {
                                for pj in 0..pols {
                                    let mut want = Complex::new(0i64, 0);
                                    for t in 0..c.times {
                                        let Complex { re: a1, im: b1 } =
                                            c.sample(&input, t, channel, i, pi).unwrap();
                                        let Complex { re: a2, im: b2 } =
                                            c.sample(&input, t, channel, j, pj).unwrap();
                                        want.re += a1 * a2 + b1 * b2;
                                        want.im += b1 * a2 - a1 * b2;
                                    }
                                    assert_eq!(v[c.output_index(channel, i, j, pi, pj)], want, "{c:?}");
                                    seen += 1;
                                }
                            }
                        }
                    }
                }
                assert_eq!(seen, c.output_len());
            }
        }
    }
}

/// The kernels' shared index function agrees with the host's at the largest configuration,
/// past 2^32 values (it is 64-bit, like the kernels' input offsets).
#[test]
fn the_kernels_visibility_index_is_exact_at_the_largest_configuration() {
    use radio_kernels::gpu_shared::correlator::visibility_index;
    let c = CorrelatorConfig { stations: 65535, pols: 2, channels: 65535, ..good() };
    for (channel, i, j) in [(65534, 65534, 65534), (65534, 65534, 0), (1, 65534, 17), (40000, 30000, 29999)] {
        for (pi, pj) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let device = visibility_index(channel, c.baselines(), c.pols, i, j, pi, pj);
            assert_eq!(device as u128, exact_output_index(&c, channel, i, j, pi, pj));
            assert_eq!(device as usize, c.output_index(channel, i, j, pi, pj));
        }
    }
}
