//! Hostile inputs to the PFB channelizer's CPU-side API, no GPU needed: for arbitrary field
//! values of `ChannelizerConfig` (0, 1, the limits, powers of two, products past 2^32 and
//! 2^64, both output formats) `validate()` either errors or every size helper is exact
//! (checked against u128 arithmetic and the limits the kernels need), and no helper panics on
//! any of them; the limits themselves (last value accepted, first rejected); and the public
//! CPU helpers (`reference_chunk`, `unpack_sample`, `output_value`, `pack_samples`,
//! `hann_sinc_weights`, `Schedule::new`, `lost_flags`, `fused_twiddles`,
//! `quantise_reference`) on short, inconsistent or non-finite input return typed errors; and
//! `max_outputs_per_push` bounds every push of simulated streams whose delays change (and is
//! reached), which the streaming engine's output ring relies on.
use proptest::prelude::*;
use radio_kernels::pfb::{
    fused_twiddles, hann_sinc_weights, lost_flags, output_value, pack_samples, quantise_reference,
    reference_chunk, unpack_sample, ChannelizerConfig, DelayModel, OutputFormat, Schedule,
    DELAY_MODEL_FIELDS, MAX_CAPACITY_SAMPLES, MAX_COEFFICIENT, MAX_OUTPUT_VALUES, MAX_WINDOW,
};
use radio_kernels::{Complex, Error};

/// u32 values a hostile caller would try: 0, 1, the limits and their neighbours, powers of two,
/// values whose products pass 2^32 and 2^64, and anything.
fn field() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            0u32,
            1,
            2,
            3,
            4,
            31,
            32,
            33,
            63,
            64,
            65,
            65535,
            65536,
            65537,
            u32::MAX - 1,
            u32::MAX
        ]),
        (0u32..32).prop_map(|k| 1 << k),
        0u32..100_000,
        any::<u32>(),
    ]
}

fn format() -> impl Strategy<Value = OutputFormat> {
    prop_oneof![Just(OutputFormat::Ci8), Just(OutputFormat::Ci4)]
}

/// Arbitrary fields, or fields drawn near the valid ranges (so both branches of the property
/// are exercised, the size limits included).
fn any_config() -> impl Strategy<Value = ChannelizerConfig> {
    let hostile = (field(), field(), field(), field(), field(), field(), field(), field());
    let near_valid = (
        (6u32..=16).prop_map(|k| 1 << k),
        1u32..=33,
        prop::sample::select(vec![4u32, 8, 10, 12, 16]),
        prop_oneof![(1u32..=64).prop_map(|k| 4 * k), (1u32..=1 << 14).prop_map(|k| 4 * k)],
        prop_oneof![1u32..=16, 1u32..=1 << 20],
        (1u32..=1 << 16).prop_map(|k| 32 * k),
        Just(32u32),
        prop_oneof![3 => 0u32..=1000, 1 => 0u32..=1 << 31, 1 => Just(u32::MAX)],
    );
    (prop_oneof![1 => hostile, 3 => near_valid], format()).prop_map(
        |(
            (
                channels,
                taps,
                bits,
                spectra_per_heap,
                heaps_per_chunk,
                chunk_samples,
                packet_samples,
                max_delay,
            ),
            output,
        )| {
            ChannelizerConfig {
                channels,
                taps,
                bits,
                spectra_per_heap,
                heaps_per_chunk,
                chunk_samples,
                packet_samples,
                max_delay,
                output,
            }
        },
    )
}

/// The exact sizes in u128.
fn exact_spectra(c: &ChannelizerConfig) -> u128 {
    c.spectra_per_heap as u128 * c.heaps_per_chunk as u128
}
fn exact_window(c: &ChannelizerConfig) -> u128 {
    2 * c.channels as u128 * c.taps as u128
}
fn exact_values(c: &ChannelizerConfig) -> u128 {
    2 * c.channels as u128 * exact_spectra(c)
}
fn bytes_per_value(c: &ChannelizerConfig) -> u128 {
    match c.output {
        OutputFormat::Ci8 => 2,
        OutputFormat::Ci4 => 1,
        other => panic!("no size for {other:?}"),
    }
}
fn exact_capacity(c: &ChannelizerConfig) -> u128 {
    let n2 = 2 * c.channels as u128;
    let span = n2 * (exact_spectra(c) - 1) + exact_window(c) + 2 * c.max_delay as u128;
    (span + c.chunk_samples as u128 + 64).div_ceil(32) * 32
}
fn exact_output_index(c: &ChannelizerConfig, heap: u32, channel: u32, s: u32, pol: u32) -> u128 {
    ((heap as u128 * c.channels as u128 + channel as u128) * c.spectra_per_heap as u128 + s as u128) * 2
        + pol as u128
}

