//! Baseband beamformer: configuration, validation, the launcher (which owns the beam weights
//! and shifts on the device, like a planner owns its precomputed state) and the exact CPU
//! reference. Device side and formulas: `radio_kernels_gpu::baseband_beamformer`.
//!
//! `J[beta][f][p][tau] = Q4(round(sum_d A[f][p][beta][d] E[tau][f][p][d] / 2^s[f][p][beta]))`,
//! bit-exact for every input (E = -8 and A = -128 included). Formats: E and J complex int4+4
//! (one byte, re in the low nibble, `packing::pack_ci4`), A complex int8+8 (`[i8; 2]` = [re,
//! im]), s `i32` in 0..=31.
//!
//! Sizes: E and J pass 2^32 bytes within the valid range (e.g. F = 65535, T = 2^22), so the
//! kernels index them with 64-bit offsets; the work-item index is 32-bit, which `validate()`
//! enforces (`F * 2 * T / 128 < 2^32`). The size and index helpers are exact (u128
//! arithmetic) for every valid configuration and saturate, never wrap or panic, on invalid
//! ones.
//!
//! Streams: [`BasebandBeamformer::beamform`] and [`BasebandBeamformer::set_weights`] work on
//! the launcher's stream ([`BasebandBeamformer::set_stream`]); the streaming engine
//! ([`BasebandBeamformer::streaming`], module [`streaming`]) runs E chunks from host memory
//! to J in host memory on its own lanes.
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::size;
use cudarc::driver::CudaFunction;
use radio_kernels_gpu::baseband_beamformer as layout;
pub use radio_kernels_gpu::baseband_beamformer::{CHUNK, POLS};
use radio_kernels_gpu::packing::{pack_ci4, shift_round_saturate_i4, unpack_ci4};

pub mod streaming;
pub use streaming::BasebandStream;

/// CHORD's sampling time, 4096 / 2.4 GHz (the seed rounds it to 1.7 us).
pub const SAMPLE_TIME_S: f64 = 4096.0 / 2.4e9;

/// What one launch beamforms. Polarisations are fixed at [`POLS`] = 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeamformerConfig {
    /// Dishes D: a multiple of 64 in 64..=1024.
    pub dishes: u32,
    /// Beams B: a multiple of 8 in 8..=128, with `B * D <= 65536`.
    pub beams: u32,
    /// Frequency channels F, 1..=65535.
    pub freqs: u32,
    /// Time samples T per launch: a positive multiple of [`CHUNK`] (128).
    pub times: u32,
}

impl BeamformerConfig {
    /// Full CHORD per GPU: D = 512, B = 96, F = 16.
    pub const fn chord(times: u32) -> BeamformerConfig {
        BeamformerConfig { dishes: 512, beams: 96, freqs: 16, times }
    }
    /// CHORD pathfinder: D = 64, B = 16, F = 128.
    pub const fn pathfinder(times: u32) -> BeamformerConfig {
        BeamformerConfig { dishes: 64, beams: 16, freqs: 128, times }
    }

