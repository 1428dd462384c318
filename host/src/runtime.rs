//! The GPU runtime over cudarc: device handle with the kernel module, typed device buffers,
//! streams and a CUDA-event timer.
use crate::error::{DriverContext, Error, Result};
use bytemuck::Pod;
use cudarc::driver::{result, sys, CudaContext, CudaEvent, CudaModule, CudaSlice, CudaStream};
pub use radio_kernels_gpu::modules::{Arch, Family, KernelSpec};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

/// A stream of work on one GPU (cudarc's stream; launches go through
/// `stream.launch_builder(&function)`).
pub type Stream = Arc<CudaStream>;

/// One embedded kernel module: a family's kernels for one architecture, as PTX and, where
/// the build had `ptxas`, as cubins for the devices users run (`radio_kernels::MODULES` lists
/// them).
#[derive(Clone, Copy, Debug)]
pub struct ModuleSource {
    /// The kernel family whose kernels the module holds.
    pub family: Family,
    /// The PTX target: [`Arch::Sm80`] (every supported GPU) or [`Arch::Sm90a`] (compute
    /// capability 9.0 only).
    pub arch: Arch,
    /// The module's PTX text, which the driver JIT-compiles where no cubin fits the device.
    pub ptx: &'static str,
    /// Cubins assembled from `ptx`, one per device target; empty when the build had no
    /// `ptxas`, and in the PTX-only modules `radio_kernels::open_ptx` loads.
    pub cubins: &'static [Cubin],
}

/// A module assembled ahead of time for one device architecture.
#[derive(Clone, Copy, Debug)]
pub struct Cubin {
    /// The `ptxas` target (`sm_80`, `sm_86`, `sm_89`, `sm_90`, `sm_90a`).
    pub target: &'static str,
    /// The cubin (ELF) image, as `ptxas` wrote it.
    pub image: &'static [u8],
}

/// How a module was loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// From the cubin assembled for this device: no compilation at load.
    Cubin,
    /// From PTX, compiled by the driver (or taken from its cache).
    Ptx,
}

/// A module slot: loaded the first time one of its kernels is looked up.
struct ModuleSlot {
    source: ModuleSource,
    loaded: Mutex<Option<(Arc<CudaModule>, Loaded)>>,
}

/// One CUDA device with the project's kernels: each family's PTX module is loaded the first
/// time one of its kernels is looked up (the sm_80 module on every device, and on compute
/// capability 9.0 also the sm_90a module of Hopper's `wgmma` kernels), so a program pays the
/// driver's JIT compilation only for the families it uses.
pub struct Gpu {
    context: Arc<CudaContext>,
    stream: Stream,
    modules: Vec<ModuleSlot>,
    functions: Mutex<HashMap<(&'static str, Arch), CudaFunction>>,
    /// Compute capability 9.0: the sm_90a modules apply.
    hopper: bool,
    wgmma_enabled: AtomicBool,
    ordinal: usize,
    name: String,
    compute_capability: (u32, u32),
    sm_count: u32,
    max_shared_per_block: u32,
}

impl Gpu {
    /// Opens device `ordinal` with the kernel modules `modules` (loaded on first use). Never
    /// panics: without libcuda it returns [`Error::NoDriver`]. Use `radio_kernels::open`,
    /// which passes the embedded modules.
    ///
    /// # Safety
    ///
    /// `modules` must be the modules built from this version of `radio-kernels-gpu`:
    /// launchers look kernels up by name and pass the arguments those kernels declare, so a
    /// module whose kernels of the same names do something else could read or write any
    /// device memory.
    pub unsafe fn new(ordinal: usize, modules: &[ModuleSource]) -> Result<Gpu> {
        let count = Gpu::device_count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let context = CudaContext::new(ordinal).during("creating the CUDA context")?;
        let name = context.name().during("reading the device name")?;
        let (major, minor) = context.compute_capability().during("reading the compute capability")?;
        let (major, minor) = (major as u32, minor as u32);
        if major < 8 {
            return Err(Error::UnsupportedDevice { name, major, minor });
        }
        let sm_count = context
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .during("reading the multiprocessor count")? as u32;
        let max_shared_per_block = context
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .during("reading the shared-memory limit")? as u32;
        // sm_90a code runs on compute capability 9.0 only (the "a" features are not carried
        // forward to later GPUs).
        let hopper = (major, minor) == (9, 0) && modules.iter().any(|m| m.arch == Arch::Sm90a);
        let stream = context.default_stream();
        Ok(Gpu {
            context,
            stream,
            modules: modules.iter().map(|&source| ModuleSlot { source, loaded: Mutex::new(None) }).collect(),
            functions: Mutex::new(HashMap::new()),
            hopper,
            wgmma_enabled: AtomicBool::new(hopper),
            ordinal,
            name,
            compute_capability: (major, minor),
            sm_count,
            max_shared_per_block,
        })
    }

