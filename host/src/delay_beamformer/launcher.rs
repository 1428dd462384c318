//! The launcher ([`DelayBeamformer`]) and its device steering.
use super::*;

/// A delay beamformer for one configuration on one GPU.
pub struct DelayBeamformer<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) config: DelayBeamformerConfig,
    pub(super) plan: Plan,
    pub(super) kernel: CudaFunction,
    pub(super) slot_table: DeviceBuffer<u32>,
    /// The stream the launcher's calls work on.
    pub(super) stream: Stream,
}

impl<'g> DelayBeamformer<'g> {
    /// Validates `config`, chooses the plan for this GPU and uploads the slot table.
    pub fn new(gpu: &'g Gpu, config: DelayBeamformerConfig) -> Result<DelayBeamformer<'g>> {
        // Any plan of this configuration has the same variant and so the same kernel.
        let probe = Plan::new(&config, 1)?;
        let variant = probe.variant;
        let kernel = gpu.kernel(&variant.spec())?;
        let most_shared = variant.shared_bytes(variant.max_coefficient_antennas());
        allow_dynamic_shared(&kernel, most_shared, "raising the delay beamformer's shared-memory limit")?;
        let per_sm = kernel
            .occupancy_max_active_blocks_per_multiprocessor(THREADS, probe.shared_bytes() as usize, None)
            .during("querying the delay beamformer's occupancy")?;
        if per_sm == 0 {
            return Err(Error::InvalidConfig(format!(
                "the delay beamformer's blocks ({} bytes of shared memory) do not fit on {}",
                probe.shared_bytes(),
                gpu.name()
            )));
        }
        let plan = Plan::new(&config, per_sm.saturating_mul(gpu.sm_count()))?;
        let slot_table = gpu.upload(&plan.slot_table)?;
        let stream = gpu.stream().clone();
        Ok(DelayBeamformer { gpu, config, plan, kernel, slot_table, stream })
    }

    /// Runs the launcher's calls (`beamform`, `beamform_steered`, `upload_steering`,
    /// `dither_state`) on `stream` (the GPU's default stream until set), so that callers can
    /// order their own work with ours; [`Error::WrongDevice`] for a stream of another GPU.
    /// The new stream first waits (on the GPU) for the work enqueued on the old one. The
    /// streaming engine uses its own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "delay beamformer stream")
    }

    /// The stream the launcher's calls work on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The configuration the beamformer was built with (validated).
    pub fn config(&self) -> &DelayBeamformerConfig {
        &self.config
    }
    /// The launch plan chosen for this GPU: kernel variant, beam batches, time groups, and so
    /// the number and order of dither states ([`DitherState`] must be made for it).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Dither states for this beamformer: state i starts as `curand_init(seed,
    /// first_subsequence + i, offset)` (computed on the GPU from host-built jump matrices).
    pub fn dither_state(&self, seed: u64, first_subsequence: u64, offset: u64) -> Result<DitherState> {
        let count = self.plan.state_count();
        if count > u32::MAX as u64 {
            return Err(Error::InvalidConfig(format!(
                "{count} dither states exceed 2^32; launch fewer channels or times"
            )));
        }
        if first_subsequence.checked_add(count - 1).is_none() {
            return Err(Error::InvalidConfig(format!(
                "first subsequence {first_subsequence} + {count} states passes curand's last subsequence (2^64 - 1)"
            )));
        }
        let count = count as u32; // checked above
        let stream = &self.stream;
        let base = upload_on(self.gpu, stream, &curand_init(seed, first_subsequence, offset).to_words())?;
        let matrices: Vec<u32> = jumps().sequence[..32].iter().flatten().flatten().copied().collect();
        let matrices = upload_on(self.gpu, stream, &matrices)?;
        let mut buffer = self.gpu.alloc::<u32>(count as usize * STATE_WORDS, 0xA5)?;
        let kernel = self.gpu.kernel(&layout::DITHER_INIT)?;
        let mut launch = stream.launch_builder(&kernel);
        launch.arg(buffer.arg_mut()).arg(&count).arg(base.raw()).arg(matrices.raw());
        // SAFETY: matches `delay_beamformer_dither_init(states, count, base, jumps)`: `count`
        // states of STATE_WORDS words, one base state, 32 jump matrices of 160 x 5 words,
        // all allocated on this GPU just above.
        unsafe { launch.launch(launch_1d(count.div_ceil(DITHER_THREADS), DITHER_THREADS, 0)) }
            .during("initialising dither states")?;
        // The uploads must outlive the kernel that reads them.
        stream.synchronize().during("waiting for the dither states")?;
        Ok(DitherState { buffer, count, plan: self.plan.clone(), seed, first_subsequence })
    }

