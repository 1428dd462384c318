//! The phase of a delayed tone and the channel response against the transform of the weights
//! (plot saved as a PNG).
use super::*;

/// A 16-bit tone of amplitude `amp` at `frequency` (cycles per sample), dithered.
fn tone(len: usize, frequency: f64, amp: f64, rng: &mut StdRng) -> Vec<i32> {
    (0..len)
        .map(|t| {
            let v = amp * (std::f64::consts::TAU * frequency * t as f64).cos() + rng.random_range(-0.5..0.5);
            v.round().clamp(-32768.0, 32767.0) as i32
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_delayed_tone_has_the_phase_of_its_delay() {
    let (gpu, mut rng) = (gpu(), rng());
    let config = ChannelizerConfig {
        channels: 4096,
        taps: 16,
        bits: 16,
        spectra_per_heap: 8,
        heaps_per_chunk: 1,
        chunk_samples: 8192,
        packet_samples: 4096,
        max_delay: 2000,
        output: OutputFormat::Ci8,
    };
    let n = config.channels as f64;
    let k0 = 1234u32;
    let amp = 20000.0;
    let len = 8192 * 40;
    let s = tone(len, k0 as f64 / (2.0 * n), amp, &mut rng);
    let present = vec![true; len / 4096];
    let weights = hann_sinc_weights(config.channels, config.taps);
    let peak = amp / 2.0 * weights.iter().map(|&w| w as f64).sum::<f64>();
    for d in [0.0, 0.25, -0.5, 37.3, -1234.6, 1999.4] {
        let mut ch = Channelizer::new(&gpu, config.clone(), None).unwrap();
        ch.poison_before_runs(Some(POISON));
        ch.set_gains(&vec![Complex::new((100.0 / peak) as f32, 0.0); 2 * config.channels as usize]).unwrap();
        ch.set_delay_model(1, DelayModel { delay: d, ..Default::default() }).unwrap();
        let out = run_stream(&mut ch, [&s, &s], [&present, &present]);
        let want = -std::f64::consts::PI * k0 as f64 * d / n;
        let mut checked = 0;
        for chunk in out.iter().filter(|c| !c.lost_heaps[0]) {
            for sp in 0..8 {
                let y = [0, 1].map(|p| {
                    let (re, im) =
                        output_value(&chunk.data, config.output, config.output_index(0, k0, sp, p));
                    Complex::new(re as f64, im as f64)
                });
                assert!((y[0].norm() - 100.0).abs() < 2.0, "amplitude {}", y[0].norm());
                let got = (y[1] / y[0]).arg();
                let diff = (got - want).rem_euclid(std::f64::consts::TAU);
                let diff = diff.min(std::f64::consts::TAU - diff);
                assert!(diff < 0.03, "delay {d}: phase {got}, expected {want}");
                checked += 1;
            }
        }
        println!("delay {d}: {checked} spectra checked");
        assert!(checked >= 8);
    }
}

/// Minimal PNG writer (RGB, stored deflate blocks: no compression, no dependency).
fn write_png(path: &std::path::Path, width: u32, height: u32, rgb: &[u8]) {
    fn crc(data: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 == 1 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            }
        }
        !c
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend(data);
        out.extend(&body);
        out.extend(crc(&body).to_be_bytes());
    }
    let mut raw = Vec::new();
    for row in rgb.chunks(3 * width as usize) {
        raw.push(0); // filter: none
        raw.extend(row);
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push((i + 1 == blocks.len()) as u8);
        z.extend((block.len() as u16).to_le_bytes());
        z.extend((!(block.len() as u16)).to_le_bytes());
        z.extend(*block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &v in &raw {
        a = (a + v as u32) % 65521;
        b = (b + a) % 65521;
    }
    z.extend(((b << 16) | a).to_be_bytes());
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    let mut header = Vec::new();
    header.extend(width.to_be_bytes());
    header.extend(height.to_be_bytes());
    header.extend([8, 2, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &header);
    chunk(&mut png, b"IDAT", &z);
    chunk(&mut png, b"IEND", &[]);
    std::fs::write(path, png).unwrap();
}

/// Plots dB curves (x in channels, y from 0 down to -130 dB) with a 10 dB grid.
fn plot(path: &std::path::Path, x: &[f64], curves: &[(&[f64], [u8; 3])]) {
    let (w, h) = (900usize, 500usize);
    let mut img = vec![255u8; w * h * 3];
    let (x0, x1) = (x[0], x[x.len() - 1]);
    let px = |v: f64| ((v - x0) / (x1 - x0) * (w - 1) as f64).round() as i64;
    let py = |db: f64| ((-db / 130.0) * (h - 1) as f64).round().clamp(0.0, (h - 1) as f64) as i64;
    let put = |img: &mut Vec<u8>, x: i64, y: i64, c: [u8; 3]| {
        if (0..w as i64).contains(&x) && (0..h as i64).contains(&y) {
            let i = (y as usize * w + x as usize) * 3;
            img[i..i + 3].copy_from_slice(&c);
        }
    };
    for db in (0..=130).step_by(10) {
        for xx in 0..w as i64 {
            put(&mut img, xx, py(-(db as f64)), [220, 220, 220]);
        }
    }
    for ch in (x0.ceil() as i64)..=(x1.floor() as i64) {
        for yy in 0..h as i64 {
            put(&mut img, px(ch as f64), yy, [200, 200, 200]);
        }
    }
    for (ys, color) in curves {
        for i in 1..x.len() {
            let (xa, xb) = (px(x[i - 1]), px(x[i]));
            let (ya, yb) = (py(ys[i - 1]), py(ys[i]));
            let steps = (xb - xa).abs().max((yb - ya).abs()).max(1);
            for s in 0..=steps {
                let xx = xa + (xb - xa) * s / steps;
                let yy = ya + (yb - ya) * s / steps;
                put(&mut img, xx, yy, *color);
            }
        }
    }
    write_png(path, w as u32, h as u32, &img);
}

/// Sweeps a tone across channel k0 +- 3 channels and compares the measured
/// response of channel k0 with |W(f)| / |W(0)|, W the Fourier transform of the weights. The
/// gain of each tone is set from the expected response (as Merry, "Efficient channelization on a
/// graphics processing unit" (2023), sec. 5.2, sets it per tone) so the int8 output
/// resolves it; the plot goes to `$RADIO_KERNELS_BENCH_OUT` (else `target/`).
#[test]
#[ignore = "needs a CUDA GPU"]
fn channel_response_matches_the_transform_of_the_weights() {
    let (gpu, mut rng) = (gpu(), rng());
    let config = ChannelizerConfig {
        channels: 1024,
        taps: 16,
        bits: 16,
        spectra_per_heap: 8,
        heaps_per_chunk: 1,
        chunk_samples: 2048 * 8,
        packet_samples: 2048,
        max_delay: 0,
        output: OutputFormat::Ci8,
    };
    let n = config.channels as f64;
    let weights = hann_sinc_weights(config.channels, config.taps);
    let transform = |offset: f64| -> f64 {
        // |sum_i w[i] exp(-j 2 pi (offset / 2n) i)|
        let f = offset / (2.0 * n);
        let (mut re, mut im) = (0.0, 0.0);
        for (i, &w) in weights.iter().enumerate() {
            let (s, c) = (std::f64::consts::TAU * f * i as f64).sin_cos();
            re += w as f64 * c;
            im -= w as f64 * s;
        }
        (re * re + im * im).sqrt()
    };
    let w0 = transform(0.0);
    let k0 = 300u32;
    let amp = 30000.0;
    let len = 2048 * 8 * 4;
    let present = vec![true; len / 2048];
    let offsets: Vec<f64> = (0..=240).map(|i| -3.0 + 6.0 * i as f64 / 240.0).collect();
    let mut ch = Channelizer::new(&gpu, config.clone(), None).unwrap();
    ch.poison_before_runs(Some(POISON));
    let (mut measured, mut expected) = (Vec::new(), Vec::new());
    for &off in &offsets {
        let want = transform(off) / w0;
        // Output amplitude about 100 where resolvable; never amplify beyond -115 dB's need.
        let level = want.max(10f64.powf(-115.0 / 20.0));
        let gain = 100.0 / (amp / 2.0 * w0 * level);
        ch.reset().unwrap();
        ch.set_gains(&vec![Complex::new(gain as f32, 0.0); 2 * config.channels as usize]).unwrap();
        let s = tone(len, (k0 as f64 + off) / (2.0 * n), amp, &mut rng);
        let out = run_stream(&mut ch, [&s, &s], [&present, &present]);
        let chunk = out.iter().find(|c| !c.lost_heaps[0]).expect("a complete heap");
        let power: f64 = (0..8)
            .map(|sp| {
                let (re, im) = output_value(&chunk.data, config.output, config.output_index(0, k0, sp, 0));
                (re * re + im * im) as f64
            })
            .sum::<f64>()
            / 8.0;
        let got = power.sqrt() / (gain * amp / 2.0 * w0);
        let (got_db, want_db) = (20.0 * got.max(1e-12).log10(), 20.0 * want.log10());
        measured.push(got_db);
        expected.push(want_db);
        let tolerance = if want_db > -60.0 {
            0.2
        } else if want_db > -100.0 {
            1.5
        } else {
            f64::INFINITY
        };
        assert!(
            (got_db - want_db).abs() < tolerance || (want_db <= -100.0 && got_db < -90.0),
            "offset {off:.3} channels: measured {got_db:.2} dB, expected {want_db:.2} dB"
        );
    }
    let dir = std::env::var_os("RADIO_KERNELS_BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pfb-channel-response.png");
    plot(&path, &offsets, &[(&expected, [0, 90, 200]), (&measured, [220, 40, 40])]);
    let deepest = expected.iter().cloned().fold(f64::MAX, f64::min);
    println!(
        "channel response: {} tones, expected down to {deepest:.1} dB; plot {}",
        offsets.len(),
        path.display()
    );
    assert!(deepest < -100.0, "the sweep reaches -100 dB");
}
