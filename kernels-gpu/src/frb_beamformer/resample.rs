//! FRB beamformer, second kernel (seed 000 secs. 2.2-2.3 and 5.2, issue 8): exact resampling of
//! the half-integer intensity `I[f][tbar][p][q]` of the first kernel to arbitrary beams,
//! `J[f][tbar][beta] = sum_{p < 2M} sum_{q < 2N} U^M_p(theta[f][beta]) U^N_q(theta'[f][beta]) I[f][tbar][p][q]`
//! (eq. 137), with the stable form of eq. 7,
//! `U^N_q(theta) = (1/N) sum_{s=0}^{N} A_s cos(pi (2 theta - q) s / N)`, `A_0 = A_N = 1/2`, else 1.
//!
//! Non-factorizable beams (sec. 5.2) as one GEMM per channel, `J = I W` with
//! `W[rho][beta] = U^M_p(theta) U^N_q(theta')` and `rho = 2N p + q` (eq. 138-140).
//! Layouts (f16 as raw `u16` bits): I `[f][tbar][rho]` (the first kernel's `[f][tbar][p][q]`),
//! W `[f][beta][rho]` (a beam's weights contiguous: the m16n8k16 B operand in column-major
//! form, so `ldmatrix` without `.trans` yields B fragments), J `[f][tbar][beta]`; beam
//! positions theta, theta' f32 `[f][beta]` in the seed's grid units (eq. 1).
//!
//! GEMM ([`GEMM_TILE`]): a block computes a 128 (tbar) x 128 (beam) tile of one channel with 8
//! warps of 64 x 32, over k-steps of [`K_STEP`] staged through a `cp.async` double buffer
//! (rows padded to [`SMEM_PITCH`] bytes, conflict-free for `ldmatrix`), m16n8k16 f16 MMAs
//! with f32 accumulation, J rounded once to f16. `K = 4MN` is a multiple of 32 for every
//! seed Table 2 case; ragged tbar and beam edges are zero-filled and not stored.
//! The W kernel ([`weights_kernel`]): one warp per (f, beta), U in f32 from eq. 7.

/// Rows (tbar) and columns (beams) of a GEMM block tile.
pub const GEMM_TILE: u32 = 128;
/// k (rho) per shared-memory stage.
pub const K_STEP: u32 = 32;
/// Bytes from one shared-memory row (32 halves) to the next: 64 + 16 of padding, so the 8
/// rows an `ldmatrix` phase reads fall in 8 distinct 16-byte bank groups.
pub const SMEM_PITCH: u32 = 80;
/// Bytes of one operand tile of one stage.
pub const SMEM_TILE_BYTES: u32 = GEMM_TILE * SMEM_PITCH;
/// Dynamic shared memory of the GEMM: A and B tiles, double-buffered.
pub const GEMM_SMEM_BYTES: u32 = 4 * SMEM_TILE_BYTES;
/// GEMM threads: 8 warps, 2 (rows) x 4 (columns).
pub const GEMM_THREADS: u32 = 256;
/// Warps (beams) per block of the W kernel.
pub const WEIGHT_WARPS: u32 = 4;
/// Largest 2M or 2N of the seed's cases (Table 2: M, N <= 24).
pub const MAX_HALF_GRID: u32 = 48;

/// `U^N_q(theta)` of eq. 7 in f32 (the device's weights). Stable for every theta.
#[inline(always)]
pub fn u_function(n: u32, q: u32, theta: f32) -> f32 {
    let x = 2.0 * theta - q as f32;
    let step = x / n as f32;
    let mut sum = 0.5 * (1.0 + crate::delay_beamformer::sincospi(step * n as f32).1);
    let mut s = 1;
    while s < n {
        sum += crate::delay_beamformer::sincospi(step * s as f32).1;
        s += 1;
    }
    sum / n as f32
}