/// Whether the fields alone (no size limit) are in range.
fn fields_valid(c: &ChannelizerConfig) -> bool {
    c.channels.is_power_of_two()
        && (64..=65536).contains(&c.channels)
        && (1..=32).contains(&c.taps)
        && [4, 8, 10, 12, 16].contains(&c.bits)
        && c.spectra_per_heap > 0
        && c.spectra_per_heap.is_multiple_of(4)
        && c.heaps_per_chunk > 0
        && c.packet_samples > 0
        && c.chunk_samples > 0
        && c.chunk_samples.is_multiple_of(c.packet_samples)
        && c.chunk_samples.is_multiple_of(32)
}

/// Every size helper, called on any configuration: none may panic.
fn call_every_helper(c: &ChannelizerConfig, heap: u32, channel: u32, s: u32, pol: u32) {
    let _ = (c.spectra_per_chunk(), c.window(), c.chunk_bytes(), c.chunk_packets());
    let _ = (c.output_values(), c.output_bytes(), c.capacity_samples());
    let _ = c.output_index(heap, channel, s, pol);
    let _ = c.output_index(u32::MAX, u32::MAX, u32::MAX, u32::MAX);
    let _ = (c.output.bytes_per_value(), c.output.max());
    let most = c.max_outputs_per_push();
    assert!(most >= 1, "{c:?}: at least one output chunk per push");
    if exact_spectra(c) == 0 || c.channels == 0 {
        assert_eq!(most, usize::MAX, "{c:?}: saturates without spectra");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// `validate()` accepts exactly the configurations whose fields are in range and whose
    /// output chunk and kept input fit the kernels' limits; on those every helper is exact.
    /// No helper panics on any configuration.
    #[test]
    fn validate_errors_or_every_size_helper_is_exact(
        c in any_config(),
        heap in any::<u32>(),
        channel in any::<u32>(),
        s in any::<u32>(),
        pol in 0u32..2,
    ) {
        call_every_helper(&c, heap, channel, s, pol);
        let valid = fields_valid(&c)
            && exact_values(&c) <= 1 << 31
            && exact_capacity(&c) < 1 << 32;
        match c.validate() {
            Err(Error::InvalidConfig(message)) => {
                prop_assert!(!valid, "rejected a valid configuration {c:?}: {message}");
                prop_assert!(!message.is_empty());
            }
            Err(e) => prop_assert!(false, "validate gave a non-InvalidConfig error {e:?}"),
            Ok(()) => {
                prop_assert!(valid, "accepted {c:?}");
                prop_assert_eq!(c.spectra_per_chunk() as u128, exact_spectra(&c));
                prop_assert_eq!(c.window() as u128, exact_window(&c));
                prop_assert_eq!(c.chunk_bytes() as u128, c.chunk_samples as u128 * c.bits as u128 / 8);
                prop_assert_eq!(c.chunk_bytes() as u128 * 8, c.chunk_samples as u128 * c.bits as u128);
                prop_assert_eq!(c.chunk_packets() as u128, (c.chunk_samples / c.packet_samples) as u128);
                prop_assert_eq!(c.output_values() as u128, exact_values(&c));
                prop_assert_eq!(c.output_bytes() as u128, exact_values(&c) * bytes_per_value(&c));
                prop_assert_eq!(c.capacity_samples() as u128, exact_capacity(&c));
                prop_assert!(c.output_values() as u64 <= MAX_OUTPUT_VALUES);
                prop_assert!(c.capacity_samples() <= MAX_CAPACITY_SAMPLES);
                prop_assert!(c.spectra_per_chunk() <= u32::MAX as u64);
                let per_chunk = 2 * c.channels as u128 * exact_spectra(&c);
                let span = c.chunk_samples as u128 + 2 * c.max_delay as u128;
                prop_assert_eq!(c.max_outputs_per_push() as u128, span.div_ceil(per_chunk));
                // In-range indices are exact and inside the output.
                let (h, k, sp) = (heap % c.heaps_per_chunk, channel % c.channels, s % c.spectra_per_heap);
                let index = c.output_index(h, k, sp, pol);
                prop_assert_eq!(index as u128, exact_output_index(&c, h, k, sp, pol));
                prop_assert!(index < c.output_values());
                // And out-of-range ones exact where they fit.
                let wide = exact_output_index(&c, heap, channel, s, pol);
                prop_assert_eq!(c.output_index(heap, channel, s, pol) as u128, wide.min(usize::MAX as u128));
                if c.spectra_per_chunk() <= 64 {
                    // A schedule of a valid configuration never panics, near the stream's
                    // end or not.
                    let model = DelayModel { delay: 0.4, ..Default::default() };
                    prop_assert!(Schedule::new(&c, &[model, model], 0).is_ok());
                    let _ = Schedule::new(&c, &[model, model], i64::MAX - 1);
                    let _ = Schedule::new(&c, &[model, model], i64::MIN);
                }
            }
        }
    }

    /// The CPU helpers on arbitrary indices and lengths: typed errors, never a panic.
    #[test]
    fn cpu_helpers_never_panic(
        len in 0usize..64,
        bits in field(),
        i in prop_oneof![0usize..200, Just(usize::MAX), Just(usize::MAX / 2)],
        window in prop_oneof![0u64..5000, Just(MAX_WINDOW + 1), Just(u64::MAX)],
        packet in field(),
        heap in field(),
        start in prop_oneof![-5000i64..5000, Just(i64::MAX), Just(i64::MIN), Just(i64::MAX - 100)],
        channels in field(),
        taps in prop_oneof![0u32..40, Just(u32::MAX)],
    ) {
        let bytes = vec![0xA5u8; len];
        match unpack_sample(&bytes, bits, i) {
            Ok(v) => {
                prop_assert!([4, 8, 10, 12, 16].contains(&bits));
                prop_assert!((i + 1) * bits as usize <= 8 * len);
                prop_assert!(v >= -(1 << (bits - 1)) && v < 1 << (bits - 1));
            }
            Err(e) => prop_assert!(matches!(e, Error::InvalidConfig(_))),
        }
        for format in [OutputFormat::Ci8, OutputFormat::Ci4] {
            let (re, im) = output_value(&bytes, format, i);
            let inside = i.checked_mul(format.bytes_per_value()).is_some_and(|b| b < len);
            if !inside {
                prop_assert_eq!((re, im), (0, 0));
            }
        }
        match pack_samples(&[0, -1, 1], bits) {
            Ok(p) => prop_assert_eq!(p.len(), (3 * bits as usize).div_ceil(8)),
            Err(e) => prop_assert!(matches!(e, Error::InvalidConfig(_))),
        }
        let supported = (1..=65536).contains(&channels) && (1..=32).contains(&taps);
        if !supported {
            prop_assert!(hann_sinc_weights(channels, taps).is_empty());
        } else if channels <= 4096 {
            let w = hann_sinc_weights(channels, taps);
            prop_assert_eq!(w.len(), 2 * channels as usize * taps as usize);
            prop_assert!(w.iter().all(|v| v.is_finite()));
        }
        match fused_twiddles(channels) {
            Ok(t) => prop_assert_eq!(t.len(), 2 * channels as usize),
            Err(e) => {
                prop_assert!(matches!(e, Error::InvalidConfig(_)));
                prop_assert!(!(channels.is_power_of_two() && (64..=65536).contains(&channels)));
            }
        }
        let starts = [vec![start; 3], vec![0; 3]];
        let all = |_: i64| true;
        match lost_flags(&starts, window, packet, [&all, &all], heap) {
            Ok((spectra, heaps)) => {
                prop_assert!(packet > 0 && heap > 0 && (1..=MAX_WINDOW).contains(&window));
                prop_assert_eq!(spectra.len(), 3);
                prop_assert_eq!(heaps.len(), 3usize.div_ceil(heap as usize));
                prop_assert_eq!(spectra[0], start < 0);
            }
            Err(e) => prop_assert!(matches!(e, Error::InvalidConfig(_))),
        }
        let (q, clipped) = quantise_reference(start as f64, channels as i32);
        let _ = (q, clipped);
    }
}

/// The limits, with the reason in each message: the last output chunk size and kept input
/// accepted, the first past them rejected.
#[test]
fn the_limits_accept_the_last_size_inside_and_reject_the_first_past() {
    // 2^31 complex values: 16384 spectra of 65536 channels (the int8 output is 2^32 bytes).
    let big = ChannelizerConfig {
        channels: 65536,
        taps: 4,
        bits: 16,
        spectra_per_heap: 4,
        heaps_per_chunk: 4096,
        chunk_samples: 1 << 26,
        packet_samples: 1 << 26,
        max_delay: 0,
        output: OutputFormat::Ci8,
    };
    big.validate().unwrap();
    assert_eq!(big.output_values() as u64, MAX_OUTPUT_VALUES);
    assert_eq!(big.output_bytes() as u64, 1 << 32);
    let past = ChannelizerConfig { heaps_per_chunk: 4097, ..big.clone() };
    match past.validate() {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("2^31"), "{m}"),
        other => panic!("{other:?}"),
    }
    // The largest max_delay whose kept input fits 2^32 - 32 samples, and one more.
    let rest = exact_capacity(&big); // at max_delay 0
    let max_delay = ((MAX_CAPACITY_SAMPLES as u128 - rest) / 2) as u32;
    let last = ChannelizerConfig { max_delay, ..big.clone() };
    last.validate().unwrap();
    assert_eq!(last.capacity_samples(), MAX_CAPACITY_SAMPLES);
    let first_past = ChannelizerConfig { max_delay: max_delay + 1, ..big.clone() };
    assert_eq!(first_past.capacity_samples(), 1 << 32);
    match first_past.validate() {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("2^32 - 32") && m.contains("32-bit"), "{m}"),
        other => panic!("{other:?}"),
    }
    // spectra_per_heap x heaps_per_chunk past 2^32 (it wrapped to 0 in u32): exact, rejected.
    let wrap = ChannelizerConfig { spectra_per_heap: 1 << 16, heaps_per_chunk: 1 << 16, ..big.clone() };
    assert_eq!(wrap.spectra_per_chunk(), 1 << 32);
    assert!(matches!(wrap.validate(), Err(Error::InvalidConfig(_))));
    // Zero sizes: no panic, documented values, rejected.
    let zero = ChannelizerConfig {
        channels: 0,
        taps: 0,
        bits: 0,
        spectra_per_heap: 0,
        heaps_per_chunk: 0,
        chunk_samples: 0,
        packet_samples: 0,
        max_delay: 0,
        output: OutputFormat::Ci4,
    };
    assert_eq!(
        (zero.spectra_per_chunk(), zero.window(), zero.chunk_bytes(), zero.chunk_packets()),
        (0, 0, 0, 0)
    );
    assert_eq!((zero.output_values(), zero.output_bytes(), zero.capacity_samples()), (0, 0, 64));
    assert!(zero.validate().is_err());
    let huge = ChannelizerConfig {
        channels: u32::MAX,
        taps: u32::MAX,
        bits: u32::MAX,
        spectra_per_heap: u32::MAX,
        heaps_per_chunk: u32::MAX,
        chunk_samples: u32::MAX,
        packet_samples: 1,
        max_delay: u32::MAX,
        output: OutputFormat::Ci8,
    };
    assert_eq!(huge.window(), u64::MAX, "2 (2^32 - 1)^2 saturates");
    assert_eq!(huge.spectra_per_chunk(), (u32::MAX as u64).pow(2));
    assert_eq!(huge.chunk_bytes() as u128, (u32::MAX as u128).pow(2) / 8);
    assert_eq!((huge.output_values(), huge.output_bytes()), (usize::MAX, usize::MAX));
    assert_eq!(huge.capacity_samples(), u64::MAX);
    assert!(huge.validate().is_err());
}

