//! The first kernel ([`FrbBeamformer`]: gridding, weights, 2-d FFT, intensity, time
//! downsampling), its configuration and its CPU reference.
use super::*;

// `I[f][tbar][p][q] = sum_{tau in tbar's T_ds block} sum_pol |Et[tau][f][pol][p][q]|^2`,
// `Et = sum_{m,n} W[f][pol][m][n] E[tau][f][pol][m][n] exp(2 pi i (m p / 2M + n q / 2N))`
// (eqs. 50-51 of Smith, CHORD FRB beamformer design note (2022)), 0 <= p < 2M, 0 <= q < 2N. E
// complex int4+4 `[tau][f][pol][d]`, gridded by `d -> (m, n)` (no dish: zero); W complex f16
// `[f][pol][m][n]`; I `[f][tbar][p][q]`, so the second kernel (sec. 5), a matrix product over the
// (p, q) pixels for every (f, tbar), reads row-major `(F Tbar) x (2M 2N)` rows.
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
// The note's two-pass gridding and register-resident pipeline (secs. 4.6-4.11, whose
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

/// Relative L2 bound of the first FRB kernel's I against [`frb_intensity_reference`]:
/// `2^-6`. Et passes the f16 product `W E` (two roundings, `2u`, `u = 2^-11`) and two short
/// FFTs (each within [`FFT_REL_L2_BOUND`] = `8u`), so its relative L2 error is at most
/// about `18u`; `|Et|^2` doubles relative errors (`36u`), and the f16 squares and sums add
/// rounding that grows with the number of terms (`2 T_ds` up to T_ds = 96, `2 T_inner`
/// above). Measured on random data: 6e-4 to 7e-4 at T_ds <= 3, 4.0e-3 at T_ds = 96 (the largest
/// f16 sum, 192 terms), 3e-4 to 4e-4 for the per-phase kernel at T_ds = 120-192; an f16 sum
/// of 384 terms (T_ds = 192, which takes the per-phase kernel) measured 9.4e-3. Full
/// CHORD's even/odd kernel (T_ds terms per f16 half): 5.4e-4 to 6.8e-4 at T_ds <= 3, 8.8e-4
/// at 40, 1.3e-3 at 72 (the three-factor kernel: 1.7e-3 and 2.7e-3).
pub const FRB_REL_L2_BOUND: f64 = 1.0 / 64.0;

/// The first FRB kernel for one configuration and dish map on one GPU, holding the map,
/// weights and Gamma images on the device.
pub struct FrbBeamformer<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) config: FrbConfig,
    pub(super) kernel: CudaFunction,
    pub(super) grid: DeviceBuffer<u32>,
    pub(super) weights: DeviceBuffer<Complex<f16>>,
    pub(super) gammas_m: DeviceBuffer<u32>,
    pub(super) gammas_n: DeviceBuffer<u32>,
    /// Output samples per block (the blocks are `F` channels times time chunks of that
    /// many) and the dynamic shared memory of each.
    pub(super) tbar_per_block: u32,
    pub(super) shared_bytes: u32,
    pub(super) threads: u32,
    /// The stream `beamform` launches on.
    pub(super) stream: Stream,
}

