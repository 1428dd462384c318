//! Part C: callers' streams and the streaming engine.
use super::frb::{random_grid, random_weights, rel_l2};
use super::*;
use radio_kernels::frb_beamformer::factorized::{FactorizedConfig, FactorizedResampler};
use radio_kernels::frb_beamformer::quantize::{Format, QuantizeConfig, Quantizer};
use radio_kernels::frb_beamformer::resample::{FusedResampler, ResampleConfig, Resampler};
use radio_kernels::frb_beamformer::{
    frb_intensity_reference_sample, FrbBeamformer, FrbConfig, FrbResampling, FrbStream, FRB_CASES,
    FRB_REL_L2_BOUND,
};
use radio_kernels::{DeviceBuffer, Gpu};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::time::Instant;

/// The FRB launchers and engine can move between threads (and the launchers be shared).
#[test]
fn thread_safety_is_as_documented() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<FrbBeamformer<'static>>();
    send_sync::<Resampler<'static>>();
    send_sync::<FusedResampler<'static>>();
    send_sync::<FactorizedResampler<'static>>();
    send_sync::<Quantizer<'static>>();
    send_sync::<ShortFft<'static>>();
    send::<FrbStream<'static, 'static>>();
}

/// The three FRB stages of one test: the first kernel, one resampler, the quantiser.
enum Stage<'g> {
    Weights(Resampler<'g>),
    Fused(FusedResampler<'g>),
    Factorized(FactorizedResampler<'g>),
}

impl<'g> Stage<'g> {
    fn resample(&self, i: &DeviceBuffer<f16>, j: &mut DeviceBuffer<f16>) {
        match self {
            Stage::Weights(r) => r.resample(i, j).unwrap(),
            Stage::Fused(r) => r.resample(i, j).unwrap(),
            Stage::Factorized(r) => r.resample(i, j).unwrap(),
        }
    }
    fn as_stage(&self) -> FrbResampling<'_, 'g> {
        match self {
            Stage::Weights(r) => r.into(),
            Stage::Fused(r) => r.into(),
            Stage::Factorized(r) => r.into(),
        }
    }
    fn name(&self) -> &'static str {
        match self {
            Stage::Weights(_) => "W path",
            Stage::Fused(_) => "fused",
            Stage::Factorized(_) => "factorized",
        }
    }
}

/// A random small chain: a pathfinder case, 1 to 3 channels, T_ds from 1 to past the f16
/// sums' limit (both first-kernel families), T a multiple of lcm(T_outer, T_ds), 1 to 80
/// beams (a beam grid for the factorized stage), random positions. `kind`: 0 the W path,
/// 1 fused, 2 factorized.
fn chain<'g>(
    gpu: &'g Gpu,
    rng: &mut StdRng,
    kind: usize,
    format: Format,
) -> (FrbBeamformer<'g>, Stage<'g>, Quantizer<'g>) {
    let case = FRB_CASES[rng.random_range(0..2)];
    let t_ds = [1u32, 2, 3, 4, 16, 24, 48, 128][rng.random_range(0..8)];
    let (mut a, mut b) = (case.t_outer, t_ds);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let times = case.t_outer / a * t_ds * rng.random_range(1..=2);
    let c =
        FrbConfig { dishes: case.dishes, m: case.m, n: case.n, freqs: rng.random_range(1..=3), times, t_ds };
    let first = FrbBeamformer::new(gpu, c, &random_grid(&c, rng), &random_weights(&c, rng)).unwrap();
    let (slow, m, n) = (c.out_times(), c.m, c.n);
    let positions = |rng: &mut StdRng, len: usize| -> DeviceBuffer<f32> {
        gpu.upload(&(0..len).map(|_| rng.random_range(-12.0f32..12.0)).collect::<Vec<_>>()).unwrap()
    };
    let stage = if kind == 2 {
        // At least 4 beams, so that the codes of a chunk vary (the test checks that they do).
        let (g, g_prime) = (rng.random_range(2..=9), rng.random_range(2..=9));
        let fc = FactorizedConfig { channels: c.freqs, times: slow, m, n, g, g_prime };
        let mut r = FactorizedResampler::new(gpu, fc).unwrap();
        let t: Vec<f32> = (0..fc.theta_len()).map(|_| rng.random_range(-12.0..12.0)).collect();
        let tp: Vec<f32> = (0..fc.theta_prime_len()).map(|_| rng.random_range(-12.0..12.0)).collect();
        r.set_grid(&t, &tp).unwrap();
        Stage::Factorized(r)
    } else {
        let rc = ResampleConfig { channels: c.freqs, times: slow, m, n, beams: rng.random_range(4..=80) };
        let (t, tp) = (positions(rng, rc.positions_len()), positions(rng, rc.positions_len()));
        if kind == 0 {
            let mut r = Resampler::new(gpu, rc).unwrap();
            r.set_beams(&t, &tp).unwrap();
            Stage::Weights(r)
        } else {
            let mut r = FusedResampler::new(gpu, rc).unwrap();
            r.set_beams(&t, &tp).unwrap();
            Stage::Fused(r)
        }
    };
    let beams = match &stage {
        Stage::Weights(r) => r.config().beams,
        Stage::Fused(r) => r.config().beams,
        Stage::Factorized(r) => r.config().beams(),
    };
    let qc = QuantizeConfig { channels: c.freqs, times: slow, beams, format };
    (first, stage, Quantizer::new(gpu, qc).unwrap())
}

