//! Launchers run their public calls on the stream `set_stream` gives them: each call is made
//! while that stream is held behind a gate, and its output must still be untouched. These
//! tests have a binary of their own and take [`ONE_AT_A_TIME`]: while a stream is gated,
//! another thread of the process that synchronises the device (freeing memory,
//! `cuCtxSynchronize`, loading a kernel module) waits for the gate and can stall the gated
//! test's driver calls.
mod common;

use common::*;
use radio_kernels::frb_beamformer::factorized::{FactorizedConfig, FactorizedResampler};
use radio_kernels::frb_beamformer::quantize::{Format, QuantizeConfig, Quantizer};
use radio_kernels::frb_beamformer::resample::{FusedResampler, ResampleConfig, Resampler};
use radio_kernels::frb_beamformer::{FrbBeamformer, FrbConfig, ShortFft};
use radio_kernels::{f16, Ci4, Complex, DeviceBuffer, Error, Gpu, Shift, Stream};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

const POISON: u8 = 0x7e;

/// `c.dishes` distinct random cells of the M x N grid.
fn random_grid(c: &FrbConfig, rng: &mut StdRng) -> Vec<(u32, u32)> {
    let mut points: Vec<(u32, u32)> = (0..c.m).flat_map(|m| (0..c.n).map(move |n| (m, n))).collect();
    for k in (1..points.len()).rev() {
        points.swap(k, rng.random_range(0..=k));
    }
    points.truncate(c.dishes as usize);
    points
}

/// Random complex f16 values in [-1, 1).
fn random_c16(rng: &mut impl Rng, len: usize) -> Vec<Complex<f16>> {
    (0..len)
        .map(|_| {
            let re = f16::from_f32(rng.random_range(-1.0f32..1.0));
            let im = f16::from_f32(rng.random_range(-1.0f32..1.0));
            Complex::new(re, im)
        })
        .collect()
}

/// Random complex f16 weights, each part of magnitude below 1/64.
fn random_weights(c: &FrbConfig, rng: &mut StdRng) -> Vec<Complex<f16>> {
    (0..c.weights_len())
        .map(|_| {
            let mut h = || f16::from_f64(rng.random_range(-1.0 / 64.0..1.0 / 64.0));
            let re = h();
            Complex::new(re, h())
        })
        .collect()
}

/// The bytes of `values`: results compared bit for bit (f16 `==` would equate -0 and +0 and
/// refuse NaN).
fn bits<T: bytemuck::Pod>(values: &[T]) -> &[u8] {
    bytemuck::cast_slice(values)
}

