//! The runner: what a driver says about its engine's chunks ([`Setup`]), the timed run
//! ([`run_streamed`]: a warm-up, then [`pump`] for the chunks [`chunks_for`] gives, by the host
//! clock, with the process's CPU time), and the figures of a run against the ceilings
//! ([`Measured`]).
use super::system::process_cpu_seconds;
use super::{Ceilings, RunOptions, MAX_CHUNKS};
use crate::streaming::{pump, Engine};
use crate::{Error, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;

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
    /// The unit of the sustained rate, e.g. `Gsample/s/pol`.
    pub rate_unit: &'static str,
    /// Units of `work` per unit of the rate (e.g. 1e9 for a rate in G-units per second).
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
    /// What the driver said about the engine's chunks.
    pub setup: Setup,
    /// Chunks timed.
    pub chunks: u64,
    /// The host-clock seconds they took end to end.
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
    log::debug!(
        "{} {}: {} warm-up chunks, then {chunks} timed",
        setup.engine,
        setup.configuration,
        options.warmup_chunks
    );
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
