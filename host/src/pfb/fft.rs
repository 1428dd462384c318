//! The cuFFT C2C plan of the three-kernel path.
use super::*;

/// A batched C2C cuFFT plan, executed on the stream of each call.
pub(super) struct FftPlan {
    pub(super) handle: cufft_sys::cufftHandle,
    /// The stream the plan is set to (`CUstream` as an address, so the plan stays `Send`).
    pub(super) stream: usize,
}

impl FftPlan {
    pub(super) fn new(gpu: &Gpu, size: u32, batch: u32) -> Result<FftPlan> {
        // SAFETY: only probes whether the shared library can be opened.
        if !unsafe { cufft_sys::is_culib_present() } {
            return Err(Error::MissingLibrary("cufft"));
        }
        gpu.context().bind_to_thread().during("binding the CUDA context")?;
        let mut n = [size as i32];
        // SAFETY: a 1-D contiguous batched layout (null embeds), sizes checked by the config.
        let handle = unsafe {
            cufft::plan_many(
                1,
                n.as_mut_ptr(),
                std::ptr::null_mut(),
                1,
                size as i32,
                std::ptr::null_mut(),
                1,
                size as i32,
                cufft_sys::cufftType::CUFFT_C2C,
                batch as i32,
            )
        }
        .map_err(fft_error("creating the cuFFT plan"))?;
        let mut plan = FftPlan { handle, stream: usize::MAX };
        plan.set_stream(gpu.stream())?;
        Ok(plan)
    }

    /// Makes the plan run on `stream` (`cufftSetStream`) unless it already does.
    pub(super) fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        let raw = stream.cu_stream();
        if self.stream != raw as usize {
            // SAFETY: the stream is alive and belongs to the plan's context; every execution
            // sets its own stream first, so a stream dropped later is never used by the plan.
            unsafe { cufft::set_stream(self.handle, raw as _) }
                .map_err(fft_error("setting the cuFFT stream"))?;
            self.stream = raw as usize;
        }
        Ok(())
    }

    /// Enqueues the forward transform of `input` into `output` on `stream`.
    pub(super) fn forward(
        &mut self,
        stream: &Stream,
        input: &mut DeviceBuffer<Complex<f32>>,
        output: &mut DeviceBuffer<Complex<f32>>,
    ) -> Result<()> {
        stream.context().bind_to_thread().during("binding the CUDA context")?;
        self.set_stream(stream)?;
        let (i, _a) = input.arg_mut().device_ptr_mut(stream);
        let (o, _b) = output.arg_mut().device_ptr_mut(stream);
        // SAFETY: both buffers hold `size * batch` complex values (the Channelizer sizes them).
        unsafe { cufft::exec_c2c(self.handle, i as *mut _, o as *mut _, -1) }
            .map_err(fft_error("running the C2C transform"))
    }
}

/// The typed error of a failed cuFFT call.
pub(super) fn fft_error(during: &'static str) -> impl Fn(cufft::CufftError) -> Error {
    move |e| Error::Library { library: "cufft", during, code: e.0 as i32 }
}

impl Drop for FftPlan {
    fn drop(&mut self) {
        // SAFETY: the handle came from plan_many and is destroyed once.
        let _ = unsafe { cufft::destroy(self.handle) };
    }
}
