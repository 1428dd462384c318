//! X-engine correlator on int8 tensor cores (after Clark, La Plante & Greenhill, "Accelerating
//! radio astronomy cross-correlation with graphics processing units").
//!
//! Computes, per channel c and station pair i >= j (autos included) and polarisations:
//! `V[c][b(i,j)][pi][pj] = sum_t x[t][c][i][pi] * conj(x[t][c][j][pj])`, `b(i,j) = i(i+1)/2 + j`,
//! exactly, as complex int32 per launch (or added to a complex int64 accumulator).
//!
//! Input: complex int8 (2 bytes, re first) or complex int4 (1 byte, re in the low nibble;
//! unpacked to int8 on the way into shared memory, since int4 MMA is emulated on Hopper), in
//! order `[t][c][station][pol]` (xGPU) or `[t][c][pol][station]` (CHORD).
//!
//! Tiling (Clark et al. sec. 4.1-4.4, on tensor cores). Receivers (station, pol) are grouped in
//! tiles of [`TILE`] = 64; one block computes one lower-triangle tile pair (their sec. 4.2
//! mapping of the linear block index) for one channel and one time slice, its warps sub-tiles of
//! m16n8k32 fragments ([`ASYNC_SHAPE`]: 2 warps of 32 x 64; [`STAGED_SHAPE`]: 4 of 32 x 32).
//! Time runs in stages of [`TIME_TILE`] = 64 samples, each loaded once per tile into shared
//! memory, double-buffered: with `cp.async` for 16-byte aligned int8 rows, through registers
//! otherwise (int4 is unpacked to int8 on the way; ragged rows are loaded element-wise). The
//! buffers hold `smem[t][rho]` complex int8, rows padded to [`SMEM_ROW_BYTES`] so every access
//! is bank-conflict free; `ldmatrix.trans` hands each lane two consecutive time samples of
//! one receiver, which is the m16n8k32 A/B register assignment with `k = 2 tau + ReIm`:
//! ```text
//! [(16 x 32) int8 A_rho,k]  b0 b1 <-> ReIm tau0   r0 r1 <-> rho3 tau3   t0 t1 t2 t3 t4 <-> tau1 tau2 rho0 rho1 rho2
//! ```
//! Long launches are split into time slices (grid z) that add their partial sums with
//! integer atomics, which are exact and order-independent.
//!
//! Complex product without negating any input (so -128 and -8 are exact): with x = a + ib,
//! `Re V = sum a1 a2 + b1 b2` (one MMA on [a1, b1] . [a2, b2]) and, with `~a = -a - 1`
//! (bitwise not, always representable), `Im V = sum b1 a2 - a1 b2 = ([b1, ~a1] . [a2, b2]) +
//! sum_t b2`: the row operand is transformed with one `prmt` and one xor per register, and
//! the per-column sum is taken with `dp4a` from the B fragments.
//! Every partial sum fits in int32 while `T * 2 * 128^2 < 2^31` (int8; int4: `T * 2 * 8^2`).
//!
//! On Hopper, int8 input with 16-byte aligned rows runs the `wgmma` kernels of [`hopper`]
//! (sm_90a module) instead, with the same arguments, formula and output.
//!
//! Kernels ([`INSTANCES`], [`select`]): `correlate_<format>_<order>[_<schedule>]`, with
//! - format `ci8` (complex int8) or `ci4` (complex int4);
//! - order `station_pol` (`[t][c][station][pol]`) or `pol_station` (`[t][c][pol][station]`);
//! - schedule, sm_80 (`mma.sync`, the `ampere` module): `async` for `cp.async` copies (int8,
//!   rows 16-byte aligned, [`ASYNC_SHAPE`]), none for register staging (int4, or int8 rows
//!   that are not aligned; [`STAGED_SHAPE`]); sm_90a (`wgmma`, [`hopper`], int8 with aligned
//!   rows): `wgmma` for [`hopper::Kind::Pair`] (one tile per channel), `wgmma_channel_split`
//!   for `ChannelSplit` (two), `wgmma_split` for `Split` (three or more).
//!
//! Files: `layout.rs` (the pure index functions), `ampere.rs` (the sm_80 schedule),
//! `hopper/` (the sm_90a block kinds: `pair.rs`, `split.rs`), `device.rs` (the entry points).
//!
//! Every kernel takes `(input, output, stations, pols, channels, times, aligned,
//! slice_stages, mode)`; the grid is (blocks per channel, channels, time slices).

pub mod hopper;
pub mod layout;
pub use layout::*;

use crate::modules::{Arch, Family, KernelSpec};
use hopper::Kind;

/// Input element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Complex int8+8: two bytes, real first.
    Ci8,
    /// Complex int4+4: one byte, real in the low nibble.
    Ci4,
}

