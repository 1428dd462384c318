use super::*;

fn beams(pols: &[u32], dither: bool) -> Vec<Beam> {
    pols.iter().map(|&pol| Beam { pol, dither }).collect()
}

fn config(antennas: u32, pols: u32, channels: u32, times: u32, beam_pols: &[u32]) -> DelayBeamformerConfig {
    DelayBeamformerConfig {
        antennas,
        pols,
        channels,
        first_channel: 0,
        times,
        beams: beams(beam_pols, false),
    }
}

#[test]
fn validation_rejects_bad_configurations() {
    let good = config(4, 2, 3, 64, &[0, 1, 1]);
    assert!(good.validate().is_ok());
    let bad = [
        DelayBeamformerConfig { antennas: 0, ..good.clone() },
        DelayBeamformerConfig { antennas: 65536, ..good.clone() },
        DelayBeamformerConfig { pols: 3, ..good.clone() },
        DelayBeamformerConfig { channels: 0, ..good.clone() },
        DelayBeamformerConfig { channels: 65536, ..good.clone() },
        DelayBeamformerConfig { first_channel: (1 << 24) - 2, ..good.clone() },
        DelayBeamformerConfig { times: 0, ..good.clone() },
        DelayBeamformerConfig { times: 12, ..good.clone() },
        DelayBeamformerConfig { beams: vec![], ..good.clone() },
        DelayBeamformerConfig { beams: beams(&[0, 2], false), ..good.clone() },
        DelayBeamformerConfig { pols: 1, ..good.clone() },
        DelayBeamformerConfig { channels: 65535, times: 65536 + 8, ..good.clone() },
    ];
    for config in bad {
        assert!(matches!(config.validate(), Err(Error::InvalidConfig(_))), "{config:?}");
        assert!(matches!(Plan::new(&config, 100), Err(Error::InvalidConfig(_))));
    }
    assert!(DelayBeamformerConfig { first_channel: (1 << 24) - 3, ..good.clone() }.validate().is_ok());
    let input = vec![Complex::new(0i8, 0); good.input_len() - 1];
    let plan = Plan::new(&good, 100).unwrap();
    let w = vec![Complex::new(0.0f32, 0.0); good.steering_len()];
    let d = vec![0.0f32; good.steering_len()];
    let r = beamform_reference(&good, &plan, &input, &w, &d, None);
    assert!(matches!(r, Err(Error::ShapeMismatch { .. })));
    let dithered = DelayBeamformerConfig { beams: beams(&[0, 1], true), ..good.clone() };
    let plan = Plan::new(&dithered, 100).unwrap();
    let input = vec![Complex::new(0i8, 0); dithered.input_len()];
    let (w, d) = (&w[..dithered.steering_len()], &d[..dithered.steering_len()]);
    assert!(matches!(beamform_reference(&dithered, &plan, &input, w, d, None), Err(Error::InvalidConfig(_))));
    let mut few = vec![Xorwow::seeded(1); 3];
    assert!(matches!(
        beamform_reference(&dithered, &plan, &input, w, d, Some(&mut few)),
        Err(Error::ShapeMismatch { .. })
    ));
}

#[test]
fn plans_place_every_beam_once_in_a_slot_of_its_polarisation() {
    for (pols, beam_count) in
        [(1, 1), (1, 45), (2, 1), (2, 8), (2, 45), (2, 64), (2, 130), (2, 256), (1, 130)]
    {
        let beam_pols: Vec<u32> = (0..beam_count).map(|b| (b * 7 / 3) % pols).collect();
        let mut c = config(64, pols, 16, 4096, &beam_pols);
        for (b, beam) in c.beams.iter_mut().enumerate() {
            beam.dither = b % 3 == 0;
        }
        let plan = Plan::new(&c, 396).unwrap();
        let v = plan.variant;
        assert_eq!(v.pols(), pols);
        let mut seen = vec![0; beam_count as usize];
        for (n, &entry) in plan.slot_table.iter().enumerate() {
            if entry == layout::EMPTY_SLOT {
                continue;
            }
            let b = (entry & layout::BEAM_MASK) as usize;
            seen[b] += 1;
            assert_eq!(v.slot_pol(n as u32 % v.slots()), c.beams[b].pol);
            assert_eq!(entry & layout::DITHER_FLAG != 0, c.beams[b].dither);
        }
        assert!(seen.iter().all(|&n| n == 1), "{pols} {beam_count}");
        assert_eq!(plan.slot_table.len() as u32, plan.batches * v.slots());
        assert!(plan.groups * plan.tiles_per_group >= plan.tiles);
        assert!((plan.groups - 1) * plan.tiles_per_group < plan.tiles);
        assert!(plan.coefficient_antennas.is_multiple_of(v.stage_antennas()));
        assert!(plan.coefficient_antennas >= v.stage_antennas());
    }
    // MeerKAT: 8 single-pol beams from dual-pol input take one batch of the 8-slot kernel.
    let meerkat = Plan::new(&config(64, 2, 512, 4096, &[0, 1, 0, 1, 0, 1, 0, 1]), 396).unwrap();
    assert_eq!((meerkat.variant.slots(), meerkat.batches), (8, 1));
    let many = Plan::new(&config(64, 2, 512, 4096, &[0, 1].repeat(128)), 396).unwrap();
    assert_eq!((many.variant.slots(), many.batches), (8, 32));
}

