//! SIGPROC filterbank files, no GPU needed: the header's bytes (key types and order as
//! SIGPROC reads them), round trips of u8 and f32 spectra through the writer and the reader
//! (header values, channel order, data), the FRB and delay-beamformer beam files, and bad
//! input (lengths, non-finite samples, sample type, header values, corrupt files) as typed
//! errors with nothing written. The round trip through sigpyproc is the Python suite's.
use radio_kernels::delay_beamformer::{Beam, DelayBeamformerConfig};
use radio_kernels::formats::filterbank::*;
use radio_kernels::frb_beamformer::quantize::{quantize_reference, Format, QuantizeConfig};
use radio_kernels::{f16, Complex, Error};
use std::io::Write;
use std::path::PathBuf;

fn header(nbits: u32, nchans: u32) -> FilterbankHeader {
    FilterbankHeader {
        rawdatafile: Some("chord_beams.dat".into()),
        src_raj: pack_ra_hours(5.0 + 34.0 / 60.0 + 31.9 / 3600.0).unwrap(),
        src_dej: pack_dec_degrees(22.0 + 52.0 / 3600.0).unwrap(),
        az_start: Some(123.5),
        za_start: Some(12.25),
        nbeams: 4,
        ibeam: 3,
        telescope_id: 20,
        machine_id: 20,
        ..FilterbankHeader::new("B0531+21", 800.0, -0.390625, nchans, 983.04e-6, 60000.123456789, nbits)
    }
}

/// A fresh directory under the system's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("radio-kernels-fil-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The value following `key`'s length-prefixed name in `bytes`.
fn value_after<'a>(bytes: &'a [u8], key: &str) -> &'a [u8] {
    let mut pattern = (key.len() as u32).to_le_bytes().to_vec();
    pattern.extend_from_slice(key.as_bytes());
    let at = bytes.windows(pattern.len()).position(|w| w == pattern).unwrap_or_else(|| panic!("no {key}"));
    &bytes[at + pattern.len()..]
}

#[test]
fn header_bytes_follow_sigproc_key_types() {
    let h = header(32, 5);
    let bytes = h.encode().unwrap();
    assert_eq!(&bytes[..16], b"\x0c\0\0\0HEADER_START");
    assert_eq!(&bytes[bytes.len() - 14..], b"\x0a\0\0\0HEADER_END");
    let int = |key| u32::from_le_bytes(value_after(&bytes, key)[..4].try_into().unwrap());
    let double = |key| f64::from_le_bytes(value_after(&bytes, key)[..8].try_into().unwrap());
    assert_eq!(int("nchans"), 5);
    assert_eq!(int("nbits"), 32);
    assert_eq!(int("nifs"), 1);
    assert_eq!(int("data_type"), 1);
    assert_eq!(int("telescope_id"), 20);
    assert_eq!(int("machine_id"), 20);
    assert_eq!(int("nbeams"), 4);
    assert_eq!(int("ibeam"), 3);
    assert_eq!(double("fch1"), 800.0);
    assert_eq!(double("foff"), -0.390625);
    assert_eq!(double("tsamp"), 983.04e-6);
    assert_eq!(double("tstart"), 60000.123456789);
    assert_eq!(double("az_start"), 123.5);
    assert_eq!(double("za_start"), 12.25);
    assert!((double("src_raj") - 53431.9).abs() < 1e-6);
    assert!((double("src_dej") - 220052.0).abs() < 1e-6);
    assert_eq!(&value_after(&bytes, "source_name")[..12], b"\x08\0\0\0B0531+21");
    assert_eq!(&value_after(&bytes, "rawdatafile")[..19], b"\x0f\0\0\0chord_beams.dat");
    // Optional keys are left out when unset.
    let plain = FilterbankHeader::new("x", 1400.0, 1.0, 1, 1e-3, 59000.0, 8).encode().unwrap();
    for key in ["rawdatafile", "az_start", "za_start"] {
        assert!(!plain.windows(key.len()).any(|w| w == key.as_bytes()), "{key} written");
    }
}

