//! The streaming F-engine: [`ChannelizerStream`] runs a [`Channelizer`] from pinned host
//! memory with the copies in, the kernels and the copies out overlapped on three lanes
//! ([`crate::streaming`]), as the MeerKAT F-engine does (Merry, "Efficient channelization on
//! a graphics processing unit", secs. 3.1-3.2 and 5.3: chunks linked by queues, the engine
//! bound by PCIe).
//!
//! # Time model
//!
//! ```text
//! t_chunk = max(in_bytes / B_h2d, t_kernels, out_bytes / B_d2h)
//! ```
//!
//! per input chunk: `in_bytes` is both polarisations' packed samples plus the schedules of the
//! output chunks it completes (24 bytes per spectrum and polarisation, 1% at n = 1024, 10 bits)
//! where they changed (constant delays leave each output slot's schedule in place),
//! `t_kernels` the two device-to-device copies (the kept input moved to make room, about a
//! chunk, and the chunk copied into it) and the launches, and `out_bytes` the output chunks'
//! bytes and saturation counts. At 10-bit input and int8 output a sample of one polarisation
//! is 1.25 bytes in and 1 byte out (n complex values per 2n samples), so the engine is bound
//! by the copies in: `B_h2d / 2.5` samples per second per polarisation.
//!
//! # Slots
//!
//! ```text
//! input slot k mod depth   pinned samples [pol][chunk_bytes], flags [pol][chunk_packets] (host)
//!   upload lane              H2D samples -> device staging [pol][chunk_bytes]
//!   compute lane             move the kept input; D2D staging -> kept input [pol]
//! output slot o (depth x M, at least depth + M; M = max_outputs_per_push())
//!   host                     schedule -> pinned offsets, fine delays, rotations; lost flags
//!   upload lane              H2D schedule -> device schedule of slot o
//!   compute lane             kernels (kept input, schedule o) -> device data, saturation of o
//!   download lane            D2H -> pinned data, saturation of o
//! ```
//!
//! Reasons: the staging slot lets the upload of the next chunk run while the kernels read the
//! kept input (an upload straight into it would wait for them); the copy into the kept input
//! costs two chunks of device bandwidth, microseconds. Schedules go up on the upload lane, not
//! the compute lane, where their copy could queue behind a chunk's upload on the copy engine
//! and stall the kernels. Each output slot has its own schedule buffers, reused only once its
//! output was taken, so neither the host nor the upload lane waits for kernels. A submit
//! completes 0 to M output chunks (many when output chunks are shorter than input chunks, one
//! more when the delay changes), so `depth x M` output slots keep the outputs of the `depth - 1`
//! submits before in flight while a submit completes its own. Lost flags depend only on the
//! schedule and the packet flags, so the host computes them at submit into per-slot buffers.
//!
//! Host work per submit: the schedules (a sine and cosine per spectrum, reused while delay and
//! phase stay the same), a lost-flag scan linear in spectra and packets, and a few driver calls
//! per output chunk; no allocation, host copy of samples, or wait except in
//! [`input`](ChannelizerStream::input) (the slot's previous upload) and
//! [`output`](ChannelizerStream::output) (that output's download).
use super::{Channelizer, DelayModel, Launch, OutputChunk, PushPlan};
use crate::error::{DriverContext, Error, Result};
use crate::runtime::DeviceBuffer;
use crate::streaming::{Engine, InputRing, Lanes, OutputRing, PinnedBuffer, RegisteredHost};
use num_complex::Complex;

/// Bytes of one spectrum's schedule per polarisation: offset (u32), fine delay (f32) and
/// rotation (4 f32).
const SCHEDULE_BYTES: usize = 4 + 4 + 16;

/// Most output slots an engine allocates (`depth x max_outputs_per_push()`): past it, use
/// longer output chunks (more heaps per chunk) or shorter input chunks.
pub const MAX_OUTPUT_SLOTS: usize = 4096;

