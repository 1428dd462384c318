//! X-engine correlator on int8 tensor cores (seed 002, Clark, La Plante & Greenhill).
//!
//! Computes, per channel c and station pair i >= j (autos included) and polarisations:
//! `V[c][b(i,j)][pi][pj] = sum_t x[t][c][i][pi] * conj(x[t][c][j][pj])`, `b(i,j) = i(i+1)/2 + j`,
//! exactly, as complex int32 per launch (or added to a complex int64 accumulator).
//!
//! Input: complex int8 (2 bytes, re first) or complex int4 (1 byte, re in the low nibble;
//! unpacked to int8 on the way into shared memory, since int4 MMA is emulated on Hopper), in
//! order `[t][c][station][pol]` (xGPU) or `[t][c][pol][station]` (CHORD).
//!
//! Tiling (seed sec. 4.1-4.4 on tensor cores). Receivers (station, pol) are grouped in tiles
//! of [`TILE`] = 64; one block computes one lower-triangle tile pair (seed sec. 4.2 mapping
//! of the linear block index) for one channel and one time slice, its warps sub-tiles of
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

/// Receivers per tile side.
pub const TILE: u32 = 64;
/// Time samples per shared-memory stage; T must be a multiple of it.
pub const TIME_TILE: u32 = 64;
/// Bytes per shared-memory row (one time sample of 64 complex int8 receivers, plus 16 bytes of
/// padding so the 8 rows an `ldmatrix` phase reads fall in distinct bank groups).
pub const SMEM_ROW_BYTES: u32 = 2 * TILE + 16;
/// Bytes of one tile's stage in shared memory.
pub const SMEM_TILE_BYTES: u32 = TIME_TILE * SMEM_ROW_BYTES;
/// Dynamic shared memory per block: two tiles, double-buffered.
pub const SMEM_BYTES: u32 = 4 * SMEM_TILE_BYTES;
/// A kernel variant's block: warps, each computing `16 m_tiles x 8 n_tiles` receivers of the
/// 64 x 64 tile pair as m16n8k32 fragments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub m_tiles: u32,
    pub n_tiles: u32,
}

impl Shape {
    pub const fn warp_rows(self) -> u32 {
        16 * self.m_tiles
    }
    pub const fn warp_cols(self) -> u32 {
        8 * self.n_tiles
    }
    pub const fn warps(self) -> u32 {
        (TILE / self.warp_rows()) * (TILE / self.warp_cols())
    }
    pub const fn threads(self) -> u32 {
        32 * self.warps()
    }
    /// First (row, column) receiver of warp `warp`'s sub-tile.
    pub const fn warp_origin(self, warp: u32) -> (u32, u32) {
        let across = TILE / self.warp_cols();
        (self.warp_rows() * (warp / across), self.warp_cols() * (warp % across))
    }
}

/// cp.async kernels (16-byte aligned int8 rows): 2 warps of 32 x 64 receivers, so each
/// fragment load and each operand transform serves twice as many MMAs.
pub const ASYNC_SHAPE: Shape = Shape { m_tiles: 2, n_tiles: 8 };
/// Register-staged kernels (int4, unaligned int8): 4 warps of 32 x 32, leaving registers for
/// the staged vectors.
pub const STAGED_SHAPE: Shape = Shape { m_tiles: 2, n_tiles: 4 };

/// Input element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Complex int8+8: two bytes, real first.
    Ci8,
    /// Complex int4+4: one byte, real in the low nibble.
    Ci4,
}

