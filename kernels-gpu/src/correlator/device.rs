//! The entry points, one per instance of [`correlator_instances!`] (the list that also makes
//! [`INSTANCES`](super::INSTANCES) and [`KERNELS`](super::KERNELS)): the sm_80 ones in the
//! sm_80 module, the `wgmma` ones in the sm_90a module.
//!
//! Every kernel: block (k, c, z) computes block k of channel c's triangle over time slice z
//! (`slice_stages` stages of [`TIME_TILE`] samples). `mode` is an [`Output`]: int32 stores
//! (one slice), or exact integer atomic adds into complex int32 or int64, layout
//! `[c][b(i,j)][pi][pj]`. `aligned` says the input rows start on 16-byte boundaries (the
//! `wgmma` kernels require it and ignore the argument).

use super::*;
use crate::intrinsics::block_idx_z;

/// One 32-bit word (bytes `4 w .. 4 w + 4` of a 16-byte vector) element by element, zero
/// past the last station: for the ragged last tile and for inputs whose rows are not
/// 16-byte aligned. Kept out of line (and scalar, so it returns in a register) so the fast
/// path stays small enough to unroll. (Part of the sm_80 schedule, but it stands here: the
/// one function the schedule calls out of line, its PTX symbol carries its module path, and
/// this one keeps the PTX of the register-staged kernels as it has been.)
#[cfg(not(radio_sm90a))]
#[inline(never)]
pub(super) unsafe fn load_word_checked<const E: u32>(
    input: *const u8,
    p: ampere::Params,
    order: Order,
    tile: u32,
    row: u64,
    rho0: u32,
    w: u32,
) -> u32 {
    let mut word = 0;
    for byte in 0..4u32 {
        let position = 4 * w + byte;
        let rho = rho0 + position / E;
        if receiver(order, p.pols, tile, rho).0 < p.stations {
            let at = ampere::element(p, order, tile, row, rho) * E as u64 + (position % E) as u64;
            word |= (*input.add(at as usize) as u32) << (8 * byte);
        }
    }
    word
}

macro_rules! entry_points {
    ($(($name:ident, $format:ident, $order:ident, $schedule:ident, $cap:expr)),* $(,)?) => {
        $( entry_point!($schedule, $name, Format::$format, Order::$order); )*
    };
}

macro_rules! entry_point {
    (cp_async, $($rest:tt)*) => {
        sm80_entry_point!(true, $($rest)*);
    };
    (staged, $($rest:tt)*) => {
        sm80_entry_point!(false, $($rest)*);
    };
    ($kind:ident, $($rest:tt)*) => {
        sm90a_entry_point!($kind, $($rest)*);
    };
}

/// An sm_80 kernel (the `ampere` schedule): `cp.async` copies or register staging.
#[cfg(not(radio_sm90a))]
macro_rules! sm80_entry_point {
    ($async:expr, $name:ident, $format:expr, $order:expr) => {
        /// See the module documentation.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            input: *const u8,
            output: *mut u32,
            stations: u32,
            pols: u32,
            channels: u32,
            times: u32,
            aligned: u32,
            slice_stages: u32,
            mode: u32,
        ) {
            let first_stage = block_idx_z() * slice_stages;
            let stages = (times / TIME_TILE - first_stage).min(slice_stages);
            let p = ampere::Params { stations, pols, channels, first_stage, stages, aligned: aligned != 0 };
            const SHAPE: Shape = if $async { ASYNC_SHAPE } else { STAGED_SHAPE };
            const RV: usize = vectors_per_thread($format, SHAPE.threads()) as usize;
            let mode = Output::from_mode(mode);
            ampere::correlate::<
                { $format.bytes() },
                RV,
                $async,
                { SHAPE.m_tiles as usize },
                { SHAPE.n_tiles as usize },
            >(input, output, p, $order, mode);
        }
    };
}
#[cfg(radio_sm90a)]
macro_rules! sm80_entry_point {
    ($($ignored:tt)*) => {};
}

/// An sm_90a kernel (the `hopper` blocks) of block kind `pair`, `split` or `channel_split`.
#[cfg(radio_sm90a)]
macro_rules! sm90a_entry_point {
    ($kind:ident, $name:ident, $format:expr, $order:expr) => {
        /// See the module documentation; `Kind::threads()` threads and `Kind::smem_bytes()` of
        /// dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            input: *const u8,
            output: *mut u32,
            stations: u32,
            pols: u32,
            channels: u32,
            times: u32,
            _aligned: u32,
            slice_stages: u32,
            mode: u32,
        ) {
            let first_stage = block_idx_z() * slice_stages;
            let stages = (times / TIME_TILE - first_stage).min(slice_stages);
            let mode = Output::from_mode(mode);
            hopper::pair::correlate::<{ sm90a_kind!($kind).0 }, { sm90a_kind!($kind).1 }>(
                input,
                output,
                hopper::pair::Params { stations, pols, channels },
                $order,
                first_stage,
                stages,
                mode,
            );
        }
    };
}
#[cfg(not(radio_sm90a))]
macro_rules! sm90a_entry_point {
    ($($ignored:tt)*) => {};
}

/// An sm_90a kind's `KIND` code and accumulator registers per warpgroup.
#[cfg(radio_sm90a)]
macro_rules! sm90a_kind {
    (pair) => {
        (hopper::pair::PAIR, 32)
    };
    (split) => {
        (hopper::pair::SPLIT, 64)
    };
    (channel_split) => {
        (hopper::pair::CHANNEL_SPLIT, 64)
    };
}

correlator_instances!(entry_points);
