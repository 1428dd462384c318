//! UVH5 output of integrated visibilities: the HDF5 format of pyuvdata, as specified by
//! pyuvdata's UVH5 memo (format version 1.2, the one pyuvdata 3.x writes) and read by
//! `pyuvdata.UVData.from_file`.
//!
//! # File layout
//!
//! `/Header` holds the metadata, `/Data` the three arrays of shape `(Nblts, Nfreqs, Npols)`:
//! `visdata` (complex f64, h5py's compound `{r, i}`), `flags` (bool, h5py's enum) and
//! `nsamples` (f32). Baseline-times are time-major (`blt = t * Nbls + b`, the `blt_order`
//! `"time, baseline"`, rectangular), and every pair `i >= j` of the correlator, autos
//! included, is one baseline: `Nbls = n (n + 1) / 2`, `Nants_data = Nants_telescope = n`.
//!
//! Header datasets written: `version` ("1.2"), `telescope_name`, `telescope_frame` ("itrs"),
//! `latitude`, `longitude` (degrees, geodetic WGS84) and `altitude` (m), `instrument`,
//! `Nants_telescope`, `antenna_names`, `antenna_numbers`, `antenna_positions` (ECEF offsets
//! from the telescope location, m, shape `(Nants, 3)`), `x_orientation` (linear feeds only),
//! `Nants_data`, `Nbls`, `Nblts`, `Ntimes`, `Nfreqs`, `Npols`, `Nspws` (1), `ant_1_array`,
//! `ant_2_array`, `uvw_array`, `time_array` (JD, centre of the integration),
//! `integration_time` (s), `lst_array` (radians; only when the caller gives LSTs, see below),
//! `freq_array` (Hz, channel centres), `channel_width` (Hz, one per channel), `spw_array`
//! (`[0]`), `flex_spw_id_array` (zeros), `polarization_array`, `vis_units` ("uncalib"),
//! `history`, `blt_order`, `blts_are_rectangular`, `time_axis_faster_than_bls`, and the
//! phase-centre catalog of an unprojected (drift-scan) observation as pyuvdata 3 writes it:
//! `Nphase` = 1, `phase_center_id_array` (zeros), group `phase_center_catalog/0` with
//! `cat_name` = `cat_type` = "unprojected", `cat_frame` = "altaz", `cat_lon` = 0,
//! `cat_lat` = pi/2, `info_source` = "user", and `phase_center_app_ra` (the LST),
//! `phase_center_app_dec` (the latitude) and `phase_center_frame_pa` (0).
//!
//! # Conjugation and baseline sign
//!
//! pyuvdata's `uvw_array` convention is `uvw = xyz(ant2) - xyz(ant1)` (pyuvdata's `UVData`
//! parameter documentation: the Miriad convention, opposite to AIPS/FITS), and its phasing
//! (`UVData.phase`, `_apply_w_proj`) multiplies the data by `exp(-2 pi i (w_new - w_old) f /
//! c)`. A visibility that `phase` flattens toward a source in direction `s` is therefore
//! `V(ant1, ant2) ∝ exp(+2 pi i f (x_ant2 - x_ant1) . s / c)`.
//!
//! Our correlator computes `V[c][b(i,j)][pi][pj] = sum_t x_i conj(x_j)` for `i >= j`, and a
//! source in direction `s` reaches antenna `d` earlier by `r_d . s / c`, so its channelised
//! voltage is `S(f) exp(+2 pi i f r_d . s / c)` (upper sideband, no spectral inversion in the
//! analogue chain; the demo's sky model uses the same convention). Hence
//! `V_ij ∝ exp(+2 pi i f (r_i - r_j) . s / c)`, which is pyuvdata's `V(ant1 = j, ant2 = i)`
//! **without** conjugation. The writer stores each correlator baseline `(i, j)` as
//! `ant_1 = antenna_numbers[j]`, `ant_2 = antenna_numbers[i]` (so `ant_1 <= ant_2` in
//! index order, pyuvdata's preferred ordering), the value `V_ij` unchanged, and
//! `uvw = ENU(r_i - r_j)`: for unprojected data pyuvdata's uvw is the baseline in the local
//! east-north-up frame (u east, v north, w up), which is what `set_uvws_from_antenna_positions`
//! computes for the unprojected phase centre. A band that is spectrally inverted (lower
//! sideband) has the opposite sign: conjugate the visibilities before writing.
//!
//! Polarisations follow AIPS Memo 117 as pyuvdata does: the first letter is the feed of
//! `ant1`, the second that of `ant2`. Correlator pol index 0 is X (or R), 1 is Y (or L), so
//! pyuvdata's `XY` (-7) of baseline `(j, i)` is our `V_ij[pi = 1][pj = 0]` and `YX` (-8) is
//! `[pi = 0][pj = 1]`. The file's polarisation axis is `XX, YY, XY, YX` (-5, -6, -7, -8;
//! circular: `RR, LL, RL, LR`, -1 ..= -4), or `XX` alone for one polarisation.
//!
//! # Values
//!
//! Integer sums (`Complex<i64>` from the integrating engine, `Complex<i32>` from one launch)
//! are stored as f64, exact up to `2^53` in magnitude; a larger part is refused
//! ([`Error::InvalidConfig`], its message naming the value and `2^53`) rather than rounded.
//! Float input must be finite ([`Error::NonFinite`]). Flags and
//! nsamples are per integration, channel and baseline (data lost in the F-engine or the
//! network affects the baselines of the dishes that lost it), the same for every
//! polarisation product.
//!
//! # Errors
//!
//! Every call returns the crate's [`Error`], and everything is checked before the file is
//! created: `InvalidConfig` for metadata out of range (`"UVH5 metadata: ..."`, naming the
//! field), for an integer part beyond `2^53` and for a negative nsamples; `ShapeMismatch` for
//! an input of the wrong length; `NonFinite` for a NaN or infinite float (its index); and `Io`
//! for a failure of the HDF5 library, `during` naming the step and the file ("writing the UVH5
//! dataset /Data/visdata of out.uvh5"), its source the HDF5 error stack.
//!
//! # LST
//!
//! pyuvdata checks a file's `lst_array` against its own astropy LST (UT1, with IERS tables) to
//! 5 ms, which no self-contained formula here can promise; when [`Uvh5Metadata::lst_rad`] is
//! `None` the writer leaves `lst_array` out (pyuvdata computes it on read) and fills the
//! unprojected `phase_center_app_ra` with [`approximate_lst`] (IAU 2006 GMST with UT1 = UTC,
//! good to about 2 s of time), which `phase` does not use. Pass exact LSTs (for example from
//! astropy) to write `lst_array` too.
use crate::{Complex, Error, Result};
use hdf5::types::FixedAscii;
use std::path::Path;

