//! `radio-kernels stream`: whole engines fed from host memory, at their headline
//! configurations or at shapes given by flags, against the transfer ceilings measured in the
//! same run.
//!
//! # What is measured
//!
//! - Ceilings ([`measure_ceilings`]): pinned host-to-device, device-to-host and both
//!   directions at once (256 MiB, each direction on its own stream, CUDA events, the median
//!   of several copies), and the device-memory copy bandwidth (bytes read plus written).
//! - The kernel-only time per chunk: the engine's one-shot launcher on device-resident random
//!   data (CUDA events, median), measured by each driver.
//! - The engine: a warm-up, then [`pump`] for at least `seconds` of telescope data and at
//!   least [`MIN_CHUNKS`] chunks, timed by the host clock from the first submit to the last
//!   output's download ([`run_streamed`]). Every input slot holds random data written once,
//!   as a receiver writing in place would leave it; outputs are released unread.
//!
//! # What is reported ([`Measured`])
//!
//! With `t` the wall time per chunk, `in` and `out` the bytes each chunk moves each way,
//! `B_h2d`, `B_d2h` and `B_both` the ceilings and `t_k` the kernel-only time:
//!
//! ```text
//! transfer bound         t_T = max(in / B_h2d, out / B_d2h)         (copies overlapped)
//! both-directions bound  t_B = max(t_T, min(in, out) / (B_both / 2) + |in - out| / B_dir)
//!                        (both copying: half the both-directions rate each; then the longer alone)
//! of transfer bound      t_T / t        of kernel rate   t_k / t
//! of the engine's bound  max(t_T, t_k) / t   (the rate is min(transfer, kernel) at 100%)
//! real-time factor       data seconds / wall seconds
//! host CPU               process CPU seconds (all threads) per second of data
//! ```
//!
//! The pipeline's steady state is `t = max(in / B_h2d, t_k, out / B_d2h)` (Clark, La Plante &
//! Greenhill, "Accelerating radio astronomy cross-correlation with graphics processing units",
//! sec. 5); for the F-engine, the model of Merry, "Efficient channelization on a graphics
//! processing unit" (secs. 3.1-3.2, 5.4, Fig. 11) is printed beside the measured rows
//! ([`merry`]).
//!
//! # Drivers
//!
//! Each engine family has a driver that builds its engine at the headline shape, measures the
//! kernel-only time, fills the input slots and hands the engine and its [`Setup`] to a
//! visitor ([`drive`]): the command prints the rows, the `streaming` bench also registers
//! criterion timings.
use crate::baseband_beamformer::SAMPLE_TIME_S as CHORD_SAMPLE_TIME_S;
use crate::correlator::{Correlator, CorrelatorConfig, Format, Order};
use crate::pfb::{ChannelizerConfig, OutputFormat};
use crate::streaming::{pump, Engine, InputRing, Lanes, OutputRing, DEFAULT_DEPTH};
use crate::summary::{fill_random, launch_copy, median_ms};
use crate::{DriverContext, Error, Gpu, Result, Timer};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;

mod engines;
pub mod merry;

/// Bytes of each ceiling copy: 256 MiB, far past the L2 and the copy engines' start-up.
pub const CEILING_BYTES: usize = 256 << 20;
/// Copies (or copy-kernel launches) per ceiling median.
pub const CEILING_REPS: usize = 7;
/// Kernel launches per kernel-only median.
pub const KERNEL_REPS: usize = 9;
/// Telescope seconds each engine runs for unless asked otherwise.
pub const DEFAULT_SECONDS: f64 = 2.0;
/// The most telescope seconds one engine may be asked to run.
pub const MAX_SECONDS: f64 = 3600.0;
/// The fewest chunks of a timed run, whatever `seconds` asks.
pub const MIN_CHUNKS: u64 = 32;
/// Chunks run, untimed, before the timed run (clocks up, pipeline primed once).
pub const WARMUP_CHUNKS: u64 = 8;
/// The most chunks of one timed run.
pub const MAX_CHUNKS: u64 = 1 << 24;
/// The most slots per ring the command accepts.
pub const MAX_DEPTH: usize = 16;

/// Correlator headline (the issue's measured case): 512 dual-polarisation stations, 16
/// channels, chunks of 8192 samples, complex int8, integrations of 64 chunks.
pub const CORRELATOR_STATIONS: u32 = 512;
pub const CORRELATOR_CHANNELS: u32 = 16;
pub const CORRELATOR_TIMES: u32 = 8192;
pub const CORRELATOR_CHUNKS_PER_INTEGRATION: usize = 64;

/// F-engine headline: 1024, 4096 and 32768 channels, 16 taps, 10-bit input, complex int8
/// output, chunks of 2^24 samples per polarisation.
pub const PFB_CHANNELS: [u32; 3] = [1024, 4096, 32768];
pub const PFB_BITS: u32 = 10;
pub const PFB_TAPS: u32 = 16;
pub const PFB_CHUNK_SAMPLES: u32 = 1 << 24;
pub const PFB_SPECTRA_PER_HEAP: u32 = 256;
/// Digitiser rate the F-engine's real-time factor is quoted at unless asked otherwise:
/// MeerKAT's L band, 1712 Msample/s per polarisation (Merry's F-engine).
pub const PFB_SAMPLE_RATE_HZ: f64 = 1.712e9;
/// The largest digitiser rate `--sample-rate` accepts, Hz.
pub const MAX_SAMPLE_RATE_HZ: f64 = 1e12;

/// The engine families the command can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    Correlator,
    Pfb,
    Baseband,
    Delay,
    Frb,
}

