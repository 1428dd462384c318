//! The launcher ([`BasebandBeamformer`]): the instance choice, the launch sizes and the launches.
use super::{BeamformerConfig, CHUNK, POLS};
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::Shift;
use cudarc::driver::CudaFunction;
use num_complex::Complex;
use radio_kernels_gpu::baseband_beamformer::{self as layout, Instance};
use radio_kernels_gpu::modules::KernelSpec;
use radio_kernels_gpu::packing::Ci4;

/// A baseband beamformer for one configuration on one GPU, holding its beam weights and
/// shifts on the device.
pub struct BasebandBeamformer<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) config: BeamformerConfig,
    /// One kernel launch per beam range (one, except where no instance takes all the beams).
    launches: Vec<Launch>,
    pub(super) weights: DeviceBuffer<Complex<i8>>,
    pub(super) shifts: DeviceBuffer<i32>,
    /// The stream `beamform` and `set_weights` work on.
    pub(super) stream: Stream,
}

/// One kernel launch of a beamform call: beams `first_beam .. first_beam + beams`.
struct Launch {
    instance: &'static Instance,
    kernel: CudaFunction,
    first_beam: u32,
    beams: u32,
    /// Persistent blocks, the dynamic shared memory of each, and its stage rows.
    blocks: u32,
    shared_bytes: u32,
    stage_rows: u32,
}

/// The instance a launch of `warps` warps of `config` runs: `forced` (from
/// [`BasebandBeamformer::with_kernel`]) when it takes such a block, else
/// [`layout::instance`]'s choice. `InvalidConfig` for a forced spec that is not a baseband
/// instance or does not take the block (another dish count, or fewer warps).
pub fn instance_for(
    config: &BeamformerConfig,
    warps: u32,
    forced: Option<&KernelSpec>,
) -> Result<&'static Instance> {
    match forced {
        None => layout::instance(config.dishes, warps).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "no baseband beamformer instance takes {warps} warps x {} dishes",
                config.dishes
            ))
        }),
        Some(spec) => {
            let instance = layout::INSTANCES.iter().find(|k| k.spec == *spec).ok_or_else(|| {
                Error::InvalidConfig(format!("{} is not a baseband beamformer kernel", spec.name))
            })?;
            if instance.takes(config.dishes, warps) {
                Ok(instance)
            } else {
                Err(Error::InvalidConfig(format!(
                    "{} takes {} dishes and blocks of at most {} warps, not {warps} warps x {} dishes",
                    spec.name,
                    instance.dishes,
                    instance.warps.min(layout::max_warps(instance.dishes)),
                    config.dishes
                )))
            }
        }
    }
}

/// The launches of `config` on `gpu`, each with the instance [`instance_for`] gives, sized
/// for the device (stage rows, shared memory, persistent blocks).
fn plan_launches(gpu: &Gpu, config: &BeamformerConfig, forced: Option<&KernelSpec>) -> Result<Vec<Launch>> {
    let mut launches = Vec::new();
    for (first_beam, beams) in layout::launch_split(config.dishes, config.beams) {
        if beams == 0 {
            continue;
        }
        let warps = beams / layout::BEAMS_PER_WARP;
        let instance = instance_for(config, warps, forced)?;
        let kernel = gpu.kernel(&instance.spec)?;
        let too_big = || {
            Error::InvalidConfig(format!(
                "{beams} beams x {} dishes needs more shared memory than {} allows per block",
                config.dishes,
                gpu.name()
            ))
        };
        let stage_rows =
            layout::stage_rows(config.dishes, warps, gpu.max_shared_per_block()).ok_or_else(too_big)?;
        let shared_bytes = layout::smem_bytes(config.dishes, beams, stage_rows);
        // The limit belongs to the kernel, which other configurations (and both parts of
        // a split launch) share: allow what the device allows.
        allow_dynamic_shared(
            &kernel,
            gpu.max_shared_per_block(),
            "raising the beamformer's shared-memory limit",
        )?;
        let threads = 32 * warps;
        let per_sm = kernel
            .occupancy_max_active_blocks_per_multiprocessor(threads, shared_bytes as usize, None)
            .during("querying the beamformer's occupancy")?;
        if per_sm == 0 {
            return Err(Error::InvalidConfig(format!(
                "{beams} beams x {} dishes does not fit one SM of {} ({threads} threads, {shared_bytes} bytes of shared memory)",
                config.dishes,
                gpu.name(),
            )));
        }
        let blocks = (per_sm as u64 * gpu.sm_count() as u64).min(config.items()) as u32;
        // A block counts its stages (`items per block * CHUNK / stage_rows`, plus the
        // ring's look-ahead) in u32.
        let block_stages =
            config.items().div_ceil(blocks as u64) * (CHUNK / stage_rows) as u64 + layout::STAGES as u64;
        if block_stages > u32::MAX as u64 {
            return Err(Error::InvalidConfig(format!(
                "{} work items on {blocks} blocks give {block_stages} stages per block, past the \
                 kernel's 32-bit stage count",
                config.items()
            )));
        }
        launches.push(Launch { instance, kernel, first_beam, beams, blocks, shared_bytes, stage_rows });
    }
    Ok(launches)
}