/// Latitude of the nominal CHORD site at the Dominion Radio Astrophysical Observatory (DRAO),
/// Penticton, BC, in degrees north (geodetic, WGS84). Nominal: replace it with the surveyed
/// array centre.
pub const DRAO_LATITUDE_DEG: f64 = 49.3207;
/// Longitude of the nominal CHORD site at DRAO, in degrees east (negative: west).
pub const DRAO_LONGITUDE_DEG: f64 = -119.6237;
/// Altitude of the nominal CHORD site at DRAO, metres above the WGS84 ellipsoid.
pub const DRAO_ALTITUDE_M: f64 = 545.0;

/// Largest magnitude an integer part may have to be stored exactly as f64 (`2^53`).
pub const EXACT_LIMIT: i64 = 1 << 53;

/// An HDF5 failure while `during` (a phrase naming the dataset and the file), as the crate's
/// [`Error::Io`] with the HDF5 error stack as its source.
fn hdf5_error(during: impl FnOnce() -> String) -> impl FnOnce(hdf5::Error) -> Error {
    move |e| Error::Io { during: during(), source: std::io::Error::other(e) }
}

/// `Error::InvalidConfig` for bad metadata, the message prefixed `UVH5 metadata: `.
fn invalid_metadata(message: String) -> Error {
    Error::InvalidConfig(format!("UVH5 metadata: {message}"))
}

/// The feeds of the two correlator polarisations: index 0 is X (R), index 1 is Y (L).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedBasis {
    /// Linear feeds X, Y: polarisations XX, YY, XY, YX (-5 ..= -8).
    Linear,
    /// Circular feeds R, L: polarisations RR, LL, RL, LR (-1 ..= -4).
    Circular,
}