impl EngineKind {
    pub const ALL: [EngineKind; 5] =
        [EngineKind::Correlator, EngineKind::Pfb, EngineKind::Baseband, EngineKind::Delay, EngineKind::Frb];

    /// The name `--engine` takes.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Correlator => "correlator",
            EngineKind::Pfb => "pfb",
            EngineKind::Baseband => "baseband",
            EngineKind::Delay => "delay",
            EngineKind::Frb => "frb",
        }
    }

    /// The family named `name`, if any.
    pub fn from_name(name: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Which engines a run covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Every family this build drives.
    All,
    One(EngineKind),
}

impl Selection {
    /// The families to run, in table order.
    pub fn engines(self) -> Vec<EngineKind> {
        match self {
            Selection::All => EngineKind::ALL.into_iter().collect(),
            Selection::One(kind) => vec![kind],
        }
    }
    /// Whether `kind` runs.
    pub fn includes(self, kind: EngineKind) -> bool {
        self.engines().contains(&kind)
    }
}

/// How long each engine runs and whether a progress line is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunOptions {
    /// Telescope seconds of data, at least (more than 0, at most [`MAX_SECONDS`]).
    pub seconds: f64,
    /// Chunks, at least (1 ..= [`MAX_CHUNKS`]).
    pub min_chunks: u64,
    /// Untimed chunks before the timed run (at most [`MAX_CHUNKS`]).
    pub warmup_chunks: u64,
    /// Draw a progress line on stderr (only where stderr is a terminal).
    pub progress: bool,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            seconds: DEFAULT_SECONDS,
            min_chunks: MIN_CHUNKS,
            warmup_chunks: WARMUP_CHUNKS,
            progress: true,
        }
    }
}

impl RunOptions {
    pub fn validate(&self) -> Result<()> {
        if !self.seconds.is_finite() || self.seconds <= 0.0 || self.seconds > MAX_SECONDS {
            return Err(Error::InvalidConfig(format!(
                "seconds of data must be more than 0 and at most {MAX_SECONDS}, got {}",
                self.seconds
            )));
        }
        if self.min_chunks == 0 || self.min_chunks > MAX_CHUNKS {
            return Err(Error::InvalidConfig(format!(
                "the fewest chunks must be 1..={MAX_CHUNKS}, got {}",
                self.min_chunks
            )));
        }
        if self.warmup_chunks > MAX_CHUNKS {
            return Err(Error::InvalidConfig(format!(
                "warm-up chunks must be at most {MAX_CHUNKS}, got {}",
                self.warmup_chunks
            )));
        }
        Ok(())
    }
}

/// Everything `radio-kernels stream` takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub selection: Selection,
    pub run: RunOptions,
    /// Slots of every ring (1 ..= [`MAX_DEPTH`]; 3 overlap upload, compute and download).
    pub depth: usize,
    /// Correlator stations (default [`CORRELATOR_STATIONS`]).
    pub stations: Option<u32>,
    /// F-engine channels: only this one (default: each of [`PFB_CHANNELS`]).
    pub channels: Option<u32>,
    /// F-engine input bits (default [`PFB_BITS`]).
    pub bits: Option<u32>,
    /// F-engine digitiser rate in Hz per polarisation, for its real-time factor (default
    /// [`PFB_SAMPLE_RATE_HZ`]).
    pub sample_rate_hz: Option<f64>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            selection: Selection::All,
            run: RunOptions::default(),
            depth: DEFAULT_DEPTH,
            stations: None,
            channels: None,
            bits: None,
            sample_rate_hz: None,
        }
    }
}

impl Options {
    /// Checks every option, and every shape it gives, without a GPU.
    pub fn validate(&self) -> Result<()> {
        self.run.validate()?;
        if !(1..=MAX_DEPTH).contains(&self.depth) {
            return Err(Error::InvalidConfig(format!(
                "ring depth must be 1..={MAX_DEPTH}, got {}",
                self.depth
            )));
        }
        correlator_config(self.correlator_stations())?;
        for channels in self.pfb_channels() {
            pfb_config(channels, self.pfb_bits())?;
        }
        let rate = self.pfb_sample_rate_hz();
        if !rate.is_finite() || rate <= 0.0 || rate > MAX_SAMPLE_RATE_HZ {
            return Err(Error::InvalidConfig(format!(
                "the digitiser rate must be more than 0 and at most {MAX_SAMPLE_RATE_HZ} Hz, got {rate}"
            )));
        }
        Ok(())
    }
    pub fn correlator_stations(&self) -> u32 {
        self.stations.unwrap_or(CORRELATOR_STATIONS)
    }
    pub fn pfb_channels(&self) -> Vec<u32> {
        match self.channels {
            Some(n) => vec![n],
            None => PFB_CHANNELS.to_vec(),
        }
    }
    pub fn pfb_bits(&self) -> u32 {
        self.bits.unwrap_or(PFB_BITS)
    }
    pub fn pfb_sample_rate_hz(&self) -> f64 {
        self.sample_rate_hz.unwrap_or(PFB_SAMPLE_RATE_HZ)
    }
}

/// The correlator's streamed chunk for `stations` dual-polarisation stations: 16 channels,
/// 8192 samples, complex int8, `[t][c][s][p]`; validated.
pub fn correlator_config(stations: u32) -> Result<CorrelatorConfig> {
    let config = CorrelatorConfig {
        stations,
        pols: 2,
        channels: CORRELATOR_CHANNELS,
        times: CORRELATOR_TIMES,
        format: Format::Ci8,
        order: Order::StationPol,
    };
    config.validate()?;
    Ok(config)
}

