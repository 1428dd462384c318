//! The correlator's launcher: one configuration on one GPU, its kernel and time slices.
use super::{CorrelatorConfig, Integration, TIME_TILE};
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg, Stream};
use cudarc::driver::CudaFunction;
use num_complex::Complex;
use radio_kernels_gpu::correlator::hopper::Kind;
use radio_kernels_gpu::correlator::{station_tiles, Kernel, Output, Schedule, INSTANCES};
use radio_kernels_gpu::modules::KernelSpec;

/// Time slices for a launch: enough blocks that the last, partly filled wave of `slots`
/// concurrent blocks costs little, with slices of at least 16 stages. Returns (slices,
/// stages per slice), which cover `stages` exactly once with no empty slice: `(slices - 1) *
/// per_slice < stages <= slices * per_slice`, at most 16 slices. `stages` and `slots` must be
/// positive (`InvalidConfig` otherwise); with no blocks there is nothing to balance and the
/// answer is one slice.
pub fn time_slices(blocks: u64, slots: u64, stages: u32) -> Result<(u32, u32)> {
    if stages == 0 || slots == 0 {
        return Err(Error::InvalidConfig(format!(
            "time slices need at least one stage and one block slot, got {stages} stages and {slots} slots"
        )));
    }
    if blocks == 0 {
        return Ok((1, stages));
    }
    let mut best = (1, stages, f64::MAX);
    for slices in 1..=16u32 {
        let per_slice = stages.div_ceil(slices);
        if slices > 1 && per_slice < 16 {
            break;
        }
        let slices = stages.div_ceil(per_slice); // no empty slice
        let waves = blocks as f64 * slices as f64 / slots as f64;
        // Idle fraction of the last wave, plus a small cost per extra slice (prologue, atomics).
        let cost = (waves.ceil() - waves) / waves.ceil() + 0.01 * (slices - 1) as f64;
        if cost < best.2 - 1e-9 {
            best = (slices, per_slice, cost);
        }
    }
    Ok((best.0, best.1))
}

/// A correlator for one configuration on one GPU.
pub struct Correlator<'g> {
    gpu: &'g Gpu,
    config: CorrelatorConfig,
    kernel: &'static Kernel,
    function: CudaFunction,
    /// Input rows start on 16-byte boundaries, so the kernel may use vector loads.
    aligned: bool,
    /// Time slices per launch (grid z) and stages per slice.
    slices: u32,
    slice_stages: u32,
    /// The stream `correlate` and `accumulate` launch on.
    stream: Stream,
}