/// Metadata of a UVH5 file: the telescope, the antennas, the band and the integrations.
///
/// Build it with [`Uvh5Metadata::chord_drao`] or by hand, and check it with
/// [`validate`](Uvh5Metadata::validate) (the writer does too).
#[derive(Clone, Debug, PartialEq)]
pub struct Uvh5Metadata {
    /// Telescope name (pyuvdata's `telescope_name`), non-empty.
    pub telescope_name: String,
    /// Instrument (back-end) name, non-empty.
    pub instrument: String,
    /// Telescope location: geodetic latitude in degrees, -90 ..= 90.
    pub latitude_deg: f64,
    /// Telescope location: longitude in degrees east, -180 ..= 180.
    pub longitude_deg: f64,
    /// Telescope location: altitude above the WGS84 ellipsoid, metres.
    pub altitude_m: f64,
    /// One unique non-empty name per correlator input (station), in station order.
    pub antenna_names: Vec<String>,
    /// One unique number per station, 0 ..= 2^31 - 1 (pyuvdata's `antenna_numbers`).
    pub antenna_numbers: Vec<u32>,
    /// Station positions as ECEF (ITRS) offsets from the telescope location, metres
    /// ([`enu_to_ecef`] converts east-north-up offsets).
    pub antenna_positions_ecef: Vec<[f64; 3]>,
    /// Channel centre frequencies, Hz, one per correlator channel, positive.
    pub freq_hz: Vec<f64>,
    /// Channel width, Hz, non-zero (negative for a descending band, as pyuvdata allows).
    pub channel_width_hz: f64,
    /// Julian dates (UTC) of the centres of the integrations, one per integration.
    pub times_jd: Vec<f64>,
    /// Integration time, seconds, positive.
    pub integration_time_s: f64,
    /// Local apparent sidereal time (radians, 0 ..= 2 pi) at each integration centre, or
    /// `None` to leave `lst_array` out (pyuvdata computes it on read).
    pub lst_rad: Option<Vec<f64>>,
    /// Polarisations per station, 1 or 2 (the correlator's `pols`).
    pub pols: u32,
    /// Feed basis of the polarisations.
    pub feed_basis: FeedBasis,
    /// Direction of the X feed, "east" or "north" (linear feeds; pyuvdata's `x_orientation`).
    pub x_orientation: String,
    /// Free-form history; the writer appends a line naming itself.
    pub history: String,
}

impl Uvh5Metadata {
    /// Metadata for CHORD at DRAO (the nominal site constants of this module): stations named
    /// `"A000"`, `"A001"`, ... numbered from 0, at `positions_enu` (east, north, up offsets
    /// from the site, metres), linear feeds with X east, two polarisations.
    pub fn chord_drao(
        positions_enu: &[[f64; 3]],
        freq_hz: Vec<f64>,
        channel_width_hz: f64,
        times_jd: Vec<f64>,
        integration_time_s: f64,
    ) -> Uvh5Metadata {
        let n = positions_enu.len();
        Uvh5Metadata {
            telescope_name: "CHORD".into(),
            instrument: "radio-kernels".into(),
            latitude_deg: DRAO_LATITUDE_DEG,
            longitude_deg: DRAO_LONGITUDE_DEG,
            altitude_m: DRAO_ALTITUDE_M,
            antenna_names: (0..n).map(|k| format!("A{k:03}")).collect(),
            antenna_numbers: (0..n as u32).collect(),
            antenna_positions_ecef: positions_enu
                .iter()
                .map(|p| enu_to_ecef(DRAO_LATITUDE_DEG, DRAO_LONGITUDE_DEG, *p))
                .collect(),
            freq_hz,
            channel_width_hz,
            times_jd,
            integration_time_s,
            lst_rad: None,
            pols: 2,
            feed_basis: FeedBasis::Linear,
            x_orientation: "east".into(),
            history: String::new(),
        }
    }

    /// Stations (antennas).
    pub fn stations(&self) -> usize {
        self.antenna_names.len()
    }
    /// Baselines including autos, `n (n + 1) / 2`.
    pub fn baselines(&self) -> usize {
        let n = self.stations();
        n * (n + 1) / 2
    }
    /// Elements of the visibility input: `times * channels * baselines * pols^2`.
    pub fn vis_len(&self) -> usize {
        let p = self.pols as usize;
        self.times_jd.len() * self.freq_hz.len() * self.baselines() * p * p
    }

