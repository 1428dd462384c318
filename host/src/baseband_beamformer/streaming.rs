//! The streaming baseband beamformer: E chunks from host memory to J in host memory at the
//! PCIe limit, on the rings of [`crate::streaming`].
//!
//! Time model: the kernel is stateless in time (each output sample depends on the input sample
//! of the same time only), so chunk `k` is a launch of the configuration's `T` samples, times
//! `k T .. (k + 1) T` of the stream, and its J equals [`BasebandBeamformer::beamform`] on that
//! chunk bit for bit; chunks need no overlap and carry no state.
//!
//! Layouts per chunk: E ci4 `[tau][f][p][d]` (`e_len()` [`Ci4`] values: time is the slowest axis, so the
//! chunks of a stream are consecutive pieces of one long E), J ci4 `[beta][f][p][tau]`
//! (`output_len()` values: time is the fastest axis, so one long J would interleave them).
//!
//! Per chunk: one H2D copy of E (upload lane), the kernel launch(es) (compute lane), one D2H
//! copy of J (download lane). At full CHORD (D = 512, B = 96, F = 16, T = 32768) that is 536 MB
//! in and 100 MB out per 55.9 ms of data: the upload bounds the engine (Clark, La Plante &
//! Greenhill, "Accelerating radio astronomy cross-correlation with graphics processing
//! units", sec. 5: transfers overlapped with compute).
//!
//! Weights: the engine copies the launcher's weights and shifts when it is made and keeps its
//! own; [`BasebandStream::set_weights`] replaces them between chunks, on the compute lane, so
//! the chunks submitted before use the old ones and the chunks after the new ones.
use super::{BasebandBeamformer, BeamformerConfig};
use crate::error::Result;
use crate::runtime::copy_on;
use crate::runtime::DeviceBuffer;
use crate::streaming::{Engine, InputRing, Lanes, OutputRing, PinnedBuffer, RegisteredHost};
use crate::Shift;
use num_complex::Complex;
use radio_kernels_gpu::packing::Ci4;

impl<'g> BasebandBeamformer<'g> {
    /// The streaming engine: E chunks (`e_len()` [`Ci4`] values each) in, J (`output_len()`) out,
    /// with `depth` input slots and as many output slots ([`crate::streaming`]; 3 overlap the
    /// upload, the kernel and the download). It starts with a copy of this launcher's weights
    /// and shifts, made on the launcher's stream.
    pub fn streaming(&self, depth: usize) -> Result<BasebandStream<'_, 'g>> {
        let gpu = self.gpu;
        let c = &self.config;
        let lanes = Lanes::new(gpu)?;
        let input = InputRing::new(gpu, depth, c.e_len())?;
        let output = OutputRing::new(gpu, depth, c.output_len(), "baseband beamformer's outputs")?;
        let mut weights = gpu.alloc(c.weights_len(), 0)?;
        let mut shifts = gpu.alloc(c.shifts_len(), 0)?;
        // On the launcher's stream, where the launcher's own uses of its weights are ordered;
        // the compute lane's kernels wait for these copies (the buffers' write events).
        copy_on(&self.stream, &self.weights, &mut weights)?;
        copy_on(&self.stream, &self.shifts, &mut shifts)?;
        Ok(BasebandStream {
            beamformer: self,
            staged_weights: PinnedBuffer::new(gpu, c.weights_len())?,
            staged_shifts: PinnedBuffer::new(gpu, c.shifts_len())?,
            lanes,
            input,
            output,
            weights,
            shifts,
            poison: None,
        })
    }
}

/// The streaming baseband beamformer (module [`streaming`](self)): the upload of chunk k + 1,
/// the beamforming of chunk k and the download of chunk k - 1 run at once.
///
/// Per submit: one H2D copy, one kernel launch per beam range (one, except for the few shapes
/// no single kernel takes), one D2H copy, and the event bookkeeping that orders them; the host
/// waits only when it borrows an input slot still being uploaded ([`input`](Self::input)) or an
/// output still being downloaded ([`output`](Self::output)).
///
/// `Send`, used from one thread at a time.
pub struct BasebandStream<'b, 'g> {
    beamformer: &'b BasebandBeamformer<'g>,
    lanes: Lanes,
    input: InputRing<Ci4>,
    output: OutputRing<Ci4>,
    /// The engine's weights and shifts, and the pinned memory new ones are copied from.
    weights: DeviceBuffer<Complex<i8>>,
    shifts: DeviceBuffer<i32>,
    staged_weights: PinnedBuffer<Complex<i8>>,
    staged_shifts: PinnedBuffer<i32>,
    /// Byte each output slot is filled with before its kernels write it (tests).
    poison: Option<u8>,
}

