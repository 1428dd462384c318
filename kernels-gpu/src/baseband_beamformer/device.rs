//! The baseband beamformer's entry points (sm_80 PTX, run on every supported GPU) and their
//! body: the `cp.async` ring of E stages, the warps' register-resident A slices, four s8
//! m16n8k32 MMAs per complex product, and the transposed output (module documentation).
use super::*;
use crate::intrinsics::*;
use crate::mma::mma_m16n8k32_s8;
use crate::packing::pack_ci4;

/// The kernel body for `DG` 64-dish groups. See the module documentation.
#[inline(always)]
unsafe fn beamform<const DG: usize>(
    e: *const u8,
    a: *const u8,
    shifts: *const i32,
    j: *mut u8,
    beam_stride: u32,
    fps: u32,
    times: u32,
    tc: u32,
) {
    let dishes = DISH_GROUP * DG as u32;
    let row_bytes = smem_row_bytes(dishes);
    let stage_size = stage_bytes(dishes, tc);
    let stages_per_item = CHUNK / tc;
    let blocks_per_stage = tc / 16;

    let tid = thread_idx_x();
    let threads = block_dim_x();
    let warp = tid / 32;
    let lane = lane_id();
    let smem = dynamic_shared();

    let chunks = times / CHUNK;
    let (first, end) = block_items(fps * chunks, block_idx_x(), grid_dim_x());
    let total = (end - first) * stages_per_item;

    // Stage k of this block: rows tau0 .. tau0 + tc of item first + k / stages_per_item.
    let issue = |k: u32| {
        if k < total {
            let item = first + k / stages_per_item;
            let fp = item / chunks;
            let tau0 = (item % chunks) * CHUNK + (k % stages_per_item) * tc;
            let buffer = smem + (k % STAGES) * stage_size;
            let per_row = dishes / 16;
            let mut i = tid;
            while i < tc * per_row {
                let (row, col) = (i / per_row, i % per_row);
                let src = ((tau0 + row) as u64 * fps as u64 + fp as u64) * dishes as u64 + 16 * col as u64;
                cp_async_16(buffer + row * row_bytes + 16 * col, e.add(src as usize), 16);
                i += threads;
            }
        }
        cp_async_commit();
    };

    let mut weights_re = [[0u32; 4]; DG];
    let mut weights_im = [[0u32; 4]; DG];
    // Beam table entry of beam 8 warp + b: its beam_constants and shift.
    let table = smem + STAGES * stage_size + BEAMS_PER_WARP * warp * BEAM_TABLE_BYTES;
    let block_beams = threads / 32 * BEAMS_PER_WARP;
    let staging = smem + STAGES * stage_size + block_beams * BEAM_TABLE_BYTES + warp * OUT_STAGING_BYTES;
    let mut current_fp = u32::MAX;

    for k in 0..STAGES - 1 {
        issue(k);
    }
    for k in 0..total {
        cp_async_wait_group::<{ STAGES - 2 }>();
        sync_threads();
        // The buffer refilled here was read in iteration k - 1, before the barrier.
        issue(k + STAGES - 1);

        let item = first + k / stages_per_item;
        let fp = item / chunks;
        if fp != current_fp {
            current_fp = fp;
            let mut sum_re = 0i32;
            let mut sum_im = 0i32;
            unroll!(m in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if m < DG {
                    let at = weight_offset(beam_stride, dishes, fp, warp, lane, m as u32) as usize;
                    let v0 = ld_global_nc_v4(a.add(at) as *const u32);
                    let v1 = ld_global_nc_v4(a.add(at + 16) as *const u32);
                    weights_re[m] = [
                        prmt(v0[0], v0[1], 0x6420),
                        prmt(v0[2], v0[3], 0x6420),
                        prmt(v1[0], v1[1], 0x6420),
                        prmt(v1[2], v1[3], 0x6420),
                    ];
                    weights_im[m] = [
                        prmt(v0[0], v0[1], 0x7531),
                        prmt(v0[2], v0[3], 0x7531),
                        prmt(v1[0], v1[1], 0x7531),
                        prmt(v1[2], v1[3], 0x7531),
                    ];
                    unroll!(r in [0, 1, 2, 3] {
                        sum_re = dp4a(weights_re[m][r], 0x0101_0101, sum_re);
                        sum_im = dp4a(weights_im[m][r], 0x0101_0101, sum_im);
                    });
                }
            });
            // Lanes 4g .. 4g + 4 hold beam g's dishes.
            sum_re += shfl_xor(sum_re as u32, 1) as i32;
            sum_re += shfl_xor(sum_re as u32, 2) as i32;
            sum_im += shfl_xor(sum_im as u32, 1) as i32;
            sum_im += shfl_xor(sum_im as u32, 2) as i32;
            if lane % 4 == 0 {
                let beam = BEAMS_PER_WARP * warp + lane / 4;
                let shift = *shifts.add((fp * beam_stride + beam) as usize) as u32;
                let (const_re, const_im) = beam_constants(sum_re, sum_im);
                let entry = [const_re as u32, const_im as u32, shift, 0];
                st_shared_v4(table + (lane / 4) * BEAM_TABLE_BYTES, entry);
            }
            sync_warp();
        }

        let buffer = smem + (k % STAGES) * stage_size;
        for block in 0..blocks_per_stage {
            let row0 = 16 * block;
            let mut q1 = [0i32; 4];
            let mut q2 = [0i32; 4];
            let mut q3 = [0i32; 4];
            let mut q4 = [0i32; 4];
            unroll!(m in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if m < DG {
                    let top = ld_shared_v4(buffer + e_fragment_offset(dishes, lane, row0, 0, m as u32));
                    let bottom = ld_shared_v4(buffer + e_fragment_offset(dishes, lane, row0, 1, m as u32));
                    unroll!(step in [0, 1] {
                        let words = [top[2 * step], bottom[2 * step], top[2 * step + 1], bottom[2 * step + 1]];
                        let w_re = [weights_re[m][2 * step], weights_re[m][2 * step + 1]];
                        let w_im = [weights_im[m][2 * step], weights_im[m][2 * step + 1]];
                        let v = words.map(real_offset_operand);
                        q1 = mma_m16n8k32_s8(v, w_re, q1);
                        q2 = mma_m16n8k32_s8(v, w_im, q2);
                        let h = words.map(imaginary_operand);
                        q3 = mma_m16n8k32_s8(h, w_re, q3);
                        q4 = mma_m16n8k32_s8(h, w_im, q4);
                    });
                }
            });
            let mut word = 0u32;
            unroll!(e in [0, 1] {
                let entry = ld_shared_v4(table + (2 * (lane % 4) + e as u32) * BEAM_TABLE_BYTES);
                let (constants, shift) = ((entry[0] as i32, entry[1] as i32), entry[2]);
                unroll!(h in [0, 1] {
                    let r = 2 * h + e;
                    let (re, im) = combine(q1[r], q2[r], q3[r], q4[r], constants);
                    let byte = pack_ci4(quantize(re, shift) as i8, quantize(im, shift) as i8);
                    word |= (byte as u32) << (8 * output_byte(h as u32, e as u32));
                });
            });
            let block_in_chunk = (k % stages_per_item) * blocks_per_stage + block;
            st_shared_u32(staging + 4 * (32 * block_in_chunk + lane), word);
        }

        if k % stages_per_item == stages_per_item - 1 {
            // This lane's words only: no barrier needed.
            let mut out = [0u32; 8];
            unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7] {
                out[r] = ld_shared_u32(staging + 4 * (32 * r as u32 + lane));
            });
            // Registers r0 r1 r2 (tau4 tau5 tau6) trade with lane bits t2 t3 t4 (tau0 tau1 tau2).
            unroll!(i in [0, 1, 2] {
                let bit = 1usize << i;
                unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if r & bit == 0 {
                        let (low, high) = out.split_at_mut(r + bit);
                        warp_transpose(&mut low[r], &mut high[0], output_transpose_lane_bit(i as u32));
                    }
                });
            });
            let runs = transpose_output(out, |x, y, s| prmt(x, y, s));
            let chunk = item % chunks;
            let tau = chunk * CHUNK + 16 * (lane / 4);
            unroll!(e in [0, 1] {
                let beam = BEAMS_PER_WARP * warp + 2 * (lane % 4) + e as u32;
                let at = (beam as u64 * fps as u64 + fp as u64) * times as u64 + tau as u64;
                st_global_v4(j.add(at as usize) as *mut u32, [runs[4 * e], runs[4 * e + 1], runs[4 * e + 2], runs[4 * e + 3]]);
            });
        }
    }
    // No copy may be in flight when the block exits.
    cp_async_wait_all();
}

/// The entry points, one per instance of `bb_instances!`: the body for the instance's dish
/// groups.
macro_rules! bb_entries {
    ($(($name:ident, $dishes:literal, $warps:literal)),* $(,)?) => {
        $(
            /// See the module documentation. Block i of the grid computes work items
            /// `block_items(fps * times / CHUNK, i, grid)` for the block's `blockDim.x / 4`
            /// beams; dynamic shared memory `smem_bytes(dishes, blockDim.x / 4, stage_rows)`,
            /// `stage_rows` from [`stage_rows`];
            /// `fps = F * POLS`. `a`, `shifts` and `j` point at the launch's first beam of
            /// layouts with `beam_stride` beams (all B, or a part: [`launch_split`]).
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(
                e: *const u8,
                a: *const u8,
                shifts: *const i32,
                j: *mut u8,
                beam_stride: u32,
                fps: u32,
                times: u32,
                stage_rows: u32,
            ) {
                beamform::<{ $dishes / DISH_GROUP as usize }>(e, a, shifts, j, beam_stride, fps, times, stage_rows);
            }
        )*
    };
}

bb_instances!(bb_entries);