impl Format {
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

/// Index of visibility (i, pi; j, pj) of `channel` in the output layout `[c][b(i,j)][pi][pj]`
/// (complex elements), `baselines` = N (N + 1) / 2.
pub const fn visibility_index(
    channel: u32,
    baselines: u64,
    pols: u32,
    i: u32,
    j: u32,
    pi: u32,
    pj: u32,
) -> u64 {
    ((channel as u64 * baselines + baseline_index(i, j)) * pols as u64 + pi as u64) * pols as u64 + pj as u64
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

/// Stations per tile for `pols` polarisations (1 or 2).
pub const fn stations_per_tile(pols: u32) -> u32 {
    TILE / pols
}

/// Number of station tiles covering `stations`.
pub const fn station_tiles(stations: u32, pols: u32) -> u32 {
    stations.div_ceil(stations_per_tile(pols))
}

/// Blocks per channel: lower-triangle tile pairs including the diagonal.
pub const fn triangle_blocks(tiles: u32) -> u32 {
    tiles * (tiles + 1) / 2
}

/// Seed sec. 4.2: linear block index `k = row (row + 1) / 2 + col`, `col <= row` -> (row, col).
pub const fn triangle_tile(k: u32) -> (u32, u32) {
    let mut row = ((8 * k as u64 + 1).isqrt() as u32 - 1) / 2;
    // isqrt is exact, so at most one correction step is ever needed; keep both for clarity.
    while row * (row + 1) / 2 > k {
        row -= 1;
    }
    while (row + 1) * (row + 2) / 2 <= k {
        row += 1;
    }
    (row, k - row * (row + 1) / 2)
}

/// Baseline index of stations `i >= j` (lower triangle, row-major).
pub const fn baseline_index(i: u32, j: u32) -> u64 {
    i as u64 * (i as u64 + 1) / 2 + j as u64
}

/// (station, pol) of tile receiver `rho` (0..64) in station tile `tile`. The local order
/// follows the memory order, so each tile row in shared memory is a copy of contiguous input:
/// `rho = s * pols + p` (StationPol) or `rho = p * stations_per_tile + s` (PolStation).
pub const fn receiver(order: Order, pols: u32, tile: u32, rho: u32) -> (u32, u32) {
    let spt = stations_per_tile(pols);
    let (s, p) = match order {
        Order::StationPol => (rho / pols, rho % pols),
        Order::PolStation => (rho % spt, rho / spt),
    };
    (tile * spt + s, p)
}

/// Smallest and largest station among tile receivers `rho0 .. rho0 + len` (an aligned power
/// of two of at least 8): a warp whose row stations all lie below its column stations (in a
/// diagonal tile) computes nothing that is written.
pub const fn station_span(order: Order, pols: u32, tile: u32, rho0: u32, len: u32) -> (u32, u32) {
    let spt = stations_per_tile(pols);
    if matches!(order, Order::PolStation) && len > spt {
        // The range covers both polarisations: every station of the tile.
        return (tile * spt, tile * spt + spt - 1);
    }
    let first = receiver(order, pols, tile, rho0).0;
    let last = receiver(order, pols, tile, rho0 + len - 1).0;
    if first < last {
        (first, last)
    } else {
        (last, first)
    }
}

/// Shared-memory byte offset of receiver `rho` at stage time `t` within a tile buffer.
pub const fn smem_offset(t: u32, rho: u32) -> u32 {
    t * SMEM_ROW_BYTES + 2 * rho
}

/// Address (offset in a tile buffer) each lane gives `ldmatrix.x4.trans` for the A fragment
/// of m16n8k32 rows `rho0 .. rho0 + 16`, k-step `step` (time samples 16 step .. +16).
/// Matrices: 0 = (t 0-7, rho 0-7), 1 = (t 0-7, rho 8-15), 2 = (t 8-15, rho 0-7),
/// 3 = (t 8-15, rho 8-15), giving a0..a3 of the m16n8k32 A register assignment.
pub const fn ldmatrix_a_offset(lane: u32, rho0: u32, step: u32) -> u32 {
    let (matrix, row) = (lane / 8, lane % 8);
    smem_offset(16 * step + 8 * (matrix / 2) + row, rho0 + 8 * (matrix % 2))
}

/// As [`ldmatrix_a_offset`] for two B fragments (columns `rho0 .. rho0 + 8` and `+8 .. +16`):
/// matrices 0 = (t 0-7, rho 0-7), 1 = (t 8-15, rho 0-7), 2 = (t 0-7, rho 8-15),
/// 3 = (t 8-15, rho 8-15), so registers (0, 1) and (2, 3) are b0, b1 of the two n-tiles.
pub const fn ldmatrix_b_offset(lane: u32, rho0: u32, step: u32) -> u32 {
    let (matrix, row) = (lane / 8, lane % 8);
    smem_offset(16 * step + 8 * (matrix % 2) + row, rho0 + 8 * (matrix / 2))
}

/// Raw 16-byte input vectors per thread per tile per stage.
pub const fn vectors_per_thread(format: Format, threads: u32) -> u32 {
    TIME_TILE * TILE * format.bytes() / 16 / threads
}

/// Which input vector `v` (of a tile-stage) covers: (stage time, first receiver `rho`).
pub const fn vector_position(format: Format, v: u32) -> (u32, u32) {
    let per_row = TILE * format.bytes() / 16;
    (v / per_row, (v % per_row) * (16 / format.bytes()))
}

/// The sm_90a (`wgmma`) kernels and their layout functions.
pub mod hopper;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device {
    use super::*;
    use crate::intrinsics::*;
    use crate::mma::mma_m16n8k32_s8;
    use crate::packing::unpack_ci4_word_to_i8x4;

    /// Kernel parameters shared by every variant.
    #[derive(Clone, Copy)]
    struct Params {
        stations: u32,
        pols: u32,
        channels: u32,
        /// This block's stages: `first_stage .. first_stage + stages` (its time slice).
        first_stage: u32,
        stages: u32,
        /// Input rows (station runs) start on 16-byte boundaries: vector loads are allowed.
        aligned: bool,
    }

    /// Element index of tile receiver `rho` at input row `row = t * channels + channel`.
    #[inline(always)]
    fn element(p: Params, order: Order, tile: u32, row: u64, rho: u32) -> u64 {
        let (station, pol) = receiver(order, p.pols, tile, rho);
        match order {
            Order::StationPol => (row * p.stations as u64 + station as u64) * p.pols as u64 + pol as u64,
            Order::PolStation => (row * p.pols as u64 + pol as u64) * p.stations as u64 + station as u64,
        }
    }

    /// One 32-bit word (bytes `4 w .. 4 w + 4` of a 16-byte vector) element by element, zero
    /// past the last station: for the ragged last tile and for inputs whose rows are not
    /// 16-byte aligned. Kept out of line (and scalar, so it returns in a register) so the fast
    /// path stays small enough to unroll.
    #[inline(never)]
    unsafe fn load_word_checked<const E: u32>(
        input: *const u8,
        p: Params,
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
                let at = element(p, order, tile, row, rho) * E as u64 + (position % E) as u64;
                word |= (*input.add(at as usize) as u32) << (8 * byte);
            }
        }
        word
    }