    /// Checks `weights` and `delays` ([`check_steering`]) and uploads them (on the launcher's
    /// stream) for [`beamform_steered`](Self::beamform_steered) and
    /// [`streaming`](Self::streaming).
    pub fn upload_steering(&self, weights: &[Complex<f32>], delays: &[f32]) -> Result<DeviceSteering> {
        check_steering(&self.config, weights, delays)?;
        Ok(DeviceSteering {
            weights: upload_on(self.gpu, &self.stream, weights)?,
            delays: upload_on(self.gpu, &self.stream, delays)?,
            antennas: self.config.antennas,
            beams: self.config.beams.len(),
            last_channel: self.config.last_channel(),
        })
    }

    /// One launch: `output` (complex int8 `[beam][channel][time]`) and the per-beam counts of
    /// saturated samples of this launch. `dither` is required when any beam is dithered and
    /// must come from this beamformer's [`dither_state`](Self::dither_state); it advances.
    ///
    /// Every buffer must belong to this beamformer's GPU (`WrongDevice`) and have its
    /// configuration's length (`ShapeMismatch`). `weights` and `delays` are downloaded (on the
    /// launcher's stream) and checked ([`check_steering`]: `NonFinite` for NaN, infinity or
    /// f32 overflow in the kernel's steering), which waits for that stream; for repeated
    /// launches with the same steering, [`upload_steering`](Self::upload_steering) checks
    /// once and [`beamform_steered`](Self::beamform_steered) launches without waiting.
    pub fn beamform(
        &self,
        input: &DeviceBuffer<Complex<i8>>,
        weights: &DeviceBuffer<Complex<f32>>,
        delays: &DeviceBuffer<f32>,
        dither: Option<&mut DitherState>,
        output: &mut DeviceBuffer<Complex<i8>>,
        saturated: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.check_arguments(input, weights, delays, dither.as_deref(), output, saturated)?;
        let (w, d) = (weights.download_on(&self.stream)?, delays.download_on(&self.stream)?);
        check_steering(&self.config, &w, &d)?;
        self.launch(input, weights, delays, dither, output, saturated, &self.stream)
    }

    /// [`beamform`](Self::beamform) with steering checked by
    /// [`upload_steering`](Self::upload_steering) (of a beamformer with the same antennas,
    /// beams and a last channel at least this one's, on this GPU), launched on the
    /// launcher's stream without a host wait.
    pub fn beamform_steered(
        &self,
        input: &DeviceBuffer<Complex<i8>>,
        steering: &DeviceSteering,
        dither: Option<&mut DitherState>,
        output: &mut DeviceBuffer<Complex<i8>>,
        saturated: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.check_steered(steering)?;
        self.check_arguments(
            input,
            &steering.weights,
            &steering.delays,
            dither.as_deref(),
            output,
            saturated,
        )?;
        self.launch(input, &steering.weights, &steering.delays, dither, output, saturated, &self.stream)
    }

    /// `InvalidConfig` unless `steering` was checked for this beamformer's antennas and beams
    /// up to (at least) its last channel.
    pub(super) fn check_steered(&self, steering: &DeviceSteering) -> Result<()> {
        let c = &self.config;
        if steering.antennas != c.antennas
            || steering.beams != c.beams.len()
            || steering.last_channel < c.last_channel()
        {
            return Err(Error::InvalidConfig(format!(
                "the steering was checked for {} antennas x {} beams up to channel {}, this launch has {} x {} up \
                 to channel {}",
                steering.antennas,
                steering.beams,
                steering.last_channel,
                c.antennas,
                c.beams.len(),
                c.last_channel()
            )));
        }
        Ok(())
    }

