//! The streaming mechanism's pieces on the GPU: pinned rings, registered host memory and
//! device memory the caller owns. Engines are tested in their families' files.
mod common;

use common::*;
use radio_kernels::streaming::{InputRing, Lanes, OutputRing, PinnedBuffer};
use radio_kernels::{DeviceBuffer, Error, Gpu};
use rand::Rng;

/// Object types the API documents as usable across threads.
#[test]
fn thread_safety_is_as_documented() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Gpu>();
    send::<DeviceBuffer<u8>>();
    send::<InputRing<u8>>();
    send::<OutputRing<u32>>();
    send::<PinnedBuffer<u16>>();
    send::<Lanes>();
    send_sync::<radio_kernels::correlator::Correlator<'static>>();
    send::<radio_kernels::correlator::Integration<'static, 'static>>();
    send_sync::<radio_kernels::baseband_beamformer::BasebandBeamformer<'static>>();
    send::<radio_kernels::baseband_beamformer::BasebandStream<'static, 'static>>();
    send_sync::<radio_kernels::delay_beamformer::DelayBeamformer<'static>>();
    send_sync::<radio_kernels::pfb::Channelizer<'static>>();
    send::<radio_kernels::pfb::ChannelizerStream<'static>>();
}

/// Chunks go through an input ring into device slots in order, and outputs through an output
/// ring into pinned memory in order; a full output ring refuses more (`Backlog`).
#[test]
#[ignore = "needs a CUDA GPU"]
fn rings_move_chunks_in_order() {
    let gpu = gpu();
    let mut rng = rng();
    let lanes = Lanes::new(&gpu).unwrap();
    let len = rng.random_range(1..100_000usize);
    let depth = 3;
    let mut input = InputRing::<u32>::new(&gpu, depth, len).unwrap();
    let mut output = OutputRing::<u32>::new(&gpu, depth, len, "test output").unwrap();
    let chunks: Vec<Vec<u32>> = (0..7).map(|_| (0..len).map(|_| rng.random()).collect()).collect();
    let mut got = Vec::new();
    for chunk in &chunks {
        input.host_mut().unwrap().copy_from_slice(chunk);
        let slot = ((input.uploaded()) % depth as u64) as usize;
        input.upload(&lanes).unwrap();
        lanes.upload().synchronize().unwrap();
        assert_eq!(&input.device(slot).download().unwrap(), chunk);
        if output.free() == 0 {
            assert!(matches!(output.next_device(), Err(Error::Backlog { slots: 3, .. })));
            assert!(matches!(output.download(&lanes), Err(Error::Backlog { .. })));
            got.push(output.take().unwrap().unwrap().to_vec());
        }
        output.next_device().unwrap().upload(chunk).unwrap();
        output.download(&lanes).unwrap();
    }
    while let Some(v) = output.take().unwrap() {
        got.push(v.to_vec());
    }
    assert_eq!(got, chunks);
    assert!(matches!(InputRing::<u8>::new(&gpu, 0, 4), Err(Error::InvalidConfig(_))));
}

/// Registered host memory uploads without a host copy; writing to it waits for the copies.
#[test]
#[ignore = "needs a CUDA GPU"]
fn registered_host_memory_feeds_the_ring() {
    let gpu = gpu();
    let mut rng = rng();
    let lanes = Lanes::new(&gpu).unwrap();
    let len = 4096;
    let mut data: Vec<u16> = (0..4 * len).map(|_| rng.random()).collect();
    let expected = data.clone();
    let mut ring = InputRing::<u16>::new(&gpu, 3, len).unwrap();
    let mut registered = gpu.register_host(&mut data).unwrap();
    for k in 0..4 {
        let slot = (ring.uploaded() % 3) as usize;
        ring.upload_registered(&lanes, &registered, k * len).unwrap();
        lanes.upload().synchronize().unwrap();
        assert_eq!(ring.device(slot).download().unwrap(), expected[k * len..(k + 1) * len]);
    }
    assert!(matches!(ring.upload_registered(&lanes, &registered, 3 * len + 1), Err(Error::InvalidConfig(_))));
    registered.as_mut_slice().unwrap()[0] ^= 1;
    drop(registered);
    assert_eq!(data[0], expected[0] ^ 1);
    assert!(matches!(gpu.register_host::<u8>(&mut []), Err(Error::InvalidConfig(_))));
}

