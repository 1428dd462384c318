//! The GPU channelizer: construction, the kept input between chunks, and `push`.
use super::*;

/// One output chunk, downloaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputChunk {
    /// Stream index `m` of the chunk's first spectrum (its window nominally starts at
    /// sample `2 n m`); chunk `j` starts at `j x spectra_per_chunk`.
    pub first_spectrum: i64,
    /// `[heap][channel][spectrum][pol]` in the configured format.
    pub data: Vec<u8>,
    /// Saturated values per `[heap][pol]`.
    pub saturated: Vec<u32>,
    /// Per spectrum of the chunk (`heaps_per_chunk x spectra_per_heap`): true when either
    /// polarisation's window touched a missing packet or a sample before the stream.
    pub lost_spectra: Vec<bool>,
    /// Per heap of the chunk: true when any of its spectra is lost.
    pub lost_heaps: Vec<bool>,
}

/// Where a pushed chunk's samples are: host memory (copied in) or device memory of the
/// channelizer's GPU (copied device to device).
#[derive(Clone, Copy)]
pub(crate) enum ChunkSource<'a> {
    Host([&'a [u8]; 2]),
    Device([&'a DeviceBuffer<u8>; 2]),
}

/// What a checked push (or submit) will do: the kept input's base once room is made for the
/// chunk, and the number of output chunks it completes, whose schedules are the first
/// `complete` of the channelizer's schedule pool, followed by the pending chunk's.
pub(crate) struct PushPlan {
    pub(super) base: i64,
    pub(super) complete: usize,
}

impl PushPlan {
    /// Output chunks the push completes.
    pub(crate) fn complete(&self) -> usize {
        self.complete
    }
}

/// The schedule, output and saturation buffers of the one-shot calls (`push`, `run`).
pub(super) struct OwnChunk {
    pub(super) offsets: DeviceBuffer<u32>,
    pub(super) fine: DeviceBuffer<f32>,
    pub(super) rotation: DeviceBuffer<[f32; 4]>,
    pub(super) output: DeviceBuffer<u8>,
    pub(super) saturated: DeviceBuffer<u32>,
    /// Host staging of the schedule's launch parameters (reused).
    pub(super) host_offsets: Vec<u32>,
    pub(super) host_fine: Vec<f32>,
    pub(super) host_rotation: Vec<[f32; 4]>,
}

/// The F-engine of one antenna on one GPU (rustfft-style planner object: it owns the weights,
/// gains, kernels (and the cuFFT plan of the three-kernel path), device buffers and the
/// overlap between input chunks). Its own calls run on one stream ([`set_stream`](Self::set_stream));
/// the streaming engine [`ChannelizerStream`] runs it from pinned memory at the PCIe limit.
pub struct Channelizer<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) config: ChannelizerConfig,
    pub(super) models: [DelayModel; 2],
    pub(super) kernels: Kernels,
    pub(super) inputs: [DeviceBuffer<u32>; 2],
    pub(super) spare: [DeviceBuffer<u32>; 2],
    /// Absolute sample of word 0 of `inputs` (a multiple of 32) and one past the newest sample.
    pub(super) base: i64,
    pub(super) end: i64,
    /// Arrival flags per packet from packet `present_first`.
    pub(super) present: [Vec<bool>; 2],
    pub(super) present_first: i64,
    pub(super) next_spectrum: i64,
    pub(super) own: OwnChunk,
    /// Schedules of the output chunks a plan completes, then the pending chunk's (reused;
    /// grows to the most chunks one push completes, plus one).
    pub(super) schedules: Vec<Schedule>,
    /// The first spectrum and the models of `schedules[0]`, when it holds the pending chunk's
    /// schedule.
    pub(super) cached: Option<(i64, [DelayModel; 2])>,
    pub(super) poison: Option<u8>,
    /// Why the stream broke, after a device error part-way through a push or run.
    pub(super) failed: Option<String>,
    /// The stream of the channelizer's own calls.
    pub(super) stream: Stream,
}

impl<'g> Channelizer<'g> {
    /// Validates `config`, loads the kernels of [`PfbPath::for_config`], plans cuFFT
    /// (three-kernel path) and allocates every buffer. `weights`: `2 n T` f32 (`w[t + 2n j]`),
    /// or `None` for [`hann_sinc_weights`]. Gains start at 1 and delay models at 0.
    pub fn new(gpu: &'g Gpu, config: ChannelizerConfig, weights: Option<&[f32]>) -> Result<Channelizer<'g>> {
        config.validate()?;
        let kernel = PfbPath::for_config(gpu, &config).kernel(gpu, &config)?;
        Channelizer::with_kernel(gpu, config, weights, kernel)
    }

    /// As [`new`](Self::new) with the kernels `kernel` names (for tests and benchmarks): a
    /// FIR (`pfb_fir_t*`, any compiled for at least the configuration's taps) runs the
    /// three-kernel path with the post kernel of the output format; a post kernel
    /// (`pfb_post_ci*`, the output format's) the three-kernel path with the FIR for the taps;
    /// a cluster kernel (`pfb_cluster_t*_ci*`) the fused path, where it applies
    /// ([`cluster_kernel_applies`]). [`Error::InvalidConfig`] for any other spec or one that does
    /// not fit the configuration.
    pub fn with_kernel(
        gpu: &'g Gpu,
        config: ChannelizerConfig,
        weights: Option<&[f32]>,
        kernel: &KernelSpec,
    ) -> Result<Channelizer<'g>> {
        config.validate()?;
        let selection = select(gpu, &config, kernel)?;
        let weights = match weights {
            Some(w) => {
                check_weights(&config, w)?;
                w.to_vec()
            }
            None => hann_sinc_weights(config.channels, config.taps),
        };
        let spectra = config.spectra_per_chunk() as usize;
        let kernels = Kernels::new(gpu, &config, selection, &weights)?;
        // One word of padding for the pair unpacker, then whole 16-byte chunks plus 64 bytes for
        // the FIR's staged rows (`fir_row_chunks` copies up to 28 bytes past the last word).
        let words =
            ((config.capacity_samples() * config.bits as u64 / 32) as usize + 1).next_multiple_of(4) + 16;
        let alloc_input = || gpu.alloc::<u32>(words, 0);
        // The most packets the kept flags hold: the kept input's, one chunk's and the partial
        // packets at both ends (reserved once, so pushes never grow them).
        let packets =
            (config.capacity_samples() / config.packet_samples as u64) as usize + config.chunk_packets() + 2;
        let mut ch = Channelizer {
            gpu,
            models: [DelayModel::default(); 2],
            kernels,
            inputs: [alloc_input()?, alloc_input()?],
            spare: [alloc_input()?, alloc_input()?],
            base: 0,
            end: 0,
            present: [Vec::with_capacity(packets), Vec::with_capacity(packets)],
            present_first: 0,
            next_spectrum: 0,
            own: OwnChunk {
                offsets: gpu.alloc(2 * spectra, 0)?,
                fine: gpu.alloc(2 * spectra, 0)?,
                rotation: gpu.alloc(2 * spectra, 0)?,
                output: gpu.alloc(config.output_bytes(), 0)?,
                saturated: gpu.alloc(2 * config.heaps_per_chunk as usize, 0)?,
                host_offsets: Vec::new(),
                host_fine: Vec::new(),
                host_rotation: Vec::new(),
            },
            schedules: Vec::new(),
            cached: None,
            poison: None,
            failed: None,
            stream: gpu.stream().clone(),
            config,
        };
        ch.reset()?;
        Ok(ch)
    }

    /// The configuration the channelizer was built with (validated).
    pub fn config(&self) -> &ChannelizerConfig {
        &self.config
    }

    /// Clusters of the cluster kernel resident at once (its launches are one wave of them),
    /// or `None` on the three-kernel path.
    pub fn resident_clusters(&self) -> Option<u32> {
        self.kernels.cluster.as_ref().map(|c| c.clusters)
    }

    /// The kernels this channelizer runs: the cluster kernel, or the FIR and post kernels
    /// (cuFFT between them).
    pub fn kernels(&self) -> Vec<&'static KernelSpec> {
        match (&self.kernels.cluster, &self.kernels.three) {
            (Some(cluster), _) => vec![&cluster.kernel.1.spec],
            (None, Some(three)) => vec![&three.fir.1.spec, &three.post.1.spec],
            (None, None) => Vec::new(),
        }
    }

    /// The path this channelizer runs.
    pub fn path(&self) -> PfbPath {
        if self.kernels.cluster.is_some() {
            PfbPath::Fused
        } else {
            PfbPath::ThreeKernel
        }
    }

    /// Runs the channelizer's own calls ([`push`](Self::push), [`run`](Self::run), the
    /// `run_*` launches, [`set_gains`](Self::set_gains), [`reset`](Self::reset)) on `stream`
    /// (the GPU's default stream until set): every launch, memset, cuFFT execution and copy,
    /// so that callers can order their own work with ours; [`Error::WrongDevice`] for a stream
    /// of another GPU. The streaming engine ([`ChannelizerStream`]) uses its own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "channelizer stream")
    }

    /// The stream of the channelizer's own calls.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Starts a new stream at sample 0 (delay models and gains are kept), and clears a failure
    /// ([`failure`](Self::failure)) once the buffers are reset.
    pub fn reset(&mut self) -> Result<()> {
        let stream = self.stream.clone();
        self.reset_on(&stream)
    }

    /// [`reset`](Self::reset) with the kept input zeroed on `stream`.
    pub(super) fn reset_on(&mut self, stream: &Stream) -> Result<()> {
        // The samples before the stream are zeros (and flagged lost).
        self.base = -((self.config.max_delay as u64).next_multiple_of(SAMPLE_GRANULE as u64) as i64);
        self.end = 0;
        for buffer in &mut self.inputs {
            buffer.poison_on(stream, 0)?;
        }
        for p in &mut self.present {
            p.clear();
        }
        self.present_first = 0;
        self.next_spectrum = 0;
        self.cached = None;
        self.failed = None;
        Ok(())
    }

    /// Why the stream stopped, if a device error struck part-way through a push or run: the
    /// kept input may then be inconsistent, so [`push`](Self::push), [`run`](Self::run) and
    /// [`fill_input_with`](Self::fill_input_with) refuse to continue until [`reset`](Self::reset).
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// The typed error of a failed channelizer.
    pub(super) fn check_usable(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(why) => Err(Error::StreamBroken { engine: "channelizer", cause: why.clone() }),
        }
    }

    /// Records a device error that struck after the stream's state began to change.
    pub(super) fn fail<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.failed = Some(e.to_string());
        }
        result
    }

    /// Sets the delay model of polarisation `pol` (from the next output chunk on). A model
    /// with a NaN or infinite field is rejected ([`Error::NonFinite`] on
    /// [`DELAY_MODEL_FIELDS`], index `5 pol + field`).
    pub fn set_delay_model(&mut self, pol: usize, model: DelayModel) -> Result<()> {
        if pol > 1 {
            return Err(Error::InvalidConfig(format!("polarisation must be 0 or 1, got {pol}")));
        }
        if let Some(field) = model.first_non_finite() {
            return Err(Error::NonFinite { what: DELAY_MODEL_FIELDS, index: 5 * pol + field });
        }
        self.models[pol] = model;
        Ok(())
    }

    /// The delay models of polarisations 0 and 1 that the next output chunk will use.
    pub fn delay_models(&self) -> &[DelayModel; 2] {
        &self.models
    }

    /// Sets the complex bandpass gains, `[pol][channel]`: finite ([`Error::NonFinite`], index
    /// of the f32 component `2 (pol n + channel) + (0 re, 1 im)`) and at most
    /// [`MAX_COEFFICIENT`] in magnitude. They apply from the next output chunk computed.
    pub fn set_gains(&mut self, gains: &[Complex<f32>]) -> Result<()> {
        let stream = self.stream.clone();
        self.set_gains_on(gains, &stream)
    }

    /// [`set_gains`](Self::set_gains), the copy enqueued on `stream`.
    pub(super) fn set_gains_on(&mut self, gains: &[Complex<f32>], stream: &Stream) -> Result<()> {
        check_gains(&self.config, gains)?;
        self.kernels.gains.upload_on(stream, gains, "PFB gains")
    }

    /// Appends one input chunk per polarisation (`chunk_bytes()` packed bytes each) with its
    /// packet arrival flags (`chunk_packets()` each), and returns every output chunk that is
    /// now complete, in order: the one-shot path (a pageable copy in, synchronous copies out);
    /// [`ChannelizerStream`] gives the same bytes at the PCIe limit.
    ///
    /// A push is checked whole before anything changes: the lengths, room for the chunk in the
    /// kept input, and the schedule (delays within `max_delay`, finite) of every output chunk
    /// it will complete and of the one after them. If any is invalid, the push returns that
    /// error and leaves the channelizer exactly as it was (set a valid delay model and push the
    /// same chunk again: the stream continues as if the failed push never happened), so an
    /// error never loses completed output or input. Only a device error (driver or cuFFT) can
    /// strike once the state has begun to change; it leaves the channelizer
    /// [`failure`](Self::failure)d, refusing further pushes with [`Error::StreamBroken`] until
    /// [`reset`](Self::reset).
    pub fn push(&mut self, chunk: [&[u8]; 2], present: [&[bool]; 2]) -> Result<Vec<OutputChunk>> {
        self.checked_push(ChunkSource::Host(chunk), present)
    }

    /// [`push`](Self::push) with the chunk in device memory of this GPU (`chunk_bytes()` bytes
    /// per polarisation, e.g. another library's buffers joined with
    /// [`Gpu::wrap_device`](crate::Gpu::wrap_device)): copied device to device on the
    /// channelizer's stream, after the buffers' pending writes, and checked and applied as
    /// `push` is. The outputs are the same bytes as `push` of the same samples.
    pub fn push_device(
        &mut self,
        chunk: [&DeviceBuffer<u8>; 2],
        present: [&[bool]; 2],
    ) -> Result<Vec<OutputChunk>> {
        for bytes in chunk {
            self.gpu.check_owner(bytes, "PFB input chunk")?;
        }
        self.checked_push(ChunkSource::Device(chunk), present)
    }

    /// [`push`](Self::push) and [`push_device`](Self::push_device) after their own checks: the
    /// stream is usable, each polarisation's chunk has `chunk_bytes()` bytes and its flags
    /// `chunk_packets()` entries, and the plan is valid; then the push.
    fn checked_push(&mut self, chunk: ChunkSource<'_>, present: [&[bool]; 2]) -> Result<Vec<OutputChunk>> {
        self.check_usable()?;
        let expected = self.config.chunk_bytes();
        let lengths = match chunk {
            ChunkSource::Host(c) => [c[0].len(), c[1].len()],
            ChunkSource::Device(c) => [c[0].len(), c[1].len()],
        };
        if let Some(&actual) = lengths.iter().find(|&&len| len != expected) {
            return Err(Error::ShapeMismatch { what: "PFB input chunk (bytes)", expected, actual });
        }
        self.check_flags(present)?;
        let plan = self.plan()?;
        let result = self.execute_push(&plan, chunk, present);
        self.fail(result)
    }

    /// The packet flags of one chunk per polarisation have `chunk_packets()` entries each.
    pub(super) fn check_flags(&self, present: [&[bool]; 2]) -> Result<()> {
        let expected = self.config.chunk_packets();
        for flags in present {
            if flags.len() != expected {
                return Err(Error::ShapeMismatch { what: "PFB packet flags", expected, actual: flags.len() });
            }
        }
        Ok(())
    }

    /// Everything a push will do, computed without changing the stream: the new base of the
    /// kept input and the output chunks it completes, whose schedules (then the pending
    /// chunk's) it leaves in the schedule pool. Only the pool changes (the pending chunk's
    /// cached schedule is dropped when it is recomputed).
    pub(super) fn plan(&mut self) -> Result<PushPlan> {
        let c = &self.config;
        let capacity = c.capacity_samples() as i64;
        let chunk = c.chunk_samples as i64;
        let overflow = || Error::InvalidConfig("the stream passed the i64 sample positions".into());
        let end = self.end.checked_add(chunk).ok_or_else(overflow)?;
        let base = if end <= self.base + capacity {
            self.base
        } else {
            // Drop input older than the next chunk's earliest possible window.
            let earliest = (2 * c.channels as i64)
                .checked_mul(self.next_spectrum)
                .and_then(|x| x.checked_sub(c.max_delay as i64))
                .ok_or_else(overflow)?;
            let new_base = earliest.div_euclid(SAMPLE_GRANULE as i64) * SAMPLE_GRANULE as i64;
            let new_base = new_base.clamp(self.base, self.end);
            if end > new_base + capacity {
                return Err(Error::InvalidConfig(
                    "the kept input outgrew its buffer (internal error)".into(),
                ));
            }
            new_base
        };
        let window = c.window() as i64;
        let mut complete = 0;
        let mut next = self.next_spectrum;
        loop {
            if self.schedules.len() == complete {
                self.schedules.push(Schedule::with_capacity(c.spectra_per_chunk() as usize));
            }
            // Any invalid schedule fails the whole push before it changes anything: a push that
            // completed only the chunks before it would leave a backlog of input the kept
            // buffer is not sized for.
            if complete > 0 || self.cached != Some((next, self.models)) {
                if complete == 0 {
                    self.cached = None;
                }
                self.schedules[complete].fill(c, &self.models, next)?;
            }
            let (first, last) = self.schedules[complete].span(window);
            if last > end {
                break;
            }
            if first < base {
                return Err(Error::InvalidConfig(format!(
                    "a window from sample {first} starts before the kept input (from {base}) (internal error)"
                )));
            }
            complete += 1;
            next = next.checked_add(c.spectra_per_chunk() as i64).ok_or_else(overflow)?;
        }
        Ok(PushPlan { base, complete })
    }

    /// Keeps the pending chunk's schedule (left after `plan`'s completed ones) for the next
    /// plan, once the chunks before it have run.
    pub(super) fn finish_plan(&mut self, plan: &PushPlan) {
        self.schedules.swap(0, plan.complete);
        self.cached = Some((self.next_spectrum, self.models));
    }

    /// Grows the schedule pool to `count` schedules (at construction of an engine, so that its
    /// plans never allocate).
    pub(super) fn reserve_schedules(&mut self, count: usize) {
        let spectra = self.config.spectra_per_chunk() as usize;
        while self.schedules.len() < count {
            self.schedules.push(Schedule::with_capacity(spectra));
        }
    }

    /// Runs a checked push: moves the kept input, uploads the chunk, computes and downloads
    /// each complete output chunk. Only device errors can fail here.
    pub(super) fn execute_push(
        &mut self,
        plan: &PushPlan,
        chunk: ChunkSource<'_>,
        present: [&[bool]; 2],
    ) -> Result<Vec<OutputChunk>> {
        let stream = self.stream.clone();
        self.move_kept_input(plan.base, &stream)?;
        let at = self.append_at();
        let bytes = self.config.chunk_bytes();
        for pol in 0..2 {
            let mut view = self.inputs[pol].arg_mut().slice_mut(4 * at..4 * at + bytes);
            match chunk {
                ChunkSource::Host(data) => {
                    stream.memcpy_htod(data[pol], &mut view).during("copying an input chunk to the device")?
                }
                ChunkSource::Device(data) => stream
                    .memcpy_dtod(data[pol].raw(), &mut view)
                    .during("copying an input chunk on the device")?,
            }
        }
        self.append_flags(present);
        let mut out = Vec::with_capacity(plan.complete);
        for i in 0..plan.complete {
            self.run_pooled(i)?;
            out.push(self.download(i)?);
            self.next_spectrum += self.config.spectra_per_chunk() as i64;
        }
        self.finish_plan(plan);
        Ok(out)
    }

    /// The word of `inputs` where the next chunk goes (`end - base` is a multiple of 32).
    pub(super) fn append_at(&self) -> usize {
        ((self.end - self.base) as u64 * self.config.bits as u64 / 32) as usize
    }

    /// Appends a chunk's packet flags and advances the end of the stream by a chunk (its
    /// samples were copied to [`append_at`](Self::append_at)).
    pub(super) fn append_flags(&mut self, present: [&[bool]; 2]) {
        for (kept, flags) in self.present.iter_mut().zip(present) {
            kept.extend_from_slice(flags);
        }
        self.end += self.config.chunk_samples as i64;
    }

    /// Moves the kept input from `new_base` on to the front of the spare buffers (on
    /// `stream`) and swaps them in (nothing when `new_base` is the current base); drops the
    /// packet flags wholly before it.
    pub(super) fn move_kept_input(&mut self, new_base: i64, stream: &Stream) -> Result<()> {
        if new_base == self.base {
            return Ok(());
        }
        let c = &self.config;
        let bits = c.bits as i64;
        let (from, to) =
            (((new_base - self.base) * bits / 32) as usize, ((self.end - self.base) * bits / 32) as usize);
        for pol in 0..2 {
            if to > from {
                let src = self.inputs[pol].raw().slice(4 * from..4 * to);
                let mut dst = self.spare[pol].arg_mut().slice_mut(0..4 * (to - from));
                stream.memcpy_dtod(&src, &mut dst).during("moving the kept input")?;
            }
        }
        for pol in 0..2 {
            std::mem::swap(&mut self.inputs[pol], &mut self.spare[pol]);
        }
        self.base = new_base;
        // Packets wholly before the new base are no longer needed for flags.
        let keep_from = self.base.div_euclid(c.packet_samples as i64).max(0);
        if keep_from > self.present_first {
            let drop = (keep_from - self.present_first) as usize;
            for p in &mut self.present {
                p.drain(..drop.min(p.len()));
            }
            self.present_first = keep_from;
        }
        Ok(())
    }

    /// Writes the kernels' window offsets of `schedule` (`2 x spectra_per_chunk`, polarisation
    /// 0 first) into `offsets`; errors, changing nothing else, when a window is not wholly in
    /// the kept input.
    pub(super) fn write_offsets(&self, schedule: &Schedule, offsets: &mut [u32]) -> Result<()> {
        let window = self.config.window() as i64;
        for (offset, &start) in offsets.iter_mut().zip(schedule.starts.iter().flatten()) {
            if start < self.base || start + window > self.end {
                return Err(Error::InvalidConfig(format!(
                    "window [{start}, {}) is outside the kept input [{}, {}): the buffer is too short \
                     for the delays asked",
                    start + window,
                    self.base,
                    self.end
                )));
            }
            // Below the capacity, < 2^32 (validate).
            *offset = (start - self.base) as u32;
        }
        Ok(())
    }

    /// The lost-data flags of the chunk of `schedule`, from the kept packet flags, into
    /// `spectra` and `heaps`.
    pub(super) fn lost_flags(
        &self,
        schedule: &Schedule,
        spectra: &mut Vec<bool>,
        heaps: &mut Vec<bool>,
    ) -> Result<()> {
        let (present, present_first) = (&self.present, self.present_first);
        let arrived = |pol: usize, packet: i64| {
            packet >= present_first && present[pol].get((packet - present_first) as usize) == Some(&true)
        };
        let c = &self.config;
        lost_flags_into(
            &schedule.starts,
            c.window(),
            c.packet_samples,
            c.spectra_per_heap,
            arrived,
            spectra,
            heaps,
        )
    }

    /// Launches the cluster kernel, or FIR, FFT and post-processing, for the next output chunk
    /// into the device output (no download): the benchmark hook after
    /// [`fill_input_with`](Self::fill_input_with). Errors, changing nothing, when its schedule
    /// is invalid or its windows are not all in the kept input.
    pub fn run(&mut self) -> Result<()> {
        self.check_usable()?;
        let first = self.next_spectrum;
        self.reserve_schedules(1);
        if self.cached != Some((first, self.models)) {
            self.cached = None;
            self.schedules[0].fill(&self.config, &self.models, first)?;
            self.cached = Some((first, self.models));
        }
        self.run_pooled(0)
    }

    /// Uploads the launch parameters of the pool's schedule `i` and launches the chunk's
    /// kernels on the channelizer's stream. Checks first (changing nothing) that every window
    /// lies in the kept input; a device error after that marks the channelizer failed.
    pub(super) fn run_pooled(&mut self, i: usize) -> Result<()> {
        let spectra = 2 * self.config.spectra_per_chunk() as usize;
        let mut offsets = std::mem::take(&mut self.own.host_offsets);
        offsets.resize(spectra, 0);
        let checked = self.write_offsets(&self.schedules[i], &mut offsets);
        self.own.host_offsets = offsets;
        checked?;
        let schedule = &self.schedules[i];
        let own = &mut self.own;
        own.host_fine.clear();
        own.host_rotation.clear();
        for p in 0..2 {
            own.host_fine.extend_from_slice(&schedule.fine[p]);
            own.host_rotation.extend_from_slice(&schedule.rotation[p]);
        }
        let result = self.launch_own();
        self.fail(result)
    }

    /// Uploads the host schedule staging and runs the kernels into the own output.
    pub(super) fn launch_own(&mut self) -> Result<()> {
        let Channelizer { kernels, inputs, own, config, stream, poison, .. } = self;
        own.offsets.upload_on(stream, &own.host_offsets, "PFB window offsets")?;
        own.fine.upload_on(stream, &own.host_fine, "PFB fine delays")?;
        own.rotation.upload_on(stream, &own.host_rotation, "PFB rotations")?;
        let launch = Launch {
            inputs,
            offsets: &own.offsets,
            fine: &own.fine,
            rotation: &own.rotation,
            output: &mut own.output,
            saturated: &mut own.saturated,
        };
        kernels.run(config, launch, *poison, stream)
    }

    /// The channelizer's own launch buffers, for the `run_*` hooks.
    pub(super) fn own_launch(&mut self) -> (&mut Kernels, Launch<'_>, &ChannelizerConfig, &Stream) {
        let Channelizer { kernels, inputs, own, config, stream, .. } = self;
        let launch = Launch {
            inputs,
            offsets: &own.offsets,
            fine: &own.fine,
            rotation: &own.rotation,
            output: &mut own.output,
            saturated: &mut own.saturated,
        };
        (kernels, launch, config, stream)
    }

    /// The cluster kernel's launch alone (for timing); clears the saturation counts first. `run` uploads
    /// its offsets and rotations first.
    pub fn run_fused(&mut self) -> Result<()> {
        let (kernels, mut launch, config, stream) = self.own_launch();
        kernels.fused(config, &mut launch, stream)
    }

    /// The FIR launch alone (for timing); `run` uploads its offsets first.
    pub fn run_fir(&mut self) -> Result<()> {
        let (kernels, launch, config, stream) = self.own_launch();
        kernels.fir(config, &launch, stream)
    }

    /// The cuFFT C2C launch alone (for timing).
    pub fn run_fft(&mut self) -> Result<()> {
        let stream = self.stream.clone();
        self.kernels.fft(&stream)
    }

    /// The post-processing launch alone (for timing); clears the saturation counts first.
    pub fn run_post(&mut self) -> Result<()> {
        let (kernels, mut launch, config, stream) = self.own_launch();
        kernels.post(config, &mut launch, stream)
    }

    /// Downloads the last run's output chunk (the pool's schedule `i`, from spectrum
    /// `next_spectrum`) with its flags, waiting for the channelizer's stream.
    pub(super) fn download(&mut self, i: usize) -> Result<OutputChunk> {
        let (mut lost_spectra, mut lost_heaps) = (Vec::new(), Vec::new());
        self.lost_flags(&self.schedules[i], &mut lost_spectra, &mut lost_heaps)?;
        let data = self.own.output.download_on(&self.stream)?;
        let saturated = self.own.saturated.download_on(&self.stream)?;
        self.stream.synchronize().during("waiting for an output chunk")?;
        Ok(OutputChunk { first_spectrum: self.next_spectrum, data, saturated, lost_spectra, lost_heaps })
    }

    /// Benchmark hook: lets `fill` write the input buffers directly (e.g. random words) through
    /// [`DeviceBufferMut`] borrows (which cannot replace them), then treats them as a full
    /// stream of arrived samples from the current base, so [`run`](Self::run) can be timed
    /// without host transfers. The borrows cannot be swapped for other buffers (which would
    /// leave the channelizer's sizes describing another allocation):
    ///
    /// ```compile_fail,E0596
    /// # fn f(ch: &mut radio_kernels_host::pfb::Channelizer, other: &mut radio_kernels_host::DeviceBuffer<u32>) {
    /// ch.fill_input_with(|mut input| std::mem::swap(&mut *input, other));
    /// # }
    /// ```
    pub fn fill_input_with(&mut self, mut fill: impl FnMut(DeviceBufferMut<'_, u32>)) -> Result<()> {
        self.check_usable()?;
        for buffer in &mut self.inputs {
            fill(buffer.borrow_mut());
        }
        let c = &self.config;
        self.end = self.base + (c.capacity_samples() - c.chunk_samples as u64) as i64;
        let packets = (self.end.div_euclid(c.packet_samples as i64) + 1).max(0) as usize;
        self.present = [vec![true; packets], vec![true; packets]];
        self.present_first = 0;
        Ok(())
    }

    /// Test hook: fill the intermediate and output buffers with `byte` before every run, so
    /// values a kernel fails to write show up.
    pub fn poison_before_runs(&mut self, byte: Option<u8>) {
        self.poison = byte;
    }

    /// The device output of the last run: `[heap][channel][spectrum][pol]`.
    pub fn output(&self) -> &DeviceBuffer<u8> {
        &self.own.output
    }

    /// Bytes each kernel of the three-kernel path reads and writes once per output chunk, (FIR,
    /// FFT, post): the minimum traffic the bench compares achieved bandwidth with. (The fused
    /// kernel's minimum is the input once plus the output once: [`Self::fused_bytes`].)
    pub fn kernel_bytes(&self) -> (u64, u64, u64) {
        let c = &self.config;
        let spectra = c.spectra_per_chunk();
        let values = 2 * spectra * c.channels as u64; // complex per chunk, both pols
        let input = 2 * spectra * 2 * c.channels as u64 * c.bits as u64 / 8; // new samples, once
        (input + 8 * values, 16 * values, 8 * values + c.output_bytes() as u64)
    }

    /// Bytes the fused kernel must read and write once per output chunk: the new input
    /// samples of both polarisations and the output.
    pub fn fused_bytes(&self) -> u64 {
        let c = &self.config;
        let spectra = c.spectra_per_chunk();
        2 * spectra * 2 * c.channels as u64 * c.bits as u64 / 8 + c.output_bytes() as u64
    }
}
