//! Cluster-fused PFB path for n = [`CLUSTER_CHANNELS`] on Hopper (sm_90a; all three kernels
//! fused): FIR, FFT and post-processing of [`super`] in one kernel whose
//! intermediate values stay on chip, each input sample unpacked once.
//!
//! The three-kernel path's factorisation, spread over a cluster of [`CLUSTER_BLOCKS`] = 4
//! blocks (one per SM): block `c` owns row `c` of the unzipped matrix
//! ([`super::fft_index`]). Each block has two warp roles that work on consecutive batches of
//! [`CLUSTER_BATCH`] spectra at once:
//! - **FIR threads** ([`CLUSTER_THREADS`] = 256, warpgroups 0-1, [`CLUSTER_FIR_REGISTERS`]
//!   after `setmaxnreg`): the column pairs `q = 4 q1 + c`, one per thread (`q1 < n/4`, both
//!   polarisations).
//!   1. FIR: the batch's new input rows, still packed, arrive in a shared-memory stage by
//!      `cp.async` one batch ahead (whole rows, as a block's pairs are every fourth; a
//!      polarisation's rows of a batch follow each other in the input, so they are copied as
//!      one run, [`cluster_stage_chunks`]). Each thread
//!      keeps its `2 TV` weights and the `TV - 1` older rows of its window in registers (per
//!      polarisation), unpacks each new row once and adds it into every output of the batch
//!      it belongs to, taps ascending (so its f32 FIR values are the three-kernel FIR's). A
//!      delay step makes the polarisation reload its window from global memory.
//!   2. The n/4-point FFT of row `c` of every (spectrum, polarisation): two radix-16 Stockham
//!      passes ([`super::stockham`]), the first into a scratch buffer and
//!      the second back, so neither pass needs a barrier between its loads and stores; the
//!      second pass's twiddles come from a table of `W^(j r)` ([`cluster_row_twiddle`]), one
//!      load each.
//! - **Post threads** ([`CLUSTER_POST_THREADS`] = 256, warpgroups 2-3,
//!   [`CLUSTER_POST_REGISTERS`]): warp `s` takes spectrum `s` of the batch, lane `l` the
//!   columns `u = 32 c + l + 1` and `n/4 - u` ([`super::post_thread_columns`]; block 0 also
//!   column 0). They run the post-processing of the three-kernel path
//!   ([`super::post_pair_x2`]: twiddles, the 4-point DFT across the rows, R2C fix-up,
//!   rotation, gains, quantisation), reading the four rows from the four blocks' shared
//!   memory (distributed shared memory), stage the quantised values in shared memory and
//!   write each of the block's channels' batch of spectra as 16-byte pieces.
//!
//! One cluster barrier per batch, split into arrive and wait: phase `k` completes once every
//! block's FIR threads have finished the FFT of batch `k` and its post threads the post of
//! batch `k - 1`. After it the post threads read FFT buffer `k % 2` of all four blocks while
//! the FIR threads filter batch `k + 1` into buffer `(k + 1) % 2`, whose last readers were the
//! posts of batch `k - 1`. The FIR threads arrive with release semantics (their FFT values);
//! the post threads arrive relaxed: they only say that they have finished reading, and their
//! loads have returned (their values were used), so they need not wait for their own output
//! stores to drain (with release, each batch would pay a `MEMBAR.ALL.GPU`).
//!
//! Each cluster takes a run of whole batches; the host launches as many clusters as are
//! resident (one wave). Nothing in the loop waits on a global load: the batch's offsets and
//! the post's fine delays and rotations are loaded a batch ahead into registers (one value per
//! lane, broadcast by `shfl`), and the block's gains and the twiddles sit in shared memory
//! (the cluster barrier's acquire invalidates the L1). Input of up to [`CLUSTER_MAX_BITS`]
//! bits (wider rows do not fit the stages beside three FFT buffers).
//!
//! Layouts of input, offsets, weights, gains, fine delays, rotations, output and counts are
//! those of the three-kernel path ([`super`]); `twiddles[k] = exp(-j pi k / n)`, `k < 2n`.

use super::stockham::fft_buffer_slots;
use super::{fir_row_chunks, UNZIP};

/// Channel count of the cluster kernel.
pub const CLUSTER_CHANNELS: u32 = 1024;
/// Blocks of a cluster: one per row of the unzipped matrix.
pub const CLUSTER_BLOCKS: u32 = UNZIP;
/// FIR threads per block (warpgroups 0 and 1): one per column pair of its row; they also
/// run the row FFT.
pub const CLUSTER_THREADS: u32 = CLUSTER_CHANNELS / UNZIP;
/// Post threads per block (warpgroups 2 and 3): the post-processing and copy-out of a batch
/// while the FIR threads filter and transform the next.
pub const CLUSTER_POST_THREADS: u32 = 256;
/// Threads per block.
pub const CLUSTER_BLOCK_THREADS: u32 = CLUSTER_THREADS + CLUSTER_POST_THREADS;
/// Registers per thread at launch (`.maxnreg`): 512 threads fill the register file.
pub const CLUSTER_LAUNCH_REGISTERS: u32 = 128;
/// Registers of a FIR thread after `setmaxnreg` (weights and windows of both polarisations).
pub const CLUSTER_FIR_REGISTERS: u32 = 168;
/// Registers of a post thread after `setmaxnreg`.
pub const CLUSTER_POST_REGISTERS: u32 = 88;
/// Named barriers (0 is the block's): the FIR threads' and the post threads'.
pub const CLUSTER_FIR_BARRIER: u32 = 1;
/// Named barrier of the post threads (warpgroups 2 and 3), [`CLUSTER_POST_THREADS`] wide;
/// see [`CLUSTER_FIR_BARRIER`].
pub const CLUSTER_POST_BARRIER: u32 = 2;
// `setmaxnreg.inc` waits until the registers it asks for are free in the block's allocation:
// what the post threads give back must cover what the FIR threads take.
const _: () = assert!(
    CLUSTER_THREADS * CLUSTER_FIR_REGISTERS + CLUSTER_POST_THREADS * CLUSTER_POST_REGISTERS
        <= CLUSTER_BLOCK_THREADS * CLUSTER_LAUNCH_REGISTERS
);
/// Spectra per batch (so heaps and launches must be whole batches).
pub const CLUSTER_BATCH: u32 = 8;
/// Most taps: a thread keeps `2 (TV - 1)` older samples per polarisation and `2 TV` weights.
pub const CLUSTER_MAX_TAPS: u32 = 16;
/// Points of one row's FFT.
pub const CLUSTER_POINTS: u32 = CLUSTER_CHANNELS / UNZIP;
/// Transforms of a batch per block: (spectrum, polarisation), transform `2 s + p`.
pub const CLUSTER_TRANSFORMS: u32 = 2 * CLUSTER_BATCH;
/// Post columns (thread columns `t`, [`super::post_thread_columns`]) per block: one per lane.
pub const CLUSTER_POST_COLUMNS: u32 = CLUSTER_CHANNELS / 8 / CLUSTER_BLOCKS;
/// Output slots of the block's post columns: 8 channels each ([`cluster_out_slot`]).
pub const CLUSTER_COLUMN_SLOTS: u32 = 8 * CLUSTER_POST_COLUMNS;
/// Output slots of a block's staging: its columns', then column 0's 4 (block 0 only,
/// [`cluster_block_slots`]).
pub const CLUSTER_OUT_SLOTS: u32 = CLUSTER_COLUMN_SLOTS + 4;