/// Shared-memory byte offset, within an operand tile, of lane `lane`'s `ldmatrix.x4` row for
/// the 16 x 16 block at (`row0`, `k0`): lanes 0-15 rows `row0 ..+16` at `k0`, lanes 16-31
/// the same rows at `k0 + 8` (A: registers a0..a3 of m16n8k16). For B stored `[beam][k]`
/// the kernel passes `row0` = a pair of n-tiles and permutes lanes with [`b_ldmatrix_row`].
pub const fn a_ldmatrix_offset(lane: u32, row0: u32, k0: u32) -> u32 {
    (row0 + lane % 16) * SMEM_PITCH + 2 * (k0 + 8 * (lane / 16))
}

/// Shared-memory byte offset of lane `lane`'s `ldmatrix.x4` row for two n-tiles of B
/// (`[beam][k]` rows) at beams `n0 .. n0 + 16`, k `k0 .. k0 + 16`: lanes 0-7 beams `n0 ..+8`
/// at k0, 8-15 the same at k0 + 8, 16-23 beams `n0 + 8 ..` at k0, 24-31 at k0 + 8, so the
/// registers are b0, b1 of the first n-tile, then b0, b1 of the second.
pub const fn b_ldmatrix_offset(lane: u32, n0: u32, k0: u32) -> u32 {
    (n0 + lane % 8 + 8 * (lane / 16)) * SMEM_PITCH + 2 * (k0 + 8 * ((lane / 8) % 2))
}

/// The 16-byte chunk that copy `m` (0 or 1) of thread `thread` moves into an operand tile:
/// (row, chunk within the row's 64 bytes).
pub const fn copy_chunk(thread: u32, m: u32) -> (u32, u32) {
    let i = thread + GEMM_THREADS * m;
    (i / 4, i % 4)
}