impl BasebandStream<'_, '_> {
    /// The configuration of each chunk.
    pub fn config(&self) -> &BeamformerConfig {
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

    /// The pinned memory of the next chunk's E (`e_len()` values, `[tau][f][p][d]`): zeros
    /// at first, then the chunk last submitted from this slot. Waits only for that slot's
    /// previous upload.
    pub fn input(&mut self) -> Result<&mut [Ci4]> {
        self.input.host_mut()
    }

    /// Enqueues the chunk in the current input slot: upload, beamforming, download of J.
    /// [`Error::Backlog`](crate::Error::Backlog), changing nothing, when every output slot holds a J not yet taken.
    pub fn submit(&mut self) -> Result<()> {
        self.output.check_free(1)?;
        self.input.upload(&self.lanes)?;
        self.beamform_uploaded()
    }

    /// As [`submit`](Self::submit), the chunk's E copied straight from `source` at byte
    /// `offset` (registered host memory, e.g. a receive buffer: no host copy; raw bytes
    /// become samples with [`Ci4::from_bytes_mut`]). `InvalidConfig` (nothing changed) when
    /// `e_len()` values from `offset` run past it,
    /// `WrongDevice` when it was registered with another GPU.
    pub fn submit_registered(&mut self, source: &RegisteredHost<'_, Ci4>, offset: usize) -> Result<()> {
        self.output.check_free(1)?;
        self.input.upload_registered(&self.lanes, source, offset)?;
        self.beamform_uploaded()
    }

    /// Beamforms the chunk just uploaded into the next output slot and enqueues its download.
    fn beamform_uploaded(&mut self) -> Result<()> {
        let slot = (self.input.uploaded() - 1) % self.input.depth() as u64;
        let e = self.input.device(slot as usize);
        let j = self.output.next_device()?;
        let compute = self.lanes.compute();
        if let Some(byte) = self.poison {
            j.poison_on(compute, byte)?;
        }
        self.beamformer.launch(e, &self.weights, &self.shifts, j, compute)?;
        self.output.download(&self.lanes)
    }

    /// The oldest J not yet taken (`output_len()` values, `[beta][f][p][tau]`), once
    /// downloaded; `None` when none is pending. Its slot is reused once the borrow ends.
    pub fn output(&mut self) -> Result<Option<&[Ci4]>> {
        self.output.take()
    }

    /// Outputs enqueued and not yet taken.
    pub fn pending(&self) -> usize {
        self.output.pending()
    }

    /// Replaces the engine's weights and shifts (the checks of [`BasebandBeamformer::new`],
    /// before anything changes): chunks submitted before use the old ones, chunks submitted
    /// after the new ones. The values go through pinned memory and are copied on the compute
    /// lane; the host waits only for the previous `set_weights` copy.
    pub fn set_weights(&mut self, weights: &[Complex<i8>], shifts: &[Shift]) -> Result<()> {
        self.beamformer.config.check_weights(weights, shifts)?;
        self.staged_weights.as_mut_slice()?.copy_from_slice(weights);
        for (staged, s) in self.staged_shifts.as_mut_slice()?.iter_mut().zip(shifts) {
            *staged = s.as_i32();
        }
        let compute = self.lanes.compute();
        self.staged_weights.copy_to(compute, &mut self.weights)?;
        self.staged_shifts.copy_to(compute, &mut self.shifts)
    }

    /// Test and debugging aid: with `Some(byte)`, every later output slot is filled with
    /// `byte` (on the compute lane) before its kernels write it, so that bytes the kernels
    /// missed show; `None` (the default) turns it off.
    pub fn poison_outputs(&mut self, byte: Option<u8>) {
        self.poison = byte;
    }

    /// Waits for everything enqueued so far and reports any asynchronous device error.
    pub fn synchronize(&self) -> Result<()> {
        self.lanes.synchronize()
    }
}

impl Engine for BasebandStream<'_, '_> {
    fn submit(&mut self) -> Result<()> {
        BasebandStream::submit(self)
    }
    fn skip_output(&mut self) -> Result<bool> {
        Ok(self.output.take()?.is_some())
    }
    fn pending(&self) -> usize {
        self.output.pending()
    }
    fn free_outputs(&self) -> usize {
        self.output.free()
    }
}

/// The engine can move to a worker thread.
const _: () = {
    fn send<T: Send>() {}
    #[allow(dead_code)]
    fn check() {
        send::<BasebandStream<'static, 'static>>();
    }
};
