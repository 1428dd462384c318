//! Delay beamformer (MeerKAT-style B-engine, seed 003): configuration, plan, validation,
//! steering helpers, curand-compatible dither states, the launcher, and the CPU reference.
//! Device side, formulas and layouts: `radio_kernels_gpu::delay_beamformer`.
//!
//! `y[b][c][t] = Q( sum_a w[a][b] exp(j pi (first_channel + c) d[a][b]) x[a][c][t][pol(b)] + dither )`
//! with x complex int8 `[antenna][channel][time][pol]`, w complex f32 and d f32
//! `[antenna][beam]`, y complex int8 `[beam][channel][time]`, Q = round half to even and
//! saturate to [-127, 127], and per-beam counts of saturated samples.
//!
//! Sizes: [`DelayBeamformerConfig::validate`] bounds every field (antennas, channels and
//! beams at most 65535, channels x times at most `u32::MAX` for the u32 saturation counters),
//! so the input holds at most 2^50 bytes and the output 2^49; the kernel forms those offsets
//! in 64 bits, and the size helpers are exact for every accepted configuration (and saturate,
//! never wrap or panic, for the others). [`Plan`] adds the launch's limits: at most
//! [`MAX_GROUPS`] time groups (grid y), and below 2^32 dither states when a beam is dithered.
//!
//! Non-finite values: `w` and `d` are checked before every launch ([`check_steering`]), as
//! are the inputs and results of [`steering`]: NaN or infinity is
//! [`Error::NonFinite`] (naming the argument and the first bad index), and so is a weight
//! whose `|Re w| + |Im w|` (the kernel's beam scale) or a delay whose `c d` at the last
//! channel (the kernel's phase) overflows f32. The beam sums are then finite, or +-inf after
//! the kernel's final scaling for weights near `f32::MAX`; the quantiser counts non-finite
//! values as clipped (+-inf to +-127, NaN to 0), in the kernel and in [`beamform_reference`].
//!
//! Ownership: every buffer given to a launch, and the [`DitherState`] and [`DeviceSteering`]
//! buffers, must belong to the beamformer's GPU ([`Gpu::check_owner`]), else
//! [`Error::WrongDevice`]. Device buffers need no alignment check: they are driver
//! allocations (see [`DeviceBuffer`]).
//!
//! Streams: the launcher's calls ([`DelayBeamformer::beamform`],
//! [`DelayBeamformer::beamform_steered`], [`DelayBeamformer::upload_steering`],
//! [`DelayBeamformer::dither_state`]) work on its stream ([`DelayBeamformer::set_stream`]);
//! the streaming engine ([`DelayBeamformer::streaming`], module [`streaming`]) runs chunks of
//! x from host memory to beams and saturation counts in host memory on its own lanes.
use crate::error::{DriverContext, Error, Result};
use crate::runtime::{allow_dynamic_shared, launch_1d, DeviceBuffer, Gpu, PushKernelArg, Stream};
use crate::size;
use bytemuck::Pod;
use cudarc::driver::CudaFunction;
use radio_kernels_gpu::delay_beamformer as layout;
pub use radio_kernels_gpu::delay_beamformer::{Variant, THREADS, TIME_GRANULE, VARIANTS};
use radio_kernels_gpu::xorwow::{self, Jump, STATE_WORDS};
pub use radio_kernels_gpu::xorwow::{dither, Xorwow};
use std::sync::OnceLock;

pub mod streaming;
pub use streaming::{DelayOutput, DelayStream};

/// Most time groups of one launch: the grid's y dimension.
pub const MAX_GROUPS: u32 = 65535;

/// One single-polarisation beam.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beam {
    /// The input polarisation it forms from (`< pols`).
    pub pol: u32,
    /// Add the symmetric XORWOW dither before quantisation.
    pub dither: bool,
}

/// What one launch beamforms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayBeamformerConfig {
    /// Antennas, 1 ..= 65535.
    pub antennas: u32,
    /// Input polarisations, 1 or 2.
    pub pols: u32,
    /// Channels in this launch, 1 ..= 65535.
    pub channels: u32,
    /// Absolute index of local channel 0 (the `c` of the phase slope); `first_channel +
    /// channels` at most 2^24, so every channel index is exact in f32.
    pub first_channel: u32,
    /// Time samples (spectra) per channel: a positive multiple of [`TIME_GRANULE`] (8), with
    /// `channels * times` at most `u32::MAX` (the per-beam saturation counters are u32).
    pub times: u32,
    /// 1 ..= 65535 beams.
    pub beams: Vec<Beam>,
}

impl DelayBeamformerConfig {
    /// Checks every parameter; the first violation is returned as `InvalidConfig`. An
    /// accepted configuration has every size helper exact (input below 2^50 bytes).
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::InvalidConfig(message));
        if self.antennas == 0 || self.antennas > 65535 {
            return bad(format!("antennas must be 1..=65535, got {}", self.antennas));
        }
        if self.pols != 1 && self.pols != 2 {
            return bad(format!("pols must be 1 or 2, got {}", self.pols));
        }
        if self.channels == 0 || self.channels > 65535 {
            return bad(format!("channels must be 1..=65535, got {}", self.channels));
        }
        if self.first_channel as u64 + self.channels as u64 > 1 << 24 {
            return bad(format!(
                "first_channel + channels must be at most 2^24 (exact in f32), got {} + {}",
                self.first_channel, self.channels
            ));
        }
        if self.times == 0 || !self.times.is_multiple_of(TIME_GRANULE) {
            return bad(format!("times must be a positive multiple of {TIME_GRANULE}, got {}", self.times));
        }
        if self.channels as u64 * self.times as u64 > u32::MAX as u64 {
            return bad(format!(
                "channels * times must fit the u32 saturation counters, got {} * {}",
                self.channels, self.times
            ));
        }
        if self.beams.is_empty() || self.beams.len() > 65535 {
            return bad(format!("beams must number 1..=65535, got {}", self.beams.len()));
        }
        if let Some((b, beam)) = self.beams.iter().enumerate().find(|(_, beam)| beam.pol >= self.pols) {
            return bad(format!("beam {b} reads polarisation {} of {}", beam.pol, self.pols));
        }
        // Below 2^50 bytes here; only a 32-bit host can fall short.
        for (what, bytes) in [("input", 2 * self.input_len_exact()), ("output", 2 * self.output_len_exact())]
        {
            if bytes > isize::MAX as u128 {
                return bad(format!("the {what} would hold {bytes} bytes, more than this host can address"));
            }
        }
        Ok(())
    }

    pub fn dithered(&self) -> bool {
        self.beams.iter().any(|b| b.dither)
    }
    fn input_len_exact(&self) -> u128 {
        self.antennas as u128 * self.channels as u128 * self.times as u128 * self.pols as u128
    }
    fn output_len_exact(&self) -> u128 {
        self.beams.len() as u128 * self.channels as u128 * self.times as u128
    }
    /// Input length in complex samples: `antennas * channels * times * pols`. Exact for a
    /// configuration `validate()` accepts; saturates at `usize::MAX` for others.
    pub fn input_len(&self) -> usize {
        size::saturate(self.input_len_exact())
    }
    /// Position of `x[antenna][channel][time][pol]` in the input (exact for indices inside a
    /// valid configuration; saturates at `usize::MAX`).
    pub fn input_index(&self, antenna: u32, channel: u32, time: u32, pol: u32) -> usize {
        let (c, t, p) = (self.channels as u128, self.times as u128, self.pols as u128);
        size::saturate(((antenna as u128 * c + channel as u128) * t + time as u128) * p + pol as u128)
    }
    /// Weights and delays: `antennas * beams` values, `[antenna][beam]` (exact for a valid
    /// configuration; saturates at `usize::MAX`).
    pub fn steering_len(&self) -> usize {
        size::saturate(self.antennas as u128 * self.beams.len() as u128)
    }
    /// Output length in complex samples: `beams * channels * times` (exact for a valid
    /// configuration; saturates at `usize::MAX`).
    pub fn output_len(&self) -> usize {
        size::saturate(self.output_len_exact())
    }
    /// Position of `y[beam][channel][time]` in the output (exact for indices inside a valid
    /// configuration; saturates at `usize::MAX`).
    pub fn output_index(&self, beam: u32, channel: u32, time: u32) -> usize {
        size::saturate(
            (beam as u128 * self.channels as u128 + channel as u128) * self.times as u128 + time as u128,
        )
    }
    /// Bytes one launch must move: the input read once and the output written once (exact
    /// for a valid configuration; saturates at `u64::MAX`).
    pub fn bytes(&self) -> u64 {
        let bytes =
            self.input_len_exact().checked_add(self.output_len_exact()).and_then(|n| n.checked_mul(2));
        bytes.and_then(|b| u64::try_from(b).ok()).unwrap_or(u64::MAX)
    }
    /// The largest absolute channel index, `first_channel + channels - 1` (0 for no channels).
    fn last_channel(&self) -> u32 {
        (self.first_channel as u64 + self.channels as u64).saturating_sub(1).min(u32::MAX as u64) as u32
    }
}

