//! The dither generator: curand-compatible XORWOW states and their device copies.
use super::*;

/// Jump matrices: `offset[k]` advances 2^k steps, `sequence[k]` 2^(67 + k) steps (one
/// curand subsequence is 2^67 steps), by repeated squaring of the one-step matrix.
pub(super) struct Jumps {
    pub(super) offset: Vec<Jump>,
    pub(super) sequence: Vec<Jump>,
}

pub(super) fn jumps() -> &'static Jumps {
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
    pub(super) buffer: DeviceBuffer<u32>,
    pub(super) count: u32,
    pub(super) plan: Plan,
    /// The curand seed every state was initialised with.
    pub seed: u64,
    /// The curand subsequence of state 0 (state i uses `first_subsequence + i`); see
    /// [`engine_subsequence`] for keeping engines apart.
    pub first_subsequence: u64,
}

impl DitherState {
    /// Number of XORWOW generator states (one per thread of every block of the plan's
    /// launch, [`Plan::state_count`]), each [`STATE_WORDS`](radio_kernels_gpu::xorwow::STATE_WORDS) u32 words on the device.
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
        let kernel = gpu.kernel(&layout::DITHER_DRAWS)?;
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
        unsafe { launch.launch(launch_1d(self.count.div_ceil(DITHER_THREADS), DITHER_THREADS, 0)) }
            .during("drawing dither values")?;
        Ok((raw.download()?, values.download()?))
    }
}

/// Weights and delays on the GPU, checked once by [`DelayBeamformer::upload_steering`]
/// ([`check_steering`]), for repeated launches with [`DelayBeamformer::beamform_steered`]
/// (which then need no download to check them).
pub struct DeviceSteering {
    pub(super) weights: DeviceBuffer<Complex<f32>>,
    pub(super) delays: DeviceBuffer<f32>,
    pub(super) antennas: u32,
    pub(super) beams: usize,
    /// The last absolute channel the delays were checked for.
    pub(super) last_channel: u32,
}

impl DeviceSteering {
    /// The weights w, `[antenna][beam]`.
    pub fn weights(&self) -> &DeviceBuffer<Complex<f32>> {
        &self.weights
    }
    /// The delays d, `[antenna][beam]`.
    pub fn delays(&self) -> &DeviceBuffer<f32> {
        &self.delays
    }
}