    /// Checks every field; returns [`Error::InvalidConfig`] (`"UVH5 metadata: ..."`) naming the
    /// first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(invalid_metadata(m));
        for (what, s) in [("telescope_name", &self.telescope_name), ("instrument", &self.instrument)] {
            if s.is_empty() || s.len() > 1024 || !s.is_ascii() || s.contains('\0') {
                return bad(format!("{what} must be 1 ..= 1024 ASCII characters without NUL"));
            }
        }
        if !(self.latitude_deg.is_finite() && self.latitude_deg.abs() <= 90.0) {
            return bad(format!("latitude_deg {} is not in -90 ..= 90", self.latitude_deg));
        }
        if !(self.longitude_deg.is_finite() && self.longitude_deg.abs() <= 180.0) {
            return bad(format!("longitude_deg {} is not in -180 ..= 180", self.longitude_deg));
        }
        if !(self.altitude_m.is_finite() && self.altitude_m.abs() < 1e5) {
            return bad(format!("altitude_m {} is not a terrestrial altitude", self.altitude_m));
        }
        let n = self.antenna_names.len();
        if n == 0 || n > 65535 {
            return bad(format!("{n} stations: expected 1 ..= 65535"));
        }
        if self.antenna_numbers.len() != n || self.antenna_positions_ecef.len() != n {
            return bad(format!(
                "{n} antenna_names but {} antenna_numbers and {} antenna_positions_ecef",
                self.antenna_numbers.len(),
                self.antenna_positions_ecef.len()
            ));
        }
        let mut names = std::collections::HashSet::new();
        for name in &self.antenna_names {
            if name.is_empty()
                || name.len() > 1024
                || !name.is_ascii()
                || name.contains('\0')
                || !names.insert(name)
            {
                return bad(format!(
                    "antenna name {name:?} is empty, too long, not ASCII, has a NUL or is repeated"
                ));
            }
        }
        let mut numbers = std::collections::HashSet::new();
        for &a in &self.antenna_numbers {
            if a > i32::MAX as u32 || !numbers.insert(a) {
                return bad(format!("antenna number {a} is above 2^31 - 1 or repeated"));
            }
        }
        for (k, p) in self.antenna_positions_ecef.iter().enumerate() {
            if !p.iter().all(|x| x.is_finite() && x.abs() < 1e7) {
                return bad(format!("antenna_positions_ecef[{k}] = {p:?} is not finite or too far"));
            }
        }
        if self.freq_hz.is_empty() || self.freq_hz.len() > 65535 {
            return bad(format!("{} channels: expected 1 ..= 65535", self.freq_hz.len()));
        }
        if let Some(k) = self.freq_hz.iter().position(|f| !(f.is_finite() && *f > 0.0)) {
            return bad(format!("freq_hz[{k}] = {} is not a positive frequency", self.freq_hz[k]));
        }
        if !(self.channel_width_hz.is_finite() && self.channel_width_hz != 0.0) {
            return bad(format!("channel_width_hz {} must be finite and non-zero", self.channel_width_hz));
        }
        if self.times_jd.is_empty() {
            return bad("no integrations (times_jd is empty)".into());
        }
        // JD 2000000 is 812 CE, JD 3000000 is 3501 CE.
        if let Some(k) = self.times_jd.iter().position(|t| !(t.is_finite() && (2.0e6..3.0e6).contains(t))) {
            return bad(format!("times_jd[{k}] = {} is not a Julian date", self.times_jd[k]));
        }
        if !(self.integration_time_s.is_finite() && self.integration_time_s > 0.0) {
            return bad(format!("integration_time_s {} must be positive", self.integration_time_s));
        }
        if let Some(lst) = &self.lst_rad {
            if lst.len() != self.times_jd.len() {
                return bad(format!("{} lst_rad for {} times_jd", lst.len(), self.times_jd.len()));
            }
            let two_pi = 2.0 * std::f64::consts::PI;
            if let Some(k) = lst.iter().position(|x| !(x.is_finite() && (0.0..=two_pi).contains(x))) {
                return bad(format!("lst_rad[{k}] = {} is not in 0 ..= 2 pi", lst[k]));
            }
        }
        if !matches!(self.pols, 1 | 2) {
            return bad(format!("pols {} must be 1 or 2", self.pols));
        }
        if self.feed_basis == FeedBasis::Linear && !matches!(self.x_orientation.as_str(), "east" | "north") {
            return bad(format!("x_orientation {:?} must be \"east\" or \"north\"", self.x_orientation));
        }
        if self.history.len() > MAX_STRING - 256 || !self.history.is_ascii() || self.history.contains('\0') {
            return bad(format!("history must be ASCII without NUL, at most {} bytes", MAX_STRING - 256));
        }
        if self.vis_len() == 0 || self.times_jd.len().checked_mul(self.baselines()).is_none() {
            return bad("the visibility array would be empty or too large".into());
        }
        Ok(())
    }

    /// The file's polarisation axis as `(code, pi, pj)`: the AIPS Memo 117 code and the
    /// correlator indices that hold it for baseline `(ant1 = j, ant2 = i)`.
    pub fn polarizations(&self) -> Vec<(i64, usize, usize)> {
        let base = match self.feed_basis {
            FeedBasis::Linear => -5,
            FeedBasis::Circular => -1,
        };
        if self.pols == 1 {
            return vec![(base, 0, 0)];
        }
        // (ant1 feed, ant2 feed) = (pj, pi): XX, YY, XY, YX.
        vec![(base, 0, 0), (base - 1, 1, 1), (base - 2, 1, 0), (base - 3, 0, 1)]
    }
}