/// J of one chunk through the one-shot calls on device buffers (outputs poisoned).
fn one_shot_j(gpu: &Gpu, first: &FrbBeamformer, stage: &Stage, e: &[Ci4]) -> DeviceBuffer<f16> {
    let beams = match stage {
        Stage::Weights(r) => r.config().output_len(),
        Stage::Fused(r) => r.config().output_len(),
        Stage::Factorized(r) => r.config().output_len(),
    };
    let e = gpu.upload(e).unwrap();
    let mut i = gpu.alloc::<f16>(first.config().output_len(), POISON).unwrap();
    first.beamform(&e, &mut i).unwrap();
    let mut j = gpu.alloc::<f16>(beams, POISON).unwrap();
    stage.resample(&i, &mut j);
    j
}

/// One chunk through the one-shot chain (outputs poisoned): the codes and clip counts.
fn one_shot(
    gpu: &Gpu,
    (first, stage, quantizer): (&FrbBeamformer, &Stage, &Quantizer),
    e: &[Ci4],
    (scale, offset): &(Vec<f32>, Vec<f32>),
) -> (Vec<u8>, Vec<u32>) {
    let q = quantizer.config();
    let j = one_shot_j(gpu, first, stage, e);
    let (scale, offset) = (gpu.upload(scale).unwrap(), gpu.upload(offset).unwrap());
    let mut out = gpu.alloc::<u8>(q.output_len(), 0xa5).unwrap();
    let mut saturated = gpu.alloc::<u32>(q.params_len(), 0x5a).unwrap();
    quantizer.quantize(&j, &scale, &offset, &mut out, &mut saturated).unwrap();
    (out.download().unwrap(), saturated.download().unwrap())
}

/// Takes the engine's oldest output (there must be one) as (chunk, codes, counts).
fn take(engine: &mut FrbStream) -> (u64, Vec<u8>, Vec<u32>) {
    let out = engine.output().unwrap().expect("a pending output");
    (out.chunk, out.beams.to_vec(), out.saturated.to_vec())
}

