//! The streaming FRB beamformer: E chunks in, quantised beams out, the three FRB kernels of
//! Smith, "CHORD FRB beamformer" (sec. 4, the intensity on the half-integer grid; sec. 5,
//! its resampling to the beams; footnote 10, the quantisation) chained on the device, on the
//! ring of [`crate::streaming`].
//!
//! # Time model
//!
//! Chunk k is one launch of the first kernel: T fast samples of every channel, E ci4
//! `[tau][f][pol][d]` (`FrbConfig::e_len()` bytes). T is a multiple of T_ds, so the chunk
//! holds `T / T_ds` whole slow samples and chunks carry no state: the first kernel keeps no
//! partial sums between launches, the resampling is per slow sample and the quantiser's clip
//! counts are per launch. Output k is chunk k's slow samples; the stream's slow sample
//! `k T / T_ds + tbar` is row `tbar` of output k. On the compute lane:
//!
//! ```text
//! E[k]  --first kernel-->  I  f16 [f][tbar][p][q]     (engine's, never leaves the device)
//!       --resampling--->  J  f16 [f][tbar][beta]     (engine's, never leaves the device)
//!       --quantiser---->  Q[k] u8 [f][beta][row_bytes], clip counts u32 [f][beta]
//! ```
//!
//! and Q and the counts are downloaded once per chunk into the pinned slots of two output
//! rings. Steady state per chunk: `max(E / B_h2d, t_first + t_resample + t_quantise,
//! (Q + counts) / B_d2h)`; Q is `B / (2 D T_ds)` of E's bytes at 8 bits (1/8 for the
//! pathfinder's 640 beams at T_ds = 40), so the upload bounds the transfers.
//!
//! The resampling runs at the chunk's cadence, which Smith (sec. 5.4) finds natural when W
//! need not be re-read from memory: the fused resampler (W formed from U on the fly, the
//! faster path on Hopper) or the factorized one; the W path ([`Resampler`]) works too.
//!
//! The quantiser's scale and offset (f32 `[f][beta]`) belong to the engine: set at
//! construction and by [`FrbStream::set_levels`], which applies to the chunks submitted
//! after it (copied on the compute lane, in order). They are data to the quantiser, as in
//! [`Quantizer::quantize`]: non-finite levels give clipped codes, not errors.
use crate::error::{Error, Result};
use crate::frb_beamformer::factorized::{FactorizedConfig, FactorizedResampler};
use crate::frb_beamformer::quantize::{QuantizeConfig, Quantizer};
use crate::frb_beamformer::resample::{FusedResampler, ResampleConfig, Resampler, TensorMaps};
use crate::frb_beamformer::{FrbBeamformer, FrbConfig};
use crate::runtime::{DeviceBuffer, Gpu};
use crate::streaming::{Engine, InputRing, Lanes, OutputRing, PinnedBuffer, RegisteredHost};
use half::f16;
use radio_kernels_gpu::packing::Ci4;

/// The name of the engine in errors.
const ENGINE: &str = "FRB beamformer stream";

/// The resampling stage of an [`FrbStream`]: one of the three resamplers, borrowed, its beams
/// already set. `From` converts a reference to any of them.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum FrbResampling<'r, 'g> {
    /// W in device memory ([`Resampler`], the faster path without `wgmma`).
    Weights(&'r Resampler<'g>),
    /// W formed from U on the fly ([`FusedResampler`], the faster path on Hopper).
    Fused(&'r FusedResampler<'g>),
    /// A beam grid ([`FactorizedResampler`]).
    Factorized(&'r FactorizedResampler<'g>),
}

impl<'r, 'g> From<&'r Resampler<'g>> for FrbResampling<'r, 'g> {
    fn from(resampler: &'r Resampler<'g>) -> Self {
        FrbResampling::Weights(resampler)
    }
}

impl<'r, 'g> From<&'r FusedResampler<'g>> for FrbResampling<'r, 'g> {
    fn from(resampler: &'r FusedResampler<'g>) -> Self {
        FrbResampling::Fused(resampler)
    }
}

impl<'r, 'g> From<&'r FactorizedResampler<'g>> for FrbResampling<'r, 'g> {
    fn from(resampler: &'r FactorizedResampler<'g>) -> Self {
        FrbResampling::Factorized(resampler)
    }
}

impl<'g> FrbResampling<'_, 'g> {
    fn gpu(&self) -> &'g Gpu {
        match self {
            FrbResampling::Weights(r) => r.gpu(),
            FrbResampling::Fused(r) => r.gpu(),
            FrbResampling::Factorized(r) => r.gpu(),
        }
    }
    /// The stage's shape.
    pub fn shape(&self) -> ResamplingShape {
        match self {
            FrbResampling::Weights(r) => r.config().into(),
            FrbResampling::Fused(r) => r.config().into(),
            FrbResampling::Factorized(r) => r.config().into(),
        }
    }
    /// Whether its beam positions (or grid) were set.
    fn ready(&self) -> bool {
        match self {
            FrbResampling::Weights(r) => r.beams_set(),
            FrbResampling::Fused(r) => r.beams_set(),
            FrbResampling::Factorized(r) => r.grid_set(),
        }
    }
}