/// Rotates an east-north-up offset (metres) at geodetic `lat_deg`, `lon_deg` into an ECEF
/// offset (the frame of UVH5's `antenna_positions`).
pub fn enu_to_ecef(lat_deg: f64, lon_deg: f64, enu: [f64; 3]) -> [f64; 3] {
    let (sl, cl) = lat_deg.to_radians().sin_cos();
    let (so, co) = lon_deg.to_radians().sin_cos();
    let [e, n, u] = enu;
    [-so * e - sl * co * n + cl * co * u, co * e - sl * so * n + cl * so * u, cl * n + sl * u]
}

/// Rotates an ECEF offset (metres) at geodetic `lat_deg`, `lon_deg` into east-north-up.
pub fn ecef_to_enu(lat_deg: f64, lon_deg: f64, xyz: [f64; 3]) -> [f64; 3] {
    let (sl, cl) = lat_deg.to_radians().sin_cos();
    let (so, co) = lon_deg.to_radians().sin_cos();
    let [x, y, z] = xyz;
    [-so * x + co * y, -sl * co * x - sl * so * y + cl * z, cl * co * x + cl * so * y + sl * z]
}

/// Local mean sidereal time (radians, 0 .. 2 pi) at Julian date `jd_utc` and longitude
/// `lon_deg`: the IAU 2006 GMST (Earth rotation angle plus the precession polynomial), taking
/// UT1 = UTC and TT = UTC + 69.184 s, without the equation of the equinoxes; good to about
/// 2 s of time (1.5e-4 rad) in this century.
pub fn approximate_lst(jd_utc: f64, lon_deg: f64) -> f64 {
    let du = jd_utc - 2_451_545.0;
    let era = 2.0 * std::f64::consts::PI * (0.779_057_273_264 + 1.002_737_811_911_354_5 * du).rem_euclid(1.0);
    let t = (du + 69.184 / 86400.0) / 36525.0;
    let arcsec = 0.014506 + t * (4612.156534 + t * (1.3915817 + t * (-0.00000044 + t * -0.000029956)));
    (era + (arcsec / 3600.0).to_radians() + lon_deg.to_radians()).rem_euclid(2.0 * std::f64::consts::PI)
}

/// A part type of the correlator's visibilities that the writer stores as f64.
pub trait VisPart: Copy + sealed::Sealed {
    /// The part as f64, or `Err(Some(v))` for an integer beyond `2^53`, `Err(None)` for a
    /// non-finite float.
    fn to_exact_f64(self) -> Result<f64, Option<i64>>;
}
mod sealed {
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}
impl VisPart for i32 {
    fn to_exact_f64(self) -> Result<f64, Option<i64>> {
        Ok(self as f64)
    }
}
impl VisPart for i64 {
    fn to_exact_f64(self) -> Result<f64, Option<i64>> {
        if self.unsigned_abs() > EXACT_LIMIT as u64 {
            Err(Some(self))
        } else {
            Ok(self as f64)
        }
    }
}
impl VisPart for f32 {
    fn to_exact_f64(self) -> Result<f64, Option<i64>> {
        if self.is_finite() {
            Ok(self as f64)
        } else {
            Err(None)
        }
    }
}
impl VisPart for f64 {
    fn to_exact_f64(self) -> Result<f64, Option<i64>> {
        if self.is_finite() {
            Ok(self)
        } else {
            Err(None)
        }
    }
}

