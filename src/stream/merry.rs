//! The F-engine's rate model after Merry, "Efficient channelization on a graphics processing
//! unit" (secs. 3.1-3.2 and 5.4, Fig. 11), for this GPU's measured ceilings.
//!
//! Merry fixes the sample rate from the PCIe bandwidth and asks what GPU memory bandwidth the
//! channelizer then needs. Here both are limits on the sample rate `r` per polarisation, for
//! two polarisations of `b`-bit input and complex int8 output (one complex value per input
//! sample):
//!
//! ```text
//! PCIe           r <= B_h2d / (2 b / 8),  r <= B_d2h / 2,  r <= 1 / t_B(2 b / 8, 2)
//! device memory  r <= B_copy / (kernel bytes per sample + 2 b / 8 + 2)
//! ```
//!
//! where `t_B(in, out)` is the time to move `in` bytes up and `out` bytes down at once with the
//! link shared ([`Ceilings::both_s`]: half the both-directions rate each while both copy), and
//! the kernel bytes per sample are what the channelizer's kernels must read and write
//! ([`device_bytes`]: the three-kernel path moves `2 b / 8 + 32 + 2`, its FIR and FFT
//! writing and reading complex f32 intermediates, the fused path `2 b / 8 + 2`) and the
//! `2 b / 8 + 2` after them is the copies' own traffic in device memory. The model's rate is
//! the smaller of the two limits.
use super::{pfb_config, Ceilings};
use crate::pfb::{ChannelizerConfig, PfbPath};
use crate::{Error, Gpu, Result};

/// Input widths of the model's rows.
pub const MERRY_BITS: [u32; 5] = [4, 8, 10, 12, 16];
/// Channel counts of the model's rows (the measured ones are added).
pub const MERRY_CHANNELS: [u32; 2] = [1024, 32768];

/// Bytes the channelizer's kernels must read and write per output chunk of `config` on
/// `path`: the same figures as `Channelizer::kernel_bytes` (summed) and
/// `Channelizer::fused_bytes`, without building a channelizer.
pub fn device_bytes(config: &ChannelizerConfig, path: PfbPath) -> u64 {
    let spectra = config.spectra_per_chunk();
    let values = 2 * spectra * config.channels as u64; // complex per chunk, both pols
    let input = 2 * spectra * 2 * config.channels as u64 * config.bits as u64 / 8;
    let output = config.output_bytes() as u64;
    match path {
        PfbPath::ThreeKernel => (input + 8 * values) + 16 * values + (8 * values + output),
        // `PfbPath` is non-exhaustive: a path added later is counted at the minimum.
        _ => input + output,
    }
}

/// One row of the model, rates in samples per second per polarisation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// PFB channels.
    pub channels: u32,
    /// Input bits per sample.
    pub bits: u32,
    /// The channelizer's kernel path the device bytes are counted for.
    pub path: PfbPath,
    /// Bytes copied host to device per sample (per polarisation, both polarisations
    /// together).
    pub input_bytes: f64,
    /// Bytes copied device to host per sample, counted as `input_bytes`.
    pub output_bytes: f64,
    /// Bytes of device memory read and written per sample (kernels plus copies), counted as
    /// `input_bytes`.
    pub device_bytes: f64,
    /// The rate pinned host-to-device copies allow (samples per second per polarisation).
    pub h2d: f64,
    /// The rate pinned device-to-host copies allow.
    pub d2h: f64,
    /// The rate both directions copying at once allow.
    pub both: f64,
    /// The rate device memory allows.
    pub device: f64,
}

impl Row {
    /// The PCIe limit: the smallest of the three transfer limits.
    pub fn pcie(&self) -> f64 {
        self.h2d.min(self.d2h).min(self.both)
    }
    /// The model's rate: min(PCIe, device memory).
    pub fn rate(&self) -> f64 {
        self.pcie().min(self.device)
    }
}

/// The model's row for `config` on `path` against `ceilings`.
pub fn row(config: &ChannelizerConfig, path: PfbPath, ceilings: &Ceilings) -> Result<Row> {
    config.validate()?;
    ceilings.validate()?;
    let samples = 2.0 * config.channels as f64 * config.spectra_per_chunk() as f64; // per pol
    let input_bytes = 2.0 * config.bits as f64 / 8.0;
    let output_bytes = config.output_bytes() as f64 / samples;
    let kernels = device_bytes(config, path) as f64 / samples;
    let device_bytes = kernels + input_bytes + output_bytes;
    Ok(Row {
        channels: config.channels,
        bits: config.bits,
        path,
        input_bytes,
        output_bytes,
        device_bytes,
        h2d: ceilings.h2d * 1e9 / input_bytes,
        d2h: ceilings.d2h * 1e9 / output_bytes,
        both: 1.0 / ceilings.both_s(input_bytes, output_bytes),
        device: ceilings.device_copy * 1e9 / device_bytes,
    })
}

/// The model for [`MERRY_BITS`] at [`MERRY_CHANNELS`] and at every channel count in
/// `measured` (channels, bits, Gsample/s per polarisation), each on the path the F-engine
/// takes on `gpu` ([`PfbPath::for_config`]).
pub fn table(gpu: &Gpu, ceilings: &Ceilings, measured: &[(u32, u32, f64)]) -> Result<Vec<Row>> {
    let mut channels: Vec<u32> = MERRY_CHANNELS.iter().copied().chain(measured.iter().map(|m| m.0)).collect();
    channels.sort_unstable();
    channels.dedup();
    let mut rows = Vec::new();
    for &n in &channels {
        for bits in MERRY_BITS {
            let config = pfb_config(n, bits)?;
            rows.push(row(&config, PfbPath::for_config(gpu, &config), ceilings)?);
        }
    }
    if rows.is_empty() {
        return Err(Error::InvalidConfig("the Merry model has no rows (internal error)".into()));
    }
    Ok(rows)
}