    /// Where this thread's input vectors of one tile come from. Its vector m of stage s is
    /// `m * THREADS / per_row + s * TIME_TILE` time rows after its first, so the loop only
    /// adds multiples of the row stride; the receiver arithmetic (with its divisions) runs once.
    #[derive(Clone, Copy)]
    struct TileSource {
        tile: u32,
        /// Byte offset of vector 0 at stage 0.
        offset: u64,
        /// The vectors' receivers lie before the last station.
        inside: bool,
        /// Aligned rows and a tile wholly inside: plain 16-byte loads.
        fast: bool,
    }

    #[inline(always)]
    fn tile_source(format: Format, p: Params, order: Order, tile: u32, channel: u32) -> TileSource {
        let (t0, rho0) = vector_position(format, thread_idx_x());
        let row = t0 as u64 * p.channels as u64 + channel as u64;
        TileSource {
            tile,
            offset: element(p, order, tile, row, rho0) * format.bytes() as u64,
            inside: receiver(order, p.pols, tile, rho0).0 < p.stations,
            fast: p.aligned && (tile + 1) * stations_per_tile(p.pols) <= p.stations,
        }
    }

    /// Bytes between consecutive time samples of the input.
    #[inline(always)]
    fn row_stride(format: Format, p: Params) -> u64 {
        p.channels as u64 * p.stations as u64 * p.pols as u64 * format.bytes() as u64
    }

    /// Time rows between a thread's consecutive vectors of one stage.
    const fn rows_per_vector(format: Format, threads: u32) -> u32 {
        threads / (TILE * format.bytes() / 16)
    }

    /// Loads one tile-stage's raw vectors of this thread into registers.
    #[inline(always)]
    unsafe fn load_stage<const E: u32, const RV: usize, const THREADS: u32>(
        input: *const u8,
        p: Params,
        order: Order,
        source: TileSource,
        channel: u32,
        stage: u32,
    ) -> [[u32; 4]; RV] {
        let format = if E == 2 { Format::Ci8 } else { Format::Ci4 };
        let mut regs = [[0u32; 4]; RV];
        unroll!(m in [0, 1, 2, 3, 4, 5, 6, 7] {
            if m < RV {
                let rows = stage * TIME_TILE + m as u32 * rows_per_vector(format, THREADS);
                regs[m] = if source.fast {
                    let at = source.offset + rows as u64 * row_stride(format, p);
                    ld_global_nc_v4(input.add(at as usize) as *const u32)
                } else {
                    let (t0, rho0) = vector_position(format, thread_idx_x());
                    let row = (t0 + rows) as u64 * p.channels as u64 + channel as u64;
                    [0, 1, 2, 3].map(|w| load_word_checked::<E>(input, p, order, source.tile, row, rho0, w))
                };
            }
        });
        regs
    }