/// How a configuration is mapped onto blocks: the kernel variant, the beam batches (which
/// beam each slot of each batch computes), and the time groups. It also fixes which dither
/// state (and so which curand subsequence) produces each dither value. Made only by
/// [`Plan::new`] or [`Plan::with_tiles_per_group`], so it always describes a valid launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    variant: Variant,
    batches: u32,
    slot_table: Vec<u32>,
    tiles: u32,
    tiles_per_group: u32,
    groups: u32,
    coefficient_antennas: u32,
    channels: u32,
}

impl Plan {
    /// Chooses the plan for `config` on a GPU that runs `concurrent_blocks` (at least 1)
    /// blocks at once.
    ///
    /// Variant: the one of [`VARIANTS`] for the polarisations. Beams of each polarisation
    /// fill that polarisation's slots batch by batch, in beam order. Time groups: the run of
    /// tiles per block that minimises the idle share of the last wave of blocks plus the
    /// traffic of loading and storing the dither states (when dithered) and the block's
    /// coefficient work, relative to the data; at most [`MAX_GROUPS`] groups.
    pub fn new(config: &DelayBeamformerConfig, concurrent_blocks: u32) -> Result<Plan> {
        config.validate()?;
        if concurrent_blocks == 0 {
            return Err(Error::InvalidConfig(
                "concurrent_blocks (blocks the GPU runs at once) must be at least 1, got 0".into(),
            ));
        }
        let variant = variant_for(config)?;
        let batches = beams_per_pol(config).iter().map(Vec::len).max().unwrap_or(0) as u32;
        let batches = batches.div_ceil(variant.slots_per_pol());
        let tiles = config.times.div_ceil(variant.time_tile());
        let columns = config.channels as u64 * batches as u64;
        let block_bytes = config.antennas as f64 * variant.row_bytes() as f64
            + (variant.slots() * variant.time_tile() * 2) as f64;
        let state_bytes =
            if config.dithered() { 2.0 * (THREADS as usize * 4 * STATE_WORDS) as f64 } else { 0.0 };
        // Each block computes its coefficients once: counted as 64 bytes of streaming per
        // (antenna, slot) (on the H200, one tile per block ran 15% slower than seven).
        let setup_bytes = config.antennas as f64 * variant.slots() as f64 * 64.0;
        let fewest = tiles.div_ceil(MAX_GROUPS);
        let mut best = (tiles, f64::MAX);
        for per_group in fewest..=tiles {
            let blocks = columns * tiles.div_ceil(per_group) as u64;
            let waves = blocks as f64 / concurrent_blocks as f64;
            let idle = (waves.ceil() - waves) / waves.ceil();
            let cost = idle + (state_bytes + setup_bytes) / (per_group as f64 * block_bytes);
            if cost < best.1 - 1e-9 {
                best = (per_group, cost);
            }
        }
        Plan::with_tiles_per_group(config, best.0)
    }

    /// The plan of `config` with `tiles_per_group` time tiles per block: `InvalidConfig`
    /// unless it is 1 ..= the tiles of the launch and leaves at most [`MAX_GROUPS`] groups,
    /// and, when a beam is dithered, fewer than 2^32 dither states.
    pub fn with_tiles_per_group(config: &DelayBeamformerConfig, tiles_per_group: u32) -> Result<Plan> {
        config.validate()?;
        let variant = variant_for(config)?;
        let tiles = config.times.div_ceil(variant.time_tile());
        if tiles_per_group == 0 || tiles_per_group > tiles {
            return Err(Error::InvalidConfig(format!(
                "tiles_per_group must be 1..={tiles} (the launch's tiles of {} times), got {tiles_per_group}",
                variant.time_tile()
            )));
        }
        let groups = tiles.div_ceil(tiles_per_group);
        if groups > MAX_GROUPS {
            return Err(Error::InvalidConfig(format!(
                "{groups} time groups exceed the grid's {MAX_GROUPS} (grid y): take at least {} tiles per group",
                tiles.div_ceil(MAX_GROUPS)
            )));
        }
        let per_pol = variant.slots_per_pol();
        let by_pol = beams_per_pol(config);
        let batches = (by_pol.iter().map(Vec::len).max().unwrap_or(0) as u32).div_ceil(per_pol);
        let mut slot_table = vec![layout::EMPTY_SLOT; batches as usize * variant.slots() as usize];
        for (p, beams) in by_pol.iter().enumerate() {
            for (i, &b) in beams.iter().enumerate() {
                let (batch, k) = (i as u32 / per_pol, i as u32 % per_pol);
                let flag = if config.beams[b as usize].dither { layout::DITHER_FLAG } else { 0 };
                slot_table[(batch * variant.slots() + p as u32 * per_pol + k) as usize] = b | flag;
            }
        }
        let coefficient_antennas = config
            .antennas
            .next_multiple_of(variant.stage_antennas())
            .min(variant.max_coefficient_antennas());
        let plan = Plan {
            variant,
            batches,
            slot_table,
            tiles,
            tiles_per_group,
            groups,
            coefficient_antennas,
            channels: config.channels,
        };
        if config.dithered() && plan.state_count() > u32::MAX as u64 {
            return Err(Error::InvalidConfig(format!(
                "{} dither states (one per thread of {} channels x {groups} time groups x {batches} beam \
                 batches) exceed 2^32; launch fewer channels or times",
                plan.state_count(),
                config.channels
            )));
        }
        Ok(plan)
    }

    /// Ok when this is a plan of `config` (made by [`Plan::new`] for `config` on some GPU);
    /// `InvalidConfig` when it was made for another configuration.
    pub fn check(&self, config: &DelayBeamformerConfig) -> Result<()> {
        config.validate()?;
        match Plan::with_tiles_per_group(config, self.tiles_per_group) {
            Ok(plan) if plan == *self => Ok(()),
            _ => Err(Error::InvalidConfig(
                "the plan was made for another configuration (beams, polarisations, channels or times differ)"
                    .into(),
            )),
        }
    }

    /// The kernel variant.
    pub fn variant(&self) -> Variant {
        self.variant
    }
    /// Beam batches (grid x).
    pub fn batches(&self) -> u32 {
        self.batches
    }
    /// `[batch][slot]`: beam | `DITHER_FLAG`, or `EMPTY_SLOT`.
    pub fn slot_table(&self) -> &[u32] {
        &self.slot_table
    }
    /// Time tiles of `variant.time_tile()` samples covering the launch.
    pub fn tiles(&self) -> u32 {
        self.tiles
    }
    /// Consecutive tiles per block.
    pub fn tiles_per_group(&self) -> u32 {
        self.tiles_per_group
    }
    /// Time groups (grid y), at most [`MAX_GROUPS`].
    pub fn groups(&self) -> u32 {
        self.groups
    }
    /// Antennas per coefficient batch (a multiple of the stage's antennas).
    pub fn coefficient_antennas(&self) -> u32 {
        self.coefficient_antennas
    }
    /// Channels (grid z).
    pub fn channels(&self) -> u32 {
        self.channels
    }
    /// Dither states of a launch: one per thread of every block (below 2^52, exact).
    pub fn state_count(&self) -> u64 {
        self.channels as u64 * self.groups as u64 * self.batches as u64 * THREADS as u64
    }
    /// Dynamic shared memory per block.
    pub fn shared_bytes(&self) -> u32 {
        self.variant.shared_bytes(self.coefficient_antennas)
    }
}

