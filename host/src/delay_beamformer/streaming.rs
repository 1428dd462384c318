//! The streaming delay beamformer: chunks of x from host memory to beams and saturation
//! counts in host memory at the PCIe limit, on the rings of [`crate::streaming`].
//!
//! Time model: chunk `k` is a launch of the configuration's `T` spectra, times
//! `k T .. (k + 1) T` of every antenna and channel. The beam sums are stateless in time; the dither is
//! not: each thread of the launch's [`Plan`](super::Plan) owns one XORWOW state (channel x
//! time group x beam batch x thread), which every chunk advances in submit order on the
//! compute lane. So chunk `k` equals, bit for bit, the `k`-th of consecutive one-shot
//! [`DelayBeamformer::beamform_steered`] calls with the same steering and dither state. The
//! dither is not a function of absolute time: one launch over `k T` spectra has another plan
//! and other states, and equals the chunks only in its undithered beams (and their counts).
//!
//! Layouts per chunk: x complex int8 `[antenna][channel][time][pol]` (`input_len()` values:
//! time is not the slowest axis, so the chunks are not consecutive pieces of one long x),
//! beams complex int8 `[beam][channel][time]` (`output_len()` values), saturation counts u32
//! `[beam]` of this chunk.
//!
//! Per chunk: one H2D copy of x (upload lane), the zeroing of the counts and one kernel
//! launch (compute lane), two D2H copies (download lane). Steering changes between chunks
//! ([`DelayStream::set_steering`]) are copied on the compute lane, so they take effect from
//! the next chunk submitted.
use super::{check_steering, DelayBeamformer, DelayBeamformerConfig, DeviceSteering, DitherState};
use crate::error::{Error, Result};
use crate::runtime::copy_on;
use crate::runtime::DeviceBuffer;
use crate::streaming::{Engine, InputRing, Lanes, OutputRing, PinnedBuffer, RegisteredHost};
use num_complex::Complex;

impl<'g> DelayBeamformer<'g> {
    /// The streaming engine: x chunks (`input_len()` values each) in, beams (`output_len()`
    /// values) and per-beam saturation counts out, with `depth` input slots and as many
    /// output slots ([`crate::streaming`]; 3 overlap the upload, the kernel and the
    /// download).
    ///
    /// The engine starts with a copy of `steering` (made on the launcher's stream; checked by
    /// [`upload_steering`](Self::upload_steering) for these antennas and beams up to at least
    /// this configuration's last channel) and advances `dither` (required when a beam is
    /// dithered, made by this beamformer's [`dither_state`](Self::dither_state)) as
    /// consecutive one-shot calls would; the state is the caller's again when the engine is
    /// dropped. Errors as [`beamform_steered`](Self::beamform_steered) for the steering and
    /// the state (`InvalidConfig`, `WrongDevice`), and `InvalidConfig` for `depth` 0.
    pub fn streaming<'s>(
        &'s self,
        steering: &DeviceSteering,
        dither: Option<&'s mut DitherState>,
        depth: usize,
    ) -> Result<DelayStream<'s, 'g>> {
        self.check_steered(steering)?;
        self.gpu.check_owner(&steering.weights, "delay beamformer steering")?;
        self.gpu.check_owner(&steering.delays, "delay beamformer steering")?;
        self.check_dither(dither.as_deref())?;
        let gpu = self.gpu;
        let c = &self.config;
        let lanes = Lanes::new(gpu)?;
        let input = InputRing::new(gpu, depth, c.input_len())?;
        let beams = OutputRing::new(gpu, depth, c.output_len(), "delay beamformer's outputs")?;
        let saturated = OutputRing::new(gpu, depth, c.beams.len(), "delay beamformer's outputs")?;
        let mut weights = gpu.alloc(c.steering_len(), 0)?;
        let mut delays = gpu.alloc(c.steering_len(), 0)?;
        // On the launcher's stream, where the launcher's own uses of `steering` are ordered;
        // the compute lane's kernels wait for these copies (the buffers' write events).
        copy_on(&self.stream, &steering.weights, &mut weights)?;
        copy_on(&self.stream, &steering.delays, &mut delays)?;
        Ok(DelayStream {
            beamformer: self,
            staged_weights: PinnedBuffer::new(gpu, c.steering_len())?,
            staged_delays: PinnedBuffer::new(gpu, c.steering_len())?,
            lanes,
            input,
            beams,
            saturated,
            weights,
            delays,
            dither,
            poison: None,
        })
    }
}