impl Format {
    /// Bytes of one complex input value: 2 for [`Format::Ci8`], 1 for [`Format::Ci4`].
    pub const fn bytes(self) -> u32 {
        match self {
            Format::Ci8 => 2,
            Format::Ci4 => 1,
        }
    }
    /// Largest |component| of an input value (int8: 128, int4: 8).
    pub const fn max_magnitude(self) -> u64 {
        match self {
            Format::Ci8 => 128,
            Format::Ci4 => 8,
        }
    }
    /// Largest T for which every per-launch int32 sum is exact: `T * 2 * m^2 < 2^31`.
    pub const fn max_times_per_launch(self) -> u64 {
        let m = self.max_magnitude();
        ((1u64 << 31) - 1) / (2 * m * m)
    }
}

/// Input memory order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `[time][channel][station][pol]` (xGPU, MWA).
    StationPol,
    /// `[time][channel][pol][station]` (CHORD's E-array order).
    PolStation,
}

/// How the kernel writes its results (the `mode` kernel argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Output {
    /// Store complex int32 (the launch is one time slice).
    Store32 = 0,
    /// Atomically add complex int32 (several time slices into a zeroed output).
    Add32 = 1,
    /// Atomically add complex int64 (accumulation across launches and slices).
    Add64 = 2,
}

impl Output {
    /// The kernels' `mode` argument (anything above 1 is `Add64`).
    pub const fn from_mode(mode: u32) -> Output {
        match mode {
            0 => Output::Store32,
            1 => Output::Add32,
            _ => Output::Add64,
        }
    }
}

/// Writes the complex visibility `(real, imag)` at complex element `index` of `output` as
/// `mode` says: an int32 store, or exact atomic adds into complex int32 or int64.
///
/// # Safety
/// `output` must hold element `index` in the layout `mode` implies (8 or 16 bytes each).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn write_visibility(output: *mut u32, index: u64, real: i32, imag: i32, mode: Output) {
    use crate::intrinsics::{red_add_u32, red_add_u64, st_global_v2};
    match mode {
        Output::Store32 => st_global_v2(output.add(2 * index as usize), [real as u32, imag as u32]),
        Output::Add32 => {
            red_add_u32(output.add(2 * index as usize), real as u32);
            red_add_u32(output.add(2 * index as usize + 1), imag as u32);
        }
        Output::Add64 => {
            let at = (output as *mut u64).add(2 * index as usize);
            red_add_u64(at, real as i64 as u64);
            red_add_u64(at.add(1), imag as i64 as u64);
        }
    }
}

/// How a kernel stages its input and multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// sm_80 `mma.sync`, stages copied with `cp.async` (int8 rows 16-byte aligned):
    /// [`ASYNC_SHAPE`] blocks.
    CpAsync,
    /// sm_80 `mma.sync`, stages loaded through registers (int4 unpacked on the way, ragged
    /// rows element by element): [`STAGED_SHAPE`] blocks.
    Staged,
    /// sm_90a `wgmma` blocks of the given kind (int8 rows 16-byte aligned).
    Wgmma(Kind),
}

impl Schedule {
    /// The module the kernel is in: [`Arch::Sm90a`] for [`Schedule::Wgmma`], [`Arch::Sm80`]
    /// otherwise.
    pub const fn arch(self) -> Arch {
        match self {
            Schedule::Wgmma(_) => Arch::Sm90a,
            _ => Arch::Sm80,
        }
    }
    /// Threads per block.
    pub const fn threads(self) -> u32 {
        match self {
            Schedule::CpAsync => ASYNC_SHAPE.threads(),
            Schedule::Staged => STAGED_SHAPE.threads(),
            Schedule::Wgmma(kind) => kind.threads(),
        }
    }
    /// Dynamic shared memory per block in bytes.
    pub const fn shared_bytes(self) -> u32 {
        match self {
            Schedule::Wgmma(kind) => kind.smem_bytes(),
            _ => SMEM_BYTES,
        }
    }
    /// Blocks per channel (the grid's x) for `tiles` receiver tiles per channel.
    pub const fn blocks(self, tiles: u32) -> u32 {
        match self {
            Schedule::Wgmma(kind) => kind.blocks(tiles),
            _ => triangle_blocks(tiles),
        }
    }
}

/// One correlator kernel: its registry entry and what it computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The registry entry: entry point, module ([`Schedule::arch`]), block size
    /// ([`Schedule::threads`]) and dynamic shared memory ([`Schedule::shared_bytes`]).
    pub spec: KernelSpec,
    /// The input element format the kernel reads.
    pub format: Format,
    /// The input memory order the kernel reads.
    pub order: Order,
    /// How the kernel stages its input and multiplies.
    pub schedule: Schedule,
}