/// Levels that spread J over the codes, from a chunk's J: per channel the scale maps 0.7 to
/// 1.5 times the range of J over the chunk (all beams and samples) to the largest code (so
/// some values clip at the top), and the offset puts the smallest J at code 0, give or take a
/// tenth of the codes (some clip at 0).
fn levels(q: &QuantizeConfig, j: &[f16], rng: &mut StdRng) -> (Vec<f32>, Vec<f32>) {
    let per_channel = (q.times * q.beams) as usize;
    let max = q.format.max() as f32;
    let mut scale = Vec::with_capacity(q.params_len());
    let mut offset = Vec::with_capacity(q.params_len());
    for f in 0..q.channels as usize {
        let values = j[f * per_channel..(f + 1) * per_channel].iter().map(|&h| h.to_f32());
        let (low, high) = values.fold((f32::MAX, f32::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        for _ in 0..q.beams {
            let s = max / ((high - low).max(1e-3) * rng.random_range(0.7..1.5));
            scale.push(s);
            offset.push(-low * s + rng.random_range(-0.1..0.1) * max);
        }
    }
    (scale, offset)
}

/// The streamed outputs are the one-shot chain's, chunk by chunk and bit for bit, for the
/// three resamplers, both code widths, and ring depths 1 to 4: fresh random E per chunk
/// through the pinned input slots, outputs taken when the ring is full (and so
/// interleaved with submits), new levels from a random chunk on (the earlier chunks keep
/// the old ones). On Hopper also with the sm_80 resampling kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_engine_equals_the_one_shot_chain() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    gpu.set_wgmma_enabled(true);
    let paths = if gpu.wgmma_enabled() { vec![true, false] } else { vec![false] };
    for wgmma in paths {
        gpu.set_wgmma_enabled(wgmma);
        for kind in 0..3 {
            for format in [Format::U8, Format::U4] {
                let (first, stage, quantizer) = chain(&gpu, &mut rng, kind, format);
                let (c, q) = (*first.config(), *quantizer.config());
                let chunks = rng.random_range(4..8usize);
                let e: Vec<Vec<Ci4>> =
                    (0..chunks).map(|_| (0..c.e_len()).map(|_| Ci4(rng.random())).collect()).collect();
                let stages = (&first, &stage, &quantizer);
                let j0 = one_shot_j(&gpu, &first, &stage, &e[0]).download().unwrap();
                let old = levels(&q, &j0, &mut rng);
                let new = levels(&q, &j0, &mut rng);
                let switch = rng.random_range(1..chunks);
                let expected: Vec<(Vec<u8>, Vec<u32>)> = e
                    .iter()
                    .enumerate()
                    .map(|(k, e)| one_shot(&gpu, stages, e, if k < switch { &old } else { &new }))
                    .collect();
                let distinct = expected[0].0.iter().collect::<std::collections::BTreeSet<_>>().len();
                assert!(distinct > 2, "the codes hardly vary ({distinct} values): the test is weak");
                for depth in 1..=4 {
                    let mut engine =
                        first.streaming(stage.as_stage(), &quantizer, &old.0, &old.1, depth).unwrap();
                    let mut got = Vec::new();
                    for (k, chunk) in e.iter().enumerate() {
                        if k == switch {
                            engine.set_levels(&new.0, &new.1).unwrap();
                        }
                        if engine.pending() == depth {
                            got.push(take(&mut engine));
                        }
                        engine.input().unwrap().copy_from_slice(chunk);
                        engine.submit().unwrap();
                    }
                    while engine.pending() > 0 {
                        got.push(take(&mut engine));
                    }
                    assert!(engine.output().unwrap().is_none());
                    assert_eq!(got.len(), chunks);
                    for (k, ((chunk, codes, counts), (want_codes, want_counts))) in
                        got.iter().zip(&expected).enumerate()
                    {
                        let label = format!(
                            "{} {format:?} wgmma {wgmma} depth {depth} chunk {k} of {c:?}",
                            stage.name()
                        );
                        assert_eq!(*chunk, k as u64, "{label}");
                        assert!(codes == want_codes, "{label}: quantised beams differ");
                        assert_eq!(counts, want_counts, "{label}: clip counts differ");
                    }
                }
                println!(
                    "{} {format:?} wgmma {wgmma}: {chunks} chunks of {c:?} -> {} beams, levels switched at chunk {switch}: streamed = one-shot",
                    stage.name(),
                    q.beams
                );
            }
        }
    }
    gpu.set_wgmma_enabled(true);
}

/// Back-pressure and caller memory: with every output slot full a submit is `Backlog`
/// and changes nothing (the input slot keeps its chunk, nothing is enqueued); taking one
/// output lets the same chunk through, and the stream goes on with the one-shot bytes.
/// Chunks from registered host memory (no host copy) give the same bytes; a chunk past
/// its end is refused, changing nothing. `pump` drives the engine as a driver would.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_engine_backlog_and_registered_memory() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let kind = rng.random_range(0..3);
    let (first, stage, quantizer) = chain(&gpu, &mut rng, kind, Format::U8);
    let (c, q) = (*first.config(), *quantizer.config());
    let chunks = 6;
    let mut all: Vec<Ci4> = (0..chunks * c.e_len()).map(|_| Ci4(rng.random())).collect();
    let j0 = one_shot_j(&gpu, &first, &stage, &all[..c.e_len()]).download().unwrap();
    let lv = levels(&q, &j0, &mut rng);
    let stages = (&first, &stage, &quantizer);
    let expected: Vec<(Vec<u8>, Vec<u32>)> =
        all.chunks(c.e_len()).map(|e| one_shot(&gpu, stages, e, &lv)).collect();
    let depth = 2;
    // Pinned slots.
    let mut engine = first.streaming(stage.as_stage(), &quantizer, &lv.0, &lv.1, depth).unwrap();
    let mut got = Vec::new();
    let mut refused = 0;
    for chunk in all.chunks(c.e_len()) {
        engine.input().unwrap().copy_from_slice(chunk);
        match engine.submit() {
            Ok(()) => {}
            Err(Error::Backlog { slots, .. }) => {
                assert_eq!((slots, engine.pending()), (depth, depth));
                refused += 1;
                assert!(engine.input().unwrap() == chunk, "a refused submit changed the input slot");
                got.push(take(&mut engine));
                engine.submit().unwrap();
            }
            Err(e) => panic!("{e}"),
        }
    }
    while engine.pending() > 0 {
        got.push(take(&mut engine));
    }
    assert!(refused > 0, "the ring never filled");
    for (k, (g, w)) in got.iter().zip(&expected).enumerate() {
        assert!(g.0 == k as u64 && g.1 == w.0 && g.2 == w.1, "pinned slots, chunk {k}");
    }
    // Registered memory, backlogged the same way.
    let mut engine = first.streaming(stage.as_stage(), &quantizer, &lv.0, &lv.1, depth).unwrap();
    let registered = gpu.register_host(&mut all).unwrap();
    let mut got = Vec::new();
    for k in 0..chunks {
        if let Err(e) = engine.submit_registered(&registered, k * c.e_len()) {
            assert!(matches!(e, Error::Backlog { .. }), "{e}");
            got.push(take(&mut engine));
            engine.submit_registered(&registered, k * c.e_len()).unwrap();
        }
    }
    let pending = engine.pending();
    assert!(matches!(
        engine.submit_registered(&registered, chunks * c.e_len() - 1),
        Err(Error::InvalidConfig(_) | Error::Backlog { .. })
    ));
    assert_eq!(engine.pending(), pending, "a refused submit enqueued an output");
    while engine.pending() > 0 {
        got.push(take(&mut engine));
    }
    assert_eq!(got.len(), chunks);
    for (k, (g, w)) in got.iter().zip(&expected).enumerate() {
        assert!(g.0 == k as u64 && g.1 == w.0 && g.2 == w.1, "registered memory, chunk {k}");
    }
    // With a free slot the out-of-range chunk is refused for its range.
    assert!(matches!(
        engine.submit_registered(&registered, chunks * c.e_len() - 1),
        Err(Error::InvalidConfig(_))
    ));
    assert_eq!(engine.pending(), 0);
    drop(registered);
    // A driver's loop; then the engine starts over.
    radio_kernels::streaming::pump(&mut engine, 5, |_| {}).unwrap();
    assert_eq!(engine.pending(), 0);
    engine.reset().unwrap();
    engine.input().unwrap().copy_from_slice(&all[..c.e_len()]);
    engine.submit().unwrap();
    let (chunk, codes, counts) = take(&mut engine);
    assert!(chunk == 0 && codes == expected[0].0 && counts == expected[0].1, "after reset");
    println!(
        "{}: {chunks} chunks of {c:?}, depth {depth}: {refused} submits refused and retried",
        stage.name()
    );
}

