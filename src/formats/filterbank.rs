//! SIGPROC filterbank files for beam intensities.
//!
//! # The format
//!
//! A SIGPROC filterbank file (SIGPROC user guide, D. Lorimer, "header parameters") is a
//! keyed binary header followed by the samples. The header opens with the string
//! `HEADER_START` and closes with `HEADER_END`; between them each key is a string followed by
//! its value. A string is its byte length as a 4-byte integer, then its bytes (no
//! terminator); a value is a 4-byte integer, an 8-byte IEEE double or a string, by key. Every
//! number is little-endian (SIGPROC writes the machine's order; every reader in use, sigpyproc
//! among them, reads little-endian). The key types, as SIGPROC and sigpyproc's header schema
//! read them:
//!
//! | key | type | meaning |
//! |---|---|---|
//! | `rawdatafile`, `source_name` | string | file the data came from; source observed |
//! | `telescope_id`, `machine_id` | int | SIGPROC's telescope and back-end numbers |
//! | `data_type` | int | 1: filterbank |
//! | `src_raj`, `src_dej` | double | J2000 position, packed `hhmmss.s` and `ddmmss.s` |
//! | `az_start`, `za_start` | double | azimuth and zenith angle at the start (degrees) |
//! | `tstart` | double | MJD of the first sample |
//! | `tsamp` | double | time between spectra (s) |
//! | `fch1`, `foff` | double | first channel's centre frequency, channel step (MHz) |
//! | `nchans`, `nifs`, `nbits` | int | channels, IFs (1: total intensity), bits per sample |
//! | `nbeams`, `ibeam` | int | beams of the observation, this file's beam |
//!
//! The data follow `HEADER_END` at once: spectra in time order, each `nchans` samples of
//! `nbits` bits (8: unsigned bytes; 32: little-endian f32), `[time][channel]`, with no
//! padding, and the file ends with the last spectrum (the number of spectra is the data
//! length over the spectrum size; the legacy `nsamples` key is not written).
//!
//! # Channel order
//!
//! Channel `k` of every spectrum, the `k`-th sample written, has centre frequency
//! `fch1 + k foff` ([`FilterbankHeader::channel_frequency`]): `fch1` is the first channel
//! written, and the sign of `foff` gives the direction (negative: falling frequency, the
//! usual order of SIGPROC files; positive: rising). The helpers below write our channel index
//! `f` (or `c`) as filterbank channel `k = f`, so `fch1` is the frequency of our channel 0
//! and `foff` our channel step; to write falling frequencies from rising channels, set
//! `fch1` to channel 0's frequency and `foff` positive: readers handle both signs.
//!
//! # What is written
//!
//! [`FilterbankHeader`] holds the keys above; `data_type` (1) and `nifs` (1) are fixed, and
//! `nbits` is 8 or 32 (the widths our beams come in). [`FilterbankHeader::validate`] refuses
//! what a reader could not take: non-finite values, an empty or non-ASCII name (SIGPROC reads
//! names into 80-byte buffers, so at most [`MAX_STRING_BYTES`]), `nchans` 0, `tsamp`,
//! `tstart` or a channel frequency not positive, `foff` 0, a packed position that is not a
//! valid sexagesimal value, angles out of range, `ibeam >= nbeams`, and integers past
//! `i32::MAX` (SIGPROC reads them as C `int`). Telescope and machine numbers are SIGPROC's
//! tables; CHORD has none, so the default is [`TELESCOPE_FAKE`] and [`MACHINE_FAKE`] (0,
//! "Fake" in SIGPROC and sigpyproc).
//!
//! [`FilterbankWriter`] writes the header, then spectra: [`FilterbankWriter::write_spectra_u8`]
//! for `nbits` 8, [`FilterbankWriter::write_spectra_f32`] for 32, each a `[time][channel]`
//! block of whole spectra, checked (length, sample type, finite values) before a byte is
//! written. [`read_filterbank`] and [`read_header`] read such files back (the keys above and
//! SIGPROC's other numeric keys; for tests and tools, not a general SIGPROC reader).
//!
//! # Beams
//!
//! One file per beam, `beam_0000.fil`, `beam_0001.fil`, ... in a directory, each with
//! `ibeam` its beam index (from 0) and `nbeams` the beam count:
//! - FRB beams, [`write_frb_beams`]: the quantiser's codes `Q[f][beta][tbar]` (rows padded to
//!   16 bytes, [`QuantizeConfig::row_bytes`]) become per-beam spectra `[tbar][f]` of 8-bit
//!   codes ([`frb_beam_spectra`]); 4-bit codes are unpacked to one byte each (0..=15), so
//!   `nbits` is 8 for both formats. `tsamp` is the slow (tbar) sample time.
//! - Delay-beamformer beams, [`write_delay_beams`]: `y[beam][channel][time]` complex int8
//!   becomes per-beam power spectra `|y|^2 = re^2 + im^2` as f32 `[time][channel]`
//!   ([`delay_beam_power`]; exact: at most 2 * 128^2), `nbits` 32. `fch1` is the frequency
//!   of the launch's channel 0 (absolute channel `first_channel`).
//!
//! # Errors
//!
//! Every call returns [`Error`]: `InvalidConfig` for a bad header or a mismatch between the
//! header and the data's type or shape, `ShapeMismatch` for a buffer of the wrong length,
//! `NonFinite` for a NaN or infinite f32 sample, `Io` for a failed read or write (with the
//! operation), and `InvalidConfig` for a file that is not a SIGPROC filterbank. After an I/O
//! failure a writer refuses further spectra (the file's length is no longer known to be whole
//! spectra).
use crate::delay_beamformer::DelayBeamformerConfig;
use crate::frb_beamformer::quantize::{Format, QuantizeConfig};
use crate::{Complex, Error, Result};
use std::fs::File;
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