    /// The module of `family` for `arch`, loaded on first use: from the cubin for this
    /// device if the build made one (a cubin the driver refuses falls back to the PTX), else
    /// from the PTX (JIT-compiled by the driver, or taken from its cache). Thread-safe (one
    /// load per module). `Ok(None)` when there is no such module. A failed load returns
    /// [`Error::ModuleLoad`] and is tried again on the next use.
    fn module(&self, family: Family, arch: Arch) -> Result<Option<(Arc<CudaModule>, Loaded)>> {
        let Some(slot) = self.modules.iter().find(|m| m.source.family == family && m.source.arch == arch)
        else {
            return Ok(None);
        };
        let mut loaded = slot.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(module) = loaded.as_ref() {
            return Ok(Some(module.clone()));
        }
        let target = cubin_target(arch, self.compute_capability);
        let cubin =
            slot.source.cubins.iter().find(|c| Some(c.target) == target).and_then(|c| {
                self.context.load_module(cudarc::nvrtc::Ptx::from_binary(c.image.to_vec())).ok()
            });
        let module = match cubin {
            Some(module) => (module, Loaded::Cubin),
            None => {
                let module =
                    self.context.load_module(cudarc::nvrtc::Ptx::from_src(slot.source.ptx)).map_err(
                        |source| Error::ModuleLoad { family: family.name(), arch: arch.name(), source },
                    )?;
                (module, Loaded::Ptx)
            }
        };
        *loaded = Some(module.clone());
        Ok(Some(module))
    }

    /// Loads every module this device uses that is not loaded yet, and returns each one's
    /// family, architecture, how it was loaded and the time it took (a cubin's load, or the
    /// driver's JIT compilation of the PTX): what `radio-kernels selftest` reports. Loading a
    /// module can wait for work already queued on the device, so a program that holds a
    /// stream behind a host-set flag or event while other threads start using new families
    /// should load everything here first.
    pub fn load_modules(&self) -> Result<Vec<(Family, Arch, Loaded, std::time::Duration)>> {
        let mut times = Vec::new();
        for slot in &self.modules {
            let (family, arch) = (slot.source.family, slot.source.arch);
            if arch == Arch::Sm90a && !self.hopper {
                continue;
            }
            let fresh = slot.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_none();
            if fresh {
                let start = std::time::Instant::now();
                if let Some((_, how)) = self.module(family, arch)? {
                    times.push((family, arch, how, start.elapsed()));
                }
            }
        }
        Ok(times)
    }

    /// Number of CUDA devices; [`Error::NoDriver`] without libcuda.
    pub fn device_count() -> Result<usize> {
        // SAFETY: only probes whether the shared library can be opened.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        Ok(CudaContext::device_count().during("counting CUDA devices")? as usize)
    }

