//! The streaming engine (`ChannelizerStream`) against `push`, bit for bit; the channelizer's own
//! calls on a caller's stream.
use super::*;

/// Packed chunks `[pol][chunk]`.
type Packed = [Vec<Vec<u8>>; 2];
/// Packet flags `[pol][chunk][packet]`.
type Flags = [Vec<Vec<bool>>; 2];

/// The packed chunks of a random stream, `[pol][chunk]` (any byte pattern is a valid packed
/// stream; chunks past a megabyte are pieces of one random block of an odd length from random
/// offsets, which a debug build makes much faster), and packet flags with about one packet in
/// `loss` lost, in runs (0: none lost).
fn random_chunks(c: &ChannelizerConfig, chunks: usize, loss: u32, rng: &mut StdRng) -> (Packed, Flags) {
    const BLOCK: usize = (1 << 20) + 7;
    let mut block = vec![0u8; BLOCK];
    rng.fill(&mut block[..]);
    let len = c.chunk_bytes();
    let bytes = [0, 1].map(|_| {
        (0..chunks)
            .map(|_| {
                let mut chunk = Vec::with_capacity(len);
                if len <= BLOCK {
                    chunk.resize(len, 0);
                    rng.fill(&mut chunk[..]);
                }
                let mut at = rng.random_range(0..BLOCK);
                while chunk.len() < len {
                    let take = (BLOCK - at).min(len - chunk.len());
                    chunk.extend_from_slice(&block[at..at + take]);
                    at = 0;
                }
                chunk
            })
            .collect::<Vec<_>>()
    });
    let flags = [0, 1].map(|_| {
        let mut run = 0;
        (0..chunks)
            .map(|_| {
                (0..c.chunk_packets())
                    .map(|_| {
                        if run > 0 {
                            run -= 1;
                            false
                        } else if loss > 0 && rng.random_range(0..loss) == 0 {
                            run = rng.random_range(0..3);
                            false
                        } else {
                            true
                        }
                    })
                    .collect::<Vec<bool>>()
            })
            .collect::<Vec<_>>()
    });
    (bytes, flags)
}

/// What changes before push (submit) `k`: a delay model of one polarisation, or the gains.
#[derive(Clone, Debug)]
enum Change {
    Model(usize, DelayModel),
    Gains(Vec<Complex<f32>>),
}

/// Random changes: delay steps anywhere in `[-max_delay, max_delay]`, delay tracks that stay
/// inside it over a stream of `len` samples, and new gains.
fn random_changes(c: &ChannelizerConfig, chunks: usize, rng: &mut StdRng) -> Vec<Vec<Change>> {
    let len = chunks * c.chunk_samples as usize;
    let d = c.max_delay as f64;
    (0..chunks)
        .map(|k| {
            let mut changes = Vec::new();
            if k == 0 || rng.random_range(0..5) == 0 {
                for pol in 0..2 {
                    let model = match rng.random_range(0..3) {
                        _ if d == 0.0 => {
                            DelayModel { phase: rng.random_range(-3.0..3.0), ..Default::default() }
                        }
                        0 => DelayModel { delay: rng.random_range(-d..=d), phase: 0.5, ..Default::default() },
                        1 => random_model(d, len, rng),
                        _ => DelayModel { phase_rate: 1e-3, ..random_model(d, len, rng) },
                    };
                    changes.push(Change::Model(pol, model));
                }
            }
            if k == 0 || rng.random_range(0..8) == 0 {
                changes.push(Change::Gains(random_gains(c, 30.0, rng)));
            }
            changes
        })
        .collect()
}

/// Applies `changes` to a channelizer.
fn apply(ch: &mut Channelizer, changes: &[Change]) {
    for change in changes {
        match change {
            Change::Model(pol, model) => ch.set_delay_model(*pol, *model).unwrap(),
            Change::Gains(gains) => ch.set_gains(gains).unwrap(),
        }
    }
}

/// Applies `changes` to an engine.
fn apply_stream(engine: &mut ChannelizerStream, changes: &[Change]) {
    for change in changes {
        match change {
            Change::Model(pol, model) => engine.set_delay_model(*pol, *model).unwrap(),
            Change::Gains(gains) => engine.set_gains(gains).unwrap(),
        }
    }
}