/// The variant for `config.pols` (a validated configuration always has one).
fn variant_for(config: &DelayBeamformerConfig) -> Result<Variant> {
    VARIANTS
        .into_iter()
        .find(|v| v.pols() == config.pols)
        .ok_or_else(|| Error::InvalidConfig(format!("no kernel variant for {} polarisations", config.pols)))
}

/// The beams of each polarisation, in beam order.
fn beams_per_pol(config: &DelayBeamformerConfig) -> Vec<Vec<u32>> {
    (0..config.pols)
        .map(|p| (0..config.beams.len() as u32).filter(|&b| config.beams[b as usize].pol == p).collect())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Steering

/// Checks `weights` (w) and `delays` (d), `[antenna][beam]`, for a launch of `config`, as
/// every launch does: lengths (`ShapeMismatch`), then [`Error::NonFinite`] at the first
/// (flat) index whose w or d is NaN or infinite, whose `|Re w| + |Im w|` overflows f32 (the
/// kernel's beam scale), or whose phase `c d` overflows f32 at the last channel `c` (the
/// kernel's `half_turns`; `|d|` below about `2 * 10^31` always passes).
pub fn check_steering(config: &DelayBeamformerConfig, weights: &[[f32; 2]], delays: &[f32]) -> Result<()> {
    config.validate()?;
    let n = config.steering_len();
    for (what, len) in
        [("delay beamformer weights", weights.len()), ("delay beamformer delays", delays.len())]
    {
        if len != n {
            return Err(Error::ShapeMismatch { what, expected: n, actual: len });
        }
    }
    let first = |what: &'static str, bad: Option<usize>| match bad {
        Some(index) => Err(Error::NonFinite { what, index }),
        None => Ok(()),
    };
    first("delay beamformer weights", weights.iter().position(|w| !w[0].is_finite() || !w[1].is_finite()))?;
    first(
        "|Re w| + |Im w| (the kernel's beam scale, f32) of delay beamformer weights",
        weights.iter().position(|w| !(w[0].abs() + w[1].abs()).is_finite()),
    )?;
    first("delay beamformer delays", delays.iter().position(|d| !d.is_finite()))?;
    // Exact: the last channel is below 2^24. f32 products are monotonic in |c|, so the last
    // channel's is the largest of the launch.
    let last = config.last_channel() as f32;
    first(
        "last channel x delay (the kernel's phase, f32) of delay beamformer delays",
        delays.iter().position(|&d| !(last * d).is_finite()),
    )
}

/// Builds the kernel's `w` and `d` (`[antenna][beam]`) from the external parameters of seed
/// 003: a complex `weight[a][b]`, a quantisation `gain[b]`, a `delay[a][b]` in seconds and a
/// fringe `phase[a][b]` in radians, for channels `channel_width` Hz apart.
///
/// `w = weight * gain * exp(j phase)`, `d = 2 * channel_width * delay`, so the phase applied to
/// absolute channel c is `phase + 2 pi c channel_width delay`: it undoes a delay of `delay`
/// (a signal arriving later by tau has phase `-2 pi f tau`), with `phase` the fringe phase at
/// the frequency of channel 0 (the reference the channel index counts from).
///
/// Errors: `ShapeMismatch` for a wrong length; [`Error::NonFinite`] for a NaN or infinite
/// input (`channel width` with index 0), for a result that overflows f32 (`steering result
/// w` / `steering result d`), and for results [`check_steering`] rejects. So an `Ok` result
/// is finite and launches as it is.
pub fn steering(
    config: &DelayBeamformerConfig,
    weight: &[[f64; 2]],
    gain: &[f64],
    delay: &[f64],
    phase: &[f64],
    channel_width: f64,
) -> Result<(Vec<[f32; 2]>, Vec<f32>)> {
    config.validate()?;
    let n = config.steering_len();
    for (what, len) in [
        ("steering weights", weight.len()),
        ("steering delays", delay.len()),
        ("steering phases", phase.len()),
    ] {
        if len != n {
            return Err(Error::ShapeMismatch { what, expected: n, actual: len });
        }
    }
    if gain.len() != config.beams.len() {
        return Err(Error::ShapeMismatch {
            what: "beam gains",
            expected: config.beams.len(),
            actual: gain.len(),
        });
    }
    let first = |what: &'static str, bad: Option<usize>| match bad {
        Some(index) => Err(Error::NonFinite { what, index }),
        None => Ok(()),
    };
    first("steering weights", weight.iter().position(|w| !w[0].is_finite() || !w[1].is_finite()))?;
    first("beam gains", gain.iter().position(|g| !g.is_finite()))?;
    first("steering delays", delay.iter().position(|d| !d.is_finite()))?;
    first("steering phases", phase.iter().position(|p| !p.is_finite()))?;
    first("channel width", (!channel_width.is_finite()).then_some(0))?;
    let beams = config.beams.len();
    let mut w = Vec::with_capacity(n);
    let mut d = Vec::with_capacity(n);
    for i in 0..n {
        let g = gain[i % beams];
        let (s, c) = phase[i].sin_cos();
        let [re, im] = weight[i];
        w.push([(g * (re * c - im * s)) as f32, (g * (re * s + im * c)) as f32]);
        d.push((2.0 * channel_width * delay[i]) as f32);
    }
    first(
        "steering result w = weight x gain x exp(j phase) (f32)",
        w.iter().position(|w: &[f32; 2]| !w[0].is_finite() || !w[1].is_finite()),
    )?;
    first(
        "steering result d = 2 x channel width x delay (f32)",
        d.iter().position(|d: &f32| !d.is_finite()),
    )?;
    check_steering(config, &w, &d)?;
    Ok((w, d))
}

/// The coefficient the kernel approximates, in f64: `w exp(j pi channel d)`, the product
/// `channel * d` taken exactly (40 bits) and reduced modulo 2 before the sine. Never panics;
/// non-finite `w` or `d` (which [`check_steering`] rejects) give NaN.
pub fn coefficient_reference(w: [f32; 2], d: f32, channel: u32) -> [f64; 2] {
    let r = (channel as f64 * d as f64).rem_euclid(2.0);
    let (s, c) = (std::f64::consts::PI * r).sin_cos();
    let (wr, wi) = (w[0] as f64, w[1] as f64);
    [wr * c - wi * s, wr * s + wi * c]
}

// ---------------------------------------------------------------------------------------------
// curand-compatible XORWOW

/// Jump matrices: `offset[k]` advances 2^k steps, `sequence[k]` 2^(67 + k) steps (one
/// curand subsequence is 2^67 steps), by repeated squaring of the one-step matrix.
struct Jumps {
    offset: Vec<Jump>,
    sequence: Vec<Jump>,
}

fn jumps() -> &'static Jumps {
    static JUMPS: OnceLock<Jumps> = OnceLock::new();
    JUMPS.get_or_init(|| {
        let mut m = xorwow::step_matrix();
        let mut offset = Vec::with_capacity(64);
        for _ in 0..64 {
            offset.push(m);
            m = xorwow::compose(&m, &m);
        }
        // m is now the matrix of 2^64 steps; three more squarings give 2^67.
        for _ in 64..67 {
            m = xorwow::compose(&m, &m);
        }
        let mut sequence = Vec::with_capacity(64);
        for _ in 0..64 {
            sequence.push(m);
            m = xorwow::compose(&m, &m);
        }
        Jumps { offset, sequence }
    })
}

/// `curand_init(seed, subsequence, offset, &state)` for `curandStateXORWOW_t`: the state
/// after seeding and skipping `subsequence * 2^67 + offset` steps.
pub fn curand_init(seed: u64, subsequence: u64, offset: u64) -> Xorwow {
    let tables = jumps();
    let mut g = Xorwow::seeded(seed);
    for k in 0..64 {
        if (subsequence >> k) & 1 == 1 {
            g.v = xorwow::apply(&tables.sequence[k], g.v);
        }
    }
    for k in 0..64 {
        if (offset >> k) & 1 == 1 {
            g.v = xorwow::apply(&tables.offset[k], g.v);
        }
    }
    g.d = g.d.wrapping_add(xorwow::WEYL.wrapping_mul(offset as u32));
    g
}

