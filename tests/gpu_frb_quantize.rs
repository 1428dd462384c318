//! GPU tests of the FRB beamformer's third kernel (the network quantiser): transpose + quantise of J
//! to U8 and U4 rows, bit-exact against `quantize_reference` (every output byte, padding
//! included, and every clip count), on random J with values that clip at both ends, exact
//! ties (x.5 after scaling), zeros, NaN and infinities, for odd and ragged shapes (beam counts
//! not a multiple of 8 take the scalar-load path) and the full CHORD shape of one channel.
//! Outputs are poisoned before each launch.
mod common;

use common::*;
use half::f16;
use radio_kernels::frb_beamformer::quantize::{quantize_reference, Format, QuantizeConfig, Quantizer};
use radio_kernels::Error;
use rand::Rng;

/// J with a mix of ordinary values, zeros, values that land on ties after `scale` = 2^k
/// (offset 0.5 or 0), huge values, negatives, NaN and infinities.
fn random_j(rng: &mut impl Rng, len: usize, max: f32) -> Vec<f16> {
    (0..len)
        .map(|_| {
            let x = match rng.random_range(0..100) {
                0..10 => 0.0,
                10..30 => rng.random_range(0..(2.0 * max) as u32) as f32 / 2.0, // halves: ties at scale 1
                30..33 => rng.random_range(-3.0..0.0),
                33..36 => 1e4,
                36 => f32::NAN,
                37 => f32::INFINITY,
                38 => f32::NEG_INFINITY,
                _ => rng.random_range(0.0..1.2 * max),
            };
            f16::from_f32(x)
        })
        .collect()
}

