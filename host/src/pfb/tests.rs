use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn rng() -> StdRng {
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    println!("seed {seed}");
    StdRng::seed_from_u64(seed)
}

#[test]
fn pack_and_unpack_agree_at_every_width_including_the_extremes() {
    let mut rng = rng();
    for bits in BITS {
        let (lo, hi) = (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1);
        let mut samples: Vec<i32> = (0..997).map(|_| rng.random_range(lo..=hi)).collect();
        samples[..6].copy_from_slice(&[lo, hi, 0, -1, 1, lo]);
        samples[996] = hi;
        let bytes = pack_samples(&samples, bits).unwrap();
        let mut padded = bytes.clone();
        padded.resize(bytes.len().next_multiple_of(4) + 4, 0);
        let word = |i: usize| u32::from_le_bytes(padded[4 * i..4 * i + 4].try_into().unwrap());
        for (i, &s) in samples.iter().enumerate() {
            assert_eq!(
                unpack_sample(&bytes, bits, i).unwrap(),
                s,
                "reference unpack, bits {bits}, sample {i}"
            );
            if i + 1 < samples.len() {
                let pair = layout::unpack_pair(word, i as u64, bits);
                assert_eq!(pair, (s, samples[i + 1]), "kernel unpack, bits {bits}, sample {i}");
            }
        }
    }
}

/// The post kernel's columns ([`layout::post_thread_columns`]: no thread with the
/// self-mirrored column 0) cover every column once, n/8 twice (as its own mirror), and
/// give bit for bit the values of the thread-0 formulation ([`layout::post_columns`],
/// checked against rustfft in `unzipped_fft_and_r2c_fixup_match_a_real_fft`): column 0 from its own
/// unzip alone, column n/8 as a thread whose mirror is itself, with the same rotations in
/// both halves, and every other column with [`layout::post_rotations`].
#[test]
fn post_thread_columns_give_the_values_of_the_thread_0_formulation() {
    let mut rng = rng();
    for n in [64u32, 1024, 32768] {
        let a = n / UNZIP;
        let mut seen = vec![0u32; a as usize];
        seen[0] += 1; // column 0, computed apart
        for t in 0..layout::post_threads_per_group(n) {
            let (u, w) = layout::post_thread_columns(t, n);
            seen[u as usize] += 1;
            seen[w as usize] += 1;
        }
        assert!(seen.iter().enumerate().all(|(c, &k)| k == if c as u32 == a / 2 { 2 } else { 1 }), "n {n}");
        let bits = |v: &[[f32; 2]; 4]| v.map(|x| x.map(f32::to_bits));
        for _ in 0..100 {
            let u = rng.random_range(1..a / 2);
            let mut c = || [rng.random_range(-3e4f32..3e4), rng.random_range(-3e4f32..3e4)];
            let (y, ym) = ([c(), c(), c(), c()], [c(), c(), c(), c()]);
            let (fine, fringe, step) = (c()[0] / 3e4 * 0.5, c(), c());
            // Thread 0 of the other formulation: columns 0 and n/8.
            let (tw0, e0) = layout::column_twiddles(0, n);
            let (tw8, e8) = layout::column_twiddles(a / 2, n);
            let (x0, x8) = layout::post_pair_x2(0, y, ym, &tw0, &tw8, e0, e8);
            let (_, r8) = layout::rotations(0, n, fine, fringe, step);
            let z0 = layout::unzip_column(y, &tw0);
            let (c0, _) = layout::fixup_pair(0, z0, z0, e0, e0, layout::r2c_fixup_pair_x2);
            assert_eq!(bits(&c0), bits(&x0), "n {n}: column 0");
            let z8 = layout::unzip_column(ym, &tw8);
            let (d, dm) = layout::fixup_pair(1, z8, z8, e8, e8, layout::r2c_fixup_pair_x2);
            assert_eq!(bits(&d), bits(&x8), "n {n}: column n/8");
            assert_eq!(bits(&dm), bits(&x8), "n {n}: column n/8 as its own mirror");
            let (s8, s8m) = layout::post_rotations(a / 2, n, fine, fringe, step);
            assert_eq!(bits(&s8), bits(&r8), "n {n}: rotations of column n/8");
            assert_eq!(bits(&s8m), bits(&r8), "n {n}: its mirror's rotations");
            // Any other thread.
            let (tw, e) = layout::column_twiddles(u, n);
            let (twm, em) = layout::column_twiddles(a - u, n);
            let (x, xm) = layout::post_pair_x2(u, y, ym, &tw, &twm, e, em);
            let (z, zm) = (layout::unzip_column(y, &tw), layout::unzip_column(ym, &twm));
            let (h, hm) = layout::fixup_pair(1, z, zm, e, em, layout::r2c_fixup_pair_x2);
            assert_eq!((bits(&h), bits(&hm)), (bits(&x), bits(&xm)), "n {n} u {u}");
            let (r, rm) = layout::rotations(u, n, fine, fringe, step);
            let (q, qm) = layout::post_rotations(u, n, fine, fringe, step);
            assert_eq!((bits(&q), bits(&qm)), (bits(&r), bits(&rm)), "n {n} u {u}");
        }
    }
}