/// The shape of a resampling stage: channels, slow samples, grid (M, N) and beams (`G G'`
/// for a beam grid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResamplingShape {
    /// Frequency channels F.
    pub channels: u32,
    /// Slow (time-downsampled) samples T per channel of one resampling launch.
    pub times: u32,
    /// Grid half-size M (I has `2M` rows p).
    pub m: u32,
    /// Grid half-size N (I has `2N` columns q).
    pub n: u32,
    /// Beams B per channel (`G G'` for a factorized beam grid): J is f16 `[f][tbar][beta]`.
    pub beams: u32,
}

impl From<&ResampleConfig> for ResamplingShape {
    fn from(c: &ResampleConfig) -> Self {
        ResamplingShape { channels: c.channels, times: c.times, m: c.m, n: c.n, beams: c.beams }
    }
}

impl From<&FactorizedConfig> for ResamplingShape {
    fn from(c: &FactorizedConfig) -> Self {
        ResamplingShape { channels: c.channels, times: c.times, m: c.m, n: c.n, beams: c.beams() }
    }
}

/// Checks that the three stages chain: the first kernel's I (`F` channels, `T / T_ds` slow
/// samples, the `2M x 2N` grid) is the resampling's input and its J (`B` beams) the
/// quantiser's. Each mismatch is `ShapeMismatch` naming the field; an invalid `first` or
/// `quantize` configuration is its own `InvalidConfig`.
pub fn check_chain(first: &FrbConfig, resampling: ResamplingShape, quantize: &QuantizeConfig) -> Result<()> {
    first.validate()?;
    quantize.validate()?;
    let (freqs, slow) = (first.freqs as usize, first.out_times() as usize);
    for (what, expected, actual) in [
        ("resampling channels (the first kernel's F)", freqs, resampling.channels),
        ("resampling slow samples (the first kernel's T / T_ds)", slow, resampling.times),
        ("resampling grid M (the first kernel's M)", first.m as usize, resampling.m),
        ("resampling grid N (the first kernel's N)", first.n as usize, resampling.n),
        ("quantiser channels (the first kernel's F)", freqs, quantize.channels),
        ("quantiser slow samples (the first kernel's T / T_ds)", slow, quantize.times),
        ("quantiser beams (the resampling's beams)", resampling.beams as usize, quantize.beams),
    ] {
        if expected != actual as usize {
            return Err(Error::ShapeMismatch { what, expected, actual: actual as usize });
        }
    }
    Ok(())
}

/// One output of an [`FrbStream`]: a chunk's quantised beams and clip counts, borrowed from
/// the pinned slots until the next call on the engine.
#[derive(Debug)]
pub struct FrbOutput<'a> {
    /// The chunk's index (0: the first submitted since the engine was made or reset).
    pub chunk: u64,
    /// The quantised beams, `[f][beta][row_bytes]` (`QuantizeConfig::output_len()` bytes;
    /// rows padded with zeros to 16 bytes, 4-bit codes earlier sample in the low nibble).
    pub beams: &'a [u8],
    /// The values clipped in this chunk per `(f, beta)`, u32 `[f][beta]`.
    pub saturated: &'a [u32],
}

/// The streaming FRB beamformer (module docs): borrows its three launchers, owns the lanes,
/// the input ring of E chunks, I and J, the quantiser's levels and the output rings.
pub struct FrbStream<'r, 'g> {
    first: &'r FrbBeamformer<'g>,
    resampling: FrbResampling<'r, 'g>,
    quantizer: &'r Quantizer<'g>,
    lanes: Lanes,
    input: InputRing<Ci4>,
    intensity: DeviceBuffer<f16>,
    beams: DeviceBuffer<f16>,
    /// The fused resampler's tensor maps of (I, J), where its kernel takes them.
    maps: Option<TensorMaps>,
    scale: DeviceBuffer<f32>,
    offset: DeviceBuffer<f32>,
    /// Pinned staging of scale and offset for `set_levels`.
    levels: [PinnedBuffer<f32>; 2],
    codes: OutputRing<u8>,
    counts: OutputRing<u32>,
    /// Outputs taken since the start (or the last reset).
    taken: u64,
    /// Why the engine refuses further use (a device error part-way through a step).
    broken: Option<String>,
}

