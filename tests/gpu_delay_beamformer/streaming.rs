//! Streams and the streaming engine.
use super::*;

/// One chunk's outputs: (beams, saturation counts).
type Chunk = (Vec<Complex<i8>>, Vec<u32>);

/// As [`random_input`] (one sample in sixteen with a -128 component), generated in bulk from
/// a SplitMix64 stream seeded by `rng`: fast enough in unoptimised test builds for inputs of
/// many MB.
fn random_input_fast(len: usize, rng: &mut StdRng) -> Vec<Complex<i8>> {
    let mut state: u64 = rng.random();
    // Four samples (8 bytes, re then im) per draw.
    let mut x = vec![Complex::new(0i8, 0); len.next_multiple_of(4)];
    for bytes in bytemuck::cast_slice_mut::<Complex<i8>, [u8; 8]>(&mut x) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        *bytes = (z ^ (z >> 31)).to_le_bytes();
    }
    x.truncate(len);
    for group in (0..len).step_by(16) {
        let pick = x[group].re as u8 as usize;
        let at = group + (pick & 15);
        if at < len {
            bytemuck::cast_mut::<Complex<i8>, [i8; 2]>(&mut x[at])[(pick >> 4) & 1] = -128;
        }
    }
    x
}

/// Consecutive one-shot `beamform_steered` calls on `chunks`, one dither state advancing
/// through them, into poisoned outputs; `steering(n)` is chunk n's steering.
fn one_shot_chunks<'s>(
    gpu: &Gpu,
    beamformer: &DelayBeamformer,
    steering: impl Fn(usize) -> &'s DeviceSteering,
    mut state: Option<&mut DitherState>,
    chunks: &[Vec<Complex<i8>>],
) -> Vec<Chunk> {
    let c = beamformer.config();
    let mut out = Vec::new();
    for (n, x) in chunks.iter().enumerate() {
        let mut y = gpu.alloc::<Complex<i8>>(c.output_len(), POISON).unwrap();
        let mut counts = gpu.alloc::<u32>(c.beams.len(), POISON).unwrap();
        let x = gpu.upload(x).unwrap();
        beamformer.beamform_steered(&x, steering(n), state.as_deref_mut(), &mut y, &mut counts).unwrap();
        out.push((y.download().unwrap(), counts.download().unwrap()));
    }
    out
}

/// Streams `chunks` through the pinned input slots of an engine of `depth` slots (beams
/// poisoned), taking outputs when the ring is full and, at random, earlier.
fn stream_chunks(
    beamformer: &DelayBeamformer,
    steering: &DeviceSteering,
    state: Option<&mut DitherState>,
    depth: usize,
    chunks: &[Vec<Complex<i8>>],
    rng: &mut StdRng,
) -> Vec<Chunk> {
    let mut engine = beamformer.streaming(steering, state, depth).unwrap();
    engine.poison_outputs(Some(POISON));
    let mut got = Vec::new();
    for x in chunks {
        while engine.pending() == depth || (engine.pending() > 0 && rng.random_bool(0.3)) {
            let o = engine.output().unwrap().unwrap();
            got.push((o.beams.to_vec(), o.saturated.to_vec()));
        }
        engine.input().unwrap().copy_from_slice(x);
        engine.submit().unwrap();
    }
    while let Some(o) = engine.output().unwrap() {
        got.push((o.beams.to_vec(), o.saturated.to_vec()));
    }
    assert_eq!(engine.submitted(), chunks.len() as u64);
    got
}

/// The chunks' x as one launch over all their times: `x[a][c][n T + t][p]` from chunk n.
fn concatenate_in_time(
    c: &DelayBeamformerConfig,
    chunks: &[Vec<Complex<i8>>],
) -> (DelayBeamformerConfig, Vec<Complex<i8>>) {
    let long = DelayBeamformerConfig { times: c.times * chunks.len() as u32, ..c.clone() };
    let row = (c.times * c.pols) as usize;
    let mut x = vec![Complex::new(0i8, 0); long.input_len()];
    for (n, chunk) in chunks.iter().enumerate() {
        for a in 0..c.antennas {
            for ch in 0..c.channels {
                let from = c.input_index(a, ch, 0, 0);
                let to = long.input_index(a, ch, n as u32 * c.times, 0);
                x[to..to + row].copy_from_slice(&chunk[from..from + row]);
            }
        }
    }
    (long, x)
}