/// Device memory the caller owns is wrapped after checks of its context, extent and
/// alignment, used like our own, and not freed when the wrapper is dropped.
#[test]
#[ignore = "needs a CUDA GPU"]
fn wrapped_device_memory_is_checked_and_not_freed() {
    let gpu = gpu();
    let mut rng = rng();
    let values: Vec<u32> = (0..1000).map(|_| rng.random()).collect();
    let owner = gpu.upload(&values).unwrap();
    let address = owner.device_address();
    gpu.synchronize().unwrap();
    {
        // SAFETY: `owner` outlives the wrapper.
        let mut view = unsafe { gpu.wrap_device::<u32>(address, 1000) }.unwrap();
        assert!(!view.owns_allocation());
        assert_eq!(view.download().unwrap(), values);
        view.upload(&values.iter().map(|v| !v).collect::<Vec<_>>()).unwrap();
        // SAFETY: as above; an interior, aligned sub-range.
        let tail = unsafe { gpu.wrap_device::<u32>(address + 4 * 990, 10) }.unwrap();
        assert_eq!(tail.download().unwrap(), values[990..].iter().map(|v| !v).collect::<Vec<_>>());
    }
    // The wrappers are gone; the owner's memory is intact and holds what they wrote.
    assert_eq!(owner.download().unwrap(), values.iter().map(|v| !v).collect::<Vec<_>>());
    // SAFETY (all below): the calls must fail their checks before wrapping anything.
    unsafe {
        assert!(matches!(gpu.wrap_device::<u32>(address, 1001), Err(Error::InvalidConfig(_))));
        assert!(matches!(gpu.wrap_device::<u32>(address + 2, 4), Err(Error::InvalidConfig(_))));
        assert!(matches!(gpu.wrap_device::<u32>(address, 0), Err(Error::InvalidConfig(_))));
        let host = values.as_ptr() as u64;
        assert!(matches!(gpu.wrap_device::<u32>(host, 4), Err(Error::InvalidConfig(_))));
    }
    // Memory from the driver's plain allocator (as other libraries make it) wraps too.
    let context = gpu.context().clone();
    context.bind_to_thread().unwrap();
    // SAFETY: a 4 KiB allocation freed below, after the wrapper is dropped and the GPU idle.
    let raw = unsafe { cudarc::driver::result::malloc_sync(4096) }.unwrap();
    {
        // SAFETY: `raw` lives until freed below.
        let mut view = unsafe { gpu.wrap_device::<u8>(raw, 4096) }.unwrap();
        view.poison(0x5a).unwrap();
        assert!(view.download().unwrap().iter().all(|&b| b == 0x5a));
    }
    gpu.synchronize().unwrap();
    // SAFETY: allocated above, no longer used.
    unsafe { cudarc::driver::result::free_sync(raw) }.unwrap();
    // A buffer of another GPU is refused.
    if let Some(other) = second_gpu() {
        let theirs = other.upload(&values).unwrap();
        other.synchronize().unwrap();
        // SAFETY: checks only.
        let wrapped = unsafe { gpu.wrap_device::<u32>(theirs.device_address(), 1000) };
        assert!(matches!(wrapped, Err(Error::WrongDevice { .. })));
    } else {
        println!("skipped the other-GPU case: needs 2 GPUs");
    }
}

/// A pinned buffer starts zeroed and keeps what is written to it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_buffers_start_zeroed() {
    let gpu = gpu();
    let mut buffer = PinnedBuffer::<u64>::new(&gpu, 12345).unwrap();
    assert!(buffer.as_slice().unwrap().iter().all(|&v| v == 0));
    buffer.as_mut_slice().unwrap()[7] = 9;
    assert_eq!(buffer.as_slice().unwrap()[7], 9);
    let empty = PinnedBuffer::<u8>::new(&gpu, 0).unwrap();
    assert!(empty.as_slice().unwrap().is_empty());
}