    /// The CUDA device number this `Gpu` was opened on (`0..Gpu::device_count()`).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
    /// The device's name as the driver reports it, e.g. "NVIDIA H200".
    pub fn name(&self) -> &str {
        &self.name
    }
    /// (major, minor), e.g. (9, 0) for an H100 or H200.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.compute_capability
    }
    /// Dynamic shared memory a block may opt in to (99 KiB on sm_86, 227 KiB on sm_90).
    pub fn max_shared_per_block(&self) -> u32 {
        self.max_shared_per_block
    }
    /// Number of streaming multiprocessors (132 on an H100 SXM or H200); launchers size
    /// persistent grids by it.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }
    /// The default stream, on which the `Gpu` helpers work.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }
    /// A new stream, for overlapping transfers and kernels.
    pub fn new_stream(&self) -> Result<Stream> {
        self.context.new_stream().during("creating a stream")
    }
    /// The device's primary CUDA context (cudarc's), for calls this crate does not wrap.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// The kernel of `spec` (an entry of a family registry, `radio_kernels_gpu::modules`):
    /// its family's module for its architecture is loaded on first use, the function looked
    /// up once, then cached. An sm_90a kernel on a device other than compute capability 9.0
    /// is [`Error::MissingKernel`].
    pub fn kernel(&self, spec: &KernelSpec) -> Result<CudaFunction> {
        if spec.arch == Arch::Sm90a && !self.hopper {
            return Err(Error::MissingKernel(spec.name));
        }
        let (name, arch) = (spec.name, spec.arch);
        if let Some(function) =
            self.functions.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(&(name, arch))
        {
            return Ok(function.clone());
        }
        let (module, _) = self.module(spec.family, arch)?.ok_or(Error::MissingKernel(name))?;
        let function = module.load_function(name).map_err(|_| Error::MissingKernel(name))?;
        self.functions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert((name, arch), function.clone());
        Ok(function)
    }

    /// Whether launchers use the sm_90a `wgmma` kernels: true on compute capability 9.0
    /// unless turned off with [`Gpu::set_wgmma_enabled`].
    pub fn wgmma_enabled(&self) -> bool {
        self.hopper && self.wgmma_enabled.load(Ordering::Relaxed)
    }