impl Kernel {
    /// Why this kernel cannot correlate `format` input in `order` of `stations` x `pols`
    /// receivers, or `None` when it can: the format and order must be its own, `cp.async` and
    /// `wgmma` need 16-byte aligned rows ([`rows_aligned`]) and `ChannelSplit` two tiles per
    /// channel.
    pub const fn misfit(
        &self,
        format: Format,
        order: Order,
        stations: u32,
        pols: u32,
    ) -> Option<&'static str> {
        if format as u8 != self.format as u8 {
            return Some("it reads the other input format");
        }
        if order as u8 != self.order as u8 {
            return Some("it reads the other memory order");
        }
        match self.schedule {
            Schedule::Staged => None,
            _ if !rows_aligned(format, order, stations, pols) => {
                Some("its copies need input rows on 16-byte boundaries")
            }
            Schedule::Wgmma(kind) if !kind.covers(station_tiles(stations, pols)) => {
                Some("its block covers channels of exactly two 64-receiver tiles")
            }
            _ => None,
        }
    }
}

/// Whether the input rows the kernels copy (one time and channel's receivers, or, for
/// `[t][c][pol][station]`, one polarisation's stations) start on 16-byte boundaries, so that
/// vector loads and `cp.async` are allowed.
pub const fn rows_aligned(format: Format, order: Order, stations: u32, pols: u32) -> bool {
    let row_elements = match order {
        Order::StationPol => stations * pols,
        Order::PolStation => stations,
    };
    (row_elements * format.bytes()).is_multiple_of(16)
}

/// The schedule a configuration runs: with `wgmma` (Hopper), int8 with aligned rows takes the
/// sm_90a kernel of [`Kind::for_tiles`]; otherwise aligned int8 takes `cp.async` (fewer
/// registers, more warps per SM) and everything else register staging.
pub const fn schedule_for(format: Format, order: Order, stations: u32, pols: u32, wgmma: bool) -> Schedule {
    let aligned = rows_aligned(format, order, stations, pols);
    match format {
        Format::Ci8 if aligned && wgmma => Schedule::Wgmma(Kind::for_tiles(station_tiles(stations, pols))),
        Format::Ci8 if aligned => Schedule::CpAsync,
        _ => Schedule::Staged,
    }
}

/// The kernel a configuration runs ([`schedule_for`]); every (format, order, schedule) has one
/// (a unit test checks it), so `None` does not occur.
pub fn select(
    format: Format,
    order: Order,
    stations: u32,
    pols: u32,
    wgmma: bool,
) -> Option<&'static Kernel> {
    let schedule = schedule_for(format, order, stations, pols, wgmma);
    INSTANCES.iter().find(|k| k.format == format && k.order == order && k.schedule == schedule)
}

/// `.maxnreg` of `correlate_ci8_station_pol_async`: uncapped it takes 236 registers, which
/// fits 4 blocks of 64 threads per SM; at 200 it fits 5, without spilling. (Its
/// `[t][c][p][s]` twin spills at 200 on sm_90, so it stays uncapped.)
pub const ASYNC_STATION_POL_REGISTERS: u32 = 200;

/// The spec of kernel `name` with schedule `schedule` and register cap `cap`.
const fn spec(name: &'static str, schedule: Schedule, cap: Option<u32>) -> KernelSpec {
    KernelSpec {
        max_registers: cap,
        ..KernelSpec::new(name, Family::Correlator, schedule.arch())
            .threads(schedule.threads())
            .shared_bytes(schedule.shared_bytes())
    }
}

/// Every correlator kernel, written once: `$callback!` gets (entry point, format, order,
/// schedule: `cp_async`, `staged`, `pair`, `split` or `channel_split`, register cap) for each.
/// [`INSTANCES`], [`KERNELS`] and the entry points are all made from this list.
macro_rules! correlator_instances {
    ($callback:ident) => {
        $callback!(
            (correlate_ci8_station_pol_async, Ci8, StationPol, cp_async, Some(ASYNC_STATION_POL_REGISTERS)),
            (correlate_ci8_pol_station_async, Ci8, PolStation, cp_async, None),
            (correlate_ci8_station_pol, Ci8, StationPol, staged, None),
            (correlate_ci8_pol_station, Ci8, PolStation, staged, None),
            (correlate_ci4_station_pol, Ci4, StationPol, staged, None),
            (correlate_ci4_pol_station, Ci4, PolStation, staged, None),
            (correlate_ci8_station_pol_wgmma, Ci8, StationPol, pair, None),
            (correlate_ci8_pol_station_wgmma, Ci8, PolStation, pair, None),
            (
                correlate_ci8_station_pol_wgmma_split,
                Ci8,
                StationPol,
                split,
                Some(hopper::SPLIT_LAUNCH_REGISTERS)
            ),
            (
                correlate_ci8_pol_station_wgmma_split,
                Ci8,
                PolStation,
                split,
                Some(hopper::SPLIT_LAUNCH_REGISTERS)
            ),
            (
                correlate_ci8_station_pol_wgmma_channel_split,
                Ci8,
                StationPol,
                channel_split,
                Some(hopper::SPLIT_LAUNCH_REGISTERS)
            ),
            (
                correlate_ci8_pol_station_wgmma_channel_split,
                Ci8,
                PolStation,
                channel_split,
                Some(hopper::SPLIT_LAUNCH_REGISTERS)
            ),
        );
    };
}