#[cfg(target_arch = "nvptx64")]
pub use device::*;

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::*;
    use crate::intrinsics::*;
    use crate::mma::mma_m16n8k16_f16_f32;

    /// Copies the stage of k-step `k0` of one operand (rows `row0 ..+128` of a `[rows][k]`
    /// f16 matrix with `rows` rows) into `buffer`; rows past the end are zero-filled.
    #[inline(always)]
    unsafe fn copy_tile(src: *const u16, rows: u32, k: u32, row0: u32, k0: u32, buffer: u32) {
        unroll!(m in [0, 1] {
            let (r, c) = copy_chunk(thread_idx_x(), m as u32);
            let inside = row0 + r < rows;
            let at = if inside { (row0 + r) as u64 * k as u64 + (k0 + 8 * c) as u64 } else { 0 };
            cp_async_16(buffer + r * SMEM_PITCH + 16 * c, src.add(at as usize) as *const u8, if inside { 16 } else { 0 });
        });
    }

    /// `J = I W` for channel `blockIdx.z`; see the module comment. Grid: x = beam tiles,
    /// y = tbar tiles, z = channels; [`GEMM_THREADS`] threads, [`GEMM_SMEM_BYTES`] of dynamic
    /// shared memory. `k` = 4MN, a multiple of [`K_STEP`].
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_gemm(
        intensity: *const u16,
        weights: *const u16,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        let channel = block_idx_z();
        let (row0, col0) = (GEMM_TILE * block_idx_y(), GEMM_TILE * block_idx_x());
        let a = intensity.add(channel as usize * times as usize * k as usize);
        let b = weights.add(channel as usize * beams as usize * k as usize);
        let smem = dynamic_shared();
        let tile = |stage: u32, operand: u32| smem + (2 * stage + operand) * SMEM_TILE_BYTES;
        let (warp, lane) = (warp_id(), lane_id());
        let (warp_row, warp_col) = (64 * (warp / 4), 32 * (warp % 4));

        let mut acc = [[[0.0f32; 4]; 4]; 4];
        let steps = k / K_STEP;
        copy_tile(a, times, k, row0, 0, tile(0, 0));
        copy_tile(b, beams, k, col0, 0, tile(0, 1));
        cp_async_commit();
        let mut step = 0;
        while step < steps {
            let stage = step & 1;
            if step + 1 < steps {
                // The other stage was last read before the previous iteration's barrier.
                copy_tile(a, times, k, row0, K_STEP * (step + 1), tile(stage ^ 1, 0));
                copy_tile(b, beams, k, col0, K_STEP * (step + 1), tile(stage ^ 1, 1));
            }
            cp_async_commit();
            cp_async_wait_group::<1>();
            sync_threads();
            unroll!(ks in [0, 1] {
                let k0 = 16 * ks as u32;
                let mut fa = [[0u32; 4]; 4];
                unroll!(mt in [0, 1, 2, 3] {
                    fa[mt] = ldmatrix_x4(tile(stage, 0) + a_ldmatrix_offset(lane, warp_row + 16 * mt as u32, k0));
                });
                let mut fb = [[0u32; 2]; 4];
                unroll!(pair in [0, 1] {
                    let r = ldmatrix_x4(tile(stage, 1) + b_ldmatrix_offset(lane, warp_col + 16 * pair as u32, k0));
                    fb[2 * pair] = [r[0], r[1]];
                    fb[2 * pair + 1] = [r[2], r[3]];
                });
                unroll!(mt in [0, 1, 2, 3] {
                    unroll!(nt in [0, 1, 2, 3] {
                        acc[mt][nt] = mma_m16n8k16_f16_f32(fa[mt], fb[nt], acc[mt][nt]);
                    });
                });
            });
            sync_threads();
            step += 1;
        }
        cp_async_wait_all();

        // C fragment: c0 c1 = (row g, columns 2c, 2c + 1), c2 c3 = row g + 8.
        let (g, c) = (lane / 4, lane % 4);
        let j = out.add(channel as usize * times as usize * beams as usize);
        unroll!(mt in [0, 1, 2, 3] {
            unroll!(nt in [0, 1, 2, 3] {
                unroll!(h in [0, 1] {
                    let row = row0 + warp_row + 16 * mt as u32 + g + 8 * h as u32;
                    let col = col0 + warp_col + 8 * nt as u32 + 2 * c;
                    if row < times && col < beams {
                        let pair = f32x2_to_f16x2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
                        let at = row as usize * beams as usize + col as usize;
                        if beams % 2 == 0 {
                            *(j.add(at) as *mut u32) = pair;
                        } else {
                            *j.add(at) = pair as u16;
                            if col + 1 < beams {
                                *j.add(at + 1) = (pair >> 16) as u16;
                            }
                        }
                    }
                });
            });
        });
    }

    /// W for one beam per warp: `W[f][beta][2N p + q] = U^M_p(theta) U^N_q(theta')` as f16.
    /// Grid: x = beam groups of [`WEIGHT_WARPS`], y = channels; 32 [`WEIGHT_WARPS`] threads.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_weights(
        theta: *const f32,
        theta_prime: *const f32,
        weights: *mut u16,
        beams: u32,
        m: u32,
        n: u32,
    ) {
        let (warp, lane) = (warp_id(), lane_id());
        let beam = WEIGHT_WARPS * block_idx_x() + warp;
        let channel = block_idx_y();
        if beam >= beams {
            return;
        }
        let at = (channel * beams + beam) as usize;
        let (t, t_prime) = (*theta.add(at), *theta_prime.add(at));
        // U values held in registers, two per lane along each axis (2M, 2N <= 64).
        let up = [lane, lane + 32].map(|p| if p < 2 * m { u_function(m, p, t) } else { 0.0 });
        let uq = [lane, lane + 32].map(|q| if q < 2 * n { u_function(n, q, t_prime) } else { 0.0 });
        let k = 4 * m * n;
        let w = weights.add(at * k as usize);
        // Lane l writes rho = 2 (32 i + l), 2 (32 i + l) + 1: 128 consecutive bytes per warp.
        let mut pair = lane;
        while 2 * pair < k {
            let rho = 2 * pair;
            let (p, q) = (rho / (2 * n), rho % (2 * n)); // q even, q + 1 < 2N
            let from = |v: [f32; 2], i: u32| {
                let x = shfl_idx(v[0].to_bits(), i % 32);
                let y = shfl_idx(v[1].to_bits(), i % 32);
                f32::from_bits(if i < 32 { x } else { y })
            };
            let u = from(up, p);
            let value = f32x2_to_f16x2(u * from(uq, q), u * from(uq, q + 1));
            *(w.add(rho as usize) as *mut u32) = value;
            pair += 32;
        }
    }
}