impl<'g> FrbBeamformer<'g> {
    /// The streaming engine from this first kernel through `resampling` and `quantizer`,
    /// with the quantiser's `scale` and `offset` and `depth` input and output slots: see
    /// [`FrbStream::new`].
    pub fn streaming<'r>(
        &'r self,
        resampling: impl Into<FrbResampling<'r, 'g>>,
        quantizer: &'r Quantizer<'g>,
        scale: &[f32],
        offset: &[f32],
        depth: usize,
    ) -> Result<FrbStream<'r, 'g>> {
        FrbStream::new(self, resampling, quantizer, scale, offset, depth)
    }
}

impl<'r, 'g> FrbStream<'r, 'g> {
    /// Checks that the stages chain ([`check_chain`]), that they run on one GPU
    /// (`WrongDevice`) and that the resampler's beams are set (`InvalidConfig`), and that
    /// `scale` and `offset` hold one value per `(f, beta)` (`ShapeMismatch`); then allocates
    /// `depth` input slots (E chunks) and `depth` output slots (at least one; three or more
    /// overlap upload, kernels and download), I and J, and encodes what the resampler needs
    /// for them, so that nothing on the hot path allocates or waits.
    pub fn new(
        first: &'r FrbBeamformer<'g>,
        resampling: impl Into<FrbResampling<'r, 'g>>,
        quantizer: &'r Quantizer<'g>,
        scale: &[f32],
        offset: &[f32],
        depth: usize,
    ) -> Result<FrbStream<'r, 'g>> {
        let resampling = resampling.into();
        let (c, q) = (*first.config(), *quantizer.config());
        check_chain(&c, resampling.shape(), &q)?;
        if !resampling.ready() {
            return Err(Error::InvalidConfig(
                "the resampler has no beams yet: call set_beams (set_grid) before streaming".into(),
            ));
        }
        check_levels(&q, scale, offset)?;
        let gpu = first.gpu();
        let lanes = Lanes::new(gpu)?;
        resampling.gpu().check_stream(lanes.compute(), "FRB resampler")?;
        quantizer.gpu().check_stream(lanes.compute(), "FRB quantiser")?;
        let input = InputRing::new(gpu, depth, c.e_len())?;
        let intensity = gpu.alloc::<f16>(c.output_len(), 0)?;
        let beams = gpu.alloc::<f16>(q.input_len(), 0)?;
        let maps = match resampling {
            FrbResampling::Fused(r) => r.fixed_maps(&intensity, &beams, lanes.compute())?,
            _ => None,
        };
        let mut engine = FrbStream {
            first,
            resampling,
            quantizer,
            input,
            intensity,
            beams,
            maps,
            scale: gpu.alloc::<f32>(q.params_len(), 0)?,
            offset: gpu.alloc::<f32>(q.params_len(), 0)?,
            levels: [PinnedBuffer::new(gpu, q.params_len())?, PinnedBuffer::new(gpu, q.params_len())?],
            codes: OutputRing::new(gpu, depth, q.output_len(), "FRB stream's quantised beams")?,
            counts: OutputRing::new(gpu, depth, q.params_len(), "FRB stream's clip counts")?,
            lanes,
            taken: 0,
            broken: None,
        };
        engine.set_levels(scale, offset)?;
        Ok(engine)
    }

    /// The first kernel's configuration (one chunk is one of its launches).
    pub fn config(&self) -> &FrbConfig {
        self.first.config()
    }

    /// The quantiser's configuration (the shape of every output).
    pub fn output_config(&self) -> &QuantizeConfig {
        self.quantizer.config()
    }

    /// Input slots (and output slots).
    pub fn depth(&self) -> usize {
        self.input.depth()
    }

    /// The quantiser's scale and offset (f32 `[f][beta]` each) for the chunks submitted from
    /// now on; earlier chunks keep theirs. Waits only for the copy of the previous levels.
    pub fn set_levels(&mut self, scale: &[f32], offset: &[f32]) -> Result<()> {
        check_levels(self.quantizer.config(), scale, offset)?;
        let compute = self.lanes.compute();
        for ((staging, device), values) in
            self.levels.iter_mut().zip([&mut self.scale, &mut self.offset]).zip([scale, offset])
        {
            staging.as_mut_slice()?.copy_from_slice(values);
            staging.copy_to(compute, device)?;
        }
        Ok(())
    }

    /// The pinned memory of the next chunk's slot (`config().e_len()` bytes of E, ci4
    /// `[tau][f][pol][d]`): zeros at first, then the chunk last submitted from it. Waits only
    /// for the upload that last read it.
    pub fn input(&mut self) -> Result<&mut [Ci4]> {
        self.input.host_mut()
    }