/// SIGPROC's telescope number 0, "Fake": the default, as CHORD has no SIGPROC number.
pub const TELESCOPE_FAKE: u32 = 0;
/// SIGPROC's machine (back-end) number 0, "FAKE": the default.
pub const MACHINE_FAKE: u32 = 0;
/// `data_type` of a filterbank file (2 would be a time series): always written.
pub const DATA_TYPE_FILTERBANK: u32 = 1;
/// `nifs`: one IF (total intensity): always written.
pub const NIFS: u32 = 1;
/// Longest `source_name` or `rawdatafile`, in bytes: SIGPROC reads them into 80-byte C
/// strings.
pub const MAX_STRING_BYTES: usize = 79;
/// Longest string [`read_header`] accepts (a longer length means a corrupt header).
const MAX_READ_STRING: u32 = 4096;

/// The header of a SIGPROC filterbank file (see the module docs for each key's meaning and
/// type). `data_type` 1 and `nifs` 1 are written by the writer and not held here.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterbankHeader {
    /// `source_name`: the source observed; 1..=79 printable ASCII bytes.
    pub source_name: String,
    /// `rawdatafile`: the file the data came from, written when set; 1..=79 printable ASCII
    /// bytes.
    pub rawdatafile: Option<String>,
    /// `telescope_id`, SIGPROC's telescope number ([`TELESCOPE_FAKE`] by default).
    pub telescope_id: u32,
    /// `machine_id`, SIGPROC's back-end number ([`MACHINE_FAKE`] by default).
    pub machine_id: u32,
    /// `src_raj`: J2000 right ascension packed as `hhmmss.s` (12h 34m 56.7s is
    /// `123456.7`; [`pack_ra_hours`] packs hours).
    pub src_raj: f64,
    /// `src_dej`: J2000 declination packed as `ddmmss.s`, signed (-30d 15m 0s is
    /// `-301500.0`; [`pack_dec_degrees`] packs degrees).
    pub src_dej: f64,
    /// `az_start`: azimuth at the start, degrees in [0, 360], written when set.
    pub az_start: Option<f64>,
    /// `za_start`: zenith angle at the start, degrees in [0, 180], written when set.
    pub za_start: Option<f64>,
    /// `tstart`: MJD (UTC) of the first spectrum, positive.
    pub tstart: f64,
    /// `tsamp`: seconds between spectra, positive.
    pub tsamp: f64,
    /// `fch1`: centre frequency of the first channel written, MHz, positive.
    pub fch1: f64,
    /// `foff`: channel step, MHz, non-zero: channel `k` is at `fch1 + k foff`.
    pub foff: f64,
    /// `nchans`: channels per spectrum, 1..=`i32::MAX`.
    pub nchans: u32,
    /// `nbits`: 8 (unsigned bytes) or 32 (f32).
    pub nbits: u32,
    /// `nbeams`: beams of the observation, 1..=`i32::MAX`.
    pub nbeams: u32,
    /// `ibeam`: this file's beam, `< nbeams` (from 0).
    pub ibeam: u32,
}

impl FilterbankHeader {
    /// A header with the required keys and defaults for the rest: no `rawdatafile`,
    /// [`TELESCOPE_FAKE`], [`MACHINE_FAKE`], position 0 (`src_raj` and `src_dej` 0.0), no
    /// `az_start` or `za_start`, one beam (`nbeams` 1, `ibeam` 0). Not validated here: the
    /// writer validates.
    pub fn new(
        source_name: impl Into<String>,
        fch1: f64,
        foff: f64,
        nchans: u32,
        tsamp: f64,
        tstart: f64,
        nbits: u32,
    ) -> FilterbankHeader {
        FilterbankHeader {
            source_name: source_name.into(),
            rawdatafile: None,
            telescope_id: TELESCOPE_FAKE,
            machine_id: MACHINE_FAKE,
            src_raj: 0.0,
            src_dej: 0.0,
            az_start: None,
            za_start: None,
            tstart,
            tsamp,
            fch1,
            foff,
            nchans,
            nbits,
            nbeams: 1,
            ibeam: 0,
        }
    }