/// Runs `work`, which must enqueue its device work on `stream`, behind a gate on `stream`
/// (a wait for a host-mapped flag the host sets only after the check), and checks that it
/// did: while the gate holds `stream`, the `bytes` bytes at `address` (the work's output,
/// read directly through the legacy default stream, which does not wait for a
/// non-blocking stream, and outside cudarc's ordering) still hold `poison`. Work on any
/// other stream would have run. A watchdog opens the gate after 20 s, failing the check,
/// should `work` wait for its own stream.
fn assert_enqueued_on(
    gpu: &Gpu,
    stream: &Stream,
    (address, bytes, poison): (u64, usize, u8),
    what: &str,
    work: impl FnOnce(),
) {
    use cudarc::driver::{result, sys};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    gpu.synchronize().unwrap();
    stream.synchronize().unwrap();
    gpu.context().bind_to_thread().unwrap();
    // SAFETY: 4 bytes of mapped, page-locked host memory, freed at the end.
    let flag = unsafe { result::malloc_host(4, sys::CU_MEMHOSTALLOC_DEVICEMAP) }.unwrap() as *mut u32;
    // SAFETY: `flag` is a live 4-byte allocation.
    unsafe { flag.write_volatile(0) };
    let mut device_flag = 0;
    // SAFETY: `flag` was allocated with DEVICEMAP in this context.
    unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_flag, flag.cast(), 0) }.result().unwrap();
    // SAFETY: the stream waits until the flag reaches 1.
    unsafe {
        sys::cuStreamWaitValue32_v2(
            stream.cu_stream(),
            device_flag,
            1,
            sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
        )
    }
    .result()
    .unwrap();
    let fired = Arc::new(AtomicBool::new(false));
    let (watch, address_of_flag) = (fired.clone(), flag as usize);
    let done = Arc::new(AtomicBool::new(false));
    let finished = done.clone();
    let watchdog = std::thread::spawn(move || {
        let start = Instant::now();
        while !finished.load(Ordering::Acquire) {
            if start.elapsed() > Duration::from_secs(20) {
                watch.store(true, Ordering::Release);
                // SAFETY: the flag lives until this thread is joined.
                unsafe { (address_of_flag as *mut u32).write_volatile(1) };
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    work();
    let mut host = vec![0u8; bytes];
    gpu.context().bind_to_thread().unwrap();
    // SAFETY: `address` starts `bytes` bytes of a live allocation of this context.
    unsafe { result::memcpy_dtoh_sync(&mut host, address) }.unwrap();
    // SAFETY: the flag is live; setting it opens the gate.
    unsafe { flag.write_volatile(1) };
    stream.synchronize().unwrap();
    done.store(true, Ordering::Release);
    watchdog.join().unwrap();
    // SAFETY: nothing uses the flag any more.
    unsafe { result::free_host(flag.cast()) }.unwrap();
    assert!(
        !fired.load(Ordering::Acquire),
        "{what}: waited for its own stream (the watchdog opened the gate)"
    );
    assert!(
        host.iter().all(|&b| b == poison),
        "{what}: its output was written while its stream was held: the work ran on another stream"
    );
    println!("{what}: runs on the caller's stream");
}

/// Held by each test for its whole run, so that the tests of this binary never overlap.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn target<T: bytemuck::Pod>(buffer: &DeviceBuffer<T>, poison: u8) -> (u64, usize, u8) {
    (buffer.device_address(), buffer.len() * std::mem::size_of::<T>(), poison)
}

/// Every FRB launcher (first kernel, short FFT, the three resamplers and the quantiser) runs
/// its public calls on the stream `set_stream` gave it, with the same bytes as on the
/// default stream; a stream of another GPU is `WrongDevice`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_frb_launcher_runs_on_the_callers_stream() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let gpu = gpu();
    let mut rng = rng();
    let stream = gpu.new_stream().unwrap();
    let mut seeded = StdRng::seed_from_u64(rng.random());
    // First kernel.
    let c = FrbConfig { dishes: 64, m: 8, n: 12, freqs: 3, times: 96, t_ds: 3 };
    let mut first =
        FrbBeamformer::new(&gpu, c, &random_grid(&c, &mut seeded), &random_weights(&c, &mut seeded)).unwrap();
    let e = gpu.upload(&(0..c.e_len()).map(|_| Ci4(rng.random())).collect::<Vec<Ci4>>()).unwrap();
    let mut want = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    first.beamform(&e, &mut want).unwrap();
    first.set_stream(&stream).unwrap();
    assert!(std::sync::Arc::ptr_eq(first.stream(), &stream));
    let mut i = gpu.alloc::<f16>(c.output_len(), POISON).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&i, POISON), "FrbBeamformer::beamform", || {
        first.beamform(&e, &mut i).unwrap()
    });
    assert_eq!(bits(&i.download().unwrap()), bits(&want.download().unwrap()), "first kernel");
    // Short FFT.
    let mut fft = ShortFft::new(&gpu, 12).unwrap();
    let x = gpu.upload(&random_c16(&mut rng, 12 * 100)).unwrap();
    let mut y_want = gpu.alloc::<Complex<f16>>(24 * 100, POISON).unwrap();
    fft.run(&x, &mut y_want, 100).unwrap();
    fft.set_stream(&stream).unwrap();
    let mut y = gpu.alloc::<Complex<f16>>(24 * 100, POISON).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&y, POISON), "ShortFft::run", || {
        fft.run(&x, &mut y, 100).unwrap()
    });
    assert_eq!(bits(&y.download().unwrap()), bits(&y_want.download().unwrap()), "short FFT");
    // Resamplers: positions set on the caller's stream (that call waits), then the GEMM
    // held behind the gate.
    let rc = ResampleConfig { channels: 3, times: c.out_times(), m: 8, n: 12, beams: 70 };
    let theta: Vec<f32> = (0..rc.positions_len()).map(|_| rng.random_range(-20.0..20.0)).collect();
    let theta_prime: Vec<f32> = (0..rc.positions_len()).map(|_| rng.random_range(-20.0..20.0)).collect();
    let (theta, theta_prime) = (gpu.upload(&theta).unwrap(), gpu.upload(&theta_prime).unwrap());
    let mut j_want = gpu.alloc::<f16>(rc.output_len(), POISON).unwrap();
    let mut weights_path = Resampler::new(&gpu, rc).unwrap();
    weights_path.set_beams(&theta, &theta_prime).unwrap();
    weights_path.resample(&want, &mut j_want).unwrap();
    let j_want = j_want.download().unwrap();
    let mut weights_path = Resampler::new(&gpu, rc).unwrap();
    weights_path.set_stream(&stream).unwrap();
    weights_path.set_beams(&theta, &theta_prime).unwrap();
    let mut j = gpu.alloc::<f16>(rc.output_len(), POISON).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&j, POISON), "Resampler::resample", || {
        weights_path.resample(&want, &mut j).unwrap()
    });
    assert_eq!(bits(&j.download().unwrap()), bits(&j_want), "W path");
    let mut fused = FusedResampler::new(&gpu, rc).unwrap();
    fused.set_stream(&stream).unwrap();
    fused.set_beams(&theta, &theta_prime).unwrap();
    // A first launch encodes the tensor maps of these buffers (a pageable copy that may
    // wait): not behind the gate.
    fused.resample(&want, &mut j).unwrap();
    j.poison(POISON).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&j, POISON), "FusedResampler::resample", || {
        fused.resample(&want, &mut j).unwrap()
    });
    assert_eq!(bits(&j.download().unwrap()), bits(&j_want), "fused path");
    let fc = FactorizedConfig { channels: 3, times: c.out_times(), m: 8, n: 12, g: 5, g_prime: 7 };
    let grid_theta: Vec<f32> = (0..fc.theta_len()).map(|_| rng.random_range(-20.0..20.0)).collect();
    let grid_theta_prime: Vec<f32> =
        (0..fc.theta_prime_len()).map(|_| rng.random_range(-20.0..20.0)).collect();
    let mut factorized = FactorizedResampler::new(&gpu, fc).unwrap();
    factorized.set_grid(&grid_theta, &grid_theta_prime).unwrap();
    let mut jf_want = gpu.alloc::<f16>(fc.output_len(), POISON).unwrap();
    factorized.resample(&want, &mut jf_want).unwrap();
    factorized.set_stream(&stream).unwrap();
    factorized.set_grid(&grid_theta, &grid_theta_prime).unwrap();
    let mut jf = gpu.alloc::<f16>(fc.output_len(), POISON).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&jf, POISON), "FactorizedResampler::resample", || {
        factorized.resample(&want, &mut jf).unwrap()
    });
    assert_eq!(bits(&jf.download().unwrap()), bits(&jf_want.download().unwrap()), "factorized path");
    // Quantiser (its counts are zeroed on the stream too).
    let qc = QuantizeConfig { channels: 3, times: rc.times, beams: 70, format: Format::U4 };
    let j_dev = gpu.upload(&j_want).unwrap();
    let scale = gpu.upload(&vec![0.01f32; qc.params_len()]).unwrap();
    let offset = gpu.upload(&vec![1.5f32; qc.params_len()]).unwrap();
    let mut quantizer = Quantizer::new(&gpu, qc).unwrap();
    let mut q_want = gpu.alloc::<u8>(qc.output_len(), 0xa5).unwrap();
    let mut sat_want = gpu.alloc::<u32>(qc.params_len(), 0x5a).unwrap();
    quantizer.quantize(&j_dev, &scale, &offset, &mut q_want, &mut sat_want).unwrap();
    quantizer.set_stream(&stream).unwrap();
    let mut q = gpu.alloc::<u8>(qc.output_len(), 0xa5).unwrap();
    let mut sat = gpu.alloc::<u32>(qc.params_len(), 0x5a).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&q, 0xa5), "Quantizer::quantize", || {
        quantizer.quantize(&j_dev, &scale, &offset, &mut q, &mut sat).unwrap()
    });
    assert_eq!(q.download().unwrap(), q_want.download().unwrap(), "quantiser codes");
    assert_eq!(sat.download().unwrap(), sat_want.download().unwrap(), "quantiser counts");
    // Back to the default stream; a stream of another GPU is refused.
    first.set_stream(gpu.stream()).unwrap();
    first.beamform(&e, &mut i).unwrap();
    if let Some(other) = second_gpu() {
        let theirs = other.new_stream().unwrap();
        assert!(matches!(first.set_stream(&theirs), Err(Error::WrongDevice { .. })));
        assert!(matches!(fft.set_stream(&theirs), Err(Error::WrongDevice { .. })));
        assert!(matches!(weights_path.set_stream(&theirs), Err(Error::WrongDevice { .. })));
        assert!(matches!(fused.set_stream(&theirs), Err(Error::WrongDevice { .. })));
        assert!(matches!(factorized.set_stream(&theirs), Err(Error::WrongDevice { .. })));
        assert!(matches!(quantizer.set_stream(&theirs), Err(Error::WrongDevice { .. })));
    }
}