    /// Checks every parameter; the first violation is returned as `InvalidConfig`.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::InvalidConfig(message));
        let (d, b) = (self.dishes, self.beams);
        if !(layout::MIN_DISHES..=layout::MAX_DISHES).contains(&d) || !d.is_multiple_of(layout::DISH_GROUP) {
            return bad(format!("dishes must be a multiple of 64 in 64..=1024, got {d}"));
        }
        if b == 0 || b > layout::MAX_BEAMS || !b.is_multiple_of(layout::BEAMS_PER_WARP) {
            return bad(format!("beams must be a multiple of 8 in 8..=128, got {b}"));
        }
        if b * d > layout::MAX_BEAMS_TIMES_DISHES {
            return bad(format!(
                "beams * dishes = {b} * {d} exceeds 65536: the beam matrix must fit in registers (seed eq. 9)"
            ));
        }
        if self.freqs == 0 || self.freqs > 65535 {
            return bad(format!("freqs must be 1..=65535, got {}", self.freqs));
        }
        if self.times == 0 || !self.times.is_multiple_of(CHUNK) {
            return bad(format!(
                "times per launch must be a positive multiple of {CHUNK}, got {}",
                self.times
            ));
        }
        if self.items() > u32::MAX as u64 {
            return bad(format!(
                "freqs * 2 * times / 128 = {} work items exceeds 2^32 - 1, the kernel's 32-bit item index",
                self.items()
            ));
        }
        // Every field is in range here, so every size fits in u64 (the kernels index E, A and
        // J with 64-bit offsets); on hosts with a narrower usize they may not.
        for (what, factors, element_bytes) in [
            ("E", [self.times, self.freqs, POLS, self.dishes], 1u128),
            ("J", [self.beams, self.freqs, POLS, self.times], 1),
            ("A", [self.freqs, POLS, self.beams, self.dishes], 2),
            ("s", [self.freqs, POLS, self.beams, 1], 4),
        ] {
            let bytes = factors.iter().map(|&f| f as u128).product::<u128>() * element_bytes;
            if usize::try_from(bytes).is_err() {
                return bad(format!("{what} would hold {bytes} bytes, more than this host can address"));
            }
        }
        Ok(())
    }

    /// 128-sample work items of one launch: `F * POLS * T / 128`.
    pub fn items(&self) -> u64 {
        self.freqs as u64 * POLS as u64 * (self.times / CHUNK) as u64
    }
    /// E size in bytes (ci4 `[tau][f][p][d]`). This and the other size helpers are exact
    /// whenever the size fits in `usize` (every configuration `validate()` accepts) and
    /// saturate at `usize::MAX` otherwise.
    pub fn e_len(&self) -> usize {
        size::product(&[self.times, self.freqs, POLS, self.dishes])
    }
    /// A size in complex values (ci8 `[f][p][beta][d]`).
    pub fn weights_len(&self) -> usize {
        size::product(&[self.freqs, POLS, self.beams, self.dishes])
    }
    /// Number of shifts (`[f][p][beta]`).
    pub fn shifts_len(&self) -> usize {
        size::product(&[self.freqs, POLS, self.beams])
    }
    /// J size in bytes (ci4 `[beta][f][p][tau]`).
    pub fn output_len(&self) -> usize {
        size::product(&[self.beams, self.freqs, POLS, self.times])
    }
    /// Position of `E[tau][f][p][d]`. This and the other index helpers compute exactly in
    /// u128: meaningful for in-range arguments of a valid configuration, they saturate at
    /// `usize::MAX` where the position does not fit in `usize`.
    pub fn e_index(&self, tau: u32, f: u32, p: u32, d: u32) -> usize {
        size::row_major(&[(tau, 1), (f, self.freqs), (p, POLS), (d, self.dishes)])
    }
    /// Position of `A[f][p][beta][d]`.
    pub fn weight_index(&self, f: u32, p: u32, beam: u32, d: u32) -> usize {
        size::row_major(&[(f, 1), (p, POLS), (beam, self.beams), (d, self.dishes)])
    }
    /// Position of `s[f][p][beta]`.
    pub fn shift_index(&self, f: u32, p: u32, beam: u32) -> usize {
        size::row_major(&[(f, 1), (p, POLS), (beam, self.beams)])
    }
    /// Position of `J[beta][f][p][tau]`.
    pub fn output_index(&self, beam: u32, f: u32, p: u32, tau: u32) -> usize {
        size::row_major(&[(beam, 1), (f, self.freqs), (p, POLS), (tau, self.times)])
    }
    /// Useful operations of one launch: 8 per complex multiply-accumulate, `8 P F B D T`.
    pub fn useful_ops(&self) -> f64 {
        8.0 * POLS as f64 * self.freqs as f64 * self.beams as f64 * self.dishes as f64 * self.times as f64
    }
    /// Telescope time one launch covers: `T * 4096 / 2.4 GHz`.
    pub fn real_time_s(&self) -> f64 {
        self.times as f64 * SAMPLE_TIME_S
    }

    fn check_len(&self, what: &'static str, expected: usize, actual: usize) -> Result<()> {
        if expected == actual {
            Ok(())
        } else {
            Err(Error::ShapeMismatch { what, expected, actual })
        }
    }

    /// Checks the configuration, then the weight and shift arrays: lengths, and every shift in
    /// 0..=31.
    pub fn check_weights(&self, weights: &[[i8; 2]], shifts: &[i32]) -> Result<()> {
        self.validate()?;
        self.check_len("beamformer weights (complex values)", self.weights_len(), weights.len())?;
        self.check_len("beamformer shifts", self.shifts_len(), shifts.len())?;
        if let Some((at, s)) = shifts.iter().enumerate().find(|(_, s)| !(0..=31).contains(*s)) {
            let fp = at / self.beams as usize;
            return Err(Error::InvalidConfig(format!(
                "shift s[f={}][p={}][beta={}] = {s} is outside 0..=31",
                fp / POLS as usize,
                fp % POLS as usize,
                at % self.beams as usize
            )));
        }
        Ok(())
    }
}