    /// Ownership (`WrongDevice`), lengths (`ShapeMismatch`) and the dither state
    /// (`WrongDevice`, or `InvalidConfig` when missing or made for another plan).
    pub(super) fn check_arguments(
        &self,
        input: &DeviceBuffer<Complex<i8>>,
        weights: &DeviceBuffer<Complex<f32>>,
        delays: &DeviceBuffer<f32>,
        dither: Option<&DitherState>,
        output: &DeviceBuffer<Complex<i8>>,
        saturated: &DeviceBuffer<u32>,
    ) -> Result<()> {
        let c = &self.config;
        self.gpu.check_owner(input, "delay beamformer input")?;
        self.gpu.check_owner(weights, "delay beamformer weights")?;
        self.gpu.check_owner(delays, "delay beamformer delays")?;
        self.gpu.check_owner(output, "delay beamformer output")?;
        self.gpu.check_owner(saturated, "delay beamformer saturation counts")?;
        let shapes = [
            ("delay beamformer input (complex samples)", c.input_len(), input.len()),
            ("delay beamformer weights", c.steering_len(), weights.len()),
            ("delay beamformer delays", c.steering_len(), delays.len()),
            ("delay beamformer output (complex samples)", c.output_len(), output.len()),
            ("delay beamformer saturation counts", c.beams.len(), saturated.len()),
        ];
        for (what, expected, actual) in shapes {
            if expected != actual {
                return Err(Error::ShapeMismatch { what, expected, actual });
            }
        }
        self.check_dither(dither)
    }

    /// The dither state: `WrongDevice` for another GPU's, `InvalidConfig` when missing for
    /// dithered beams or made for another plan.
    pub(super) fn check_dither(&self, dither: Option<&DitherState>) -> Result<()> {
        if let Some(state) = dither {
            self.gpu.check_owner(&state.buffer, "dither state")?;
        }
        match dither {
            Some(state) if self.config.dithered() && state.plan != self.plan => Err(Error::InvalidConfig(
                "the dither state was made for another beamformer (plan differs)".into(),
            )),
            None if self.config.dithered() => {
                Err(Error::InvalidConfig("dithered beams need a DitherState".into()))
            }
            _ => Ok(()),
        }
    }

    /// The launch on `stream`, after [`check_arguments`](Self::check_arguments) and the
    /// steering checks.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch(
        &self,
        input: &DeviceBuffer<Complex<i8>>,
        weights: &DeviceBuffer<Complex<f32>>,
        delays: &DeviceBuffer<f32>,
        dither: Option<&mut DitherState>,
        output: &mut DeviceBuffer<Complex<i8>>,
        saturated: &mut DeviceBuffer<u32>,
        stream: &Stream,
    ) -> Result<()> {
        let c = &self.config;
        // No beam dithered: the states stay as they are.
        let states = dither.filter(|_| c.dithered());
        saturated.poison_on(stream, 0)?;
        let p = &self.plan;
        let null = 0u64;
        let beams = c.beams.len() as u32;
        let mut launch = stream.launch_builder(&self.kernel);
        launch
            .arg(input.raw())
            .arg(weights.raw())
            .arg(delays.raw())
            .arg(self.slot_table.raw())
            .arg(output.arg_mut())
            .arg(saturated.arg_mut());
        match states {
            Some(state) => launch.arg(state.buffer.arg_mut()),
            None => launch.arg(&null),
        };
        launch
            .arg(&c.antennas)
            .arg(&beams)
            .arg(&c.channels)
            .arg(&c.first_channel)
            .arg(&c.times)
            .arg(&p.coefficient_antennas)
            .arg(&p.tiles_per_group);
        let mut config = launch_1d(p.batches, THREADS, p.shared_bytes());
        config.grid_dim.1 = p.groups;
        config.grid_dim.2 = c.channels;
        // SAFETY: arguments match the plan's variant's `delay_beamformer_p*` (kernels-gpu
        // delay_beamformer/device.rs):
        // every buffer belongs to this GPU and its length was checked against the validated
        // configuration, whose offsets the kernel forms in 64 bits (module comment there);
        // w and d passed `check_steering`; the slot table and the dither states belong to
        // this plan, and the states pointer is null only when no slot carries DITHER_FLAG.
        unsafe { launch.launch(config) }.during("launching the delay beamformer")?;
        Ok(())
    }
}

/// A new device buffer holding `data`, copied on `stream` (the allocation's fill is on the
/// GPU's stream, ordered before the copy by the buffer's events).
pub(super) fn upload_on<T: Pod>(gpu: &Gpu, stream: &Stream, data: &[T]) -> Result<DeviceBuffer<T>> {
    let mut buffer = gpu.alloc::<T>(data.len(), 0)?;
    buffer.upload_on(stream, data, "upload source")?;
    Ok(buffer)
}
