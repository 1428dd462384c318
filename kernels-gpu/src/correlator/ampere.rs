//! The sm_80 schedule: `mma.sync` m16n8k32 s8 fragments, one block per lower-triangle tile
//! pair, channel and time slice, the stages double-buffered in shared memory (`cp.async` for
//! 16-byte aligned int8 rows, register staging otherwise). Formulas, layouts and design: the
//! parent module.

use super::device::load_word_checked;
use super::*;
use crate::intrinsics::*;
use crate::mma::mma_m16n8k32_s8;
use crate::packing::unpack_ci4_word_to_i8x4;

/// Kernel parameters shared by every variant.
#[derive(Clone, Copy)]
pub(super) struct Params {
    pub(super) stations: u32,
    pub(super) pols: u32,
    pub(super) channels: u32,
    /// This block's stages: `first_stage .. first_stage + stages` (its time slice).
    pub(super) first_stage: u32,
    pub(super) stages: u32,
    /// Input rows (station runs) start on 16-byte boundaries: vector loads are allowed.
    pub(super) aligned: bool,
}

/// Element index of tile receiver `rho` at input row `row = t * channels + channel`.
#[inline(always)]
pub(super) fn element(p: Params, order: Order, tile: u32, row: u64, rho: u32) -> u64 {
    let (station, pol) = receiver(order, p.pols, tile, rho);
    match order {
        Order::StationPol => (row * p.stations as u64 + station as u64) * p.pols as u64 + pol as u64,
        Order::PolStation => (row * p.pols as u64 + pol as u64) * p.stations as u64 + station as u64,
    }
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
unsafe fn store_stage<const E: u32, const RV: usize, const THREADS: u32>(buffer: u32, regs: &[[u32; 4]; RV]) {
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

/// One block of an sm_80 kernel: `E` bytes per input element, `RV` staged vectors per
/// thread and tile, `ASYNC` for `cp.async` copies, warps of `MT` x `NT` fragments.
#[inline(always)]
pub(super) unsafe fn correlate<
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
    let buffer =
        |parity: u32, col: bool| -> u32 { smem + (2 * parity + (col && !diagonal) as u32) * SMEM_TILE_BYTES };

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
                    copy_stage_async::<ASYNC_THREADS>(input, p, col_source, $stage, buffer($parity, true));
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
