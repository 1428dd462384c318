//! Hostile inputs to the baseband beamformer's CPU-side API, no GPU needed: for arbitrary
//! field values of `BeamformerConfig` (0, 1, the limits, products past 2^32 and 2^64)
//! `validate()` either errors or every size helper is exact (checked against u128
//! arithmetic), and nothing panics; the limits themselves (last value accepted, first
//! rejected); and the weight, shift and reference checks on short or inconsistent input
//! (shifts outside 0..=31 included, when the `Shift` is made) return typed errors; the time model of the streaming
//! engine (chunks are consecutive pieces of one long E, interleaved in J, with one weight
//! set for every chunk length), and that the engine can move to a worker thread.
use proptest::prelude::*;
use radio_kernels::baseband_beamformer::{beamform_reference, BasebandStream, BeamformerConfig, CHUNK, POLS};
use radio_kernels::{Ci4, Complex, Error, Shift};

/// u32 values a hostile caller would try: 0, 1, the limits and their neighbours, values
/// whose products pass 2^32 and 2^64, and anything.
fn field() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            0u32,
            1,
            8,
            64,
            96,
            128,
            136,
            512,
            1024,
            1088,
            65535,
            65536,
            4_194_304,
            4_194_432,
            1 << 31,
            u32::MAX - 127,
            u32::MAX
        ]),
        (1u32..=128).prop_map(|k| 8 * k),
        (1u32..=40_000).prop_map(|k| k * CHUNK),
        0u32..70_000,
        any::<u32>(),
    ]
}

/// Arbitrary fields, or fields drawn from the valid ranges (so that both branches of the
/// property are well exercised).
fn any_config() -> impl Strategy<Value = BeamformerConfig> {
    let hostile = (field(), field(), field(), field());
    let valid = (1u32..=16, 1u32..=16, 1u32..=65535, 1u32..(1 << 25))
        .prop_map(|(g, w, f, k)| (64 * g, 8 * w.min(128 / g), f, k * CHUNK));
    prop_oneof![hostile, valid].prop_map(|(dishes, beams, freqs, times)| BeamformerConfig {
        dishes,
        beams,
        freqs,
        times,
    })
}