/// `curand_init(seed, first_subsequence + i, offset)` for i in 0..count, each from the one
/// before by a single jump of one subsequence (a different route from [`curand_init`]'s
/// binary decomposition, which the tests compare). `InvalidConfig` when the last
/// subsequence passes 2^64 - 1 or the states do not fit in memory.
pub fn reference_states(seed: u64, first_subsequence: u64, offset: u64, count: usize) -> Result<Vec<Xorwow>> {
    if count > 0 && first_subsequence.checked_add(count as u64 - 1).is_none() {
        return Err(Error::InvalidConfig(format!(
            "first subsequence {first_subsequence} + {count} states passes curand's last subsequence (2^64 - 1)"
        )));
    }
    let mut states = Vec::new();
    states
        .try_reserve_exact(count)
        .map_err(|_| Error::InvalidConfig(format!("{count} reference dither states do not fit in memory")))?;
    let one = &jumps().sequence[0];
    let mut g = curand_init(seed, first_subsequence, offset);
    for _ in 0..count {
        states.push(g);
        g.v = xorwow::apply(one, g.v);
    }
    Ok(states)
}

/// Subsequences reserved per engine: engine `e` should start at `e * SUBSEQUENCES_PER_ENGINE`
/// so no two engines (or two threads) of a system share a curand subsequence.
pub const SUBSEQUENCES_PER_ENGINE: u64 = 1 << 32;

/// First subsequence of engine `engine` (exact: below 2^64).
pub fn engine_subsequence(engine: u32) -> u64 {
    engine as u64 * SUBSEQUENCES_PER_ENGINE
}

/// The dither generators of one beamformer, in device memory, advanced by every launch:
/// state i is `curand_init(seed, first_subsequence + i, offset)` before the first launch.
pub struct DitherState {
    buffer: DeviceBuffer<u32>,
    count: u32,
    plan: Plan,
    pub seed: u64,
    pub first_subsequence: u64,
}

impl DitherState {
    pub fn count(&self) -> u32 {
        self.count
    }
    /// Downloads the current states.
    pub fn states(&self) -> Result<Vec<Xorwow>> {
        let words = self.buffer.download()?;
        Ok(words
            .chunks_exact(STATE_WORDS)
            .map(|w| Xorwow::from_words(std::array::from_fn(|k| w[k])))
            .collect())
    }
    /// Whether these states live on `gpu` (the CUDA context of their buffer).
    pub fn belongs_to(&self, gpu: &Gpu) -> bool {
        gpu.owns(&self.buffer)
    }
    /// Test hook: `draws` draws from every state on the GPU (advancing them), returned as raw
    /// outputs and dither values, `[draw][state]`. `WrongDevice` unless the states live on
    /// `gpu`.
    pub fn draw(&mut self, gpu: &Gpu, draws: u32) -> Result<(Vec<u32>, Vec<f32>)> {
        gpu.check_owner(&self.buffer, "dither state")?;
        let len = (draws as usize).checked_mul(self.count as usize).ok_or_else(|| {
            Error::InvalidConfig(format!(
                "{draws} draws from {} states overflow the address space",
                self.count
            ))
        })?;
        let mut raw = gpu.alloc::<u32>(len, 0xA5)?;
        let mut values = gpu.alloc::<f32>(len, 0xA5)?;
        let kernel = gpu.function("delay_beamformer_dither_draws")?;
        let mut launch = gpu.stream().launch_builder(&kernel);
        launch
            .arg(self.buffer.arg_mut())
            .arg(&self.count)
            .arg(&draws)
            .arg(raw.arg_mut())
            .arg(values.arg_mut());
        // SAFETY: matches `delay_beamformer_dither_draws(states, count, draws, raw, values)`;
        // the states hold `count` states and both outputs `draws * count` values (64-bit
        // offsets in the kernel), all on `gpu`.
        unsafe { launch.launch(launch_1d(self.count.div_ceil(256), 256, 0)) }
            .during("drawing dither values")?;
        Ok((raw.download()?, values.download()?))
    }
}

/// Weights and delays on the GPU, checked once by [`DelayBeamformer::upload_steering`]
/// ([`check_steering`]), for repeated launches with [`DelayBeamformer::beamform_steered`]
/// (which then need no download to check them).
pub struct DeviceSteering {
    weights: DeviceBuffer<[f32; 2]>,
    delays: DeviceBuffer<f32>,
    antennas: u32,
    beams: usize,
    /// The last absolute channel the delays were checked for.
    last_channel: u32,
}

impl DeviceSteering {
    /// The weights w, `[antenna][beam]`.
    pub fn weights(&self) -> &DeviceBuffer<[f32; 2]> {
        &self.weights
    }
    /// The delays d, `[antenna][beam]`.
    pub fn delays(&self) -> &DeviceBuffer<f32> {
        &self.delays
    }
}

// ---------------------------------------------------------------------------------------------
// Launcher

/// A delay beamformer for one configuration on one GPU.
pub struct DelayBeamformer<'g> {
    gpu: &'g Gpu,
    config: DelayBeamformerConfig,
    plan: Plan,
    kernel: CudaFunction,
    slot_table: DeviceBuffer<u32>,
    /// The stream the launcher's calls work on.
    stream: Stream,
}

impl<'g> DelayBeamformer<'g> {
    /// Validates `config`, chooses the plan for this GPU and uploads the slot table.
    pub fn new(gpu: &'g Gpu, config: DelayBeamformerConfig) -> Result<DelayBeamformer<'g>> {
        // Any plan of this configuration has the same variant and so the same kernel.
        let probe = Plan::new(&config, 1)?;
        let variant = probe.variant;
        let kernel = gpu.function(variant.kernel_name())?;
        let most_shared = variant.shared_bytes(variant.max_coefficient_antennas());
        allow_dynamic_shared(&kernel, most_shared, "raising the delay beamformer's shared-memory limit")?;
        let per_sm = kernel
            .occupancy_max_active_blocks_per_multiprocessor(THREADS, probe.shared_bytes() as usize, None)
            .during("querying the delay beamformer's occupancy")?;
        if per_sm == 0 {
            return Err(Error::InvalidConfig(format!(
                "the delay beamformer's blocks ({} bytes of shared memory) do not fit on {}",
                probe.shared_bytes(),
                gpu.name()
            )));
        }
        let plan = Plan::new(&config, per_sm.saturating_mul(gpu.sm_count()))?;
        let slot_table = gpu.upload(&plan.slot_table)?;
        let stream = gpu.stream().clone();
        Ok(DelayBeamformer { gpu, config, plan, kernel, slot_table, stream })
    }

    /// Runs the launcher's calls (`beamform`, `beamform_steered`, `upload_steering`,
    /// `dither_state`) on `stream` (the GPU's default stream until set), so that callers can
    /// order their own work with ours; [`Error::WrongDevice`] for a stream of another GPU.
    /// The new stream first waits (on the GPU) for the work enqueued on the old one. The
    /// streaming engine uses its own lanes.
    pub fn set_stream(&mut self, stream: &Stream) -> Result<()> {
        self.gpu.switch_stream(&mut self.stream, stream, "delay beamformer stream")
    }

    /// The stream the launcher's calls work on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    pub fn config(&self) -> &DelayBeamformerConfig {
        &self.config
    }
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Dither states for this beamformer: state i starts as `curand_init(seed,
    /// first_subsequence + i, offset)` (computed on the GPU from host-built jump matrices).
    pub fn dither_state(&self, seed: u64, first_subsequence: u64, offset: u64) -> Result<DitherState> {
        let count = self.plan.state_count();
        if count > u32::MAX as u64 {
            return Err(Error::InvalidConfig(format!(
                "{count} dither states exceed 2^32; launch fewer channels or times"
            )));
        }
        if first_subsequence.checked_add(count - 1).is_none() {
            return Err(Error::InvalidConfig(format!(
                "first subsequence {first_subsequence} + {count} states passes curand's last subsequence (2^64 - 1)"
            )));
        }
        let count = count as u32; // checked above
        let stream = &self.stream;
        let base = upload_on(self.gpu, stream, &curand_init(seed, first_subsequence, offset).to_words())?;
        let matrices: Vec<u32> = jumps().sequence[..32].iter().flatten().flatten().copied().collect();
        let matrices = upload_on(self.gpu, stream, &matrices)?;
        let mut buffer = self.gpu.alloc::<u32>(count as usize * STATE_WORDS, 0xA5)?;
        let kernel = self.gpu.function("delay_beamformer_dither_init")?;
        let mut launch = stream.launch_builder(&kernel);
        launch.arg(buffer.arg_mut()).arg(&count).arg(base.raw()).arg(matrices.raw());
        // SAFETY: matches `delay_beamformer_dither_init(states, count, base, jumps)`: `count`
        // states of STATE_WORDS words, one base state, 32 jump matrices of 160 x 5 words,
        // all allocated on this GPU just above.
        unsafe { launch.launch(launch_1d(count.div_ceil(256), 256, 0)) }
            .during("initialising dither states")?;
        // The uploads must outlive the kernel that reads them.
        stream.synchronize().during("waiting for the dither states")?;
        Ok(DitherState { buffer, count, plan: self.plan.clone(), seed, first_subsequence })
    }

