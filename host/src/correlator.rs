//! X-engine correlator: configuration, validation, launcher, streaming integration and the
//! exact CPU reference. Device side and formulas: `radio_kernels_gpu::correlator`.
//!
//! Output layout: complex `[channel][b(i,j)][pi][pj]` with `b(i,j) = i(i+1)/2 + j`, i >= j,
//! each value `sum_t x_i,pi conj(x_j,pj)` as (re, im): `[i32; 2]` per launch, `[i64; 2]` when
//! accumulated.
//!
//! Sizes: the largest valid configuration (65535 stations, 65535 channels) has about 5.6e14
//! output values and 1.4e17 input bytes, so the kernels index input and output with 64-bit
//! offsets throughout; the size helpers here are exact (u128 arithmetic) for every valid
//! configuration and saturate, never wrap or panic, on invalid ones.
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::size;
use crate::streaming::{InputRing, Lanes, OutputRing, RegisteredHost};
use cudarc::driver::CudaFunction;
use radio_kernels_gpu::correlator as layout;
use radio_kernels_gpu::correlator::hopper;
use radio_kernels_gpu::correlator::Output;
pub use radio_kernels_gpu::correlator::{Format, Order, TIME_TILE};
use radio_kernels_gpu::packing::unpack_ci4;

/// What one launch correlates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CorrelatorConfig {
    /// Stations (antennas), 1 ..= 65535.
    pub stations: u32,
    /// Polarisations per station, 1 or 2.
    pub pols: u32,
    /// Frequency channels, 1 ..= 65535.
    pub channels: u32,
    /// Time samples per launch: a multiple of [`TIME_TILE`] (64), at most
    /// `Format::max_times_per_launch()` (65535 for int8, so 65472) so int32 sums are exact.
    pub times: u32,
    pub format: Format,
    pub order: Order,
}

