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
//! - The engine: a warm-up, then [`pump`](crate::streaming::pump) for at least `seconds` of
//!   telescope data and at least [`MIN_CHUNKS`] chunks, timed by the host clock from the
//!   first submit to the last output's download ([`run_streamed`]). Every input slot holds
//!   random data written once, as a receiver writing in place would leave it; outputs are
//!   released unread.
//!
//! # Files
//!
//! This file: the options and headline shapes, [`drive`] and the command ([`run`]).
//! `ceilings.rs` measures the [`Ceilings`], `runner.rs` times an engine ([`Setup`],
//! [`run_streamed`], [`Measured`]), `report.rs` formats the table, `system.rs` reads the
//! host's CPU time and driver version, `engines.rs` holds the per-family drivers and
//! [`merry`] the F-engine's rate model.
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
use crate::correlator::{CorrelatorConfig, Format, Order};
use crate::pfb::{ChannelizerConfig, OutputFormat};
use crate::streaming::{Engine, DEFAULT_DEPTH};
use crate::{Error, Gpu, Result};

mod ceilings;
mod engines;
pub mod merry;
mod report;
mod runner;
mod system;
#[cfg(test)]
mod tests;

pub use ceilings::{measure_ceilings, Ceilings};
pub use engines::correlator;
pub use report::{device_line, format_rows, table, Report};
pub use runner::{chunks_for, prime, run_streamed, Measured, Setup};
pub use system::{driver_version, fill_host_random, process_cpu_seconds};

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

// Correlator headline: 512 dual-polarisation stations, 16 channels, chunks of 8192
// samples, complex int8, integrations of 64 chunks.
/// Correlator headline: dual-polarisation stations (`--stations` changes it).
pub const CORRELATOR_STATIONS: u32 = 512;
/// Correlator headline: channels per chunk.
pub const CORRELATOR_CHANNELS: u32 = 16;
/// Correlator headline: samples per chunk (complex int8).
pub const CORRELATOR_TIMES: u32 = 8192;
/// Correlator headline: chunks per integration (one output per this many chunks).
pub const CORRELATOR_CHUNKS_PER_INTEGRATION: usize = 64;

// F-engine headline: 1024, 4096 and 32768 channels, 16 taps, 10-bit input, complex int8
// output, chunks of 2^24 samples per polarisation.
/// F-engine headline: the channel counts run, one engine each (`--channels` picks one).
pub const PFB_CHANNELS: [u32; 3] = [1024, 4096, 32768];
/// F-engine headline: input bits per sample (`--bits` changes it).
pub const PFB_BITS: u32 = 10;
/// F-engine headline: taps of the polyphase filter.
pub const PFB_TAPS: u32 = 16;
/// F-engine headline: input samples per polarisation per chunk.
pub const PFB_CHUNK_SAMPLES: u32 = 1 << 24;
/// F-engine headline: spectra per output heap.
pub const PFB_SPECTRA_PER_HEAP: u32 = 256;
/// Digitiser rate the F-engine's real-time factor is quoted at unless asked otherwise:
/// MeerKAT's L band, 1712 Msample/s per polarisation (Merry's F-engine).
pub const PFB_SAMPLE_RATE_HZ: f64 = 1.712e9;
/// The largest digitiser rate `--sample-rate` accepts, Hz.
pub const MAX_SAMPLE_RATE_HZ: f64 = 1e12;

/// The engine families the command can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// The correlator (X-engine), int8 visibilities per integration.
    Correlator,
    /// The PFB channelizer (F-engine).
    Pfb,
    /// The baseband beamformer, int4 beams.
    Baseband,
    /// The delay beamformer, int8 beams.
    Delay,
    /// The FRB beamformer: intensity, resampling to the beams and quantisation.
    Frb,
}