/// The F-engine's chunk for `channels` and `bits`: 16 taps, heaps of 256 spectra, input and
/// output chunks of 2^24 samples per polarisation (`2^24 / (2 n 256)` heaps), int8 output;
/// validated. Needs `2 n 256` to divide 2^24 (n a power of two up to 32768).
pub fn pfb_config(channels: u32, bits: u32) -> Result<ChannelizerConfig> {
    let heap_samples = 2 * channels as u64 * PFB_SPECTRA_PER_HEAP as u64;
    if channels == 0 || !(PFB_CHUNK_SAMPLES as u64).is_multiple_of(heap_samples) {
        return Err(Error::InvalidConfig(format!(
            "F-engine chunks of 2^24 samples hold whole heaps of {PFB_SPECTRA_PER_HEAP} spectra only for \
             channels a power of two up to 32768, got {channels}"
        )));
    }
    let config = ChannelizerConfig {
        taps: PFB_TAPS,
        bits,
        spectra_per_heap: PFB_SPECTRA_PER_HEAP,
        heaps_per_chunk: (PFB_CHUNK_SAMPLES as u64 / heap_samples) as u32,
        chunk_samples: PFB_CHUNK_SAMPLES,
        output: OutputFormat::Ci8,
        ..ChannelizerConfig::new(channels)
    };
    config.validate()?;
    Ok(config)
}

// ---------------------------------------------------------------------------------------------
// Ceilings

/// The transfer and device-memory ceilings of this GPU, measured in this process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ceilings {
    /// Pinned host-to-device copy, GB/s.
    pub h2d: f64,
    /// Pinned device-to-host copy, GB/s.
    pub d2h: f64,
    /// Both directions at once (one copy each way, on two streams), GB/s in total.
    pub both: f64,
    /// Device-memory copy kernel, GB/s read plus written.
    pub device_copy: f64,
}

impl Ceilings {
    /// `max(in / B_h2d, out / B_d2h)`, seconds: the transfer bound of a chunk moving `input`
    /// bytes in and `output` bytes out with the two directions overlapped.
    pub fn transfer_s(&self, input: f64, output: f64) -> f64 {
        (input / (self.h2d * 1e9)).max(output / (self.d2h * 1e9))
    }
    /// The transfer bound with the two directions sharing the link: while both copy, each
    /// moves at half the measured both-directions rate; the longer one then finishes alone at
    /// its own rate. `max(transfer_s, min / (B_both / 2) + (max - min) / B_dir)`, seconds.
    pub fn both_s(&self, input: f64, output: f64) -> f64 {
        let (shared, alone, alone_rate) = if input >= output {
            (output, input - output, self.h2d)
        } else {
            (input, output - input, self.d2h)
        };
        let duplex = shared / (self.both * 0.5e9) + alone / (alone_rate * 1e9);
        self.transfer_s(input, output).max(duplex)
    }
    /// Checks that every ceiling is a finite positive rate.
    pub fn validate(&self) -> Result<()> {
        for (what, value) in
            [("H2D", self.h2d), ("D2H", self.d2h), ("both", self.both), ("copy", self.device_copy)]
        {
            if !value.is_finite() || value <= 0.0 {
                return Err(Error::InvalidConfig(format!(
                    "the {what} ceiling must be positive, got {value}"
                )));
            }
        }
        Ok(())
    }
    /// One line: the four ceilings.
    pub fn summary(&self) -> String {
        format!(
            "pinned H2D {:.1} GB/s, pinned D2H {:.1} GB/s, both directions at once {:.1} GB/s in total; \
             device copy {:.0} GB/s (read + write)",
            self.h2d, self.d2h, self.both, self.device_copy
        )
    }
}

/// Measures the [`Ceilings`]: each the median of `reps` (after one warm-up) of 256 MiB
/// copies between pinned host memory and the device on the engines' own streams ([`Lanes`]),
/// timed with CUDA events, and of the device copy kernel.
pub fn measure_ceilings(gpu: &Gpu, reps: usize) -> Result<Ceilings> {
    if reps == 0 {
        return Err(Error::InvalidConfig("a ceiling needs at least one copy (reps = 0)".into()));
    }
    let lanes = Lanes::new(gpu)?;
    let mut input = InputRing::<u8>::new(gpu, 1, CEILING_BYTES)?;
    fill_host_random(input.host_mut()?, 0x5eed);
    let mut output = OutputRing::<u8>::new(gpu, 1, CEILING_BYTES, "ceiling copies")?;
    let up = Timer::new(lanes.upload())?;
    let down = Timer::new(lanes.download())?;
    let h2d = median(reps, || {
        up.start()?;
        input.upload(&lanes)?;
        Ok(up.stop()? as f64)
    })?;
    let d2h = median(reps, || {
        down.start()?;
        output.download(&lanes)?;
        let ms = down.stop()? as f64;
        output.take()?;
        Ok(ms)
    })?;
    let both = median(reps, || {
        // From the start event on the upload lane (which the download lane waits for) to the
        // end of both copies (which the upload lane waits for).
        up.start()?;
        let started = lanes.upload().record_event(None).during("recording a ceiling event")?;
        lanes.download().wait(&started).during("ordering the ceiling copies")?;
        input.upload(&lanes)?;
        output.download(&lanes)?;
        let done = lanes.download().record_event(None).during("recording a ceiling event")?;
        lanes.upload().wait(&done).during("ordering the ceiling copies")?;
        let ms = up.stop()? as f64;
        output.take()?;
        Ok(ms)
    })?;
    lanes.synchronize()?;
    drop((input, output));

    let words = CEILING_BYTES / 4;
    let mut src = gpu.alloc::<u32>(words, 0)?;
    fill_random(gpu, src.borrow_mut(), 3)?;
    let mut dst = gpu.alloc::<u32>(words, 0)?;
    let copy = median_ms(gpu, reps, || launch_copy(gpu, &src, &mut dst))?;
    gpu.synchronize()?;

    let gbs = |bytes: f64, ms: f64| bytes / ms / 1e6;
    let ceilings = Ceilings {
        h2d: gbs(CEILING_BYTES as f64, h2d),
        d2h: gbs(CEILING_BYTES as f64, d2h),
        both: gbs(2.0 * CEILING_BYTES as f64, both),
        device_copy: gbs(2.0 * CEILING_BYTES as f64, copy),
    };
    ceilings.validate()?;
    Ok(ceilings)
}