impl<'g> FrbBeamformer<'g> {
    /// Validates `config`, the dish map (`grid[d] = (m, n)`) and the weights (`Complex<f16>`
    /// `[f][pol][m][n]`; a NaN or infinite part is `NonFinite` with the value's index), uploads them, and runs [`warm_up`](Self::warm_up) so that the kernel's
    /// one-time costs are paid here and not by the first [`beamform`](Self::beamform).
    pub fn new(
        gpu: &'g Gpu,
        config: FrbConfig,
        grid: &[(u32, u32)],
        weights: &[Complex<f16>],
    ) -> Result<FrbBeamformer<'g>> {
        let beamformer = FrbBeamformer::without_warm_up(gpu, config, grid, weights)?;
        beamformer.warm_up()?;
        Ok(beamformer)
    }

    /// As [`new`](Self::new) without the warm-up launch (for measuring the first launch's
    /// cost).
    #[doc(hidden)]
    pub fn without_warm_up(
        gpu: &'g Gpu,
        config: FrbConfig,
        grid: &[(u32, u32)],
        weights: &[Complex<f16>],
    ) -> Result<FrbBeamformer<'g>> {
        config.validate()?;
        config.check_grid(grid)?;
        check_weights(&config, weights)?;
        let selected = selected_kernel(&config)?;
        // Full CHORD with f16 sums: the even/odd kernel (its own block size, shared memory
        // and A image in place of the Gamma image).
        let eo = selected.even_odd;
        let (threads, shared_bytes) = (selected.threads(), selected.shared_bytes());
        let kernel = gpu.kernel(&selected.spec)?;
        allow_dynamic_shared(&kernel, shared_bytes, "raising the FRB kernel's shared-memory limit")?;
        let resident = kernel
            .occupancy_max_active_blocks_per_multiprocessor(threads, shared_bytes as usize, None)
            .map_err(|source| Error::Driver { during: "querying the FRB kernel's occupancy", source })?;
        let tbar_per_block = frb_output_samples_per_block(&config, resident.max(1) * gpu.sm_count())?;
        let points: Vec<u32> = grid.iter().map(|&(m, n)| m * config.n + n).collect();
        Ok(FrbBeamformer {
            gpu,
            config,
            kernel,
            tbar_per_block,
            shared_bytes,
            grid: gpu.upload(&points)?,
            weights: gpu.upload(weights)?,
            threads,
            gammas_m: gpu.upload(&if eo { eo_image() } else { gamma_image(config.m)? })?,
            gammas_n: gpu.upload(&gamma_image(config.n)?)?,
            stream: gpu.stream().clone(),
        })
    }

    /// One small launch of this beamformer's kernel (one channel, one outer block of zero E,
    /// into scratch memory) on its stream, and a wait for it. The driver may finish setting a
    /// kernel up only at its first launch (under lazy module loading, the default since CUDA
    /// 12.2, a function can be loaded then; a launch can also grow the context's per-thread
    /// local memory), and a first `beamform` timed with events would count that as kernel
    /// time. [`new`](Self::new) calls it; later calls cost one tiny launch and a wait.
    pub fn warm_up(&self) -> Result<()> {
        let c = &self.config;
        let case = c.case()?;
        // The same entry point: T_ds up to FRB_F16_SUM_MAX_T_DS, or the first multiple of
        // the outer block above it.
        let t_ds = if c.t_ds <= FRB_F16_SUM_MAX_T_DS {
            1
        } else {
            (FRB_F16_SUM_MAX_T_DS / case.t_outer + 1) * case.t_outer
        };
        let small = FrbConfig { freqs: 1, times: t_ds.max(case.t_outer), t_ds, ..*c };
        small.validate()?;
        if selected_kernel(&small)?.spec != selected_kernel(c)?.spec {
            return Err(Error::InvalidConfig(
                "the FRB warm-up launch would run another kernel (internal error)".into(),
            ));
        }
        let e = self.gpu.alloc::<Ci4>(small.e_len(), 0)?;
        let mut i = self.gpu.alloc::<f16>(small.output_len(), 0)?;
        self.launch_config(&small, 1, &e, &mut i, &self.stream)?;
        self.stream.synchronize().during("waiting for the FRB kernel's warm-up launch")
    }

    /// Output samples per block: [`frb_output_samples_per_block`]'s choice unless set.
    pub fn output_samples_per_block(&self) -> u32 {
        self.tbar_per_block
    }

    /// Sets the output samples per block (at least 1; more than the launch has means one
    /// chunk per channel): for tests of blocks that write several samples, and for sweeps.
    /// `InvalidConfig` where the launch would need more than [`FRB_MAX_BLOCKS`] blocks.
    pub fn set_output_samples_per_block(&mut self, samples: u32) -> Result<()> {
        if samples == 0 {
            return Err(Error::InvalidConfig("output samples per block must be positive".into()));
        }
        let samples = samples.min(self.config.out_times());
        let blocks = frb_blocks(&self.config, samples);
        if blocks > FRB_MAX_BLOCKS {
            return Err(Error::InvalidConfig(format!(
                "{samples} output samples per block would launch {blocks} blocks, past the grid's 2^31 - 1"
            )));
        }
        self.tbar_per_block = samples;
        Ok(())
    }

    /// The configuration the beamformer was built with (validated).
    pub fn config(&self) -> &FrbConfig {
        &self.config
    }

    /// The GPU this beamformer runs on.
    pub(crate) fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// Launches `beamform` on `stream` (the GPU's default stream until set), so that callers
    /// can order their own work with ours; [`Error::WrongDevice`] for a stream of another
    /// GPU. Streaming engines ([`FrbStream`]) use their own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "FRB beamformer stream")
    }

    /// The stream `beamform` launches on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// `I[f][tbar][p][q]` (f16 bits) from E (ci4 `[tau][f][pol][d]`). E and I may exceed
    /// 2^32 bytes and values: the kernels address their rows in 64 bits.
    pub fn beamform(&self, e: &DeviceBuffer<Ci4>, i: &mut DeviceBuffer<f16>) -> Result<()> {
        self.launch(e, i, &self.stream)
    }

    /// [`beamform`](Self::beamform) on `stream`.
    pub(crate) fn launch(
        &self,
        e: &DeviceBuffer<Ci4>,
        i: &mut DeviceBuffer<f16>,
        stream: &Stream,
    ) -> Result<()> {
        self.launch_config(&self.config, self.tbar_per_block, e, i, stream)
    }

    /// One launch of the kernel for `c`, this beamformer's configuration or one of the same
    /// case and entry point with no more channels (the warm-up).
    pub(super) fn launch_config(
        &self,
        c: &FrbConfig,
        tbar_per_block: u32,
        e: &DeviceBuffer<Ci4>,
        i: &mut DeviceBuffer<f16>,
        stream: &Stream,
    ) -> Result<()> {
        self.gpu.check_owner(e, "FRB E")?;
        self.gpu.check_owner(i, "FRB intensity I")?;
        if e.len() != c.e_len() {
            return Err(Error::ShapeMismatch { what: "FRB E (bytes)", expected: c.e_len(), actual: e.len() });
        }
        if i.len() != c.output_len() {
            return Err(Error::ShapeMismatch {
                what: "FRB intensity I",
                expected: c.output_len(),
                actual: i.len(),
            });
        }
        let mut launch = stream.launch_builder(&self.kernel);
        launch
            .arg(e.raw())
            .arg(self.weights.raw())
            .arg(self.grid.raw())
            .arg(self.gammas_m.raw())
            .arg(self.gammas_n.raw())
            .arg(i.arg_mut())
            .arg(&c.freqs)
            .arg(&c.times)
            .arg(&c.t_ds)
            .arg(&tbar_per_block);
        // At most FRB_MAX_BLOCKS (the split's choice and `set_output_samples_per_block`
        // ensure it).
        let blocks = frb_blocks(c, tbar_per_block);
        let blocks = u32::try_from(blocks).ok().filter(|&b| b as u64 <= FRB_MAX_BLOCKS).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "the FRB launch would need {blocks} blocks, past the grid's 2^31 - 1"
            ))
        })?;
        // SAFETY: matches `frb_beamform_d*_m*_n*(e, weights, grid, gammas_m, gammas_n, out,
        // freqs, times, t_ds, tbar_per_block)`; every length was checked against a validated
        // config of this beamformer's case and entry point with at most its channels (the
        // weights hold at least `freqs` channels) (T <= 2^31, so the kernels' 32-bit sample
        // counters do not wrap; E and I rows are addressed in 64 bits), the map is inside
        // the grid, `times` is a multiple of `t_ds`, `tbar_per_block >= 1` and
        // `blocks = F * ceil(out_times / tbar_per_block)`.
        unsafe { launch.launch(launch_1d(blocks, self.threads, self.shared_bytes)) }
            .map_err(|source| Error::Driver { during: "launching the FRB beamformer", source })?;
        Ok(())
    }
}