    /// Turns the `wgmma` kernels off (or back on, where the device has them), so that tests
    /// and benchmarks can run the sm_80 kernels, the ones Ampere GPUs use, on a Hopper GPU.
    /// Launchers read it when they are built (they pick their kernels then): it does not
    /// change the kernels of a launcher that exists.
    pub fn set_wgmma_enabled(&self, enabled: bool) {
        self.wgmma_enabled.store(enabled, Ordering::Relaxed);
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`).
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.context.bind_to_thread().during("binding the CUDA context")?;
        result::mem_get_info().during("reading the free device memory")
    }

    /// Whether `buffer` was allocated in this GPU's CUDA context (the primary context of its
    /// device: buffers of two `Gpu`s opened on one ordinal are interchangeable).
    pub fn owns<T: Pod>(&self, buffer: &DeviceBuffer<T>) -> bool {
        buffer.stream.context().cu_ctx() == self.context.cu_ctx()
    }

    /// [`Error::WrongDevice`] unless `buffer` belongs to this GPU ([`Gpu::owns`]); every
    /// launcher checks each buffer it is given before launching.
    pub fn check_owner<T: Pod>(&self, buffer: &DeviceBuffer<T>, what: &'static str) -> Result<()> {
        if self.owns(buffer) {
            Ok(())
        } else {
            Err(Error::WrongDevice { what })
        }
    }

    /// [`Error::WrongDevice`] unless `stream` belongs to this GPU's CUDA context; launchers
    /// check a stream they are given ([`set_stream`](crate::correlator::Correlator::set_stream)).
    pub fn check_stream(&self, stream: &Stream, what: &'static str) -> Result<()> {
        if stream.context().cu_ctx() == self.context.cu_ctx() {
            Ok(())
        } else {
            Err(Error::WrongDevice { what })
        }
    }

    /// Moves a launcher from its stream `current` to `new` (`set_stream`): checks that `new`
    /// is this GPU's ([`Error::WrongDevice`] naming `what`), and makes it wait for the work
    /// already on `current`, which may still use the launcher's buffers.
    pub(crate) fn switch_stream(&self, current: &mut Stream, new: &Stream, what: &'static str) -> Result<()> {
        self.check_stream(new, what)?;
        new.join(current).during("ordering the new stream after the old")?;
        *current = new.clone();
        Ok(())
    }

    /// A [`DeviceBuffer`] over `len` elements of device memory the caller owns (CuPy, another
    /// library, an RDMA receive buffer), from `address`. Checks that the memory is device
    /// memory of this GPU's context (or of a stream-ordered pool on this device), that the
    /// `len` elements lie inside one allocation, and the element alignment. Dropping the
    /// buffer does not free the memory.
    ///
    /// # Safety
    ///
    /// The memory must stay allocated, and must not be freed or reused by its owner, for as
    /// long as the returned buffer or any GPU work enqueued on it lives; the caller orders its
    /// own accesses to it with ours (e.g. by synchronising its stream first).
    pub unsafe fn wrap_device<T: Pod>(&self, address: u64, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>(len)?;
        if bytes == 0 {
            return Err(Error::InvalidConfig("cannot wrap zero elements of device memory".into()));
        }
        if !address.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(Error::InvalidConfig(format!(
                "device address {address:#x} is not aligned to {} bytes",
                std::mem::align_of::<T>()
            )));
        }
        self.context.bind_to_thread().during("binding the CUDA context")?;
        let not_device =
            || Error::InvalidConfig(format!("{address:#x} is not device memory of a CUDA context"));
        // cuPointerGetAttributes (unlike the singular call) answers for any address: one the
        // driver does not know gets a memory type of 0.
        let mut context: sys::CUcontext = std::ptr::null_mut();
        let mut ordinal: i32 = -1;
        let mut memory_type: u32 = 0;
        let mut attributes = [
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        ];
        let mut data: [*mut std::ffi::c_void; 3] = [
            (&mut context as *mut sys::CUcontext).cast(),
            (&mut ordinal as *mut i32).cast(),
            (&mut memory_type as *mut u32).cast(),
        ];
        // SAFETY: each data pointer addresses a value of the type its attribute writes
        // (CUcontext, int, CUmemorytype as unsigned int).
        unsafe { sys::cuPointerGetAttributes(3, attributes.as_mut_ptr(), data.as_mut_ptr(), address) }
            .result()
            .map_err(|_| not_device())?;
        if memory_type != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
            return Err(not_device());
        }
        // Stream-ordered pool allocations report no context: check the device instead.
        let same =
            if context.is_null() { ordinal == self.ordinal as i32 } else { context == self.context.cu_ctx() };
        if !same {
            return Err(Error::WrongDevice { what: "wrapped device memory" });
        }
        let (mut base, mut size) = (0u64, 0usize);
        // SAFETY: writes the allocation's base and size.
        unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut size, address) }
            .result()
            .map_err(|_| not_device())?;
        let end = address as u128 + bytes as u128;
        if end > base as u128 + size as u128 {
            return Err(Error::InvalidConfig(format!(
                "{len} elements ({bytes} bytes) from {address:#x} run past the end of their allocation \
                 ({size} bytes from {base:#x})"
            )));
        }
        // SAFETY: the range was checked to lie in one live allocation of this device; the
        // caller keeps it alive (this function's contract). `owned: false` never frees it.
        let raw = unsafe { self.stream.upgrade_device_ptr::<u8>(address, bytes) };
        Ok(DeviceBuffer {
            raw: ManuallyDrop::new(raw),
            len,
            stream: self.stream.clone(),
            owned: false,
            element: PhantomData,
        })
    }

    /// Allocates `len` elements filled with the byte `poison` (tests poison every output).
    pub fn alloc<T: Pod>(&self, len: usize, poison: u8) -> Result<DeviceBuffer<T>> {
        let bytes = byte_len::<T>(len)?;
        // SAFETY: the memory is initialised by the memset right after.
        let mut raw = unsafe { self.stream.alloc::<u8>(bytes.max(1)) }.during("allocating device memory")?;
        fill(&self.stream, &mut raw, poison)?;
        Ok(DeviceBuffer {
            raw: ManuallyDrop::new(raw),
            len,
            stream: self.stream.clone(),
            owned: true,
            element: PhantomData,
        })
    }

    /// Allocates and uploads `data`.
    pub fn upload<T: Pod>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buffer = self.alloc(data.len(), 0)?;
        buffer.upload(data)?;
        Ok(buffer)
    }

    /// Waits for all work on the default stream and reports any asynchronous error.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().during("waiting for the GPU")
    }

    /// A timer recording on the default stream.
    pub fn timer(&self) -> Result<Timer> {
        Timer::new(&self.stream)
    }
}

fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::InvalidConfig(format!("{len} elements overflow the address space")))
}

fn fill(stream: &Stream, raw: &mut CudaSlice<u8>, value: u8) -> Result<()> {
    use cudarc::driver::DevicePtrMut;
    let bytes = raw.len();
    // The raw driver call works on the calling thread's current context: make it the
    // stream's (another GPU's call may have left its own current).
    stream.context().bind_to_thread().during("binding the CUDA context")?;
    let (ptr, _sync) = raw.device_ptr_mut(stream);
    // SAFETY: `ptr` addresses `bytes` bytes owned by `raw`, used on its own stream.
    unsafe { result::memset_d8_async(ptr, value, bytes, stream.cu_stream()) }.during("filling device memory")
}

/// A device array of `len` elements of a plain-old-data type.
///
/// # Invariant
///
/// A `DeviceBuffer` owns one device allocation of at least `len * size_of::<T>()` bytes
/// (at least one byte), made by the CUDA driver and so aligned to at least 256 bytes, in the
/// context of the `Gpu` that allocated it; the length and the allocation never change apart.
/// Every launcher relies on this: it checks `len()` and ownership ([`Gpu::check_owner`]) and
/// passes the allocation to the kernel. Safe code cannot break it: the allocation is reached
/// only through [`raw`](Self::raw) (shared) or the `unsafe` [`raw_mut`](Self::raw_mut), and
/// engines lend their own buffers as [`DeviceBufferMut`], which cannot be replaced.
///
/// Swapping the allocations of two buffers therefore does not compile in safe code:
///
/// ```compile_fail,E0133
/// # fn f(a: &mut radio_kernels_host::DeviceBuffer<u8>, b: &mut radio_kernels_host::DeviceBuffer<u8>) {
/// std::mem::swap(a.arg_mut(), b.arg_mut()); // raw_mut is unsafe
/// # }
/// ```
pub struct DeviceBuffer<T: Pod> {
    raw: ManuallyDrop<CudaSlice<u8>>,
    len: usize,
    stream: Stream,
    /// False for memory the caller owns ([`Gpu::wrap_device`]): dropping the buffer then
    /// leaves the allocation to its owner.
    owned: bool,
    element: PhantomData<T>,
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: `raw` is taken or dropped once, here, and never used again.
        unsafe {
            if self.owned {
                ManuallyDrop::drop(&mut self.raw);
            } else {
                // Waits (on the GPU) for the buffer's pending uses, and does not free it.
                ManuallyDrop::take(&mut self.raw).leak();
            }
        }
    }
}

impl<T: Pod> DeviceBuffer<T> {
    /// Number of `T` elements (not bytes: the allocation holds `len() * size_of::<T>()`).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Copies `data` (exactly `len` elements) to the device.
    pub fn upload(&mut self, data: &[T]) -> Result<()> {
        let stream = self.stream.clone();
        self.upload_on(&stream, data, "upload source")
    }
    /// Copies `data` (exactly `len` elements, pageable host memory, which the driver stages
    /// before the call returns) to the device on `stream` (a launcher's stream);
    /// [`Error::ShapeMismatch`] naming `what` for another length.
    pub(crate) fn upload_on(&mut self, stream: &Stream, data: &[T], what: &'static str) -> Result<()> {
        if data.len() != self.len {
            return Err(Error::ShapeMismatch { what, expected: self.len, actual: data.len() });
        }
        if data.is_empty() {
            return Ok(());
        }
        let mut view = self.raw.slice_mut(0..std::mem::size_of_val(data));
        stream.memcpy_htod(bytemuck::cast_slice::<T, u8>(data), &mut view).during("copying to the device")
    }
    /// Copies the buffer to a new host vector (waits for the stream).
    pub fn download(&self) -> Result<Vec<T>> {
        self.download_on(&self.stream)
    }
    /// Copies the buffer to a new host vector on `stream` (a launcher's stream) and waits for
    /// it.
    pub(crate) fn download_on(&self, stream: &Stream) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len];
        if self.len > 0 {
            let view = self.raw.slice(0..std::mem::size_of_val(out.as_slice()));
            stream
                .memcpy_dtoh(&view, bytemuck::cast_slice_mut::<T, u8>(&mut out))
                .during("copying from the device")?;
            stream.synchronize().during("waiting for the download")?;
        }
        Ok(out)
    }
    /// Sets every byte to `value` (poisoning before a launch).
    pub fn poison(&mut self, value: u8) -> Result<()> {
        fill(&self.stream, &mut self.raw, value)
    }
    /// The device address of the first element (alignment checks, tensor maps).
    pub fn device_address(&self) -> u64 {
        use cudarc::driver::DevicePtr;
        self.raw.device_ptr(&self.stream).0
    }
    /// The untyped device allocation, to pass as a kernel argument.
    pub fn raw(&self) -> &CudaSlice<u8> {
        &self.raw
    }
    /// The untyped device allocation, mutable, to pass as a kernel argument.
    ///
    /// # Safety
    ///
    /// The caller must not replace the allocation (`std::mem::swap`, `std::mem::replace`,
    /// assignment): the buffer's `len()` would then no longer describe it, and launchers that
    /// trust `len()` would write outside the allocation.
    pub unsafe fn raw_mut(&mut self) -> &mut CudaSlice<u8> {
        &mut self.raw
    }
    /// Sets every byte to `value` on `stream` (a launcher's stream) instead of the buffer's.
    pub(crate) fn poison_on(&mut self, stream: &Stream, value: u8) -> Result<()> {
        fill(stream, &mut self.raw, value)
    }
    /// The CUDA context the allocation belongs to.
    pub(crate) fn cu_ctx(&self) -> sys::CUcontext {
        self.stream.context().cu_ctx()
    }
    /// Whether this buffer owns its allocation (false for [`Gpu::wrap_device`]).
    pub fn owns_allocation(&self) -> bool {
        self.owned
    }
    /// The allocation for this crate's launchers, which never replace it.
    pub(crate) fn arg_mut(&mut self) -> &mut CudaSlice<u8> {
        &mut self.raw
    }
    /// A mutable borrow that cannot replace the allocation ([`DeviceBufferMut`]).
    pub fn borrow_mut(&mut self) -> DeviceBufferMut<'_, T> {
        DeviceBufferMut { buffer: self }
    }
}