/// The exact CPU reference: the formula of the module comment with i64 sums.
pub fn beamform_reference(
    config: &BeamformerConfig,
    e: &[u8],
    weights: &[[i8; 2]],
    shifts: &[i32],
) -> Result<Vec<u8>> {
    config.validate()?;
    config.check_len("beamformer E (bytes)", config.e_len(), e.len())?;
    config.check_weights(weights, shifts)?;
    let c = config;
    let mut out = vec![0u8; c.output_len()];
    let mut row = vec![(0i64, 0i64); c.dishes as usize];
    for tau in 0..c.times {
        for f in 0..c.freqs {
            for p in 0..POLS {
                // E[tau][f][p][..] is `dishes` consecutive bytes.
                let samples = &e[c.e_index(tau, f, p, 0)..][..c.dishes as usize];
                for (x, &byte) in row.iter_mut().zip(samples) {
                    let (re, im) = unpack_ci4(byte);
                    *x = (re as i64, im as i64);
                }
                for beam in 0..c.beams {
                    let a = &weights[c.weight_index(f, p, beam, 0)..][..c.dishes as usize];
                    let (mut re, mut im) = (0i64, 0i64);
                    for (&[ar, ai], &(er, ei)) in a.iter().zip(&row) {
                        let (ar, ai) = (ar as i64, ai as i64);
                        re += ar * er - ai * ei;
                        im += ar * ei + ai * er;
                    }
                    // |re|, |im| <= 1024 * 2 * 128 * 8 = 2^21: exact in i32.
                    let s = shifts[c.shift_index(f, p, beam)] as u32;
                    out[c.output_index(beam, f, p, tau)] = pack_ci4(
                        shift_round_saturate_i4(re as i32, s),
                        shift_round_saturate_i4(im as i32, s),
                    );
                }
            }
        }
    }
    Ok(out)
}

/// A baseband beamformer for one configuration on one GPU, holding its beam weights and
/// shifts on the device.
pub struct BasebandBeamformer<'g> {
    gpu: &'g Gpu,
    config: BeamformerConfig,
    /// One kernel launch per beam range (one, except where no kernel takes all the beams).
    launches: Vec<Launch>,
    weights: DeviceBuffer<[i8; 2]>,
    shifts: DeviceBuffer<i32>,
    /// The stream `beamform` and `set_weights` work on.
    stream: Stream,
}

/// One kernel launch of a beamform call: beams `first_beam .. first_beam + beams`.
struct Launch {
    kernel: CudaFunction,
    first_beam: u32,
    beams: u32,
    /// Persistent blocks, the dynamic shared memory of each, and its stage rows.
    blocks: u32,
    shared_bytes: u32,
    stage_rows: u32,
}