/// The next input slot of a [`ChannelizerStream`]: both polarisations' packed samples
/// (`chunk_bytes()` each, pinned) and packet arrival flags (`chunk_packets()` each). They hold
/// what was last submitted from the slot (zeros and all packets arrived at first).
pub struct PfbInput<'a> {
    /// `samples[pol]`: `chunk_bytes()` bytes of real samples of `bits` bits each, packed MSB
    /// first (see [`pack_samples`](super::pack_samples)), for the chunk's `chunk_samples`
    /// samples of polarisation `pol`.
    pub samples: [&'a mut [u8]; 2],
    /// `present[pol][k]`: whether packet `k` of the chunk (`packet_samples` samples) arrived;
    /// a spectrum whose window touches a missing packet is flagged lost.
    pub present: [&'a mut [bool]; 2],
}

/// One output chunk of a [`ChannelizerStream`], in its pinned slot: the content of
/// [`Channelizer::push`]'s [`OutputChunk`].
#[derive(Clone, Copy, Debug)]
pub struct PfbOutput<'a> {
    /// Stream index of the chunk's first spectrum, as [`OutputChunk::first_spectrum`].
    pub first_spectrum: i64,
    /// `[heap][channel][spectrum][pol]` in the configured format.
    pub data: &'a [u8],
    /// Saturated values per `[heap][pol]`.
    pub saturated: &'a [u32],
    /// Per spectrum of the chunk: true when either polarisation's window touched a missing
    /// packet or a sample before the stream.
    pub lost_spectra: &'a [bool],
    /// Per heap of the chunk: true when any of its spectra is lost.
    pub lost_heaps: &'a [bool],
}

impl PfbOutput<'_> {
    /// A copy as an [`OutputChunk`] (allocates).
    pub fn to_chunk(&self) -> OutputChunk {
        OutputChunk {
            first_spectrum: self.first_spectrum,
            data: self.data.to_vec(),
            saturated: self.saturated.to_vec(),
            lost_spectra: self.lost_spectra.to_vec(),
            lost_heaps: self.lost_heaps.to_vec(),
        }
    }
}

/// An output slot's schedule (pinned and device) and host-side results.
struct Slot {
    offsets: PinnedBuffer<u32>,
    fine: PinnedBuffer<f32>,
    rotation: PinnedBuffer<[f32; 4]>,
    device_offsets: DeviceBuffer<u32>,
    device_fine: DeviceBuffer<f32>,
    device_rotation: DeviceBuffer<[f32; 4]>,
    /// The bytes of offsets, fine delays and rotations the device buffers hold: a schedule
    /// equal to them (constant delays) is not uploaded again.
    held: Vec<u8>,
    first_spectrum: i64,
    lost_spectra: Vec<bool>,
    lost_heaps: Vec<bool>,
}

/// The streaming F-engine of one antenna (see the module documentation): digitiser chunks in
/// from pinned slots or registered memory, output chunks with flags and saturation counts out
/// in pinned slots, the same bytes as [`Channelizer::push`] on the same chunks. It owns the
/// channelizer ([`into_inner`](Self::into_inner) gives it back, its stream where it was).
pub struct ChannelizerStream<'g> {
    channelizer: Channelizer<'g>,
    lanes: Lanes,
    samples: [InputRing<u8>; 2],
    /// Packet flags of each input slot (plain host memory; copied into the kept flags at submit).
    present: Vec<[Vec<bool>; 2]>,
    data: OutputRing<u8>,
    saturated: OutputRing<u32>,
    slots: Vec<Slot>,
    max_outputs: usize,
    /// Output chunks enqueued and taken since the start (the rings' counts).
    written: u64,
    taken: u64,
}