/// The X-, F- and baseband/delay B-engine launchers run their calls on the caller's stream,
/// with the bytes of the default stream.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_other_launcher_runs_on_the_callers_stream() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    use radio_kernels::baseband_beamformer::{BasebandBeamformer, BeamformerConfig};
    use radio_kernels::correlator::{Correlator, CorrelatorConfig, Format as Ci, Order};
    use radio_kernels::delay_beamformer::{Beam, DelayBeamformer, DelayBeamformerConfig};
    use radio_kernels::pfb::{Channelizer, ChannelizerConfig};
    let gpu = gpu();
    let mut rng = rng();
    let stream = gpu.new_stream().unwrap();
    let random =
        |rng: &mut rand::rngs::StdRng, len: usize| (0..len).map(|_| rng.random()).collect::<Vec<u8>>();

    // Correlator.
    let c = CorrelatorConfig {
        stations: 64,
        pols: 2,
        channels: 2,
        times: 256,
        format: Ci::Ci8,
        order: Order::StationPol,
    };
    let mut correlator = Correlator::new(&gpu, c).unwrap();
    let input = gpu.upload(&random(&mut rng, c.input_bytes())).unwrap();
    let mut want = gpu.alloc::<Complex<i32>>(c.output_len(), POISON).unwrap();
    correlator.correlate(&input, &mut want).unwrap();
    correlator.set_stream(&stream).unwrap();
    let mut v = gpu.alloc::<Complex<i32>>(c.output_len(), POISON).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&v, POISON), "Correlator::correlate", || {
        correlator.correlate(&input, &mut v).unwrap()
    });
    assert_eq!(v.download().unwrap(), want.download().unwrap(), "correlator");

    // Baseband beamformer.
    let b = BeamformerConfig { dishes: 64, beams: 16, freqs: 2, times: 256 };
    let weights: Vec<Complex<i8>> =
        (0..b.weights_len()).map(|_| Complex::new(rng.random(), rng.random())).collect();
    let shifts = vec![Shift::new(8).unwrap(); b.shifts_len()];
    let mut baseband = BasebandBeamformer::new(&gpu, b, &weights, &shifts).unwrap();
    let e = gpu.upload(Ci4::from_bytes(&random(&mut rng, b.e_len()))).unwrap();
    let mut want = gpu.alloc::<Ci4>(b.output_len(), POISON).unwrap();
    baseband.beamform(&e, &mut want).unwrap();
    baseband.set_stream(&stream).unwrap();
    let mut j = gpu.alloc::<Ci4>(b.output_len(), POISON).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&j, POISON), "BasebandBeamformer::beamform", || {
        baseband.beamform(&e, &mut j).unwrap()
    });
    assert_eq!(j.download().unwrap(), want.download().unwrap(), "baseband");

    // Delay beamformer (steered path: no host wait).
    let beams = vec![Beam { pol: 0, dither: false }, Beam { pol: 1, dither: false }];
    let d = DelayBeamformerConfig { antennas: 16, pols: 2, channels: 8, first_channel: 0, times: 256, beams };
    let mut delay = DelayBeamformer::new(&gpu, d.clone()).unwrap();
    let w: Vec<Complex<f32>> = (0..d.steering_len())
        .map(|_| Complex::new(rng.random_range(-0.1..0.1), rng.random_range(-0.1..0.1)))
        .collect();
    let delays: Vec<f32> = (0..d.steering_len()).map(|_| rng.random_range(-0.5..0.5)).collect();
    let steering = delay.upload_steering(&w, &delays).unwrap();
    let x: Vec<Complex<i8>> = (0..d.input_len()).map(|_| Complex::new(rng.random(), rng.random())).collect();
    let x = gpu.upload(&x).unwrap();
    let mut want = gpu.alloc::<Complex<i8>>(d.output_len(), POISON).unwrap();
    let mut want_saturated = gpu.alloc::<u32>(2, 0).unwrap();
    delay.beamform_steered(&x, &steering, None, &mut want, &mut want_saturated).unwrap();
    delay.set_stream(&stream).unwrap();
    let mut y = gpu.alloc::<Complex<i8>>(d.output_len(), POISON).unwrap();
    let mut saturated = gpu.alloc::<u32>(2, 0).unwrap();
    assert_enqueued_on(&gpu, &stream, target(&y, POISON), "DelayBeamformer::beamform_steered", || {
        delay.beamform_steered(&x, &steering, None, &mut y, &mut saturated).unwrap()
    });
    assert_eq!(y.download().unwrap(), want.download().unwrap(), "delay beamformer");

    // PFB channelizer: `run` on input written with `fill_input_with` (push downloads, so it
    // waits for its stream by design).
    let p = ChannelizerConfig { heaps_per_chunk: 1, chunk_samples: 1 << 16, ..ChannelizerConfig::new(1024) };
    // More words than the kept input's buffer holds (its padding included).
    let samples = random(&mut rng, 4 * ((p.capacity_samples() as usize * p.bits as usize / 32) + 1024));
    let words: Vec<u32> =
        samples.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let fill = |mut buffer: radio_kernels::DeviceBufferMut<'_, u32>| {
        let len = buffer.len();
        buffer.upload(&words[..len]).unwrap();
    };
    let mut reference = Channelizer::new(&gpu, p.clone(), None).unwrap();
    reference.fill_input_with(fill).unwrap();
    reference.run().unwrap();
    let want = reference.output().download().unwrap();
    let mut pfb = Channelizer::new(&gpu, p.clone(), None).unwrap();
    pfb.set_stream(&stream).unwrap();
    pfb.fill_input_with(fill).unwrap();
    stream.synchronize().unwrap();
    let out = (pfb.output().device_address(), p.output_bytes(), 0u8);
    // The output holds the zeros it was allocated with until the run writes it.
    assert_enqueued_on(&gpu, &stream, out, "Channelizer::run", || pfb.run().unwrap());
    assert_eq!(pfb.output().download().unwrap(), want, "channelizer");
}