fn assert_chunks_equal(c: &DelayBeamformerConfig, got: &[Chunk], expected: &[Chunk], what: &str) {
    assert_eq!(got.len(), expected.len(), "{what}");
    for (n, (g, e)) in got.iter().zip(expected).enumerate() {
        if let Some(o) = (0..g.0.len()).find(|&o| g.0[o] != e.0[o]) {
            let per_beam = (c.channels * c.times) as usize;
            panic!(
                "{what}: chunk {n}: {} of {} outputs differ; first y[beam {}][channel {}][time {}] = {:?}, expected {:?}",
                (0..g.0.len()).filter(|&o| g.0[o] != e.0[o]).count(),
                g.0.len(),
                o / per_beam,
                o % per_beam / c.times as usize,
                o % c.times as usize,
                g.0[o],
                e.0[o]
            );
        }
        assert_eq!(g.1, e.1, "{what}: chunk {n}: saturation counts");
    }
}

/// The streaming engine equals, bit for bit, consecutive one-shot `beamform_steered` calls
/// over the same chunks, dither state included (random chunk lengths and counts, ring depths
/// and take schedules; one and two polarisations, several beam batches, more antennas than
/// one coefficient batch); afterwards the engine's dither state equals the one-shot calls'.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_equals_consecutive_one_shot_calls_and_carries_the_dither() {
    let gpu = gpu();
    let mut rng = rng();
    for (antennas, pols, channels, beams) in [(64, 2, 16, 8), (37, 1, 3, 19), (5, 2, 7, 45), (350, 2, 2, 9)] {
        let times = 8 * rng.random_range(1..=64);
        let mut c = random_config(antennas, pols, channels, times, beams, &mut rng);
        c.beams[0].dither = true;
        let k = rng.random_range(3..=7usize);
        let chunks: Vec<Vec<Complex<i8>>> =
            (0..k).map(|_| random_input_fast(c.input_len(), &mut rng)).collect();
        let beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
        let (w, d) = random_steering(&c, &mut rng);
        let steering = beamformer.upload_steering(&w, &d).unwrap();
        let (seed, first) = (rng.random(), engine_subsequence(rng.random_range(0..64)));
        let mut one_shot_state = beamformer.dither_state(seed, first, 0).unwrap();
        let mut streamed_state = beamformer.dither_state(seed, first, 0).unwrap();
        let start = streamed_state.states().unwrap();
        let expected = one_shot_chunks(&gpu, &beamformer, |_| &steering, Some(&mut one_shot_state), &chunks);
        let depth = rng.random_range(1..=4);
        let got = stream_chunks(&beamformer, &steering, Some(&mut streamed_state), depth, &chunks, &mut rng);
        let what =
            format!("A={antennas} P={pols} C={channels} T={times} B={beams}, {k} chunks, depth {depth}");
        println!("{what}");
        assert_chunks_equal(&c, &got, &expected, &what);
        let states = one_shot_state.states().unwrap();
        assert!(streamed_state.states().unwrap() == states, "{what}: dither states differ");
        assert!(states != start, "{what}: the dither states did not advance");
    }
}

