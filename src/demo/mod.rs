//! `radio-kernels demo`: a simulated CHORD-pathfinder observation through the whole F-X-B
//! chain, on the GPU or, without one, on the CPU references.
//!
//! [`sky`] makes 10-bit digitiser samples of a square array observing a few point sources
//! plus receiver noise. The chain: the PFB channelizer (every dish), the correlator
//! (visibilities), the baseband beamformer (int4 voltages, beams on and off the sources), the
//! FRB beamformer's first kernel (intensity on the half-integer grid) and second kernel
//! (resampled to the same beam list), and the delay beamformer (int8 voltages). On the GPU each
//! stage is checked against its CPU reference on a few channels. The science checks: the
//! correlator's visibilities, imaged, peak at the brightest source; the FRB map peaks at its
//! half-integer pixel; beams on sources have more power than beams off them.
pub mod plot;
pub mod sky;

mod baseband;
mod chain;
mod delay;
mod fengine;
mod figures;
mod files;
mod frb;
mod report;
mod xengine;

pub use figures::channel_response;
pub use files::{check_files, EPOCH_MJD};
pub use report::{image_tolerance, report, science_ok};

use chain::Chain;
use radio_kernels_host::{Error, Gpu, Result};
use sky::{Array, Source, SAMPLE_RATE};
use std::path::{Path, PathBuf};

/// PFB taps (MeerKAT's 16).
const TAPS: u32 = 16;
/// Beams of every beamformer: the sources, then off-source directions.
const BEAMS: u32 = 8;
/// FRB time downsampling (spectra per output sample).
const T_DS: u32 = 64;
/// Slots of the streaming engines' rings.
const DEPTH: usize = 3;
/// A stage's steady state is timed over at least this many chunks and seconds.
const SUSTAIN_CHUNKS: u64 = 12;
const SUSTAIN_SECONDS: f64 = 0.3;
/// Channels each GPU stage is checked on against its CPU reference.
const CHECK_CHANNELS: u32 = 2;
/// Why `--uvh5` is refused by a build without the `uvh5` feature.
pub const UVH5_MISSING: &str = "--uvh5: this radio-kernels was built without the UVH5 writer; build it with \
     `--features uvh5` (e.g. `cargo run --release --features uvh5 -- demo --uvh5 FILE`), which builds the \
     HDF5 library from source and needs cmake (`pip install cmake`)";
/// The most spectra an observation may hold (every stage keeps the whole observation in
/// host memory, and the CPU references run it all).
pub const MAX_SPECTRA: u32 = 16384;

/// What to observe and where to write the figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Dishes on a square grid: 64 (8 x 8, the pathfinder) or 256 (16 x 16).
    pub dishes: u32,
    /// PFB channels (a power of two, 64 ..= 8192).
    pub channels: u32,
    /// Spectra per PFB heap (a multiple of 128): the observation is `spectra_per_heap x
    /// heaps` spectra.
    pub spectra_per_heap: u32,
    /// PFB heaps in the observation ([`Options::set_seconds`] computes them from seconds).
    pub heaps: u32,
    /// Point sources, 1 ..= 8.
    pub sources: u32,
    /// The folder the figures are written to (created if missing; [`check_out`]).
    pub out: PathBuf,
    /// Seed of the simulated sky: the sources' noise and the receiver noise.
    pub seed: u64,
    /// Where to write the correlator's integrated visibilities as a UVH5 file (`None`: not
    /// written). Needs the cargo feature `uvh5` ([`validate`](Options::validate) refuses it
    /// otherwise); the contents are described in the `files` module docs.
    pub uvh5: Option<PathBuf>,
    /// The folder for the beams as SIGPROC filterbank files, one per beam: the FRB engine's
    /// quantised beams in `frb/`, the delay beamformer's beam powers in `delay/` (`None`: not
    /// written).
    pub filterbank: Option<PathBuf>,
}