/// Writes a UVH5 file at `path` (created, or truncated if it exists).
///
/// - `vis`: the correlator's integrations, `[t][c][b(i,j)][pi][pj]` with `t` over
///   `meta.times_jd`, `c` over `meta.freq_hz`, `b(i,j) = i (i + 1) / 2 + j` for `i >= j`
///   (`CorrelatorConfig::output_index` per integration); [`Uvh5Metadata::vis_len`] elements.
/// - `flags`: `[t][c][b]`, true where data was lost (`None`: nothing flagged).
/// - `nsamples`: `[t][c][b]`, the fraction of the integration present, finite and >= 0
///   (`None`: 1 everywhere).
///
/// Validates everything before creating the file; see the module doc for the layout and the
/// conjugation.
pub fn write<T: VisPart>(
    path: impl AsRef<Path>,
    meta: &Uvh5Metadata,
    vis: &[Complex<T>],
    flags: Option<&[bool]>,
    nsamples: Option<&[f32]>,
) -> Result<()> {
    meta.validate()?;
    let (nt, nf, nb, p) = (meta.times_jd.len(), meta.freq_hz.len(), meta.baselines(), meta.pols as usize);
    let n = meta.stations();
    check_len("visibilities", meta.vis_len(), vis.len())?;
    if let Some(f) = flags {
        check_len("flags", nt * nf * nb, f.len())?;
    }
    if let Some(s) = nsamples {
        check_len("nsamples", nt * nf * nb, s.len())?;
        if let Some(index) = s.iter().position(|x| !x.is_finite()) {
            return Err(Error::NonFinite { what: "nsamples", index });
        }
        if let Some(index) = s.iter().position(|x| *x < 0.0) {
            return Err(Error::InvalidConfig(format!(
                "UVH5 nsamples[{index}] = {} is negative (the fraction of the integration present)",
                s[index]
            )));
        }
    }
    let pols = meta.polarizations();
    let npol = pols.len();
    let nblts = nt * nb;

    // Data, (Nblts, Nfreqs, Npols), from [t][c][b][pi][pj].
    let mut data = vec![Complex::new(0.0f64, 0.0); nblts * nf * npol];
    let mut flag_out = vec![false; nblts * nf * npol];
    let mut nsmp_out = vec![1.0f32; nblts * nf * npol];
    for t in 0..nt {
        for c in 0..nf {
            let tc = t * nf + c;
            for b in 0..nb {
                let flag = flags.is_some_and(|f| f[tc * nb + b]);
                let nsmp = nsamples.map_or(1.0, |s| s[tc * nb + b]);
                let out = ((t * nb + b) * nf + c) * npol;
                for (k, &(_, pi, pj)) in pols.iter().enumerate() {
                    let index = ((tc * nb + b) * p + pi) * p + pj;
                    let v = vis[index];
                    let part = |x: T| {
                        x.to_exact_f64().map_err(|e| match e {
                            Some(value) => Error::InvalidConfig(format!(
                                "visibility {index}: part {value} exceeds 2^53 in magnitude and would be \
                                 rounded in f64"
                            )),
                            None => Error::NonFinite { what: "visibilities", index },
                        })
                    };
                    data[out + k] = Complex::new(part(v.re)?, part(v.im)?);
                    flag_out[out + k] = flag;
                    nsmp_out[out + k] = nsmp;
                }
            }
        }
    }

    // Baseline-time metadata: correlator (i, j), i >= j, is (ant1 = j, ant2 = i).
    let (mut ant1, mut ant2) = (Vec::with_capacity(nblts), Vec::with_capacity(nblts));
    let mut uvw = Vec::with_capacity(nblts * 3);
    let enu: Vec<[f64; 3]> = meta
        .antenna_positions_ecef
        .iter()
        .map(|x| ecef_to_enu(meta.latitude_deg, meta.longitude_deg, *x))
        .collect();
    for _ in 0..nt {
        for i in 0..n {
            for j in 0..=i {
                ant1.push(meta.antenna_numbers[j] as i64);
                ant2.push(meta.antenna_numbers[i] as i64);
                uvw.extend((0..3).map(|k| enu[i][k] - enu[j][k]));
            }
        }
    }
    let time: Vec<f64> = meta.times_jd.iter().flat_map(|&t| std::iter::repeat_n(t, nb)).collect();
    let lst: Vec<f64> = match &meta.lst_rad {
        Some(l) => l.clone(),
        None => meta.times_jd.iter().map(|&t| approximate_lst(t, meta.longitude_deg)).collect(),
    };
    let lst_blt: Vec<f64> = lst.iter().flat_map(|&l| std::iter::repeat_n(l, nb)).collect();

    let path = path.as_ref();
    let file = hdf5::File::create(path).map_err(hdf5_error(|| format!("creating {}", path.display())))?;
    let group = |parent: &hdf5::Group, name: &str| {
        parent.create_group(name).map_err(hdf5_error(|| {
            format!(
                "creating the UVH5 group {}/{name} of {}",
                parent.name().trim_end_matches('/'),
                path.display()
            )
        }))
    };
    let h = group(&file, "Header")?;
    scalar_str(&h, "version", "1.2")?;
    scalar_str(&h, "telescope_name", &meta.telescope_name)?;
    scalar_str(&h, "telescope_frame", "itrs")?;
    scalar(&h, "latitude", meta.latitude_deg)?;
    scalar(&h, "longitude", meta.longitude_deg)?;
    scalar(&h, "altitude", meta.altitude_m)?;
    scalar_str(&h, "instrument", &meta.instrument)?;
    scalar(&h, "Nants_telescope", n as i64)?;
    strings(&h, "antenna_names", &meta.antenna_names)?;
    let numbers: Vec<i64> = meta.antenna_numbers.iter().map(|&a| a as i64).collect();
    array(&h, "antenna_numbers", &[n], &numbers)?;
    let positions: Vec<f64> = meta.antenna_positions_ecef.iter().flatten().copied().collect();
    array(&h, "antenna_positions", &[n, 3], &positions)?;
    if meta.feed_basis == FeedBasis::Linear {
        scalar_str(&h, "x_orientation", &meta.x_orientation)?;
    }
    scalar(&h, "Nants_data", n as i64)?;
    scalar(&h, "Nbls", nb as i64)?;
    scalar(&h, "Nblts", nblts as i64)?;
    scalar(&h, "Ntimes", nt as i64)?;
    scalar(&h, "Nfreqs", nf as i64)?;
    scalar(&h, "Npols", npol as i64)?;
    scalar(&h, "Nspws", 1i64)?;
    array(&h, "ant_1_array", &[nblts], &ant1)?;
    array(&h, "ant_2_array", &[nblts], &ant2)?;
    array(&h, "uvw_array", &[nblts, 3], &uvw)?;
    array(&h, "time_array", &[nblts], &time)?;
    array(&h, "integration_time", &[nblts], &vec![meta.integration_time_s; nblts])?;
    if meta.lst_rad.is_some() {
        array(&h, "lst_array", &[nblts], &lst_blt)?;
    }
    array(&h, "freq_array", &[nf], &meta.freq_hz)?;
    array(&h, "channel_width", &[nf], &vec![meta.channel_width_hz; nf])?;
    array(&h, "spw_array", &[1], &[0i64])?;
    array(&h, "flex_spw_id_array", &[nf], &vec![0i64; nf])?;
    let codes: Vec<i64> = pols.iter().map(|p| p.0).collect();
    array(&h, "polarization_array", &[npol], &codes)?;
    scalar_str(&h, "vis_units", "uncalib")?;
    scalar_str(&h, "blt_order", "time, baseline")?;
    scalar(&h, "blts_are_rectangular", true)?;
    scalar(&h, "time_axis_faster_than_bls", false)?;
    // The phase-centre catalog of unprojected (drift-scan) data.
    scalar(&h, "Nphase", 1i64)?;
    array(&h, "phase_center_id_array", &[nblts], &vec![0i64; nblts])?;
    let pc = group(&group(&h, "phase_center_catalog")?, "0")?;
    scalar_str(&pc, "cat_name", "unprojected")?;
    scalar_str(&pc, "cat_type", "unprojected")?;
    scalar_str(&pc, "cat_frame", "altaz")?;
    scalar(&pc, "cat_lon", 0.0f64)?;
    scalar(&pc, "cat_lat", std::f64::consts::FRAC_PI_2)?;
    scalar_str(&pc, "info_source", "user")?;
    for key in ["cat_epoch", "cat_times", "cat_pm_ra", "cat_pm_dec", "cat_vrad", "cat_dist"] {
        pc.new_dataset::<f32>()
            .shape(hdf5::Extents::Null)
            .create(key)
            .map_err(hdf5_error(|| writing(&pc, key)))?;
    }
    array(&h, "phase_center_app_ra", &[nblts], &lst_blt)?;
    array(&h, "phase_center_app_dec", &[nblts], &vec![meta.latitude_deg.to_radians(); nblts])?;
    array(&h, "phase_center_frame_pa", &[nblts], &vec![0.0f64; nblts])?;
    let mut history = meta.history.clone();
    if !history.is_empty() && !history.ends_with('\n') {
        history.push('\n');
    }
    history.push_str(&format!("Written by radio-kernels {} (formats::uvh5).", env!("CARGO_PKG_VERSION")));
    scalar_str(&h, "history", &history)?;

    let d = group(&file, "Data")?;
    let shape = [nblts, nf, npol];
    array(&d, "visdata", &shape, &data)?;
    array(&d, "flags", &shape, &flag_out)?;
    array(&d, "nsamples", &shape, &nsmp_out)?;
    file.close().map_err(hdf5_error(|| format!("closing {}", path.display())))?;
    Ok(())
}