/// The median of `reps` results of `measure`, after one warm-up call.
fn median(reps: usize, mut measure: impl FnMut() -> Result<f64>) -> Result<f64> {
    measure()?;
    let mut values = (0..reps).map(|_| measure()).collect::<Result<Vec<f64>>>()?;
    values.sort_by(f64::total_cmp);
    Ok(values[values.len() / 2])
}

// ---------------------------------------------------------------------------------------------
// The runner

/// What a driver tells the runner about its engine's chunks.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// The family (`--engine` name).
    pub engine: &'static str,
    /// The shape, in a few words.
    pub configuration: String,
    /// Bytes copied host to device per chunk.
    pub input_bytes: f64,
    /// Bytes copied device to host per chunk (averaged: e.g. one integration per 64 chunks).
    pub output_bytes: f64,
    /// Seconds of telescope data per chunk.
    pub data_seconds: f64,
    /// Work per chunk in units of `rate_unit` times `rate_scale` (e.g. samples per
    /// polarisation for Gsample/s/pol with a scale of 1e9).
    pub work: f64,
    pub rate_unit: &'static str,
    pub rate_scale: f64,
    /// Kernel-only seconds per chunk (one-shot launcher, device-resident data, median).
    pub kernel_s: f64,
    /// Timed runs are a whole number of this many chunks (e.g. chunks per integration).
    pub chunk_multiple: u64,
    /// The F-engine's (channels, input bits), to place its row beside the Merry model.
    pub pfb_shape: Option<(u32, u32)>,
}

impl Setup {
    /// Every figure finite and positive (output bytes may be 0), the multiple at least 1.
    pub fn validate(&self) -> Result<()> {
        for (what, value) in [
            ("input bytes", self.input_bytes),
            ("seconds of data", self.data_seconds),
            ("work", self.work),
            ("rate scale", self.rate_scale),
            ("kernel time", self.kernel_s),
        ] {
            if !value.is_finite() || value <= 0.0 {
                return Err(Error::InvalidConfig(format!(
                    "{} streaming setup: {what} per chunk must be positive, got {value}",
                    self.engine
                )));
            }
        }
        if !self.output_bytes.is_finite() || self.output_bytes < 0.0 {
            return Err(Error::InvalidConfig(format!(
                "{} streaming setup: output bytes per chunk must be 0 or more, got {}",
                self.engine, self.output_bytes
            )));
        }
        if self.chunk_multiple == 0 || self.chunk_multiple > MAX_CHUNKS {
            return Err(Error::InvalidConfig(format!(
                "{} streaming setup: chunk multiple must be 1..={MAX_CHUNKS}, got {}",
                self.engine, self.chunk_multiple
            )));
        }
        Ok(())
    }
}

/// The chunks of a timed run: enough for `seconds` of data at `data_seconds` per chunk, at
/// least `min_chunks`, rounded up to a multiple of `multiple`; at most [`MAX_CHUNKS`].
pub fn chunks_for(seconds: f64, min_chunks: u64, data_seconds: f64, multiple: u64) -> Result<u64> {
    let need = (seconds / data_seconds).ceil();
    let too_many = || {
        Error::InvalidConfig(format!(
            "{seconds} s of data at {data_seconds} s per chunk needs more than {MAX_CHUNKS} chunks"
        ))
    };
    if !need.is_finite() || need < 0.0 || need > MAX_CHUNKS as f64 {
        return Err(too_many());
    }
    let multiple = multiple.max(1);
    let chunks = (need as u64).max(min_chunks).max(1).div_ceil(multiple).checked_mul(multiple);
    chunks.filter(|&n| n <= MAX_CHUNKS).ok_or_else(too_many)
}

/// Fills the engine's `slots` input slots with `fill(engine, slot)` and submits each (taking
/// outputs unread when a submit needs their slots), then flushes and releases every output:
/// afterwards each slot holds its data and the engine is idle, as after [`pump`].
pub fn prime<E: Engine + ?Sized>(
    engine: &mut E,
    slots: usize,
    mut fill: impl FnMut(&mut E, usize) -> Result<()>,
) -> Result<()> {
    for slot in 0..slots {
        while engine.free_outputs() < engine.max_outputs_per_submit() {
            if !engine.skip_output()? {
                return Err(Error::InvalidConfig(
                    "an engine has fewer output slots than one submit can complete (internal error)".into(),
                ));
            }
        }
        fill(engine, slot)?;
        engine.submit()?;
    }
    engine.flush()?;
    while engine.skip_output()? {}
    Ok(())
}