impl Options {
    /// The GPU default: the pathfinder, 1024 channels, 512 spectra (0.33 ms of sky).
    pub fn gpu_default() -> Options {
        Options {
            dishes: 64,
            channels: 1024,
            spectra_per_heap: 256,
            heaps: 2,
            sources: 3,
            out: "demo-out".into(),
            seed: 1,
            uvh5: None,
            filterbank: None,
        }
    }
    /// The CPU default: the pathfinder, 128 channels, 128 spectra.
    pub fn cpu_default() -> Options {
        Options { channels: 128, spectra_per_heap: 128, heaps: 1, ..Options::gpu_default() }
    }
    /// Sets the heaps to cover `seconds` of sky: the fewest whole heaps of
    /// `spectra_per_heap` spectra (each `2 channels / SAMPLE_RATE` seconds) that reach it.
    ///
    /// Errors, leaving `self` unchanged, when `seconds` is not a finite number above 0, when
    /// `channels` or `spectra_per_heap` is 0, or when the heaps needed would hold more than
    /// [`MAX_SPECTRA`] spectra (the message names `--seconds` and `--channels` and says how
    /// many seconds fit). The heap count is computed in `f64` and compared before any
    /// conversion, so no size wraps.
    pub fn set_seconds(&mut self, seconds: f64) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if !seconds.is_finite() || seconds <= 0.0 {
            return bad(format!("--seconds must be a finite number above 0, got {seconds}"));
        }
        if self.channels == 0 || self.spectra_per_heap == 0 {
            return bad(format!(
                "--seconds needs channels and spectra per heap above 0, got {} and {}",
                self.channels, self.spectra_per_heap
            ));
        }
        let per_heap = 2.0 * f64::from(self.channels) * f64::from(self.spectra_per_heap) / SAMPLE_RATE;
        let heaps = (seconds / per_heap).ceil();
        let max_heaps = MAX_SPECTRA / self.spectra_per_heap;
        if heaps > f64::from(max_heaps) {
            return bad(format!(
                "--seconds {seconds} at --channels {} needs {heaps:.0} heaps of {} spectra ({:.0} \
                 spectra), past the demo's {MAX_SPECTRA}: at most {:.6} s at {} channels",
                self.channels,
                self.spectra_per_heap,
                heaps * f64::from(self.spectra_per_heap),
                f64::from(max_heaps) * per_heap,
                self.channels,
            ));
        }
        // 1 <= heaps <= max_heaps: a whole number that fits in u32.
        self.heaps = (heaps as u32).max(1);
        Ok(())
    }
    /// Checks every field and that the observation's size fits: `spectra_per_heap x heaps`
    /// (computed checked) in 128 ..= [`MAX_SPECTRA`].
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if self.dishes != 64 && self.dishes != 256 {
            return bad(format!("--dishes must be 64 (8 x 8) or 256 (16 x 16), got {}", self.dishes));
        }
        if !self.channels.is_power_of_two() || !(64..=8192).contains(&self.channels) {
            return bad(format!("--channels must be a power of two in 64..=8192, got {}", self.channels));
        }
        if !(1..=8).contains(&self.sources) {
            return bad(format!("--sources must be 1..=8, got {}", self.sources));
        }
        if self.uvh5.is_some() && !cfg!(feature = "uvh5") {
            return bad(UVH5_MISSING.into());
        }
        let spectra = self.spectra_per_heap.checked_mul(self.heaps);
        let fits = spectra.is_some_and(|t| (128..=MAX_SPECTRA).contains(&t));
        if !self.spectra_per_heap.is_multiple_of(128) || !fits {
            return bad(format!(
                "{} heaps of {} spectra ({} spectra): use a multiple of 128 spectra per heap and \
                 128 ..= {MAX_SPECTRA} spectra",
                self.heaps,
                self.spectra_per_heap,
                self.spectra()
            ));
        }
        Ok(())
    }
    /// Spectra in the observation, `spectra_per_heap x heaps` (exact for every value).
    pub fn spectra(&self) -> u64 {
        u64::from(self.spectra_per_heap) * u64::from(self.heaps)
    }
    fn array(&self) -> Result<Array> {
        Array::new(if self.dishes == 64 { 8 } else { 16 })
    }
    /// Seconds of sky the observation covers (computed in `f64`: no wrap for any value).
    pub fn duration(&self) -> f64 {
        2.0 * f64::from(self.channels) * self.spectra() as f64 / SAMPLE_RATE
    }
    /// The channel of the figures and the position checks: 3/4 of the band (1.2 GHz),
    /// `floor(3 channels / 4)` (computed without overflow).
    pub fn reference_channel(&self) -> u32 {
        self.channels / 4 * 3 + self.channels % 4 * 3 / 4
    }
}

/// One row of the summary table.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The stage, e.g. `PFB channelizer`.
    pub name: &'static str,
    /// Its configuration, in a few words.
    pub shape: String,
    /// Milliseconds per chunk in the steady state of the stage's streaming engine (wall
    /// clock, copies in and out included), or per kernel where `throughput` says so; `None`
    /// on the CPU path.
    pub ms: Option<f64>,
    /// The rate and the fraction of real time, in words (empty details on the CPU path).
    pub throughput: String,
    /// `Ok(detail)` or `Err(detail)`.
    pub check: std::result::Result<String, String>,
}

/// What the demo found.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The table's rows, one per stage, in chain order.
    pub stages: Vec<Stage>,
    /// The simulated point sources, brightest first.
    pub sources: Vec<Source>,
    /// Peak of the correlator's dirty image near the reference channel, and the brightest
    /// source's true direction cosines (l, m).
    pub image_peak: (f64, f64),
    /// The FRB map's brightest half-integer pixel at the reference channel, and where the
    /// brightest source should be.
    pub frb_peak: (u32, u32),
    /// The half-integer pixel of the brightest source's true direction.
    pub frb_expected: (u32, u32),
    /// Mean power per beam (sources first) of the baseband, FRB and delay beamformers.
    pub beam_power: [Vec<f64>; 3],
    /// The figures written (a figure that failed is logged and left out).
    pub images: Vec<PathBuf>,
    /// The data files written ([`Options::uvh5`], then the filterbank files of
    /// [`Options::filterbank`]: FRB beams, then delay beams).
    pub files: Vec<PathBuf>,
    /// Seconds of sky observed.
    pub duration: f64,
}