fn check_len(what: &'static str, expected: usize, actual: usize) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(Error::ShapeMismatch { what, expected, actual })
    }
}

/// "writing <group>/<name> of <file>", for the `Io` error of a failed dataset.
fn writing(g: &hdf5::Group, name: &str) -> String {
    format!("writing the UVH5 dataset {}/{name} of {}", g.name().trim_end_matches('/'), g.filename())
}

fn scalar<T: hdf5::H5Type>(g: &hdf5::Group, name: &str, value: T) -> Result<()> {
    (|| g.new_dataset::<T>().create(name)?.write_scalar(&value))().map_err(hdf5_error(|| writing(g, name)))
}

fn array<T: hdf5::H5Type>(g: &hdf5::Group, name: &str, shape: &[usize], data: &[T]) -> Result<()> {
    (|| g.new_dataset::<T>().shape(shape).create(name)?.write_raw(data))()
        .map_err(hdf5_error(|| writing(g, name)))
}

/// Longest string the writer stores (the history included): fixed-length strings are
/// written through a memory buffer of at most this many bytes.
pub const MAX_STRING: usize = 65536;

/// Writes ASCII `values` as fixed-length strings (numpy's `S<len>`, what pyuvdata writes
/// with `np.bytes_` and decodes on read), `len` the longest value (at least 1), `shape`
/// `None` for a scalar.
fn fixed_strings(g: &hdf5::Group, name: &str, shape: Option<&[usize]>, values: &[&str]) -> Result<()> {
    let len = values.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
    if len > MAX_STRING || values.iter().any(|s| !s.is_ascii() || s.contains('\0')) {
        return Err(invalid_metadata(format!(
            "{name}: strings must be ASCII without NUL, at most {MAX_STRING} bytes"
        )));
    }
    let builder = g.new_dataset_builder().empty_as(hdf5::types::TypeDescriptor::FixedAscii(len));
    let ds = match shape {
        Some(s) => builder.shape(s).create(name),
        None => builder.create(name),
    }
    .map_err(hdf5_error(|| writing(g, name)))?;
    // The memory type is the smallest FixedAscii<N> that holds `len` bytes; HDF5 converts
    // it to the file's S<len> (its soft string conversion, which pads or cuts NULs only).
    macro_rules! write_as {
        ($($n:literal),*) => {$(
            if len <= $n {
                let v: Vec<FixedAscii<$n>> = values
                    .iter()
                    .map(|s| FixedAscii::<$n>::from_ascii(s.as_bytes()))
                    .collect::<Result<_, _>>()
                    .map_err(|e| invalid_metadata(format!("{name}: {e}")))?;
                ds.write_raw(&v).map_err(hdf5_error(|| writing(g, name)))?;
                return Ok(());
            }
        )*};
    }
    write_as!(16, 64, 256, 1024, 4096, 16384, 65536);
    unreachable!("len <= MAX_STRING was checked")
}

fn scalar_str(g: &hdf5::Group, name: &str, value: &str) -> Result<()> {
    fixed_strings(g, name, None, &[value])
}

fn strings(g: &hdf5::Group, name: &str, values: &[String]) -> Result<()> {
    let v: Vec<&str> = values.iter().map(|s| s.as_str()).collect();
    fixed_strings(g, name, Some(&[v.len()]), &v)
}