/// A mutable borrow of a [`DeviceBuffer`] that an engine lends out (e.g.
/// `Channelizer::fill_input_with`): it can upload, poison and be passed to kernels, but not
/// be swapped for another buffer, so the engine's sizes stay true. Reads go through `Deref`.
pub struct DeviceBufferMut<'a, T: Pod> {
    buffer: &'a mut DeviceBuffer<T>,
}

impl<T: Pod> DeviceBufferMut<'_, T> {
    /// Copies `data` (exactly `len` elements) to the device.
    pub fn upload(&mut self, data: &[T]) -> Result<()> {
        self.buffer.upload(data)
    }
    /// Sets every byte to `value`.
    pub fn poison(&mut self, value: u8) -> Result<()> {
        self.buffer.poison(value)
    }
    /// The untyped device allocation, mutable, to pass as a kernel argument.
    ///
    /// # Safety
    ///
    /// As [`DeviceBuffer::raw_mut`]: the caller must not replace the allocation.
    pub unsafe fn raw_mut(&mut self) -> &mut CudaSlice<u8> {
        &mut self.buffer.raw
    }
}

impl<T: Pod> std::ops::Deref for DeviceBufferMut<'_, T> {
    type Target = DeviceBuffer<T>;
    fn deref(&self) -> &DeviceBuffer<T> {
        self.buffer
    }
}