/// One engine's sustained run.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub setup: Setup,
    /// Chunks timed, and the host-clock seconds they took end to end.
    pub chunks: u64,
    pub wall_s: f64,
    /// Process CPU seconds (user + system, all threads) over the timed run, where the
    /// platform reports them.
    pub cpu_s: Option<f64>,
}

impl Measured {
    /// Wall seconds per chunk.
    pub fn chunk_s(&self) -> f64 {
        self.wall_s / self.chunks as f64
    }
    /// Sustained rate in `setup.rate_unit`.
    pub fn rate(&self) -> f64 {
        self.setup.work / self.chunk_s() / self.setup.rate_scale
    }
    /// The kernel-only rate in `setup.rate_unit`.
    pub fn kernel_rate(&self) -> f64 {
        self.setup.work / self.setup.kernel_s / self.setup.rate_scale
    }
    /// Seconds of data per wall second.
    pub fn real_time_factor(&self) -> f64 {
        self.setup.data_seconds / self.chunk_s()
    }
    /// Sustained GB/s host to device and device to host.
    pub fn gbs(&self) -> (f64, f64) {
        (self.setup.input_bytes / self.chunk_s() / 1e9, self.setup.output_bytes / self.chunk_s() / 1e9)
    }
    /// Fraction of the transfer bound `max(in / B_h2d, out / B_d2h)` reached.
    pub fn of_transfer(&self, ceilings: &Ceilings) -> f64 {
        ceilings.transfer_s(self.setup.input_bytes, self.setup.output_bytes) / self.chunk_s()
    }
    /// Fraction of the both-directions bound reached.
    pub fn of_both(&self, ceilings: &Ceilings) -> f64 {
        ceilings.both_s(self.setup.input_bytes, self.setup.output_bytes) / self.chunk_s()
    }
    /// Fraction of the kernel-only rate reached.
    pub fn of_kernel(&self) -> f64 {
        self.setup.kernel_s / self.chunk_s()
    }
    /// Fraction of min(transfer-bound rate, kernel-only rate) reached, and which bound that
    /// is ("PCIe" or "kernel").
    pub fn of_bound(&self, ceilings: &Ceilings) -> (f64, &'static str) {
        let transfer = ceilings.transfer_s(self.setup.input_bytes, self.setup.output_bytes);
        if transfer >= self.setup.kernel_s {
            (transfer / self.chunk_s(), "PCIe")
        } else {
            (self.setup.kernel_s / self.chunk_s(), "kernel")
        }
    }
    /// Host CPU seconds per second of data.
    pub fn cpu_per_data_s(&self) -> Option<f64> {
        self.cpu_s.map(|cpu| cpu / (self.setup.data_seconds * self.chunks as f64))
    }
    /// Host CPU cores busy on average over the run.
    pub fn cores(&self) -> Option<f64> {
        self.cpu_s.map(|cpu| cpu / self.wall_s)
    }

    /// The row's details: times per chunk against the bounds, GB/s, chunks, cores.
    pub fn detail(&self, ceilings: &Ceilings) -> String {
        let s = &self.setup;
        let (gbs_in, gbs_out) = self.gbs();
        let cores = self.cores().map_or("n/a".to_string(), |c| format!("{c:.2}"));
        format!(
            "{:.3} ms per chunk of {:.3} ms of data; transfer bound {:.3} ms (both directions {:.3} ms), \
             kernel {:.3} ms; {:.1} GB/s in, {:.2} GB/s out ({:.1} MB + {:.2} MB per chunk); kernel-only \
             {:.2} {}; {} chunks in {:.2} s; host cores busy {cores}",
            1e3 * self.chunk_s(),
            1e3 * s.data_seconds,
            1e3 * ceilings.transfer_s(s.input_bytes, s.output_bytes),
            1e3 * ceilings.both_s(s.input_bytes, s.output_bytes),
            1e3 * s.kernel_s,
            gbs_in,
            gbs_out,
            s.input_bytes / 1e6,
            s.output_bytes / 1e6,
            self.kernel_rate(),
            s.rate_unit,
            self.chunks,
            self.wall_s
        )
    }
}

/// Runs `engine` as [`Setup`] describes: [`RunOptions::warmup_chunks`] untimed, then the
/// chunks of [`chunks_for`] through [`pump`], timed by the host clock (the pump returns once
/// the last output is downloaded), with the process's CPU time over the same span and a
/// progress line on stderr where `options.progress` and stderr is a terminal.
pub fn run_streamed(engine: &mut dyn Engine, setup: Setup, options: &RunOptions) -> Result<Measured> {
    options.validate()?;
    setup.validate()?;
    let chunks = chunks_for(options.seconds, options.min_chunks, setup.data_seconds, setup.chunk_multiple)?;
    pump(engine, options.warmup_chunks, |_| {})?;
    let bar = progress_bar(chunks, &format!("{} {}", setup.engine, setup.configuration), options.progress);
    let cpu_before = process_cpu_seconds();
    let start = Instant::now();
    let pumped = pump(engine, chunks, |k| bar.set_position(k));
    let wall_s = start.elapsed().as_secs_f64();
    let cpu_after = process_cpu_seconds();
    bar.finish_and_clear();
    pumped?;
    let cpu_s = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) if b >= a => Some(b - a),
        _ => None,
    };
    Ok(Measured { setup, chunks, wall_s, cpu_s })
}