impl CorrelatorConfig {
    /// Checks every parameter; the first violation is returned as `InvalidConfig`.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::InvalidConfig(message));
        if self.stations == 0 || self.stations > 65535 {
            return bad(format!("stations must be 1..=65535, got {}", self.stations));
        }
        if self.pols != 1 && self.pols != 2 {
            return bad(format!("pols must be 1 or 2, got {}", self.pols));
        }
        if self.channels == 0 || self.channels > 65535 {
            return bad(format!("channels must be 1..=65535, got {}", self.channels));
        }
        if self.times == 0 || !self.times.is_multiple_of(TIME_TILE) {
            return bad(format!(
                "times per launch must be a positive multiple of the kernel's time tile ({TIME_TILE}), got {}",
                self.times
            ));
        }
        let limit = self.format.max_times_per_launch();
        if self.times as u64 > limit {
            return bad(format!(
                "times per launch {} exceeds {limit}, the most for which {:?} int32 sums are exact \
                 (T * 2 * {}^2 < 2^31): split the integration into launches accumulated in int64",
                self.times,
                self.format,
                self.format.max_magnitude()
            ));
        }
        // Every field is in range here, so both sizes fit in u64; on hosts with a narrower
        // usize they may not. The kernels index with 64-bit offsets throughout.
        if self.checked_input_bytes().is_none() {
            return bad(format!(
                "the input would hold {} bytes, more than this host can address",
                self.times as u128
                    * self.channels as u128
                    * self.stations as u128
                    * self.pols as u128
                    * self.format.bytes() as u128
            ));
        }
        let accumulator_bytes = self.checked_output_len().and_then(|n| n.checked_mul(16));
        if accumulator_bytes.is_none() {
            return bad(format!(
                "the int64 output would hold {} complex values (16 bytes each), more than this host can address",
                self.channels as u128 * self.baselines() as u128 * (self.pols as u128).pow(2)
            ));
        }
        Ok(())
    }

    /// Baselines `N (N + 1) / 2` (autos included), exact in u64 for every `stations` (0 for
    /// none).
    pub fn baselines(&self) -> u64 {
        let n = self.stations as u64;
        // n (n + 1) < 2^64 for every u32 n.
        n * (n + 1) / 2
    }
    /// Input size in bytes: `times * channels * stations * pols` elements, exact whenever it
    /// fits in `usize` (every configuration `validate()` accepts); saturates at `usize::MAX`
    /// otherwise.
    pub fn input_bytes(&self) -> usize {
        self.checked_input_bytes().unwrap_or(usize::MAX)
    }
    /// Output size in complex values: `channels * baselines * pols^2`, exact whenever it fits
    /// in `usize` (every configuration `validate()` accepts); saturates at `usize::MAX`
    /// otherwise.
    pub fn output_len(&self) -> usize {
        self.checked_output_len().unwrap_or(usize::MAX)
    }
    fn checked_input_bytes(&self) -> Option<usize> {
        size::checked_product(&[
            self.times as u128,
            self.channels as u128,
            self.stations as u128,
            self.pols as u128,
            self.format.bytes() as u128,
        ])
    }
    fn checked_output_len(&self) -> Option<usize> {
        size::checked_product(&[
            self.channels as u128,
            self.baselines() as u128,
            self.pols as u128,
            self.pols as u128,
        ])
    }
    /// Position of `V[channel][b(i, j)][pi][pj]` (i >= j) in the output, computed exactly in
    /// u128: meaningful for in-range arguments of a valid configuration; saturates at
    /// `usize::MAX` where the position does not fit in `usize`.
    pub fn output_index(&self, channel: u32, i: u32, j: u32, pi: u32, pj: u32) -> usize {
        let (p, baseline) = (self.pols as u128, layout::baseline_index(i, j) as u128);
        (channel as u128 * self.baselines() as u128 + baseline)
            .checked_mul(p)
            .and_then(|x| (x + pi as u128).checked_mul(p))
            .and_then(|x| x.checked_add(pj as u128))
            .and_then(|x| usize::try_from(x).ok())
            .unwrap_or(usize::MAX)
    }
    /// Useful operations of one launch: 8 per complex multiply-accumulate over the lower
    /// triangle including autos, `8 N (N + 1) / 2 P^2 C T`.
    pub fn useful_ops(&self) -> f64 {
        8.0 * self.baselines() as f64
            * (self.pols as f64 * self.pols as f64)
            * self.channels as f64
            * self.times as f64
    }
    /// Byte offset of element (t, channel, station, pol) in the input, computed exactly in
    /// u128: meaningful for in-range arguments of a valid configuration; saturates at
    /// `usize::MAX` where the offset does not fit in `usize`.
    pub fn input_offset(&self, t: u32, channel: u32, station: u32, pol: u32) -> usize {
        let row = t as u128 * self.channels as u128 + channel as u128;
        let (stations, pols) = (self.stations as u128, self.pols as u128);
        let element = match self.order {
            Order::StationPol => {
                (row * stations + station as u128).checked_mul(pols).map(|x| x + pol as u128)
            }
            Order::PolStation => {
                (row * pols + pol as u128).checked_mul(stations).map(|x| x + station as u128)
            }
        };
        element
            .and_then(|x| x.checked_mul(self.format.bytes() as u128))
            .and_then(|x| usize::try_from(x).ok())
            .unwrap_or(usize::MAX)
    }
    /// Decodes input element (t, channel, station, pol) as (re, im). `input` must hold
    /// `input_bytes()` bytes of a valid configuration and each index must be in range;
    /// otherwise `ShapeMismatch` or `InvalidConfig` names what is wrong.
    pub fn sample(&self, input: &[u8], t: u32, channel: u32, station: u32, pol: u32) -> Result<(i64, i64)> {
        self.validate()?;
        self.check_input_len(input.len())?;
        for (what, value, limit) in [
            ("t", t, self.times),
            ("channel", channel, self.channels),
            ("station", station, self.stations),
            ("pol", pol, self.pols),
        ] {
            if value >= limit {
                return Err(Error::InvalidConfig(format!(
                    "sample index {what} = {value} is past the configuration's {limit}"
                )));
            }
        }
        Ok(self.decode(input, t, channel, station, pol))
    }
    /// [`CorrelatorConfig::sample`] for a validated configuration, an input of
    /// `input_bytes()` bytes and in-range indices.
    fn decode(&self, input: &[u8], t: u32, channel: u32, station: u32, pol: u32) -> (i64, i64) {
        let at = self.input_offset(t, channel, station, pol);
        match self.format {
            Format::Ci8 => (input[at] as i8 as i64, input[at + 1] as i8 as i64),
            Format::Ci4 => {
                let (re, im) = unpack_ci4(input[at]);
                (re as i64, im as i64)
            }
        }
    }
    fn check_input_len(&self, len: usize) -> Result<()> {
        if len != self.input_bytes() {
            return Err(Error::ShapeMismatch {
                what: "correlator input (bytes)",
                expected: self.input_bytes(),
                actual: len,
            });
        }
        Ok(())
    }
}