/// Stages that do not chain are refused when the engine is made, with typed errors: the
/// resampler's channels, slow samples or grid, the quantiser's beams, levels of the wrong
/// length, a resampler without beams, no slots.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_engine_rejects_stages_that_do_not_chain() {
    let gpu = gpu();
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let c = FrbConfig { dishes: 64, m: 8, n: 8, freqs: 2, times: 128, t_ds: 4 };
    let first =
        FrbBeamformer::new(&gpu, c, &random_grid(&c, &mut rng), &random_weights(&c, &mut rng)).unwrap();
    let rc = ResampleConfig { channels: 2, times: 32, m: 8, n: 8, beams: 20 };
    let qc = QuantizeConfig { channels: 2, times: 32, beams: 20, format: Format::U8 };
    let quantizer = Quantizer::new(&gpu, qc).unwrap();
    let positions = gpu.upload(&[0.25f32; 2 * 20]).unwrap();
    let levels = vec![1.0f32; qc.params_len()];
    let resampler = |config: ResampleConfig| {
        let mut r = Resampler::new(&gpu, config).unwrap();
        r.set_beams(
            &gpu.upload(&vec![0.25f32; config.positions_len()]).unwrap(),
            &gpu.upload(&vec![0.5f32; config.positions_len()]).unwrap(),
        )
        .unwrap();
        r
    };
    let good = resampler(rc);
    assert!(first.streaming(&good, &quantizer, &levels, &levels, 3).is_ok());
    for (label, bad) in [
        ("channels", ResampleConfig { channels: 3, ..rc }),
        ("slow samples", ResampleConfig { times: 16, ..rc }),
        ("grid", ResampleConfig { n: 12, ..rc }),
    ] {
        let r = resampler(bad);
        assert!(
            matches!(first.streaming(&r, &quantizer, &levels, &levels, 3), Err(Error::ShapeMismatch { .. })),
            "{label}"
        );
    }
    let other_beams = Quantizer::new(&gpu, QuantizeConfig { beams: 21, ..qc }).unwrap();
    assert!(matches!(
        first.streaming(&good, &other_beams, &[1.0; 42], &[1.0; 42], 3),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        first.streaming(&good, &quantizer, &levels[1..], &levels, 3),
        Err(Error::ShapeMismatch { what: "quantiser scale", .. })
    ));
    assert!(matches!(
        first.streaming(&good, &quantizer, &levels, &[], 3),
        Err(Error::ShapeMismatch { what: "quantiser offset", .. })
    ));
    assert!(matches!(first.streaming(&good, &quantizer, &levels, &levels, 0), Err(Error::InvalidConfig(_))));
    let unset = Resampler::new(&gpu, rc).unwrap();
    assert!(matches!(first.streaming(&unset, &quantizer, &levels, &levels, 3), Err(Error::InvalidConfig(_))));
    let unset = FusedResampler::new(&gpu, rc).unwrap();
    assert!(matches!(first.streaming(&unset, &quantizer, &levels, &levels, 3), Err(Error::InvalidConfig(_))));
    let fc = FactorizedConfig { channels: 2, times: 32, m: 8, n: 8, g: 4, g_prime: 5 };
    let unset = FactorizedResampler::new(&gpu, fc).unwrap();
    assert!(matches!(first.streaming(&unset, &quantizer, &levels, &levels, 3), Err(Error::InvalidConfig(_))));
    let mut fused = FusedResampler::new(&gpu, rc).unwrap();
    fused.set_beams(&positions, &positions).unwrap();
    let mut engine = FrbStream::new(&first, &fused, &quantizer, &levels, &levels, 3).unwrap();
    assert!(engine.output().unwrap().is_none());
    assert!(matches!(engine.set_levels(&levels[1..], &levels), Err(Error::ShapeMismatch { .. })));
}