impl<'g> BasebandBeamformer<'g> {
    /// Validates `config` and the weights (A, ci8 `[f][p][beta][d]`) and shifts (`[f][p][beta]`,
    /// each 0..=31), uploads them, and sizes the launch for this GPU.
    pub fn new(
        gpu: &'g Gpu,
        config: BeamformerConfig,
        weights: &[[i8; 2]],
        shifts: &[i32],
    ) -> Result<BasebandBeamformer<'g>> {
        config.validate()?;
        config.check_weights(weights, shifts)?;
        let mut launches = Vec::new();
        for (first_beam, beams) in layout::launch_split(config.dishes, config.beams) {
            if beams == 0 {
                continue;
            }
            let warps = beams / layout::BEAMS_PER_WARP;
            let name = layout::kernel_name(config.dishes, warps)
                .ok_or(Error::MissingKernel("baseband_beamform_d*"))?;
            let kernel = gpu.function(name)?;
            let too_big = || {
                Error::InvalidConfig(format!(
                    "{beams} beams x {} dishes needs more shared memory than {} allows per block",
                    config.dishes,
                    gpu.name()
                ))
            };
            let stage_rows =
                layout::stage_rows(config.dishes, warps, gpu.max_shared_per_block()).ok_or_else(too_big)?;
            let shared_bytes = layout::smem_bytes(config.dishes, beams, stage_rows);
            // The limit belongs to the kernel, which other configurations (and both parts of
            // a split launch) share: allow what the device allows.
            allow_dynamic_shared(
                &kernel,
                gpu.max_shared_per_block(),
                "raising the beamformer's shared-memory limit",
            )?;
            let threads = 32 * warps;
            let per_sm = kernel
                .occupancy_max_active_blocks_per_multiprocessor(threads, shared_bytes as usize, None)
                .during("querying the beamformer's occupancy")?;
            if per_sm == 0 {
                return Err(Error::InvalidConfig(format!(
                    "{beams} beams x {} dishes does not fit one SM of {} ({threads} threads, {shared_bytes} bytes of shared memory)",
                    config.dishes,
                    gpu.name(),
                )));
            }
            let blocks = (per_sm as u64 * gpu.sm_count() as u64).min(config.items()) as u32;
            // A block counts its stages (`items per block * CHUNK / stage_rows`, plus the
            // ring's look-ahead) in u32.
            let block_stages =
                config.items().div_ceil(blocks as u64) * (CHUNK / stage_rows) as u64 + layout::STAGES as u64;
            if block_stages > u32::MAX as u64 {
                return Err(Error::InvalidConfig(format!(
                    "{} work items on {blocks} blocks give {block_stages} stages per block, past the \
                     kernel's 32-bit stage count",
                    config.items()
                )));
            }
            launches.push(Launch { kernel, first_beam, beams, blocks, shared_bytes, stage_rows });
        }
        let weights = gpu.upload(weights)?;
        let shifts = gpu.upload(shifts)?;
        let stream = gpu.stream().clone();
        Ok(BasebandBeamformer { gpu, config, launches, weights, shifts, stream })
    }

    pub fn config(&self) -> &BeamformerConfig {
        &self.config
    }

    /// Runs `beamform` and `set_weights` on `stream` (the GPU's default stream until set), so
    /// that callers can order their own work with ours; [`Error::WrongDevice`] for a stream of
    /// another GPU. The new stream first waits (on the GPU) for the work enqueued on the old
    /// one. The streaming engine uses its own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "baseband beamformer stream")
    }

    /// The stream `beamform` and `set_weights` work on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Replaces the weights and shifts (same validation as [`BasebandBeamformer::new`]),
    /// copied on the launcher's [`stream`](Self::stream) after its earlier launches (which
    /// use the old ones) and before its later ones. A [`BasebandStream`] has its own copy
    /// ([`BasebandStream::set_weights`]).
    pub fn set_weights(&mut self, weights: &[[i8; 2]], shifts: &[i32]) -> Result<()> {
        self.config.check_weights(weights, shifts)?;
        self.weights.upload_on(&self.stream, weights, "upload source")?;
        self.shifts.upload_on(&self.stream, shifts, "upload source")
    }

    /// One launch on the launcher's [`stream`](Self::stream): J (`output_len()` bytes) from E
    /// (`e_len()` bytes).
    pub fn beamform(&self, e: &DeviceBuffer<u8>, output: &mut DeviceBuffer<u8>) -> Result<()> {
        self.launch(e, &self.weights, &self.shifts, output, &self.stream)
    }

    /// The kernel launches of one beamform on `stream`, with weights and shifts of this
    /// configuration (the launcher's, or a streaming engine's copy).
    fn launch(
        &self,
        e: &DeviceBuffer<u8>,
        weights: &DeviceBuffer<[i8; 2]>,
        shifts: &DeviceBuffer<i32>,
        output: &mut DeviceBuffer<u8>,
        stream: &Stream,
    ) -> Result<()> {
        self.gpu.check_owner(e, "beamformer E")?;
        self.gpu.check_owner(output, "beamformer output J")?;
        let c = &self.config;
        c.check_len("beamformer E (bytes)", c.e_len(), e.len())?;
        c.check_len("beamformer output J (bytes)", c.output_len(), output.len())?;
        c.check_len("beamformer weights (complex values)", c.weights_len(), weights.len())?;
        c.check_len("beamformer shifts", c.shifts_len(), shifts.len())?;
        let fps = c.freqs * POLS;
        for part in &self.launches {
            let first = part.first_beam as usize;
            let weights = weights.raw().slice(first * c.dishes as usize * 2..);
            let shifts = shifts.raw().slice(first * 4..);
            let j_offset = first * fps as usize * c.times as usize;
            let mut j = output.arg_mut().slice_mut(j_offset..);
            let mut launch = stream.launch_builder(&part.kernel);
            launch
                .arg(e.raw())
                .arg(&weights)
                .arg(&shifts)
                .arg(&mut j)
                .arg(&c.beams)
                .arg(&fps)
                .arg(&c.times)
                .arg(&part.stage_rows);
            // SAFETY: arguments match `baseband_beamform_d*` (kernels-gpu
            // baseband_beamformer.rs) for this dish count and block size; E, A, s and J hold
            // `e_len()`, `weights_len()`, `shifts_len()` and `output_len()` elements of a
            // validated configuration (checked above) and the views start at beam
            // `first_beam` of layouts with `beams` beams (`beam_stride`); cudarc allocations
            // are 256-byte aligned and the offsets are multiples of 16 bytes, as the kernel's
            // 16-byte accesses need.
            unsafe {
                launch.launch(launch_1d(
                    part.blocks,
                    32 * part.beams / layout::BEAMS_PER_WARP,
                    part.shared_bytes,
                ))
            }
            .during("launching the baseband beamformer")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use radio_kernels_gpu::packing::unpack_ci4;

    fn config(dishes: u32, beams: u32, freqs: u32, times: u32) -> BeamformerConfig {
        BeamformerConfig { dishes, beams, freqs, times }
    }

    #[test]
    fn validation_accepts_the_documented_ranges_and_names_each_violation() {
        for (d, b) in [(512, 96), (512, 16), (512, 128), (64, 16), (1024, 64), (64, 128), (576, 8)] {
            config(d, b, 16, 256).validate().unwrap();
        }
        let cases = [
            (config(0, 8, 1, 128), "dishes"),
            (config(96, 8, 1, 128), "dishes"),
            (config(1088, 8, 1, 128), "dishes"),
            (config(64, 0, 1, 128), "beams"),
            (config(64, 12, 1, 128), "beams"),
            (config(64, 136, 1, 128), "beams"),
            (config(1024, 72, 1, 128), "65536"),
            (config(64, 8, 0, 128), "freqs"),
            (config(64, 8, 1, 0), "times"),
            (config(64, 8, 1, 192), "times"),
        ];
        for (c, word) in cases {
            match c.validate() {
                Err(Error::InvalidConfig(m)) => assert!(m.contains(word), "{c:?}: {m}"),
                other => panic!("{c:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn weights_and_shifts_are_checked() {
        let c = config(64, 8, 2, 128);
        let w = vec![[0i8; 2]; c.weights_len()];
        let mut s = vec![0i32; c.shifts_len()];
        c.check_weights(&w, &s).unwrap();
        assert!(matches!(c.check_weights(&w[1..], &s), Err(Error::ShapeMismatch { .. })));
        assert!(matches!(c.check_weights(&w, &s[1..]), Err(Error::ShapeMismatch { .. })));
        s[c.shift_index(1, 0, 5)] = 32;
        match c.check_weights(&w, &s) {
            Err(Error::InvalidConfig(m)) => assert!(m.contains("s[f=1][p=0][beta=5] = 32"), "{m}"),
            other => panic!("{other:?}"),
        }
        s[c.shift_index(1, 0, 5)] = -1;
        assert!(c.check_weights(&w, &s).is_err());
        let e = vec![0u8; c.e_len() - 1];
        assert!(matches!(beamform_reference(&c, &e, &w, &[0; 16]), Err(Error::ShapeMismatch { .. })));
    }

    #[test]
    fn indices_follow_the_documented_layouts() {
        let c = config(128, 16, 3, 256);
        assert_eq!(c.e_index(1, 0, 0, 0), 3 * 2 * 128);
        assert_eq!(c.e_index(0, 1, 1, 5), (2 + 1) * 128 + 5);
        assert_eq!(c.weight_index(0, 1, 2, 3), (16 + 2) * 128 + 3);
        assert_eq!(c.output_index(1, 0, 0, 0), 3 * 2 * 256);
        assert_eq!(c.output_index(0, 2, 1, 7), 5 * 256 + 7);
        assert_eq!(c.items(), 3 * 2 * 2);
        assert_eq!(c.useful_ops(), 8.0 * 2.0 * 3.0 * 16.0 * 128.0 * 256.0);
    }

    /// One dish, hand-computed products, including -8 x -128 and rounding ties.
    #[test]
    fn reference_on_hand_computed_values() {
        let c = config(64, 8, 1, 128);
        let mut e = vec![0u8; c.e_len()];
        let mut w = vec![[0i8; 2]; c.weights_len()];
        let mut s = vec![0i32; c.shifts_len()];
        // E[0][0][0][3] = -8 - 8i; A[0][0][beam 0][3] = -128 - 128i:
        // (-128 - 128i)(-8 - 8i) = 1024 - 1024 + (1024 + 1024) i = 0 + 2048i.
        e[c.e_index(0, 0, 0, 3)] = pack_ci4(-8, -8);
        w[c.weight_index(0, 0, 0, 3)] = [-128, -128];
        s[c.shift_index(0, 0, 0)] = 8; // 2048 / 256 = 8 -> saturates to 7
                                       // Beam 1: A = 3 + 0i, E = 5 - 3i -> 15 - 9i; s = 1: 7.5 -> 8 (round half up) -> 7,
                                       // -4.5 -> -4.
        e[c.e_index(0, 0, 0, 4)] = pack_ci4(5, -3);
        w[c.weight_index(0, 0, 1, 4)] = [3, 0];
        s[c.shift_index(0, 0, 1)] = 1;
        // Beam 2: same product, s = 2: 3.75 -> 4, -2.25 -> -2.
        w[c.weight_index(0, 0, 2, 4)] = [3, 0];
        s[c.shift_index(0, 0, 2)] = 2;
        // Beam 3, polarisation 1 at time 1: A = 0 + 1i, E = 2 + 1i -> -1 + 2i, s = 0.
        e[c.e_index(1, 0, 1, 0)] = pack_ci4(2, 1);
        w[c.weight_index(0, 1, 3, 0)] = [0, 1];
        let j = beamform_reference(&c, &e, &w, &s).unwrap();
        let at = |beam, p, tau| unpack_ci4(j[c.output_index(beam, 0, p, tau)]);
        assert_eq!(at(0, 0, 0), (0, 7));
        assert_eq!(at(1, 0, 0), (7, -4));
        assert_eq!(at(2, 0, 0), (4, -2));
        assert_eq!(at(3, 1, 1), (-1, 2));
        assert_eq!(at(3, 1, 0), (0, 0));
        let nonzero = j.iter().filter(|&&b| b != 0).count();
        assert_eq!(nonzero, 4);
    }
}