    /// Centre frequency of channel `k` (MHz): `fch1 + k foff`.
    pub fn channel_frequency(&self, k: u32) -> f64 {
        self.fch1 + k as f64 * self.foff
    }

    /// Bytes of one spectrum: `nchans nbits / 8` (saturating; exact for a valid header).
    pub fn spectrum_bytes(&self) -> usize {
        (self.nchans as usize).saturating_mul(self.nbits as usize / 8)
    }

    /// Checks every key a reader relies on; the first violation is `InvalidConfig` naming
    /// the key and the value (the rules are in the module docs).
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::InvalidConfig(format!("filterbank header: {message}")));
        check_string("source_name", &self.source_name)?;
        if let Some(raw) = &self.rawdatafile {
            check_string("rawdatafile", raw)?;
        }
        for (key, value) in [
            ("telescope_id", self.telescope_id),
            ("machine_id", self.machine_id),
            ("nchans", self.nchans),
            ("nbeams", self.nbeams),
            ("ibeam", self.ibeam),
        ] {
            if value > i32::MAX as u32 {
                return bad(format!("{key} {value} exceeds i32::MAX (SIGPROC reads it as a C int)"));
            }
        }
        let mut doubles = vec![("src_raj", self.src_raj), ("src_dej", self.src_dej), ("tstart", self.tstart)];
        doubles.extend([("tsamp", self.tsamp), ("fch1", self.fch1), ("foff", self.foff)]);
        doubles.extend(self.az_start.map(|v| ("az_start", v)));
        doubles.extend(self.za_start.map(|v| ("za_start", v)));
        if let Some((key, value)) = doubles.iter().find(|(_, v)| !v.is_finite()) {
            return bad(format!("{key} is {value}, not finite"));
        }
        if self.nbits != 8 && self.nbits != 32 {
            return bad(format!("nbits must be 8 (unsigned bytes) or 32 (f32), got {}", self.nbits));
        }
        if self.nchans == 0 {
            return bad("nchans must be at least 1".into());
        }
        if self.nbeams == 0 || self.ibeam >= self.nbeams {
            return bad(format!(
                "ibeam must be below nbeams (>= 1), got ibeam {} of {}",
                self.ibeam, self.nbeams
            ));
        }
        if self.tsamp <= 0.0 {
            return bad(format!("tsamp must be positive, got {}", self.tsamp));
        }
        if self.tstart <= 0.0 {
            return bad(format!("tstart (MJD) must be positive, got {}", self.tstart));
        }
        if self.foff == 0.0 {
            return bad("foff must be non-zero".into());
        }
        let last = self.channel_frequency(self.nchans - 1);
        if self.fch1 <= 0.0 || !last.is_finite() || last <= 0.0 {
            return bad(format!(
                "channel frequencies must be positive and finite: fch1 {} MHz, last channel {last} MHz",
                self.fch1
            ));
        }
        if !sexagesimal_ok(self.src_raj, 24.0) {
            return bad(format!("src_raj {} is not a packed hhmmss.s right ascension", self.src_raj));
        }
        if !sexagesimal_ok(self.src_dej, 90.0) {
            return bad(format!("src_dej {} is not a packed ddmmss.s declination", self.src_dej));
        }
        if let Some(az) = self.az_start.filter(|az| !(0.0..=360.0).contains(az)) {
            return bad(format!("az_start must be in [0, 360] degrees, got {az}"));
        }
        if let Some(za) = self.za_start.filter(|za| !(0.0..=180.0).contains(za)) {
            return bad(format!("za_start must be in [0, 180] degrees, got {za}"));
        }
        Ok(())
    }

    /// The header's bytes, `HEADER_START` to `HEADER_END`, after [`validate`](Self::validate).
    /// Keys in SIGPROC's own order.
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let mut out = Vec::with_capacity(512);
        put_str(&mut out, "HEADER_START");
        if let Some(raw) = &self.rawdatafile {
            put_key(&mut out, "rawdatafile");
            put_str(&mut out, raw);
        }
        put_key(&mut out, "source_name");
        put_str(&mut out, &self.source_name);
        put_int(&mut out, "machine_id", self.machine_id);
        put_int(&mut out, "telescope_id", self.telescope_id);
        put_double(&mut out, "src_raj", self.src_raj);
        put_double(&mut out, "src_dej", self.src_dej);
        if let Some(az) = self.az_start {
            put_double(&mut out, "az_start", az);
        }
        if let Some(za) = self.za_start {
            put_double(&mut out, "za_start", za);
        }
        put_int(&mut out, "data_type", DATA_TYPE_FILTERBANK);
        put_double(&mut out, "fch1", self.fch1);
        put_double(&mut out, "foff", self.foff);
        put_int(&mut out, "nchans", self.nchans);
        put_int(&mut out, "nbeams", self.nbeams);
        put_int(&mut out, "ibeam", self.ibeam);
        put_int(&mut out, "nbits", self.nbits);
        put_double(&mut out, "tstart", self.tstart);
        put_double(&mut out, "tsamp", self.tsamp);
        put_int(&mut out, "nifs", NIFS);
        put_str(&mut out, "HEADER_END");
        Ok(out)
    }
}