/// Streamed chunks against one launch over all their times (x concatenated along time, the
/// beams re-sliced): the beam sums carry no state, so undithered beams and their saturation
/// counts (summed over the chunks) are equal bit for bit. The dither is a function of each
/// thread's generator state, not of absolute time: the long launch has other states, and its
/// dithered beams differ from the chunks' by at most one LSB, and somewhere.
#[test]
#[ignore = "needs a CUDA GPU"]
fn undithered_beams_of_streamed_chunks_equal_one_long_launch() {
    let gpu = gpu();
    let mut rng = rng();
    for (antennas, pols, channels, beams) in [(64, 2, 8, 8), (19, 1, 5, 21), (9, 2, 3, 40)] {
        let times = 8 * rng.random_range(1..=64);
        let mut c = random_config(antennas, pols, channels, times, beams, &mut rng);
        c.beams[0].dither = true;
        c.beams[1].dither = false;
        let k = rng.random_range(2..=6usize);
        let chunks: Vec<Vec<Complex<i8>>> =
            (0..k).map(|_| random_input_fast(c.input_len(), &mut rng)).collect();
        let (long, long_x) = concatenate_in_time(&c, &chunks);
        let beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
        let long_beamformer = DelayBeamformer::new(&gpu, long.clone()).unwrap();
        let (w, d) = random_steering(&c, &mut rng);
        let steering = beamformer.upload_steering(&w, &d).unwrap();
        let seed = rng.random();
        let mut state = beamformer.dither_state(seed, 0, 0).unwrap();
        let got = stream_chunks(&beamformer, &steering, Some(&mut state), 3, &chunks, &mut rng);
        let long_steering = long_beamformer.upload_steering(&w, &d).unwrap();
        let mut long_state = long_beamformer.dither_state(seed, 0, 0).unwrap();
        let (long_y, long_counts) =
            one_shot_chunks(&gpu, &long_beamformer, |_| &long_steering, Some(&mut long_state), &[long_x])
                .pop()
                .unwrap();
        let (mut dithered, mut differing) = (0usize, 0usize);
        for (b, beam) in c.beams.iter().enumerate() {
            let b32 = b as u32;
            for (n, (y, _)) in got.iter().enumerate() {
                for ch in 0..c.channels {
                    for t in 0..c.times {
                        let g = y[c.output_index(b32, ch, t)];
                        let l = long_y[long.output_index(b32, ch, n as u32 * c.times + t)];
                        if beam.dither {
                            for i in 0..2 {
                                let diff = (parts(g)[i] as i32 - parts(l)[i] as i32).abs();
                                assert!(
                                    diff <= 1,
                                    "beam {b} chunk {n} channel {ch} time {t}: {g:?} vs {l:?}"
                                );
                                dithered += 1;
                                differing += (diff != 0) as usize;
                            }
                        } else {
                            assert_eq!(g, l, "undithered beam {b}, chunk {n}, channel {ch}, time {t}");
                        }
                    }
                }
            }
            if !beam.dither {
                let total: u32 = got.iter().map(|(_, counts)| counts[b]).sum();
                assert_eq!(total, long_counts[b], "saturation count of undithered beam {b}");
            }
        }
        println!(
            "A={antennas} P={pols} C={channels} T={times} B={beams}, {k} chunks: {differing} of {dithered} \
             dithered components differ from the long launch"
        );
        assert!(dithered < 1000 || differing > 0, "the dither looked like a function of absolute time");
    }
}