/// The first kernel that runs `config` (a case of Table 2; see
/// [`radio_kernels_gpu::frb_beamformer::frb_kernel`]).
pub fn selected_kernel(config: &FrbConfig) -> Result<&'static FrbKernel> {
    let case = config.case()?;
    frb_kernel(&case, config.t_ds).ok_or_else(|| {
        Error::InvalidConfig(format!(
            "no first FRB kernel for (D, M, N) = ({}, {}, {}) at T_ds = {}",
            config.dishes, config.m, config.n, config.t_ds
        ))
    })
}

/// Output samples per block of the first FRB kernel (blocks are channels times equal chunks
/// of whole output samples), for `slots` resident blocks on the GPU: chunks of at most 480
/// input samples, and at least five waves of blocks (several waves hide the tail of the
/// last one; longer chunks gain nothing once the phases' fixed costs are amortised).
/// Never more than [`FRB_MAX_BLOCKS`] blocks (F times the chunks). Errors: an invalid
/// `config`, or `slots == 0`.
pub fn frb_output_samples_per_block(config: &FrbConfig, slots: u32) -> Result<u32> {
    config.validate()?;
    if slots == 0 {
        return Err(Error::InvalidConfig("resident block slots must be positive".into()));
    }
    // Valid: T_ds >= 1, 1 <= out_times, 1 <= F <= 65535.
    let out_times = config.out_times();
    let freqs = config.freqs as u64;
    let waves = |per_block: u32| freqs * out_times.div_ceil(per_block) as u64 >= 5 * slots as u64;
    let by_samples = (480 / config.t_ds).clamp(1, out_times);
    // The grid holds at most FRB_MAX_BLOCKS / F chunks per channel (at least 32768).
    let shortest = out_times.div_ceil((FRB_MAX_BLOCKS / freqs) as u32);
    let longest = (1..=by_samples).rev().find(|&k| waves(k)).unwrap_or(1).max(shortest);
    // Equal chunks: the same number of chunks, as short as they can be.
    Ok(out_times.div_ceil(out_times.div_ceil(longest)))
}