#[test]
fn curand_offsets_equal_stepping() {
    for seed in [0u64, 1, 0xdead_beef_0123_4567] {
        let mut g = Xorwow::seeded(seed);
        for n in 0..=300u64 {
            assert_eq!(curand_init(seed, 0, n), g, "seed {seed} offset {n}");
            g.next_u32();
        }
    }
}

#[test]
fn subsequence_jumps_compose() {
    let seed = 0x5eed;
    // Sequential single jumps against the binary decomposition.
    let states = reference_states(seed, 1_000_000_007, 5, 40).unwrap();
    for (i, s) in states.iter().enumerate() {
        assert_eq!(*s, curand_init(seed, 1_000_000_007 + i as u64, 5));
    }
    // 2^67 steps is 2^64 steps done 8 times: the tables agree with each other.
    let t = jumps();
    let mut m = t.offset[63];
    for _ in 63..67 {
        m = xorwow::compose(&m, &m);
    }
    assert_eq!(m, t.sequence[0]);
    assert_eq!(xorwow::compose(&t.sequence[0], &t.sequence[0]), t.sequence[1]);
    // Offsets and subsequences commute; the Weyl counter only follows the offset.
    let g = curand_init(seed, 3, 7);
    let mut h = curand_init(seed, 3, 0);
    for _ in 0..7 {
        h.next_u32();
    }
    assert_eq!(g, h);
    assert_eq!(curand_init(seed, 9, 0).d, Xorwow::seeded(seed).d);
}