impl EngineKind {
    /// Every family, in table order.
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
    /// That family only.
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
    /// Checks the seconds and chunk counts against their ranges.
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
    /// The engines to run (`--engine`).
    pub selection: Selection,
    /// How long each runs, and whether a progress bar is drawn.
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
    /// The correlator's stations: the option's, else [`CORRELATOR_STATIONS`].
    pub fn correlator_stations(&self) -> u32 {
        self.stations.unwrap_or(CORRELATOR_STATIONS)
    }
    /// The F-engine channel counts to run: the option's one, else each of [`PFB_CHANNELS`].
    pub fn pfb_channels(&self) -> Vec<u32> {
        match self.channels {
            Some(n) => vec![n],
            None => PFB_CHANNELS.to_vec(),
        }
    }
    /// The F-engine's input bits: the option's, else [`PFB_BITS`].
    pub fn pfb_bits(&self) -> u32 {
        self.bits.unwrap_or(PFB_BITS)
    }
    /// The F-engine's digitiser rate, Hz per polarisation: the option's, else
    /// [`PFB_SAMPLE_RATE_HZ`].
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

/// What a driver hands each engine it builds to: the engine (primed, idle) and its setup.
pub type Visit<'v> = dyn FnMut(&mut dyn Engine, Setup) -> Result<()> + 'v;

/// Builds the engines of family `kind` at the shapes `options` gives and hands each to
/// `visit` (one driver per family).
pub fn drive(gpu: &Gpu, kind: EngineKind, options: &Options, visit: &mut Visit<'_>) -> Result<()> {
    options.validate()?;
    engines::drive(gpu, kind, options, visit)
}

/// What [`run`] tells its caller as it goes, in order: the ceilings, then for each engine its
/// setup and its measured run, and after the F-engines the Merry model beside them.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// The transfer ceilings are measured.
    Ceilings(&'a Ceilings),
    /// An engine is built and primed; its timed run starts.
    Engine(&'a Setup),
    /// An engine's timed run is done.
    Measured {
        /// The run.
        measured: &'a Measured,
        /// The ceilings it is measured against.
        ceilings: &'a Ceilings,
    },
    /// The F-engines ran: Merry's model of their rates ([`merry::table`]), and the measured
    /// (channels, bits, rate) it is printed beside ([`merry::format`]).
    Merry {
        /// The model's rows.
        model: &'a [merry::Row],
        /// The measured F-engine rates, samples per second per polarisation.
        measured: &'a [(u32, u32, f64)],
    },
}

/// `radio-kernels stream`: measures the ceilings, runs each selected engine, and computes
/// the F-engine's Merry model when it ran; `on` hears of each step as it completes
/// ([`Event`]: the command prints them). Prints nothing; the returned [`Report`] holds the
/// ceilings and the rows of the table ([`table`]).
pub fn run(gpu: &Gpu, options: &Options, on: &mut dyn FnMut(Event<'_>)) -> Result<Report> {
    options.validate()?;
    log::debug!("measuring the transfer ceilings ({} MiB, {CEILING_REPS} copies)", CEILING_BYTES >> 20);
    let ceilings = measure_ceilings(gpu, CEILING_REPS)?;
    on(Event::Ceilings(&ceilings));
    let mut rows: Vec<Measured> = Vec::new();
    for kind in options.selection.engines() {
        log::debug!("building the {} engines", kind.name());
        drive(gpu, kind, options, &mut |engine, setup| {
            on(Event::Engine(&setup));
            let measured = run_streamed(engine, setup, &options.run)?;
            on(Event::Measured { measured: &measured, ceilings: &ceilings });
            rows.push(measured);
            Ok(())
        })?;
        if kind == EngineKind::Pfb {
            let measured: Vec<(u32, u32, f64)> =
                rows.iter().filter_map(|m| m.setup.pfb_shape.map(|(n, bits)| (n, bits, m.rate()))).collect();
            let model = merry::table(gpu, &ceilings, &measured)?;
            on(Event::Merry { model: &model, measured: &measured });
        }
    }
    Ok(Report { ceilings, rows })
}