/// Enqueues the copy of `source` into `destination` (same length) on `stream`.
pub(crate) fn copy_on<T: Pod>(
    stream: &Stream,
    source: &DeviceBuffer<T>,
    destination: &mut DeviceBuffer<T>,
) -> Result<()> {
    if source.len() != destination.len() {
        return Err(Error::ShapeMismatch {
            what: "device copy destination",
            expected: source.len(),
            actual: destination.len(),
        });
    }
    let bytes = source.len() * std::mem::size_of::<T>();
    if bytes == 0 {
        return Ok(());
    }
    let view = source.raw().slice(0..bytes);
    let mut target = destination.arg_mut().slice_mut(0..bytes);
    stream.memcpy_dtod(&view, &mut target).during("copying on the device")
}

/// Times GPU work between `start` and `stop` with CUDA events.
pub struct Timer {
    start: CudaEvent,
    stop: CudaEvent,
    stream: Stream,
}

impl Timer {
    /// A timer whose two CUDA events record on `stream`; [`Error::Driver`] if an event
    /// cannot be created.
    pub fn new(stream: &Stream) -> Result<Timer> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let context = stream.context();
        Ok(Timer {
            start: context.new_event(flags).during("creating a timing event")?,
            stop: context.new_event(flags).during("creating a timing event")?,
            stream: stream.clone(),
        })
    }
    /// Records the start event on the timer's stream (after the work already queued there);
    /// it does not wait.
    pub fn start(&self) -> Result<()> {
        self.start.record(&self.stream).during("recording the start event")
    }
    /// Records the stop event, waits for it and returns the elapsed milliseconds.
    pub fn stop(&self) -> Result<f32> {
        self.stop.record(&self.stream).during("recording the stop event")?;
        self.start.elapsed_ms(&self.stop).during("reading the elapsed time")
    }
}

