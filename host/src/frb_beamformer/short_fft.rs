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
    pub(super) n: u32,
    pub(super) method: FftMethod,
    pub(super) batch_kernel: CudaFunction,
    pub(super) loop_kernel: CudaFunction,
    pub(super) gammas: DeviceBuffer<u32>,
    /// The stream `run` and `run_loop` launch on.
    pub(super) stream: Stream,
}

impl<'g> ShortFft<'g> {
    /// Validates N and uploads the Gamma image, with N's [`default_fft_method`].
    pub fn new(gpu: &'g Gpu, n: u32) -> Result<ShortFft<'g>> {
        ShortFft::with_method(gpu, n, default_fft_method(n))
    }

    /// As [`ShortFft::new`] with a given method (an error where N does not have it).
    pub fn with_method(gpu: &'g Gpu, n: u32, method: FftMethod) -> Result<ShortFft<'g>> {
        check_fft_size(n)?;
        let ((batch, looped), image) = match method {
            FftMethod::ThreeFactor => {
                (fft_kernel_names(n).ok_or(Error::MissingKernel("frb_short_fft_n*"))?, gamma_image(n)?)
            }
            FftMethod::Direct => {
                let image = direct_image(n)?;
                (direct_kernel_names(n).ok_or(Error::MissingKernel("frb_short_fft_direct_n*"))?, image)
            }
        };
        Ok(ShortFft {
            gpu,
            n,
            method,
            batch_kernel: gpu.function(batch)?,
            loop_kernel: gpu.function(looped)?,
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

    pub fn n(&self) -> u32 {
        self.n
    }

    pub fn method(&self) -> FftMethod {
        self.method
    }

    /// FFTs per warp group: [`ffts_per_group`] of this FFT's (valid) N and method.
    pub fn ffts_per_group(&self) -> u32 {
        match self.method {
            FftMethod::ThreeFactor => ffts_per_warp(self.n),
            FftMethod::Direct => DIRECT_FFTS_PER_WARP,
        }
    }

    /// FFTs `batch` arrays: `x` complex f16 `[batch][N]` to `y` `[batch][2N]` (eq. 18).
    pub fn run(&self, x: &DeviceBuffer<u32>, y: &mut DeviceBuffer<u32>, batch: usize) -> Result<()> {
        check_fft_buffers(self.n, batch, x.len(), y.len())?;
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
        x: &DeviceBuffer<u32>,
        y: &mut DeviceBuffer<u32>,
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

// --- Part B (seed sec. 4): configuration, validation and the CPU reference --------------
//
// `I[f][tbar][p][q] = sum_{tau in tbar's T_ds block} sum_pol |Et[tau][f][pol][p][q]|^2`,
// `Et = sum_{m,n} W[f][pol][m][n] E[tau][f][pol][m][n] exp(2 pi i (m p / 2M + n q / 2N))`
// (eqs. 50-51), 0 <= p < 2M, 0 <= q < 2N. E complex int4+4 `[tau][f][pol][d]`, gridded by
// `d -> (m, n)` (no dish: zero); W complex f16 `[f][pol][m][n]`; I `[f][tbar][p][q]`, so the
// second kernel (sec. 5), a matrix product over the (p, q) pixels for every (f, tbar), reads
// row-major `(F Tbar) x (2M 2N)` rows.
//
// The kernel behind [`FrbBeamformer`] is the straightforward version
// (`radio_kernels_gpu::frb_beamformer::frb_beamform`): blocks of (channel, chunk of whole
// output samples, [`frb_output_samples_per_block`]), T_inner samples per phase, gridding
// through shared memory with W E formed in f16x2, both 1-d FFTs with the tensor-core short
// FFT, |Et|^2 summed in f16x2: over the whole output sample for T_ds <= 96
// (`FRB_F16_SUM_MAX_T_DS`), else per phase and the phases in f32. Full CHORD with
// T_ds <= 96 (the production case) takes `frb_beamform_eo` instead: both FFTs as the
// padded 48-point DFT split by the parity of the input index (no twiddles, no padding; the
// A image [`eo_image`]), blocks of 6 warps, planar `X` and `G`, the two polarisations of a
// pixel in the two halves of one f16x2 sum.
// The seed's two-pass gridding and register-resident pipeline (secs. 4.6-4.11, whose
// layouts and bank-conflict checks are in place) are not written yet.
//
// Sizes. E (`T F 2D` bytes) and I (`F Tbar 4MN` values) pass 2^32 in ordinary launches (full
// CHORD with F = 16: T = 262176 gives 4.3 GB of E; T = 120000 at T_ds = 1 gives 4.4 G values
// of I), so the kernels form E's and I's element offsets in 64 bits from 32-bit row indices
// (`(tau, f)` and `(f, tbar)` rows); `FrbConfig::validate` keeps those indices below 2^32
// (`T F < 2^32`, [`FRB_MAX_ROWS`]: an E of at least 512 GB) and T at most 2^31
// ([`FRB_MAX_TIMES`]: the kernels' sample counters), and the split keeps the grid within its
// 2^31 - 1 blocks ([`FRB_MAX_BLOCKS`]).
//
// f16 range (sec. 4.14). W E is rounded to f16, the FFT stages hold f16 (`|G| <= N max|W E|`,
// `|Et| <= D max|W E|`), and I is summed (for T_ds <= 96 entirely, else per phase) and stored
// as f16 (at most 65504; partial sums are at most the total). So I is
// finite for every input when `2 T_ds (D w_max 8 sqrt 2)^2 <= 65504`, i.e.
// `w_max <= 256 / (sqrt(2 T_ds) 8 sqrt(2) D)`: for full CHORD (D = 512, T_ds = 40) that is
// `|W| <= 4.9e-3`. For noise-like E (rms sigma per component, about 2-3 for 4-bit data) the
// expected `I = 4 T_ds D |W|^2 sigma^2` (plus bright sources), so `|W|` near
// `6 / sqrt(T_ds D)` puts noise near 1000, with headroom for sources 60 times brighter; the
// GPU tests run at such magnitudes (uniform int4 E, sigma about 4.6, |W| up to
// `sqrt(1000 / (4 T_ds D 21.5))`).
