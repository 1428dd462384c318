//! The dither-state kernels (sm_80 PTX): the states' initialisation by subsequence jumps, and
//! a test kernel that draws from them. The beamformer's own draws are in `device`.
use crate::intrinsics::*;
use crate::xorwow::{self, Xorwow, STATE_WORDS};

/// Dither states: thread i (< count) stores `curand_init(seed, s + i, offset)` given
/// `base` = that state for i = 0 and `jumps[k]` = the xorshift matrix of 2^(67 + k) steps
/// (k < 32, built on the host): the subsequence jump by i is the product of the jumps of
/// its set bits (powers of one matrix commute).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn delay_beamformer_dither_init(
    states: *mut u32,
    count: u32,
    base: *const u32,
    jumps: *const xorwow::Jump,
) {
    let i = global_thread_x();
    if i >= count {
        return;
    }
    let mut g = Xorwow::from_words(core::array::from_fn(|w| *base.add(w)));
    let mut bit = 0;
    while bit < 32 {
        if (i >> bit) & 1 != 0 {
            g.v = xorwow::apply(&*jumps.add(bit as usize), g.v);
        }
        bit += 1;
    }
    for (w, value) in g.to_words().into_iter().enumerate() {
        *states.add(i as usize * STATE_WORDS + w) = value;
    }
}

/// Test kernel: `draws` draws from each of `count` states, raw into `raw[draw][state]` and
/// as dither values into `values[draw][state]`; the states are advanced in place.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn delay_beamformer_dither_draws(
    states: *mut u32,
    count: u32,
    draws: u32,
    raw: *mut u32,
    values: *mut f32,
) {
    let i = global_thread_x();
    if i >= count {
        return;
    }
    let at = states.add(i as usize * STATE_WORDS);
    let mut g = Xorwow::from_words(core::array::from_fn(|w| *at.add(w)));
    let mut n = 0;
    while n < draws {
        let r = g.next_u32();
        let o = n as usize * count as usize + i as usize;
        *raw.add(o) = r;
        *values.add(o) = xorwow::dither(r);
        n += 1;
    }
    for (w, value) in g.to_words().into_iter().enumerate() {
        *at.add(w) = value;
    }
}
