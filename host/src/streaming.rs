//! Streaming: the one mechanism by which every engine runs from host memory at the PCIe
//! limit, as in Clark, La Plante & Greenhill, "Accelerating radio astronomy cross-correlation
//! with graphics processing units" (sec. 5, Algorithm 1: transfers overlapped with compute)
//! and Merry, "Efficient channelization on a graphics processing unit" (secs. 3.1-3.2: the
//! F-engine bound by PCIe bandwidth).
//!
//! # The pipeline
//!
//! An engine owns three [`Lanes`] (CUDA streams) and rings of `S >= 3` slots. Chunk `k` uses
//! input slot `k mod S` and the next free output slot:
//!
//! ```text
//! upload lane     H2D  host_in[k mod S] -> dev_in[k mod S]
//! compute lane              kernels dev_in[k mod S] (+ engine state) -> dev_out[o]
//! download lane                                          D2H  dev_out[o] -> host_out[o]
//! ```
//!
//! Each copy or kernel waits, on the GPU, only for the operations that last used the same
//! buffer (cudarc records a read and a write event on every device allocation, and one
//! event on every pinned host allocation, and makes each new use wait for them). So the
//! upload of chunk `k + 1`, the kernels of chunk `k` and the download of chunk `k - 1` run at
//! once, and the steady-state time per chunk is
//!
//! ```text
//! t_chunk = max(in_bytes / B_h2d, t_kernels, out_bytes / B_d2h)
//! ```
//!
//! where PCIe's two directions are independent (copies overlapped) and kernels share the GPU
//! with nothing but the copy engines.
//!
//! # Back-pressure
//!
//! Nothing on the hot path allocates, copies on the host, or waits for the previous chunk:
//! - [`InputRing::host_mut`] lends the next input slot's pinned memory; it waits only for
//!   the upload that last read that slot (chunk `k - S`).
//! - [`InputRing::upload_registered`] copies a chunk straight from the caller's memory,
//!   page-locked once with [`Gpu::register_host`] (e.g. a network receive buffer): no host
//!   copy at all.
//! - [`OutputRing::take`] lends the oldest output's pinned memory, waiting only for its
//!   download. An output slot is reused only once its output was taken: an engine whose
//!   output slots all hold outputs not yet taken refuses to submit ([`Error::Backlog`])
//!   instead of overwriting them or waiting for a take that cannot come.
//!
//! Waits on the host use blocking-sync events, so a waiting thread sleeps instead of
//! spinning: an engine's host work is the driver calls that enqueue each chunk.
//!
//! # Threads
//!
//! Rings, lanes and the engines built on them are `Send` (they can move to a worker thread)
//! but are used from one thread at a time (`&mut self`). [`Gpu`] is `Send + Sync`: share it
//! by reference or `Arc` between threads, each running its own engines.
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{DeviceBuffer, Gpu, Stream};
use bytemuck::Pod;
use cudarc::driver::{result, sys, CudaEvent, DevicePtrMut, PinnedHostSlice};
use std::marker::PhantomData;

/// Slots an engine's rings have unless asked otherwise: one chunk uploading, one computing and
/// one downloading.
pub const DEFAULT_DEPTH: usize = 3;

/// The three streams of a streaming engine: copies in, kernels, copies out.
pub struct Lanes {
    upload: Stream,
    compute: Stream,
    download: Stream,
}

impl Lanes {
    /// Three new streams on `gpu`.
    pub fn new(gpu: &Gpu) -> Result<Lanes> {
        Ok(Lanes { upload: gpu.new_stream()?, compute: gpu.new_stream()?, download: gpu.new_stream()? })
    }
    /// The stream of host-to-device copies.
    pub fn upload(&self) -> &Stream {
        &self.upload
    }
    /// The stream of the engine's kernels (and its device-to-device copies).
    pub fn compute(&self) -> &Stream {
        &self.compute
    }
    /// The stream of device-to-host copies.
    pub fn download(&self) -> &Stream {
        &self.download
    }
    /// Waits for all work of the three lanes and reports any asynchronous error.
    pub fn synchronize(&self) -> Result<()> {
        for lane in [&self.upload, &self.compute, &self.download] {
            lane.synchronize().during("waiting for a streaming lane")?;
        }
        Ok(())
    }
}