/// curand's own `curand_init` states and first eight `curand()` outputs, printed by
/// `scripts/curand_xorwow.cu` (nvcc 13.0.88, NVIDIA H200, driver 580.159.04, 2026-11-21);
/// `$RADIO_KERNELS_CURAND_REFERENCE` names a fresh file instead. Columns: seed,
/// subsequence, offset, d, v0..v4, r0..r7.
const CURAND: &str = "\
xorwow 0 0 0 716983765 1478573778 1163863128 4171507460 3705206908 1360900310 3179217846 1883133293 2220552389 674260989 306521119 1986458431 977720403 1414583917\n\
xorwow 1 0 0 3912863488 379486205 450422541 4171507460 3705206908 261812737 2898200796 3111669439 2179589753 379598403 3593604917 525081800 805670693 3634320042\n\
xorwow 42 0 0 3523456887 4285046900 3986065082 4171507460 3705206908 4167373432 300737663 2363150160 799977142 2317951200 1151197823 3621806847 3031260296 3889728505\n\
xorwow 16045690981402826360 0 0 3047829204 1144591578 692523552 2541367803 2100225397 1026918110 3336818595 486813872 2047268896 3689101373 3360373867 3139668472 2303597795 2972049638\n\
xorwow 0 1 0 716983765 3408372647 1835678088 1508631436 3181274380 3517576255 3955638199 1977250130 1432217238 1599962988 2102826641 2436410096 343192820 1002308619\n\
xorwow 0 2 0 716983765 338958172 330148274 822055007 2887150716 3556281650 167591721 1074664060 792354105 4133572041 2235765008 4037118697 3567306288 1759789125\n\
xorwow 0 3 0 716983765 1077961491 887333189 1237173540 1171992513 2591820218 4161663997 2124906702 2892148300 2417091812 516229349 4193974717 583391598 2529613805\n\
xorwow 42 1000 0 3523456887 1993724452 1275196854 1790436830 1930352544 2274458014 355484357 1650714997 3611160469 3120451954 1163074284 2254550262 4250632100 1723117581\n\
xorwow 16045690981402826360 1048583 0 3047829204 842269871 2476762769 3630357824 1844895112 2969425795 2996525016 2705224174 391084739 2567081862 669488264 3390367341 3644681230 1435283003\n\
xorwow 7 4294967296 0 1917454334 3640819906 2276080882 3767614869 1199121624 914877268 3784232645 3898749688 4049459885 3879297636 3867569096 497391939 377449604 3088488705\n\
xorwow 7 21474836603 0 1917454334 3718455353 2082567715 1036700634 1362247472 1397821416 3412941044 3759095396 1412128693 2780774142 1082616817 1883297753 778240433 3769740524\n\
xorwow 7 9223372036854775809 0 1917454334 3545197798 1391590078 1758745278 3893375855 4169756016 3406426580 2350900922 2225116526 2995190783 2082238240 3016950274 3930371685 2751998693\n\
xorwow 0 0 1 717346202 1163863128 4171507460 3705206908 1360900310 2461871644 1883133293 2220552389 674260989 306521119 1986458431 977720403 1414583917 618755781\n\
xorwow 0 0 7 719520824 1502481313 4250794772 3882692465 1267300044 258199579 1414583917 618755781 806591051 3931542097 2319818371 4186136636 2351362526 2805302092\n\
xorwow 42 0 1000 3885893887 2356372175 2503124388 4253771250 2175760227 3144401887 3825910127 3527362517 3967598188 2450925638 2588608083 3318115301 904223947 2314872953\n\
xorwow 16045690981402826360 3 1001 3410628641 3943427428 2418859391 410505796 3456812021 3372475896 4139128869 213638490 1091416976 4084959853 1876001836 1266793729 1033991090 3016785151\n\
xorwow 9 5 1099511627779 3711184807 1529784167 3735742325 3348625094 1604863605 3900452154 2529928388 4174322257 2536061871 3702527436 1559016221 463801764 3663467169 1930743085\n\
xorwow 18446744073709551615 18446744073709551615 18446744073709551615 4194869768 1332321613 1198045466 3264870385 2489960062 2275680540 306211019 1524243084 1962521252 26343130 2495307412 198143462 2098443895 4202559518
";

#[test]
fn curand_known_answers() {
    let text = std::env::var("RADIO_KERNELS_CURAND_REFERENCE")
        .map(|path| std::fs::read_to_string(path).expect("the curand reference file"))
        .unwrap_or_else(|_| CURAND.to_string());
    let mut cases = 0;
    for line in text.lines().filter(|l| l.starts_with("xorwow ")) {
        let n: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
        assert_eq!(n.len(), 17, "{line}");
        let mut g = curand_init(n[0], n[1], n[2]);
        let mut got = vec![g.d as u64];
        got.extend(g.v.map(u64::from));
        got.extend((0..8).map(|_| g.next_u32() as u64));
        assert_eq!(got, n[3..], "curand_init({}, {}, {})", n[0], n[1], n[2]);
        cases += 1;
    }
    println!("{cases} curand_init cases equal curand's");
    assert!(cases >= 18);
}

#[test]
fn steering_undoes_a_delay_and_adds_the_fringe_phase() {
    let c = config(2, 1, 1, 8, &[0, 0]);
    let weight =
        [Complex::new(1.0, 0.0), Complex::new(0.5, 0.5), Complex::new(2.0, 0.0), Complex::new(0.0, -1.0)];
    let (w, d) =
        steering(&c, &weight, &[2.0, 0.25], &[1e-9, 0.0, -2e-9, 3e-9], &[0.0, 0.3, 1.0, 0.0], 208e3).unwrap();
    // Antenna 0 beam 0: no phase; d = 2 * 208e3 * 1e-9.
    assert_eq!(w[0], Complex::new(2.0, 0.0));
    assert_eq!(d[0], (2.0 * 208e3 * 1e-9) as f32);
    // The applied phase at channel c is phase + 2 pi c df tau: W(c) = w exp(j pi c d).
    let Complex { re, im } = coefficient_reference(w[2], d[2], 1000);
    let angle = 1.0 - 2.0 * std::f64::consts::PI * 1000.0 * 208e3 * 2e-9;
    let expected = (4.0 * angle.cos(), 4.0 * angle.sin());
    assert!((re - expected.0).abs() < 1e-5 && (im - expected.1).abs() < 1e-5, "{re} {im} {expected:?}");
    assert!(matches!(
        steering(&c, &weight[..3], &[1.0, 1.0], &[0.0; 4], &[0.0; 4], 1.0),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        steering(&c, &weight, &[1.0, f64::NAN], &[0.0; 4], &[0.0; 4], 1.0),
        Err(Error::NonFinite { what: "beam gains", index: 1 })
    ));
}