/// The model as text, with each measured F-engine row (channels, bits, Gsample/s per
/// polarisation) beside the model row of its shape.
pub fn format(rows: &[Row], measured: &[(u32, u32, f64)]) -> String {
    let mut out = String::from(
        "Merry model (Fig. 11) for this GPU: the largest sample rate per polarisation (Gsample/s) that \
         PCIe and device memory allow,\n  two polarisations in, complex int8 out; device memory carries \
         the kernels' bytes and the copies'\n",
    );
    out += &format!(
        "  {:>6} {:>4} {:<12} {:>7} {:>7} {:>7} {:>7} {:>10} {:>8} {:>7}  {}\n",
        "n", "bits", "path", "H2D", "D2H", "both", "PCIe", "dev B/smp", "dev mem", "model", "measured engine"
    );
    for r in rows {
        let engine = measured
            .iter()
            .filter(|m| (m.0, m.1) == (r.channels, r.bits))
            .map(|m| format!("{:.2} ({:.1}% of model)", m.2, 100.0 * m.2 * 1e9 / r.rate()))
            .collect::<Vec<_>>()
            .join(", ");
        let path = match r.path {
            PfbPath::Fused => "fused",
            PfbPath::ThreeKernel => "three-kernel",
            _ => "other",
        };
        out += &format!(
            "  {:>6} {:>4} {:<12} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>10.2} {:>8.1} {:>7.2}  {}\n",
            r.channels,
            r.bits,
            path,
            r.h2d / 1e9,
            r.d2h / 1e9,
            r.both / 1e9,
            r.pcie() / 1e9,
            r.device_bytes,
            r.device / 1e9,
            r.rate() / 1e9,
            engine
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceilings() -> Ceilings {
        Ceilings { h2d: 55.4, d2h: 55.2, both: 100.9, device_copy: 4000.0 }
    }

    #[test]
    fn ten_bit_input_is_bound_near_22_gsamples_per_pol_by_pcie() {
        let config = pfb_config(32768, 10).unwrap();
        let r = row(&config, PfbPath::ThreeKernel, &ceilings()).unwrap();
        assert_eq!((r.input_bytes, r.output_bytes), (2.5, 2.0));
        assert_eq!(r.device_bytes, 2.5 + 32.0 + 2.0 + 2.5 + 2.0);
        assert!((r.h2d / 1e9 - 55.4 / 2.5).abs() < 1e-9);
        assert!((r.d2h / 1e9 - 55.2 / 2.0).abs() < 1e-9);
        // Both copying, each direction at 100.9 / 2 GB/s; the input's last 0.5 B alone.
        let duplex = 2.0 / 50.45 + 0.5 / 55.4;
        assert!((r.both / 1e9 - 1.0 / duplex).abs() < 1e-9);
        assert!((r.pcie() - r.both).abs() < 1e-3);
        assert!((r.device / 1e9 - 4000.0 / 41.0).abs() < 1e-9);
        assert_eq!(r.rate(), r.pcie());
        // The fused path moves only the input and output through device memory.
        let f = row(&pfb_config(1024, 10).unwrap(), PfbPath::Fused, &ceilings()).unwrap();
        assert_eq!(f.device_bytes, 9.0);
    }

    #[test]
    fn narrow_input_is_bound_by_the_output_copy() {
        let r = row(&pfb_config(1024, 4).unwrap(), PfbPath::Fused, &ceilings()).unwrap();
        assert_eq!(r.input_bytes, 1.0);
        assert_eq!(r.pcie(), r.both.min(r.d2h));
        assert!(r.d2h < r.h2d);
    }

    #[test]
    fn the_table_text_places_measured_rows() {
        let rows = vec![
            row(&pfb_config(1024, 10).unwrap(), PfbPath::Fused, &ceilings()).unwrap(),
            row(&pfb_config(1024, 12).unwrap(), PfbPath::Fused, &ceilings()).unwrap(),
        ];
        let text = format(&rows, &[(1024, 10, 20.0)]);
        let line = text.lines().find(|l| l.contains(" 10 fused")).expect("the 10-bit row");
        assert!(line.contains("20.00 ("), "{text}");
        let other = text.lines().find(|l| l.contains(" 12 fused")).expect("the 12-bit row");
        assert!(!other.contains('('), "{text}");
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn device_bytes_match_the_channelizer() {
        let gpu = crate::open(0).expect("a GPU");
        for (n, path) in [(1024, PfbPath::ThreeKernel), (4096, PfbPath::ThreeKernel), (1024, PfbPath::Fused)]
        {
            for bits in [4, 10, 16] {
                let config = ChannelizerConfig { bits, heaps_per_chunk: 2, ..ChannelizerConfig::new(n) };
                let channelizer = match path
                    .kernel(&gpu, &config)
                    .and_then(|k| crate::pfb::Channelizer::with_kernel(&gpu, config.clone(), None, k))
                {
                    Ok(c) => c,
                    Err(e) if path == PfbPath::Fused => {
                        println!("fused path unavailable for n = {n}, {bits} bits: {e}");
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                };
                let expected = match path {
                    PfbPath::ThreeKernel => {
                        let (fir, fft, post) = channelizer.kernel_bytes();
                        fir + fft + post
                    }
                    PfbPath::Fused => channelizer.fused_bytes(),
                    other => panic!("no byte model for {other:?}"),
                };
                assert_eq!(device_bytes(&config, path), expected, "n = {n}, {bits} bits, {path:?}");
            }
        }
    }
}
