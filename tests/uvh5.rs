//! The UVH5 writer (`formats::uvh5`), read back with the HDF5 library: shapes, metadata, the
//! baseline order and conjugation of known baselines, flags, nsamples and the typed errors.
use radio_kernels::formats::uvh5::{self, FeedBasis, Uvh5Metadata};
use radio_kernels::{Complex, Error};
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("radio-kernels-uvh5-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// 4 stations on an east-west/north-south grid, 3 channels, 2 integrations.
fn meta() -> Uvh5Metadata {
    let enu = [[0.0, 0.0, 0.0], [8.5, 0.0, 0.0], [0.0, 6.3, 0.0], [8.5, 6.3, 0.5]];
    let mut m = Uvh5Metadata::chord_drao(
        &enu,
        vec![600e6, 600.5e6, 601e6],
        0.5e6,
        vec![2_460_000.5, 2_460_000.5 + 10.0 / 86400.0],
        10.0,
    );
    m.antenna_numbers = vec![10, 11, 12, 13];
    m.history = "test".into();
    m
}

/// A distinct value per input element: re = flat index, im = -(flat index) - 1000 * t.
fn vis(m: &Uvh5Metadata) -> Vec<Complex<i64>> {
    (0..m.vis_len() as i64).map(|k| Complex::new(k * 7 + 1, -3 * k - 5)).collect()
}

#[test]
fn round_trip_datasets_and_conjugation() {
    let m = meta();
    let v = vis(&m);
    let (nt, nf, nb, p) = (2usize, 3usize, 10usize, 2usize);
    // Flagged: channel-time 4 on every baseline, and baseline 7 of channel-time 1.
    let flagged = |tc: usize, b: usize| tc == 4 || (tc == 1 && b == 7);
    let flags: Vec<bool> = (0..nt * nf * nb).map(|k| flagged(k / nb, k % nb)).collect();
    let nsamples: Vec<f32> =
        (0..nt * nf * nb).map(|k| if flagged(k / nb, k % nb) { 0.25 } else { 1.0 }).collect();
    let path = tmp("round_trip.uvh5");
    uvh5::write(&path, &m, &v, Some(&flags), Some(&nsamples)).unwrap();

    let f = hdf5::File::open(&path).unwrap();
    let h = f.group("Header").unwrap();
    let int = |name: &str| h.dataset(name).unwrap().read_scalar::<i64>().unwrap();
    assert_eq!(
        [int("Nants_data"), int("Nants_telescope"), int("Nbls"), int("Nblts"), int("Ntimes"), int("Nfreqs")],
        [4, 4, 10, 20, 2, 3]
    );
    assert_eq!([int("Npols"), int("Nspws"), int("Nphase")], [4, 1, 1]);
    let pols = h.dataset("polarization_array").unwrap().read_raw::<i64>().unwrap();
    assert_eq!(pols, [-5, -6, -7, -8]);
    let ant1 = h.dataset("ant_1_array").unwrap().read_raw::<i64>().unwrap();
    let ant2 = h.dataset("ant_2_array").unwrap().read_raw::<i64>().unwrap();
    // Correlator order b(i, j) = i (i + 1) / 2 + j, stored as (ant1 = j, ant2 = i).
    assert_eq!(&ant1[..10], &[10, 10, 11, 10, 11, 12, 10, 11, 12, 13]);
    assert_eq!(&ant2[..10], &[10, 11, 11, 12, 12, 12, 13, 13, 13, 13]);
    assert_eq!(&ant1[10..], &ant1[..10]);
    let time = h.dataset("time_array").unwrap().read_raw::<f64>().unwrap();
    assert!(time[..10].iter().all(|&t| t == m.times_jd[0]) && time[10..].iter().all(|&t| t == m.times_jd[1]));
    let freq = h.dataset("freq_array").unwrap().read_raw::<f64>().unwrap();
    assert_eq!(freq, m.freq_hz);
    let tel = h.dataset("telescope_name").unwrap().read_scalar::<hdf5::types::FixedAscii<5>>().unwrap();
    assert_eq!(tel.as_str(), "CHORD");
    let names = h.dataset("antenna_names").unwrap().read_raw::<hdf5::types::FixedAscii<4>>().unwrap();
    assert_eq!(names.iter().map(|s| s.as_str()).collect::<Vec<_>>(), ["A000", "A001", "A002", "A003"]);
    assert!(h.dataset("lst_array").is_err(), "lst_array is left out without exact LSTs");

    // uvw of baseline (i = 3, j = 0) = ENU(r_3 - r_0) = (8.5, 6.3, 0.5): x_ant2 - x_ant1.
    let uvw = h.dataset("uvw_array").unwrap().read_raw::<f64>().unwrap();
    let b30 = 6;
    for (k, want) in [8.5, 6.3, 0.5].into_iter().enumerate() {
        assert!((uvw[b30 * 3 + k] - want).abs() < 1e-9, "uvw {:?}", &uvw[b30 * 3..b30 * 3 + 3]);
    }
    // ECEF positions rotate back to the ENU given.
    let pos = h.dataset("antenna_positions").unwrap().read_raw::<f64>().unwrap();
    let enu3 = uvh5::ecef_to_enu(m.latitude_deg, m.longitude_deg, [pos[9], pos[10], pos[11]]);
    assert!((enu3[0] - 8.5).abs() < 1e-9 && (enu3[1] - 6.3).abs() < 1e-9 && (enu3[2] - 0.5).abs() < 1e-9);

    let d = f.group("Data").unwrap();
    let data = d.dataset("visdata").unwrap();
    assert_eq!(data.shape(), [20, 3, 4]);
    let data = data.read_raw::<Complex<f64>>().unwrap();
    let flag = d.dataset("flags").unwrap().read_raw::<bool>().unwrap();
    let nsmp = d.dataset("nsamples").unwrap().read_raw::<f32>().unwrap();
    // Every element: file (t*Nbls + b, c, pol) == input [t][c][b][pi][pj], no conjugation,
    // with pol XX, YY, XY, YX = (pi, pj) (0,0), (1,1), (1,0), (0,1).
    let map = [(0, 0), (1, 1), (1, 0), (0, 1)];
    for t in 0..nt {
        for c in 0..nf {
            for b in 0..nb {
                for (k, &(pi, pj)) in map.iter().enumerate() {
                    let out = ((t * nb + b) * nf + c) * 4 + k;
                    let inp = (((t * nf + c) * nb + b) * p + pi) * p + pj;
                    let want = Complex::new(v[inp].re as f64, v[inp].im as f64);
                    assert_eq!(data[out], want, "t {t} c {c} b {b} pol {k}");
                    assert_eq!(flag[out], flagged(t * nf + c, b));
                    assert_eq!(nsmp[out], if flagged(t * nf + c, b) { 0.25 } else { 1.0 });
                }
            }
        }
    }
    // The known baseline (i = 3, j = 0), channel 1, time 1, pol XY: our V_30[pi = 1][pj = 0].
    let out = ((nb + b30) * nf + 1) * 4 + 2;
    let inp = ((((nf + 1) * nb) + b30) * p + 1) * p;
    assert_eq!(data[out], Complex::new(v[inp].re as f64, v[inp].im as f64));
    assert_ne!(data[out], Complex::new(v[inp].re as f64, -v[inp].im as f64));
    std::fs::remove_file(&path).ok();
}

#[test]
fn one_pol_circular_and_exact_lsts() {
    let mut m = meta();
    m.pols = 1;
    m.feed_basis = FeedBasis::Circular;
    m.lst_rad = Some(vec![1.0, 1.001]);
    let v: Vec<Complex<f64>> = (0..m.vis_len()).map(|k| Complex::new(k as f64, 0.5)).collect();
    let path = tmp("one_pol.uvh5");
    uvh5::write(&path, &m, &v, None, None).unwrap();
    let f = hdf5::File::open(&path).unwrap();
    let h = f.group("Header").unwrap();
    assert_eq!(h.dataset("polarization_array").unwrap().read_raw::<i64>().unwrap(), [-1]);
    let lst = h.dataset("lst_array").unwrap().read_raw::<f64>().unwrap();
    assert_eq!((lst.len(), lst[0], lst[19]), (20, 1.0, 1.001));
    assert!(h.dataset("x_orientation").is_err());
    let nsmp = f.dataset("Data/nsamples").unwrap().read_raw::<f32>().unwrap();
    assert!(nsmp.iter().all(|&x| x == 1.0));
    std::fs::remove_file(&path).ok();
}

#[test]
fn typed_errors() {
    let m = meta();
    let path = tmp("errors.uvh5");
    let mut v = vis(&m);
    // 2^53 is exact, 2^53 + 1 is refused.
    v[5].re = 1 << 53;
    uvh5::write(&path, &m, &v, None, None).unwrap();
    v[7].im = -(1 << 53) - 1;
    match uvh5::write(&path, &m, &v, None, None) {
        Err(Error::InvalidConfig(msg)) => {
            assert!(msg.contains("visibility 7") && msg.contains("2^53"), "{msg}");
            assert!(msg.contains(&(-(1i64 << 53) - 1).to_string()), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    let short = &vis(&m)[1..];
    assert!(matches!(
        uvh5::write(&path, &m, short, None, None),
        Err(Error::ShapeMismatch { what: "visibilities", .. })
    ));
    let v = vis(&m);
    assert!(matches!(
        uvh5::write(&path, &m, &v, Some(&[false; 59]), None),
        Err(Error::ShapeMismatch { what: "flags", expected: 60, actual: 59 })
    ));
    let mut ns = vec![1.0f32; 60];
    ns[3] = f32::NAN;
    assert!(matches!(
        uvh5::write(&path, &m, &v, None, Some(&ns)),
        Err(Error::NonFinite { what: "nsamples", index: 3 })
    ));
    let mut vf: Vec<Complex<f32>> = vec![Complex::new(1.0, 1.0); m.vis_len()];
    vf[9].im = f32::INFINITY;
    assert!(matches!(
        uvh5::write(&path, &m, &vf, None, None),
        Err(Error::NonFinite { what: "visibilities", index: 9 })
    ));
    ns[3] = -0.5;
    match uvh5::write(&path, &m, &v, None, Some(&ns)) {
        Err(Error::InvalidConfig(msg)) => {
            assert!(msg.contains("nsamples[3]") && msg.contains("negative"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    // HDF5 failures are `Io`, naming the step and the file; nothing was validated away.
    let missing = tmp("no-such-folder").join("x.uvh5");
    match uvh5::write(&missing, &m, &v, None, None) {
        Err(Error::Io { during, source }) => {
            assert!(during.contains("creating") && during.contains("no-such-folder"), "{during}");
            assert!(!source.to_string().is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert!(!missing.exists());
    // Metadata: each bad field is named.
    type Edit = Box<dyn Fn(&mut Uvh5Metadata)>;
    let cases: Vec<(Edit, &str)> = vec![
        (Box::new(|m| m.antenna_names[1] = "A000".into()), "antenna name"),
        (Box::new(|m| m.antenna_numbers[0] = 11), "antenna number"),
        (Box::new(|m| m.antenna_numbers[0] = u32::MAX), "antenna number"),
        (Box::new(|m| m.antenna_positions_ecef.pop().map(|_| ()).unwrap()), "antenna_positions_ecef"),
        (Box::new(|m| m.freq_hz[1] = f64::NAN), "freq_hz[1]"),
        (Box::new(|m| m.channel_width_hz = 0.0), "channel_width_hz"),
        (Box::new(|m| m.times_jd[0] = 60000.0), "times_jd[0]"),
        (Box::new(|m| m.integration_time_s = -1.0), "integration_time_s"),
        (Box::new(|m| m.lst_rad = Some(vec![0.0])), "lst_rad"),
        (Box::new(|m| m.pols = 3), "pols"),
        (Box::new(|m| m.x_orientation = "up".into()), "x_orientation"),
        (Box::new(|m| m.latitude_deg = 91.0), "latitude_deg"),
        (Box::new(|m| m.telescope_name.clear()), "telescope_name"),
        (Box::new(|m| m.times_jd.clear()), "times_jd"),
        (Box::new(|m| m.antenna_names[2] = "Å2".into()), "antenna name"),
        (Box::new(|m| m.history = "x".repeat(70000)), "history"),
    ];
    for (edit, field) in cases {
        let mut bad = meta();
        edit(&mut bad);
        match bad.validate() {
            Err(Error::InvalidConfig(msg)) => {
                assert!(msg.starts_with("UVH5 metadata: ") && msg.contains(field), "{field}: {msg}")
            }
            other => panic!("{field}: {other:?}"),
        }
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn approximate_lst_matches_a_known_value() {
    // GMST at 2000-01-01 12:00 UT1 (JD 2451545.0) is 18h 41m 50.548s = 280.46062 deg.
    let gmst = uvh5::approximate_lst(2_451_545.0, 0.0).to_degrees();
    assert!((gmst - 280.460_62).abs() < 1e-3, "{gmst}");
    // One sidereal day later the LST wraps back.
    let later = uvh5::approximate_lst(2_451_545.0 + 0.997_269_566_3, 0.0).to_degrees();
    assert!((later - gmst).abs() < 1e-3, "{later}");
}

/// Speed of light (m/s).
const LIGHT: f64 = 299_792_458.0;
/// The point source of the pyuvdata phase test (python/tests/test_uvh5.py reads these files):
/// azimuth (from north through east) and elevation, degrees.
const SOURCE_AZ_EL_DEG: (f64, f64) = (30.0, 70.0);

/// Writes `point_source.uvh5` (and `point_source_conj.uvh5`, the same data conjugated, which
/// must not phase up) into `$RADIO_KERNELS_UVH5_DIR` (or a temporary directory): 7 CHORD-grid
/// dishes, 4 channels, 2 integrations, both linear pols, a point source at
/// `SOURCE_AZ_EL_DEG` simulated in our convention, `x_d = a_p exp(+2 pi i f r_d . s / c)` and
/// `V_ij = x_i conj(x_j)`. Checks here that the file holds `V(ant1 = j, ant2 = i)` with
/// phase `+2 pi f uvw . s / c`, the relation pyuvdata's `phase` removes.
#[test]
fn point_source_files_for_pyuvdata() {
    let dir = std::env::var_os("RADIO_KERNELS_UVH5_DIR").map(PathBuf::from).unwrap_or_else(|| tmp(""));
    std::fs::create_dir_all(&dir).unwrap();
    let enu: Vec<[f64; 3]> =
        (0..7).map(|k| [8.5 * (k % 4) as f64, 6.3 * (k / 4) as f64, 0.1 * k as f64]).collect();
    let freqs: Vec<f64> = (0..4).map(|c| 600e6 + 0.390625e6 * 37.0 * c as f64).collect();
    let mut m =
        Uvh5Metadata::chord_drao(&enu, freqs.clone(), 0.390625e6, vec![2_460_500.25, 2_460_500.250_1], 8.0);
    m.history = format!("point source at az, el = {:?} deg", SOURCE_AZ_EL_DEG);
    let (az, el) = (SOURCE_AZ_EL_DEG.0.to_radians(), SOURCE_AZ_EL_DEG.1.to_radians());
    let s = [az.sin() * el.cos(), az.cos() * el.cos(), el.sin()];
    let amp = [1000.0, 700.0];
    let x = |d: usize, p: usize, f: f64| {
        let delay = (0..3).map(|k| enu[d][k] * s[k]).sum::<f64>() / LIGHT;
        Complex::from_polar(amp[p], 2.0 * std::f64::consts::PI * f * delay)
    };
    let mut v = Vec::with_capacity(m.vis_len());
    for _t in 0..2 {
        for &f in &freqs {
            for i in 0..7 {
                for j in 0..=i {
                    for pi in 0..2 {
                        for pj in 0..2 {
                            v.push(x(i, pi, f) * x(j, pj, f).conj());
                        }
                    }
                }
            }
        }
    }
    // Channel-time 5 flagged on every baseline (28 of them).
    let flags: Vec<bool> = (0..8 * 28).map(|k| k / 28 == 5).collect();
    let nsamples: Vec<f32> = (0..8 * 28).map(|k| if k / 28 == 5 { 0.0 } else { 1.0 }).collect();
    let path = dir.join("point_source.uvh5");
    uvh5::write(&path, &m, &v, Some(&flags), Some(&nsamples)).unwrap();
    let conj: Vec<Complex<f64>> = v.iter().map(|z| z.conj()).collect();
    uvh5::write(dir.join("point_source_conj.uvh5"), &m, &conj, Some(&flags), Some(&nsamples)).unwrap();

    // In the file: arg V(blt, c, XX) = 2 pi f (uvw . s) / c, uvw = x_ant2 - x_ant1.
    let f = hdf5::File::open(&path).unwrap();
    let uvw = f.dataset("Header/uvw_array").unwrap().read_raw::<f64>().unwrap();
    let data = f.dataset("Data/visdata").unwrap().read_raw::<Complex<f64>>().unwrap();
    let nb = 28;
    let mut checked = 0;
    for b in 0..nb {
        let w = (0..3).map(|k| uvw[b * 3 + k] * s[k]).sum::<f64>();
        for (c, &freq) in freqs.iter().enumerate() {
            let want = Complex::from_polar(1e6, 2.0 * std::f64::consts::PI * freq * w / LIGHT);
            let got = data[(b * 4 + c) * 4];
            assert!((got - want).norm() < 1e-6, "b {b} c {c}: {got} vs {want}");
            checked += 1;
        }
    }
    assert_eq!(checked, 112);
}