#[test]
fn reference_passes_a_unit_beam_through_and_saturates_the_negated_minimum() {
    // One antenna, weight 1: the beam is its polarisation's input; with c d = 1 (W = -1)
    // it is negated, and -(-128) saturates to 127.
    let mut c = config(1, 2, 2, 16, &[1, 0]);
    c.first_channel = 1;
    let plan = Plan::new(&c, 10).unwrap();
    let input: Vec<Complex<i8>> = (0..c.input_len())
        .map(|i| Complex::new((i as i32 * 37 - 128) as i8, (i as i32 * 11 - 100) as i8))
        .collect();
    let w = vec![Complex::new(1.0f32, 0.0); 2];
    let r = beamform_reference(&c, &plan, &input, &w, &[0.0, 1.0], None).unwrap();
    let clamp = |x: Complex<i8>, sign: i32| {
        let f = |v: i8| (sign * v as i32).clamp(-127, 127) as i8;
        Complex::new(f(x.re), f(x.im))
    };
    let mut minima = [0u32; 2];
    for t in 0..16 {
        for ch in 0..2 {
            let x1 = input[c.input_index(0, ch, t, 1)];
            assert_eq!(r.output[c.output_index(0, ch, t)], clamp(x1, 1));
            let x0 = input[c.input_index(0, ch, t, 0)];
            // Channel index 1 + ch: d = 1 gives W = exp(j pi (1 + ch)) = -1, then +1.
            let sign = if ch == 0 { -1 } else { 1 };
            assert_eq!(r.output[c.output_index(1, ch, t)], clamp(x0, sign));
            // -128 saturates either way: negated it is 128, kept it is below -127.
            minima[0] += (x1.re == -128 || x1.im == -128) as u32;
            minima[1] += (x0.re == -128 || x0.im == -128) as u32;
        }
    }
    assert!(minima[1] > 0);
    assert_eq!(r.saturated, minima.to_vec());
}

#[test]
fn reference_dither_consumes_two_draws_per_dithered_sample() {
    let mut c = config(3, 2, 2, 200, &[0, 1, 1]);
    c.beams[1].dither = true;
    c.beams[2].dither = true;
    let plan = Plan::new(&c, 7).unwrap();
    let input = vec![Complex::new(1i8, -1); c.input_len()];
    let w = vec![Complex::new(0.25f32, 0.0); c.steering_len()];
    let d = vec![0.0f32; c.steering_len()];
    let start = reference_states(11, 0, 0, plan.state_count() as usize).unwrap();
    let mut states = start.clone();
    let r = beamform_reference(&c, &plan, &input, &w, &d, Some(&mut states)).unwrap();
    // 2 dithered beams x 2 channels x 200 samples x 2 components.
    let mut draws = 0u64;
    for (before, after) in start.iter().zip(&states) {
        let mut g = *before;
        let mut n = 0;
        while g != *after {
            g.next_u32();
            n += 1;
            assert!(n <= 64, "a state advanced too far");
        }
        draws += n;
    }
    assert_eq!(draws, 2 * 2 * 200 * 2);
    // Beam 0 is not dithered: 3 * 0.25 * (1, -1) rounds to (1, -1) exactly.
    for t in 0..200 {
        assert_eq!(r.values[c.output_index(0, 1, t)], Complex::new(0.75, -0.75));
        let v = r.values[c.output_index(1, 1, t)];
        assert!((v.re - 0.75).abs() < 0.5 && (v.im + 0.75).abs() < 0.5 && v != Complex::new(0.75, -0.75));
    }
}