/// The one-shot reference: every chunk pushed, with the changes before each.
fn pushed(ch: &mut Channelizer, bytes: &Packed, flags: &Flags, changes: &[Vec<Change>]) -> Vec<OutputChunk> {
    let mut out = Vec::new();
    for k in 0..bytes[0].len() {
        apply(ch, &changes[k]);
        out.extend(ch.push([&bytes[0][k], &bytes[1][k]], [&flags[0][k], &flags[1][k]]).unwrap());
    }
    out
}

/// Writes chunk `k` into the engine's next input slot.
fn fill_slot(engine: &mut ChannelizerStream, bytes: &Packed, flags: &Flags, k: usize) {
    let input = engine.input().unwrap();
    for p in 0..2 {
        input.samples[p].copy_from_slice(&bytes[p][k]);
        input.present[p].copy_from_slice(&flags[p][k]);
    }
}

/// Takes the oldest output as an `OutputChunk`, checking its slices' sizes.
fn take(engine: &mut ChannelizerStream) -> Option<OutputChunk> {
    let c = engine.channelizer().config().clone();
    let out = engine.output().unwrap()?;
    assert_eq!(out.data.len(), c.output_bytes());
    assert_eq!(out.saturated.len(), 2 * c.heaps_per_chunk as usize);
    assert_eq!(out.lost_spectra.len(), c.spectra_per_chunk() as usize);
    assert_eq!(out.lost_heaps.len(), c.heaps_per_chunk as usize);
    Some(out.to_chunk())
}

/// Streams every chunk through the engine's pinned slots (changes before each submit),
/// taking outputs when a submit may need their slots and, at random, earlier; then the rest.
fn streamed(
    engine: &mut ChannelizerStream,
    bytes: &Packed,
    flags: &Flags,
    changes: &[Vec<Change>],
    rng: &mut StdRng,
) -> Vec<OutputChunk> {
    let mut out = Vec::new();
    for (k, change) in changes.iter().enumerate() {
        apply_stream(engine, change);
        while engine.free_outputs() < engine.max_outputs_per_submit()
            || (engine.pending() > 0 && rng.random_range(0..4) == 0)
        {
            out.push(take(engine).unwrap());
        }
        fill_slot(engine, bytes, flags, k);
        engine.submit().unwrap();
    }
    while let Some(chunk) = take(engine) {
        out.push(chunk);
    }
    out
}

/// The streaming engine gives, output chunk by output chunk, the bytes, saturation counts and
/// lost flags of `push` on the same stream: random configurations with input chunks from an
/// eighth to three times an output chunk (so a submit completes none, one or many), random
/// lost packets, delay steps across the whole `max_delay` range and delay tracks, gains changed
/// mid-stream, every depth from 1 to 4, both paths (the cluster kernel at n = 1024 on Hopper).
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_engine_gives_the_bytes_of_push_for_random_chunks_flags_and_delays() {
    let (gpu, mut rng) = (gpu(), rng());
    let mut cases = 0;
    let mut most_outputs = 0;
    while cases < 6 {
        let channels = [64u32, 256, 1024][cases % 3];
        let spectra_per_heap = 8 * rng.random_range(1..=3);
        let heaps_per_chunk = rng.random_range(1..=3);
        let packet_samples = [128u32, 256, 512][rng.random_range(0..3)];
        let span = 2 * channels * spectra_per_heap * heaps_per_chunk;
        let chunk_packets = rng.random_range((span / 8).div_ceil(packet_samples)..=3 * span / packet_samples);
        let config = ChannelizerConfig {
            channels,
            taps: [1u32, 4, 8, 16][rng.random_range(0..4)],
            bits: [4u32, 8, 10, 12, 16][rng.random_range(0..5)],
            spectra_per_heap,
            heaps_per_chunk,
            chunk_samples: chunk_packets.max(1) * packet_samples,
            packet_samples,
            max_delay: [0u32, 100, 3000][rng.random_range(0..3)],
            output: [OutputFormat::Ci8, OutputFormat::Ci4][rng.random_range(0..2)],
        };
        if config.validate().is_err() {
            continue;
        }
        cases += 1;
        let needed = 10 * span as usize + config.window() as usize + 2 * config.max_delay as usize;
        let chunks = needed.div_ceil(config.chunk_samples as usize) + 2;
        let (bytes, mut flags) = random_chunks(&config, chunks, 30, &mut rng);
        // At least one lost packet, mid-stream, whatever the draw.
        flags[0][chunks / 2][0] = false;
        let changes = random_changes(&config, chunks, &mut rng);
        for path in paths(&gpu, &config) {
            let depth = rng.random_range(1..=4);
            let new = || {
                let mut ch = on_path(&gpu, config.clone(), path).unwrap();
                ch.poison_before_runs(Some(POISON));
                ch
            };
            let want = pushed(&mut new(), &bytes, &flags, &changes);
            let mut engine = ChannelizerStream::new(new(), depth).unwrap();
            assert_eq!(engine.max_outputs_per_submit(), config.max_outputs_per_push());
            most_outputs = most_outputs.max(engine.max_outputs_per_submit());
            let got = streamed(&mut engine, &bytes, &flags, &changes, &mut rng);
            println!(
                "{config:?} {path:?} (cluster: {}) depth {depth}: {} output chunks from {chunks} submits",
                engine.channelizer().resident_clusters().is_some(),
                got.len()
            );
            assert!(want.len() >= 10, "{} output chunks", want.len());
            assert_eq!(got.len(), want.len(), "{path:?}: output chunks");
            for (a, b) in got.iter().zip(&want) {
                assert!(
                    a == b,
                    "{path:?}: output chunk from spectrum {} differs from push's",
                    b.first_spectrum
                );
            }
            assert!(want.iter().any(|c| c.lost_spectra.iter().any(|&l| l)), "some spectra lost");
            assert!(engine.failure().is_none());
        }
    }
    assert!(most_outputs > 1, "some configuration completes several output chunks per submit");
}