#[test]
fn u8_spectra_round_trip_in_blocks() {
    let h = header(8, 7);
    let mut writer = FilterbankWriter::new(Vec::new(), h.clone()).unwrap();
    let data: Vec<u8> = (0..7 * 10).map(|i| (i * 37 % 256) as u8).collect();
    writer.write_spectra_u8(&data[..21]).unwrap();
    writer.write_spectra_u8(&[]).unwrap();
    writer.write_spectra_u8(&data[21..]).unwrap();
    assert_eq!(writer.spectra_written(), 10);
    let bytes = writer.into_inner().unwrap();
    let header_len = h.encode().unwrap().len();
    assert_eq!(bytes.len(), header_len + data.len());
    let file = read_filterbank(&bytes[..]).unwrap();
    assert_eq!(file.header, h);
    assert_eq!(file.header_len, header_len);
    assert_eq!(file.spectra(), 10);
    assert_eq!(file.data, Spectra::U8(data));
}

#[test]
fn f32_spectra_keep_channel_order_on_disk() {
    // Falling frequency: channel k at 1500 - 2k MHz; sample (t, k) = 1000 t + k.
    let (nchans, times) = (6u32, 9usize);
    let h = FilterbankHeader::new("J0000+0000", 1500.0, -2.0, nchans, 1e-3, 59000.5, 32);
    let data: Vec<f32> = (0..times * 6).map(|i| (1000 * (i / 6) + i % 6) as f32 + 0.25).collect();
    let dir = scratch("f32");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f32.fil");
    write_file_f32(&path, &h, &data).unwrap();
    let raw = std::fs::read(&path).unwrap();
    let first = h.encode().unwrap().len();
    // Sample (t = 2, k = 3) sits at byte first + 4 (2 nchans + 3), little-endian.
    assert_eq!(raw[first + 4 * 15..][..4], 2003.25f32.to_le_bytes());
    let file = read_file(&path).unwrap();
    assert_eq!(file.header, h);
    assert_eq!(file.header.channel_frequency(3), 1494.0);
    assert_eq!(file.data, Spectra::F32(data));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_blocks_are_typed_errors_and_write_nothing() {
    let mut u8w = FilterbankWriter::new(Vec::new(), header(8, 4)).unwrap();
    let mut f32w = FilterbankWriter::new(Vec::new(), header(32, 4)).unwrap();
    let (u8_len, f32_len) = (header(8, 4).encode().unwrap().len(), header(32, 4).encode().unwrap().len());
    assert!(matches!(
        u8w.write_spectra_u8(&[0; 6]),
        Err(Error::ShapeMismatch { expected: 8, actual: 6, .. })
    ));
    assert!(matches!(
        f32w.write_spectra_f32(&[0.0; 9]),
        Err(Error::ShapeMismatch { expected: 12, actual: 9, .. })
    ));
    assert!(matches!(u8w.write_spectra_f32(&[0.0; 4]), Err(Error::InvalidConfig(_))));
    assert!(matches!(f32w.write_spectra_u8(&[0; 4]), Err(Error::InvalidConfig(_))));
    for (bad, index) in [(f32::NAN, 5), (f32::INFINITY, 0), (f32::NEG_INFINITY, 7)] {
        let mut block = [1.0f32; 8];
        block[index] = bad;
        block[7] = if index == 7 { bad } else { 2.0 };
        match f32w.write_spectra_f32(&block) {
            Err(Error::NonFinite { what: "spectra", index: got }) => assert_eq!(got, index, "{bad}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    assert_eq!(u8w.spectra_written() + f32w.spectra_written(), 0);
    assert_eq!(u8w.into_inner().unwrap().len(), u8_len);
    assert_eq!(f32w.into_inner().unwrap().len(), f32_len);
    // The file helpers check before they create the file.
    let dir = scratch("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("never.fil");
    assert!(matches!(write_file_f32(&path, &header(32, 2), &[1.0, f32::NAN]), Err(Error::NonFinite { .. })));
    assert!(matches!(write_file_u8(&path, &header(8, 2), &[1]), Err(Error::ShapeMismatch { .. })));
    assert!(matches!(write_file_u8(&path, &header(16, 2), &[1, 2]), Err(Error::InvalidConfig(_))));
    assert!(!path.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_headers_are_refused() {
    let good = header(8, 16);
    good.validate().unwrap();
    let bad_headers = [
        FilterbankHeader { nbits: 16, ..good.clone() },
        FilterbankHeader { nbits: 4, ..good.clone() },
        FilterbankHeader { nchans: 0, ..good.clone() },
        FilterbankHeader { nchans: 1 << 31, ..good.clone() },
        FilterbankHeader { tsamp: 0.0, ..good.clone() },
        FilterbankHeader { tsamp: f64::NAN, ..good.clone() },
        FilterbankHeader { tstart: -1.0, ..good.clone() },
        FilterbankHeader { tstart: f64::INFINITY, ..good.clone() },
        FilterbankHeader { foff: 0.0, ..good.clone() },
        FilterbankHeader { foff: f64::NAN, ..good.clone() },
        FilterbankHeader { fch1: -800.0, ..good.clone() },
        // The last channel, 800 - 15 * 60 MHz, is below zero.
        FilterbankHeader { foff: -60.0, ..good.clone() },
        FilterbankHeader { source_name: String::new(), ..good.clone() },
        FilterbankHeader { source_name: "Crab\u{e9}".into(), ..good.clone() },
        FilterbankHeader { source_name: "a\nb".into(), ..good.clone() },
        FilterbankHeader { source_name: "x".repeat(80), ..good.clone() },
        FilterbankHeader { rawdatafile: Some(String::new()), ..good.clone() },
        FilterbankHeader { ibeam: 4, ..good.clone() },
        FilterbankHeader { nbeams: 0, ibeam: 0, ..good.clone() },
        FilterbankHeader { telescope_id: u32::MAX, ..good.clone() },
        FilterbankHeader { src_raj: 246000.0, ..good.clone() },
        FilterbankHeader { src_raj: -10000.0, ..good.clone() },
        FilterbankHeader { src_raj: 126100.0, ..good.clone() },
        FilterbankHeader { src_dej: 900000.5, ..good.clone() },
        FilterbankHeader { src_dej: -106000.0, ..good.clone() },
        FilterbankHeader { src_dej: f64::NAN, ..good.clone() },
        FilterbankHeader { az_start: Some(361.0), ..good.clone() },
        FilterbankHeader { za_start: Some(-1.0), ..good.clone() },
        FilterbankHeader { za_start: Some(f64::NAN), ..good.clone() },
    ];
    for bad in bad_headers {
        assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))), "{bad:?}");
        let mut sink = Vec::new();
        assert!(FilterbankWriter::new(&mut sink, bad.clone()).is_err(), "{bad:?}");
        assert!(sink.is_empty(), "{bad:?} wrote a header");
    }
    // Edges that are valid.
    for ok in [
        FilterbankHeader { nbits: 32, ..good.clone() },
        FilterbankHeader { src_dej: -900000.0, ..good.clone() },
        FilterbankHeader { src_raj: 235959.99, ..good.clone() },
        FilterbankHeader { source_name: "x".repeat(79), ..good.clone() },
        FilterbankHeader { foff: 53.0, ..good.clone() },
    ] {
        ok.validate().unwrap();
    }
}

#[test]
fn corrupt_files_are_refused() {
    let h = header(8, 4);
    let mut file = h.encode().unwrap();
    file.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    read_filterbank(&file[..]).unwrap();
    // Data that is not whole spectra.
    assert!(matches!(
        read_filterbank(&file[..file.len() - 1]),
        Err(Error::ShapeMismatch { expected: 8, actual: 7, .. })
    ));
    // A header cut short, or not a header.
    for cut in [0, 3, 10, 30, h.encode().unwrap().len() - 1] {
        assert!(matches!(read_filterbank(&file[..cut]), Err(Error::InvalidConfig(_))), "cut at {cut}");
    }
    assert!(matches!(read_filterbank(&b"\x04\0\0\0HEAD"[..]), Err(Error::InvalidConfig(_))));
    // nbits 16 (patched in place) and an unknown key.
    let mut nbits16 = file.clone();
    let at = nbits16.len() - value_after(&file, "nbits").len();
    nbits16[at..at + 4].copy_from_slice(&16u32.to_le_bytes());
    assert!(matches!(read_filterbank(&nbits16[..]), Err(Error::InvalidConfig(m)) if m.contains("nbits")));
    let mut unknown = b"\x0c\0\0\0HEADER_START\x05\0\0\0bogus".to_vec();
    unknown.extend_from_slice(&file[16..]);
    assert!(matches!(read_filterbank(&unknown[..]), Err(Error::InvalidConfig(m)) if m.contains("bogus")));
}

/// A sink that fails after `room` bytes.
struct Full {
    room: usize,
}
impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::other("disk full"));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn io_failures_are_errors_and_stop_the_writer() {
    let h = header(8, 4);
    assert!(
        matches!(FilterbankWriter::new(Full { room: 10 }, h.clone()), Err(Error::Io { source, .. }) if source.to_string().contains("disk full"))
    );
    let mut writer = FilterbankWriter::new(Full { room: h.encode().unwrap().len() + 6 }, h).unwrap();
    writer.write_spectra_u8(&[0; 4]).unwrap();
    assert!(
        matches!(writer.write_spectra_u8(&[0; 4]), Err(Error::Io { source, .. }) if source.to_string().contains("disk full"))
    );
    assert!(
        matches!(writer.write_spectra_u8(&[0; 4]), Err(Error::InvalidConfig(m)) if m.contains("failed earlier"))
    );
    assert_eq!(writer.spectra_written(), 1);
}

/// Codes `(f, beta, t)` of a hand-made `Q` for `config`, with the row padding set to 0xAA so
/// that reading it would show.
fn hand_made_q(config: &QuantizeConfig, code: impl Fn(usize, usize, usize) -> u8) -> Vec<u8> {
    let row = config.row_bytes() as usize;
    let mut q = vec![0xAAu8; config.output_len()];
    for f in 0..config.channels as usize {
        for b in 0..config.beams as usize {
            let out = &mut q[(f * config.beams as usize + b) * row..][..row];
            let used = (config.times as usize * config.format.bits() as usize).div_ceil(8);
            out[..used].fill(0);
            for t in 0..config.times as usize {
                match config.format {
                    Format::U8 => out[t] = code(f, b, t),
                    Format::U4 => out[t / 2] |= code(f, b, t) << (4 * (t % 2)),
                }
            }
        }
    }
    q
}

#[test]
fn frb_beams_become_time_channel_files() {
    for format in [Format::U8, Format::U4] {
        let config = QuantizeConfig { channels: 5, times: 11, beams: 3, format };
        let max = format.max() as usize + 1;
        let code = |f: usize, b: usize, t: usize| ((f * 31 + b * 7 + t * 3) % max) as u8;
        let q = hand_made_q(&config, code);
        let dir = scratch(&format!("frb-{format:?}"));
        let template = FilterbankHeader::new("FRB", 400.0, 0.5, 5, 1e-3, 60100.0, 8);
        let paths = write_frb_beams(&dir, &template, &config, &q).unwrap();
        assert_eq!(paths.len(), 3);
        for (b, path) in paths.iter().enumerate() {
            assert_eq!(path, &dir.join(format!("beam_{b:04}.fil")));
            let file = read_file(path).unwrap();
            assert_eq!(file.header, FilterbankHeader { nbeams: 3, ibeam: b as u32, ..template.clone() });
            let Spectra::U8(data) = file.data else { panic!("not u8") };
            assert_eq!(data.len(), 5 * 11);
            for t in 0..11 {
                for f in 0..5 {
                    assert_eq!(data[t * 5 + f], code(f, b, t), "{format:?} beam {b} t {t} f {f}");
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // The quantiser's own output: J[f][tbar][beta] = f + 2 beta + 3 tbar, scale 1, offset 0.
    let config = QuantizeConfig { channels: 4, times: 6, beams: 2, format: Format::U8 };
    let j: Vec<f16> =
        (0..4 * 6 * 2).map(|i| f16::from_f32((i / 12 + 2 * (i % 2) + 3 * (i / 2 % 6)) as f32)).collect();
    let q = quantize_reference(&config, &j, &[1.0; 8], &[0.0; 8]).unwrap().output;
    for beta in 0..2 {
        let spectra = frb_beam_spectra(&config, &q, beta).unwrap();
        for t in 0..6 {
            for f in 0..4 {
                assert_eq!(spectra[t * 4 + f] as usize, f + 2 * beta as usize + 3 * t);
            }
        }
    }
}

#[test]
fn delay_beams_become_power_files() {
    let config = DelayBeamformerConfig {
        antennas: 1,
        pols: 1,
        channels: 3,
        first_channel: 100,
        times: 8,
        beams: vec![Beam { pol: 0, dither: false }; 2],
    };
    let mut y = vec![Complex::new(0i8, 0i8); config.output_len()];
    for b in 0..2 {
        for c in 0..3 {
            for t in 0..8 {
                y[config.output_index(b, c, t)] = Complex::new((b * 10 + c) as i8, t as i8 - 4);
            }
        }
    }
    y[config.output_index(1, 2, 7)] = Complex::new(-128, -128);
    let dir = scratch("delay");
    let template = FilterbankHeader::new("beam", 1400.0, -0.1, 3, 2.56e-6, 60200.0, 32);
    let paths = write_delay_beams(&dir, &template, &config, &y).unwrap();
    for (b, path) in paths.iter().enumerate() {
        let file = read_file(path).unwrap();
        assert_eq!((file.header.ibeam, file.header.nbeams), (b as u32, 2));
        let Spectra::F32(power) = file.data else { panic!("not f32") };
        for t in 0..8 {
            for c in 0..3 {
                let v = y[config.output_index(b as u32, c as u32, t as u32)];
                let expected = (v.re as i32).pow(2) + (v.im as i32).pow(2);
                assert_eq!(power[t * 3 + c], expected as f32, "beam {b} t {t} c {c}");
            }
        }
    }
    assert_eq!(delay_beam_power(&config, &y, 1).unwrap()[7 * 3 + 2], 32768.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn beam_helpers_check_before_writing() {
    let config = QuantizeConfig { channels: 5, times: 4, beams: 2, format: Format::U8 };
    let q = vec![0u8; config.output_len()];
    let good = FilterbankHeader::new("FRB", 400.0, 0.5, 5, 1e-3, 60100.0, 8);
    let dir = scratch("refused");
    for (template, q_len) in [
        (FilterbankHeader { nchans: 4, ..good.clone() }, q.len()),
        (FilterbankHeader { nbits: 32, ..good.clone() }, q.len()),
        (FilterbankHeader { tsamp: -1.0, ..good.clone() }, q.len()),
        (good.clone(), q.len() - 1),
    ] {
        assert!(write_frb_beams(&dir, &template, &config, &q[..q_len]).is_err(), "{template:?} {q_len}");
    }
    assert!(matches!(frb_beam_spectra(&config, &q, 2), Err(Error::InvalidConfig(_))));
    assert!(matches!(frb_beam_spectra(&config, &q[1..], 0), Err(Error::ShapeMismatch { what: "Q", .. })));
    let delay = DelayBeamformerConfig {
        antennas: 1,
        pols: 1,
        channels: 5,
        first_channel: 0,
        times: 8,
        beams: vec![Beam { pol: 0, dither: false }],
    };
    let y = vec![Complex::new(1i8, 1i8); delay.output_len()];
    assert!(matches!(write_delay_beams(&dir, &good, &delay, &y), Err(Error::InvalidConfig(_))));
    let f32_header = FilterbankHeader { nbits: 32, ..good };
    assert!(matches!(
        write_delay_beams(&dir, &f32_header, &delay, &y[1..]),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(delay_beam_power(&delay, &y, 1), Err(Error::InvalidConfig(_))));
    assert!(!dir.exists());
}