/// An instance's schedule token as a [`Schedule`].
macro_rules! schedule {
    (cp_async) => {
        Schedule::CpAsync
    };
    (staged) => {
        Schedule::Staged
    };
    (pair) => {
        Schedule::Wgmma(Kind::Pair)
    };
    (split) => {
        Schedule::Wgmma(Kind::Split)
    };
    (channel_split) => {
        Schedule::Wgmma(Kind::ChannelSplit)
    };
}

macro_rules! tables {
    ($(($name:ident, $format:ident, $order:ident, $schedule:ident, $cap:expr)),* $(,)?) => {
        /// Every correlator kernel (entry points of the sm_80 and sm_90a modules).
        pub const INSTANCES: &[Kernel] = &[
            $(Kernel {
                spec: spec(stringify!($name), schedule!($schedule), $cap),
                format: Format::$format,
                order: Order::$order,
                schedule: schedule!($schedule),
            }),*
        ];
        /// The family's registry: every entry point of its PTX modules, with what `build.rs`
        /// adds to each (register cap) and what the host launches it with.
        pub const KERNELS: &[KernelSpec] = &[$(spec(stringify!($name), schedule!($schedule), $cap)),*];
    };
}
correlator_instances!(tables);

// After the instance list: the entry points are made from it.
#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod ampere;
#[cfg(target_arch = "nvptx64")]
mod device;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn int32_bounds() {
        assert_eq!(Format::Ci8.max_times_per_launch(), 65535);
        assert!(Format::Ci4.max_times_per_launch() > 16_000_000);
    }

    /// The two tables list the same kernels, and every kernel is the one some configuration
    /// selects (no variant is left that nothing runs), on Hopper or elsewhere; each selected
    /// kernel fits its configuration.
    #[test]
    fn every_kernel_is_selected_by_some_configuration() {
        assert_eq!(INSTANCES.len(), KERNELS.len());
        let mut selected = std::vec![false; INSTANCES.len()];
        for format in [Format::Ci8, Format::Ci4] {
            for order in [Order::StationPol, Order::PolStation] {
                for pols in [1, 2] {
                    for stations in 1..=200 {
                        for wgmma in [false, true] {
                            let kernel = select(format, order, stations, pols, wgmma).expect("a kernel");
                            assert_eq!(
                                kernel.misfit(format, order, stations, pols),
                                None,
                                "{}",
                                kernel.spec.name
                            );
                            assert!(wgmma || kernel.spec.arch == Arch::Sm80);
                            let at = INSTANCES.iter().position(|k| k == kernel).unwrap();
                            selected[at] = true;
                        }
                    }
                }
            }
        }
        for (kernel, spec) in INSTANCES.iter().zip(KERNELS) {
            assert_eq!(&kernel.spec, spec);
        }
        let unused: std::vec::Vec<_> =
            INSTANCES.iter().zip(&selected).filter(|(_, &s)| !s).map(|(k, _)| k.spec.name).collect();
        assert!(unused.is_empty(), "never selected: {unused:?}");
    }

    #[test]
    fn misfits_are_named() {
        let find = |name: &str| INSTANCES.iter().find(|k| k.spec.name == name).unwrap();
        let channel_split = find("correlate_ci8_station_pol_wgmma_channel_split");
        assert!(channel_split.misfit(Format::Ci8, Order::StationPol, 64, 2).is_none());
        assert!(channel_split.misfit(Format::Ci8, Order::StationPol, 96, 2).is_some());
        assert!(channel_split.misfit(Format::Ci8, Order::PolStation, 64, 2).is_some());
        let async_kernel = find("correlate_ci8_station_pol_async");
        assert!(async_kernel.misfit(Format::Ci8, Order::StationPol, 5, 1).is_some());
        assert!(async_kernel.misfit(Format::Ci4, Order::StationPol, 8, 2).is_some());
        assert!(find("correlate_ci8_station_pol").misfit(Format::Ci8, Order::StationPol, 8, 2).is_none());
    }
}