/// One output of a [`DelayStream`], in pinned memory.
#[derive(Clone, Copy, Debug)]
pub struct DelayOutput<'a> {
    /// Complex int8 `[beam][channel][time]` (`output_len()` values).
    pub beams: &'a [Complex<i8>],
    /// Saturated samples of this chunk, per beam.
    pub saturated: &'a [u32],
}

/// The streaming delay beamformer (module [`streaming`](self)): the upload of chunk k + 1,
/// the beamforming of chunk k and the download of chunk k - 1 run at once.
///
/// Per submit: one H2D copy, one memset and one kernel launch, two D2H copies, and the event
/// bookkeeping that orders them; the host waits only when it borrows an input slot still
/// being uploaded ([`input`](Self::input)) or an output still being downloaded
/// ([`output`](Self::output)).
///
/// `Send`, used from one thread at a time.
pub struct DelayStream<'s, 'g> {
    beamformer: &'s DelayBeamformer<'g>,
    lanes: Lanes,
    input: InputRing<Complex<i8>>,
    /// Written, downloaded and taken in step: output k is slot k of both.
    beams: OutputRing<Complex<i8>>,
    saturated: OutputRing<u32>,
    /// The engine's steering, and the pinned memory new steering is copied from.
    weights: DeviceBuffer<Complex<f32>>,
    delays: DeviceBuffer<f32>,
    staged_weights: PinnedBuffer<Complex<f32>>,
    staged_delays: PinnedBuffer<f32>,
    dither: Option<&'s mut DitherState>,
    /// Byte each beam output slot is filled with before the kernel writes it (tests).
    poison: Option<u8>,
}

impl DelayStream<'_, '_> {
    /// The configuration of the beamformer the engine runs (validated).
    pub fn config(&self) -> &DelayBeamformerConfig {
        &self.beamformer.config
    }

    /// Input slots (and output slots).
    pub fn depth(&self) -> usize {
        self.input.depth()
    }

    /// Chunks submitted since the start.
    pub fn submitted(&self) -> u64 {
        self.input.uploaded()
    }

    /// The pinned memory of the next chunk's x (`input_len()` values, `[antenna][channel]
    /// [time][pol]`): zeros at first, then the chunk last submitted from this slot. Waits
    /// only for that slot's previous upload.
    pub fn input(&mut self) -> Result<&mut [Complex<i8>]> {
        self.input.host_mut()
    }

    /// Enqueues the chunk in the current input slot: upload, beamforming (advancing the
    /// dither state), download of the beams and counts. [`Error::Backlog`], changing nothing,
    /// when every output slot holds an output not yet taken.
    pub fn submit(&mut self) -> Result<()> {
        self.check_free()?;
        self.input.upload(&self.lanes)?;
        self.beamform_uploaded()
    }

    /// As [`submit`](Self::submit), the chunk's x copied straight from `source` from value
    /// `offset` (registered host memory, e.g. a receive buffer: no host copy).
    /// `InvalidConfig` (nothing changed) when `input_len()` values from `offset` run past it,
    /// `WrongDevice` when it was registered with another GPU.
    pub fn submit_registered(
        &mut self,
        source: &RegisteredHost<'_, Complex<i8>>,
        offset: usize,
    ) -> Result<()> {
        self.check_free()?;
        self.input.upload_registered(&self.lanes, source, offset)?;
        self.beamform_uploaded()
    }

    fn check_free(&self) -> Result<()> {
        self.beams.check_free(1)?;
        self.saturated.check_free(1)
    }