/// Back-pressure and checked errors change nothing, and registered memory gives the same bytes:
/// the engine fed straight from registered host memory (both polarisations' buffers at their
/// own offsets), never taking an output until a submit is refused with `Error::Backlog`
/// (then taking one and submitting the same chunk again), with a delay flip from -max_delay
/// to +max_delay (a submit completing `max_outputs_per_submit()` chunks), a refused delay
/// past `max_delay`, short flags, a source range past the buffer; then the pinned slots after
/// a Backlog (the slot submitted again unchanged); then `into_inner` and `push` for the rest.
/// Equal, chunk for chunk, to `push` on the same stream. Both paths.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_engine_backlog_errors_and_registered_memory_keep_the_bytes_of_push() {
    let (gpu, mut rng) = (gpu(), rng());
    let config = ChannelizerConfig {
        channels: 1024,
        taps: 16,
        bits: 10,
        spectra_per_heap: 8,
        heaps_per_chunk: 1,
        chunk_samples: 16384,
        packet_samples: 1024,
        max_delay: 16384,
        output: OutputFormat::Ci8,
    };
    // One output chunk per submit, up to three across the flip.
    assert_eq!(config.max_outputs_per_push(), 3);
    let chunks = 40;
    let (bytes, flags) = random_chunks(&config, chunks, 25, &mut rng);
    let late = DelayModel { delay: -16384.0, phase: 0.3, ..Default::default() };
    let early = DelayModel { delay: 16384.0, phase_rate: 1e-4, ..Default::default() };
    let mut changes = vec![Vec::new(); chunks];
    changes[0] = vec![
        Change::Model(0, late),
        Change::Model(1, late),
        Change::Gains(random_gains(&config, 40.0, &mut rng)),
    ];
    changes[12] = vec![Change::Model(0, early), Change::Model(1, early)];
    changes[25] = vec![Change::Model(0, random_model(8000.0, chunks * 16384, &mut rng))];
    let too_far = DelayModel { delay: 16385.0, ..Default::default() };
    let bytes_per_chunk = config.chunk_bytes();
    let skew = [rng.random_range(0..64usize), rng.random_range(0..64usize)];
    let mut host: [Vec<u8>; 2] = [0, 1].map(|p| {
        let mut all = vec![0u8; skew[p]];
        for chunk in &bytes[p] {
            all.extend_from_slice(chunk);
        }
        all
    });
    for path in paths(&gpu, &config) {
        let new = || {
            let mut ch = on_path(&gpu, config.clone(), path).unwrap();
            ch.poison_before_runs(Some(POISON));
            ch
        };
        let want = pushed(&mut new(), &bytes, &flags, &changes);
        let [h0, h1] = &mut host;
        let registered = [gpu.register_host(h0).unwrap(), gpu.register_host(h1).unwrap()];
        let mut engine = ChannelizerStream::new(new(), 2).unwrap();
        let slots = engine.output_slots();
        assert_eq!(slots, 6);
        let mut got = Vec::new();
        let mut refused = 0;
        // Registered memory for chunks 0..20, outputs taken only when refused.
        for k in 0..20 {
            apply_stream(&mut engine, &changes[k]);
            let sources = [0, 1].map(|p| (&registered[p], skew[p] + k * bytes_per_chunk));
            let present = [&flags[0][k][..], &flags[1][k][..]];
            if k == 5 {
                // Checked errors: nothing changes.
                let short = [&flags[0][k][..1], &flags[1][k][..]];
                assert!(matches!(engine.submit_registered(sources, short), Err(Error::ShapeMismatch { .. })));
                let past = [sources[0], (&registered[1], registered[1].len() - bytes_per_chunk + 1)];
                assert!(matches!(engine.submit_registered(past, present), Err(Error::InvalidConfig(_))));
                let saved = *engine.delay_models();
                engine.set_delay_model(1, too_far).unwrap();
                match engine.submit_registered(sources, present) {
                    Err(Error::InvalidConfig(m)) => assert!(m.contains("max_delay"), "{m}"),
                    other => panic!("{path:?}: a delay past max_delay gave {other:?}"),
                }
                engine.set_delay_model(1, saved[1]).unwrap();
                assert!(engine.failure().is_none());
            }
            let before = engine.pending();
            match engine.submit_registered(sources, present) {
                Ok(()) => {}
                Err(Error::Backlog { slots: s, .. }) => {
                    assert_eq!(s, slots);
                    assert_eq!(engine.pending(), before, "a refused submit enqueues nothing");
                    assert!(engine.free_outputs() < engine.max_outputs_per_submit());
                    refused += 1;
                    got.push(take(&mut engine).unwrap());
                    // Possibly refused again (the flip completes three): take until it fits.
                    loop {
                        match engine.submit_registered(sources, present) {
                            Ok(()) => break,
                            Err(Error::Backlog { .. }) => got.push(take(&mut engine).unwrap()),
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                Err(e) => panic!("{path:?}: {e}"),
            }
        }
        // Pinned slots for chunks 20..30, also refused when full: the slot is submitted again
        // as it was.
        for (k, change) in changes.iter().enumerate().take(30).skip(20) {
            apply_stream(&mut engine, change);
            fill_slot(&mut engine, &bytes, &flags, k);
            while let Err(e) = engine.submit() {
                assert!(matches!(e, Error::Backlog { .. }), "{e}");
                refused += 1;
                got.push(take(&mut engine).unwrap());
            }
        }
        while let Some(chunk) = take(&mut engine) {
            got.push(chunk);
        }
        assert!(refused >= 2, "{path:?}: the ring never filled");
        // The rest through push on the channelizer given back.
        let mut ch = engine.into_inner();
        assert!(ch.failure().is_none());
        for k in 30..chunks {
            apply(&mut ch, &changes[k]);
            got.extend(ch.push([&bytes[0][k], &bytes[1][k]], [&flags[0][k], &flags[1][k]]).unwrap());
        }
        println!("{path:?}: {} output chunks, {refused} submits refused", got.len());
        assert_eq!(got.len(), want.len(), "{path:?}: output chunks");
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                a == b,
                "{path:?}: output chunk {i} (from spectrum {}) differs from push's",
                b.first_spectrum
            );
        }
        drop(registered);
    }
}