fn check_string(key: &str, value: &str) -> Result<()> {
    if value.is_empty() || value.len() > MAX_STRING_BYTES || !value.bytes().all(|b| (0x20..0x7f).contains(&b))
    {
        return Err(Error::InvalidConfig(format!(
            "filterbank header: {key} must be 1..={MAX_STRING_BYTES} printable ASCII bytes, got {value:?}"
        )));
    }
    Ok(())
}

/// Whether `packed` is a valid packed sexagesimal value (`hhmmss.s` for `max` 24, which must
/// be non-negative; signed `ddmmss.s` for `max` 90): minutes and seconds below 60, the head
/// below `max` (or exactly `max` with zero minutes and seconds, for declinations).
fn sexagesimal_ok(packed: f64, max: f64) -> bool {
    if max == 24.0 && packed < 0.0 {
        return false;
    }
    let v = packed.abs();
    let head = (v / 10000.0).floor();
    let rest = v - head * 10000.0;
    let minutes = (rest / 100.0).floor();
    let seconds = rest - minutes * 100.0;
    if !(minutes < 60.0 && seconds < 60.0) {
        return false;
    }
    head < max || (max == 90.0 && head == 90.0 && minutes == 0.0 && seconds == 0.0)
}

/// `x` (non-negative, in hours or degrees) as packed `hhmmss.ssssss`, to the microsecond.
fn pack_sexagesimal(x: f64) -> f64 {
    let micro = (x * 3600.0e6).round() as u64;
    let head = micro / 3_600_000_000;
    let minutes = micro / 60_000_000 % 60;
    let seconds = (micro % 60_000_000) as f64 / 1e6;
    head as f64 * 10000.0 + minutes as f64 * 100.0 + seconds
}

/// Right ascension `hours` in [0, 24) packed as SIGPROC's `src_raj` (`hhmmss.s`, rounded to
/// the microsecond of time; a value that rounds to 24h packs as 0). `InvalidConfig` outside
/// the range or non-finite.
pub fn pack_ra_hours(hours: f64) -> Result<f64> {
    if !(0.0..24.0).contains(&hours) {
        return Err(Error::InvalidConfig(format!("right ascension must be in [0, 24) hours, got {hours}")));
    }
    let packed = pack_sexagesimal(hours);
    Ok(if packed >= 240000.0 { 0.0 } else { packed })
}

/// Declination `degrees` in [-90, 90] packed as SIGPROC's `src_dej` (signed `ddmmss.s`,
/// rounded to the micro-arcsecond). `InvalidConfig` outside the range or non-finite.
pub fn pack_dec_degrees(degrees: f64) -> Result<f64> {
    if !(-90.0..=90.0).contains(&degrees) {
        return Err(Error::InvalidConfig(format!("declination must be in [-90, 90] degrees, got {degrees}")));
    }
    Ok(pack_sexagesimal(degrees.abs()).copysign(degrees))
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}
fn put_key(out: &mut Vec<u8>, key: &str) {
    put_str(out, key);
}
fn put_int(out: &mut Vec<u8>, key: &str, value: u32) {
    put_key(out, key);
    out.extend_from_slice(&value.to_le_bytes());
}
fn put_double(out: &mut Vec<u8>, key: &str, value: f64) {
    put_key(out, key);
    out.extend_from_slice(&value.to_le_bytes());
}

/// An I/O failure, with the operation that failed.
fn io_error(during: &str, error: std::io::Error) -> Error {
    Error::Io { during: during.to_string(), source: error }
}

/// The sample type of a block of spectra, for the checks shared by the writer and
/// [`write_file_u8`] / [`write_file_f32`].
fn check_block(header: &FilterbankHeader, len: usize, nbits: u32, f32_data: Option<&[f32]>) -> Result<()> {
    if header.nbits != nbits {
        let call = if header.nbits == 8 { "write_spectra_u8" } else { "write_spectra_f32" };
        return Err(Error::InvalidConfig(format!(
            "the filterbank header has nbits {}, so its samples are {}: write them with {call}, not {}-bit samples",
            header.nbits,
            if header.nbits == 8 { "u8" } else { "f32" },
            nbits
        )));
    }
    let nchans = header.nchans as usize;
    if !len.is_multiple_of(nchans) {
        return Err(Error::ShapeMismatch {
            what: "spectra ([time][channel], whole spectra of nchans samples)",
            expected: len.div_ceil(nchans) * nchans,
            actual: len,
        });
    }
    if let Some(index) = f32_data.and_then(|d| d.iter().position(|v| !v.is_finite())) {
        return Err(Error::NonFinite { what: "spectra", index });
    }
    Ok(())
}