/// Bytes of one FFT buffer (every transform of a batch, pad slots included).
pub const CLUSTER_FFT_BYTES: u32 = CLUSTER_TRANSFORMS * 8 * fft_buffer_slots(CLUSTER_POINTS);
/// Offset of the row FFT's scratch buffer (after the two FFT buffers): the first pass writes
/// it, the second reads it, so neither pass needs a barrier between its loads and stores.
pub const CLUSTER_SCRATCH_OFFSET: u32 = 2 * CLUSTER_FFT_BYTES;
/// Offset of the output staging (after the scratch buffer).
pub const CLUSTER_OUT_OFFSET: u32 = 3 * CLUSTER_FFT_BYTES;
/// Offset of the block's halved gains (after the output staging, [`cluster_gain_slot`]).
pub const CLUSTER_GAINS_OFFSET: u32 =
    (CLUSTER_OUT_OFFSET + 4 * CLUSTER_BATCH * CLUSTER_OUT_SLOTS).next_multiple_of(16);
/// Gain slots: one per (pol, output slot): (pol, side, v, lane), then column 0's (pol, v).
pub const CLUSTER_GAIN_SLOTS: u32 = 2 * CLUSTER_OUT_SLOTS;
/// Offset of the row FFT's second-pass twiddles (after the gains, [`cluster_row_twiddle`]):
/// in shared memory because every cluster barrier's acquire invalidates the L1 (`CCTL.IVALL`
/// in the SASS), so table reads from global memory after it would wait on the L2 each batch.
pub const CLUSTER_TWIDDLES_OFFSET: u32 = CLUSTER_GAINS_OFFSET + 8 * CLUSTER_GAIN_SLOTS;
/// Offset of the post's column twiddles (after the row twiddles): per lane, the three row
/// twiddles and two R2C twiddles of its column `u`, then of its mirror `n/4 - u`
/// ([`cluster_column_twiddle`]); in shared memory, not in the post threads' registers.
pub const CLUSTER_COLUMN_TWIDDLES_OFFSET: u32 = CLUSTER_TWIDDLES_OFFSET + 8 * CLUSTER_POINTS;
/// Column twiddles per lane: per column, [`CLUSTER_ROW_TWIDDLES`] row twiddles `W_n^(col r)`
/// (r = 1, 2, 3) and the R2C twiddles of its channels `col` and `col + a`
/// ([`super::r2c_twiddles`]; [`super::fixup_columns`] needs no others).
pub const CLUSTER_COLUMN_TWIDDLES: u32 = 2 * (CLUSTER_ROW_TWIDDLES + 2);
/// Row twiddles of a column (rows 1 to 3 of the unzipped matrix).
pub const CLUSTER_ROW_TWIDDLES: u32 = UNZIP - 1;
/// Offset of the input stages (after the column twiddles, 16-byte aligned).
pub const CLUSTER_STAGE_OFFSET: u32 =
    CLUSTER_COLUMN_TWIDDLES_OFFSET + 8 * CLUSTER_COLUMN_TWIDDLES * CLUSTER_POST_COLUMNS;

/// Slot (complex f32) of the second row-FFT pass's twiddle `W_(n/4)^(j r)` of input `r` of
/// butterfly `j` (both below 16, and `j % ns = j` in that pass): `j`-fastest, so the 16
/// butterflies of a transform load consecutive slots, each twiddle one load and no products.
pub const fn cluster_row_twiddle(r: u32, j: u32) -> u32 {
    16 * r + j
}

/// Slot (complex f32) of twiddle `j` (below `CLUSTER_COLUMN_TWIDDLES / 2`: the three row
/// twiddles, then the two R2C twiddles) of lane `lane`'s column `side` (0: `u`, 1: its mirror):
/// lane-fastest, so a warp's loads are conflict-free.
pub const fn cluster_column_twiddle(side: u32, j: u32, lane: u32) -> u32 {
    (side * CLUSTER_COLUMN_TWIDDLES / 2 + j) * CLUSTER_POST_COLUMNS + lane
}

/// Widest input samples of the cluster kernel: with 16-bit rows its stages and three FFT
/// buffers exceed an SM's shared memory.
pub const CLUSTER_MAX_BITS: u32 = 12;

/// Bytes from one input row to the next (a spectrum's 2n samples of one polarisation).
pub const fn cluster_row_step(bits: u32) -> u32 {
    2 * CLUSTER_CHANNELS * bits / 8
}