    /// Copies one tile-stage straight into a shared buffer with `cp.async` (int8 inputs whose
    /// rows are 16-byte aligned; a vector then lies wholly inside or wholly past the last
    /// station, and the latter is zero-filled).
    #[inline(always)]
    unsafe fn copy_stage_async<const THREADS: u32>(
        input: *const u8,
        p: Params,
        source: TileSource,
        stage: u32,
        buffer: u32,
    ) {
        let (t0, rho0) = vector_position(Format::Ci8, thread_idx_x());
        let first = buffer + smem_offset(t0, rho0);
        unroll!(m in [0, 1, 2, 3, 4, 5, 6, 7] {
            if m as u32 >= vectors_per_thread(Format::Ci8, THREADS) {
                return;
            }
            let rows = m as u32 * rows_per_vector(Format::Ci8, THREADS);
            let at = source.offset + (stage * TIME_TILE + rows) as u64 * row_stride(Format::Ci8, p);
            let src = if source.inside { input.add(at as usize) } else { input };
            cp_async_16(first + rows * SMEM_ROW_BYTES, src, if source.inside { 16 } else { 0 });
        });
    }

    /// Writes staged vectors into a tile buffer as complex int8 (`smem[t][rho]`), unpacking
    /// int4 to int8 (real, imaginary interleaved).
    #[inline(always)]
    unsafe fn store_stage<const E: u32, const RV: usize, const THREADS: u32>(
        buffer: u32,
        regs: &[[u32; 4]; RV],
    ) {
        let format = if E == 2 { Format::Ci8 } else { Format::Ci4 };
        unroll!(m in [0, 1, 2, 3, 4, 5, 6, 7] {
            if m >= RV {
                return;
            }
            let reg = &regs[m];
            let v = thread_idx_x() + THREADS * m as u32;
            let (t_local, rho0) = vector_position(format, v);
            let at = buffer + smem_offset(t_local, rho0);
            if E == 2 {
                st_shared_v4(at, *reg);
            } else {
                let mut out = [0u32; 8];
                for w in 0..4 {
                    let (re, im) = unpack_ci4_word_to_i8x4(reg[w]);
                    out[2 * w] = prmt(re, im, 0x5140);
                    out[2 * w + 1] = prmt(re, im, 0x7362);
                }
                st_shared_v4(at, [out[0], out[1], out[2], out[3]]);
                st_shared_v4(at + 16, [out[4], out[5], out[6], out[7]]);
            }
        });
    }