/// A progress line of `chunks` steps on stderr, or a hidden one when not `show` or when
/// stderr is not a terminal.
fn progress_bar(chunks: u64, label: &str, show: bool) -> ProgressBar {
    if !show || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(chunks), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("  {prefix} [{bar:30}] {pos}/{len} chunks, {elapsed_precise}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(label.to_string());
    bar
}

/// CPU seconds (user + system) this process has used, all threads: on Linux the sum of
/// each thread's run time (`/proc/self/task/*/schedstat`, nanoseconds), else the process's
/// `utime + stime` (`/proc/self/stat`, clock ticks of 1/100 s); `None` where neither exists.
pub fn process_cpu_seconds() -> Option<f64> {
    schedstat_seconds().or_else(stat_seconds)
}

fn schedstat_seconds() -> Option<f64> {
    let mut total_ns: u128 = 0;
    let mut threads = 0;
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        // A thread that ended since the listing has no file: skip it.
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        total_ns += text.split_whitespace().next()?.parse::<u128>().ok()?;
        threads += 1;
    }
    (threads > 0).then_some(total_ns as f64 * 1e-9)
}

fn stat_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat_seconds(&text)
}

/// `utime + stime` of a `/proc/<pid>/stat` line, in seconds (USER_HZ = 100).
fn parse_stat_seconds(text: &str) -> Option<f64> {
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the line are 12 and 13 after the name (state is field 3).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// The NVIDIA kernel driver's version (`/proc/driver/nvidia/version`), where readable.
pub fn driver_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_driver_version(&text)
}

/// The version in the first line of `/proc/driver/nvidia/version` (e.g. `NVRM version:
/// NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ...`): its first word of digits
/// and dots holding a dot.
fn parse_driver_version(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    line.split_whitespace()
        .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_string)
}

/// Fills `bytes` from a xorshift stream seeded by `seed`: random chunk data written once.
pub fn fill_host_random(bytes: &mut [u8], seed: u64) {
    let mut state = seed | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut words = bytes.chunks_exact_mut(8);
    for word in &mut words {
        word.copy_from_slice(&next().to_le_bytes());
    }
    let tail = words.into_remainder();
    let last = next().to_le_bytes();
    tail.copy_from_slice(&last[..tail.len()]);
}

// ---------------------------------------------------------------------------------------------
// Drivers

/// What a driver hands each engine it builds to: the engine (primed, idle) and its setup.
pub type Visit<'v> = dyn FnMut(&mut dyn Engine, Setup) -> Result<()> + 'v;

/// Builds the engines of family `kind` at the shapes `options` gives and hands each to
/// `visit`; `InvalidConfig` for a family this build does not drive.
pub fn drive(gpu: &Gpu, kind: EngineKind, options: &Options, visit: &mut Visit<'_>) -> Result<()> {
    options.validate()?;
    match kind {
        EngineKind::Correlator => correlator(gpu, options.correlator_stations(), options.depth, visit),
        other => engines::drive(gpu, other, options, visit),
    }
}

/// The correlator's [`Integration`](crate::correlator::Integration) for `stations`
/// dual-polarisation stations ([`correlator_config`]), integrations of
/// [`CORRELATOR_CHUNKS_PER_INTEGRATION`] chunks, `depth` slots per ring. Kernel-only time:
/// [`Correlator::accumulate`] on a device buffer. Data time: CHORD's sampling time per sample.
/// Rate: useful TOPS (`8 N (N + 1) / 2 P^2 C T` per chunk).
pub fn correlator(gpu: &Gpu, stations: u32, depth: usize, visit: &mut Visit<'_>) -> Result<()> {
    let config = correlator_config(stations)?;
    let correlator = Correlator::new(gpu, config)?;
    let kernel_ms = {
        let mut input = gpu.alloc::<u8>(config.input_bytes(), 0)?;
        fill_random(gpu, input.borrow_mut(), 5)?;
        let mut accumulator = gpu.alloc::<[i64; 2]>(config.output_len(), 0)?;
        let ms = median_ms(gpu, KERNEL_REPS, || correlator.accumulate(&input, &mut accumulator))?;
        gpu.synchronize()?;
        ms
    };
    let per_integration = CORRELATOR_CHUNKS_PER_INTEGRATION;
    let mut engine = correlator.streaming(per_integration, depth)?;
    prime(&mut engine, depth, |engine, slot| {
        fill_host_random(engine.input()?, 0xc0 + slot as u64);
        Ok(())
    })?;
    let kind = correlator.wgmma_kind().map_or("mma.sync".to_string(), |k| format!("wgmma {k:?}"));
    let setup = Setup {
        engine: "correlator",
        configuration: format!(
            "N={} P=2 C={} T={} int8 ({kind}), {per_integration} chunks per integration",
            config.stations, config.channels, config.times
        ),
        input_bytes: config.input_bytes() as f64,
        output_bytes: (config.output_len() * std::mem::size_of::<[i64; 2]>()) as f64 / per_integration as f64,
        data_seconds: config.times as f64 * CHORD_SAMPLE_TIME_S,
        work: config.useful_ops(),
        rate_unit: "TOPS",
        rate_scale: 1e12,
        kernel_s: kernel_ms * 1e-3,
        chunk_multiple: per_integration as u64,
        pfb_shape: None,
    };
    visit(&mut engine, setup)
}

// ---------------------------------------------------------------------------------------------
// The command

/// A run's ceilings and rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub ceilings: Ceilings,
    pub rows: Vec<Measured>,
}

/// The GPU and driver, in one line.
pub fn device_line(gpu: &Gpu) -> String {
    let (major, minor) = gpu.compute_capability();
    let driver = driver_version().unwrap_or_else(|| "unknown".into());
    format!("{} (sm_{major}{minor}, {} SMs), NVIDIA driver {driver}", gpu.name(), gpu.sm_count())
}