impl Drop for Lanes {
    /// Waits for the lanes' work, so that an engine needs no `Drop` of its own: buffers
    /// dropped before its lanes wait for their last uses through their events, and buffers
    /// dropped after them (once the last extra stream is gone cudarc no longer orders frees
    /// after other streams) find the lanes idle.
    fn drop(&mut self) {
        let context = self.compute.context().clone();
        for lane in [&self.upload, &self.compute, &self.download] {
            context.record_err(lane.synchronize());
        }
    }
}

/// Checks a ring's slot count: at least one (three or more overlap upload, compute and
/// download).
fn check_depth(depth: usize, what: &'static str) -> Result<()> {
    if depth == 0 {
        return Err(Error::InvalidConfig(format!("{what} needs at least one slot")));
    }
    Ok(())
}

/// Page-locked host memory of `len` elements, the staging memory of copies that overlap
/// kernels. Allocated cached (not write-combined), so the CPU reads it at full speed.
///
/// Access waits for the last copy that used the buffer, so the host never sees a copy half
/// done: [`as_slice`](Self::as_slice) and [`as_mut_slice`](Self::as_mut_slice) return an error
/// only on a device error.
pub struct PinnedBuffer<T: Pod> {
    /// `max(len * size_of::<T>(), 1)` bytes, page-aligned.
    raw: PinnedHostSlice<u8>,
    len: usize,
    element: PhantomData<T>,
}

impl<T: Pod> PinnedBuffer<T> {
    /// `len` zeroed elements of page-locked memory in `gpu`'s context.
    pub fn new(gpu: &Gpu, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes =
            len.checked_mul(std::mem::size_of::<T>()).filter(|&b| b < isize::MAX as usize).ok_or_else(
                || Error::InvalidConfig(format!("{len} pinned elements overflow the address space")),
            )?;
        // SAFETY: the allocation is zeroed right below, before any reference to it exists.
        let mut raw = unsafe { gpu.context().alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }
            .during("allocating pinned host memory")?;
        let start = raw.as_mut_ptr().during("mapping pinned host memory")?;
        // SAFETY: `start` addresses the `bytes.max(1)` bytes just allocated, used by nothing else.
        unsafe { std::ptr::write_bytes(start, 0, bytes.max(1)) };
        Ok(PinnedBuffer { raw, len, element: PhantomData })
    }
    /// Number of `T` elements (not bytes).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// The elements, once the last copy that used this buffer has finished.
    pub fn as_slice(&self) -> Result<&[T]> {
        let bytes = self.bytes();
        let raw = self.raw.as_slice().during("waiting for a copy of pinned memory")?;
        // The allocation is page-aligned, so any Pod type's alignment holds.
        Ok(bytemuck::cast_slice(&raw[..bytes]))
    }
    /// The elements, mutable, once the last copy that used this buffer has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        let bytes = self.bytes();
        let raw = self.raw.as_mut_slice().during("waiting for a copy of pinned memory")?;
        Ok(bytemuck::cast_slice_mut(&mut raw[..bytes]))
    }
    /// Enqueues the copy of the whole buffer into `device` (same length) on `stream`.
    pub(crate) fn copy_to(&self, stream: &Stream, device: &mut DeviceBuffer<T>) -> Result<()> {
        check_len("pinned upload destination", self.len, device.len())?;
        if self.len == 0 {
            return Ok(());
        }
        let mut view = device.arg_mut().slice_mut(0..self.bytes());
        if self.raw.len() == self.bytes() {
            stream.memcpy_htod(&self.raw, &mut view).during("copying a chunk to the device")
        } else {
            Err(Error::InvalidConfig("pinned buffer size (internal error)".into()))
        }
    }
    /// Enqueues the copy of `device` (same length) into the whole buffer on `stream`.
    pub(crate) fn copy_from(&mut self, stream: &Stream, device: &DeviceBuffer<T>) -> Result<()> {
        check_len("pinned download source", self.len, device.len())?;
        if self.len == 0 {
            return Ok(());
        }
        let view = device.raw().slice(0..self.bytes());
        stream.memcpy_dtoh(&view, &mut self.raw).during("copying a result to the host")
    }
}

fn check_len(what: &'static str, expected: usize, actual: usize) -> Result<()> {
    if expected != actual {
        return Err(Error::ShapeMismatch { what, expected, actual });
    }
    Ok(())
}