/// A full output ring refuses a submit (`Backlog`) and changes nothing (pending outputs, the
/// chunk count, the dither state: the stream goes on with the same bytes once an output is
/// taken). Chunks come from registered memory at a skewed offset; the steering changes
/// between chunks through pinned memory (`set_steering`) and from the device
/// (`set_device_steering`), and the chunks before each change keep the old steering; refused
/// calls (an offset past the memory, NaN delays, a short weight array, steering of another
/// shape) change nothing.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_back_pressure_registered_memory_and_steering_changes() {
    let gpu = gpu();
    let mut rng = rng();
    let mut c = random_config(16, 2, 5, 8 * rng.random_range(4..=64), 12, &mut rng);
    c.beams[0].dither = true;
    let beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
    let k = 8usize;
    let len = c.input_len();
    let chunks: Vec<Vec<Complex<i8>>> = (0..k).map(|_| random_input_fast(len, &mut rng)).collect();
    let skew = rng.random_range(1..50usize);
    let mut host = vec![Complex::new(0i8, 0); skew + k * len];
    for (n, x) in chunks.iter().enumerate() {
        host[skew + n * len..][..len].copy_from_slice(x);
    }
    let (w1, d1) = random_steering(&c, &mut rng);
    let (w2, d2) = random_steering(&c, &mut rng);
    let (w3, d3) = random_steering(&c, &mut rng);
    let steerings = [
        beamformer.upload_steering(&w1, &d1).unwrap(),
        beamformer.upload_steering(&w2, &d2).unwrap(),
        beamformer.upload_steering(&w3, &d3).unwrap(),
    ];
    let (second, third) = (rng.random_range(1..4), rng.random_range(4..k));
    let which = |n: usize| {
        if n < second {
            0
        } else if n < third {
            1
        } else {
            2
        }
    };
    let seed = rng.random();
    let mut one_shot_state = beamformer.dither_state(seed, 77, 0).unwrap();
    let expected =
        one_shot_chunks(&gpu, &beamformer, |n| &steerings[which(n)], Some(&mut one_shot_state), &chunks);
    let other_shape = DelayBeamformerConfig { antennas: c.antennas + 1, ..c.clone() };
    let other = DelayBeamformer::new(&gpu, other_shape.clone()).unwrap();
    let (wo, d_o) = random_steering(&other_shape, &mut rng);
    let other_steering = other.upload_steering(&wo, &d_o).unwrap();

    let mut state = beamformer.dither_state(seed, 77, 0).unwrap();
    let depth = 2;
    let mut engine = beamformer.streaming(&steerings[0], Some(&mut state), depth).unwrap();
    engine.poison_outputs(Some(POISON));
    let registered = gpu.register_host(&mut host).unwrap();
    let mut got = Vec::new();
    let mut refused = 0;
    for n in 0..k {
        if n == second {
            let mut nan = d2.clone();
            let at = rng.random_range(0..nan.len());
            nan[at] = f32::NAN;
            assert!(matches!(engine.set_steering(&w2, &nan), Err(Error::NonFinite { .. })));
            assert!(matches!(engine.set_steering(&w2[1..], &d2), Err(Error::ShapeMismatch { .. })));
            engine.set_steering(&w2, &d2).unwrap();
        }
        if n == third {
            assert!(matches!(engine.set_device_steering(&other_steering), Err(Error::InvalidConfig(_))));
            engine.set_device_steering(&steerings[2]).unwrap();
        }
        if engine.pending() < depth {
            let before = (engine.pending(), engine.submitted());
            assert!(matches!(
                engine.submit_registered(&registered, skew + (k - 1) * len + 1),
                Err(Error::InvalidConfig(_))
            ));
            assert_eq!((engine.pending(), engine.submitted()), before);
        }
        match engine.submit_registered(&registered, skew + n * len) {
            Ok(()) => {}
            Err(Error::Backlog { slots, .. }) => {
                assert_eq!((slots, engine.pending(), engine.submitted()), (depth, depth, n as u64));
                refused += 1;
                let o = engine.output().unwrap().unwrap();
                got.push((o.beams.to_vec(), o.saturated.to_vec()));
                engine.submit_registered(&registered, skew + n * len).unwrap();
            }
            Err(e) => panic!("{e}"),
        }
    }
    while let Some(o) = engine.output().unwrap() {
        got.push((o.beams.to_vec(), o.saturated.to_vec()));
    }
    drop(engine);
    assert!(refused > 0, "the ring never filled");
    assert_chunks_equal(&c, &got, &expected, "registered memory with steering changes");
    assert!(state.states().unwrap() == one_shot_state.states().unwrap(), "dither states differ");
}