/// Output slots for `depth` input slots and at most `max_outputs` outputs per submit:
/// `depth x max_outputs`, at least `depth + max_outputs`, at most [`MAX_OUTPUT_SLOTS`].
fn output_slots(depth: usize, max_outputs: usize) -> Result<usize> {
    if depth == 0 {
        return Err(Error::InvalidConfig("a channelizer stream needs at least one input slot".into()));
    }
    depth
        .checked_mul(max_outputs)
        .zip(depth.checked_add(max_outputs))
        .map(|(product, sum)| product.max(sum))
        .filter(|&slots| slots <= MAX_OUTPUT_SLOTS)
        .ok_or_else(|| {
            Error::InvalidConfig(format!(
                "{depth} input slots with up to {max_outputs} output chunks per input chunk need more than \
                 {MAX_OUTPUT_SLOTS} output slots: use longer output chunks (heaps_per_chunk) or shorter input \
                 chunks"
            ))
        })
}

impl<'g> Channelizer<'g> {
    /// The streaming engine over this channelizer with `depth` input slots
    /// ([`ChannelizerStream::new`]).
    pub fn streaming(self, depth: usize) -> Result<ChannelizerStream<'g>> {
        ChannelizerStream::new(self, depth)
    }
}

impl<'g> ChannelizerStream<'g> {
    /// The engine over `channelizer` with `depth` input slots (3 or more overlap the copies
    /// and the kernels; [`crate::streaming::DEFAULT_DEPTH`]) and `depth x M` output slots (at
    /// least `depth + M`, `M` = [`max_outputs_per_submit`](Self::max_outputs_per_submit)).
    /// Waits for the channelizer's own stream, then starts a new stream at sample 0 (delay
    /// models, gains and [`Channelizer::poison_before_runs`] are kept). `InvalidConfig` for
    /// `depth` 0 or more than [`MAX_OUTPUT_SLOTS`] output slots.
    pub fn new(mut channelizer: Channelizer<'g>, depth: usize) -> Result<ChannelizerStream<'g>> {
        let c = channelizer.config.clone();
        let max_outputs = c.max_outputs_per_push();
        let slot_count = output_slots(depth, max_outputs)?;
        let gpu = channelizer.gpu;
        channelizer.stream.synchronize().during("waiting for the channelizer's stream")?;
        let lanes = Lanes::new(gpu)?;
        channelizer.reset_on(lanes.compute())?;
        channelizer.reserve_schedules(max_outputs + 1);
        let spectra = c.spectra_per_chunk() as usize;
        let heaps = c.heaps_per_chunk as usize;
        let mut slots = Vec::with_capacity(slot_count);
        for _ in 0..slot_count {
            slots.push(Slot {
                offsets: PinnedBuffer::new(gpu, 2 * spectra)?,
                fine: PinnedBuffer::new(gpu, 2 * spectra)?,
                rotation: PinnedBuffer::new(gpu, 2 * spectra)?,
                device_offsets: gpu.alloc(2 * spectra, 0)?,
                device_fine: gpu.alloc(2 * spectra, 0)?,
                device_rotation: gpu.alloc(2 * spectra, 0)?,
                held: vec![0; 2 * spectra * SCHEDULE_BYTES],
                first_spectrum: 0,
                lost_spectra: Vec::with_capacity(spectra),
                lost_heaps: Vec::with_capacity(heaps),
            });
        }
        let flags = vec![true; c.chunk_packets()];
        Ok(ChannelizerStream {
            lanes,
            samples: [
                InputRing::new(gpu, depth, c.chunk_bytes())?,
                InputRing::new(gpu, depth, c.chunk_bytes())?,
            ],
            present: vec![[flags.clone(), flags]; depth],
            data: OutputRing::new(gpu, slot_count, c.output_bytes(), "channelizer's output chunks")?,
            saturated: OutputRing::new(gpu, slot_count, 2 * heaps, "channelizer's saturation counts")?,
            slots,
            max_outputs,
            written: 0,
            taken: 0,
            channelizer,
        })
    }

    /// The channelizer (configuration, path, delay models, failure).
    pub fn channelizer(&self) -> &Channelizer<'g> {
        &self.channelizer
    }