/// The exact CPU reference: `V[c][b(i,j)][pi][pj] = sum_t x_i,pi conj(x_j,pj)` in i64.
pub fn correlate_reference(config: &CorrelatorConfig, input: &[u8]) -> Result<Vec<[i64; 2]>> {
    config.validate()?;
    config.check_input_len(input.len())?;
    let (n, p) = (config.stations, config.pols);
    let mut out = vec![[0i64; 2]; config.output_len()];
    let mut x = vec![(0i64, 0i64); (n * p) as usize];
    for c in 0..config.channels {
        for t in 0..config.times {
            for i in 0..n {
                for pi in 0..p {
                    x[(i * p + pi) as usize] = config.decode(input, t, c, i, pi);
                }
            }
            // Baselines b(i, j) in increasing order: channel c's values are consecutive
            // blocks of p^2 from `output_index(c, 0, 0, 0, 0)`.
            let mut at = config.output_index(c, 0, 0, 0, 0);
            for i in 0..n {
                for j in 0..=i {
                    for pi in 0..p {
                        let (a1, b1) = x[(i * p + pi) as usize];
                        for pj in 0..p {
                            let (a2, b2) = x[(j * p + pj) as usize];
                            let v = &mut out[at];
                            at += 1;
                            v[0] += a1 * a2 + b1 * b2;
                            v[1] += b1 * a2 - a1 * b2;
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

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
    kernel: CudaFunction,
    /// Input rows start on 16-byte boundaries, so the kernel may use vector loads.
    aligned: bool,
    /// The sm_90a `wgmma` kernel's kind, if it is one.
    wgmma: Option<hopper::Kind>,
    /// Threads per block and dynamic shared memory of the chosen kernel.
    threads: u32,
    smem: u32,
    /// Time slices per launch (grid z) and stages per slice.
    slices: u32,
    slice_stages: u32,
    /// The stream `correlate` and `accumulate` launch on.
    stream: Stream,
}

impl<'g> Correlator<'g> {
    /// Validates `config` and looks up its kernel: on Hopper (`Gpu::wgmma_enabled()`), int8
    /// with 16-byte aligned rows (stations x pols, or stations for `[t][c][p][s]`, a multiple
    /// of 8) runs an sm_90a `wgmma` kernel (`hopper::Kind` by size: `Pair` for one 64-receiver
    /// tile, `ChannelSplit` for two, `Split` above); everything else runs the sm_80 kernels.
    pub fn new(gpu: &'g Gpu, config: CorrelatorConfig) -> Result<Correlator<'g>> {
        config.validate()?;
        let row_elements = match config.order {
            Order::StationPol => config.stations * config.pols,
            Order::PolStation => config.stations,
        };
        let aligned = (row_elements * config.format.bytes()).is_multiple_of(16);
        // On Hopper, aligned int8 rows take the wgmma kernel (sm_90a module); elsewhere, and
        // for int4 or unaligned rows, the sm_80 kernels.
        if gpu.wgmma_enabled() && config.format == Format::Ci8 && aligned {
            // One block per channel of two tiles (the input read once), 128-receiver
            // super-tiles above that.
            let kind = match layout::station_tiles(config.stations, config.pols) {
                1 => hopper::Kind::Pair,
                2 => hopper::Kind::ChannelSplit,
                _ => hopper::Kind::Split,
            };
            let name = match (config.order, kind) {
                (Order::StationPol, hopper::Kind::Pair) => "correlate_ci8_station_pol_wgmma",
                (Order::PolStation, hopper::Kind::Pair) => "correlate_ci8_pol_station_wgmma",
                (Order::StationPol, hopper::Kind::ChannelSplit) => {
                    "correlate_ci8_station_pol_wgmma_channel_split"
                }
                (Order::PolStation, hopper::Kind::ChannelSplit) => {
                    "correlate_ci8_pol_station_wgmma_channel_split"
                }
                (Order::StationPol, _) => "correlate_ci8_station_pol_wgmma_split",
                (Order::PolStation, _) => "correlate_ci8_pol_station_wgmma_split",
            };
            let kernel = gpu.hopper_function(name)?;
            return Correlator::with_kernel(gpu, config, kernel, aligned, Some(kind));
        }
        // Aligned int8 rows take the cp.async kernel (fewer registers, more warps per SM).
        let name = match (config.format, config.order, aligned) {
            (Format::Ci8, Order::StationPol, true) => "correlate_ci8_station_pol_async",
            (Format::Ci8, Order::PolStation, true) => "correlate_ci8_pol_station_async",
            (Format::Ci8, Order::StationPol, false) => "correlate_ci8_station_pol",
            (Format::Ci8, Order::PolStation, false) => "correlate_ci8_pol_station",
            (Format::Ci4, Order::StationPol, _) => "correlate_ci4_station_pol",
            (Format::Ci4, Order::PolStation, _) => "correlate_ci4_pol_station",
        };
        let kernel = gpu.function(name)?;
        Correlator::with_kernel(gpu, config, kernel, aligned, None)
    }

    /// Sizes the launch of `kernel` (its block and dynamic shared memory): time slices that
    /// fill the last wave.
    fn with_kernel(
        gpu: &'g Gpu,
        config: CorrelatorConfig,
        kernel: CudaFunction,
        aligned: bool,
        wgmma: Option<hopper::Kind>,
    ) -> Result<Correlator<'g>> {
        let (threads, smem) = if let Some(kind) = wgmma {
            (kind.threads(), kind.smem_bytes())
        } else {
            let shape = if config.format == Format::Ci8 && aligned {
                layout::ASYNC_SHAPE
            } else {
                layout::STAGED_SHAPE
            };
            (shape.threads(), layout::SMEM_BYTES)
        };
        if smem > 48 * 1024 {
            allow_dynamic_shared(&kernel, smem, "raising the correlator's shared-memory limit")?;
        }
        let per_sm = kernel
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem as usize, None)
            .during("querying the correlator's occupancy")?;
        let blocks = config.channels as u64 * Correlator::blocks_per_channel(&config, wgmma) as u64;
        let slots = per_sm.max(1) as u64 * gpu.sm_count() as u64;
        let (slices, slice_stages) = time_slices(blocks, slots, config.times / TIME_TILE)?;
        let stream = gpu.stream().clone();
        Ok(Correlator { gpu, config, kernel, aligned, wgmma, threads, smem, slices, slice_stages, stream })
    }

    /// Blocks per channel (the grid's x).
    fn blocks_per_channel(config: &CorrelatorConfig, wgmma: Option<hopper::Kind>) -> u32 {
        let tiles = layout::station_tiles(config.stations, config.pols);
        match wgmma {
            Some(kind) => kind.blocks(tiles),
            None => layout::triangle_blocks(tiles),
        }
    }

    /// The sm_90a kernel's block kind, if this correlator runs one.
    pub fn wgmma_kind(&self) -> Option<hopper::Kind> {
        self.wgmma
    }

    /// Whether this correlator runs an sm_90a `wgmma` kernel.
    pub fn uses_wgmma(&self) -> bool {
        self.wgmma.is_some()
    }

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

    fn launch<T: bytemuck::Pod>(
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
        let blocks = Correlator::blocks_per_channel(c, self.wgmma);
        let (aligned, mode) = (self.aligned as u32, mode as u32);
        let mut launch = stream.launch_builder(&self.kernel);
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
        let mut config = launch_1d(blocks, self.threads, self.smem);
        config.grid_dim.1 = c.channels;
        config.grid_dim.2 = self.slices;
        // SAFETY: arguments match `correlate_*` (kernels-gpu correlator.rs and, for the
        // `*_wgmma` kernels, correlator/hopper.rs, same signature); the input holds
        // `input_bytes()` bytes and the output `output_len()` complex values of the element
        // type `mode` selects (int32 for `correlate`, int64 for the accumulating calls), and
        // the configuration was validated.
        unsafe { launch.launch(config) }.during("launching the correlator")?;
        Ok(())
    }

    /// One launch: writes `output` (complex int32, every value) from `input`.
    pub fn correlate(&self, input: &DeviceBuffer<u8>, output: &mut DeviceBuffer<[i32; 2]>) -> Result<()> {
        self.launch(input, output, false, &self.stream)
    }

    /// One launch added to a complex int64 accumulator (long integrations).
    pub fn accumulate(
        &self,
        input: &DeviceBuffer<u8>,
        accumulator: &mut DeviceBuffer<[i64; 2]>,
    ) -> Result<()> {
        self.launch(input, accumulator, true, &self.stream)
    }

    /// Correlates the host chunks (each `input_bytes()` long, consecutive in time) into one
    /// int64 integration through an [`Integration`].
    pub fn integrate(&self, chunks: &[&[u8]]) -> Result<Vec<[i64; 2]>> {
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
        let gpu = self.gpu;
        Ok(Integration {
            correlator: self,
            lanes: Lanes::new(gpu)?,
            input: InputRing::new(gpu, depth, self.config.input_bytes())?,
            output: OutputRing::new(gpu, depth, self.config.output_len(), "correlator's integrations")?,
            chunks_per_integration,
            in_integration: 0,
        })
    }
}

/// The streaming X-engine (Clark, La Plante & Greenhill, sec. 5, Algorithm 1), on the ring of
/// [`crate::streaming`]: the upload of chunk p + 1 (upload lane) overlaps the correlation of
/// chunk p (compute lane), which is added to a complex int64 accumulator, the device slot of
/// the output ring; a full integration is downloaded once (download lane) while the next one
/// accumulates in the next slot.
pub struct Integration<'c, 'g> {
    correlator: &'c Correlator<'g>,
    lanes: Lanes,
    input: InputRing<u8>,
    output: OutputRing<[i64; 2]>,
    /// Chunks per integration (0: until `finish`) and chunks in the current one.
    chunks_per_integration: usize,
    in_integration: usize,
}

impl Integration<'_, '_> {
    /// The pinned buffer for the next chunk (`input_bytes()` long): zeros at first, then the
    /// chunk last submitted from it. Waits only for the upload that last read it.
    pub fn input(&mut self) -> Result<&mut [u8]> {
        self.input.host_mut()
    }

    /// As [`input`](Self::input) (the name of earlier releases).
    pub fn buffer(&mut self) -> Result<&mut [u8]> {
        self.input()
    }

    /// Uploads the chunk in the current input slot and adds its correlation to the
    /// integration; enqueues the integration's download when it is complete.
    /// [`Error::Backlog`] (nothing changed) when it would start an integration while every
    /// output slot holds one not yet taken.
    pub fn submit(&mut self) -> Result<()> {
        self.begin_chunk()?;
        self.input.upload(&self.lanes)?;
        self.correlate_uploaded()
    }

    /// As [`submit`](Self::submit), the chunk copied straight from `source` at element
    /// `offset` (registered host memory, e.g. a receive buffer; no host copy).
    pub fn submit_registered(&mut self, source: &RegisteredHost<'_, u8>, offset: usize) -> Result<()> {
        self.input.check_registered(source, offset)?;
        self.begin_chunk()?;
        self.input.upload_registered(&self.lanes, source, offset)?;
        self.correlate_uploaded()
    }

    /// Zeroes the next output slot when the chunk starts an integration.
    fn begin_chunk(&mut self) -> Result<()> {
        if self.in_integration == 0 {
            let accumulator = self.output.next_device()?;
            accumulator.poison_on(self.lanes.compute(), 0)?;
        }
        Ok(())
    }

    /// Correlates the chunk just uploaded into the accumulator (compute lane).
    fn correlate_uploaded(&mut self) -> Result<()> {
        let slot = (self.input.uploaded() - 1) % self.input.depth() as u64;
        let input = self.input.device(slot as usize);
        let accumulator = self.output.next_device()?;
        self.correlator.launch(input, accumulator, true, self.lanes.compute())?;
        self.in_integration += 1;
        if self.in_integration == self.chunks_per_integration {
            self.end_integration()?;
        }
        Ok(())
    }

    /// Ends the current integration now (enqueues its download), if it holds any chunk.
    pub fn end_integration(&mut self) -> Result<()> {
        if self.in_integration > 0 {
            self.output.download(&self.lanes)?;
            self.in_integration = 0;
        }
        Ok(())
    }

    /// The oldest complete integration not yet taken (complex int64, `output_len()` values),
    /// once downloaded; `None` when none is pending.
    pub fn output(&mut self) -> Result<Option<&[[i64; 2]]>> {
        self.output.take()
    }

    /// Integrations complete (enqueued) and not yet taken.
    pub fn pending(&self) -> usize {
        self.output.pending()
    }

    /// Chunks in the current integration.
    pub fn submitted(&self) -> usize {
        self.in_integration
    }

    /// Ends the current integration and returns it, and any earlier one not yet taken is
    /// dropped first; an integration of no chunks is all zeros.
    pub fn finish(&mut self) -> Result<Vec<[i64; 2]>> {
        if self.in_integration == 0 {
            while self.output.free() == 0 {
                self.output.take()?;
            }
            self.begin_chunk()?;
            self.output.download(&self.lanes)?;
        } else {
            self.end_integration()?;
        }
        while self.output.pending() > 1 {
            self.output.take()?;
        }
        Ok(self.output.take()?.map(<[_]>::to_vec).unwrap_or_default())
    }
}

impl crate::streaming::Engine for Integration<'_, '_> {
    fn submit(&mut self) -> Result<()> {
        Integration::submit(self)
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
    fn max_outputs_per_submit(&self) -> usize {
        1
    }
    fn flush(&mut self) -> Result<()> {
        self.end_integration()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn config(stations: u32, pols: u32, format: Format, order: Order) -> CorrelatorConfig {
        CorrelatorConfig { stations, pols, channels: 2, times: 64, format, order }
    }

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

    #[test]
    fn validation_rejects_bad_configurations() {
        let good = config(5, 2, Format::Ci8, Order::StationPol);
        assert!(good.validate().is_ok());
        for bad in [
            CorrelatorConfig { stations: 0, ..good },
            CorrelatorConfig { pols: 3, ..good },
            CorrelatorConfig { channels: 0, ..good },
            CorrelatorConfig { times: 0, ..good },
            CorrelatorConfig { times: 100, ..good },
            CorrelatorConfig { times: 65536, ..good },
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))), "{bad:?}");
        }
        assert!(CorrelatorConfig { times: 65472, ..good }.validate().is_ok());
        assert!(CorrelatorConfig { times: 65536, format: Format::Ci4, ..good }.validate().is_ok());
        let input = vec![0u8; good.input_bytes() - 1];
        assert!(matches!(correlate_reference(&good, &input), Err(Error::ShapeMismatch { .. })));
    }

    /// The same samples in the two memory orders and the two formats give the same V.
    #[test]
    fn reference_is_independent_of_order_and_format() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let base = config(5, 2, Format::Ci4, Order::StationPol);
        let samples: Vec<(i8, i8)> = (0..base.times * base.channels * 10)
            .map(|_| (rng.random_range(-8..8), rng.random_range(-8..8)))
            .collect();
        let mut results = Vec::new();
        for format in [Format::Ci4, Format::Ci8] {
            for order in [Order::StationPol, Order::PolStation] {
                let c = CorrelatorConfig { format, order, ..base };
                let mut input = vec![0u8; c.input_bytes()];
                let mut n = 0;
                for t in 0..c.times {
                    for ch in 0..c.channels {
                        for s in 0..c.stations {
                            for p in 0..c.pols {
                                let (re, im) = samples[n];
                                n += 1;
                                let at = c.input_offset(t, ch, s, p);
                                match format {
                                    Format::Ci4 => input[at] = radio_kernels_gpu::packing::pack_ci4(re, im),
                                    Format::Ci8 => {
                                        input[at] = re as u8;
                                        input[at + 1] = im as u8;
                                    }
                                }
                            }
                        }
                    }
                }
                results.push(correlate_reference(&c, &input).unwrap());
            }
        }
        assert!(results.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn reference_autos_are_real_and_cross_pols_hermitian() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let c = config(4, 2, Format::Ci8, Order::PolStation);
        let input: Vec<u8> = (0..c.input_bytes()).map(|_| rng.random()).collect();
        let v = correlate_reference(&c, &input).unwrap();
        for ch in 0..c.channels {
            for i in 0..c.stations {
                for p in 0..2 {
                    let auto = v[c.output_index(ch, i, i, p, p)];
                    assert!(auto[0] >= 0 && auto[1] == 0);
                }
                let (x01, x10) = (v[c.output_index(ch, i, i, 0, 1)], v[c.output_index(ch, i, i, 1, 0)]);
                assert_eq!(x01, [x10[0], -x10[1]]);
            }
        }
    }
}