fn product(factors: &[u32]) -> u128 {
    factors.iter().map(|&f| f as u128).product()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// `validate()` errors, or every size helper is exact; no helper panics either way.
    #[test]
    fn validate_errors_or_every_size_is_exact(
        c in any_config(),
        at in (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
    ) {
        let _ = (c.items(), c.e_len(), c.weights_len(), c.shifts_len(), c.output_len());
        let _ = (c.useful_ops(), c.real_time_s());
        let _ = c.e_index(at.0, at.1, at.2, at.3);
        let _ = c.weight_index(at.0, at.1, at.2, at.3);
        let _ = c.shift_index(at.0, at.1, at.2);
        let _ = c.output_index(at.0, at.1, at.2, at.3);
        let _ = c.check_weights(&[], &[]);
        let _ = beamform_reference(&c, &[], &[], &[]);
        match c.validate() {
            Err(Error::InvalidConfig(message)) => prop_assert!(!message.is_empty()),
            Err(other) => prop_assert!(false, "{c:?}: unexpected error {other:?}"),
            Ok(()) => {
                let (d, b, f, t) = (c.dishes, c.beams, c.freqs, c.times);
                prop_assert_eq!(c.e_len() as u128, product(&[t, f, POLS, d]));
                prop_assert_eq!(c.weights_len() as u128, product(&[f, POLS, b, d]));
                prop_assert_eq!(c.shifts_len() as u128, product(&[f, POLS, b]));
                prop_assert_eq!(c.output_len() as u128, product(&[b, f, POLS, t]));
                prop_assert_eq!(c.items() as u128, product(&[f, POLS, t / CHUNK]));
                prop_assert!(c.items() <= u32::MAX as u64);
                let ops = 8.0 * POLS as f64 * f as f64 * b as f64 * d as f64 * t as f64;
                prop_assert!((c.useful_ops() - ops).abs() <= 1e-12 * ops);
                // In-range indices: exact positions, inside the sizes.
                let (tau, fi, p, di, beam) = (at.0 % t, at.1 % f, at.2 % POLS, at.3 % d, at.3 % b);
                let e = c.e_index(tau, fi, p, di);
                prop_assert_eq!(
                    e as u128,
                    ((tau as u128 * f as u128 + fi as u128) * 2 + p as u128) * d as u128 + di as u128
                );
                prop_assert!(e < c.e_len());
                let s = c.shift_index(fi, p, beam);
                prop_assert_eq!(s as u128, (fi as u128 * 2 + p as u128) * b as u128 + beam as u128);
                prop_assert!(s < c.shifts_len());
                let w = c.weight_index(fi, p, beam, di);
                prop_assert_eq!(w as u128, s as u128 * d as u128 + di as u128);
                prop_assert!(w < c.weights_len());
                let o = c.output_index(beam, fi, p, tau);
                prop_assert_eq!(
                    o as u128,
                    ((beam as u128 * f as u128 + fi as u128) * 2 + p as u128) * t as u128 + tau as u128
                );
                prop_assert!(o < c.output_len());
                prop_assert_eq!(c.e_index(t - 1, f - 1, 1, d - 1) + 1, c.e_len());
                prop_assert_eq!(c.output_index(b - 1, f - 1, 1, t - 1) + 1, c.output_len());
                prop_assert_eq!(c.weight_index(f - 1, 1, b - 1, d - 1) + 1, c.weights_len());
            }
        }
    }

    /// Any shift outside 0..=31 is rejected when the `Shift` is made; any inside is accepted.
    #[test]
    fn shifts_outside_0_to_31_are_rejected(shift in any::<i32>()) {
        match Shift::new(shift) {
            Ok(s) => prop_assert!((0..=31).contains(&shift) && s.get() == shift as u32),
            Err(Error::InvalidConfig(m)) => {
                prop_assert!(!(0..=31).contains(&shift));
                prop_assert!(m.contains(&format!("{shift}")), "{}", m);
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }
}

fn config(dishes: u32, beams: u32, freqs: u32, times: u32) -> BeamformerConfig {
    BeamformerConfig { dishes, beams, freqs, times }
}

fn accepted(c: BeamformerConfig) -> bool {
    match c.validate() {
        Ok(()) => true,
        Err(Error::InvalidConfig(_)) => false,
        Err(other) => panic!("{c:?}: {other:?}"),
    }
}

/// Each limit: the last value inside is accepted, the first outside rejected.
#[test]
fn limits_accept_the_last_value_inside_and_reject_the_first_outside() {
    for (inside, outside) in [
        (config(64, 8, 1, 128), config(0, 8, 1, 128)),
        (config(64, 8, 1, 128), config(63, 8, 1, 128)),
        (config(1024, 8, 1, 128), config(1088, 8, 1, 128)),
        (config(64, 8, 1, 128), config(64, 0, 1, 128)),
        (config(64, 128, 1, 128), config(64, 136, 1, 128)),
        (config(1024, 64, 1, 128), config(1024, 72, 1, 128)),
        (config(512, 128, 1, 128), config(576, 128, 1, 128)),
        (config(64, 8, 1, 128), config(64, 8, 0, 128)),
        (config(64, 8, 65535, 128), config(64, 8, 65536, 128)),
        (config(64, 8, 1, 128), config(64, 8, 1, 0)),
        (config(64, 8, 1, 256), config(64, 8, 1, 255)),
        // Work items F * 2 * T / 128 must fit the kernel's u32 item index.
        (config(64, 8, 65535, 32768 * CHUNK), config(64, 8, 65535, 32769 * CHUNK)),
        (config(64, 8, 64, u32::MAX - 127), config(64, 8, 65, u32::MAX - 127)),
    ] {
        assert!(accepted(inside), "{inside:?} should be accepted");
        assert!(!accepted(outside), "{outside:?} should be rejected");
    }
}

/// The largest configurations are accepted and their sizes, past 2^32, are exact (the kernel
/// indexes E and J with 64-bit offsets; the GPU test crosses 2^32 on the device).
#[test]
fn the_largest_configurations_have_exact_sizes() {
    for c in [config(1024, 64, 65535, 32768 * CHUNK), config(64, 128, 1, u32::MAX - 127)] {
        c.validate().unwrap();
        assert_eq!(c.e_len() as u128, product(&[c.times, c.freqs, POLS, c.dishes]));
        assert_eq!(c.output_len() as u128, product(&[c.beams, c.freqs, POLS, c.times]));
        assert!(c.e_len() as u128 > 1 << 32 && c.output_len() as u128 > 1 << 32);
    }
}

#[test]
fn sizes_of_invalid_configurations_saturate() {
    let c = config(u32::MAX, u32::MAX, u32::MAX, u32::MAX);
    assert_eq!((c.e_len(), c.weights_len(), c.output_len()), (usize::MAX, usize::MAX, usize::MAX));
    assert_eq!(c.e_index(u32::MAX, u32::MAX, u32::MAX, u32::MAX), usize::MAX);
    assert_eq!(c.output_index(u32::MAX, u32::MAX, u32::MAX, u32::MAX), usize::MAX);
    assert!(matches!(c.check_weights(&[], &[]), Err(Error::InvalidConfig(_))));
    let zero = config(0, 0, 0, 0);
    assert_eq!((zero.e_len(), zero.shifts_len(), zero.items()), (0, 0, 0));
    assert!(matches!(zero.check_weights(&[], &[]), Err(Error::InvalidConfig(_))));
}

#[test]
fn reference_rejects_short_long_and_inconsistent_input() {
    let c = config(64, 8, 2, 128);
    let e = vec![Ci4::wrapping(-8, -8); c.e_len()];
    let w = vec![Complex::new(-128i8, -128); c.weights_len()];
    let s = vec![Shift::new(3).unwrap(); c.shifts_len()];
    let j = beamform_reference(&c, &e, &w, &s).unwrap();
    assert_eq!(j.len(), c.output_len());
    // 64 dishes of (-128 - 128i)(-8 - 8i) = 2048i: 131072 i / 8 saturates to 7i.
    assert!(j.iter().all(|&b| (b.re(), b.im()) == (0, 7)));
    let mut long_e = e.clone();
    long_e.push(Ci4::default());
    for bad_e in [&e[..0], &e[..e.len() - 1], &long_e[..]] {
        assert!(matches!(beamform_reference(&c, bad_e, &w, &s), Err(Error::ShapeMismatch { .. })));
    }
    assert!(matches!(beamform_reference(&c, &e, &w[1..], &s), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(beamform_reference(&c, &e, &w, &s[1..]), Err(Error::ShapeMismatch { .. })));
    for shift in [-1, 32, i32::MIN, i32::MAX] {
        assert!(matches!(Shift::new(shift), Err(Error::InvalidConfig(_))), "shift {shift}");
    }
    let invalid = config(64, 8, 2, 100);
    assert!(matches!(beamform_reference(&invalid, &e, &w, &s), Err(Error::InvalidConfig(_))));
}

/// The kernels' shared index functions are exact at the largest configurations: the weight
/// offset (64-bit) and the split of 2^32 - 1 work items over blocks.
#[test]
fn the_kernels_index_functions_are_exact_at_the_limits() {
    use radio_kernels::gpu_shared::baseband_beamformer::{block_items, weight_offset};
    let c = config(1024, 64, 65535, 32768 * CHUNK);
    let fp = c.freqs * POLS - 1;
    let last = weight_offset(c.beams, c.dishes, fp, c.beams / 8 - 1, 31, c.dishes / 64 - 1);
    // Lane 31 of the last warp loads the last 32 bytes of A.
    assert_eq!(last + 32, 2 * c.weights_len() as u64);
    for blocks in [1u32, 7, 132, 65535] {
        let (mut end, items) = (0u32, u32::MAX);
        for block in 0..blocks.min(4) {
            let (first, next) = block_items(items, block, blocks);
            assert_eq!(first, end);
            assert!(next >= first && (next - first) as u64 <= (items as u64).div_ceil(blocks as u64));
            end = next;
        }
        assert_eq!(block_items(items, blocks - 1, blocks).1, items);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Chunks of `T` samples streamed `k` at a time are the launch of `k T` samples cut along
    /// time: chunk n's E is bytes `n e_len() ..` of the long E (time is E's slowest axis), its
    /// J row `(beta, f, p)` is the long J's from time `n T` (time is J's fastest axis), and the
    /// weights and shifts of both have the same shape. This is what the streaming tests on
    /// the GPU compare against; sizes stay exact up to the validation limits.
    #[test]
    fn chunks_are_the_long_launch_cut_along_time(
        shape in (1u32..=16, 1u32..=16, 1u32..=65535, 1u32..=512, 1u32..=64),
        at in (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
    ) {
        let (groups, warps, freqs, chunks128, k) = shape;
        let dishes = 64 * groups;
        let c = BeamformerConfig { dishes, beams: 8 * warps.min(128 / groups), freqs, times: CHUNK * chunks128 };
        c.validate().unwrap();
        let long = BeamformerConfig { times: c.times * k, ..c };
        match long.validate() {
            Err(Error::InvalidConfig(_)) => {
                // Only the 32-bit work-item index limits a long launch of a valid chunk shape.
                prop_assert!(long.items() > u32::MAX as u64);
                return Ok(());
            }
            Err(other) => prop_assert!(false, "{other:?}"),
            Ok(()) => {}
        }
        prop_assert_eq!(long.e_len() as u128, k as u128 * c.e_len() as u128);
        prop_assert_eq!(long.output_len() as u128, k as u128 * c.output_len() as u128);
        prop_assert_eq!((long.weights_len(), long.shifts_len()), (c.weights_len(), c.shifts_len()));
        let (n, tau, f, p) = (at.0 % k, at.1 % c.times, at.2 % freqs, at.3 % POLS);
        let (d, beam) = (at.4 % dishes, at.4 % c.beams);
        prop_assert_eq!(
            long.e_index(n * c.times + tau, f, p, d),
            n as usize * c.e_len() + c.e_index(tau, f, p, d)
        );
        prop_assert_eq!(
            long.output_index(beam, f, p, n * c.times + tau),
            long.output_index(beam, f, p, 0) + (n * c.times + tau) as usize
        );
        prop_assert_eq!(c.output_index(beam, f, p, tau), c.output_index(beam, f, p, 0) + tau as usize);
        prop_assert_eq!(long.output_index(beam, f, p, 0) / long.times as usize, c.output_index(beam, f, p, 0) / c.times as usize);
    }
}

/// The streaming engine is `Send` (documented: it may move to a worker thread).
#[test]
fn the_streaming_engine_can_move_to_a_worker_thread() {
    fn send<T: Send>(_: std::marker::PhantomData<T>) {}
    send(std::marker::PhantomData::<BasebandStream<'static, 'static>>);
}
