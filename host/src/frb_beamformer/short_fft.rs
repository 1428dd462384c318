//! The tensor-core short FFT launcher ([`ShortFft`]) and its buffer checks.
use super::*;

/// Checks the buffers of a batched FFT: `x` holds `batch * N` complex values and `y`
/// `batch * 2N`.
pub fn check_fft_buffers(n: u32, batch: usize, x_len: usize, y_len: usize) -> Result<()> {
    check_fft_size(n)?;
    if batch == 0 || batch > MAX_FFT_BATCH {
        return Err(Error::InvalidConfig(format!("FFT batch must be in 1..={MAX_FFT_BATCH}, got {batch}")));
    }
    let n = n as usize;
    if x_len != batch * n {
        return Err(Error::ShapeMismatch {
            what: "short FFT input (complex f16)",
            expected: batch * n,
            actual: x_len,
        });
    }
    if y_len != batch * 2 * n {
        return Err(Error::ShapeMismatch {
            what: "short FFT output (complex f16)",
            expected: batch * 2 * n,
            actual: y_len,
        });
    }
    Ok(())
}

/// Largest batch of one [`ShortFft::run`] launch: 2^26 arrays, the most the batch kernels'
/// 32-bit word offsets address (at N = 32 the output's last word is `2^26 64 - 1 = 2^32 - 1`);
/// the grid stays far below its limits.
pub const MAX_FFT_BATCH: usize = 1 << 26;
/// Threads per block of the FFT kernels.
pub const FFT_THREADS: u32 = 256;

/// The tensor-core short FFT of length N on one GPU, holding its Gamma image on the device.
pub struct ShortFft<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) kernels: &'static FftKernel,
    pub(super) batch_kernel: CudaFunction,
    pub(super) loop_kernel: CudaFunction,
    pub(super) gammas: DeviceBuffer<u32>,
    /// The stream `run` and `run_loop` launch on.
    pub(super) stream: Stream,
}

impl<'g> ShortFft<'g> {
    /// Validates N and uploads the Gamma image, with N's [`default_fft_method`].
    pub fn new(gpu: &'g Gpu, n: u32) -> Result<ShortFft<'g>> {
        check_fft_size(n)?;
        let kernels = fft_kernel(n, default_fft_method(n))
            .ok_or_else(|| Error::InvalidConfig(format!("no short FFT kernel for N = {n}")))?;
        ShortFft::with_kernels(gpu, kernels)
    }

    /// As [`ShortFft::new`] with the kernels of `spec` (the batch or the benchmark kernel of
    /// one N and method, [`FFT_KERNELS`](radio_kernels_gpu::frb_beamformer::FFT_KERNELS)):
    /// for tests and benchmarks of a method N's default does not take. `InvalidConfig` for
    /// an N outside [`FFT_SIZES`], a spec that is not a short FFT kernel, or one of another N.
    pub fn with_kernel(gpu: &'g Gpu, n: u32, spec: &KernelSpec) -> Result<ShortFft<'g>> {
        check_fft_size(n)?;
        let kernels = fft_kernel_of(spec)
            .ok_or_else(|| Error::InvalidConfig(format!("{} is not a short FFT kernel", spec.name)))?;
        if kernels.n != n {
            return Err(Error::InvalidConfig(format!(
                "{} is the short FFT kernel for N = {}, not {n}",
                spec.name, kernels.n
            )));
        }
        ShortFft::with_kernels(gpu, kernels)
    }

    fn with_kernels(gpu: &'g Gpu, kernels: &'static FftKernel) -> Result<ShortFft<'g>> {
        let image = match kernels.method {
            FftMethod::ThreeFactor => gamma_image(kernels.n)?,
            FftMethod::Direct => direct_image(kernels.n)?,
        };
        Ok(ShortFft {
            gpu,
            kernels,
            batch_kernel: gpu.kernel(&kernels.batch)?,
            loop_kernel: gpu.kernel(&kernels.looped)?,
            gammas: gpu.upload(&image)?,
            stream: gpu.stream().clone(),
        })
    }

    /// Launches `run` and `run_loop` on `stream` (the GPU's default stream until set);
    /// [`Error::WrongDevice`] for a stream of another GPU.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "short FFT stream")
    }

    /// The stream `run` and `run_loop` launch on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The FFT's N, one of [`FFT_SIZES`]: `run` takes `N` complex values per array and
    /// writes `2N`.
    pub fn n(&self) -> u32 {
        self.kernels.n
    }