    /// Checks `weights` and `delays` ([`check_steering`]) and uploads them (on the launcher's
    /// stream) for [`beamform_steered`](Self::beamform_steered) and
    /// [`streaming`](Self::streaming).
    pub fn upload_steering(&self, weights: &[[f32; 2]], delays: &[f32]) -> Result<DeviceSteering> {
        check_steering(&self.config, weights, delays)?;
        Ok(DeviceSteering {
            weights: upload_on(self.gpu, &self.stream, weights)?,
            delays: upload_on(self.gpu, &self.stream, delays)?,
            antennas: self.config.antennas,
            beams: self.config.beams.len(),
            last_channel: self.config.last_channel(),
        })
    }

    /// One launch: `output` (complex int8 `[beam][channel][time]`) and the per-beam counts of
    /// saturated samples of this launch. `dither` is required when any beam is dithered and
    /// must come from this beamformer's [`dither_state`](Self::dither_state); it advances.
    ///
    /// Every buffer must belong to this beamformer's GPU (`WrongDevice`) and have its
    /// configuration's length (`ShapeMismatch`). `weights` and `delays` are downloaded (on the
    /// launcher's stream) and checked ([`check_steering`]: `NonFinite` for NaN, infinity or
    /// f32 overflow in the kernel's steering), which waits for that stream; for repeated
    /// launches with the same steering, [`upload_steering`](Self::upload_steering) checks
    /// once and [`beamform_steered`](Self::beamform_steered) launches without waiting.
    pub fn beamform(
        &self,
        input: &DeviceBuffer<[i8; 2]>,
        weights: &DeviceBuffer<[f32; 2]>,
        delays: &DeviceBuffer<f32>,
        dither: Option<&mut DitherState>,
        output: &mut DeviceBuffer<[i8; 2]>,
        saturated: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.check_arguments(input, weights, delays, dither.as_deref(), output, saturated)?;
        let (w, d) = (download_on(&self.stream, weights)?, download_on(&self.stream, delays)?);
        check_steering(&self.config, &w, &d)?;
        self.launch(input, weights, delays, dither, output, saturated, &self.stream)
    }

    /// [`beamform`](Self::beamform) with steering checked by
    /// [`upload_steering`](Self::upload_steering) (of a beamformer with the same antennas,
    /// beams and a last channel at least this one's, on this GPU), launched on the
    /// launcher's stream without a host wait.
    pub fn beamform_steered(
        &self,
        input: &DeviceBuffer<[i8; 2]>,
        steering: &DeviceSteering,
        dither: Option<&mut DitherState>,
        output: &mut DeviceBuffer<[i8; 2]>,
        saturated: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        self.check_steered(steering)?;
        self.check_arguments(
            input,
            &steering.weights,
            &steering.delays,
            dither.as_deref(),
            output,
            saturated,
        )?;
        self.launch(input, &steering.weights, &steering.delays, dither, output, saturated, &self.stream)
    }

    /// `InvalidConfig` unless `steering` was checked for this beamformer's antennas and beams
    /// up to (at least) its last channel.
    fn check_steered(&self, steering: &DeviceSteering) -> Result<()> {
        let c = &self.config;
        if steering.antennas != c.antennas
            || steering.beams != c.beams.len()
            || steering.last_channel < c.last_channel()
        {
            return Err(Error::InvalidConfig(format!(
                "the steering was checked for {} antennas x {} beams up to channel {}, this launch has {} x {} up \
                 to channel {}",
                steering.antennas,
                steering.beams,
                steering.last_channel,
                c.antennas,
                c.beams.len(),
                c.last_channel()
            )));
        }
        Ok(())
    }

    /// Ownership (`WrongDevice`), lengths (`ShapeMismatch`) and the dither state
    /// (`WrongDevice`, or `InvalidConfig` when missing or made for another plan).
    fn check_arguments(
        &self,
        input: &DeviceBuffer<[i8; 2]>,
        weights: &DeviceBuffer<[f32; 2]>,
        delays: &DeviceBuffer<f32>,
        dither: Option<&DitherState>,
        output: &DeviceBuffer<[i8; 2]>,
        saturated: &DeviceBuffer<u32>,
    ) -> Result<()> {
        let c = &self.config;
        self.gpu.check_owner(input, "delay beamformer input")?;
        self.gpu.check_owner(weights, "delay beamformer weights")?;
        self.gpu.check_owner(delays, "delay beamformer delays")?;
        self.gpu.check_owner(output, "delay beamformer output")?;
        self.gpu.check_owner(saturated, "delay beamformer saturation counts")?;
        let shapes = [
            ("delay beamformer input (complex samples)", c.input_len(), input.len()),
            ("delay beamformer weights", c.steering_len(), weights.len()),
            ("delay beamformer delays", c.steering_len(), delays.len()),
            ("delay beamformer output (complex samples)", c.output_len(), output.len()),
            ("delay beamformer saturation counts", c.beams.len(), saturated.len()),
        ];
        for (what, expected, actual) in shapes {
            if expected != actual {
                return Err(Error::ShapeMismatch { what, expected, actual });
            }
        }
        self.check_dither(dither)
    }

    /// The dither state: `WrongDevice` for another GPU's, `InvalidConfig` when missing for
    /// dithered beams or made for another plan.
    fn check_dither(&self, dither: Option<&DitherState>) -> Result<()> {
        if let Some(state) = dither {
            self.gpu.check_owner(&state.buffer, "dither state")?;
        }
        match dither {
            Some(state) if self.config.dithered() && state.plan != self.plan => Err(Error::InvalidConfig(
                "the dither state was made for another beamformer (plan differs)".into(),
            )),
            None if self.config.dithered() => {
                Err(Error::InvalidConfig("dithered beams need a DitherState".into()))
            }
            _ => Ok(()),
        }
    }

    /// The launch on `stream`, after [`check_arguments`](Self::check_arguments) and the
    /// steering checks.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        input: &DeviceBuffer<[i8; 2]>,
        weights: &DeviceBuffer<[f32; 2]>,
        delays: &DeviceBuffer<f32>,
        dither: Option<&mut DitherState>,
        output: &mut DeviceBuffer<[i8; 2]>,
        saturated: &mut DeviceBuffer<u32>,
        stream: &Stream,
    ) -> Result<()> {
        let c = &self.config;
        // No beam dithered: the states stay as they are.
        let states = dither.filter(|_| c.dithered());
        saturated.poison_on(stream, 0)?;
        let p = &self.plan;
        let null = 0u64;
        let beams = c.beams.len() as u32;
        let mut launch = stream.launch_builder(&self.kernel);
        launch
            .arg(input.raw())
            .arg(weights.raw())
            .arg(delays.raw())
            .arg(self.slot_table.raw())
            .arg(output.arg_mut())
            .arg(saturated.arg_mut());
        match states {
            Some(state) => launch.arg(state.buffer.arg_mut()),
            None => launch.arg(&null),
        };
        launch
            .arg(&c.antennas)
            .arg(&beams)
            .arg(&c.channels)
            .arg(&c.first_channel)
            .arg(&c.times)
            .arg(&p.coefficient_antennas)
            .arg(&p.tiles_per_group);
        let mut config = launch_1d(p.batches, THREADS, p.shared_bytes());
        config.grid_dim.1 = p.groups;
        config.grid_dim.2 = c.channels;
        // SAFETY: arguments match `delay_beamformer_p*_s*` (kernels-gpu delay_beamformer.rs):
        // every buffer belongs to this GPU and its length was checked against the validated
        // configuration, whose offsets the kernel forms in 64 bits (module comment there);
        // w and d passed `check_steering`; the slot table and the dither states belong to
        // this plan, and the states pointer is null only when no slot carries DITHER_FLAG.
        unsafe { launch.launch(config) }.during("launching the delay beamformer")?;
        Ok(())
    }
}

