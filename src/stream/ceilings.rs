//! The transfer and device-memory ceilings the engines are measured against: pinned
//! host-to-device, device-to-host and both directions at once (256 MiB copies on the engines'
//! own streams, CUDA events, medians), and the device-memory copy kernel; with the transfer
//! bounds of a chunk they give ([`Ceilings::transfer_s`], [`Ceilings::both_s`]).
use super::system::fill_host_random;
use super::CEILING_BYTES;
use crate::streaming::{InputRing, Lanes, OutputRing};
use crate::summary::{fill_random, launch_copy, median_ms};
use crate::{DriverContext, Error, Gpu, Result, Timer};

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