    /// How the FFT is computed: three tensor-core factors with twiddles, or one direct DFT
    /// product ([`default_fft_method`] unless [`with_kernel`](Self::with_kernel) chose).
    pub fn method(&self) -> FftMethod {
        self.kernels.method
    }

    /// The kernels this FFT launches.
    pub fn kernels(&self) -> &'static FftKernel {
        self.kernels
    }

    /// FFTs per warp group: [`ffts_per_group`] of this FFT's (valid) N and method.
    pub fn ffts_per_group(&self) -> u32 {
        self.kernels.ffts_per_group()
    }

    /// FFTs `batch` arrays: `x` complex f16 `[batch][N]` to `y` `[batch][2N]` (eq. 18 of Smith's FRB note).
    pub fn run(
        &self,
        x: &DeviceBuffer<Complex<f16>>,
        y: &mut DeviceBuffer<Complex<f16>>,
        batch: usize,
    ) -> Result<()> {
        check_fft_buffers(self.kernels.n, batch, x.len(), y.len())?;
        self.gpu.check_owner(x, "short FFT input")?;
        self.gpu.check_owner(y, "short FFT output")?;
        let per_block = (FFT_THREADS / 32 * self.ffts_per_group()) as usize;
        let blocks = batch.div_ceil(per_block) as u32;
        let batch = batch as u32;
        let mut launch = self.stream.launch_builder(&self.batch_kernel);
        launch.arg(self.gammas.raw()).arg(x.raw()).arg(y.arg_mut()).arg(&batch);
        // SAFETY: matches `frb_short_fft_n*(gammas, x, y, batch)`; the lengths were checked and
        // the kernel touches only the first `batch` arrays.
        unsafe { launch.launch(launch_1d(blocks, FFT_THREADS, 0)) }
            .map_err(|source| Error::Driver { during: "launching the short FFT", source })?;
        Ok(())
    }

    /// The benchmark kernel: `blocks` blocks of [`FFT_THREADS`] threads each run
    /// `4 * iterations` FFT groups per warp from registers (`4 * iterations * ffts_per_group`
    /// FFTs). `x` holds 4 words per thread, `y` one.
    pub fn run_loop(
        &self,
        x: &DeviceBuffer<Complex<f16>>,
        y: &mut DeviceBuffer<Complex<f16>>,
        blocks: u32,
        iterations: u32,
        salt: u32,
    ) -> Result<()> {
        if blocks == 0 || blocks > 1 << 20 || iterations == 0 {
            return Err(Error::InvalidConfig(format!(
                "loop FFT needs 1..=2^20 blocks and iterations > 0, got {blocks} and {iterations}"
            )));
        }
        let threads = blocks as usize * FFT_THREADS as usize;
        if x.len() != 4 * threads {
            return Err(Error::ShapeMismatch {
                what: "loop FFT input",
                expected: 4 * threads,
                actual: x.len(),
            });
        }
        if y.len() != threads {
            return Err(Error::ShapeMismatch { what: "loop FFT output", expected: threads, actual: y.len() });
        }
        self.gpu.check_owner(x, "loop FFT input")?;
        self.gpu.check_owner(y, "loop FFT output")?;
        let mut launch = self.stream.launch_builder(&self.loop_kernel);
        launch.arg(self.gammas.raw()).arg(x.raw()).arg(y.arg_mut()).arg(&iterations).arg(&salt);
        // SAFETY: matches `frb_short_fft_loop_n*(gammas, x, y, iterations, salt)`; x holds 4
        // words and y one per thread.
        unsafe { launch.launch(launch_1d(blocks, FFT_THREADS, 0)) }
            .map_err(|source| Error::Driver { during: "launching the loop FFT", source })?;
        Ok(())
    }

    /// FFTs run by one [`ShortFft::run_loop`] launch (exact for the arguments `run_loop`
    /// accepts, `blocks <= 2^20`; saturates at `u64::MAX` past 2^64).
    pub fn loop_ffts(&self, blocks: u32, iterations: u32) -> u64 {
        let ffts = blocks as u128
            * (FFT_THREADS / 32) as u128
            * 4
            * iterations as u128
            * self.ffts_per_group() as u128;
        u64::try_from(ffts).unwrap_or(u64::MAX)
    }
}