/// 16-byte chunks of one polarisation's staged rows of a batch. The batch's rows follow each
/// other in the input (whole chunks apart), so they are staged as one run: from the first
/// row's chunk through the last row's [`fir_row_chunks`]; row `i` starts `i` row steps in.
pub const fn cluster_stage_chunks(bits: u32) -> u32 {
    (CLUSTER_BATCH - 1) * cluster_row_step(bits) / 16 + fir_row_chunks(bits, CLUSTER_CHANNELS)
}

/// Copies (16-byte `cp.async`) of one polarisation's stage per FIR thread, at most.
pub const CLUSTER_STAGE_COPIES: u32 = cluster_stage_chunks(CLUSTER_MAX_BITS).div_ceil(CLUSTER_THREADS);
// The kernel unrolls seven copies.
const _: () = assert!(CLUSTER_STAGE_COPIES <= 7);

/// Bytes of one stage: both polarisations' rows of a batch.
pub const fn cluster_stage_bytes(bits: u32) -> u32 {
    2 * 16 * cluster_stage_chunks(bits)
}

/// Dynamic shared memory of a cluster block (two stages).
pub const fn cluster_shared_bytes(bits: u32) -> u32 {
    CLUSTER_STAGE_OFFSET + 2 * cluster_stage_bytes(bits)
}

/// Output staging word of slot `slot` of spectrum `s` of the batch (both polarisations:
/// int8 2 bytes each, int4 1 byte each): slot-fastest, so a warp's stores (32 consecutive
/// slots) and the copy-out's loads are conflict-free.
pub const fn cluster_out_word(s: u32, slot: u32) -> u32 {
    s * CLUSTER_OUT_SLOTS + slot
}

/// Output slots block `rank` fills and copies out: column 0's only in block 0.
pub const fn cluster_block_slots(rank: u32) -> u32 {
    if rank == 0 {
        CLUSTER_OUT_SLOTS
    } else {
        CLUSTER_COLUMN_SLOTS
    }
}

/// Output slot of lane `lane`'s channel `u + a v` (`side` 0) or `w + a v` (`side` 1).
pub const fn cluster_out_slot(lane: u32, side: u32, v: u32) -> u32 {
    (side * 4 + v) * CLUSTER_POST_COLUMNS + lane
}

/// Gain slot (complex f32) of polarisation `p`'s gain of the channel in output slot `slot`
/// ([`cluster_out_slot`], column 0's after the others): lane-fastest, so a warp's loads are
/// conflict-free.
pub const fn cluster_gain_slot(p: u32, slot: u32) -> u32 {
    if slot >= CLUSTER_COLUMN_SLOTS {
        2 * CLUSTER_COLUMN_SLOTS + 4 * p + slot - CLUSTER_COLUMN_SLOTS
    } else {
        p * CLUSTER_COLUMN_SLOTS + slot
    }
}