/// The caller's host memory, page-locked once (`cuMemHostRegister`) so that chunks are copied
/// to the device straight from it ([`InputRing::upload_registered`]), e.g. from a network
/// receive buffer. It stays registered, and mutably borrowed, for the value's life; writing
/// to it ([`as_mut_slice`](Self::as_mut_slice)) waits for the copies that read it.
pub struct RegisteredHost<'a, T: Pod> {
    data: &'a mut [T],
    /// Recorded after each copy that reads `data`.
    copied: CudaEvent,
    gpu_context: std::sync::Arc<cudarc::driver::CudaContext>,
}

impl Gpu {
    /// Page-locks `data` for fast, asynchronous copies from it; it is unregistered when the
    /// returned value is dropped (after the copies that read it). `data` must not be empty.
    pub fn register_host<'a, T: Pod>(&self, data: &'a mut [T]) -> Result<RegisteredHost<'a, T>> {
        if data.is_empty() {
            return Err(Error::InvalidConfig("cannot register an empty host buffer".into()));
        }
        let context = self.context().clone();
        context.bind_to_thread().during("binding the CUDA context")?;
        let copied = context
            .new_event(Some(sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC))
            .during("creating a copy event")?;
        let bytes = std::mem::size_of_val(data);
        // SAFETY: `data` is `bytes` bytes of host memory borrowed for 'a; it is unregistered
        // in Drop, before the borrow ends. PORTABLE: usable from every context.
        unsafe {
            sys::cuMemHostRegister_v2(data.as_mut_ptr().cast(), bytes, sys::CU_MEMHOSTREGISTER_PORTABLE)
                .result()
                .during("page-locking host memory (cuMemHostRegister)")?;
        }
        Ok(RegisteredHost { data, copied, gpu_context: context })
    }
}

impl<T: Pod> RegisteredHost<'_, T> {
    /// Number of `T` elements registered (not bytes).
    pub fn len(&self) -> usize {
        self.data.len()
    }
    /// Whether no elements are registered (never true: [`Gpu::register_host`] refuses an
    /// empty slice).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// The memory, for reading (copies only read it, so this never waits).
    pub fn as_slice(&self) -> &[T] {
        self.data
    }
    /// The memory, for writing, once every copy enqueued from it has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.copied.synchronize().during("waiting for copies from registered memory")?;
        Ok(self.data)
    }
}

impl<T: Pod> Drop for RegisteredHost<'_, T> {
    fn drop(&mut self) {
        // The copies must finish before the memory is unpinned and the borrow ends; errors
        // here are recorded by cudarc (a Drop cannot return them).
        let context = &self.gpu_context;
        context.record_err(self.copied.synchronize());
        context.record_err(context.bind_to_thread());
        // SAFETY: `data` was registered in `register_host`, once.
        context.record_err(unsafe { sys::cuMemHostUnregister(self.data.as_mut_ptr().cast()).result() });
    }
}

/// The input half of a streaming engine: `depth` slots, each a pinned host buffer and a device
/// buffer of `len` elements. Chunk `k` goes through slot `k mod depth`.
pub struct InputRing<T: Pod> {
    host: Vec<PinnedBuffer<T>>,
    device: Vec<DeviceBuffer<T>>,
    /// Chunks uploaded since the start.
    uploaded: u64,
}