/// The flip from -max_delay to +max_delay completes `max_outputs_per_submit()` output chunks
/// in one submit, the most the output ring was sized for; the engine's outputs still equal
/// push's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_delay_flip_completes_the_most_outputs_per_submit() {
    let (gpu, mut rng) = (gpu(), rng());
    let config = ChannelizerConfig {
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
    assert_eq!(config.max_outputs_per_push(), 3);
    let chunks = 24;
    let (bytes, flags) = random_chunks(&config, chunks, 0, &mut rng);
    let mut changes = vec![Vec::new(); chunks];
    let late = DelayModel { delay: -1024.0, ..Default::default() };
    let early = DelayModel { delay: 1024.0, ..Default::default() };
    changes[0] = vec![Change::Model(0, late), Change::Model(1, late)];
    changes[10] = vec![Change::Model(0, early), Change::Model(1, early)];
    for path in paths(&gpu, &config) {
        let new = || {
            let mut ch = on_path(&gpu, config.clone(), path).unwrap();
            ch.poison_before_runs(Some(POISON));
            ch
        };
        let mut ch = new();
        let mut counts = Vec::new();
        let mut want = Vec::new();
        for k in 0..chunks {
            apply(&mut ch, &changes[k]);
            let out = ch.push([&bytes[0][k], &bytes[1][k]], [&flags[0][k], &flags[1][k]]).unwrap();
            counts.push(out.len());
            want.extend(out);
        }
        assert_eq!(counts[10], 3, "{counts:?}");
        let mut engine = ChannelizerStream::new(new(), 1).unwrap();
        assert_eq!(engine.output_slots(), 4);
        let mut got = Vec::new();
        for k in 0..chunks {
            apply_stream(&mut engine, &changes[k]);
            // Take everything before the flip's submit: all four slots free for its three.
            while engine.free_outputs() < 3 {
                got.push(take(&mut engine).unwrap());
            }
            let before = engine.pending();
            fill_slot(&mut engine, &bytes, &flags, k);
            engine.submit().unwrap();
            assert_eq!(engine.pending() - before, counts[k], "submit {k}");
        }
        while let Some(chunk) = take(&mut engine) {
            got.push(chunk);
        }
        assert!(got == want, "{path:?}: the engine's outputs differ from push's");
    }
}