fn check(gpu: &radio_kernels::Gpu, config: QuantizeConfig, rng: &mut impl Rng) {
    let max = config.format.max() as f32;
    let j = random_j(rng, config.input_len(), max);
    // Scales: 1 (ties stay ties), powers of two, random; offsets 0, -0.5, random.
    let scale: Vec<f32> = (0..config.params_len())
        .map(|i| match i % 4 {
            0 => 1.0,
            1 => 0.5,
            2 => 2.0,
            _ => rng.random_range(0.1..3.0),
        })
        .collect();
    let offset: Vec<f32> = (0..config.params_len())
        .map(|i| match i % 3 {
            0 => 0.0,
            1 => -0.5,
            _ => rng.random_range(-2.0..2.0),
        })
        .collect();
    let want = quantize_reference(&config, &j, &scale, &offset).expect("reference");
    let q = Quantizer::new(gpu, config).expect("quantizer");
    let (jd, sd, od) = (gpu.upload(&j).unwrap(), gpu.upload(&scale).unwrap(), gpu.upload(&offset).unwrap());
    let mut out = gpu.alloc::<u8>(config.output_len(), 0xa5).unwrap();
    let mut sat = gpu.alloc::<u32>(config.params_len(), 0x5a).unwrap();
    q.quantize(&jd, &sd, &od, &mut out, &mut sat).expect("launch");
    let got = out.download().unwrap();
    let got_sat = sat.download().unwrap();
    if let Some(i) = got.iter().zip(&want.output).position(|(a, b)| a != b) {
        let row = config.row_bytes() as usize;
        panic!(
            "{config:?}: byte {i} (row {}, byte {}) is {:#04x}, want {:#04x}",
            i / row,
            i % row,
            got[i],
            want.output[i]
        );
    }
    assert_eq!(got_sat, want.saturated, "{config:?}: saturation counts");
    let clipped: u64 = got_sat.iter().map(|&n| n as u64).sum();
    assert!(clipped > 0 || config.input_len() < 1000, "{config:?}: the test data should clip");
    println!("{config:?}: {} bytes exact, {clipped} clipped", got.len());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn quantize_matches_the_reference_bit_for_bit() {
    let gpu = gpu();
    let mut rng = rng();
    for format in [Format::U8, Format::U4] {
        for (channels, times, beams) in [
            (1, 1, 1),
            (2, 3, 5),
            (3, 128, 64),
            (2, 129, 65),
            (2, 200, 72),
            (1, 917, 8),
            (3, 33, 130),
            (1, 31, 257),
            (2, 917, 640),
            (1, 917, 5760),
        ] {
            check(&gpu, QuantizeConfig { channels, times, beams, format }, &mut rng);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn counts_are_reset_and_bad_buffers_rejected() {
    let gpu = gpu();
    let mut rng = rng();
    let config = QuantizeConfig { channels: 2, times: 100, beams: 24, format: Format::U4 };
    // Twice with the same buffers: the second call's counts are its own, not a sum.
    check(&gpu, config, &mut rng);
    let q = Quantizer::new(&gpu, config).unwrap();
    let j = gpu.upload(&vec![f16::from_f32(100.0); config.input_len()]).unwrap();
    let p = gpu.upload(&vec![1.0f32; config.params_len()]).unwrap();
    let mut out = gpu.alloc::<u8>(config.output_len(), 0).unwrap();
    let mut sat = gpu.alloc::<u32>(config.params_len(), 0).unwrap();
    for _ in 0..2 {
        q.quantize(&j, &p, &p, &mut out, &mut sat).unwrap();
        assert!(sat.download().unwrap().iter().all(|&n| n == 100));
    }
    let mut short = gpu.alloc::<u8>(config.output_len() - 16, 0).unwrap();
    assert!(matches!(q.quantize(&j, &p, &p, &mut short, &mut sat), Err(Error::ShapeMismatch { .. })));
    let short_p = gpu.upload(&vec![1.0f32; config.params_len() - 1]).unwrap();
    assert!(matches!(q.quantize(&j, &short_p, &p, &mut out, &mut sat), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(
        Quantizer::new(&gpu, QuantizeConfig { beams: 0, ..config }),
        Err(Error::InvalidConfig(_))
    ));
}

/// Non-finite scale and offset are quantised and counted as clipped, as the reference does
/// (the module's documented rule): NaN, +-inf and f32 extremes in scale and offset, next to
/// J's own NaN and infinities, bit-exact bytes and counts.
#[test]
#[ignore = "needs a CUDA GPU"]
fn non_finite_scale_and_offset_count_as_clipped() {
    let gpu = gpu();
    let mut rng = rng();
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN, 0.0, -0.0, 1.0];
    for format in [Format::U8, Format::U4] {
        let config = QuantizeConfig { channels: 2, times: 130, beams: 64, format };
        let j = random_j(&mut rng, config.input_len(), config.format.max() as f32);
        let scale: Vec<f32> = (0..config.params_len()).map(|i| specials[i % 8]).collect();
        let offset: Vec<f32> = (0..config.params_len()).map(|i| specials[(i / 8) % 8]).collect();
        let want = quantize_reference(&config, &j, &scale, &offset).unwrap();
        let q = Quantizer::new(&gpu, config).unwrap();
        let (jd, sd, od) =
            (gpu.upload(&j).unwrap(), gpu.upload(&scale).unwrap(), gpu.upload(&offset).unwrap());
        let mut out = gpu.alloc::<u8>(config.output_len(), 0xa5).unwrap();
        let mut sat = gpu.alloc::<u32>(config.params_len(), 0x5a).unwrap();
        q.quantize(&jd, &sd, &od, &mut out, &mut sat).unwrap();
        assert_eq!(out.download().unwrap(), want.output, "{config:?}: bytes");
        assert_eq!(sat.download().unwrap(), want.saturated, "{config:?}: clip counts");
        // A non-finite scale or offset clips every sample of its row.
        for (at, (&s, &o)) in scale.iter().zip(&offset).enumerate() {
            if !s.is_finite() || !o.is_finite() {
                assert_eq!(want.saturated[at], config.times, "{config:?} row {at}: scale {s}, offset {o}");
            }
        }
    }
}

/// Buffers of another GPU are `WrongDevice` (on a machine with one GPU the test says so).
#[test]
#[ignore = "needs a CUDA GPU"]
fn buffers_of_another_device_are_refused() {
    let gpu = gpu();
    let Some(other) = second_gpu() else { return };
    let config = QuantizeConfig { channels: 1, times: 16, beams: 8, format: Format::U8 };
    let q = Quantizer::new(&gpu, config).unwrap();
    let j = gpu.alloc::<f16>(config.input_len(), 0).unwrap();
    let p = gpu.upload(&vec![1.0f32; config.params_len()]).unwrap();
    let foreign_p = other.upload(&vec![1.0f32; config.params_len()]).unwrap();
    let mut out = gpu.alloc::<u8>(config.output_len(), 0).unwrap();
    let mut sat = gpu.alloc::<u32>(config.params_len(), 0).unwrap();
    let mut foreign_sat = other.alloc::<u32>(config.params_len(), 0).unwrap();
    let wrong = |r: radio_kernels::Result<()>| matches!(r, Err(Error::WrongDevice { .. }));
    assert!(wrong(q.quantize(&j, &foreign_p, &p, &mut out, &mut sat)));
    assert!(wrong(q.quantize(&j, &p, &foreign_p, &mut out, &mut sat)));
    assert!(wrong(q.quantize(&j, &p, &p, &mut out, &mut foreign_sat)));
    q.quantize(&j, &p, &p, &mut out, &mut sat).unwrap();
}

/// Any valid small job: both formats, 1 to 3 channels, 1 to 300 samples (ragged tiles, odd
/// counts for U4's nibbles), 1 to 200 beams (the vector and scalar load paths), random J with
/// clips, ties, zeros and non-finite values ([`random_j`]), random finite scales and offsets:
/// bytes and clip counts bit-exact ([`check`]).
#[test]
#[ignore = "needs a CUDA GPU"]
fn property_random_jobs_are_bit_exact() {
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    let gpu = gpu();
    let format = prop_oneof![Just(Format::U8), Just(Format::U4)];
    let strategy = (
        format,
        1u32..=3,
        prop_oneof![Just(1u32), 1u32..=300],
        prop_oneof![Just(8u32), 1u32..=200],
        any::<u64>(),
    );
    gpu_proptest(16, strategy, |(format, channels, times, beams, seed)| {
        let mut rng = StdRng::seed_from_u64(seed);
        check(&gpu, QuantizeConfig { channels, times, beams, format }, &mut rng);
        Ok(())
    });
}