/// Channel of output slot `slot` of block `rank`.
pub const fn cluster_slot_channel(slot: u32, rank: u32) -> u32 {
    let a = CLUSTER_POINTS;
    if slot >= CLUSTER_COLUMN_SLOTS {
        a * (slot - CLUSTER_COLUMN_SLOTS)
    } else {
        let lane = slot % CLUSTER_POST_COLUMNS;
        let v = (slot / CLUSTER_POST_COLUMNS) % 4;
        let side = slot / (4 * CLUSTER_POST_COLUMNS);
        let u = rank * CLUSTER_POST_COLUMNS + lane + 1;
        (if side == 0 { u } else { a - u }) + a * v
    }
}

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub(super) mod device {
    use super::super::stockham::{dft16, fft_slot, stockham_load, stockham_store};
    use super::super::{
        cmul, fir_row_start, fir_row_word, fixup_columns, fixup_pair, output_index, post_rotations,
        quantise_complex, r2c_fixup_pair_x2, r2c_twiddles, rotations, unpack_words, unpack_words32,
        unzip_column,
    };
    use super::*;
    use crate::intrinsics::*;
    use crate::pfb::arith::c32::{ld_c32, ld_cluster_c32, ld_global_c32, shfl_idx_f32, st_c32};
    use crate::wgmma::set_max_registers;

    const B: usize = CLUSTER_BATCH as usize;
    const A: u32 = CLUSTER_POINTS;
    const N: u32 = CLUSTER_CHANNELS;
    const SLOT_BYTES: u32 = 8 * fft_buffer_slots(CLUSTER_POINTS);

    /// One radix-16 Stockham pass over the batch's transforms, from `source` to `target`:
    /// thread `tid` takes butterfly `tid % 16` of transform `tid / 16` (256 threads, 16
    /// transforms of 256 points). No barrier: the caller's next barrier publishes `target`.
    #[inline(always)]
    unsafe fn fft_pass(source: u32, target: u32, ns: u32, twiddles: u32) {
        const R: u32 = 16;
        let tid = thread_idx_x();
        let per = A / R;
        let transform = (tid / per) * SLOT_BYTES;
        let j = tid % per;
        let mut v = [[0.0f32; 2]; 16];
        unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            v[r] = ld_c32(source + transform + 8 * fft_slot(stockham_load(j, r as u32, A, R)));
        });
        if ns > 1 {
            unroll!(r in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                v[r] = cmul(v[r], ld_c32(twiddles + 8 * cluster_row_twiddle(r as u32, j)));
            });
        }
        v = dft16(v);
        unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            st_c32(target + transform + 8 * fft_slot(stockham_store(j, r as u32, ns, R)), v[r]);
        });
    }

    /// The kernel's arguments (the entry points' parameters, `super::super::device`).
    #[derive(Clone, Copy)]
    pub(in crate::pfb) struct Args {
        pub(in crate::pfb) inputs: [*const u32; 2],
        pub(in crate::pfb) offsets: *const u32,
        pub(in crate::pfb) weights: *const f32,
        pub(in crate::pfb) twiddles: *const [f32; 2],
        pub(in crate::pfb) gains: *const [f32; 2],
        pub(in crate::pfb) fine: *const f32,
        pub(in crate::pfb) rotation: *const [f32; 4],
        pub(in crate::pfb) out: *mut u32,
        pub(in crate::pfb) saturated: *mut u32,
        pub(in crate::pfb) taps: u32,
        pub(in crate::pfb) spectra: u32,
        pub(in crate::pfb) spectra_per_heap: u32,
        pub(in crate::pfb) bits: u32,
        pub(in crate::pfb) run: u32,
    }

    /// The kernel body (module documentation). Grid: `4 x clusters` blocks of
    /// [`CLUSTER_BLOCK_THREADS`] in clusters of 4; cluster `i` takes spectra
    /// `[i run, (i + 1) run)`; `run` and `spectra` are multiples of [`CLUSTER_BATCH`], which
    /// divides the heap.
    ///
    /// Warp roles: threads below [`CLUSTER_THREADS`] run the FIR and the row FFT of batch
    /// `k + 1` while the post threads post-process and copy out batch `k`. One cluster barrier
    /// per batch, split into arrive and wait: phase `k` completes once every block's FIR
    /// threads have finished the FFT of batch `k` and its post threads the post of batch
    /// `k - 1`. After it the post threads read the FFT buffer `k % 2` of all four blocks, and
    /// the FIR threads may rewrite buffer `(k + 1) % 2`, whose last readers were the posts of
    /// batch `k - 1`. Both roles arrive and wait once per phase, `batches + 1` phases in all.
    #[inline(always)]
    pub(in crate::pfb) unsafe fn cluster_pfb<const TV: usize, const INT4: bool>(args: &Args) {
        let Args { twiddles, gains, spectra, run, .. } = *args;
        let tid = thread_idx_x();
        let c = cluster_rank();
        let cluster = cluster_id();
        let first = cluster * run;
        let last = if first + run < spectra { first + run } else { spectra };
        let batches = if first < last { (last - first) / B as u32 } else { 0 };
        let smem = dynamic_shared();

        // The block's gains, halved (the post computes twice the fix-up), in shared memory.
        {
            let gains_base = smem + CLUSTER_GAINS_OFFSET;
            let mut e = tid;
            while e < CLUSTER_GAIN_SLOTS {
                let (p, slot) = (e / CLUSTER_OUT_SLOTS, e % CLUSTER_OUT_SLOTS);
                let g = ld_global_c32(gains.add((p * N + cluster_slot_channel(slot, c)) as usize));
                st_c32(gains_base + 8 * cluster_gain_slot(p, slot), [0.5 * g[0], 0.5 * g[1]]);
                e += CLUSTER_BLOCK_THREADS;
            }
        }
        // The row FFT's second-pass twiddles W_A^(j r) at slot 16 r + j (W_A^e is entry 8e of
        // the n-point table).
        let row_twiddles = smem + CLUSTER_TWIDDLES_OFFSET;
        if tid < CLUSTER_POINTS {
            let (tr, tj) = (tid / 16, tid % 16);
            st_c32(
                row_twiddles + 8 * cluster_row_twiddle(tr, tj),
                ld_global_c32(twiddles.add(8 * (tr * tj) as usize)),
            );
        }
        // The post's column twiddles ([`super::super::column_twiddles`] from the f64 table:
        // W_n^(col r) is entry 2 col r, exp(-j pi col / n) entry col, then its channels' R2C
        // twiddles) of lane tid's columns.
        if tid < CLUSTER_POST_COLUMNS {
            let u = c * CLUSTER_POST_COLUMNS + tid + 1;
            let at = |k: u32| ld_global_c32(twiddles.add(k as usize));
            let table = smem + CLUSTER_COLUMN_TWIDDLES_OFFSET;
            unroll!(side in [0, 1] {
                let col = if side == 0 { u } else { A - u };
                let t = r2c_twiddles(at(col));
                let values = [at(2 * col), at(4 * col), at(6 * col), t[0], t[1]];
                unroll!(j in [0, 1, 2, 3, 4] {
                    let slot = cluster_column_twiddle(side as u32, j as u32, tid);
                    st_c32(table + 8 * slot, values[j]);
                });
            });
        }
        sync_threads();

        if tid < CLUSTER_THREADS {
            set_max_registers::<CLUSTER_FIR_REGISTERS, true>();
            fir_role::<TV>(args, first, batches);
        } else {
            set_max_registers::<CLUSTER_POST_REGISTERS, false>();
            post_role::<INT4>(args, first, batches);
        }
    }

    /// The FIR threads: FIR of both polarisations and the row FFT, batch by batch.
    #[inline(always)]
    unsafe fn fir_role<const TV: usize>(args: &Args, first: u32, batches: u32) {
        let Args { inputs, offsets, weights, taps, spectra, bits, .. } = *args;
        let tid = thread_idx_x();
        let lane = tid % 32;
        let c = cluster_rank();
        let step = 2 * N;
        let pad = TV as u32 - taps;
        let smem = dynamic_shared();
        let fft_base = smem;
        let scratch = smem + CLUSTER_SCRATCH_OFFSET;
        let stage_base = smem + CLUSTER_STAGE_OFFSET;
        let row_twiddles = smem + CLUSTER_TWIDDLES_OFFSET;
        let row_step = cluster_row_step(bits); // bytes from one row to the next
        let stage_chunks = cluster_stage_chunks(bits);
        let fir_barrier = || named_barrier(CLUSTER_FIR_BARRIER, CLUSTER_THREADS);

        // FIR: pair q of row c.
        let q1 = tid;
        let q = UNZIP * q1 + c;
        let mut w = [[0.0f32; 2]; TV];
        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            if j < TV && j as u32 >= pad {
                let at = ((j as u32 - pad) * step + 2 * q) as usize;
                let [w0, w1] = ld_global_nc_v2(weights.add(at) as *const u32);
                w[j] = [f32::from_bits(w0), f32::from_bits(w1)];
            }
        });
        // Offsets of a batch, one per lane: lane l holds polarisation (l / 8) % 2's spectrum
        // m + l % 8, loaded a batch ahead (so no offset load waits in the loop).
        let lane_pol = (lane / B as u32) % 2;
        let load_offsets = |k: u32| -> u32 {
            if k < batches {
                *offsets.add((lane_pol * spectra + first + k * B as u32 + lane % B as u32) as usize)
            } else {
                0
            }
        };
        let window_start = |off: u32, p: u32| shfl_idx(off, B as u32 * p);
        // Whether polarisation p's windows in the batch of `off` are consecutive (uniform).
        let contiguous = |off: u32, p: u32| -> bool {
            let s0 = window_start(off, p);
            vote_all(lane_pol != p || off == s0.wrapping_add((lane % B as u32) * step))
        };
        let row_sample = |s0: u32| s0 as u64 + (taps - 1) as u64 * step as u64;
        // Stage batch k's new rows (both polarisations, those with consecutive windows): each
        // polarisation's rows as one contiguous run, copy j of thread tid its chunk
        // tid + 256 j (a warp's 16-byte pieces consecutive, the offsets immediates).
        let stage = |k: u32, off: u32| {
            if k < batches {
                let dst = stage_base + (k % 2) * cluster_stage_bytes(bits) + 16 * tid;
                unroll!(p in [0, 1] {
                    if contiguous(off, p as u32) {
                        let (chunk, _) = fir_row_start(row_sample(window_start(off, p as u32)), bits);
                        let src = (inputs[p] as *const u8).add(16 * (chunk as usize + tid as usize));
                        let dst = dst + p as u32 * 16 * stage_chunks;
                        unroll!(j in [0, 1, 2, 3, 4, 5, 6] {
                            let first = j as u32 * CLUSTER_THREADS;
                            if j < CLUSTER_STAGE_COPIES as usize && tid + first < stage_chunks {
                                cp_async_16(dst + 16 * first, src.add(16 * first as usize), 16);
                            }
                        });
                    }
                });
            }
            cp_async_commit();
        };
        let mut off_cur = load_offsets(0);
        let mut off_next = load_offsets(1);
        stage(0, off_cur);

        let mut old = [[[0.0f32; 2]; 16]; 2];
        let mut expected = [u32::MAX; 2];
        let row_words = (row_step / 4) as usize;
        let mut k = 0;
        while k < batches {
            let off_after = load_offsets(k + 2);
            cp_async_wait_all();
            fir_barrier();
            stage(k + 1, off_next);
            let buffer = fft_base + (k % 2) * CLUSTER_FFT_BYTES;
            let rows = stage_base + (k % 2) * cluster_stage_bytes(bits);
            // 1. FIR of both polarisations into the FFT buffer (transform 2 s + p, point q1).
            unroll!(p in [0, 1] {
                let input = inputs[p];
                let s0 = window_start(off_cur, p as u32);
                let staged = contiguous(off_cur, p as u32);
                if staged && s0 != expected[p] {
                    // A new window: its older rows from global memory (rows before `pad` are 0).
                    let bit = (s0 as u64 + 2 * q as u64) * bits as u64;
                    let shift = (bit % 32) as u32;
                    let mut ptr = input.add((bit / 32) as usize);
                    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14] {
                        if j + 1 < TV {
                            if j as u32 >= pad {
                                let (a, b) = unpack_words(*ptr, *ptr.add(1), shift, bits);
                                old[p][j] = [a as f32, b as f32];
                                ptr = ptr.add(row_words);
                            } else {
                                old[p][j] = [0.0, 0.0];
                            }
                        }
                    });
                }
                let (_, offset) = fir_row_start(row_sample(s0), bits);
                let at = rows + p as u32 * 16 * stage_chunks + fir_row_word(0, offset, q, bits);
                let bit = (offset + 2 * q * bits) % 32;
                let mut new = [[0.0f32; 2]; B];
                let mut acc = [[0.0f32; 2]; B];
                unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22] {
                    if kk < TV + B - 1 {
                        let x = if kk + 1 < TV {
                            old[p][kk % 16]
                        } else {
                            let i = (kk + 1 - TV) % B;
                            let row = at + i as u32 * row_step;
                            let (a, b) = unpack_words32(ld_shared_u32(row), ld_shared_u32(row + 4), bit, bits);
                            new[i] = [a as f32, b as f32];
                            new[i]
                        };
                        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                            if kk >= i && kk - i < TV {
                                acc[i][0] = fma_rn_f32(w[kk - i][0], x[0], acc[i][0]);
                                acc[i][1] = fma_rn_f32(w[kk - i][1], x[1], acc[i][1]);
                            }
                        });
                    }
                });
                // The next window's older rows: this window's rows B .. B + TV - 1.
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14] {
                    if j + 1 < TV {
                        old[p][j] = if j + B + 1 < TV { old[p][(j + B) % 16] } else { new[(j + B + 1 - TV) % B] };
                    }
                });
                if staged {
                    expected[p] = s0.wrapping_add(B as u32 * step);
                    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                        st_c32(buffer + (2 * i as u32 + p as u32) * SLOT_BYTES + 8 * fft_slot(q1), acc[i]);
                    });
                } else {
                    // A delay step inside the batch: each window read directly (the staged rows
                    // were not loaded). Rare: a real loop over the spectra.
                    expected[p] = u32::MAX;
                    let mut i = 0;
                    while i < B as u32 {
                        let bit = (shfl_idx(off_cur, B as u32 * p as u32 + i) as u64 + 2 * q as u64) * bits as u64;
                        let shift = (bit % 32) as u32;
                        let mut ptr = input.add((bit / 32) as usize);
                        let mut sum = [0.0f32; 2];
                        unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                            if j < TV && j as u32 >= pad {
                                let (a, b) = unpack_words(*ptr, *ptr.add(1), shift, bits);
                                sum[0] = fma_rn_f32(w[j][0], a as f32, sum[0]);
                                sum[1] = fma_rn_f32(w[j][1], b as f32, sum[1]);
                                ptr = ptr.add(row_words);
                            }
                        });
                        st_c32(buffer + (2 * i + p as u32) * SLOT_BYTES + 8 * fft_slot(q1), sum);
                        i += 1;
                    }
                }
            });
            fir_barrier();

            fft_pass(buffer, scratch, 1, row_twiddles);
            fir_barrier();
            fft_pass(scratch, buffer, 16, row_twiddles);
            // Phase k: this batch's FFT done here; the posts of batch k - 1 done everywhere.
            cluster_arrive();
            cluster_wait();
            off_cur = off_next;
            off_next = off_after;
            k += 1;
        }
        // The last phase: no block leaves while another may still read its shared memory.
        cluster_arrive();
        cluster_wait();
    }

    /// The post threads: post-processing and copy-out, a batch behind the FIR threads.
    #[inline(always)]
    unsafe fn post_role<const INT4: bool>(args: &Args, first: u32, batches: u32) {
        let Args { fine, rotation, out, saturated, spectra, spectra_per_heap, .. } = *args;
        let ptid = thread_idx_x() - CLUSTER_THREADS;
        let lane = ptid % 32;
        let c = cluster_rank();
        let smem = dynamic_shared();
        let fft_base = smem;
        let out_stage = smem + CLUSTER_OUT_OFFSET;
        let gain = |p: u32, slot: u32| ld_c32(smem + CLUSTER_GAINS_OFFSET + 8 * cluster_gain_slot(p, slot));
        let post_barrier = || named_barrier(CLUSTER_POST_BARRIER, CLUSTER_POST_THREADS);
        // Warp s_post takes spectrum s_post of each batch.
        const _: () = assert!(CLUSTER_POST_THREADS == 32 * CLUSTER_BATCH);
        let s_post = ptid / 32;
        // The post's per-spectrum values of the warp's spectrum, a batch ahead: lanes 0, 1 the
        // fine delays of pols 0, 1; lanes 2 + 4 p + j the rotation values of pol p.
        let load_meta = |k: u32| -> f32 {
            let m = first + k * B as u32 + s_post;
            if k >= batches || lane >= 10 {
                0.0
            } else if lane < 2 {
                *fine.add((lane * spectra + m) as usize)
            } else {
                let p = (lane - 2) / 4;
                *(rotation as *const f32).add(4 * (p * spectra + m) as usize + ((lane - 2) % 4) as usize)
            }
        };
        // Column 0's per-spectrum values, a batch ahead: block 0's post threads ptid < 2B,
        // spectrum ptid / 2 and pol ptid % 2 (fine delay, rotation).
        let load_meta0 = |k: u32| -> [f32; 5] {
            let mut v = [0.0f32; 5];
            if k < batches && c == 0 && ptid < 2 * B as u32 {
                let at = ((ptid % 2) * spectra + first + k * B as u32 + ptid / 2) as usize;
                let [fr, fi, sr, si] = *rotation.add(at);
                v = [*fine.add(at), fr, fi, sr, si];
            }
            v
        };
        let mut meta = load_meta(0);
        let mut meta0 = load_meta0(0);

        // Post: lane's column u (and mirror w).
        let u = c * CLUSTER_POST_COLUMNS + lane + 1;
        let wm = A - u;
        let column_twiddle = |side: u32, j: u32| {
            ld_c32(smem + CLUSTER_COLUMN_TWIDDLES_OFFSET + 8 * cluster_column_twiddle(side, j, lane))
        };

        // Phase 0 has no post before it.
        cluster_arrive_relaxed();
        let mut k = 0;
        while k < batches {
            let meta_next = load_meta(k + 1);
            let meta0_next = load_meta0(k + 1);
            let m = first + k * B as u32;
            let buffer = fft_base + (k % 2) * CLUSTER_FFT_BYTES;
            let heap = m / spectra_per_heap;
            // Phase k: the FFTs of batch k done in every block.
            cluster_wait();
            // Saturated values, pol 0 in the low half, pol 1 in the high half.
            let mut clipped = 0u32;
            // Both polarisations unrolled, so the second one's remote loads overlap the first.
            unroll!(p in [0, 1] {
                let p = p as u32;
                let tr = buffer + (2 * s_post + p) * SLOT_BYTES;
                let mut y = [[0.0f32; 2]; 4];
                let mut ym = [[0.0f32; 2]; 4];
                unroll!(r in [0, 1, 2, 3] {
                    y[r] = ld_cluster_c32(tr + 8 * fft_slot(u), r as u32);
                    ym[r] = ld_cluster_c32(tr + 8 * fft_slot(wm), r as u32);
                });
                // The lane's column twiddles, loaded per polarisation: held across both (once per
                // batch) they take registers the loop needs, which made the kernel slower.
                let tw_u = [column_twiddle(0, 0), column_twiddle(0, 1), column_twiddle(0, 2)];
                let t_u = [column_twiddle(0, 3), column_twiddle(0, 4)];
                let tw_w = [column_twiddle(1, 0), column_twiddle(1, 1), column_twiddle(1, 2)];
                let t_w = [column_twiddle(1, 3), column_twiddle(1, 4)];
                let (z, zm) = (unzip_column(y, &tw_u), unzip_column(ym, &tw_w));
                let (x, xm) = fixup_columns(z, zm, &t_u, &t_w, r2c_fixup_pair_x2);
                let value = |l: u32| shfl_idx_f32(meta, l);
                let (fr, fi, sr, si) = (value(2 + 4 * p), value(3 + 4 * p), value(4 + 4 * p), value(5 + 4 * p));
                let (rot, rotm) = post_rotations(u, N, value(p), [fr, fi], [sr, si]);
                let byte = |slot: u32| out_stage + 4 * cluster_out_word(s_post, slot) + if INT4 { p } else { 2 * p };
                let mut count = 0;
                unroll!(v in [0, 1, 2, 3] {
                    let gu = gain(p, cluster_out_slot(lane, 0, v as u32));
                    let gw = gain(p, cluster_out_slot(lane, 1, v as u32));
                    let (qu, cu) = quantise_complex(cmul(x[v], cmul(gu, rot[v])), INT4);
                    let (qw, cw) = quantise_complex(cmul(xm[v], cmul(gw, rotm[v])), INT4);
                    count += cu + cw;
                    if INT4 {
                        st_shared_u8(byte(cluster_out_slot(lane, 0, v as u32)), qu as u8);
                        st_shared_u8(byte(cluster_out_slot(lane, 1, v as u32)), qw as u8);
                    } else {
                        st_shared_u16(byte(cluster_out_slot(lane, 0, v as u32)), qu as u16);
                        st_shared_u16(byte(cluster_out_slot(lane, 1, v as u32)), qw as u16);
                    }
                });
                // Column n/8 is its own mirror: both halves held its values (bit for bit).
                let count = if u == wm { count / 2 } else { count };
                clipped += count << (16 * p);
            });
            unroll!(p in [0, 1] {
                let total = redux_add_u32((clipped >> (16 * p)) & 0xffff);
                if lane == 0 && total != 0 {
                    red_add_u32(saturated.add((heap * 2) as usize + p), total);
                }
            });
            if c == 0 && ptid < 2 * B as u32 {
                // Column 0 (channels a v, their own mirrors' column): one (spectrum, pol) each.
                let (s, p) = (ptid / 2, ptid % 2);
                let tr = buffer + (2 * s + p) * SLOT_BYTES;
                let mut y = [[0.0f32; 2]; 4];
                unroll!(r in [0, 1, 2, 3] {
                    y[r] = ld_cluster_c32(tr, r as u32);
                });
                let one = [1.0f32, 0.0];
                let z = unzip_column(y, &[one, one, one]);
                let (x, _) = fixup_pair(0, z, z, one, one, r2c_fixup_pair_x2);
                let [fine0, fr, fi, sr, si] = meta0;
                let (rot, _) = rotations(0, N, fine0, [fr, fi], [sr, si]);
                let mut count = 0u32;
                unroll!(v in [0, 1, 2, 3] {
                    let g = gain(p, CLUSTER_COLUMN_SLOTS + v as u32);
                    let (q, cl) = quantise_complex(cmul(x[v], cmul(g, rot[v])), INT4);
                    count += cl;
                    let address = out_stage + 4 * cluster_out_word(s, CLUSTER_COLUMN_SLOTS + v as u32);
                    if INT4 {
                        st_shared_u8(address + p, q as u8);
                    } else {
                        st_shared_u16(address + 2 * p, q as u16);
                    }
                });
                if count != 0 {
                    red_add_u32(saturated.add((heap * 2 + p) as usize), count);
                }
            }
            post_barrier();
            // Copy-out: each channel's batch of spectra as 16-byte pieces.
            let slots = cluster_block_slots(c);
            let s_in_heap = m % spectra_per_heap;
            if INT4 {
                let mut slot = ptid;
                while slot < slots {
                    let mut v = [0u32; 4];
                    unroll!(j in [0, 1, 2, 3] {
                        let lo = ld_shared_u32(out_stage + 4 * cluster_out_word(2 * j as u32, slot)) & 0xffff;
                        let hi = ld_shared_u32(out_stage + 4 * cluster_out_word(2 * j as u32 + 1, slot)) & 0xffff;
                        v[j] = lo | (hi << 16);
                    });
                    let k = cluster_slot_channel(slot, c);
                    let at = output_index(heap, k, s_in_heap, 0, N, spectra_per_heap);
                    st_global_v4(out.add((at / 4) as usize), v);
                    slot += CLUSTER_POST_THREADS;
                }
            } else {
                let mut task = ptid;
                while task < 2 * slots {
                    let (half, slot) = if task < slots { (0, task) } else { (1, task - slots) };
                    let mut v = [0u32; 4];
                    unroll!(j in [0, 1, 2, 3] {
                        v[j] = ld_shared_u32(out_stage + 4 * cluster_out_word(4 * half + j as u32, slot));
                    });
                    let k = cluster_slot_channel(slot, c);
                    let at = output_index(heap, k, s_in_heap + 4 * half, 0, N, spectra_per_heap);
                    st_global_v4(out.add((at / 2) as usize), v);
                    task += CLUSTER_POST_THREADS;
                }
            }
            // Phase k + 1: this batch's posts done (and the staging read: the next post
            // rewrites it after the phase's wait).
            cluster_arrive_relaxed();
            meta = meta_next;
            meta0 = meta0_next;
            k += 1;
        }
        cluster_wait();
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::pfb::{fir_row_word, BITS};

    /// The cluster kernel's output slots: the four blocks together hold every channel, each
    /// once, except the self-mirrored column n/8's (the same values twice, from one thread);
    /// gain slots are a bijection onto the gain table; shared memory fits an SM for every bit
    /// width, with 16-byte aligned stages.
    #[test]
    fn cluster_blocks_cover_every_channel_and_fit_shared_memory() {
        let n = CLUSTER_CHANNELS;
        let a = n / UNZIP;
        let mut seen = std::vec![0u32; n as usize];
        for rank in 0..CLUSTER_BLOCKS {
            let slots = cluster_block_slots(rank);
            let mut gains = std::vec![false; CLUSTER_GAIN_SLOTS as usize];
            for slot in 0..slots {
                seen[cluster_slot_channel(slot, rank) as usize] += 1;
                for p in 0..2 {
                    let g = cluster_gain_slot(p, slot) as usize;
                    assert!(!gains[g], "rank {rank} slot {slot} pol {p}: gain slot {g} twice");
                    gains[g] = true;
                }
            }
            if rank == 0 {
                assert!(gains.iter().all(|&g| g));
            }
        }
        for (k, &count) in seen.iter().enumerate() {
            let twice = k as u32 % a == a / 2;
            assert_eq!(count, if twice { 2 } else { 1 }, "channel {k}");
        }
        for lane in 0..CLUSTER_POST_COLUMNS {
            for side in 0..2 {
                for v in 0..4 {
                    let slot = cluster_out_slot(lane, side, v);
                    let u = lane + 1; // rank 0
                    assert_eq!(cluster_slot_channel(slot, 0), if side == 0 { u } else { a - u } + a * v);
                }
            }
        }
        assert!(cluster_shared_bytes(16) > 227 * 1024, "16-bit input would fit too");
        for bits in BITS.into_iter().filter(|&b| b <= CLUSTER_MAX_BITS) {
            assert!(
                cluster_shared_bytes(bits) <= 227 * 1024,
                "{bits}-bit: {} bytes",
                cluster_shared_bytes(bits)
            );
            // Rows a whole number of chunks apart, so one run stages the batch; every pair's two
            // words of the last row, at every offset within the first chunk, lie inside it.
            assert_eq!(cluster_row_step(bits) % 16, 0);
            assert!(cluster_stage_chunks(bits) <= CLUSTER_STAGE_COPIES * CLUSTER_THREADS);
            for offset in 0..128 {
                let last = (CLUSTER_BATCH - 1) * cluster_row_step(bits);
                let word = fir_row_word(0, offset, CLUSTER_CHANNELS - 1, bits);
                assert!(last + word + 8 <= 16 * cluster_stage_chunks(bits), "{bits}-bit offset {offset}");
            }
        }
        assert_eq!(CLUSTER_STAGE_OFFSET % 16, 0);
        assert_eq!(CLUSTER_FFT_BYTES % 16, 0);
        assert_eq!(CLUSTER_POST_THREADS, 32 * CLUSTER_BATCH, "one post warp per spectrum of a batch");
        assert_eq!(CLUSTER_THREADS, CLUSTER_POINTS, "one row twiddle per thread");
        assert_eq!(CLUSTER_THREADS, 16 * CLUSTER_TRANSFORMS, "one radix-16 butterfly per FIR thread");
        // Warpgroups of 128 threads take their register budgets (`setmaxnreg`) together.
        assert_eq!(CLUSTER_THREADS % 128, 0);
        assert_eq!(CLUSTER_POST_THREADS % 128, 0);
        assert_eq!(CLUSTER_BLOCK_THREADS * CLUSTER_LAUNCH_REGISTERS, 65536, "the register file");
    }

    /// Every shared-memory access of the cluster kernel's loop, as its warps issue them: the FIR
    /// stores, both FFT passes' loads and stores, the post's gain loads and output-staging
    /// stores and the copy-out's loads are conflict-free; the post's (remote) loads of columns
    /// u and n/4 - u at most 2-way.
    #[test]
    fn cluster_shared_memory_accesses_are_conflict_free() {
        use crate::bank::wavefronts;
        use crate::pfb::stockham::{fft_slot, stockham_load, stockham_store};
        let a = CLUSTER_POINTS;
        let buffer = 8 * crate::pfb::stockham::fft_buffer_slots(a);
        for warp in 0..CLUSTER_THREADS / 32 {
            let tid = |l: usize| 32 * warp + l as u32;
            for b in 0..CLUSTER_TRANSFORMS {
                let fir: [u32; 32] = std::array::from_fn(|l| b * buffer + 8 * fft_slot(tid(l)));
                assert_eq!(wavefronts(&fir, 8), 2, "FIR stores");
            }
            for ns in [1, 16] {
                for r in 0..16 {
                    let at = |l: usize, e: u32| (tid(l) / 16) * buffer + 8 * fft_slot(e);
                    let load: [u32; 32] =
                        std::array::from_fn(|l| at(l, stockham_load(tid(l) % 16, r, a, 16)));
                    let store: [u32; 32] =
                        std::array::from_fn(|l| at(l, stockham_store(tid(l) % 16, r, ns, 16)));
                    assert_eq!(wavefronts(&load, 8), 2, "pass {ns}, r {r}: loads");
                    assert_eq!(wavefronts(&store, 8), 2, "pass {ns}, r {r}: stores");
                }
            }
        }
        for r in 1..16 {
            // Second-pass twiddles: lanes 16-31 repeat lanes 0-15 (a broadcast).
            let twiddle: [u32; 32] = std::array::from_fn(|l| 8 * cluster_row_twiddle(r, l as u32 % 16));
            assert_eq!(wavefronts(&twiddle, 8), 2, "row twiddles, r {r}");
        }
        for slot in 0..CLUSTER_COLUMN_TWIDDLES {
            let (side, j) = (slot / (CLUSTER_COLUMN_TWIDDLES / 2), slot % (CLUSTER_COLUMN_TWIDDLES / 2));
            let column: [u32; 32] = std::array::from_fn(|l| 8 * cluster_column_twiddle(side, j, l as u32));
            assert_eq!(wavefronts(&column, 8), 2, "column twiddles");
        }
        for rank in 0..CLUSTER_BLOCKS {
            let u = |l: usize| rank * CLUSTER_POST_COLUMNS + l as u32 + 1;
            let column: [u32; 32] = std::array::from_fn(|l| 8 * fft_slot(u(l)));
            let mirror: [u32; 32] = std::array::from_fn(|l| 8 * fft_slot(a - u(l)));
            // Columns u = 32 c + 1 .. 32 c + 32 straddle a pad slot in each half-warp phase:
            // 2-way.
            assert!(wavefronts(&column, 8) <= 4, "rank {rank}: post loads of u");
            assert!(wavefronts(&mirror, 8) <= 4, "rank {rank}: post loads of n/4 - u");
        }
        for s in 0..CLUSTER_BATCH {
            for side in 0..2 {
                for v in 0..4 {
                    let stage: [u32; 32] =
                        std::array::from_fn(|l| 4 * cluster_out_word(s, cluster_out_slot(l as u32, side, v)));
                    assert_eq!(wavefronts(&stage, 4), 1, "output staging stores");
                    for p in 0..2 {
                        let gain: [u32; 32] = std::array::from_fn(|l| {
                            8 * cluster_gain_slot(p, cluster_out_slot(l as u32, side, v))
                        });
                        assert_eq!(wavefronts(&gain, 8), 2, "gain loads");
                    }
                }
            }
            for first in (0..CLUSTER_OUT_SLOTS).step_by(32) {
                let copy: [u32; 32] =
                    std::array::from_fn(|l| 4 * cluster_out_word(s, (first + l as u32) % CLUSTER_OUT_SLOTS));
                assert!(wavefronts(&copy, 4) <= 2, "copy-out loads");
            }
        }
    }
}