/// The engine's arguments: a dithered configuration needs a dither state of its own plan,
/// steering must fit its antennas, beams and last channel, and a ring needs a slot
/// (`InvalidConfig` each); an undithered configuration accepts a state and leaves it as it
/// is, like the one-shot call. The engine runs under `pump`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_arguments_are_checked_and_the_engine_runs_under_pump() {
    use radio_kernels::streaming::{pump, Engine};
    let gpu = gpu();
    let mut rng = rng();
    let mut c = random_config(8, 2, 4, 1024, 10, &mut rng);
    c.first_channel = 1000;
    c.beams[0].dither = true;
    let beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
    let (w, d) = random_steering(&c, &mut rng);
    let steering = beamformer.upload_steering(&w, &d).unwrap();
    let mut state = beamformer.dither_state(5, 0, 0).unwrap();
    let invalid = |r: Result<radio_kernels::delay_beamformer::DelayStream, Error>, what: &str| match r {
        Err(Error::InvalidConfig(_)) => {}
        Err(other) => panic!("{what}: {other:?}"),
        Ok(_) => panic!("{what}: accepted"),
    };
    invalid(beamformer.streaming(&steering, None, 3), "no dither state");
    let fewer = DelayBeamformerConfig { channels: 3, ..c.clone() };
    let other = DelayBeamformer::new(&gpu, fewer.clone()).unwrap();
    let mut other_state = other.dither_state(5, 0, 0).unwrap();
    invalid(beamformer.streaming(&steering, Some(&mut other_state), 3), "another plan's state");
    // `fewer` ends at a lower channel than `c`: its steering was not checked up to c's last.
    let (wf, df) = random_steering(&fewer, &mut rng);
    invalid(
        beamformer.streaming(&other.upload_steering(&wf, &df).unwrap(), Some(&mut state), 3),
        "short steering",
    );
    let wider = DelayBeamformerConfig { antennas: 9, ..c.clone() };
    let (ww, dw) = random_steering(&wider, &mut rng);
    let wide = DelayBeamformer::new(&gpu, wider).unwrap().upload_steering(&ww, &dw).unwrap();
    invalid(beamformer.streaming(&wide, Some(&mut state), 3), "other antennas");
    invalid(beamformer.streaming(&steering, Some(&mut state), 0), "no slot");
    let start = state.states().unwrap();

    let mut engine = beamformer.streaming(&steering, Some(&mut state), 3).unwrap();
    let x = random_input_fast(c.input_len(), &mut rng);
    engine.input().unwrap().copy_from_slice(&x);
    let mut progress = 0;
    pump(&mut engine, 7, |n| progress = n).unwrap();
    assert_eq!((progress, Engine::pending(&engine), engine.free_outputs(), engine.submitted()), (7, 0, 3, 7));
    drop(engine);
    assert!(state.states().unwrap() != start, "pump did not advance the dither");

    // Undithered: a state is accepted and stays as it is.
    let plain = DelayBeamformerConfig {
        beams: c.beams.iter().map(|b| Beam { dither: false, ..*b }).collect(),
        ..c.clone()
    };
    let plain_beamformer = DelayBeamformer::new(&gpu, plain.clone()).unwrap();
    let plain_steering = plain_beamformer.upload_steering(&w, &d).unwrap();
    let mut plain_state = plain_beamformer.dither_state(5, 0, 0).unwrap();
    let plain_start = plain_state.states().unwrap();
    let chunks = vec![x.clone(), random_input_fast(c.input_len(), &mut rng)];
    let expected = one_shot_chunks(&gpu, &plain_beamformer, |_| &plain_steering, None, &chunks);
    let got = stream_chunks(&plain_beamformer, &plain_steering, Some(&mut plain_state), 2, &chunks, &mut rng);
    assert_chunks_equal(&plain, &got, &expected, "undithered with a state");
    assert!(plain_state.states().unwrap() == plain_start);
}

/// The launcher on a caller's stream: dither states, steering uploads, `beamform` (with its
/// steering download) and `beamform_steered` run there and give the default stream's bytes;
/// a stream of another GPU is refused (needs two GPUs for that part).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_launcher_runs_on_a_callers_stream() {
    let gpu = gpu();
    let mut rng = rng();
    let mut c = random_config(24, 2, 6, 2048, 16, &mut rng);
    c.beams[0].dither = true;
    let x = random_input_fast(c.input_len(), &mut rng);
    let (w, d) = random_steering(&c, &mut rng);
    let run = |beamformer: &DelayBeamformer| -> (Chunk, Chunk, Vec<Xorwow>) {
        let mut state = beamformer.dither_state(99, 3, 0).unwrap();
        let steering = beamformer.upload_steering(&w, &d).unwrap();
        let first =
            one_shot_chunks(&gpu, beamformer, |_| &steering, Some(&mut state), std::slice::from_ref(&x))
                .pop()
                .unwrap();
        let input = gpu.upload(&x).unwrap();
        let (dw, dd) = (gpu.upload(&w).unwrap(), gpu.upload(&d).unwrap());
        let second = launch(&gpu, beamformer, &input, &dw, &dd, Some(&mut state));
        (first, second, state.states().unwrap())
    };
    let mut beamformer = DelayBeamformer::new(&gpu, c.clone()).unwrap();
    let on_default = run(&beamformer);
    let stream = gpu.new_stream().unwrap();
    beamformer.set_stream(&stream).unwrap();
    assert!(std::sync::Arc::ptr_eq(beamformer.stream(), &stream));
    let on_caller = run(&beamformer);
    assert_chunks_equal(
        &c,
        &[on_caller.0.clone(), on_caller.1.clone()],
        &[on_default.0, on_default.1],
        "caller's stream",
    );
    assert!(on_caller.2 == on_default.2, "dither states differ");
    if let Some(other) = second_gpu() {
        let foreign = other.new_stream().unwrap();
        assert!(matches!(beamformer.set_stream(&foreign), Err(Error::WrongDevice { .. })));
    }
}
