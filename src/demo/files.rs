//! The demo's data files, in the field's standard formats: the correlator's integrated
//! visibilities as a UVH5 file (pyuvdata's HDF5 format, `--uvh5`, cargo feature `uvh5`) and
//! the beam intensities as SIGPROC filterbank files (`--filterbank`), one per beam: the FRB
//! engine's quantised beams in `DIR/frb/` (8-bit codes) and the power `|y|^2` of the delay
//! beamformer's beams in `DIR/delay/` (f32).
//!
//! # What is written
//!
//! - Channels: every PFB channel but channel 0, whose centre is 0 Hz (DC): UVH5 and SIGPROC
//!   readers turn frequencies into wavelengths, and neither format has a meaning for 0 Hz.
//!   Channel `k` is at `k fs / (2 N)` (the demo's [`channel_frequency`]), so the files hold
//!   `fs / (2 N)` to `(N - 1) fs / (2 N)` in rising order.
//! - Time: the simulated sky has no epoch, so the files use a nominal one, [`EPOCH_MJD`]
//!   (2025-01-01 00:00 UTC), as the start of the observation; the UVH5 file holds one
//!   integration of the whole observation (time at its centre, integration time its
//!   duration), the filterbank files start at it.
//! - UVH5 metadata: CHORD at DRAO (the writer's nominal site), one antenna per dish at its
//!   grid position (east `8.5 j`, north `6.3 i` metres for cell `(i, j)`, up 0), antennas
//!   `A000`, ... numbered from 0, linear feeds with X east, both polarisations, no flags,
//!   nsamples 1. The sources are fixed directions `(l, m)` from zenith (toward north and
//!   east), so the data are an unprojected drift scan: pyuvdata's `phase` to a source's
//!   position at the nominal epoch flattens its phases.
//! - Filterbank headers: source name `radio-kernels demo`, SIGPROC's "Fake" telescope and
//!   machine, `fch1` the frequency of channel 1, `foff` the channel width, `tsamp` the
//!   samples' spacing (`T_ds` spectra for the FRB beams, one spectrum for the delay beams),
//!   `nbeams` the 8 beams (sources first) and `ibeam` the file's beam.
use super::chain::Chain;
use super::sky::{channel_frequency, SAMPLE_RATE};
use super::xengine::Visibilities;
use super::T_DS;
use radio_kernels_host::delay_beamformer::DelayBeamformerConfig;
use radio_kernels_host::frb_beamformer::quantize::QuantizeConfig;
use radio_kernels_host::{Complex, Error, Result};
use std::path::{Path, PathBuf};

/// The files' nominal start: MJD 60676.0, 2025-01-01 00:00 UTC.
pub const EPOCH_MJD: f64 = 60676.0;
/// The source name of the filterbank headers.
pub const SOURCE_NAME: &str = "radio-kernels demo";

/// The FRB engine's quantised beams, `Q[f][beta][row_bytes]` of every channel.
pub(super) struct FrbCodes {
    pub config: QuantizeConfig,
    pub q: Vec<u8>,
}

/// The delay beamformer's beams, `y[beam][channel][time]` of every channel.
pub(super) struct DelayBeams {
    pub config: DelayBeamformerConfig,
    pub y: Vec<Complex<i8>>,
}

/// Checks, before any work, that the files asked for can be written: the UVH5 file's folder
/// is made and writable and the file is not a folder; the filterbank folder and its `frb`
/// and `delay` subfolders are made and writable. `Err((option, why))`.
pub fn check_files(
    uvh5: Option<&Path>,
    filterbank: Option<&Path>,
) -> std::result::Result<(), (String, String)> {
    if let Some(file) = uvh5 {
        let fail = |why: String| Err(("--uvh5".to_string(), format!("{}: {why}", file.display())));
        if file.as_os_str().is_empty() {
            return fail("the file name is empty".into());
        }
        if file.is_dir() {
            return fail("is a folder, not a file".into());
        }
        let parent = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Err(why) = super::check_out(parent) {
            return fail(format!("its folder: {why}"));
        }
    }
    if let Some(dir) = filterbank {
        for sub in [dir.to_path_buf(), dir.join("frb"), dir.join("delay")] {
            if let Err(why) = super::check_out(&sub) {
                return Err(("--filterbank".into(), format!("{}: {why}", sub.display())));
            }
        }
    }
    Ok(())
}

