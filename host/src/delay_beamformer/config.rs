//! The delay beamformer's configuration and its launch plan (batching over antennas and
//! beams, the kernel variant).
use super::*;

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

    /// Whether any beam is dithered (the launch then needs a [`DitherState`]).
    pub fn dithered(&self) -> bool {
        self.beams.iter().any(|b| b.dither)
    }
    pub(super) fn input_len_exact(&self) -> u128 {
        self.antennas as u128 * self.channels as u128 * self.times as u128 * self.pols as u128
    }
    pub(super) fn output_len_exact(&self) -> u128 {
        self.beams.len() as u128 * self.channels as u128 * self.times as u128
    }
    /// Input length: number of `Complex<i8>` samples, `antennas * channels * times * pols`. Exact for a
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
    /// Weights and delays: `antennas * beams` values each (`Complex<f32>` weights, `f32`
    /// delays), `[antenna][beam]` (exact for a valid
    /// configuration; saturates at `usize::MAX`).
    pub fn steering_len(&self) -> usize {
        size::saturate(self.antennas as u128 * self.beams.len() as u128)
    }
    /// Output length: number of `Complex<i8>` samples, `beams * channels * times` (exact for a valid
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
    pub(super) fn last_channel(&self) -> u32 {
        (self.first_channel as u64 + self.channels as u64).saturating_sub(1).min(u32::MAX as u64) as u32
    }
}

/// How a configuration is mapped onto blocks: the kernel variant, the beam batches (which
/// beam each slot of each batch computes), and the time groups. It also fixes which dither
/// state (and so which curand subsequence) produces each dither value. Made only by
/// [`Plan::new`] or [`Plan::with_tiles_per_group`], so it always describes a valid launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub(super) variant: Variant,
    pub(super) batches: u32,
    pub(super) slot_table: Vec<u32>,
    pub(super) tiles: u32,
    pub(super) tiles_per_group: u32,
    pub(super) groups: u32,
    pub(super) coefficient_antennas: u32,
    pub(super) channels: u32,
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
        // (antenna, slot), so that short runs of tiles, which repeat that work, cost what
        // they do (docs/design-notes.md, delay beamformer).
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
pub(super) fn variant_for(config: &DelayBeamformerConfig) -> Result<Variant> {
    VARIANTS
        .into_iter()
        .find(|v| v.pols() == config.pols)
        .ok_or_else(|| Error::InvalidConfig(format!("no kernel variant for {} polarisations", config.pols)))
}

/// The beams of each polarisation, in beam order.
pub(super) fn beams_per_pol(config: &DelayBeamformerConfig) -> Vec<Vec<u32>> {
    (0..config.pols)
        .map(|p| (0..config.beams.len() as u32).filter(|&b| config.beams[b as usize].pol == p).collect())
        .collect()
}