/// A new device buffer holding `data`, copied on `stream` (the allocation's fill is on the
/// GPU's stream, ordered before the copy by the buffer's events).
fn upload_on<T: Pod>(gpu: &Gpu, stream: &Stream, data: &[T]) -> Result<DeviceBuffer<T>> {
    let mut buffer = gpu.alloc::<T>(data.len(), 0)?;
    if !data.is_empty() {
        let mut view = buffer.arg_mut().slice_mut(0..std::mem::size_of_val(data));
        stream.memcpy_htod(bytemuck::cast_slice::<T, u8>(data), &mut view).during("copying to the device")?;
    }
    Ok(buffer)
}

/// `buffer` copied to a new host vector on `stream` (waits for the stream).
fn download_on<T: Pod>(stream: &Stream, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
    let mut out = vec![T::zeroed(); buffer.len()];
    if !out.is_empty() {
        let view = buffer.raw().slice(0..std::mem::size_of_val(out.as_slice()));
        stream
            .memcpy_dtoh(&view, bytemuck::cast_slice_mut::<T, u8>(&mut out))
            .during("copying from the device")?;
        stream.synchronize().during("waiting for the download")?;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// CPU reference

/// The CPU reference's result.
#[derive(Clone, Debug)]
pub struct Reference {
    /// The value before quantisation, `[beam][channel][time]`: the f64 beam sum plus the
    /// dither (exactly the kernel's f32 dither values). Finite: the steering is checked.
    pub values: Vec<[f64; 2]>,
    /// `sum_a |W| (|Re x| + |Im x|)` per output: the scale of f32 rounding errors.
    pub magnitude: Vec<f64>,
    /// Round half to even, saturate to [-127, 127] (non-finite values count as clipped).
    pub output: Vec<[i8; 2]>,
    /// Samples with either component saturated, per beam.
    pub saturated: Vec<u32>,
}

/// The plain CPU reference: the beam sums in f64 with f64 coefficients
/// ([`coefficient_reference`]), plus the dither of `states` replayed in the kernel's order
/// (module comment of `radio_kernels_gpu::delay_beamformer`), which advances `states` as a
/// launch advances the GPU's. Channels are summed on all CPU cores.
///
/// Checks as the launcher does, before any work: `plan` must be a plan of `config`
/// ([`Plan::check`]), `input` of `config.input_len()` samples, `weights` and `delays` must
/// pass [`check_steering`], and `states` (required when a beam is dithered) must number
/// `plan.state_count()`.
pub fn beamform_reference(
    config: &DelayBeamformerConfig,
    plan: &Plan,
    input: &[[i8; 2]],
    weights: &[[f32; 2]],
    delays: &[f32],
    states: Option<&mut [Xorwow]>,
) -> Result<Reference> {
    plan.check(config)?;
    if input.len() != config.input_len() {
        return Err(Error::ShapeMismatch {
            what: "reference input",
            expected: config.input_len(),
            actual: input.len(),
        });
    }
    check_steering(config, weights, delays)?;
    let states = match states {
        Some(states) if config.dithered() => {
            if states.len() as u64 != plan.state_count() {
                return Err(Error::ShapeMismatch {
                    what: "reference dither states",
                    expected: plan.state_count() as usize,
                    actual: states.len(),
                });
            }
            Some(states)
        }
        None if config.dithered() => {
            return Err(Error::InvalidConfig("dithered beams need reference dither states".into()))
        }
        _ => None,
    };
    let (a_n, b_n, t_n) = (config.antennas as usize, config.beams.len(), config.times as usize);
    let mut values = vec![[0.0f64; 2]; config.output_len()];
    let mut magnitude = vec![0.0f64; config.output_len()];

    // Beam sums, one channel at a time on each worker.
    let next = std::sync::atomic::AtomicU32::new(0);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(config.channels as usize);
    // (channel, [beam][time] sums, [beam][time] magnitudes) per finished channel.
    type ChannelSums = (u32, Vec<[f64; 2]>, Vec<f64>);
    let sums: Vec<Vec<ChannelSums>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let c = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if c >= config.channels {
                            return done;
                        }
                        let channel = config.first_channel + c;
                        let mut v = vec![[0.0f64; 2]; b_n * t_n];
                        let mut m = vec![0.0f64; b_n * t_n];
                        for a in 0..a_n {
                            for (b, beam) in config.beams.iter().enumerate() {
                                let k = a * b_n + b;
                                let [wr, wi] = coefficient_reference(weights[k], delays[k], channel);
                                let scale = (wr * wr + wi * wi).sqrt();
                                for t in 0..t_n {
                                    let [xr, xi] = input[config.input_index(a as u32, c, t as u32, beam.pol)];
                                    let (xr, xi) = (xr as f64, xi as f64);
                                    let o = b * t_n + t;
                                    v[o][0] += wr * xr - wi * xi;
                                    v[o][1] += wr * xi + wi * xr;
                                    m[o] += scale * (xr.abs() + xi.abs());
                                }
                            }
                        }
                        done.push((c, v, m));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    for (c, v, m) in sums.into_iter().flatten() {
        for b in 0..b_n {
            let o = config.output_index(b as u32, c, 0);
            values[o..o + t_n].copy_from_slice(&v[b * t_n..(b + 1) * t_n]);
            magnitude[o..o + t_n].copy_from_slice(&m[b * t_n..(b + 1) * t_n]);
        }
    }

    // Dither, replayed per state in the kernel's order.
    if let Some(states) = states {
        let v = plan.variant;
        for c in 0..config.channels {
            for g in 0..plan.groups {
                for batch in 0..plan.batches {
                    for thread in 0..THREADS {
                        let i = layout::state_index(c, g, batch, thread, plan.groups, plan.batches) as usize;
                        let rng = &mut states[i];
                        let first_tile = g * plan.tiles_per_group;
                        for tile in first_tile..(first_tile + plan.tiles_per_group).min(plan.tiles) {
                            let t0 = layout::first_time(v, tile, thread);
                            if t0 >= config.times {
                                continue;
                            }
                            for slot in 0..v.slots() {
                                let entry = plan.slot_table[(batch * v.slots() + slot) as usize];
                                if entry == layout::EMPTY_SLOT || entry & layout::DITHER_FLAG == 0 {
                                    continue;
                                }
                                let beam = entry & layout::BEAM_MASK;
                                for j in 0..v.times_per_thread() {
                                    let o = config.output_index(beam, c, t0 + j);
                                    values[o][0] += dither(rng.next_u32()) as f64;
                                    values[o][1] += dither(rng.next_u32()) as f64;
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    let mut saturated = vec![0u32; b_n];
    let mut output = Vec::with_capacity(values.len());
    for (o, value) in values.iter().enumerate() {
        let q = value.map(f64::round_ties_even);
        if q.iter().any(|r| r.abs() > 127.0 || r.is_nan()) {
            saturated[o / (config.channels as usize * t_n)] += 1;
        }
        // `as` saturates and maps NaN to 0, as the kernel's conversion does.
        output.push(q.map(|r| r.clamp(-127.0, 127.0) as i8));
    }
    Ok(Reference { values, magnitude, output, saturated })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beams(pols: &[u32], dither: bool) -> Vec<Beam> {
        pols.iter().map(|&pol| Beam { pol, dither }).collect()
    }

    fn config(
        antennas: u32,
        pols: u32,
        channels: u32,
        times: u32,
        beam_pols: &[u32],
    ) -> DelayBeamformerConfig {
        DelayBeamformerConfig {
            antennas,
            pols,
            channels,
            first_channel: 0,
            times,
            beams: beams(beam_pols, false),
        }
    }

    #[test]
    fn validation_rejects_bad_configurations() {
        let good = config(4, 2, 3, 64, &[0, 1, 1]);
        assert!(good.validate().is_ok());
        let bad = [
            DelayBeamformerConfig { antennas: 0, ..good.clone() },
            DelayBeamformerConfig { antennas: 65536, ..good.clone() },
            DelayBeamformerConfig { pols: 3, ..good.clone() },
            DelayBeamformerConfig { channels: 0, ..good.clone() },
            DelayBeamformerConfig { channels: 65536, ..good.clone() },
            DelayBeamformerConfig { first_channel: (1 << 24) - 2, ..good.clone() },
            DelayBeamformerConfig { times: 0, ..good.clone() },
            DelayBeamformerConfig { times: 12, ..good.clone() },
            DelayBeamformerConfig { beams: vec![], ..good.clone() },
            DelayBeamformerConfig { beams: beams(&[0, 2], false), ..good.clone() },
            DelayBeamformerConfig { pols: 1, ..good.clone() },
            DelayBeamformerConfig { channels: 65535, times: 65536 + 8, ..good.clone() },
        ];
        for config in bad {
            assert!(matches!(config.validate(), Err(Error::InvalidConfig(_))), "{config:?}");
            assert!(matches!(Plan::new(&config, 100), Err(Error::InvalidConfig(_))));
        }
        assert!(DelayBeamformerConfig { first_channel: (1 << 24) - 3, ..good.clone() }.validate().is_ok());
        let input = vec![[0i8; 2]; good.input_len() - 1];
        let plan = Plan::new(&good, 100).unwrap();
        let w = vec![[0.0f32; 2]; good.steering_len()];
        let d = vec![0.0f32; good.steering_len()];
        let r = beamform_reference(&good, &plan, &input, &w, &d, None);
        assert!(matches!(r, Err(Error::ShapeMismatch { .. })));
        let dithered = DelayBeamformerConfig { beams: beams(&[0, 1], true), ..good.clone() };
        let plan = Plan::new(&dithered, 100).unwrap();
        let input = vec![[0i8; 2]; dithered.input_len()];
        let (w, d) = (&w[..dithered.steering_len()], &d[..dithered.steering_len()]);
        assert!(matches!(
            beamform_reference(&dithered, &plan, &input, w, d, None),
            Err(Error::InvalidConfig(_))
        ));
        let mut few = vec![Xorwow::seeded(1); 3];
        assert!(matches!(
            beamform_reference(&dithered, &plan, &input, w, d, Some(&mut few)),
            Err(Error::ShapeMismatch { .. })
        ));
    }

    #[test]
    fn plans_place_every_beam_once_in_a_slot_of_its_polarisation() {
        for (pols, beam_count) in
            [(1, 1), (1, 45), (2, 1), (2, 8), (2, 45), (2, 64), (2, 130), (2, 256), (1, 130)]
        {
            let beam_pols: Vec<u32> = (0..beam_count).map(|b| (b * 7 / 3) % pols).collect();
            let mut c = config(64, pols, 16, 4096, &beam_pols);
            for (b, beam) in c.beams.iter_mut().enumerate() {
                beam.dither = b % 3 == 0;
            }
            let plan = Plan::new(&c, 396).unwrap();
            let v = plan.variant;
            assert_eq!(v.pols(), pols);
            let mut seen = vec![0; beam_count as usize];
            for (n, &entry) in plan.slot_table.iter().enumerate() {
                if entry == layout::EMPTY_SLOT {
                    continue;
                }
                let b = (entry & layout::BEAM_MASK) as usize;
                seen[b] += 1;
                assert_eq!(v.slot_pol(n as u32 % v.slots()), c.beams[b].pol);
                assert_eq!(entry & layout::DITHER_FLAG != 0, c.beams[b].dither);
            }
            assert!(seen.iter().all(|&n| n == 1), "{pols} {beam_count}");
            assert_eq!(plan.slot_table.len() as u32, plan.batches * v.slots());
            assert!(plan.groups * plan.tiles_per_group >= plan.tiles);
            assert!((plan.groups - 1) * plan.tiles_per_group < plan.tiles);
            assert!(plan.coefficient_antennas.is_multiple_of(v.stage_antennas()));
            assert!(plan.coefficient_antennas >= v.stage_antennas());
        }
        // MeerKAT: 8 single-pol beams from dual-pol input take one batch of the 8-slot kernel.
        let meerkat = Plan::new(&config(64, 2, 512, 4096, &[0, 1, 0, 1, 0, 1, 0, 1]), 396).unwrap();
        assert_eq!((meerkat.variant.slots(), meerkat.batches), (8, 1));
        let many = Plan::new(&config(64, 2, 512, 4096, &[0, 1].repeat(128)), 396).unwrap();
        assert_eq!((many.variant.slots(), many.batches), (8, 32));
    }

    #[test]
    fn curand_offsets_equal_stepping() {
        for seed in [0u64, 1, 0xdead_beef_0123_4567] {
            let mut g = Xorwow::seeded(seed);
            for n in 0..=300u64 {
                assert_eq!(curand_init(seed, 0, n), g, "seed {seed} offset {n}");
                g.next_u32();
            }
        }
    }

    #[test]
    fn subsequence_jumps_compose() {
        let seed = 0x5eed;
        // Sequential single jumps against the binary decomposition.
        let states = reference_states(seed, 1_000_000_007, 5, 40).unwrap();
        for (i, s) in states.iter().enumerate() {
            assert_eq!(*s, curand_init(seed, 1_000_000_007 + i as u64, 5));
        }
        // 2^67 steps is 2^64 steps done 8 times: the tables agree with each other.
        let t = jumps();
        let mut m = t.offset[63];
        for _ in 63..67 {
            m = xorwow::compose(&m, &m);
        }
        assert_eq!(m, t.sequence[0]);
        assert_eq!(xorwow::compose(&t.sequence[0], &t.sequence[0]), t.sequence[1]);
        // Offsets and subsequences commute; the Weyl counter only follows the offset.
        let g = curand_init(seed, 3, 7);
        let mut h = curand_init(seed, 3, 0);
        for _ in 0..7 {
            h.next_u32();
        }
        assert_eq!(g, h);
        assert_eq!(curand_init(seed, 9, 0).d, Xorwow::seeded(seed).d);
    }

    /// curand's own `curand_init` states and first eight `curand()` outputs, printed by
    /// `scripts/curand_xorwow.cu` (nvcc 13.0.88, NVIDIA H200, driver 580.159.04, 2026-11-21);
    /// `$RADIO_KERNELS_CURAND_REFERENCE` names a fresh file instead. Columns: seed,
    /// subsequence, offset, d, v0..v4, r0..r7.
    const CURAND: &str = "\
xorwow 0 0 0 716983765 1478573778 1163863128 4171507460 3705206908 1360900310 3179217846 1883133293 2220552389 674260989 306521119 1986458431 977720403 1414583917\n\
xorwow 1 0 0 3912863488 379486205 450422541 4171507460 3705206908 261812737 2898200796 3111669439 2179589753 379598403 3593604917 525081800 805670693 3634320042\n\
xorwow 42 0 0 3523456887 4285046900 3986065082 4171507460 3705206908 4167373432 300737663 2363150160 799977142 2317951200 1151197823 3621806847 3031260296 3889728505\n\
xorwow 16045690981402826360 0 0 3047829204 1144591578 692523552 2541367803 2100225397 1026918110 3336818595 486813872 2047268896 3689101373 3360373867 3139668472 2303597795 2972049638\n\
xorwow 0 1 0 716983765 3408372647 1835678088 1508631436 3181274380 3517576255 3955638199 1977250130 1432217238 1599962988 2102826641 2436410096 343192820 1002308619\n\
xorwow 0 2 0 716983765 338958172 330148274 822055007 2887150716 3556281650 167591721 1074664060 792354105 4133572041 2235765008 4037118697 3567306288 1759789125\n\
xorwow 0 3 0 716983765 1077961491 887333189 1237173540 1171992513 2591820218 4161663997 2124906702 2892148300 2417091812 516229349 4193974717 583391598 2529613805\n\
xorwow 42 1000 0 3523456887 1993724452 1275196854 1790436830 1930352544 2274458014 355484357 1650714997 3611160469 3120451954 1163074284 2254550262 4250632100 1723117581\n\
xorwow 16045690981402826360 1048583 0 3047829204 842269871 2476762769 3630357824 1844895112 2969425795 2996525016 2705224174 391084739 2567081862 669488264 3390367341 3644681230 1435283003\n\
xorwow 7 4294967296 0 1917454334 3640819906 2276080882 3767614869 1199121624 914877268 3784232645 3898749688 4049459885 3879297636 3867569096 497391939 377449604 3088488705\n\
xorwow 7 21474836603 0 1917454334 3718455353 2082567715 1036700634 1362247472 1397821416 3412941044 3759095396 1412128693 2780774142 1082616817 1883297753 778240433 3769740524\n\
xorwow 7 9223372036854775809 0 1917454334 3545197798 1391590078 1758745278 3893375855 4169756016 3406426580 2350900922 2225116526 2995190783 2082238240 3016950274 3930371685 2751998693\n\
xorwow 0 0 1 717346202 1163863128 4171507460 3705206908 1360900310 2461871644 1883133293 2220552389 674260989 306521119 1986458431 977720403 1414583917 618755781\n\
xorwow 0 0 7 719520824 1502481313 4250794772 3882692465 1267300044 258199579 1414583917 618755781 806591051 3931542097 2319818371 4186136636 2351362526 2805302092\n\
xorwow 42 0 1000 3885893887 2356372175 2503124388 4253771250 2175760227 3144401887 3825910127 3527362517 3967598188 2450925638 2588608083 3318115301 904223947 2314872953\n\
xorwow 16045690981402826360 3 1001 3410628641 3943427428 2418859391 410505796 3456812021 3372475896 4139128869 213638490 1091416976 4084959853 1876001836 1266793729 1033991090 3016785151\n\
xorwow 9 5 1099511627779 3711184807 1529784167 3735742325 3348625094 1604863605 3900452154 2529928388 4174322257 2536061871 3702527436 1559016221 463801764 3663467169 1930743085\n\
xorwow 18446744073709551615 18446744073709551615 18446744073709551615 4194869768 1332321613 1198045466 3264870385 2489960062 2275680540 306211019 1524243084 1962521252 26343130 2495307412 198143462 2098443895 4202559518
";

    #[test]
    fn curand_known_answers() {
        let text = std::env::var("RADIO_KERNELS_CURAND_REFERENCE")
            .map(|path| std::fs::read_to_string(path).expect("the curand reference file"))
            .unwrap_or_else(|_| CURAND.to_string());
        let mut cases = 0;
        for line in text.lines().filter(|l| l.starts_with("xorwow ")) {
            let n: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
            assert_eq!(n.len(), 17, "{line}");
            let mut g = curand_init(n[0], n[1], n[2]);
            let mut got = vec![g.d as u64];
            got.extend(g.v.map(u64::from));
            got.extend((0..8).map(|_| g.next_u32() as u64));
            assert_eq!(got, n[3..], "curand_init({}, {}, {})", n[0], n[1], n[2]);
            cases += 1;
        }
        println!("{cases} curand_init cases equal curand's");
        assert!(cases >= 18);
    }

    #[test]
    fn steering_undoes_a_delay_and_adds_the_fringe_phase() {
        let c = config(2, 1, 1, 8, &[0, 0]);
        let weight = [[1.0, 0.0], [0.5, 0.5], [2.0, 0.0], [0.0, -1.0]];
        let (w, d) =
            steering(&c, &weight, &[2.0, 0.25], &[1e-9, 0.0, -2e-9, 3e-9], &[0.0, 0.3, 1.0, 0.0], 208e3)
                .unwrap();
        // Antenna 0 beam 0: no phase; d = 2 * 208e3 * 1e-9.
        assert_eq!(w[0], [2.0, 0.0]);
        assert_eq!(d[0], (2.0 * 208e3 * 1e-9) as f32);
        // The applied phase at channel c is phase + 2 pi c df tau: W(c) = w exp(j pi c d).
        let [re, im] = coefficient_reference(w[2], d[2], 1000);
        let angle = 1.0 - 2.0 * std::f64::consts::PI * 1000.0 * 208e3 * 2e-9;
        let expected = (4.0 * angle.cos(), 4.0 * angle.sin());
        assert!((re - expected.0).abs() < 1e-5 && (im - expected.1).abs() < 1e-5, "{re} {im} {expected:?}");
        assert!(matches!(
            steering(&c, &weight[..3], &[1.0, 1.0], &[0.0; 4], &[0.0; 4], 1.0),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(matches!(
            steering(&c, &weight, &[1.0, f64::NAN], &[0.0; 4], &[0.0; 4], 1.0),
            Err(Error::NonFinite { what: "beam gains", index: 1 })
        ));
    }

    #[test]
    fn reference_passes_a_unit_beam_through_and_saturates_the_negated_minimum() {
        // One antenna, weight 1: the beam is its polarisation's input; with c d = 1 (W = -1)
        // it is negated, and -(-128) saturates to 127.
        let mut c = config(1, 2, 2, 16, &[1, 0]);
        c.first_channel = 1;
        let plan = Plan::new(&c, 10).unwrap();
        let input: Vec<[i8; 2]> =
            (0..c.input_len()).map(|i| [(i as i32 * 37 - 128) as i8, (i as i32 * 11 - 100) as i8]).collect();
        let w = vec![[1.0f32, 0.0]; 2];
        let r = beamform_reference(&c, &plan, &input, &w, &[0.0, 1.0], None).unwrap();
        let clamp = |x: [i8; 2], sign: i32| x.map(|v| (sign * v as i32).clamp(-127, 127) as i8);
        let mut minima = [0u32; 2];
        for t in 0..16 {
            for ch in 0..2 {
                let x1 = input[c.input_index(0, ch, t, 1)];
                assert_eq!(r.output[c.output_index(0, ch, t)], clamp(x1, 1));
                let x0 = input[c.input_index(0, ch, t, 0)];
                // Channel index 1 + ch: d = 1 gives W = exp(j pi (1 + ch)) = -1, then +1.
                let sign = if ch == 0 { -1 } else { 1 };
                assert_eq!(r.output[c.output_index(1, ch, t)], clamp(x0, sign));
                // -128 saturates either way: negated it is 128, kept it is below -127.
                minima[0] += x1.contains(&-128) as u32;
                minima[1] += x0.contains(&-128) as u32;
            }
        }
        assert!(minima[1] > 0);
        assert_eq!(r.saturated, minima.to_vec());
    }

    #[test]
    fn reference_dither_consumes_two_draws_per_dithered_sample() {
        let mut c = config(3, 2, 2, 200, &[0, 1, 1]);
        c.beams[1].dither = true;
        c.beams[2].dither = true;
        let plan = Plan::new(&c, 7).unwrap();
        let input = vec![[1i8, -1]; c.input_len()];
        let w = vec![[0.25f32, 0.0]; c.steering_len()];
        let d = vec![0.0f32; c.steering_len()];
        let start = reference_states(11, 0, 0, plan.state_count() as usize).unwrap();
        let mut states = start.clone();
        let r = beamform_reference(&c, &plan, &input, &w, &d, Some(&mut states)).unwrap();
        // 2 dithered beams x 2 channels x 200 samples x 2 components.
        let mut draws = 0u64;
        for (before, after) in start.iter().zip(&states) {
            let mut g = *before;
            let mut n = 0;
            while g != *after {
                g.next_u32();
                n += 1;
                assert!(n <= 64, "a state advanced too far");
            }
            draws += n;
        }
        assert_eq!(draws, 2 * 2 * 200 * 2);
        // Beam 0 is not dithered: 3 * 0.25 * (1, -1) rounds to (1, -1) exactly.
        for t in 0..200 {
            assert_eq!(r.values[c.output_index(0, 1, t)], [0.75, -0.75]);
            let v = r.values[c.output_index(1, 1, t)];
            assert!((v[0] - 0.75).abs() < 0.5 && (v[1] + 0.75).abs() < 0.5 && v != [0.75, -0.75]);
        }
    }
}