/// Writes a SIGPROC filterbank stream to `W`: the header at creation, then blocks of whole
/// spectra. Wrap a file in a [`BufWriter`] (the writer issues one write per block, or per
/// 64 KiB of f32 samples).
pub struct FilterbankWriter<W: Write> {
    inner: W,
    header: FilterbankHeader,
    spectra: u64,
    failed: Option<String>,
}

impl<W: Write> FilterbankWriter<W> {
    /// Validates `header` ([`FilterbankHeader::validate`]) and writes it to `inner`.
    pub fn new(mut inner: W, header: FilterbankHeader) -> Result<FilterbankWriter<W>> {
        let bytes = header.encode()?;
        inner.write_all(&bytes).map_err(|e| io_error("writing the filterbank header", e))?;
        Ok(FilterbankWriter { inner, header, spectra: 0, failed: None })
    }

    /// The header written.
    pub fn header(&self) -> &FilterbankHeader {
        &self.header
    }

    /// Spectra written so far.
    pub fn spectra_written(&self) -> u64 {
        self.spectra
    }

    fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        if let Some(cause) = &self.failed {
            return Err(Error::InvalidConfig(format!(
                "the filterbank writer failed earlier ({cause}) and writes nothing more"
            )));
        }
        self.inner.write_all(bytes).map_err(|e| {
            let error = io_error("writing filterbank spectra", e);
            self.failed = Some(error.to_string());
            error
        })
    }

    /// Appends `data`, whole spectra `[time][channel]` of u8 samples (`nbits` 8): its length
    /// must be a multiple of `nchans` (`ShapeMismatch`), and `nbits` 32 is `InvalidConfig`.
    /// Nothing is written unless every check passes.
    pub fn write_spectra_u8(&mut self, data: &[u8]) -> Result<()> {
        check_block(&self.header, data.len(), 8, None)?;
        self.write_bytes(data)?;
        self.spectra += (data.len() / self.header.nchans as usize) as u64;
        Ok(())
    }

    /// Appends `data`, whole spectra `[time][channel]` of f32 samples (`nbits` 32), written
    /// little-endian: its length must be a multiple of `nchans` (`ShapeMismatch`), every
    /// value finite (`NonFinite`, the first bad index), and `nbits` 8 is `InvalidConfig`.
    /// Nothing is written unless every check passes.
    pub fn write_spectra_f32(&mut self, data: &[f32]) -> Result<()> {
        check_block(&self.header, data.len(), 32, Some(data))?;
        let mut bytes = Vec::with_capacity(data.len().min(16384) * 4);
        for chunk in data.chunks(16384) {
            bytes.clear();
            bytes.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
            self.write_bytes(&bytes)?;
        }
        self.spectra += (data.len() / self.header.nchans as usize) as u64;
        Ok(())
    }

    /// Flushes and returns the inner writer.
    pub fn into_inner(mut self) -> Result<W> {
        self.inner.flush().map_err(|e| io_error("flushing the filterbank file", e))?;
        Ok(self.inner)
    }
}

fn create(path: &Path) -> Result<BufWriter<File>> {
    let file = File::create(path).map_err(|e| io_error(&format!("creating {}", path.display()), e))?;
    Ok(BufWriter::new(file))
}

/// Writes a whole filterbank file of u8 spectra `[time][channel]` to `path` (created or
/// truncated). The header and data are checked before the file is created.
pub fn write_file_u8(path: impl AsRef<Path>, header: &FilterbankHeader, data: &[u8]) -> Result<()> {
    header.validate()?;
    check_block(header, data.len(), 8, None)?;
    let mut writer = FilterbankWriter::new(create(path.as_ref())?, header.clone())?;
    writer.write_spectra_u8(data)?;
    writer.into_inner().map(drop)
}

/// Writes a whole filterbank file of f32 spectra `[time][channel]` to `path` (created or
/// truncated). The header and data (finite values) are checked before the file is created.
pub fn write_file_f32(path: impl AsRef<Path>, header: &FilterbankHeader, data: &[f32]) -> Result<()> {
    header.validate()?;
    check_block(header, data.len(), 32, Some(data))?;
    let mut writer = FilterbankWriter::new(create(path.as_ref())?, header.clone())?;
    writer.write_spectra_f32(data)?;
    writer.into_inner().map(drop)
}

/// The samples of a filterbank file, `[time][channel]`.
#[derive(Clone, Debug, PartialEq)]
pub enum Spectra {
    /// `nbits` 8.
    U8(Vec<u8>),
    /// `nbits` 32.
    F32(Vec<f32>),
}