/// Raises `function`'s dynamic shared-memory limit to `bytes` (launches asking for more than
/// the default 48 KiB fail without it); `during` names the step in the typed error.
pub fn allow_dynamic_shared(function: &CudaFunction, bytes: u32, during: &'static str) -> Result<()> {
    function
        .set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            bytes as i32,
        )
        .during(during)
}

/// A launch configuration of `blocks` one-dimensional blocks of `threads` threads.
pub fn launch_1d(blocks: u32, threads: u32, shared_bytes: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: shared_bytes }
}

/// The cubin target for modules of `arch` on a device of compute capability
/// `(major, minor)`: the sm_80 modules are assembled for sm_80, sm_86, sm_89 and sm_90, the
/// sm_90a ones for sm_90a; other devices (and builds without ptxas) use the PTX.
fn cubin_target(arch: Arch, (major, minor): (u32, u32)) -> Option<&'static str> {
    match (arch, major, minor) {
        (Arch::Sm80, 8, 0) => Some("sm_80"),
        (Arch::Sm80, 8, 6) => Some("sm_86"),
        (Arch::Sm80, 8, 9) => Some("sm_89"),
        (Arch::Sm80, 9, 0) => Some("sm_90"),
        (Arch::Sm90a, 9, 0) => Some("sm_90a"),
        _ => None,
    }
}