/// `radio-kernels stream`: measures the ceilings, runs each selected engine, and prints the
/// ceilings, each row as it completes, the F-engine's Merry model when it ran, and the table.
pub fn run(gpu: &Gpu, options: &Options) -> Result<Report> {
    options.validate()?;
    println!("radio-kernels stream on {}", device_line(gpu));
    println!(
        "  at least {} s of data and {} chunks per engine after {} warm-up chunks, {} slots per ring",
        options.run.seconds, options.run.min_chunks, options.run.warmup_chunks, options.depth
    );
    let ceilings = measure_ceilings(gpu, CEILING_REPS)?;
    println!(
        "ceilings ({} MiB copies on separate streams, medians of {CEILING_REPS}): {}",
        CEILING_BYTES >> 20,
        ceilings.summary()
    );
    let mut rows: Vec<Measured> = Vec::new();
    for kind in options.selection.engines() {
        drive(gpu, kind, options, &mut |engine, setup| {
            println!("{} {}", setup.engine, setup.configuration);
            let measured = run_streamed(engine, setup, &options.run)?;
            println!("  {}", measured.detail(&ceilings));
            rows.push(measured);
            Ok(())
        })?;
        if kind == EngineKind::Pfb {
            let measured: Vec<(u32, u32, f64)> =
                rows.iter().filter_map(|m| m.setup.pfb_shape.map(|(n, bits)| (n, bits, m.rate()))).collect();
            let model = merry::table(gpu, &ceilings, &measured)?;
            print!("{}", merry::format(&model, &measured));
        }
    }
    print!("{}", table(gpu, &ceilings, &rows));
    Ok(Report { ceilings, rows })
}

/// The rows as a table: engine, configuration, sustained rate, real-time factor, % of the
/// transfer bound (and of the both-directions bound), % of the kernel-only rate, % of the
/// engine's bound, host CPU per second of data; headed by the GPU, driver and ceilings.
pub fn table(gpu: &Gpu, ceilings: &Ceilings, rows: &[Measured]) -> String {
    let mut out =
        format!("\nstreaming engines on {}\n  ceilings: {}\n", device_line(gpu), ceilings.summary());
    out += &format_rows(ceilings, rows);
    out
}