    /// Enqueues the chunk in the next input slot: upload, the three kernels, and the
    /// download of its quantised beams and clip counts. [`Error::Backlog`] (nothing changed)
    /// when every output slot holds an output not yet taken.
    pub fn submit(&mut self) -> Result<()> {
        self.check_submit()?;
        self.input.upload(&self.lanes)?;
        self.run_uploaded()
    }

    /// As [`submit`](Self::submit), the chunk copied straight from `source` at byte `offset`
    /// (registered host memory, e.g. a receive buffer; no host copy). A chunk past the end
    /// of `source`, or memory registered in another context, is an error (nothing changed).
    pub fn submit_registered(&mut self, source: &RegisteredHost<'_, Ci4>, offset: usize) -> Result<()> {
        self.check_submit()?;
        self.input.upload_registered(&self.lanes, source, offset)?;
        self.run_uploaded()
    }

    fn check_broken(&self) -> Result<()> {
        match &self.broken {
            Some(cause) => Err(Error::StreamBroken { engine: ENGINE, cause: cause.clone() }),
            None => Ok(()),
        }
    }

    fn check_submit(&self) -> Result<()> {
        self.check_broken()?;
        self.codes.check_free(1)?;
        self.counts.check_free(1)
    }

    /// The kernels and downloads of the chunk just uploaded; a failure part-way breaks the
    /// stream (the rings may no longer agree).
    fn run_uploaded(&mut self) -> Result<()> {
        let result = self.chain();
        if let Err(error) = &result {
            self.broken = Some(error.to_string());
        }
        result
    }

    fn chain(&mut self) -> Result<()> {
        let slot = ((self.input.uploaded() - 1) % self.input.depth() as u64) as usize;
        let compute = self.lanes.compute();
        self.first.launch(self.input.device(slot), &mut self.intensity, compute)?;
        match self.resampling {
            FrbResampling::Weights(r) => r.launch(&self.intensity, &mut self.beams, compute)?,
            FrbResampling::Fused(r) => {
                r.launch(&self.intensity, &mut self.beams, compute, self.maps.as_mut())?
            }
            FrbResampling::Factorized(r) => r.launch(&self.intensity, &mut self.beams, compute)?,
        }
        let codes = self.codes.next_device()?;
        let counts = self.counts.next_device()?;
        self.quantizer.launch(&self.beams, &self.scale, &self.offset, codes, counts, compute)?;
        self.codes.download(&self.lanes)?;
        self.counts.download(&self.lanes)
    }

    /// The oldest output not yet taken, once downloaded; `None` when none is pending. Its
    /// slots are free for reuse once the borrow ends.
    pub fn output(&mut self) -> Result<Option<FrbOutput<'_>>> {
        self.check_broken()?;
        if self.codes.pending() == 0 {
            return Ok(None);
        }
        let chunk = self.taken;
        let (beams, saturated) = match (self.codes.take(), self.counts.take()) {
            (Ok(Some(beams)), Ok(Some(saturated))) => (beams, saturated),
            (Err(error), _) | (_, Err(error)) => {
                self.broken = Some(error.to_string());
                return Err(error);
            }
            _ => {
                let cause = "the output rings disagree (internal error)".to_string();
                self.broken = Some(cause.clone());
                return Err(Error::StreamBroken { engine: ENGINE, cause });
            }
        };
        self.taken += 1;
        Ok(Some(FrbOutput { chunk, beams, saturated }))
    }

    /// Outputs enqueued and not yet taken.
    pub fn pending(&self) -> usize {
        self.codes.pending()
    }

    /// Waits for the engine's work, drops every output not yet taken and starts a new stream
    /// (chunk 0 next, into the first input slot): after [`Error::StreamBroken`], or to start
    /// over. The rings are kept, so memory handed out from them (e.g. the Python binding's
    /// views of the pinned slots) stays valid.
    pub fn reset(&mut self) -> Result<()> {
        self.lanes.synchronize()?;
        self.input.restart();
        self.codes.restart();
        self.counts.restart();
        self.taken = 0;
        self.broken = None;
        Ok(())
    }
}

/// Scale and offset: one f32 per `(f, beta)` each.
fn check_levels(q: &QuantizeConfig, scale: &[f32], offset: &[f32]) -> Result<()> {
    for (what, values) in [("quantiser scale", scale), ("quantiser offset", offset)] {
        if values.len() != q.params_len() {
            return Err(Error::ShapeMismatch { what, expected: q.params_len(), actual: values.len() });
        }
    }
    Ok(())
}

impl Engine for FrbStream<'_, '_> {
    fn submit(&mut self) -> Result<()> {
        FrbStream::submit(self)
    }
    fn skip_output(&mut self) -> Result<bool> {
        Ok(self.output()?.is_some())
    }
    fn pending(&self) -> usize {
        self.codes.pending()
    }
    fn free_outputs(&self) -> usize {
        self.codes.free()
    }
}