    /// Beamforms the chunk just uploaded into the next output slots and enqueues their
    /// downloads.
    fn beamform_uploaded(&mut self) -> Result<()> {
        let slot = (self.input.uploaded() - 1) % self.input.depth() as u64;
        let x = self.input.device(slot as usize);
        let y = self.beams.next_device()?;
        let counts = self.saturated.next_device()?;
        let compute = self.lanes.compute();
        if let Some(byte) = self.poison {
            y.poison_on(compute, byte)?;
        }
        let b = self.beamformer;
        b.check_arguments(x, &self.weights, &self.delays, self.dither.as_deref(), y, counts)?;
        b.launch(x, &self.weights, &self.delays, self.dither.as_deref_mut(), y, counts, compute)?;
        self.beams.download(&self.lanes)?;
        self.saturated.download(&self.lanes)
    }

    /// The oldest output not yet taken, once downloaded; `None` when none is pending. Its
    /// slots are reused once the borrow ends.
    pub fn output(&mut self) -> Result<Option<DelayOutput<'_>>> {
        // Both rings advance, even on an error, so that they stay in step.
        let beams = self.beams.take();
        let saturated = self.saturated.take();
        match (beams?, saturated?) {
            (Some(beams), Some(saturated)) => Ok(Some(DelayOutput { beams, saturated })),
            (None, None) => Ok(None),
            _ => Err(Error::InvalidConfig(
                "the delay beamformer's output rings disagree (internal error)".into(),
            )),
        }
    }

    /// Outputs enqueued and not yet taken.
    pub fn pending(&self) -> usize {
        self.beams.pending()
    }

    /// Replaces the engine's steering from `weights` and `delays` (`[antenna][beam]`, checked
    /// by [`check_steering`] before anything changes): chunks submitted before use the old
    /// steering, chunks submitted after the new. The values go through pinned memory and are
    /// copied on the compute lane; the host waits only for the previous `set_steering` copy.
    pub fn set_steering(&mut self, weights: &[Complex<f32>], delays: &[f32]) -> Result<()> {
        check_steering(&self.beamformer.config, weights, delays)?;
        self.staged_weights.as_mut_slice()?.copy_from_slice(weights);
        self.staged_delays.as_mut_slice()?.copy_from_slice(delays);
        let compute = self.lanes.compute();
        self.staged_weights.copy_to(compute, &mut self.weights)?;
        self.staged_delays.copy_to(compute, &mut self.delays)
    }

    /// Replaces the engine's steering with a copy of `steering` (device to device, on the
    /// launcher's stream, which waits on the GPU for the kernels of the chunks submitted
    /// before; checked as in [`DelayBeamformer::streaming`]): chunks submitted before use the
    /// old steering, chunks submitted after the new.
    pub fn set_device_steering(&mut self, steering: &DeviceSteering) -> Result<()> {
        let b = self.beamformer;
        b.check_steered(steering)?;
        b.gpu.check_owner(&steering.weights, "delay beamformer steering")?;
        b.gpu.check_owner(&steering.delays, "delay beamformer steering")?;
        copy_on(&b.stream, &steering.weights, &mut self.weights)?;
        copy_on(&b.stream, &steering.delays, &mut self.delays)
    }

    /// Test and debugging aid: with `Some(byte)`, every later beam output slot is filled
    /// with `byte` (on the compute lane) before the kernel writes it, so that values the
    /// kernel missed show; `None` (the default) turns it off. (The counts are always zeroed
    /// first: the kernel adds to them.)
    pub fn poison_outputs(&mut self, byte: Option<u8>) {
        self.poison = byte;
    }

    /// Waits for everything enqueued so far and reports any asynchronous device error.
    pub fn synchronize(&self) -> Result<()> {
        self.lanes.synchronize()
    }
}

impl Engine for DelayStream<'_, '_> {
    fn submit(&mut self) -> Result<()> {
        DelayStream::submit(self)
    }
    fn skip_output(&mut self) -> Result<bool> {
        Ok(self.output()?.is_some())
    }
    fn pending(&self) -> usize {
        self.beams.pending()
    }
    fn free_outputs(&self) -> usize {
        self.beams.free().min(self.saturated.free())
    }
}

/// The engine can move to a worker thread.
const _: () = {
    fn send<T: Send>() {}
    #[allow(dead_code)]
    fn check() {
        send::<DelayStream<'static, 'static>>();
    }
};