    #[inline(always)]
    unsafe fn correlate<
        const E: u32,
        const RV: usize,
        const ASYNC: bool,
        const MT: usize,
        const NT: usize,
    >(
        input: *const u8,
        output: *mut u32,
        p: Params,
        order: Order,
        mode: Output,
    ) {
        const { assert!(MT <= 4 && NT <= 8 && NT % 2 == 0) };
        let shape = Shape { m_tiles: MT as u32, n_tiles: NT as u32 };
        let (tile_row, tile_col) = triangle_tile(block_idx_x());
        let channel = block_idx_y();
        let diagonal = tile_row == tile_col;
        let smem = dynamic_shared();
        // Buffers: [stage parity][row tile, column tile].
        let buffer = |parity: u32, col: bool| -> u32 {
            smem + (2 * parity + (col && !diagonal) as u32) * SMEM_TILE_BYTES
        };

        let lane = lane_id();
        let (warp_row, warp_col) = shape.warp_origin(warp_id());
        let rows_span = station_span(order, p.pols, tile_row, warp_row, shape.warp_rows());
        let cols_span = station_span(order, p.pols, tile_col, warp_col, shape.warp_cols());
        let idle = diagonal && rows_span.1 < cols_span.0;

        let mut re = [[[0i32; 4]; NT]; MT];
        let mut im = [[[0i32; 4]; NT]; MT];
        // This lane's share of sum_t Im x over column g of each n-tile.
        let mut col_sum = [0i32; NT];

        let format = if E == 2 { Format::Ci8 } else { Format::Ci4 };
        let row_source = tile_source(format, p, order, tile_row, channel);
        let col_source = tile_source(format, p, order, tile_col, channel);

        // ASYNC kernels copy with cp.async (no staging registers); the others load into
        // registers and store after the stage's MMAs, which lets int4 be unpacked and ragged
        // rows be handled.
        const ASYNC_THREADS: u32 = ASYNC_SHAPE.threads();
        const STAGED_THREADS: u32 = STAGED_SHAPE.threads();
        let mut staged_row = [[0u32; 4]; RV];
        let mut staged_col = [[0u32; 4]; RV];
        macro_rules! fetch {
            ($stage:expr, $parity:expr) => {
                if ASYNC {
                    copy_stage_async::<ASYNC_THREADS>(input, p, row_source, $stage, buffer($parity, false));
                    if !diagonal {
                        copy_stage_async::<ASYNC_THREADS>(
                            input,
                            p,
                            col_source,
                            $stage,
                            buffer($parity, true),
                        );
                    }
                    cp_async_commit();
                } else {
                    staged_row =
                        load_stage::<E, RV, STAGED_THREADS>(input, p, order, row_source, channel, $stage);
                    if !diagonal {
                        staged_col =
                            load_stage::<E, RV, STAGED_THREADS>(input, p, order, col_source, channel, $stage);
                    }
                }
            };
        }
        macro_rules! land {
            ($parity:expr) => {
                if ASYNC {
                    cp_async_wait_all();
                } else {
                    store_stage::<E, RV, STAGED_THREADS>(buffer($parity, false), &staged_row);
                    if !diagonal {
                        store_stage::<E, RV, STAGED_THREADS>(buffer($parity, true), &staged_col);
                    }
                }
            };
        }
        fetch!(p.first_stage, 0);
        land!(0);
        sync_threads();

        for stage in 0..p.stages {
            let parity = stage & 1;
            let more = stage + 1 < p.stages;
            // The other buffer was last read in the previous stage, before its barrier.
            if more {
                fetch!(p.first_stage + stage + 1, parity ^ 1);
            }
            if !idle {
                let a_base = buffer(parity, false);
                let b_base = buffer(parity, true);
                for step in 0..TIME_TILE / 16 {
                    let mut a = [[0u32; 4]; MT];
                    unroll!(mt in [0, 1, 2, 3] {
                        if mt < MT {
                            a[mt] = ldmatrix_x4_trans(a_base + ldmatrix_a_offset(lane, warp_row + 16 * mt as u32, step));
                        }
                    });
                    let mut b = [[0u32; 2]; NT];
                    unroll!(pair in [0, 1, 2, 3] {
                        if pair < NT / 2 {
                            let r = ldmatrix_x4_trans(b_base + ldmatrix_b_offset(lane, warp_col + 16 * pair as u32, step));
                            b[2 * pair] = [r[0], r[1]];
                            b[2 * pair + 1] = [r[2], r[3]];
                        }
                    });
                    // Rows as [Im, ~Re] per complex value: swap the bytes of each pair, invert the
                    // new imaginary-slot byte. Then Im V = [b1, ~a1] . [a2, b2] + sum_t b2.
                    let a_swapped = a.map(|f| f.map(|w| prmt(w, w, 0x2301) ^ 0xff00_ff00));
                    unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
                        if nt < NT {
                            // Imaginary parts of column g, two time samples per register.
                            col_sum[nt] = dp4a(b[nt][1], 0x0100_0100, dp4a(b[nt][0], 0x0100_0100, col_sum[nt]));
                        }
                    });
                    unroll!(mt in [0, 1, 2, 3] {
                        if mt < MT {
                            unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
                                if nt < NT {
                                    re[mt][nt] = mma_m16n8k32_s8(a[mt], b[nt], re[mt][nt]);
                                    im[mt][nt] = mma_m16n8k32_s8(a_swapped[mt], b[nt], im[mt][nt]);
                                }
                            });
                        }
                    });
                }
            }
            if more {
                land!(parity ^ 1);
            }
            sync_threads();
        }
        if idle {
            return;
        }

        // Complete the column sums across the four lanes that share column g (t0 t1 = q).
        unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
            if nt < NT {
                let mut s = col_sum[nt] as u32;
                s = s.wrapping_add(shfl_xor(s, 1));
                s = s.wrapping_add(shfl_xor(s, 2));
                col_sum[nt] = s as i32;
            }
        });

        let baselines = baseline_index(p.stations - 1, p.stations - 1) + 1;
        let (g, q) = (lane / 4, lane % 4);
        // Unrolled by hand: a rolled loop would index the accumulators at run time and move
        // them to local memory.
        unroll!(nt in [0, 1, 2, 3, 4, 5, 6, 7] {
            if nt < NT {
                // Column sums of this lane's output columns 2q and 2q + 1 (held by lanes 4 col).
                let sums = [
                    shfl_idx(col_sum[nt] as u32, 8 * q) as i32,
                    shfl_idx(col_sum[nt] as u32, 8 * q + 4) as i32,
                ];
                unroll!(mt in [0, 1, 2, 3] {
                    if mt < MT {
                        unroll!(r in [0, 1, 2, 3] {
                            let rho_row = warp_row + 16 * mt as u32 + g + 8 * (r as u32 / 2);
                            let rho_col = warp_col + 8 * nt as u32 + 2 * q + (r as u32 % 2);
                            let (i, pi) = receiver(order, p.pols, tile_row, rho_row);
                            let (j, pj) = receiver(order, p.pols, tile_col, rho_col);
                            if i < p.stations && j < p.stations && i >= j {
                                let real = re[mt][nt][r];
                                let imag = im[mt][nt][r].wrapping_add(sums[r % 2]);
                                let index = visibility_index(channel, baselines, p.pols, i, j, pi, pj);
                                write_visibility(output, index, real, imag, mode);
                            }
                        });
                    }
                });
            }
        });
    }

    macro_rules! correlator_kernel {
        ($name:ident, $bytes:expr, $order:expr, $async:expr) => {
            /// See the module documentation. Block (k, c, z) computes triangle tile pair k of
            /// channel c over time slice z (`slice_stages` stages of TIME_TILE samples). `mode`
            /// is an [`Output`]: int32 stores (one slice), or exact integer atomic adds into
            /// complex int32 or int64, layout `[c][b(i,j)][pi][pj]`.
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
                let p = Params { stations, pols, channels, first_stage, stages, aligned: aligned != 0 };
                const SHAPE: Shape = if $async { ASYNC_SHAPE } else { STAGED_SHAPE };
                const RV: usize =
                    vectors_per_thread(if $bytes == 2 { Format::Ci8 } else { Format::Ci4 }, SHAPE.threads())
                        as usize;
                let mode = Output::from_mode(mode);
                correlate::<$bytes, RV, $async, { SHAPE.m_tiles as usize }, { SHAPE.n_tiles as usize }>(
                    input, output, p, $order, mode,
                );
            }
        };
    }

    // int8 with 16-byte aligned rows: cp.async straight to shared memory.
    correlator_kernel!(correlate_ci8_station_pol_async, 2, Order::StationPol, true);
    correlator_kernel!(correlate_ci8_pol_station_async, 2, Order::PolStation, true);
    // Register-staged: int4 (unpacked on the way) and int8 with unaligned rows.
    correlator_kernel!(correlate_ci8_station_pol, 2, Order::StationPol, false);
    correlator_kernel!(correlate_ci8_pol_station, 2, Order::PolStation, false);
    correlator_kernel!(correlate_ci4_station_pol, 1, Order::StationPol, false);
    correlator_kernel!(correlate_ci4_pol_station, 1, Order::PolStation, false);
}