/// The paired fix-up gives channel k's value of the single-channel fix-up and its mirror's
/// with the mirror's twiddle `-conj(t)`, bit for bit, and twice both without the halving.
#[test]
fn paired_r2c_fixup_is_both_single_fixups() {
    let mut rng = rng();
    let bits = |x: [f32; 2]| x.map(f32::to_bits);
    for _ in 0..20_000 {
        let mut c = || [rng.random_range(-3e4f32..3e4), rng.random_range(-3e4f32..3e4)];
        let (z, m) = (c(), c());
        let phase = rng.random_range(0.0..std::f64::consts::TAU);
        let t = [phase.cos() as f32, phase.sin() as f32];
        let (x, xm) = layout::r2c_fixup_pair(z, m, t);
        assert_eq!(bits(x), bits(layout::r2c_fixup(z, m, t)));
        assert_eq!(bits(xm), bits(layout::r2c_fixup(m, z, [-t[0], t[1]])));
        let (x2, xm2) = layout::r2c_fixup_pair_x2(z, m, t);
        assert_eq!(bits(x2), bits(x.map(|v| 2.0 * v)));
        assert_eq!(bits(xm2), bits(xm.map(|v| 2.0 * v)));
    }
}

/// The 32-bit unpack equals the 64-bit one for every width, bit offset and word pair, and
/// twice the post arithmetic is the post arithmetic doubled, bit for bit (the halves are
/// exact).
#[test]
fn unpack_words32_and_post_pair_x2_are_exact() {
    let mut rng = rng();
    for bits in BITS {
        for shift in 0..32 {
            for _ in 0..200 {
                let (a, b) = (rng.random::<u32>(), rng.random::<u32>());
                assert_eq!(
                    layout::unpack_words32(a, b, shift, bits),
                    layout::unpack_words(a, b, shift, bits),
                    "bits {bits} shift {shift}"
                );
            }
        }
    }
    for n in [64u32, 1024, 32768] {
        for _ in 0..200 {
            let u = rng.random_range(0..layout::post_threads_per_group(n));
            let (_, w) = layout::post_columns(u, n);
            let mut c = || [rng.random_range(-3e4f32..3e4), rng.random_range(-3e4f32..3e4)];
            let (y, ym) = ([c(), c(), c(), c()], [c(), c(), c(), c()]);
            let (tw, e) = layout::column_twiddles(u, n);
            let (twm, em) = layout::column_twiddles(w, n);
            let (x, xm) = layout::post_pair(u, y, ym, &tw, &twm, e, em);
            let (x2, xm2) = layout::post_pair_x2(u, y, ym, &tw, &twm, e, em);
            for (a, b) in x.iter().chain(&xm).zip(x2.iter().chain(&xm2)) {
                for k in 0..2 {
                    assert_eq!((2.0 * a[k]).to_bits(), b[k].to_bits(), "n {n} u {u}");
                    let g = c();
                    let (half, full) = ([0.5 * g[0], 0.5 * g[1]], g);
                    let r = c();
                    let one = layout::cmul(*a, layout::cmul(full, r));
                    let two = layout::cmul(*b, layout::cmul(half, r));
                    assert_eq!([one[0].to_bits(), one[1].to_bits()], [two[0].to_bits(), two[1].to_bits()]);
                }
            }
        }
    }
}

#[test]
fn ten_bit_packing_is_msb_first() {
    // 0x1ff (511), -512 (0x200), 1, -1 (0x3ff): bits 0111111111 1000000000 0000000001 1111111111
    let bytes = pack_samples(&[511, -512, 1, -1], 10).unwrap();
    assert_eq!(bytes, vec![0x7f, 0xe0, 0x00, 0x07, 0xff]);
    assert!(pack_samples(&[512], 10).is_err());
    assert!(matches!(pack_samples(&[0], 9), Err(Error::InvalidConfig(_))));
}

#[test]
fn weights_are_normalised_symmetric_and_peak_in_the_middle() {
    for (n, t) in [(64, 1), (64, 4), (1024, 16)] {
        let w = hann_sinc_weights(n, t);
        assert_eq!(w.len(), 2 * n as usize * t as usize);
        let energy: f64 = w.iter().map(|&v| v as f64 * v as f64).sum();
        assert!((energy - 1.0).abs() < 1e-6, "energy {energy}");
        for i in 0..w.len() {
            assert_eq!(w[i], w[w.len() - 1 - i], "symmetric at {i}");
        }
        let peak = w.iter().cloned().fold(f32::MIN, f32::max);
        assert_eq!(peak, w[w.len() / 2]);
    }
}