impl<'g> Correlator<'g> {
    /// Validates `config` and looks up its kernel ([`CorrelatorConfig::kernel`]): on Hopper
    /// (`Gpu::wgmma_enabled()`), int8 with 16-byte aligned rows runs an sm_90a `wgmma` kernel
    /// (`Pair` for one 64-receiver tile, `ChannelSplit` for two, `Split` above); everything
    /// else runs the sm_80 kernels.
    pub fn new(gpu: &'g Gpu, config: CorrelatorConfig) -> Result<Correlator<'g>> {
        let kernel = config.kernel(gpu.wgmma_enabled())?;
        Correlator::build(gpu, config, kernel, gpu.stream().clone())
    }

    /// The same correlator on another of the family's kernels (tests and benchmarks: e.g. the
    /// sm_80 kernel Ampere GPUs run, on a Hopper GPU, or another `wgmma` block kind).
    /// `InvalidConfig` for a spec of no correlator kernel or a kernel that cannot correlate
    /// this configuration ([`Kernel::misfit`]); `MissingKernel` for an sm_90a kernel on a GPU
    /// without them.
    pub fn with_kernel(self, spec: &KernelSpec) -> Result<Correlator<'g>> {
        let kernel = INSTANCES
            .iter()
            .find(|k| k.spec.name == spec.name && k.spec.arch == spec.arch)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "{} ({}) is not a correlator kernel",
                    spec.name,
                    spec.arch.name()
                ))
            })?;
        let c = &self.config;
        if let Some(why) = kernel.misfit(c.format, c.order, c.stations, c.pols) {
            return Err(Error::InvalidConfig(format!(
                "{} cannot correlate {} stations x {} pols of {:?} in {:?}: {why}",
                spec.name, c.stations, c.pols, c.format, c.order
            )));
        }
        Correlator::build(self.gpu, self.config, kernel, self.stream)
    }

    /// Sizes the launch of `kernel` (its block and dynamic shared memory): time slices that
    /// fill the last wave.
    fn build(
        gpu: &'g Gpu,
        config: CorrelatorConfig,
        kernel: &'static Kernel,
        stream: Stream,
    ) -> Result<Correlator<'g>> {
        let function = gpu.kernel(&kernel.spec)?;
        let (threads, smem) = (kernel.schedule.threads(), kernel.schedule.shared_bytes());
        if smem > 48 * 1024 {
            allow_dynamic_shared(&function, smem, "raising the correlator's shared-memory limit")?;
        }
        let per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem as usize, None)
            .during("querying the correlator's occupancy")?;
        let blocks = config.channels as u64 * Correlator::blocks_per_channel(&config, kernel) as u64;
        let slots = per_sm.max(1) as u64 * gpu.sm_count() as u64;
        let (slices, slice_stages) = time_slices(blocks, slots, config.times / TIME_TILE)?;
        let aligned = config.rows_aligned();
        Ok(Correlator { gpu, config, kernel, function, aligned, slices, slice_stages, stream })
    }

    /// Blocks per channel (the grid's x).
    fn blocks_per_channel(config: &CorrelatorConfig, kernel: &Kernel) -> u32 {
        kernel.schedule.blocks(station_tiles(config.stations, config.pols))
    }

    /// The kernel this correlator runs.
    pub fn kernel(&self) -> &'static Kernel {
        self.kernel
    }

    /// The sm_90a kernel's block kind, if this correlator runs one.
    pub fn wgmma_kind(&self) -> Option<Kind> {
        match self.kernel.schedule {
            Schedule::Wgmma(kind) => Some(kind),
            _ => None,
        }
    }

    /// Whether this correlator runs an sm_90a `wgmma` kernel.
    pub fn uses_wgmma(&self) -> bool {
        self.wgmma_kind().is_some()
    }

    pub(super) fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// The configuration this correlator runs.
    pub fn config(&self) -> &CorrelatorConfig {
        &self.config
    }

    /// Launches `correlate` and `accumulate` on `stream` (the GPU's default stream until
    /// set), so that callers can order their own work with ours; [`Error::WrongDevice`] for
    /// a stream of another GPU. Streaming engines use their own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "correlator stream")
    }

    /// The stream `correlate` and `accumulate` launch on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    pub(super) fn launch<T: bytemuck::Pod>(
        &self,
        input: &DeviceBuffer<u8>,
        output: &mut DeviceBuffer<T>,
        accumulate: bool,
        stream: &Stream,
    ) -> Result<()> {
        self.gpu.check_owner(input, "correlator input")?;
        self.gpu.check_owner(output, "correlator output")?;
        self.config.check_input_len(input.len())?;
        if output.len() != self.config.output_len() {
            return Err(Error::ShapeMismatch {
                what: "correlator output (complex values)",
                expected: self.config.output_len(),
                actual: output.len(),
            });
        }
        // Several time slices add their partial sums atomically (exact in integers), into an
        // output zeroed first unless it is an accumulator.
        let mode = match (accumulate, self.slices) {
            (true, _) => Output::Add64,
            (false, 1) => Output::Store32,
            (false, _) => {
                output.poison_on(stream, 0)?;
                Output::Add32
            }
        };
        let c = &self.config;
        let blocks = Correlator::blocks_per_channel(c, self.kernel);
        let (aligned, mode) = (self.aligned as u32, mode as u32);
        let mut launch = stream.launch_builder(&self.function);
        launch
            .arg(input.raw())
            .arg(output.arg_mut())
            .arg(&c.stations)
            .arg(&c.pols)
            .arg(&c.channels)
            .arg(&c.times)
            .arg(&aligned)
            .arg(&self.slice_stages)
            .arg(&mode);
        let mut config =
            launch_1d(blocks, self.kernel.schedule.threads(), self.kernel.schedule.shared_bytes());
        config.grid_dim.1 = c.channels;
        config.grid_dim.2 = self.slices;
        // SAFETY: arguments match every `correlate_*` entry point (kernels-gpu
        // correlator/device.rs, one signature); the input holds
        // `input_bytes()` bytes and the output `output_len()` complex values of the element
        // type `mode` selects (int32 for `correlate`, int64 for the accumulating calls), and
        // the configuration was validated.
        unsafe { launch.launch(config) }.during("launching the correlator")?;
        Ok(())
    }

    /// One launch: writes `output` (complex int32, every value) from `input`.
    pub fn correlate(&self, input: &DeviceBuffer<u8>, output: &mut DeviceBuffer<Complex<i32>>) -> Result<()> {
        self.launch(input, output, false, &self.stream)
    }

    /// One launch added to a complex int64 accumulator (long integrations).
    pub fn accumulate(
        &self,
        input: &DeviceBuffer<u8>,
        accumulator: &mut DeviceBuffer<Complex<i64>>,
    ) -> Result<()> {
        self.launch(input, accumulator, true, &self.stream)
    }

    /// Correlates the host chunks (each `input_bytes()` long, consecutive in time) into one
    /// int64 integration through an [`Integration`].
    pub fn integrate(&self, chunks: &[&[u8]]) -> Result<Vec<Complex<i64>>> {
        for chunk in chunks {
            self.config.check_input_len(chunk.len())?;
        }
        let mut integration = self.integration()?;
        for chunk in chunks {
            integration.input()?.copy_from_slice(chunk);
            integration.submit()?;
        }
        integration.finish()
    }

    /// A streaming integration that runs until [`Integration::finish`]: the
    /// [`streaming`](Self::streaming) engine with one integration of any length.
    pub fn integration(&self) -> Result<Integration<'_, 'g>> {
        self.streaming(0, crate::streaming::DEFAULT_DEPTH)
    }

    /// The streaming X-engine: voltage chunks (`input_bytes()` each) in, one integration of
    /// `chunks_per_integration` chunks out (0: until [`Integration::finish`]), with `depth`
    /// input slots and as many output slots ([`crate::streaming`]).
    pub fn streaming(&self, chunks_per_integration: usize, depth: usize) -> Result<Integration<'_, 'g>> {
        Integration::new(self, chunks_per_integration, depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_slices_cover_every_stage_once_and_fill_waves() {
        for blocks in [3u64, 136, 2176, 3072, 2080 * 4] {
            for stages in [1u32, 2, 16, 100, 1023] {
                let (slices, per_slice) = time_slices(blocks, 396, stages).unwrap();
                assert!(slices >= 1 && per_slice >= 1);
                assert!((slices - 1) * per_slice < stages && slices * per_slice >= stages);
            }
        }
        // 2176 blocks on 396 slots is 5.5 waves; slicing must not be worse than that.
        let (slices, _) = time_slices(2176, 396, 1023).unwrap();
        let waves = 2176.0 * slices as f64 / 396.0;
        assert!((waves.ceil() - waves) / waves.ceil() <= (6.0 - 2176.0 / 396.0) / 6.0);
    }
}