use crate::modules::{Arch, Family, KernelSpec};

/// The family's kernels: every entry point of its PTX modules, with what `build.rs` adds to
/// each (register cap, cluster shape) and what the host launches it with.
pub const KERNELS: &[KernelSpec] = &[
    KernelSpec::new("correlate_ci4_pol_station", Family::Correlator, Arch::Sm80),
    KernelSpec::new("correlate_ci4_station_pol", Family::Correlator, Arch::Sm80),
    KernelSpec::new("correlate_ci8_pol_station", Family::Correlator, Arch::Sm80),
    KernelSpec::new("correlate_ci8_pol_station_async", Family::Correlator, Arch::Sm80),
    KernelSpec::new("correlate_ci8_station_pol", Family::Correlator, Arch::Sm80),
    KernelSpec::new("correlate_ci8_station_pol_async", Family::Correlator, Arch::Sm80).max_registers(200),
    KernelSpec::new("correlate_ci8_pol_station_wgmma", Family::Correlator, Arch::Sm90a),
    KernelSpec::new("correlate_ci8_pol_station_wgmma_channel_split", Family::Correlator, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("correlate_ci8_pol_station_wgmma_split", Family::Correlator, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("correlate_ci8_station_pol_wgmma", Family::Correlator, Arch::Sm90a),
    KernelSpec::new("correlate_ci8_station_pol_wgmma_channel_split", Family::Correlator, Arch::Sm90a)
        .max_registers(168),
    KernelSpec::new("correlate_ci8_station_pol_wgmma_split", Family::Correlator, Arch::Sm90a)
        .max_registers(168),
];

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::bank::is_conflict_free;
    use crate::layout::{Location, M16N8K32_S8_A, M16N8K32_S8_B};

    #[test]
    fn triangle_mapping_inverts_the_linear_index() {
        let mut k = 0;
        for row in 0..200 {
            for col in 0..=row {
                assert_eq!(triangle_tile(k), (row, col));
                k += 1;
            }
        }
        assert_eq!(triangle_blocks(200), k);
    }

    #[test]
    fn receivers_of_a_tile_are_distinct_and_cover_its_stations() {
        for order in [Order::StationPol, Order::PolStation] {
            for pols in [1, 2] {
                let mut seen = std::collections::BTreeSet::new();
                for rho in 0..TILE {
                    let (s, p) = receiver(order, pols, 3, rho);
                    assert!(p < pols && s >= 3 * stations_per_tile(pols) && s < 4 * stations_per_tile(pols));
                    assert!(seen.insert((s, p)));
                }
            }
        }
    }

    /// The element index the kernel computes for receiver rho is contiguous over each 16-byte
    /// vector, so a vector load reads exactly the receivers it stores.
    #[test]
    fn vectors_hold_consecutive_elements() {
        for format in [Format::Ci8, Format::Ci4] {
            for order in [Order::StationPol, Order::PolStation] {
                for pols in [1, 2] {
                    let (stations, channels, t, c) = (256u64, 3u64, 5u64, 1u64);
                    let element = |rho: u32| {
                        let (s, p) = receiver(order, pols, 2, rho);
                        match order {
                            Order::StationPol => {
                                ((t * channels + c) * stations + s as u64) * pols as u64 + p as u64
                            }
                            Order::PolStation => {
                                ((t * channels + c) * pols as u64 + p as u64) * stations + s as u64
                            }
                        }
                    };
                    let per_vector = 16 / format.bytes();
                    for v in 0..TIME_TILE * TILE * format.bytes() / 16 {
                        let (_, rho0) = vector_position(format, v);
                        for n in 0..per_vector {
                            assert_eq!(element(rho0 + n), element(rho0) + n as u64);
                        }
                        assert_eq!((element(rho0) * format.bytes() as u64) % 16, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn every_tile_stage_element_is_loaded_once() {
        for format in [Format::Ci8, Format::Ci4] {
            let mut hit = std::vec![0u32; (TIME_TILE * TILE) as usize];
            let per_vector = 16 / format.bytes();
            for v in 0..TIME_TILE * TILE * format.bytes() / 16 {
                let (t, rho0) = vector_position(format, v);
                for n in 0..per_vector {
                    hit[(t * TILE + rho0 + n) as usize] += 1;
                }
            }
            assert!(hit.iter().all(|&h| h == 1));
        }
    }

    /// ldmatrix.trans delivers to lane l, register m, the two time samples 2 (l % 4), +1 of
    /// receiver l / 4 of matrix m; with the offsets above that is exactly the m16n8k32 A and B
    /// register assignments with k = 2 t + ReIm and rows/columns = receivers.
    #[test]
    fn ldmatrix_offsets_give_the_mma_register_assignment() {
        let position = |offset: u32| (offset / SMEM_ROW_BYTES, (offset % SMEM_ROW_BYTES) / 2); // (t, rho)
        for step in 0..TIME_TILE / 16 {
            for lane in 0..32 {
                for reg in 0..4 {
                    // The row address lane 8 reg + (2 q or 2 q + 1) gives for matrix `reg`;
                    // lane `lane` receives column lane / 4 of it: rows 2 q, 2 q + 1.
                    let q = lane % 4;
                    for e in 0..4 {
                        let source_lane = 8 * reg + 2 * q + e / 2;
                        let (t, rho) = position(ldmatrix_a_offset(source_lane, 16, step));
                        let rho = rho + lane / 4;
                        let (row, k) =
                            M16N8K32_S8_A.coordinates(Location { lane, register: reg % 4, element: e });
                        // A register `reg` is matrix `reg`.
                        assert_eq!(
                            (rho - 16, 2 * (t - 16 * step) + e % 2),
                            (row, k),
                            "A lane {lane} reg {reg}"
                        );
                    }
                }
                for reg in 0..2 {
                    for tile in 0..2 {
                        let matrix = 2 * tile + reg;
                        let q = lane % 4;
                        for e in 0..4 {
                            let source_lane = 8 * matrix + 2 * q + e / 2;
                            let (t, rho) = position(ldmatrix_b_offset(source_lane, 32, step));
                            let rho = rho + lane / 4;
                            let (k, col) =
                                M16N8K32_S8_B.coordinates(Location { lane, register: reg, element: e });
                            assert_eq!(
                                (2 * (t - 16 * step) + e % 2, rho - 32 - 8 * tile),
                                (k, col),
                                "B lane {lane} reg {reg} tile {tile}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn shared_memory_accesses_are_bank_conflict_free() {
        for step in 0..TIME_TILE / 16 {
            for rho0 in [0, 16, 32, 48] {
                let a: [u32; 32] = core::array::from_fn(|l| ldmatrix_a_offset(l as u32, rho0, step));
                let b: [u32; 32] = core::array::from_fn(|l| ldmatrix_b_offset(l as u32, rho0, step));
                assert!(is_conflict_free(&a, 16) && is_conflict_free(&b, 16));
            }
        }
        for (format, threads) in [
            (Format::Ci8, STAGED_SHAPE.threads()),
            (Format::Ci4, STAGED_SHAPE.threads()),
            (Format::Ci8, ASYNC_SHAPE.threads()),
        ] {
            for warp in 0..threads / 32 {
                for m in 0..vectors_per_thread(format, threads) {
                    let stores: std::vec::Vec<u32> = (0..32)
                        .map(|l| {
                            let (t, rho) = vector_position(format, warp * 32 + l + threads * m);
                            smem_offset(t, rho)
                        })
                        .collect();
                    let first: [u32; 32] = stores.clone().try_into().unwrap();
                    assert!(is_conflict_free(&first, 16), "{format:?} store");
                    if format == Format::Ci4 {
                        let second: [u32; 32] = core::array::from_fn(|l| first[l] + 16);
                        assert!(is_conflict_free(&second, 16));
                    }
                }
            }
        }
    }

    #[test]
    fn shapes_tile_the_block_and_idle_warps_are_upper() {
        for shape in [ASYNC_SHAPE, STAGED_SHAPE] {
            let mut covered = std::vec![0u32; (TILE * TILE) as usize];
            for warp in 0..shape.warps() {
                let (r0, c0) = shape.warp_origin(warp);
                for r in r0..r0 + shape.warp_rows() {
                    for c in c0..c0 + shape.warp_cols() {
                        covered[(r * TILE + c) as usize] += 1;
                    }
                }
            }
            assert!(covered.iter().all(|&n| n == 1));
        }
        // A warp is idle only if every (row, column) station pair in it is above the diagonal.
        for order in [Order::StationPol, Order::PolStation] {
            for pols in [1, 2] {
                for shape in [ASYNC_SHAPE, STAGED_SHAPE] {
                    for warp in 0..shape.warps() {
                        let (r0, c0) = shape.warp_origin(warp);
                        let rows = station_span(order, pols, 5, r0, shape.warp_rows());
                        let cols = station_span(order, pols, 5, c0, shape.warp_cols());
                        let any_needed = (r0..r0 + shape.warp_rows()).any(|r| {
                            (c0..c0 + shape.warp_cols())
                                .any(|c| receiver(order, pols, 5, r).0 >= receiver(order, pols, 5, c).0)
                        });
                        assert_eq!(rows.1 < cols.0, !any_needed, "{order:?} P={pols} {shape:?} warp {warp}");
                    }
                }
            }
        }
    }

    #[test]
    fn int32_bounds() {
        assert_eq!(Format::Ci8.max_times_per_launch(), 65535);
        assert!(Format::Ci4.max_times_per_launch() > 16_000_000);
    }
}