/// Engine-sized chunks: 10-bit input, int8 output, 16 taps, output chunks as long as input
/// chunks (2^21 samples at n = 1024 on the default path, the cluster kernel on Hopper; 2^24
/// at n = 32768), `max_delay` 65536 (up to two outputs per submit); equal to push, then
/// `pump` (the drivers' loop) over the same engine, with its rate printed.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_engine_matches_push_at_engine_sized_chunks() {
    let (gpu, mut rng) = (gpu(), rng());
    for (channels, chunk_samples) in [(1024u32, 1u32 << 21), (32768, 1 << 24)] {
        let config = ChannelizerConfig {
            heaps_per_chunk: chunk_samples / (2 * channels * 256),
            chunk_samples,
            ..ChannelizerConfig::new(channels)
        };
        assert_eq!(config.max_outputs_per_push(), 2);
        let chunks = 6;
        let (bytes, flags) = random_chunks(&config, chunks, 200, &mut rng);
        // Models drawn within half of max_delay: the drawn rates then keep every spectrum's
        // delay in range over these long chunks.
        let half = ChannelizerConfig { max_delay: config.max_delay / 2, ..config.clone() };
        let mut changes = random_changes(&half, chunks, &mut rng);
        changes[0]
            .push(Change::Model(0, DelayModel { delay: 60000.0, delay_rate: -1e-4, ..Default::default() }));
        let path = PfbPath::for_config(&gpu, &config);
        let new = || {
            let mut ch = on_path(&gpu, config.clone(), path).unwrap();
            ch.poison_before_runs(Some(POISON));
            ch
        };
        let want = pushed(&mut new(), &bytes, &flags, &changes);
        let mut engine = ChannelizerStream::new(new(), radio_kernels::streaming::DEFAULT_DEPTH).unwrap();
        let got = streamed(&mut engine, &bytes, &flags, &changes, &mut rng);
        assert!(want.len() >= 3);
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert!(
                a == b,
                "n {channels}: output chunk from spectrum {} differs from push's",
                b.first_spectrum
            );
        }
        let mut engine = ChannelizerStream::new(engine.into_inner(), 3).unwrap();
        let submits = 24;
        let start = std::time::Instant::now();
        radio_kernels::streaming::pump(&mut engine, submits, |_| {}).unwrap();
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "n {channels} {path:?}: {} equal output chunks; pump: {:.1} Gsample/s per polarisation \
             (debug build, includes start-up)",
            got.len(),
            submits as f64 * chunk_samples as f64 / seconds / 1e9
        );
    }
}