impl Spectra {
    /// Samples held (spectra times `nchans`).
    pub fn len(&self) -> usize {
        match self {
            Spectra::U8(v) => v.len(),
            Spectra::F32(v) => v.len(),
        }
    }
    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A filterbank file read back: its header, header length in bytes, and samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Filterbank {
    /// The header.
    pub header: FilterbankHeader,
    /// Bytes from the start of the file to the first sample.
    pub header_len: usize,
    /// The samples, `[time][channel]`.
    pub data: Spectra,
}

impl Filterbank {
    /// Spectra in the file.
    pub fn spectra(&self) -> usize {
        self.data.len() / self.header.nchans as usize
    }
}

fn not_filterbank(message: String) -> Error {
    Error::InvalidConfig(format!("not a SIGPROC filterbank file this reader takes: {message}"))
}

fn read_exact<R: Read>(reader: &mut R, buf: &mut [u8], what: &str) -> Result<()> {
    reader.read_exact(buf).map_err(|e| match e.kind() {
        ErrorKind::UnexpectedEof => not_filterbank(format!("the header ends inside {what}")),
        _ => io_error("reading the filterbank header", e),
    })
}

fn read_u32<R: Read>(reader: &mut R, what: &str) -> Result<u32> {
    let mut b = [0u8; 4];
    read_exact(reader, &mut b, what)?;
    Ok(u32::from_le_bytes(b))
}

fn read_f64<R: Read>(reader: &mut R, what: &str) -> Result<f64> {
    let mut b = [0u8; 8];
    read_exact(reader, &mut b, what)?;
    Ok(f64::from_le_bytes(b))
}

fn read_string<R: Read>(reader: &mut R, what: &str) -> Result<String> {
    let len = read_u32(reader, what)?;
    if len == 0 || len > MAX_READ_STRING {
        return Err(not_filterbank(format!("{what} has implausible length {len}")));
    }
    let mut b = vec![0u8; len as usize];
    read_exact(reader, &mut b, what)?;
    String::from_utf8(b).map_err(|_| not_filterbank(format!("{what} is not UTF-8")))
}

/// Reads a SIGPROC header from `reader` (left at the first sample) and returns it with its
/// length in bytes. Takes the keys this module writes, and skips SIGPROC's other numeric
/// keys (`nsamples`, `barycentric`, `pulsarcentric`, `refdm`, `period`, `signed`); any other
/// key, a missing required key, `data_type` other than 1 or `nifs` other than 1 is
/// `InvalidConfig`, and the header must pass [`FilterbankHeader::validate`].
pub fn read_header<R: Read>(reader: &mut R) -> Result<(FilterbankHeader, usize)> {
    let first = read_string(reader, "HEADER_START")?;
    if first != "HEADER_START" {
        return Err(not_filterbank(format!("it starts with {first:?}, not HEADER_START")));
    }
    let mut len = 4 + first.len();
    let mut header = FilterbankHeader::new(String::new(), 0.0, 0.0, 0, 0.0, 0.0, 0);
    let mut seen: Vec<String> = Vec::new();
    loop {
        let key = read_string(reader, "a header key")?;
        len += 4 + key.len();
        if key == "HEADER_END" {
            break;
        }
        if seen.contains(&key) {
            return Err(not_filterbank(format!("key {key} appears twice")));
        }
        match key.as_str() {
            "source_name" | "rawdatafile" => {
                let value = read_string(reader, &key)?;
                len += 4 + value.len();
                if key == "source_name" {
                    header.source_name = value;
                } else {
                    header.rawdatafile = Some(value);
                }
            }
            "telescope_id" | "machine_id" | "data_type" | "nchans" | "nbits" | "nifs" | "nbeams"
            | "ibeam" | "nsamples" | "barycentric" | "pulsarcentric" => {
                let value = read_u32(reader, &key)?;
                len += 4;
                match key.as_str() {
                    "telescope_id" => header.telescope_id = value,
                    "machine_id" => header.machine_id = value,
                    "nchans" => header.nchans = value,
                    "nbits" => header.nbits = value,
                    "nbeams" => header.nbeams = value,
                    "ibeam" => header.ibeam = value,
                    "data_type" if value != DATA_TYPE_FILTERBANK => {
                        return Err(not_filterbank(format!("data_type is {value}, not 1 (filterbank)")));
                    }
                    "nifs" if value != NIFS => {
                        return Err(not_filterbank(format!("nifs is {value}; only 1 IF is read")));
                    }
                    _ => {}
                }
            }
            "src_raj" | "src_dej" | "az_start" | "za_start" | "tstart" | "tsamp" | "fch1" | "foff"
            | "refdm" | "period" => {
                let value = read_f64(reader, &key)?;
                len += 8;
                match key.as_str() {
                    "src_raj" => header.src_raj = value,
                    "src_dej" => header.src_dej = value,
                    "az_start" => header.az_start = Some(value),
                    "za_start" => header.za_start = Some(value),
                    "tstart" => header.tstart = value,
                    "tsamp" => header.tsamp = value,
                    "fch1" => header.fch1 = value,
                    "foff" => header.foff = value,
                    _ => {}
                }
            }
            "signed" => {
                let mut b = [0u8; 1];
                read_exact(reader, &mut b, "signed")?;
                len += 1;
            }
            _ => return Err(not_filterbank(format!("unknown header key {key:?}"))),
        }
        seen.push(key);
    }
    for required in ["source_name", "fch1", "foff", "nchans", "nbits", "tsamp", "tstart"] {
        if !seen.iter().any(|k| k == required) {
            return Err(not_filterbank(format!("the header has no {required}")));
        }
    }
    header.validate()?;
    Ok((header, len))
}

/// Reads a whole filterbank file: [`read_header`], then the samples to the end. A data
/// length that is not whole spectra is `ShapeMismatch` (in bytes).
pub fn read_filterbank<R: Read>(mut reader: R) -> Result<Filterbank> {
    let (header, header_len) = read_header(&mut reader)?;
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(|e| io_error("reading filterbank samples", e))?;
    let spectrum = header.spectrum_bytes();
    if !bytes.len().is_multiple_of(spectrum) {
        return Err(Error::ShapeMismatch {
            what: "filterbank data bytes (whole spectra)",
            expected: bytes.len().div_ceil(spectrum) * spectrum,
            actual: bytes.len(),
        });
    }
    let data = match header.nbits {
        8 => Spectra::U8(bytes),
        _ => Spectra::F32(
            bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        ),
    };
    Ok(Filterbank { header, header_len, data })
}

/// Reads the filterbank file at `path` ([`read_filterbank`]).
pub fn read_file(path: impl AsRef<Path>) -> Result<Filterbank> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| io_error(&format!("opening {}", path.display()), e))?;
    read_filterbank(std::io::BufReader::new(file))
}