impl<T: Pod> InputRing<T> {
    /// `depth` slots of `len` elements (zeroed).
    pub fn new(gpu: &Gpu, depth: usize, len: usize) -> Result<InputRing<T>> {
        check_depth(depth, "an input ring")?;
        let mut host = Vec::with_capacity(depth);
        let mut device = Vec::with_capacity(depth);
        for _ in 0..depth {
            host.push(PinnedBuffer::new(gpu, len)?);
            device.push(gpu.alloc(len, 0)?);
        }
        Ok(InputRing { host, device, uploaded: 0 })
    }
    /// Number of slots (at least 1): chunks that can be in flight at once.
    pub fn depth(&self) -> usize {
        self.host.len()
    }
    /// `T` elements per chunk (per slot), not bytes.
    pub fn len(&self) -> usize {
        self.host[0].len()
    }
    /// Whether a chunk holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Chunks uploaded since the start.
    pub fn uploaded(&self) -> u64 {
        self.uploaded
    }
    fn next_slot(&self) -> usize {
        (self.uploaded % self.depth() as u64) as usize
    }
    /// The pinned memory of the next chunk's slot: the chunk last uploaded from it (zeros at
    /// first). Waits only for that slot's previous upload.
    pub fn host_mut(&mut self) -> Result<&mut [T]> {
        let slot = self.next_slot();
        self.host[slot].as_mut_slice()
    }
    /// The device buffer of slot `slot` (`0..depth()`); the compute lane reads chunk `k` from
    /// slot `k mod depth()`.
    pub fn device(&self, slot: usize) -> &DeviceBuffer<T> {
        &self.device[slot % self.depth()]
    }
    /// Starts over at slot 0, keeping the slots (their memory, and any view of it, stays
    /// valid): for an engine's `reset`, after its lanes are synchronised.
    pub(crate) fn restart(&mut self) {
        self.uploaded = 0;
    }
    /// Enqueues the upload of the next slot's pinned memory on `lanes.upload()`; returns the
    /// device buffer the chunk lands in, for the compute lane (which waits for the copy).
    pub fn upload(&mut self, lanes: &Lanes) -> Result<&DeviceBuffer<T>> {
        let slot = self.next_slot();
        self.host[slot].copy_to(lanes.upload(), &mut self.device[slot])?;
        self.uploaded += 1;
        Ok(&self.device[slot])
    }
    /// Checks that `len()` elements of `source` from element `offset` exist and that `source`
    /// is registered in this ring's context; returns the end of the chunk. Engines call it
    /// before changing anything else.
    pub fn check_registered(&self, source: &RegisteredHost<'_, T>, offset: usize) -> Result<usize> {
        let len = self.len();
        let end = offset.checked_add(len).filter(|&end| end <= source.len()).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "a chunk of {len} elements from element {offset} runs past the registered buffer ({} elements)",
                source.len()
            ))
        })?;
        if source.gpu_context.cu_ctx() != self.device[0].cu_ctx() {
            return Err(Error::WrongDevice { what: "registered host memory" });
        }
        Ok(end)
    }
    /// Enqueues the upload of `len()` elements of `source` from element `offset` (the
    /// caller's registered memory: no host copy) into the next slot.
    pub fn upload_registered(
        &mut self,
        lanes: &Lanes,
        source: &RegisteredHost<'_, T>,
        offset: usize,
    ) -> Result<&DeviceBuffer<T>> {
        let end = self.check_registered(source, offset)?;
        let len = self.len();
        let slot = self.next_slot();
        let stream = lanes.upload();
        let src = &source.data[offset..end];
        if len > 0 {
            let bytes = std::mem::size_of_val(src);
            stream.context().bind_to_thread().during("binding the CUDA context")?;
            let device = &mut self.device[slot];
            let mut view = device.arg_mut().slice_mut(0..bytes);
            let (dst, _record) = view.device_ptr_mut(stream);
            // SAFETY: `dst` addresses `bytes` bytes of the slot's device buffer (ordered after
            // its last uses by `device_ptr_mut`); `src` is registered host memory that cannot
            // be written or unregistered before `copied`, recorded right after, completes.
            unsafe { result::memcpy_htod_async(dst, src, stream.cu_stream()) }
                .during("copying a chunk from registered memory")?;
        }
        source.copied.record(stream).during("recording a copy event")?;
        self.uploaded += 1;
        Ok(&self.device[slot])
    }
}

/// The output half of a streaming engine: `slots` device buffers of `len` elements, each
/// with a pinned host buffer its download lands in. Outputs are written, downloaded and
/// taken in order; a slot is reused only once its output was taken.
pub struct OutputRing<T: Pod> {
    device: Vec<DeviceBuffer<T>>,
    host: Vec<PinnedBuffer<T>>,
    /// Outputs downloaded (enqueued) and taken since the start.
    written: u64,
    taken: u64,
    what: &'static str,
}