/// The channelizer's own calls run on a caller's stream with the same bytes as on the default
/// stream; a stream of another GPU, a depth of 0 and an engine needing more than
/// `MAX_OUTPUT_SLOTS` output slots are typed errors; registered memory of another GPU is
/// refused before anything changes (two GPUs only).
#[test]
#[ignore = "needs a CUDA GPU"]
fn caller_streams_and_engine_setup_errors() {
    let (gpu, mut rng) = (gpu(), rng());
    let config = ChannelizerConfig {
        channels: 256,
        taps: 8,
        bits: 12,
        spectra_per_heap: 8,
        heaps_per_chunk: 2,
        chunk_samples: 4096,
        packet_samples: 512,
        max_delay: 500,
        output: OutputFormat::Ci4,
    };
    let chunks = 16;
    let (bytes, flags) = random_chunks(&config, chunks, 20, &mut rng);
    let changes = random_changes(&config, chunks, &mut rng);
    for path in paths(&gpu, &config) {
        let want = pushed(&mut on_path(&gpu, config.clone(), path).unwrap(), &bytes, &flags, &changes);
        let mut ch = on_path(&gpu, config.clone(), path).unwrap();
        let stream = gpu.new_stream().unwrap();
        ch.set_stream(&stream).unwrap();
        assert!(std::sync::Arc::ptr_eq(ch.stream(), &stream));
        ch.poison_before_runs(Some(POISON));
        assert_eq!(pushed(&mut ch, &bytes, &flags, &changes), want, "{path:?} on a caller's stream");
        assert!(matches!(ChannelizerStream::new(ch, 0), Err(Error::InvalidConfig(_))));
    }
    let many = ChannelizerConfig { chunk_samples: 1 << 24, packet_samples: 4096, ..config.clone() };
    assert!(many.max_outputs_per_push() * 3 > radio_kernels::pfb::MAX_OUTPUT_SLOTS);
    let ch = Channelizer::new(&gpu, many, None).unwrap();
    assert!(matches!(ch.streaming(3), Err(Error::InvalidConfig(_))));
    if let Some(other) = second_gpu() {
        let mut ch = Channelizer::new(&gpu, config.clone(), None).unwrap();
        assert!(matches!(ch.set_stream(&other.new_stream().unwrap()), Err(Error::WrongDevice { .. })));
        let mut engine = ch.streaming(2).unwrap();
        let mut theirs = bytes[1][0].clone();
        let foreign = other.register_host(&mut theirs).unwrap();
        let mut ours = bytes[0][0].clone();
        let local = gpu.register_host(&mut ours).unwrap();
        let present = [&flags[0][0][..], &flags[1][0][..]];
        assert!(matches!(
            engine.submit_registered([(&local, 0), (&foreign, 0)], present),
            Err(Error::WrongDevice { .. })
        ));
        assert!(engine.failure().is_none());
        // Nothing changed: the stream from chunk 0 gives push's bytes.
        let mut got = Vec::new();
        for (k, change) in changes.iter().enumerate() {
            apply_stream(&mut engine, change);
            fill_slot(&mut engine, &bytes, &flags, k);
            while engine.free_outputs() < engine.max_outputs_per_submit() {
                got.push(take(&mut engine).unwrap());
            }
            engine.submit().unwrap();
        }
        while let Some(chunk) = take(&mut engine) {
            got.push(chunk);
        }
        let mut reference = Channelizer::new(&gpu, config.clone(), None).unwrap();
        assert_eq!(got, pushed(&mut reference, &bytes, &flags, &changes));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn push_device_gives_the_bytes_of_push() {
    let (gpu, mut rng) = (gpu(), rng());
    for channels in [256u32, 1024] {
        let config = ChannelizerConfig { max_delay: 3000, ..ChannelizerConfig::new(channels) };
        config.validate().unwrap();
        let span = 2 * channels as usize * config.spectra_per_chunk() as usize;
        let chunks = (3 * span + config.window() as usize).div_ceil(config.chunk_samples as usize) + 2;
        let (bytes, mut flags) = random_chunks(&config, chunks, 30, &mut rng);
        flags[1][chunks / 2][0] = false;
        let changes = random_changes(&config, chunks, &mut rng);
        for path in paths(&gpu, &config) {
            let mut host = on_path(&gpu, config.clone(), path).unwrap();
            host.poison_before_runs(Some(POISON));
            let want = pushed(&mut host, &bytes, &flags, &changes);
            assert!(want.len() >= 2, "the stream completed {} chunks", want.len());
            let mut device = on_path(&gpu, config.clone(), path).unwrap();
            device.poison_before_runs(Some(POISON));
            let mut got = Vec::new();
            for k in 0..chunks {
                apply(&mut device, &changes[k]);
                let on_gpu = [gpu.upload(&bytes[0][k]).unwrap(), gpu.upload(&bytes[1][k]).unwrap()];
                got.extend(
                    device.push_device([&on_gpu[0], &on_gpu[1]], [&flags[0][k], &flags[1][k]]).unwrap(),
                );
            }
            assert_eq!(got, want, "n = {channels}, {path:?}");
            // A chunk of the wrong length changes nothing.
            let short = gpu.upload(&bytes[0][0][1..]).unwrap();
            let full = gpu.upload(&bytes[1][0]).unwrap();
            let present = [&flags[0][0][..], &flags[1][0][..]];
            assert!(matches!(device.push_device([&short, &full], present), Err(Error::ShapeMismatch { .. })));
        }
    }
}