/// Beam `beam` of the FRB quantiser's codes `q` (`Q[f][beta][row_bytes]`, the layout of
/// [`QuantizeConfig::output_len`]) as spectra `[tbar][f]` of one byte per code (4-bit codes
/// unpacked, earlier tbar from the low nibble). `InvalidConfig` for a bad `config` or a beam
/// out of range, `ShapeMismatch` for `q` of the wrong length.
pub fn frb_beam_spectra(config: &QuantizeConfig, q: &[u8], beam: u32) -> Result<Vec<u8>> {
    config.validate()?;
    if q.len() != config.output_len() {
        return Err(Error::ShapeMismatch { what: "Q", expected: config.output_len(), actual: q.len() });
    }
    if beam >= config.beams {
        return Err(Error::InvalidConfig(format!("beam {beam} of {} FRB beams", config.beams)));
    }
    let (f_len, t_len, b_len) = (config.channels as usize, config.times as usize, config.beams as usize);
    let row = config.row_bytes() as usize;
    let mut out = vec![0u8; f_len * t_len];
    for f in 0..f_len {
        let codes = &q[(f * b_len + beam as usize) * row..][..row];
        for t in 0..t_len {
            out[t * f_len + f] = match config.format {
                Format::U8 => codes[t],
                Format::U4 => (codes[t / 2] >> (4 * (t % 2))) & 15,
            };
        }
    }
    Ok(out)
}

/// Beam `beam` of the delay beamformer's output `y` (complex int8 `[beam][channel][time]`,
/// [`DelayBeamformerConfig::output_index`]) as power spectra `|y|^2` f32 `[time][channel]`.
/// `InvalidConfig` for a bad `config` or a beam out of range, `ShapeMismatch` for `y` of the
/// wrong length.
pub fn delay_beam_power(config: &DelayBeamformerConfig, y: &[Complex<i8>], beam: u32) -> Result<Vec<f32>> {
    config.validate()?;
    if y.len() != config.output_len() {
        return Err(Error::ShapeMismatch { what: "y", expected: config.output_len(), actual: y.len() });
    }
    if beam as usize >= config.beams.len() {
        return Err(Error::InvalidConfig(format!("beam {beam} of {} delay beams", config.beams.len())));
    }
    let (c_len, t_len) = (config.channels as usize, config.times as usize);
    let mut out = vec![0f32; c_len * t_len];
    for c in 0..c_len {
        let samples = &y[config.output_index(beam, c as u32, 0)..][..t_len];
        for (t, s) in samples.iter().enumerate() {
            let (re, im) = (s.re as i32, s.im as i32);
            out[t * c_len + c] = (re * re + im * im) as f32;
        }
    }
    Ok(out)
}

/// The path of beam `beam`'s file in `dir`: `beam_{beam:04}.fil`.
pub fn beam_path(dir: impl AsRef<Path>, beam: u32) -> PathBuf {
    dir.as_ref().join(format!("beam_{beam:04}.fil"))
}