impl<'g> BasebandBeamformer<'g> {
    /// Validates `config` and the weights (A, ci8 `[f][p][beta][d]`) and shifts (`[f][p][beta]`,
    /// [`Shift`]s), uploads them, and sizes the launch for this GPU.
    pub fn new(
        gpu: &'g Gpu,
        config: BeamformerConfig,
        weights: &[Complex<i8>],
        shifts: &[Shift],
    ) -> Result<BasebandBeamformer<'g>> {
        config.validate()?;
        config.check_weights(weights, shifts)?;
        let launches = plan_launches(gpu, &config, None)?;
        let weights = gpu.upload(weights)?;
        let shifts = gpu.upload(&kernel_shifts(shifts))?;
        let stream = gpu.stream().clone();
        Ok(BasebandBeamformer { gpu, config, launches, weights, shifts, stream })
    }

    /// The launcher with every launch on the instance `spec` (one of
    /// `radio_kernels_gpu::baseband_beamformer::KERNELS`) instead of the chosen one (tests
    /// and benchmarks: e.g. the 16-warp instance of a dish count for a 12-warp block).
    /// `InvalidConfig` unless `spec` takes every launch's block: the configuration's dish
    /// count, and at least as many warps as each launch has ([`instance_for`]).
    pub fn with_kernel(mut self, spec: &KernelSpec) -> Result<BasebandBeamformer<'g>> {
        self.launches = plan_launches(self.gpu, &self.config, Some(spec))?;
        Ok(self)
    }

    /// The registry entries of the kernels a beamform launches, in launch order (one, or two
    /// where no instance takes the whole block).
    pub fn kernels(&self) -> Vec<&'static KernelSpec> {
        self.launches.iter().map(|l| &l.instance.spec).collect()
    }

    /// The configuration this launcher beamforms.
    pub fn config(&self) -> &BeamformerConfig {
        &self.config
    }

    /// Runs `beamform` and `set_weights` on `stream` (the GPU's default stream until set), so
    /// that callers can order their own work with ours; [`Error::WrongDevice`] for a stream of
    /// another GPU. The new stream first waits (on the GPU) for the work enqueued on the old
    /// one. The streaming engine uses its own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "baseband beamformer stream")
    }

    /// The stream `beamform` and `set_weights` work on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Replaces the weights and shifts (same validation as [`BasebandBeamformer::new`]),
    /// copied on the launcher's [`stream`](Self::stream) after its earlier launches (which
    /// use the old ones) and before its later ones. A [`BasebandStream`](super::BasebandStream) has its own copy
    /// ([`BasebandStream::set_weights`](super::BasebandStream::set_weights)).
    pub fn set_weights(&mut self, weights: &[Complex<i8>], shifts: &[Shift]) -> Result<()> {
        self.config.check_weights(weights, shifts)?;
        self.weights.upload_on(&self.stream, weights, "upload source")?;
        self.shifts.upload_on(&self.stream, &kernel_shifts(shifts), "upload source")
    }

    /// One launch on the launcher's [`stream`](Self::stream): J (`output_len()` values) from E
    /// (`e_len()` values).
    pub fn beamform(&self, e: &DeviceBuffer<Ci4>, output: &mut DeviceBuffer<Ci4>) -> Result<()> {
        self.launch(e, &self.weights, &self.shifts, output, &self.stream)
    }

    /// The kernel launches of one beamform on `stream`, with weights and shifts of this
    /// configuration (the launcher's, or a streaming engine's copy).
    pub(super) fn launch(
        &self,
        e: &DeviceBuffer<Ci4>,
        weights: &DeviceBuffer<Complex<i8>>,
        shifts: &DeviceBuffer<i32>,
        output: &mut DeviceBuffer<Ci4>,
        stream: &Stream,
    ) -> Result<()> {
        self.gpu.check_owner(e, "beamformer E")?;
        self.gpu.check_owner(output, "beamformer output J")?;
        let c = &self.config;
        c.check_len("beamformer E (values)", c.e_len(), e.len())?;
        c.check_len("beamformer output J (values)", c.output_len(), output.len())?;
        c.check_len("beamformer weights (complex values)", c.weights_len(), weights.len())?;
        c.check_len("beamformer shifts", c.shifts_len(), shifts.len())?;
        let fps = c.freqs * POLS;
        for part in &self.launches {
            let first = part.first_beam as usize;
            let weights = weights.raw().slice(first * c.dishes as usize * 2..);
            let shifts = shifts.raw().slice(first * 4..);
            let j_offset = first * fps as usize * c.times as usize;
            let mut j = output.arg_mut().slice_mut(j_offset..);
            let mut launch = stream.launch_builder(&part.kernel);
            launch
                .arg(e.raw())
                .arg(&weights)
                .arg(&shifts)
                .arg(&mut j)
                .arg(&c.beams)
                .arg(&fps)
                .arg(&c.times)
                .arg(&part.stage_rows);
            // SAFETY: arguments match the instance's entry point (kernels-gpu
            // baseband_beamformer/device.rs), which takes this dish count and block size; E, A, s and J hold
            // `e_len()`, `weights_len()`, `shifts_len()` and `output_len()` elements of a
            // validated configuration (checked above) and the views start at beam
            // `first_beam` of layouts with `beams` beams (`beam_stride`); cudarc allocations
            // are 256-byte aligned and the offsets are multiples of 16 bytes, as the kernel's
            // 16-byte accesses need.
            unsafe {
                launch.launch(launch_1d(
                    part.blocks,
                    32 * part.beams / layout::BEAMS_PER_WARP,
                    part.shared_bytes,
                ))
            }
            .during("launching the baseband beamformer")?;
        }
        Ok(())
    }
}

/// The shifts as the `i32` the kernels read.
pub(super) fn kernel_shifts(shifts: &[Shift]) -> Vec<i32> {
    shifts.iter().map(|s| s.as_i32()).collect()
}