/// The table's header and rows (no GPU needed).
pub fn format_rows(ceilings: &Ceilings, rows: &[Measured]) -> String {
    let width = rows.iter().map(|m| m.setup.configuration.len()).max().unwrap_or(13).max(13);
    let mut out = format!(
        "  {:<10} {:<width$} {:>22} {:>9} {:>9} {:>9} {:>9} {:>14} {:>12}\n",
        "engine",
        "configuration",
        "sustained",
        "real time",
        "transfer",
        "both-dir",
        "kernel",
        "of bound",
        "CPU s/data s"
    );
    for m in rows {
        let (bound, which) = m.of_bound(ceilings);
        let cpu = m.cpu_per_data_s().map_or("n/a".to_string(), |c| format!("{c:.3}"));
        out += &format!(
            "  {:<10} {:<width$} {:>22} {:>8.2}x {:>8.1}% {:>8.1}% {:>8.1}% {:>14} {:>12}\n",
            m.setup.engine,
            m.setup.configuration,
            format!("{:.2} {}", m.rate(), m.setup.rate_unit),
            m.real_time_factor(),
            100.0 * m.of_transfer(ceilings),
            100.0 * m.of_both(ceilings),
            100.0 * m.of_kernel(),
            format!("{:.1}% {which}", 100.0 * bound),
            cpu
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceilings() -> Ceilings {
        // The issue's H200 figures.
        Ceilings { h2d: 55.4, d2h: 55.2, both: 100.9, device_copy: 4000.0 }
    }

    fn setup() -> Setup {
        Setup {
            engine: "test",
            configuration: "a chunk".into(),
            input_bytes: 128e6,
            output_bytes: 0.5e6,
            data_seconds: 14e-3,
            work: 1e9,
            rate_unit: "Gsample/s",
            rate_scale: 1e9,
            kernel_s: 2e-3,
            chunk_multiple: 1,
            pfb_shape: None,
        }
    }

    #[test]
    fn chunk_counts_cover_the_seconds_the_minimum_and_the_multiple() {
        assert_eq!(chunks_for(2.0, 32, 14e-3, 1).unwrap(), 143);
        assert_eq!(chunks_for(2.0, 32, 1.0, 1).unwrap(), 32);
        assert_eq!(chunks_for(2.0, 32, 14e-3, 64).unwrap(), 192);
        assert_eq!(chunks_for(1e-9, 1, 1.0, 1).unwrap(), 1);
        // Too many chunks, or a degenerate chunk, is an error, never a wrap or a panic.
        assert!(chunks_for(3600.0, 1, 1e-12, 1).is_err());
        assert!(chunks_for(1.0, 1, 0.0, 1).is_err());
        assert!(chunks_for(1.0, MAX_CHUNKS, 1.0, 3).is_err());
    }

    #[test]
    fn the_bounds_follow_their_definitions() {
        let c = ceilings();
        let (input, output) = (128e6, 32e6);
        let transfer = (input / 55.4e9f64).max(output / 55.2e9);
        assert!((c.transfer_s(input, output) - transfer).abs() < 1e-15);
        let duplex = output / 50.45e9 + (input - output) / 55.4e9;
        assert!((c.both_s(input, output) - transfer.max(duplex)).abs() < 1e-15);
        // A balanced chunk is bound by the shared rate, not by either direction alone.
        assert!(c.both_s(64e6, 64e6) > c.transfer_s(64e6, 64e6));
    }

    #[test]
    fn measured_figures_follow_their_definitions() {
        let c = ceilings();
        // 100 chunks of 14 ms of data in 0.25 s: 2.5 ms per chunk.
        let m = Measured { setup: setup(), chunks: 100, wall_s: 0.25, cpu_s: Some(0.1) };
        assert!((m.chunk_s() - 2.5e-3).abs() < 1e-12);
        assert!((m.rate() - 400.0).abs() < 1e-9); // 1e9 per chunk over 2.5 ms, in G
        assert!((m.real_time_factor() - 5.6).abs() < 1e-9);
        let t = c.transfer_s(128e6, 0.5e6);
        assert!((m.of_transfer(&c) - t / 2.5e-3).abs() < 1e-12);
        assert!((m.of_kernel() - 0.8).abs() < 1e-12);
        let (bound, which) = m.of_bound(&c);
        assert_eq!(which, "PCIe");
        assert!((bound - t / 2.5e-3).abs() < 1e-12);
        assert!((m.cpu_per_data_s().unwrap() - 0.1 / 1.4).abs() < 1e-12);
        assert!((m.cores().unwrap() - 0.4).abs() < 1e-12);
        let fast_pcie = Ceilings { h2d: 1e6, d2h: 1e6, both: 2e6, device_copy: 1.0 };
        assert_eq!(m.of_bound(&fast_pcie).1, "kernel");
        let text = format_rows(&c, std::slice::from_ref(&m));
        assert!(text.contains("400.00 Gsample/s") && text.contains("5.60x"), "{text}");
        assert!(m.detail(&c).contains("100 chunks"));
    }

    #[test]
    fn setups_and_options_are_checked() {
        assert!(setup().validate().is_ok());
        for bad in [
            Setup { kernel_s: f64::NAN, ..setup() },
            Setup { data_seconds: 0.0, ..setup() },
            Setup { output_bytes: -1.0, ..setup() },
            Setup { chunk_multiple: 0, ..setup() },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        assert!(Options::default().validate().is_ok());
        let bad_run = |run: RunOptions| Options { run, ..Options::default() }.validate().is_err();
        assert!(bad_run(RunOptions { seconds: 0.0, ..RunOptions::default() }));
        assert!(bad_run(RunOptions { seconds: f64::INFINITY, ..RunOptions::default() }));
        assert!(bad_run(RunOptions { seconds: MAX_SECONDS * 2.0, ..RunOptions::default() }));
        assert!(bad_run(RunOptions { min_chunks: 0, ..RunOptions::default() }));
        assert!(Options { depth: 0, ..Options::default() }.validate().is_err());
        assert!(Options { depth: MAX_DEPTH + 1, ..Options::default() }.validate().is_err());
        assert!(Options { stations: Some(0), ..Options::default() }.validate().is_err());
        assert!(Options { channels: Some(65536), ..Options::default() }.validate().is_err());
        assert!(Options { channels: Some(96), ..Options::default() }.validate().is_err());
        assert!(Options { bits: Some(9), ..Options::default() }.validate().is_err());
        assert!(Options { sample_rate_hz: Some(f64::NAN), ..Options::default() }.validate().is_err());
        for kind in EngineKind::ALL {
            assert_eq!(EngineKind::from_name(kind.name()), Some(kind));
            let one = Options { selection: Selection::One(kind), ..Options::default() };
            assert!(one.validate().is_ok(), "{kind:?}");
        }
        assert!(Selection::All.includes(EngineKind::Correlator));
    }

    #[test]
    fn headline_shapes_are_valid() {
        let c = correlator_config(CORRELATOR_STATIONS).unwrap();
        assert_eq!(c.input_bytes(), 256 << 20); // complex int8: 2 bytes a sample
        for n in PFB_CHANNELS {
            let p = pfb_config(n, PFB_BITS).unwrap();
            assert_eq!(2 * n as u64 * p.spectra_per_chunk(), PFB_CHUNK_SAMPLES as u64, "n = {n}");
        }
        for bits in merry::MERRY_BITS {
            for n in merry::MERRY_CHANNELS {
                pfb_config(n, bits).unwrap();
            }
        }
        assert!(pfb_config(0, 10).is_err());
        assert!(pfb_config(65536, 10).is_err());
    }

    #[test]
    fn host_cpu_time_and_driver_version_are_read_or_absent() {
        if cfg!(target_os = "linux") {
            let before = process_cpu_seconds().expect("Linux has /proc");
            let mut x = 0u64;
            let start = Instant::now();
            while start.elapsed().as_millis() < 50 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            let after = process_cpu_seconds().expect("Linux has /proc");
            assert!(after - before >= 0.02, "{before} -> {after} after 50 ms of spinning ({x})");
        }
        let line = "2 (radio kernels) S 1 2 3 4 5 6 7 8 9 10 250 30 0 0";
        assert_eq!(parse_stat_seconds(line), Some(2.8));
        assert_eq!(parse_stat_seconds("garbage"), None);
        let version =
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n";
        assert_eq!(parse_driver_version(version).as_deref(), Some("550.54.15"));
        assert_eq!(parse_driver_version(""), None);
    }

    #[test]
    fn host_fill_writes_every_byte() {
        let mut bytes = vec![0u8; 4099];
        fill_host_random(&mut bytes, 7);
        assert!(bytes[4090..].iter().any(|&b| b != 0));
        assert!(bytes.iter().filter(|&&b| b == 0).count() < 64);
    }
}