/// Checks `header` as the template of `beams` beam files of `nchans` channels and `nbits`,
/// and returns it with `nbeams` set.
fn beam_template(header: &FilterbankHeader, beams: u32, nchans: u32, nbits: u32) -> Result<FilterbankHeader> {
    if header.nchans != nchans {
        return Err(Error::InvalidConfig(format!(
            "the filterbank header has nchans {}, but the beams have {nchans} channels",
            header.nchans
        )));
    }
    if header.nbits != nbits {
        return Err(Error::InvalidConfig(format!(
            "these beams are written with nbits {nbits}, but the filterbank header has nbits {}",
            header.nbits
        )));
    }
    let template = FilterbankHeader { nbeams: beams, ibeam: 0, ..header.clone() };
    template.validate()?;
    Ok(template)
}

fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| io_error(&format!("creating {}", dir.display()), e))
}

/// Writes every FRB beam of the quantiser's codes `q` (`Q[f][beta][row_bytes]`) to its own
/// file in `dir` (created if missing; existing beam files are overwritten), as
/// [`frb_beam_spectra`]: `[tbar][f]` 8-bit codes. `header` is the template: `nchans` must be
/// `config.channels`, `nbits` 8, `tsamp` the tbar sample time, `fch1` channel f = 0's
/// frequency; each file gets `nbeams = config.beams` and `ibeam` its beam. Everything is
/// checked before a file is created. Returns the paths, in beam order.
pub fn write_frb_beams(
    dir: impl AsRef<Path>,
    header: &FilterbankHeader,
    config: &QuantizeConfig,
    q: &[u8],
) -> Result<Vec<PathBuf>> {
    config.validate()?;
    if q.len() != config.output_len() {
        return Err(Error::ShapeMismatch { what: "Q", expected: config.output_len(), actual: q.len() });
    }
    let template = beam_template(header, config.beams, config.channels, 8)?;
    let dir = dir.as_ref();
    create_dir(dir)?;
    (0..config.beams)
        .map(|beam| {
            let path = beam_path(dir, beam);
            let spectra = frb_beam_spectra(config, q, beam)?;
            write_file_u8(&path, &FilterbankHeader { ibeam: beam, ..template.clone() }, &spectra)?;
            Ok(path)
        })
        .collect()
}

/// Writes the power `|y|^2` of every delay-beamformer beam of `y` (complex int8
/// `[beam][channel][time]`) to its own file in `dir` (created if missing; existing beam
/// files are overwritten), as [`delay_beam_power`]: `[time][channel]` f32. `header` is the
/// template: `nchans` must be `config.channels`, `nbits` 32, `tsamp` the channel sample
/// time, `fch1` the launch's channel 0's frequency; each file gets `nbeams` the beam count
/// and `ibeam` its beam. Everything is checked before a file is created. Returns the paths,
/// in beam order.
pub fn write_delay_beams(
    dir: impl AsRef<Path>,
    header: &FilterbankHeader,
    config: &DelayBeamformerConfig,
    y: &[Complex<i8>],
) -> Result<Vec<PathBuf>> {
    config.validate()?;
    if y.len() != config.output_len() {
        return Err(Error::ShapeMismatch { what: "y", expected: config.output_len(), actual: y.len() });
    }
    let template = beam_template(header, config.beams.len() as u32, config.channels, 32)?;
    let dir = dir.as_ref();
    create_dir(dir)?;
    (0..config.beams.len() as u32)
        .map(|beam| {
            let path = beam_path(dir, beam);
            let power = delay_beam_power(config, y, beam)?;
            write_file_f32(&path, &FilterbankHeader { ibeam: beam, ..template.clone() }, &power)?;
            Ok(path)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_positions() {
        assert_eq!(pack_ra_hours(12.5).unwrap(), 123000.0);
        assert!((pack_ra_hours(5.0 + 34.0 / 60.0 + 31.97 / 3600.0).unwrap() - 53431.97).abs() < 1e-6);
        // 22d 0.5' 52.1" is 22d 1' 22.1".
        assert!((pack_dec_degrees(-(22.0 + 0.5 / 60.0 + 52.1 / 3600.0)).unwrap() + 220122.1).abs() < 1e-6);
        assert!((pack_dec_degrees(-(22.0 + 52.1 / 3600.0)).unwrap() + 220052.1).abs() < 1e-6);
        assert_eq!(pack_dec_degrees(90.0).unwrap(), 900000.0);
        assert_eq!(pack_ra_hours(24.0 - 1e-12).unwrap(), 0.0);
        assert!(sexagesimal_ok(pack_ra_hours(24.0 - 1e-9).unwrap(), 24.0));
        for bad in [24.0, -0.1, f64::NAN] {
            assert!(matches!(pack_ra_hours(bad), Err(Error::InvalidConfig(_))), "{bad}");
        }
        assert!(matches!(pack_dec_degrees(90.5), Err(Error::InvalidConfig(_))));
        assert!(!sexagesimal_ok(126000.0, 24.0));
        assert!(!sexagesimal_ok(-10000.0, 24.0));
        assert!(!sexagesimal_ok(900001.0, 90.0));
        assert!(sexagesimal_ok(-895959.9, 90.0));
    }
}