/// Where the first FRB launch's extra time goes (the demo shape: D = 64, 8 x 8, F = 1024,
/// T = 512, T_ds = 64). Prints, with CUDA events and host clocks: opening the GPU (module
/// load), a first kernel of the process (the quantiser), `FrbBeamformer` construction
/// without the warm-up launch, its first, second and third `beamform` (the third behind
/// a gate of memsets, so its event time is GPU time only), a fresh beamformer of another
/// shape with the same kernel, the first launch of another kernel behind a gate (host
/// enqueue time against GPU time), `new` with its warm-up and the first `beamform` after
/// it, and an explicit `warm_up`; then each kernel's attributes as the driver loaded it
/// and the context's stack limit. Asserts only that every result is right. Run with
/// `--ignored --nocapture first_launch_probe`, under `CUDA_MODULE_LOADING=EAGER` and
/// `=LAZY`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn first_launch_probe() {
    use cudarc::driver::sys;
    use radio_kernels::frb_beamformer::selected_kernel;
    let opened = Instant::now();
    let gpu = gpu();
    let open_ms = opened.elapsed().as_secs_f64() * 1e3;
    let mut rng = StdRng::seed_from_u64(fresh_seed());
    let mut loading = 0u32;
    let mut driver = 0i32;
    let stack_limit = || {
        let mut bytes = 0usize;
        gpu.context().bind_to_thread().unwrap();
        // SAFETY: writes one size_t.
        unsafe { sys::cuCtxGetLimit(&mut bytes, sys::CUlimit::CU_LIMIT_STACK_SIZE) }.result().unwrap();
        bytes
    };
    // SAFETY: each writes one value of the type given (the loading mode as its u32).
    unsafe {
        sys::cuModuleGetLoadingMode((&mut loading as *mut u32).cast()).result().unwrap();
        sys::cuDriverGetVersion(&mut driver).result().unwrap();
    }
    eprintln!(
        "{} (driver {driver}), CUDA_MODULE_LOADING={:?}, loading mode {loading} (1 eager, 2 lazy);              opening the GPU and loading the modules: {open_ms:.1} ms; stack limit {} B per thread",
        gpu.name(),
        std::env::var("CUDA_MODULE_LOADING").ok(),
        stack_limit()
    );
    let stream = gpu.stream().clone();
    let event = || gpu.context().new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
    let ms = |a: &cudarc::driver::CudaEvent, b: &cudarc::driver::CudaEvent| a.elapsed_ms(b).unwrap() as f64;
    // Host time of `work` (enqueue), event time around it (as the demo times a stage), and
    // host time until the GPU is done.
    let timed = |what: &str, work: &mut dyn FnMut()| {
        let (start, stop) = (event(), event());
        start.record(&stream).unwrap();
        let t0 = Instant::now();
        work();
        let call = t0.elapsed().as_secs_f64() * 1e3;
        stop.record(&stream).unwrap();
        stop.synchronize().unwrap();
        let total = t0.elapsed().as_secs_f64() * 1e3;
        eprintln!(
            "{what:58}: host call {call:8.3} ms, events {:8.3} ms, host until done {total:8.3} ms",
            ms(&start, &stop)
        );
    };
    // As `timed`, with the stream held by ~64 GiB of memsets first: if the host call ends
    // before the gate, the event time is the GPU's time for the work alone.
    let mut gate = gpu.alloc::<u8>(1 << 30, 0).unwrap();
    let mut gated = |what: &str, work: &mut dyn FnMut()| {
        let (open, start, stop) = (event(), event(), event());
        open.record(&stream).unwrap();
        for _ in 0..64 {
            // SAFETY: the allocation is only filled, never replaced.
            stream.memset_zeros(unsafe { gate.raw_mut() }).unwrap();
        }
        start.record(&stream).unwrap();
        let t0 = Instant::now();
        work();
        let call = t0.elapsed().as_secs_f64() * 1e3;
        let gate_running = !start.is_complete();
        stop.record(&stream).unwrap();
        stop.synchronize().unwrap();
        eprintln!(
            "{what:58}: host call {call:8.3} ms, GPU {:8.3} ms (gate {:.1} ms, {})",
            ms(&start, &stop),
            ms(&open, &start),
            if gate_running {
                "still running after the call: GPU time only"
            } else {
                "ended during the call: host time included"
            }
        );
    };
    // A first kernel of the process (not an FRB one), as the demo has run others before.
    let qc = QuantizeConfig { channels: 1, times: 16, beams: 8, format: Format::U8 };
    let quantizer = Quantizer::new(&gpu, qc).unwrap();
    let (j, sc, of) = (
        gpu.alloc::<f16>(qc.input_len(), 0).unwrap(),
        gpu.alloc::<f32>(8, 0).unwrap(),
        gpu.alloc::<f32>(8, 0).unwrap(),
    );
    let (mut qo, mut qs) = (gpu.alloc::<u8>(qc.output_len(), 0).unwrap(), gpu.alloc::<u32>(8, 0).unwrap());
    gpu.synchronize().unwrap();
    timed("first kernel of the process (quantiser), first launch", &mut || {
        quantizer.quantize(&j, &sc, &of, &mut qo, &mut qs).unwrap()
    });
    timed("quantiser, second launch", &mut || quantizer.quantize(&j, &sc, &of, &mut qo, &mut qs).unwrap());
    // Shape A, the demo's, without the warm-up.
    let demo = FrbConfig { dishes: 64, m: 8, n: 8, freqs: 1024, times: 512, t_ds: 64 };
    /// A shape's dish map, weights and E (raw ci4 bytes).
    type Inputs = (Vec<(u32, u32)>, Vec<Complex<f16>>, Vec<u8>);
    let setup = |c: FrbConfig, rng: &mut StdRng| -> Inputs {
        let grid = random_grid(&c, rng);
        let weights = random_weights(&c, rng);
        let mut e = vec![0u8; c.e_len()];
        rng.fill(&mut e[..]);
        (grid, weights, e)
    };
    let check = |c: &FrbConfig, (grid, weights, e): &Inputs, got: &[f16], rng: &mut StdRng| {
        assert!(got.iter().all(|h| h.is_finite()), "{c:?}: unwritten or non-finite I");
        for _ in 0..2 {
            let (f, tbar) = (rng.random_range(0..c.freqs), rng.random_range(0..c.out_times()));
            let at = c.output_index(f, tbar, 0, 0);
            let k = (4 * c.m * c.n) as usize;
            let sample: Vec<f64> = got[at..at + k].iter().map(|&h| h.to_f64()).collect();
            let want = frb_intensity_reference_sample(c, Ci4::from_bytes(e), grid, weights, f, tbar).unwrap();
            let err = rel_l2(&sample, &want);
            assert!(err <= FRB_REL_L2_BOUND, "{c:?} ({f}, {tbar}): {err}");
        }
    };
    let input_a = setup(demo, &mut rng);
    let e_a = gpu.upload(Ci4::from_bytes(&input_a.2)).unwrap();
    let mut i_a = gpu.alloc::<f16>(demo.output_len(), POISON).unwrap();
    gpu.synchronize().unwrap();
    let mut a = None;
    timed("A demo shape: FrbBeamformer::without_warm_up", &mut || {
        a = Some(FrbBeamformer::without_warm_up(&gpu, demo, &input_a.0, &input_a.1).unwrap())
    });
    let a = a.unwrap();
    timed("A: first beamform", &mut || a.beamform(&e_a, &mut i_a).unwrap());
    let first_result = i_a.download().unwrap();
    check(&demo, &input_a, &first_result, &mut rng);
    i_a.poison(POISON).unwrap();
    timed("A: second beamform", &mut || a.beamform(&e_a, &mut i_a).unwrap());
    assert_eq!(f16_bits(&i_a.download().unwrap()), f16_bits(&first_result), "second launch differs");
    gated("A: third beamform, gated", &mut || a.beamform(&e_a, &mut i_a).unwrap());
    // Shape B: the same kernel, another shape, a fresh beamformer.
    let b_config = FrbConfig { freqs: 512, times: 1024, ..demo };
    let input_b = setup(b_config, &mut rng);
    let e_b = gpu.upload(Ci4::from_bytes(&input_b.2)).unwrap();
    let mut i_b = gpu.alloc::<f16>(b_config.output_len(), POISON).unwrap();
    let b = FrbBeamformer::without_warm_up(&gpu, b_config, &input_b.0, &input_b.1).unwrap();
    gpu.synchronize().unwrap();
    timed("B same kernel, F = 512, T = 1024, fresh: first beamform", &mut || {
        b.beamform(&e_b, &mut i_b).unwrap()
    });
    check(&b_config, &input_b, &i_b.download().unwrap(), &mut rng);
    // Shape C: another kernel (8 x 12), first launch behind the gate.
    let c_config = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 1024, times: 480, t_ds: 48 };
    let input_c = setup(c_config, &mut rng);
    let e_c = gpu.upload(Ci4::from_bytes(&input_c.2)).unwrap();
    let mut i_c = gpu.alloc::<f16>(c_config.output_len(), POISON).unwrap();
    let cb = FrbBeamformer::without_warm_up(&gpu, c_config, &input_c.0, &input_c.1).unwrap();
    gpu.synchronize().unwrap();
    gated("C other kernel (8 x 12, f16 sums): first beamform, gated", &mut || {
        cb.beamform(&e_c, &mut i_c).unwrap()
    });
    gated("C: second beamform, gated", &mut || cb.beamform(&e_c, &mut i_c).unwrap());
    check(&c_config, &input_c, &i_c.download().unwrap(), &mut rng);
    // Shape D: another kernel (8 x 8, T_ds = 128), made by `new` (with the warm-up).
    let d_config = FrbConfig { times: 512, t_ds: 128, ..demo };
    let input_d = setup(d_config, &mut rng);
    let e_d = gpu.upload(Ci4::from_bytes(&input_d.2)).unwrap();
    let mut i_d = gpu.alloc::<f16>(d_config.output_len(), POISON).unwrap();
    gpu.synchronize().unwrap();
    let mut d = None;
    timed("D other kernel (8 x 8, f32 phase sums): FrbBeamformer::new", &mut || {
        d = Some(FrbBeamformer::new(&gpu, d_config, &input_d.0, &input_d.1).unwrap())
    });
    let d = d.unwrap();
    timed("D: first beamform after new's warm-up", &mut || d.beamform(&e_d, &mut i_d).unwrap());
    check(&d_config, &input_d, &i_d.download().unwrap(), &mut rng);
    // Shape E: another kernel (8 x 12, T_ds = 144): warm-up timed on its own.
    let e_config = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 1024, times: 576, t_ds: 144 };
    let input_e = setup(e_config, &mut rng);
    let e_e = gpu.upload(Ci4::from_bytes(&input_e.2)).unwrap();
    let mut i_e = gpu.alloc::<f16>(e_config.output_len(), POISON).unwrap();
    let eb = FrbBeamformer::without_warm_up(&gpu, e_config, &input_e.0, &input_e.1).unwrap();
    gpu.synchronize().unwrap();
    timed("E other kernel (8 x 12, f32 phase sums): warm_up", &mut || eb.warm_up().unwrap());
    timed("E: first beamform after warm_up", &mut || eb.beamform(&e_e, &mut i_e).unwrap());
    check(&e_config, &input_e, &i_e.download().unwrap(), &mut rng);
    // The kernels as the driver loaded them (queried last: a query may itself load).
    use sys::CUfunction_attribute::*;
    for c in [demo, c_config, d_config, e_config] {
        let spec = selected_kernel(&c).unwrap().spec;
        let (name, function) = (spec.name, gpu.kernel(&spec).unwrap());
        let attr = |a| function.get_attribute(a).unwrap();
        eprintln!(
            "{name:34}: {} registers, {} B local per thread, {} B static shared, {} B const, max {} threads, PTX {} binary {}",
            attr(CU_FUNC_ATTRIBUTE_NUM_REGS),
            attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            attr(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
            attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            attr(CU_FUNC_ATTRIBUTE_PTX_VERSION),
            attr(CU_FUNC_ATTRIBUTE_BINARY_VERSION),
        );
    }
    eprintln!("stack limit now {} B per thread", stack_limit());
}