impl Outcome {
    /// All stage checks passed.
    pub fn checks_passed(&self) -> bool {
        self.stages.iter().all(|s| s.check.is_ok())
    }
}

/// The stages [`run`] announces to its `progress`: 9 on the GPU, 8 on the CPU references
/// (which have no streaming FRB engine). The command sizes its progress bar with it.
pub fn stage_count(on_gpu: bool) -> u64 {
    if on_gpu {
        9
    } else {
        8
    }
}

/// Runs the demo: on `gpu` if given, else on the CPU references. `progress` receives a line
/// when a stage starts ([`stage_count`] of them in a run that succeeds).
///
/// Checks `options` and that the output folder is writable ([`check_out`]) before any work.
/// The stages, in order: the sky and its digitisers, the F-engine, the correlator (and its
/// dirty image), the baseband beamformer, the FRB beamformer's two kernels and its streaming
/// engine, the delay beamformer, and the figures with the data files asked for
/// ([`Options::uvh5`], [`Options::filterbank`]; their paths are checked before any work, by
/// [`check_files`]).
pub fn run(options: &Options, gpu: Option<&Gpu>, progress: &dyn Fn(&str)) -> Result<Outcome> {
    options.validate()?;
    check_out(&options.out)
        .map_err(|why| Error::InvalidConfig(format!("the output folder {}: {why}", options.out.display())))?;
    check_files(options.uvh5.as_deref(), options.filterbank.as_deref())
        .map_err(|(option, why)| Error::InvalidConfig(format!("{option}: {why}")))?;
    let chain = Chain::new(options, gpu)?;
    let mut stages = Vec::new();

    progress(&format!(
        "simulating {} dishes x 2 pols, {:.3} ms of sky, {} sources",
        chain.d_n,
        1e3 * chain.duration,
        chain.sources.len()
    ));
    let sky = row(&mut stages, fengine::simulate(&chain)?);
    progress("PFB channelizer");
    let channelized = row(&mut stages, fengine::channelize(&chain, &sky)?);
    progress("correlator");
    let visibilities = row(&mut stages, xengine::correlate(&chain, &channelized)?);
    let image_peak = xengine::dirty_image(&chain, &visibilities);

    let e = baseband::Int4Voltages::new(&chain, &channelized)?;
    progress("baseband beamformer");
    let baseband_power = row(&mut stages, baseband::beamform(&chain, &e)?);

    progress("FRB beamformer (intensity on the half-integer grid)");
    let intensity = row(&mut stages, frb::intensity(&chain, &e)?);
    let frb_map = frb::map(&chain, &intensity);
    progress("FRB beamformer (resampling to the beams)");
    let beams = row(&mut stages, frb::resample(&chain, &intensity)?);
    let frb_codes = row(&mut stages, frb::stream(&chain, &e, &intensity, &beams, progress)?);
    let frb_power = frb::power(&chain, &beams);

    progress("delay beamformer");
    let delay_beams = row(&mut stages, delay::beamform(&chain, &channelized)?);
    let delay_power = delay::power(&chain, &delay_beams);

    let writing_files = options.uvh5.is_some() || options.filterbank.is_some();
    progress(&format!(
        "writing figures to {}{}",
        options.out.display(),
        if writing_files { " and the data files" } else { "" }
    ));
    let beam_power = [baseband_power, frb_power, delay_power];
    let images = figures::write(&chain, &visibilities, &frb_map, &beam_power)?;
    let files = files::write(&chain, &visibilities, &frb_codes, &delay_beams)?;
    Ok(Outcome {
        files,
        stages,
        image_peak,
        frb_peak: frb_map.peak,
        frb_expected: frb_map.expected,
        beam_power,
        images,
        duration: chain.duration,
        sources: chain.sources,
    })
}

/// Adds a stage's row to the table and returns its output.
fn row<T>(stages: &mut Vec<Stage>, (out, stage): (T, Stage)) -> T {
    stages.push(stage);
    out
}

/// Makes sure figures can be written to `dir` before any work: creates the folder (and its
/// parents), then creates and removes a probe file in it. `Err` says which step failed and
/// why (e.g. a parent that is a regular file, a read-only file system).
pub fn check_out(dir: &Path) -> std::result::Result<(), String> {
    if dir.as_os_str().is_empty() {
        return Err("the folder name is empty".into());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the folder: {e}"))?;
    let probe = dir.join(format!(".radio-kernels-write-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| format!("cannot create a file in it: {e}"))?;
    std::fs::remove_file(&probe).map_err(|e| format!("cannot remove the probe file {}: {e}", probe.display()))
}