fn small_config() -> ChannelizerConfig {
    ChannelizerConfig {
        channels: 64,
        taps: 4,
        bits: 8,
        spectra_per_heap: 4,
        heaps_per_chunk: 2,
        chunk_samples: 1024,
        packet_samples: 256,
        max_delay: 50,
        output: OutputFormat::Ci8,
    }
}

/// `reference_chunk` on short or non-finite weights, gains, samples and models: typed errors
/// naming the argument; on good input it works.
#[test]
fn reference_chunk_rejects_short_and_non_finite_input() {
    let c = small_config();
    let weights = hann_sinc_weights(c.channels, c.taps);
    let gains = vec![Complex::new(0.5f32, 0.25); 2 * c.channels as usize];
    let models = [DelayModel::default(); 2];
    let samples = vec![3i32; 4096];
    let present = vec![true; 16];
    let run = |w: &[f32], g: &[Complex<f32>], m: &[DelayModel; 2], s: &[i32], first: i64| {
        reference_chunk(&c, w, g, m, [s, &samples], [&present, &present], first)
    };
    let r = run(&weights, &gains, &models, &samples, 0).unwrap();
    assert_eq!(r.output.len(), c.output_bytes());
    assert!(matches!(
        run(&weights[1..], &gains, &models, &samples, 0),
        Err(Error::ShapeMismatch { what: "PFB weights", .. })
    ));
    assert!(matches!(run(&[], &gains, &models, &samples, 0), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(
        run(&weights, &gains[1..], &models, &samples, 0),
        Err(Error::ShapeMismatch { what: "PFB gains", .. })
    ));
    let mut bad = weights.clone();
    bad[77] = f32::NAN;
    assert!(matches!(
        run(&bad, &gains, &models, &samples, 0),
        Err(Error::NonFinite { what: "PFB weights", index: 77 })
    ));
    bad[77] = 2.0 * MAX_COEFFICIENT;
    assert!(matches!(run(&bad, &gains, &models, &samples, 0), Err(Error::InvalidConfig(_))));
    let mut g = gains.clone();
    g[70] = Complex::new(0.0, f32::INFINITY);
    assert!(matches!(run(&weights, &g, &models, &samples, 0), Err(Error::NonFinite { index: 141, .. })));
    let m = [DelayModel::default(), DelayModel { phase_rate: f64::NAN, ..Default::default() }];
    assert!(matches!(
        run(&weights, &gains, &m, &samples, 0),
        Err(Error::NonFinite { what: DELAY_MODEL_FIELDS, index: 9 })
    ));
    // Samples too short for the chunk's windows (the last window of the chunk at spectrum 16
    // ends at sample 128 x 23 + 512).
    match run(&weights, &gains, &models, &samples[..100], 16) {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("polarisation 0"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(run(&weights, &gains, &models, &[], 0).is_err());
    // Spectra past the stream positions, and an invalid configuration.
    assert!(matches!(run(&weights, &gains, &models, &samples, i64::MAX), Err(Error::InvalidConfig(_))));
    let zero = ChannelizerConfig { heaps_per_chunk: 0, ..c.clone() };
    assert!(matches!(
        reference_chunk(&zero, &weights, &gains, &models, [&samples, &samples], [&present, &present], 0),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn the_cpu_helpers_reject_out_of_range_input() {
    // unpack_sample: an index past the bytes, unsupported widths.
    let bytes = pack_samples(&[5, -6, 7], 10).unwrap();
    assert_eq!(bytes.len(), 4);
    assert_eq!(unpack_sample(&bytes, 10, 2).unwrap(), 7);
    assert!(unpack_sample(&bytes, 10, 3).is_err());
    assert!(unpack_sample(&bytes, 10, usize::MAX).is_err());
    for bits in [0, 1, 9, 32, 33, u32::MAX] {
        assert!(matches!(unpack_sample(&bytes, bits, 0), Err(Error::InvalidConfig(_))), "{bits}");
        assert!(matches!(pack_samples(&[0], bits), Err(Error::InvalidConfig(_))), "{bits}");
    }
    // output_value past the output reads (0, 0).
    let out = [1u8, 0xff, 0x7f];
    assert_eq!(output_value(&out, OutputFormat::Ci8, 0), (1, -1));
    assert_eq!(output_value(&out, OutputFormat::Ci8, 1), (0, 0), "half a value");
    assert_eq!(output_value(&out, OutputFormat::Ci8, usize::MAX), (0, 0));
    assert_eq!(output_value(&out, OutputFormat::Ci4, 3), (0, 0));
    assert_eq!(output_value(&[], OutputFormat::Ci4, 0), (0, 0));
    // hann_sinc_weights: zero and unsupported sizes give no weights.
    for (n, t) in [(0, 4), (64, 0), (0, 0), (65537, 1), (64, 33), (u32::MAX, u32::MAX)] {
        assert!(hann_sinc_weights(n, t).is_empty(), "{n} {t}");
    }
    assert_eq!(hann_sinc_weights(1, 1).len(), 2);
    // fused_twiddles: only powers of two in 64 ..= 65536.
    for n in [0, 1, 32, 96, 131072, u32::MAX] {
        assert!(matches!(fused_twiddles(n), Err(Error::InvalidConfig(_))), "{n}");
    }
    assert_eq!(fused_twiddles(64).unwrap().len(), 128);
    // lost_flags: zero sizes, mismatched polarisations, windows past the stream positions.
    let all = |_: i64| true;
    let starts = [vec![0i64, 10], vec![5, 15]];
    assert!(lost_flags(&starts, 8, 0, [&all, &all], 4).is_err());
    assert!(lost_flags(&starts, 8, 4, [&all, &all], 0).is_err());
    assert!(lost_flags(&starts, 0, 4, [&all, &all], 4).is_err());
    assert!(lost_flags(&starts, MAX_WINDOW + 1, 4, [&all, &all], 4).is_err());
    assert!(lost_flags(&starts, MAX_WINDOW, 1 << 20, [&all, &all], 4).is_ok());
    assert!(matches!(
        lost_flags(&[vec![0], vec![]], 8, 4, [&all, &all], 4),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(lost_flags(&[vec![i64::MAX - 2], vec![0]], 8, 4, [&all, &all], 4).is_err());
    assert_eq!(lost_flags(&starts, 8, 4, [&all, &all], 1).unwrap(), (vec![false, false], vec![false, false]));
    assert_eq!(lost_flags(&[vec![-1], vec![0]], 8, 4, [&all, &all], 4).unwrap(), (vec![true], vec![true]));
    // Schedule::new: an invalid configuration, non-finite models, delays past max_delay.
    let c = small_config();
    let ok = DelayModel { delay: 50.4, ..Default::default() };
    assert!(Schedule::new(&c, &[ok, ok], 0).is_ok());
    assert!(matches!(
        Schedule::new(&ChannelizerConfig { channels: 0, ..c.clone() }, &[ok, ok], 0),
        Err(Error::InvalidConfig(_))
    ));
    let far = DelayModel { delay: 50.6, ..Default::default() };
    assert!(matches!(Schedule::new(&c, &[ok, far], 0), Err(Error::InvalidConfig(_))));
    let inf = DelayModel { reference_sample: f64::NEG_INFINITY, ..Default::default() };
    assert!(matches!(
        Schedule::new(&c, &[inf, ok], 0),
        Err(Error::NonFinite { what: DELAY_MODEL_FIELDS, index: 0 })
    ));
    for first in [i64::MIN, i64::MIN + 1, -1, i64::MAX / 128, i64::MAX] {
        let _ = Schedule::new(&c, &[ok, ok], first);
    }
    // The quantiser's non-finite rule (the kernels' too): infinities clip, NaN is 0.
    assert_eq!(quantise_reference(f64::INFINITY, 127), (127, true));
    assert_eq!(quantise_reference(f64::NEG_INFINITY, 7), (-7, true));
    assert_eq!(quantise_reference(f64::NAN, 127), (0, true));
    assert_eq!(quantise_reference(127.5, 127), (127, true));
    assert_eq!(quantise_reference(126.5, 127), (126, false));
    let _ = quantise_reference(1e300, i32::MIN);
}

/// Output chunks each push completes, as `Channelizer::push` (and `ChannelizerStream::submit`)
/// plans them: a chunk is complete once the stream's end reaches its last window's end, with
/// `models(k)` in force at push k.
fn simulate_pushes(
    c: &ChannelizerConfig,
    pushes: usize,
    mut models: impl FnMut(usize) -> [DelayModel; 2],
) -> Vec<usize> {
    let (window, spectra) = (c.window() as i64, c.spectra_per_chunk() as i64);
    let (mut end, mut next) = (0i64, 0i64);
    (0..pushes)
        .map(|k| {
            end += c.chunk_samples as i64;
            let m = models(k);
            let mut done = 0;
            loop {
                let s = Schedule::new(c, &m, next).expect("delays within max_delay");
                let last = s.starts.iter().flatten().map(|&x| x + window).max().unwrap();
                if last > end {
                    break done;
                }
                done += 1;
                next += spectra;
            }
        })
        .collect()
}

/// The bound is reached: output chunks one push long, the delay flipped from -max_delay to
/// +max_delay (windows suddenly 2 max_delay earlier), and that push completes
/// `ceil((C + 2 max_delay) / (2 n S))` = 3 chunks; no push completes more.
#[test]
fn max_outputs_per_push_is_reached_by_a_delay_flip_and_never_passed() {
    let c = ChannelizerConfig {
        channels: 64,
        taps: 1,
        bits: 8,
        spectra_per_heap: 8,
        heaps_per_chunk: 1,
        chunk_samples: 1024,
        packet_samples: 256,
        max_delay: 1024,
        output: OutputFormat::Ci8,
    };
    c.validate().unwrap();
    assert_eq!(c.max_outputs_per_push(), 3);
    let late = DelayModel { delay: -1024.0, ..Default::default() };
    let early = DelayModel { delay: 1024.0, ..Default::default() };
    let counts = simulate_pushes(&c, 20, |k| if k < 10 { [late, late] } else { [early, early] });
    assert_eq!(counts[10], 3, "{counts:?}");
    assert!(counts.iter().all(|&n| n <= 3), "{counts:?}");
    // Without the delay range, exactly one chunk per push once the first window is in.
    let still = ChannelizerConfig { max_delay: 0, ..c };
    assert_eq!(still.max_outputs_per_push(), 1);
    let counts = simulate_pushes(&still, 20, |_| [DelayModel::default(); 2]);
    assert!(counts.iter().all(|&n| n <= 1) && counts.iter().sum::<usize>() >= 18, "{counts:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    /// `max_outputs_per_push` bounds every push of a stream whose delay models change at random
    /// pushes (steps anywhere in the delay range, and delay rates), for input chunks shorter
    /// and longer than output chunks: the streaming engine's output ring relies on it.
    #[test]
    fn max_outputs_per_push_bounds_every_push(
        log_channels in 6u32..=9,
        taps in 1u32..=8,
        spectra_per_heap in (1u32..=4).prop_map(|k| 4 * k),
        heaps_per_chunk in 1u32..=3,
        chunk_words in 1u32..=256,
        max_delay in prop_oneof![Just(0u32), 0u32..3000],
        seed in any::<u64>(),
    ) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let c = ChannelizerConfig {
            channels: 1 << log_channels,
            taps,
            bits: 8,
            spectra_per_heap,
            heaps_per_chunk,
            chunk_samples: 32 * chunk_words,
            packet_samples: 32,
            max_delay,
            output: OutputFormat::Ci8,
        };
        prop_assert!(c.validate().is_ok());
        let most = c.max_outputs_per_push();
        // Enough pushes for a few output chunks (the first is complete by `2nS + 2nT + D`).
        let first = 2 * c.channels as u64 * c.spectra_per_chunk() + c.window() + max_delay as u64;
        let pushes = ((3 * first + 2 * max_delay as u64) / c.chunk_samples as u64 + 5).min(3000) as usize;
        let length = pushes as f64 * c.chunk_samples as f64;
        let d = max_delay as f64;
        let model = |rng: &mut rand::rngs::StdRng| {
            if rng.random_range(0..3) == 0 {
                // A delay rate that stays within max_delay / 2 of a delay within max_delay / 2
                // over twice the pushed length (schedules are also computed for the chunk
                // after the last one pushed, whose windows reach past it).
                let rate = d / 4.0 / length;
                DelayModel {
                    delay: rng.random_range(-d / 2.0..=d / 2.0),
                    delay_rate: rng.random_range(-rate..=rate),
                    ..Default::default()
                }
            } else {
                DelayModel { delay: rng.random_range(-d..=d), ..Default::default() }
            }
        };
        let mut models = [model(&mut rng), model(&mut rng)];
        let mut changes = Vec::new();
        for _ in 0..pushes {
            if rng.random_range(0..4) == 0 {
                models = [model(&mut rng), model(&mut rng)];
            }
            changes.push(models);
        }
        let counts = simulate_pushes(&c, pushes, |k| changes[k]);
        for (k, &n) in counts.iter().enumerate() {
            prop_assert!(n <= most, "push {k} completed {n} > {most} chunks: {counts:?}");
        }
        if pushes as u64 * c.chunk_samples as u64 >= first {
            prop_assert!(counts.iter().sum::<usize>() > 0);
        }
    }
}