    /// Waits for the lanes and gives the channelizer back, its stream where this engine left
    /// it (a later [`Channelizer::push`] continues it; outputs not taken are dropped). A device
    /// error while waiting is recorded as its [`Channelizer::failure`].
    pub fn into_inner(self) -> Channelizer<'g> {
        let waited = self.lanes.synchronize();
        let mut channelizer = self.channelizer;
        let own = channelizer.stream.clone();
        let restored = match &mut channelizer.kernels.three {
            Some(three) => three.fft.set_stream(&own),
            None => Ok(()),
        };
        let _ = channelizer.fail(waited.and(restored));
        channelizer
    }

    /// Sets the delay model of polarisation `pol` from the next output chunk computed
    /// ([`Channelizer::set_delay_model`]).
    pub fn set_delay_model(&mut self, pol: usize, model: DelayModel) -> Result<()> {
        self.channelizer.set_delay_model(pol, model)
    }

    /// The delay models of polarisations 0 and 1 that the next output chunk computed will
    /// use.
    pub fn delay_models(&self) -> &[DelayModel; 2] {
        self.channelizer.delay_models()
    }

    /// Sets the bandpass gains from the next output chunk computed ([`Channelizer::set_gains`];
    /// the copy goes on the compute lane, after the chunks submitted before).
    pub fn set_gains(&mut self, gains: &[Complex<f32>]) -> Result<()> {
        self.channelizer.set_gains_on(gains, self.lanes.compute())
    }

    /// Input slots.
    pub fn depth(&self) -> usize {
        self.samples[0].depth()
    }

    /// Output slots: `depth x M`, at least `depth + M` (`M` =
    /// [`max_outputs_per_submit`](Self::max_outputs_per_submit)).
    pub fn output_slots(&self) -> usize {
        self.slots.len()
    }

    /// The most output chunks one submit can complete,
    /// [`ChannelizerConfig::max_outputs_per_push`](super::ChannelizerConfig::max_outputs_per_push).
    pub fn max_outputs_per_submit(&self) -> usize {
        self.max_outputs
    }

    /// Output chunks enqueued and not yet taken.
    pub fn pending(&self) -> usize {
        self.data.pending()
    }

    /// Output slots free now: a submit that completes more output chunks than this is refused
    /// with [`Error::Backlog`].
    pub fn free_outputs(&self) -> usize {
        self.data.free()
    }

    fn input_slot(&self) -> usize {
        (self.samples[0].uploaded() % self.depth() as u64) as usize
    }

    /// The next input slot: both polarisations' pinned samples and packet flags. Waits only
    /// for the slot's previous upload.
    pub fn input(&mut self) -> Result<PfbInput<'_>> {
        let slot = self.input_slot();
        let [s0, s1] = &mut self.samples;
        let samples = [s0.host_mut()?, s1.host_mut()?];
        let [p0, p1] = &mut self.present[slot];
        Ok(PfbInput { samples, present: [p0.as_mut_slice(), p1.as_mut_slice()] })
    }

    /// Submits the chunk in the next input slot: uploads it, moves it into the kept input and
    /// enqueues the kernels and downloads of every output chunk it completes.
    ///
    /// Checked whole first, as [`Channelizer::push`]: room in the kept input, the schedule of
    /// every output chunk it completes and of the next (delays within `max_delay`, finite),
    /// and a free output slot for each chunk it completes ([`Error::Backlog`] otherwise: take
    /// outputs with [`output`](Self::output) and submit again). If any check fails nothing
    /// changes, the slot included. Only a device error part-way breaks the stream
    /// ([`Error::StreamBroken`] until [`reset`](Self::reset)).
    pub fn submit(&mut self) -> Result<()> {
        let plan = self.check_submit()?;
        let slot = self.input_slot();
        // Taken out for the call and put back (no allocation).
        let flags = std::mem::take(&mut self.present[slot]);
        let result = self.upload(None).and_then(|()| self.enqueue(&plan, [&flags[0], &flags[1]]));
        self.present[slot] = flags;
        self.channelizer.fail(result)
    }

    /// As [`submit`](Self::submit), the chunk of polarisation `pol` copied straight from
    /// `sources[pol].0` at byte `sources[pol].1` (`chunk_bytes()` bytes of registered host
    /// memory, e.g. a receive buffer; no host copy), with packet flags `present`
    /// (`chunk_packets()` each). Both sources are checked (range, GPU) before either is read.
    pub fn submit_registered(
        &mut self,
        sources: [(&RegisteredHost<'_, u8>, usize); 2],
        present: [&[bool]; 2],
    ) -> Result<()> {
        self.channelizer.check_usable()?;
        self.channelizer.check_flags(present)?;
        for (ring, (source, offset)) in self.samples.iter().zip(sources) {
            ring.check_registered(source, offset)?;
        }
        let plan = self.check_submit()?;
        let result = self.upload(Some(sources)).and_then(|()| self.enqueue(&plan, present));
        self.channelizer.fail(result)
    }

    /// The checks of a submit, changing nothing: a usable stream, the plan, free output slots.
    fn check_submit(&mut self) -> Result<PushPlan> {
        self.channelizer.check_usable()?;
        let plan = self.channelizer.plan()?;
        self.data.check_free(plan.complete())?;
        Ok(plan)
    }

    /// Enqueues the uploads of both polarisations' chunk into the next staging slot.
    fn upload(&mut self, sources: Option<[(&RegisteredHost<'_, u8>, usize); 2]>) -> Result<()> {
        for (pol, ring) in self.samples.iter_mut().enumerate() {
            match sources {
                None => ring.upload(&self.lanes)?,
                Some(sources) => ring.upload_registered(&self.lanes, sources[pol].0, sources[pol].1)?,
            };
        }
        Ok(())
    }

    /// Everything after the upload of a checked submit: the kept input's move and the chunk's
    /// copy into it, then per output chunk its schedule, lost flags, kernels and download.
    fn enqueue(&mut self, plan: &PushPlan, flags: [&[bool]; 2]) -> Result<()> {
        let compute = self.lanes.compute();
        let ch = &mut self.channelizer;
        ch.move_kept_input(plan.base, compute)?;
        let (at, bytes) = (ch.append_at(), ch.config.chunk_bytes());
        for (ring, kept) in self.samples.iter().zip(&mut ch.inputs) {
            // The slot just uploaded (each ring's own count: they advance together).
            let staging = ((ring.uploaded() - 1) % ring.depth() as u64) as usize;
            let src = ring.device(staging).raw().slice(0..bytes);
            let mut dst = kept.arg_mut().slice_mut(4 * at..4 * at + bytes);
            compute.memcpy_dtod(&src, &mut dst).during("copying a chunk into the kept input")?;
        }
        ch.append_flags(flags);
        let spectra = ch.config.spectra_per_chunk() as i64;
        for i in 0..plan.complete() {
            let index = (self.written % self.slots.len() as u64) as usize;
            let slot = &mut self.slots[index];
            let schedule = &ch.schedules[i];
            ch.write_offsets(schedule, slot.offsets.as_mut_slice()?)?;
            let (fine, rotation) = (slot.fine.as_mut_slice()?, slot.rotation.as_mut_slice()?);
            let half = fine.len() / 2;
            for p in 0..2 {
                fine[p * half..(p + 1) * half].copy_from_slice(&schedule.fine[p]);
                rotation[p * half..(p + 1) * half].copy_from_slice(&schedule.rotation[p]);
            }
            // Uploaded only when it differs from what the slot's device buffers hold.
            let fresh: [&[u8]; 3] = [
                bytemuck::cast_slice(slot.offsets.as_slice()?),
                bytemuck::cast_slice(slot.fine.as_slice()?),
                bytemuck::cast_slice(slot.rotation.as_slice()?),
            ];
            let mut at = 0;
            let mut same = true;
            for part in fresh {
                same &= slot.held[at..at + part.len()] == *part;
                at += part.len();
            }
            if !same {
                let mut at = 0;
                for part in fresh {
                    slot.held[at..at + part.len()].copy_from_slice(part);
                    at += part.len();
                }
                let upload = self.lanes.upload();
                slot.offsets.copy_to(upload, &mut slot.device_offsets)?;
                slot.fine.copy_to(upload, &mut slot.device_fine)?;
                slot.rotation.copy_to(upload, &mut slot.device_rotation)?;
            }
            ch.lost_flags(schedule, &mut slot.lost_spectra, &mut slot.lost_heaps)?;
            slot.first_spectrum = ch.next_spectrum;
            let launch = Launch {
                inputs: &ch.inputs,
                offsets: &slot.device_offsets,
                fine: &slot.device_fine,
                rotation: &slot.device_rotation,
                output: self.data.next_device()?,
                saturated: self.saturated.next_device()?,
            };
            ch.kernels.run(&ch.config, launch, ch.poison, compute)?;
            self.data.download(&self.lanes)?;
            self.saturated.download(&self.lanes)?;
            self.written += 1;
            ch.next_spectrum += spectra;
        }
        ch.finish_plan(plan);
        Ok(())
    }

    /// The oldest output chunk not yet taken, once downloaded (waits for its download only);
    /// `None` when none is pending. Its slot is free again once the borrow ends.
    pub fn output(&mut self) -> Result<Option<PfbOutput<'_>>> {
        if self.data.pending() == 0 {
            return Ok(None);
        }
        let slot = &self.slots[(self.taken % self.slots.len() as u64) as usize];
        self.taken += 1;
        // Both rings advance together, whatever either returns.
        let (data, saturated) = (self.data.take(), self.saturated.take());
        match (data?, saturated?) {
            (Some(data), Some(saturated)) => Ok(Some(PfbOutput {
                first_spectrum: slot.first_spectrum,
                data,
                saturated,
                lost_spectra: &slot.lost_spectra,
                lost_heaps: &slot.lost_heaps,
            })),
            _ => Err(Error::InvalidConfig("the channelizer's output rings disagree (internal error)".into())),
        }
    }

    /// Why the stream stopped, if a device error struck part-way through a submit
    /// ([`Channelizer::failure`]).
    pub fn failure(&self) -> Option<&str> {
        self.channelizer.failure()
    }

    /// Waits for the lanes, drops the outputs not yet taken and starts a new stream at sample 0
    /// (delay models and gains are kept); clears a failure.
    pub fn reset(&mut self) -> Result<()> {
        self.lanes.synchronize()?;
        while self.output()?.is_some() {}
        self.channelizer.reset_on(self.lanes.compute())
    }
}

impl Engine for ChannelizerStream<'_> {
    fn submit(&mut self) -> Result<()> {
        ChannelizerStream::submit(self)
    }
    fn skip_output(&mut self) -> Result<bool> {
        Ok(self.output()?.is_some())
    }
    fn pending(&self) -> usize {
        self.data.pending()
    }
    fn free_outputs(&self) -> usize {
        self.data.free()
    }
    fn max_outputs_per_submit(&self) -> usize {
        self.max_outputs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_slots_hold_depth_submits_of_the_most_outputs() {
        assert_eq!(output_slots(3, 2).unwrap(), 6);
        assert_eq!(output_slots(3, 1).unwrap(), 4, "at least depth + M");
        assert_eq!(output_slots(1, 5).unwrap(), 6, "at least depth + M");
        assert_eq!(output_slots(4, 17).unwrap(), 68);
        assert!(matches!(output_slots(0, 2), Err(Error::InvalidConfig(_))));
        assert!(matches!(output_slots(3, MAX_OUTPUT_SLOTS), Err(Error::InvalidConfig(_))));
        assert!(matches!(output_slots(usize::MAX, 2), Err(Error::InvalidConfig(_))));
        assert!(matches!(output_slots(2, usize::MAX), Err(Error::InvalidConfig(_))));
    }

    #[test]
    fn engines_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<ChannelizerStream<'static>>();
        send::<Channelizer<'static>>();
    }
}