impl<T: Pod> OutputRing<T> {
    /// `slots` slots of `len` elements; `what` names the output in errors.
    pub fn new(gpu: &Gpu, slots: usize, len: usize, what: &'static str) -> Result<OutputRing<T>> {
        check_depth(slots, "an output ring")?;
        let mut host = Vec::with_capacity(slots);
        let mut device = Vec::with_capacity(slots);
        for _ in 0..slots {
            host.push(PinnedBuffer::new(gpu, len)?);
            device.push(gpu.alloc(len, 0)?);
        }
        Ok(OutputRing { device, host, written: 0, taken: 0, what })
    }
    /// Number of slots (at least 1): outputs that can wait to be taken.
    pub fn slots(&self) -> usize {
        self.host.len()
    }
    /// `T` elements per output (per slot), not bytes.
    pub fn len(&self) -> usize {
        self.host[0].len()
    }
    /// Whether an output holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Outputs enqueued and not yet taken.
    pub fn pending(&self) -> usize {
        (self.written - self.taken) as usize
    }
    /// Free slots: outputs that can be enqueued before one is taken.
    pub fn free(&self) -> usize {
        self.slots() - self.pending()
    }
    /// [`Error::Backlog`] unless `outputs` slots are free.
    pub fn check_free(&self, outputs: usize) -> Result<()> {
        if outputs > self.free() {
            return Err(Error::Backlog { what: self.what, slots: self.slots() });
        }
        Ok(())
    }
    fn next_slot(&self) -> usize {
        (self.written % self.slots() as u64) as usize
    }
    /// The device buffer of the next output, for the compute lane to write (its last download
    /// is waited for on the GPU); [`Error::Backlog`] when every slot holds an output not yet
    /// taken.
    pub fn next_device(&mut self) -> Result<&mut DeviceBuffer<T>> {
        self.check_free(1)?;
        let slot = self.next_slot();
        Ok(&mut self.device[slot])
    }
    /// Enqueues the download of the next output (written by the compute lane) on
    /// `lanes.download()`.
    pub fn download(&mut self, lanes: &Lanes) -> Result<()> {
        self.check_free(1)?;
        let slot = self.next_slot();
        self.host[slot].copy_from(lanes.download(), &self.device[slot])?;
        self.written += 1;
        Ok(())
    }
    /// Drops every output not yet taken and starts over at slot 0, keeping the slots (their
    /// memory stays valid): for an engine's `reset`, after its lanes are synchronised.
    pub(crate) fn restart(&mut self) {
        (self.written, self.taken) = (0, 0);
    }
    /// The oldest output not yet taken, once downloaded; `None` when none is pending. Its
    /// slot is free for reuse once the borrow ends.
    pub fn take(&mut self) -> Result<Option<&[T]>> {
        if self.pending() == 0 {
            return Ok(None);
        }
        let slot = (self.taken % self.slots() as u64) as usize;
        self.taken += 1;
        self.host[slot].as_slice().map(Some)
    }
}

/// The shape every streaming engine shares, for drivers that run any of them (the
/// `radio-kernels stream` command, benchmarks, [`pump`]). Each engine also has typed
/// `input()` and `output()` methods for its own data; these are the engine-independent steps.
pub trait Engine {
    /// Enqueues the chunk in the next input slot. [`Error::Backlog`], changing nothing, when
    /// it would complete more outputs than there are free output slots.
    fn submit(&mut self) -> Result<()>;
    /// Waits for the oldest pending output and releases its slot unread; `false` when none is
    /// pending.
    fn skip_output(&mut self) -> Result<bool>;
    /// Outputs enqueued and not yet taken.
    fn pending(&self) -> usize;
    /// Output slots free now.
    fn free_outputs(&self) -> usize;
    /// The most outputs one submit can complete (a submit needs that many free slots): one,
    /// unless the engine says otherwise.
    fn max_outputs_per_submit(&self) -> usize {
        1
    }
    /// Completes what the stream holds at its end (e.g. a partial integration), enqueuing its
    /// outputs; engines whose outputs are whole after every submit do nothing (the default).
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Runs `chunks` submits of whatever the input slots hold, releasing outputs unread as slots
/// are needed, then flushes and releases the rest: the steady state of an engine whose
/// producer writes in place and whose consumer reads in place. `progress` is called after
/// each submit with the number submitted.
pub fn pump<E: Engine + ?Sized>(engine: &mut E, chunks: u64, mut progress: impl FnMut(u64)) -> Result<()> {
    for k in 0..chunks {
        while engine.free_outputs() < engine.max_outputs_per_submit() {
            if !engine.skip_output()? {
                return Err(Error::InvalidConfig(
                    "an engine has fewer output slots than one submit can complete (internal error)".into(),
                ));
            }
        }
        engine.submit()?;
        progress(k + 1);
    }
    engine.flush()?;
    while engine.skip_output()? {}
    Ok(())
}