/// The post-processing arithmetic (unzip + R2C fix-up) against rustfft of the real input.
#[test]
fn unzipped_fft_and_r2c_fixup_match_a_real_fft() {
    let mut rng = rng();
    for n in [64u32, 256, 4096] {
        let a = (n / 4) as usize;
        let g: Vec<f64> = (0..2 * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        // z[q] = g[2q] + j g[2q+1], unzipped rows, each row FFT'd (what cuFFT does).
        let mut rows = vec![Complex::new(0.0f64, 0.0); n as usize];
        for q in 0..n {
            rows[layout::fft_index(q, n) as usize] = Complex::new(g[2 * q as usize], g[2 * q as usize + 1]);
        }
        let fft_a = FftPlanner::<f64>::new().plan_fft_forward(a);
        for r in rows.chunks_mut(a) {
            fft_a.process(r);
        }
        let mut full: Vec<Complex<f64>> = g.iter().map(|&v| Complex::new(v, 0.0)).collect();
        FftPlanner::<f64>::new().plan_fft_forward(2 * n as usize).process(&mut full);
        let c32 = |c: Complex<f64>| [c.re as f32, c.im as f32];
        let scale = (2.0 * n as f64).sqrt();
        let mut seen = vec![false; n as usize];
        for u in 0..layout::post_threads_per_group(n) {
            let (_, w) = layout::post_columns(u, n);
            let y: [_; 4] = std::array::from_fn(|r| c32(rows[r * a + u as usize]));
            let ym: [_; 4] = std::array::from_fn(|r| c32(rows[r * a + w as usize]));
            let (tw, e) = layout::column_twiddles(u, n);
            let (twm, em) = layout::column_twiddles(w, n);
            let (x, xm) = layout::post_pair(u, y, ym, &tw, &twm, e, em);
            for v in 0..4 {
                let mut check = |col: u32, got: [f32; 2]| {
                    let k = (col + a as u32 * v) as usize;
                    let want = full[k];
                    let err = ((got[0] as f64 - want.re).powi(2) + (got[1] as f64 - want.im).powi(2)).sqrt();
                    assert!(err < 1e-5 * scale, "n {n} channel {k}: got {got:?}, want {want}");
                    seen[k] = true;
                };
                check(u, x[v as usize]);
                if w != u {
                    check(w, xm[v as usize]);
                }
            }
        }
        assert!(seen.iter().all(|&s| s), "every channel is produced");
    }
}

#[test]
fn rotations_match_the_f64_phase_of_every_channel() {
    let mut rng = rng();
    for n in [64u32, 4096, 65536] {
        for _ in 0..200 {
            let fine = rng.random_range(-0.5..=0.5f64);
            let phase = rng.random_range(-10.0..10.0f64);
            let u = rng.random_range(0..layout::post_threads_per_group(n));
            let (_, w) = layout::post_columns(u, n);
            let fringe = [phase.cos() as f32, phase.sin() as f32];
            let step = [
                (-std::f64::consts::FRAC_PI_4 * fine).cos() as f32,
                (-std::f64::consts::FRAC_PI_4 * fine).sin() as f32,
            ];
            let (r, rm) = layout::rotations(u, n, fine as f32, fringe, step);
            for v in 0..4 {
                for (col, got) in [(u, r[v as usize]), (w, rm[v as usize])] {
                    let k = (col + n / 4 * v) as f64;
                    let angle = phase - std::f64::consts::PI * fine * k / n as f64;
                    let err = (got[0] as f64 - angle.cos()).hypot(got[1] as f64 - angle.sin());
                    assert!(err < 2e-6, "n {n} u {u} column {col} v {v}: error {err}");
                }
            }
        }
    }
}

/// The FIR's staged rows: copying whole 16-byte chunks from `fir_row_start` and reading
/// each thread's pair at `fir_row_word` gives the pair `unpack_pair` reads from the whole
/// stream, within `fir_row_chunks`, for every width, block width and bit offset; rows of
/// one batch share the offset; the warp's shared-memory reads are conflict-free.
#[test]
fn staged_fir_rows_unpack_like_the_stream_and_read_conflict_free() {
    use radio_kernels_gpu::bank::is_conflict_free;
    let mut rng = rng();
    for bits in BITS {
        let stream: Vec<u32> = (0..4096).map(|_| rng.random()).collect();
        for width in [64u32, 128] {
            let chunks = layout::fir_row_chunks(bits, width);
            for start in (0..600u64).chain((0..50).map(|_| rng.random_range(600..2000u64))) {
                let (chunk, offset) = layout::fir_row_start(start, bits);
                assert!(offset < 128);
                let row: Vec<u32> = stream[4 * chunk as usize..][..4 * chunks as usize].to_vec();
                for t in 0..width {
                    let at = layout::fir_row_word(0, offset, t, bits);
                    let word = (at / 4) as usize;
                    assert!(word + 1 < row.len(), "bits {bits} width {width} start {start} thread {t}");
                    let bit = ((offset + 2 * t * bits) % 32) as u64;
                    let got = layout::unpack_pair_at(|i| row[word + i], bit, bits);
                    let want = layout::unpack_pair(|i| stream[i], start + 2 * t as u64, bits);
                    assert_eq!(got, want, "bits {bits} width {width} start {start} thread {t}");
                }
                for warp in 0..width / 32 {
                    for second in [0, 4] {
                        let addresses: [u32; 32] = std::array::from_fn(|l| {
                            layout::fir_row_word(0, offset, 32 * warp + l as u32, bits) + second
                        });
                        assert!(is_conflict_free(&addresses, 4), "bits {bits} offset {offset}");
                    }
                }
            }
        }
        for n in [64u32, 1024, 65536] {
            let (c0, o0) = layout::fir_row_start(12345, bits);
            let (c1, o1) = layout::fir_row_start(12345 + 2 * n as u64, bits);
            assert_eq!(o0, o1, "next spectrum's row has the same offset");
            assert_eq!(16 * (c1 - c0), (n * bits / 4) as u64, "and starts n bits / 4 bytes later");
        }
    }
    // Window ring rows and the post scratch: one 8- or 4-byte word per lane, consecutive.
    let ring: [u32; 32] = std::array::from_fn(|l| 5 * layout::FIR_RING_ROW + 8 * l as u32);
    assert!(is_conflict_free(&ring, 8));
    for c in 0..8 {
        for j in 0..SPECTRA_PER_POST_THREAD {
            let scratch: [u32; 32] =
                std::array::from_fn(|l| 4 * layout::post_scratch_word(c, j, 32 + l as u32));
            assert!(is_conflict_free(&scratch, 4));
        }
    }
    assert_eq!(
        4 * layout::post_scratch_word(7, SPECTRA_PER_POST_THREAD - 1, THREADS - 1) + 4,
        layout::POST_SCRATCH_BYTES
    );
}

#[test]
fn quantisation_rounds_half_to_even_and_saturates_symmetrically() {
    for (v, want) in [(0.5, (0, false)), (1.5, (2, false)), (-2.5, (-2, false)), (127.49, (127, false))] {
        assert_eq!(quantise_reference(v, 127), want);
        assert_eq!(layout::quantise(v as f32, 127), want);
    }
    for (v, want) in [(127.5, (127, true)), (-128.0, (-127, true)), (1e30, (127, true)), (-7.5, (-7, true))] {
        let max = if v == -7.5 { 7 } else { 127 };
        assert_eq!(quantise_reference(v, max), want);
        assert_eq!(layout::quantise(v as f32, max), want);
    }
    assert_eq!(layout::quantise(f32::NAN, 127), (0, true));
    assert_eq!(quantise_reference(f64::NAN, 127), (0, true));
    assert_eq!(layout::quantise_complex([f32::NAN, 1.0], false), (0x0100, 1));
    assert_eq!(layout::quantise_complex([2.0, f32::NAN], true), (0x02, 1));
    assert_eq!(layout::quantise_complex([-7.6, 6.6], true), (0x79, 1));
    assert_eq!(layout::quantise_complex([-1.0, 2.0], false), (0x02ff, 0));
}

/// `quantise_complex` (a saturating conversion, a bound, one compare for both components)
/// gives `quantise`'s values and saturation of each component, on every half-integer edge,
/// the extremes, NaN and random values.
#[test]
fn complex_quantisation_matches_the_component_rule() {
    let component_rule = |x: [f32; 2], int4: bool| {
        let max = if int4 { 7 } else { 127 };
        let ((re, sr), (im, si)) = (layout::quantise(x[0], max), layout::quantise(x[1], max));
        let (mask, shift) = if int4 { (0xf, 4) } else { (0xff, 8) };
        ((re as u32 & mask) | ((im as u32 & mask) << shift), (sr | si) as u32)
    };
    let mut values = vec![0.0f32, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN];
    for k in -140..=140 {
        let h = k as f32 + 0.5;
        values.extend([k as f32, h, h.next_up(), h.next_down()]);
    }
    let mut rng = rng();
    values.extend((0..2000).map(|_| rng.random_range(-300.0f32..300.0)));
    for int4 in [false, true] {
        for (i, &re) in values.iter().enumerate() {
            for im in [values[(7 * i + 3) % values.len()], 0.0, f32::NAN, 127.5, -7.5] {
                let x = [re, im];
                assert_eq!(layout::quantise_complex(x, int4), component_rule(x, int4), "{x:?} int4 {int4}");
            }
        }
    }
}

#[test]
fn delay_split_rounds_to_the_nearest_sample_and_evaluates_at_the_window_centre() {
    let config = ChannelizerConfig { taps: 4, ..ChannelizerConfig::new(64) };
    let model =
        DelayModel { reference_sample: 256.0, delay: 10.4, delay_rate: 0.001, phase: 1.0, phase_rate: 0.01 };
    // Spectrum 0's window centre is n T = 256 = the reference.
    let d = model.spectrum(&config, 0);
    assert_eq!(d.coarse, 10);
    assert!((d.fine - 0.4).abs() < 1e-12 && (d.phase - 1.0).abs() < 1e-12);
    // Spectrum 1: 128 samples later: delay 10.528 -> 11 and -0.472.
    let d = model.spectrum(&config, 1);
    assert_eq!(d.coarse, 11);
    assert!((d.fine + 0.472).abs() < 1e-12 && (d.phase - 2.28).abs() < 1e-12);
    let half = DelayModel { delay: -2.5, ..Default::default() };
    assert_eq!(half.spectrum(&config, 3).coarse, -2, "ties to even");
    let s = Schedule::new(&config, &[model, half], 0).unwrap();
    assert_eq!(s.starts[0][1], 128 - 11);
    assert_eq!(s.starts[1][0], 2);
}

/// The schedule reuses a sine and cosine only for an argument equal bit for bit: every
/// entry equals the plain per-spectrum computation, for constant, slowly and quickly
/// changing delays and phases (and a pool schedule refilled from another chunk).
#[test]
fn schedule_fill_gives_the_bits_of_the_plain_computation() {
    let mut rng = rng();
    let config = ChannelizerConfig { taps: 4, max_delay: 5000, ..ChannelizerConfig::new(64) };
    let models = [
        DelayModel { delay: 12.3, phase: 0.4, ..Default::default() },
        DelayModel { delay: -0.0, phase: -0.0, ..Default::default() },
        DelayModel { delay: 7.5, delay_rate: 1e-9, phase: 1.0, phase_rate: 0.0, reference_sample: 3.0 },
        DelayModel { delay: -40.0, delay_rate: 3e-3, phase: 2.0, phase_rate: 1e-2, reference_sample: 0.0 },
    ];
    let mut pool = Schedule::with_capacity(0);
    for _ in 0..20 {
        let pair = [models[rng.random_range(0..4)], models[rng.random_range(0..4)]];
        let first = rng.random_range(-100..10_000i64);
        pool.fill(&config, &pair, first).unwrap();
        for (p, model) in pair.iter().enumerate() {
            for i in 0..config.spectra_per_chunk() as usize {
                let d = model.spectrum(&config, first + i as i64);
                let (fs, fc) = d.phase.sin_cos();
                let (ss, sc) = (-std::f64::consts::FRAC_PI_4 * d.fine).sin_cos();
                let want = [fc as f32, fs as f32, sc as f32, ss as f32].map(f32::to_bits);
                assert_eq!(pool.rotation[p][i].map(f32::to_bits), want, "pol {p} spectrum {i}");
                assert_eq!(pool.fine[p][i].to_bits(), (d.fine as f32).to_bits());
                assert_eq!(pool.starts[p][i], 128 * (first + i as i64) - d.coarse);
            }
        }
        assert_eq!(Schedule::new(&config, &pair, first).unwrap(), pool);
    }
}

/// The streaming path's lost-flag scan gives [`lost_flags`]'s flags for windows that move
/// forward, step back and forth (delay changes), start before the stream or overlap, with
/// packets lost at random, in runs, or none.
#[test]
fn lost_flag_scan_equals_lost_flags() {
    let mut rng = rng();
    for case in 0..300 {
        let packet = [1u32, 7, 64, 256][case % 4];
        let window = rng.random_range(1..2000u64);
        let count = rng.random_range(0..60usize);
        let heap = rng.random_range(1..9u32);
        let loss = [0u32, 2, 10, 1000][rng.random_range(0..4)];
        let packets = 20_000usize;
        let present: [Vec<bool>; 2] = std::array::from_fn(|_| {
            let mut run = 0;
            (0..packets)
                .map(|_| {
                    if run > 0 {
                        run -= 1;
                        return false;
                    }
                    if loss > 0 && rng.random_range(0..loss) == 0 {
                        run = rng.random_range(0..4);
                        return false;
                    }
                    true
                })
                .collect()
        });
        let first = rng.random_range(0..50i64);
        let starts: [Vec<i64>; 2] = std::array::from_fn(|_| {
            let mut at = rng.random_range(-3000..3000i64);
            (0..count)
                .map(|_| {
                    at += match rng.random_range(0..10) {
                        0 => rng.random_range(-1500..0),
                        1 => rng.random_range(0..1500),
                        _ => rng.random_range(0..200),
                    };
                    at
                })
                .collect()
        });
        let arrived =
            |pol: usize, k: i64| k >= first && present[pol].get((k - first) as usize) == Some(&true);
        let (a0, a1) = (|k| arrived(0, k), |k| arrived(1, k));
        let want = lost_flags(&starts, window, packet, [&a0, &a1], heap).unwrap();
        let (mut spectra, mut heaps) = (vec![true; 3], Vec::new());
        lost_flags_into(&starts, window, packet, heap, arrived, &mut spectra, &mut heaps).unwrap();
        assert_eq!((spectra, heaps), want, "case {case}");
    }
    let (mut s, mut h) = (Vec::new(), Vec::new());
    let none = |_: usize, _: i64| true;
    assert!(lost_flags_into(&[vec![0], vec![]], 8, 4, 1, none, &mut s, &mut h).is_err());
    assert!(lost_flags_into(&[vec![0], vec![0]], 0, 4, 1, none, &mut s, &mut h).is_err());
    assert!(lost_flags_into(&[vec![0], vec![0]], 8, 0, 1, none, &mut s, &mut h).is_err());
    assert!(lost_flags_into(&[vec![i64::MAX], vec![0]], 8, 4, 1, none, &mut s, &mut h).is_err());
}

/// The bound on output chunks per push, for the shapes the streaming engine runs.
#[test]
fn max_outputs_per_push_counts_the_chunk_and_the_delay_range() {
    let c = ChannelizerConfig { heaps_per_chunk: 128, chunk_samples: 1 << 24, ..ChannelizerConfig::new(256) };
    assert_eq!(2 * 256 * c.spectra_per_chunk(), 1 << 24);
    assert_eq!(c.max_outputs_per_push(), 2, "one chunk, and one more across a delay change");
    assert_eq!(ChannelizerConfig { max_delay: 0, ..c.clone() }.max_outputs_per_push(), 1);
    assert_eq!(
        ChannelizerConfig { heaps_per_chunk: 8, max_delay: 0, ..c.clone() }.max_outputs_per_push(),
        16
    );
    assert_eq!(ChannelizerConfig { heaps_per_chunk: 8, ..c.clone() }.max_outputs_per_push(), 17);
    assert_eq!(ChannelizerConfig { heaps_per_chunk: 0, ..c.clone() }.max_outputs_per_push(), usize::MAX);
    assert_eq!(ChannelizerConfig { chunk_samples: 32, max_delay: 0, ..c }.max_outputs_per_push(), 1);
}

#[test]
fn delays_beyond_max_delay_are_typed_errors() {
    let config = ChannelizerConfig { max_delay: 100, ..ChannelizerConfig::new(64) };
    let far = DelayModel { delay: 100.6, ..Default::default() };
    assert!(matches!(Schedule::new(&config, &[far, DelayModel::default()], 0), Err(Error::InvalidConfig(_))));
    let near = DelayModel { delay: -100.4, ..Default::default() };
    assert!(Schedule::new(&config, &[near, near], 0).is_ok());
    let nan = DelayModel { delay: f64::NAN, ..Default::default() };
    assert!(matches!(
        Schedule::new(&config, &[near, nan], 0),
        Err(Error::NonFinite { what: DELAY_MODEL_FIELDS, index: 6 })
    ));
    // Finite models whose delay or phase overflows at the chunk: typed errors.
    let steep = DelayModel { delay_rate: 1e308, ..Default::default() };
    assert!(matches!(Schedule::new(&config, &[steep, near], 1 << 40), Err(Error::InvalidConfig(_))));
    let spin = DelayModel { phase_rate: f64::MAX, ..Default::default() };
    assert!(matches!(Schedule::new(&config, &[near, spin], 1 << 40), Err(Error::InvalidConfig(_))));
    // Past the i64 stream positions.
    assert!(matches!(Schedule::new(&config, &[near, near], i64::MAX - 3), Err(Error::InvalidConfig(_))));
    assert!(matches!(Schedule::new(&config, &[near, near], i64::MAX / 64), Err(Error::InvalidConfig(_))));
}

#[test]
fn invalid_configurations_are_rejected() {
    let ok = ChannelizerConfig::new(1024);
    ok.validate().unwrap();
    let cases = [
        ChannelizerConfig { channels: 32, ..ok.clone() },
        ChannelizerConfig { channels: 131072, ..ok.clone() },
        ChannelizerConfig { channels: 1000, ..ok.clone() },
        ChannelizerConfig { taps: 0, ..ok.clone() },
        ChannelizerConfig { taps: 33, ..ok.clone() },
        ChannelizerConfig { bits: 9, ..ok.clone() },
        ChannelizerConfig { bits: 0, ..ok.clone() },
        ChannelizerConfig { spectra_per_heap: 10, ..ok.clone() },
        ChannelizerConfig { spectra_per_heap: 0, ..ok.clone() },
        ChannelizerConfig { heaps_per_chunk: 0, ..ok.clone() },
        ChannelizerConfig { packet_samples: 0, ..ok.clone() },
        ChannelizerConfig { chunk_samples: 4096 + 32, ..ok.clone() },
        ChannelizerConfig { chunk_samples: 48, packet_samples: 48, ..ok.clone() },
        ChannelizerConfig { channels: 65536, heaps_per_chunk: 128, ..ok.clone() },
        ChannelizerConfig { max_delay: u32::MAX, ..ok.clone() },
    ];
    for c in cases {
        assert!(matches!(c.validate(), Err(Error::InvalidConfig(_))), "{c:?}");
    }
}

#[test]
fn lost_flags_match_a_sample_by_sample_check() {
    let mut rng = rng();
    for _ in 0..20 {
        let packet = [16u32, 64, 100][rng.random_range(0..3)];
        let window = rng.random_range(1..400u64);
        let heap = 4;
        let starts: [Vec<i64>; 2] =
            std::array::from_fn(|_| (0..16).map(|_| rng.random_range(-50..2000)).collect());
        let present: [Vec<bool>; 2] =
            std::array::from_fn(|_| (0..30).map(|_| rng.random_range(0..8) != 0).collect());
        let arrived = |pol: usize| {
            let p = &present[pol];
            move |packet: i64| packet >= 0 && p.get(packet as usize) == Some(&true)
        };
        let (a0, a1) = (arrived(0), arrived(1));
        let (spectra, heaps) = lost_flags(&starts, window, packet, [&a0, &a1], heap).unwrap();
        for i in 0..16 {
            let want = (0..2).any(|pol| {
                (starts[pol][i]..starts[pol][i] + window as i64).any(|t| {
                    t < 0 || !present[pol].get((t / packet as i64) as usize).copied().unwrap_or(false)
                })
            });
            assert_eq!(spectra[i], want, "spectrum {i}");
        }
        for h in 0..4 {
            assert_eq!(heaps[h], spectra[4 * h..4 * h + 4].iter().any(|&l| l));
        }
    }
}

/// The CPU reference itself: a tone at a channel centre lands in that channel with the
/// amplitude `A/2 sum(w)` and the phase of its delay.
#[test]
fn reference_puts_a_delayed_tone_in_its_channel_with_the_delay_phase() {
    let config = ChannelizerConfig {
        taps: 4,
        bits: 16,
        spectra_per_heap: 8,
        max_delay: 64,
        ..ChannelizerConfig::new(64)
    };
    let n = 64usize;
    let k0 = 20usize;
    let amp = 10000.0;
    let len = 2 * n * 16 + 256;
    let samples: Vec<i32> = (0..len)
        .map(|t| (amp * (std::f64::consts::PI * k0 as f64 * t as f64 / n as f64).cos()).round() as i32)
        .collect();
    let weights = hann_sinc_weights(64, 4);
    let gains = vec![Complex::new(1.0 / 4096.0, 0.0); 2 * n];
    let present = vec![true; 64];
    let d = 7.3;
    let models = [DelayModel::default(), DelayModel { delay: d, ..Default::default() }];
    let r =
        reference_chunk(&config, &weights, &gains, &models, [&samples, &samples], [&present, &present], 1)
            .unwrap();
    let sum: f64 = weights.iter().map(|&w| w as f64).sum();
    for s in 0..8 {
        let y0 = r.values[config.output_index(0, k0 as u32, s, 0)];
        let y1 = r.values[config.output_index(0, k0 as u32, s, 1)];
        assert!((y0.norm() * 4096.0 / (amp / 2.0 * sum) - 1.0).abs() < 1e-3, "amplitude {}", y0.norm());
        let want = -std::f64::consts::PI * k0 as f64 * d / n as f64;
        let got = (y1 / y0).arg();
        let diff = (got - want).rem_euclid(std::f64::consts::TAU);
        assert!(diff.min(std::f64::consts::TAU - diff) < 1e-3, "phase {got} vs {want}");
    }
    assert!(r.lost_spectra.iter().all(|&l| !l));
}

/// The cluster kernel's row FFT as the device runs it (two radix-16 Stockham passes over
/// padded slots, the first into a scratch buffer and the second back; the second pass's
/// twiddles `W_(n/4)^(j r)` from the table the kernel builds, entry `8 j r` of the n-point
/// one) matches an f64 DFT of n/4 points.
#[test]
fn cluster_row_fft_matches_a_dft() {
    use cluster_layout::*;
    use radio_kernels_gpu::pfb::stockham::*;
    let mut rng = rng();
    let a = CLUSTER_POINTS;
    let tw = fused_twiddles(CLUSTER_CHANNELS).unwrap().iter().map(|c| [c.re, c.im]).collect::<Vec<_>>();
    let z: Vec<[f64; 2]> =
        (0..a).map(|_| [rng.random_range(-1000.0..1000.0), rng.random_range(-1000.0..1000.0)]).collect();
    let mut smem = vec![[f32::NAN; 2]; fft_buffer_slots(a) as usize];
    for q in 0..a {
        smem[fft_slot(q) as usize] = [z[q as usize][0] as f32, z[q as usize][1] as f32];
    }
    for ns in [1, 16] {
        let mut next = smem.clone();
        let table: Vec<[f32; 2]> = (0..256u32)
            .map(|slot| {
                let (r, j) = (slot / 16, slot % 16);
                assert_eq!(cluster_row_twiddle(r, j), slot);
                tw[(8 * r * j) as usize]
            })
            .collect();
        for j in 0..a / 16 {
            let mut v = [[0.0f32; 2]; 16];
            for r in 0..16 {
                v[r as usize] = smem[fft_slot(stockham_load(j, r, a, 16)) as usize];
                if ns > 1 {
                    let w = table[cluster_row_twiddle(r, j % ns) as usize];
                    v[r as usize] = layout::cmul(v[r as usize], w);
                }
            }
            let v = dft16(v);
            for r in 0..16 {
                next[fft_slot(stockham_store(j, r, ns, 16)) as usize] = v[r as usize];
            }
        }
        smem = next;
    }
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for k in 0..a {
        let mut want = [0.0f64; 2];
        for (q, zq) in z.iter().enumerate() {
            let (s, c) =
                (-std::f64::consts::TAU * (q as u64 * k as u64 % a as u64) as f64 / a as f64).sin_cos();
            want[0] += zq[0] * c - zq[1] * s;
            want[1] += zq[0] * s + zq[1] * c;
        }
        let got = smem[fft_slot(k) as usize];
        err += (got[0] as f64 - want[0]).powi(2) + (got[1] as f64 - want[1]).powi(2);
        norm += want[0].powi(2) + want[1].powi(2);
    }
    let rel = (err / norm).sqrt();
    assert!(rel < 1e-6, "relative L2 error {rel}");
}

/// The per-thread fix-up (columns u and its mirror, [`layout::post_columns`])
/// covers every channel once, reads each spectrum value once, and gives each channel
/// `r2c_fixup(Z[k], Z[n - k], exp(-j pi k / n))` (within the f32 rounding of the row
/// twiddle products).
#[test]
fn post_pairs_cover_every_channel_with_its_mirror() {
    let mut rng = rng();
    for log2 in 6..=12u32 {
        let n = 1u32 << log2;
        let a = n / 4;
        let tw = fused_twiddles(n).unwrap().iter().map(|c| [c.re, c.im]).collect::<Vec<_>>();
        let z: Vec<[f32; 2]> =
            (0..n).map(|_| [rng.random_range(-1e3..1e3), rng.random_range(-1e3..1e3)]).collect();
        let mut seen = vec![0u32; n as usize];
        for u in 0..n / 8 {
            let (_, w) = layout::post_columns(u, n);
            let zu: [[f32; 2]; 4] = std::array::from_fn(|v| z[(u + a * v as u32) as usize]);
            let zw: [[f32; 2]; 4] = std::array::from_fn(|v| z[(w + a * v as u32) as usize]);
            let (x, xm) =
                layout::fixup_pair(u, zu, zw, tw[u as usize], tw[w as usize], layout::r2c_fixup_pair);
            for v in 0..4u32 {
                for (k, got) in [(u + a * v, x[v as usize]), (w + a * v, xm[v as usize])] {
                    seen[k as usize] += 1;
                    let want =
                        layout::r2c_fixup(z[k as usize], z[((n - k) & (n - 1)) as usize], tw[k as usize]);
                    for c in 0..2 {
                        assert!((got[c] - want[c]).abs() <= 1e-3, "n {n} k {k}: {got:?} vs {want:?}");
                    }
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "n {n}: every channel exactly once");
    }
}

/// The reference from a tail of the stream gives the bytes and flags of the whole-stream
/// reference, with a delay model and lost packets; a tail that misses a window is refused.
#[test]
fn reference_from_a_tail_equals_the_whole_stream() {
    let config = ChannelizerConfig {
        taps: 4,
        bits: 10,
        spectra_per_heap: 8,
        heaps_per_chunk: 2,
        chunk_samples: 2048,
        packet_samples: 256,
        max_delay: 64,
        ..ChannelizerConfig::new(64)
    };
    let mut rng = StdRng::seed_from_u64(33);
    let len = 8192usize;
    let samples: [Vec<i32>; 2] =
        std::array::from_fn(|_| (0..len).map(|_| rng.random_range(-511..=511)).collect());
    let present: [Vec<bool>; 2] =
        std::array::from_fn(|_| (0..len / 256).map(|_| rng.random_range(0..6) != 0).collect());
    let weights = hann_sinc_weights(64, 4);
    let gains = vec![Complex::new(0.01, 0.002); 2 * 64];
    let models =
        [DelayModel { delay: 3.6, ..Default::default() }, DelayModel { delay: -2.2, ..Default::default() }];
    let first_spectrum = 40; // windows from about sample 5120 - 4
    let whole = reference_chunk(
        &config,
        &weights,
        &gains,
        &models,
        [&samples[0], &samples[1]],
        [&present[0], &present[1]],
        first_spectrum,
    )
    .unwrap();
    let from = 4096usize;
    let tail = reference_chunk_from(
        &config,
        &weights,
        &gains,
        &models,
        [&samples[0][from..], &samples[1][from..]],
        [&present[0][from / 256..], &present[1][from / 256..]],
        first_spectrum,
        from as i64,
    )
    .unwrap();
    assert_eq!(tail.output, whole.output);
    assert_eq!(tail.lost_spectra, whole.lost_spectra);
    assert_eq!(tail.lost_heaps, whole.lost_heaps);
    assert!(whole.lost_spectra.iter().any(|&l| l) && !whole.lost_spectra.iter().all(|&l| l));
    let late = 5376usize; // a multiple of 256 past the first window's start
    assert!(reference_chunk_from(
        &config,
        &weights,
        &gains,
        &models,
        [&samples[0][late..], &samples[1][late..]],
        [&present[0][late / 256..], &present[1][late / 256..]],
        first_spectrum,
        late as i64,
    )
    .is_err());
    assert!(reference_chunk_from(
        &config,
        &weights,
        &gains,
        &models,
        [&samples[0][100..], &samples[1][100..]],
        [&present[0], &present[1]],
        first_spectrum,
        100,
    )
    .is_err());
}