/// Writes the files the options ask for; the paths written, UVH5 first.
pub(super) fn write(
    chain: &Chain,
    visibilities: &Visibilities,
    frb: &FrbCodes,
    delay: &DelayBeams,
) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    if let Some(path) = &chain.options.uvh5 {
        write_uvh5(chain, visibilities, path)?;
        written.push(path.clone());
    }
    if let Some(dir) = &chain.options.filterbank {
        written.extend(write_filterbank(chain, frb, delay, dir)?);
    }
    Ok(written)
}

#[cfg(feature = "uvh5")]
fn write_uvh5(chain: &Chain, visibilities: &Visibilities, path: &Path) -> Result<()> {
    use crate::formats::uvh5::{self, Uvh5Metadata};
    let n = chain.n;
    // Dish d at cell (north i, east j): ENU (east, north, up).
    let enu: Vec<[f64; 3]> = (0..chain.d_n)
        .map(|d| {
            let (north, east) = chain.array.position(d);
            [east, north, 0.0]
        })
        .collect();
    let freqs: Vec<f64> = (1..n).map(|k| channel_frequency(k, n)).collect();
    let width = SAMPLE_RATE / (2.0 * f64::from(n));
    let start_jd = EPOCH_MJD + 2_400_000.5;
    let mut meta = Uvh5Metadata::chord_drao(
        &enu,
        freqs,
        width,
        vec![start_jd + chain.duration / 2.0 / 86400.0],
        chain.duration,
    );
    meta.history = format!(
        "radio-kernels demo: {} dishes, {} channels (DC left out), {} spectra, seed {}; sources (l north, m east, \
         rms): {}",
        chain.d_n,
        n,
        chain.t_n,
        chain.options.seed,
        chain.sources.iter().map(|s| format!("({:.6}, {:.6}, {})", s.l, s.m, s.rms)).collect::<Vec<_>>().join(", ")
    );
    // V[c][b][pi][pj] is channel-major: channels 1.. are one run.
    let first = visibilities.config.output_index(1, 0, 0, 0, 0);
    uvh5::write(path, &meta, &visibilities.data[first..], None, None)
}

#[cfg(not(feature = "uvh5"))]
fn write_uvh5(_: &Chain, _: &Visibilities, path: &Path) -> Result<()> {
    Err(Error::InvalidConfig(format!(
        "cannot write {}: this build has no UVH5 writer; build with `--features uvh5`",
        path.display()
    )))
}

fn header(chain: &Chain, nbits: u32, tsamp: f64) -> crate::formats::filterbank::FilterbankHeader {
    let n = chain.n;
    crate::formats::filterbank::FilterbankHeader::new(
        SOURCE_NAME,
        channel_frequency(1, n) / 1e6,
        SAMPLE_RATE / (2.0 * f64::from(n)) / 1e6,
        n - 1,
        tsamp,
        EPOCH_MJD,
        nbits,
    )
}

fn write_filterbank(chain: &Chain, frb: &FrbCodes, delay: &DelayBeams, dir: &Path) -> Result<Vec<PathBuf>> {
    use crate::formats::filterbank;
    let n = chain.n;
    let spectrum = 2.0 * f64::from(n) / SAMPLE_RATE;
    // FRB codes: Q[f][beta][row] is channel-major, so channels 1.. are one run.
    let codes = QuantizeConfig { channels: n - 1, ..frb.config };
    let row = frb.config.row_bytes() as usize * frb.config.beams as usize;
    let q = frb.q.get(row..).ok_or_else(|| Error::ShapeMismatch {
        what: "FRB codes",
        expected: frb.config.output_len(),
        actual: frb.q.len(),
    })?;
    let mut written = filterbank::write_frb_beams(
        dir.join("frb"),
        &header(chain, 8, f64::from(T_DS) * spectrum),
        &codes,
        q,
    )?;
    // Delay beams: y[beam][channel][time], repacked to channels 1..
    let full = &delay.config;
    let sub =
        DelayBeamformerConfig { channels: n - 1, first_channel: full.first_channel + 1, ..full.clone() };
    let mut y = Vec::with_capacity(sub.output_len());
    for beam in 0..full.beams.len() as u32 {
        for c in 1..n {
            let at = full.output_index(beam, c, 0);
            y.extend_from_slice(&delay.y[at..at + full.times as usize]);
        }
    }
    written.extend(filterbank::write_delay_beams(dir.join("delay"), &header(chain, 32, spectrum), &sub, &y)?);
    Ok(written)
}
