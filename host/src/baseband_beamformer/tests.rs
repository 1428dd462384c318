//! CPU tests of the configuration and the reference.
use super::*;
use crate::error::Error;
use crate::Shift;
use num_complex::Complex;
use radio_kernels_gpu::baseband_beamformer::{INSTANCES, KERNELS};
use radio_kernels_gpu::packing::Ci4;

fn shifts(values: &[i32]) -> Vec<Shift> {
    values.iter().map(|&s| Shift::new(s).unwrap()).collect()
}

fn config(dishes: u32, beams: u32, freqs: u32, times: u32) -> BeamformerConfig {
    BeamformerConfig { dishes, beams, freqs, times }
}

#[test]
fn validation_accepts_the_documented_ranges_and_names_each_violation() {
    for (d, b) in [(512, 96), (512, 16), (512, 128), (64, 16), (1024, 64), (64, 128), (576, 8)] {
        config(d, b, 16, 256).validate().unwrap();
    }
    let cases = [
        (config(0, 8, 1, 128), "dishes"),
        (config(96, 8, 1, 128), "dishes"),
        (config(1088, 8, 1, 128), "dishes"),
        (config(64, 0, 1, 128), "beams"),
        (config(64, 12, 1, 128), "beams"),
        (config(64, 136, 1, 128), "beams"),
        (config(1024, 72, 1, 128), "65536"),
        (config(64, 8, 0, 128), "freqs"),
        (config(64, 8, 1, 0), "times"),
        (config(64, 8, 1, 192), "times"),
    ];
    for (c, word) in cases {
        match c.validate() {
            Err(Error::InvalidConfig(m)) => assert!(m.contains(word), "{c:?}: {m}"),
            other => panic!("{c:?}: {other:?}"),
        }
    }
}

#[test]
fn weights_and_shifts_are_checked() {
    let c = config(64, 8, 2, 128);
    let w = vec![Complex::new(0i8, 0); c.weights_len()];
    let s = vec![Shift::ZERO; c.shifts_len()];
    c.check_weights(&w, &s).unwrap();
    assert!(matches!(c.check_weights(&w[1..], &s), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(c.check_weights(&w, &s[1..]), Err(Error::ShapeMismatch { .. })));
    // Out-of-range shifts cannot be made at all.
    assert!(matches!(Shift::new(32), Err(Error::InvalidConfig(_))));
    assert!(matches!(Shift::new(-1), Err(Error::InvalidConfig(_))));
    let e = vec![Ci4::default(); c.e_len() - 1];
    assert!(matches!(beamform_reference(&c, &e, &w, &s), Err(Error::ShapeMismatch { .. })));
}

#[test]
fn indices_follow_the_documented_layouts() {
    let c = config(128, 16, 3, 256);
    assert_eq!(c.e_index(1, 0, 0, 0), 3 * 2 * 128);
    assert_eq!(c.e_index(0, 1, 1, 5), (2 + 1) * 128 + 5);
    assert_eq!(c.weight_index(0, 1, 2, 3), (16 + 2) * 128 + 3);
    assert_eq!(c.output_index(1, 0, 0, 0), 3 * 2 * 256);
    assert_eq!(c.output_index(0, 2, 1, 7), 5 * 256 + 7);
    assert_eq!(c.items(), 3 * 2 * 2);
    assert_eq!(c.useful_ops(), 8.0 * 2.0 * 3.0 * 16.0 * 128.0 * 256.0);
}

/// One dish, hand-computed products, including -8 x -128 and rounding ties.
#[test]
fn reference_on_hand_computed_values() {
    let c = config(64, 8, 1, 128);
    let mut e = vec![Ci4::default(); c.e_len()];
    let mut w = vec![Complex::new(0i8, 0); c.weights_len()];
    let mut s = vec![0i32; c.shifts_len()];
    // E[0][0][0][3] = -8 - 8i; A[0][0][beam 0][3] = -128 - 128i:
    // (-128 - 128i)(-8 - 8i) = 1024 - 1024 + (1024 + 1024) i = 0 + 2048i.
    e[c.e_index(0, 0, 0, 3)] = Ci4::wrapping(-8, -8);
    w[c.weight_index(0, 0, 0, 3)] = Complex::new(-128, -128);
    s[c.shift_index(0, 0, 0)] = 8; // 2048 / 256 = 8 -> saturates to 7
                                   // Beam 1: A = 3 + 0i, E = 5 - 3i -> 15 - 9i; s = 1: 7.5 -> 8 (round half up) -> 7,
                                   // -4.5 -> -4.
    e[c.e_index(0, 0, 0, 4)] = Ci4::wrapping(5, -3);
    w[c.weight_index(0, 0, 1, 4)] = Complex::new(3, 0);
    s[c.shift_index(0, 0, 1)] = 1;
    // Beam 2: same product, s = 2: 3.75 -> 4, -2.25 -> -2.
    w[c.weight_index(0, 0, 2, 4)] = Complex::new(3, 0);
    s[c.shift_index(0, 0, 2)] = 2;
    // Beam 3, polarisation 1 at time 1: A = 0 + 1i, E = 2 + 1i -> -1 + 2i, s = 0.
    e[c.e_index(1, 0, 1, 0)] = Ci4::wrapping(2, 1);
    w[c.weight_index(0, 1, 3, 0)] = Complex::new(0, 1);
    let j = beamform_reference(&c, &e, &w, &shifts(&s)).unwrap();
    let at = |beam, p, tau| {
        let v = j[c.output_index(beam, 0, p, tau)];
        (v.re(), v.im())
    };
    assert_eq!(at(0, 0, 0), (0, 7));
    assert_eq!(at(1, 0, 0), (7, -4));
    assert_eq!(at(2, 0, 0), (4, -2));
    assert_eq!(at(3, 1, 1), (-1, 2));
    assert_eq!(at(3, 1, 0), (0, 0));
    let nonzero = j.iter().filter(|&&b| b != Ci4::default()).count();
    assert_eq!(nonzero, 4);
}

/// The override of `with_kernel`: an instance of the dish count that takes the block, or a
/// typed error naming why not.
#[test]
fn forced_instances_are_checked_against_the_block() {
    let chord = config(512, 96, 16, 128);
    assert_eq!(instance_for(&chord, 12, None).unwrap().spec.name, "baseband_beamform_d512_w12");
    let w16 = &INSTANCES.iter().find(|k| k.dishes == 512 && k.warps == 16).unwrap().spec;
    assert_eq!(instance_for(&chord, 12, Some(w16)).unwrap().spec, *w16);
    let rejects = |spec: &radio_kernels_gpu::modules::KernelSpec, c: &BeamformerConfig, warps, word: &str| {
        match instance_for(c, warps, Some(spec)) {
            Err(Error::InvalidConfig(m)) => assert!(m.contains(word), "{m}"),
            other => panic!("{other:?}"),
        }
    };
    // Another dish count; too few warps for the block; not a baseband kernel.
    rejects(&KERNELS[0], &chord, 12, "not 12 warps x 512 dishes");
    let w12 = &INSTANCES.iter().find(|k| k.dishes == 512 && k.warps == 12).unwrap().spec;
    rejects(w12, &config(512, 128, 1, 128), 16, "at most 12 warps");
    let other = radio_kernels_gpu::delay_beamformer::VARIANTS[0].spec();
    rejects(&other, &chord, 12, "not a baseband beamformer kernel");
    // At 576 dishes the 12-warp instance takes at most 12 of the 14 warps a block may have.
    assert!(instance_for(&config(576, 112, 1, 128), 14, None).is_err());
}
