//! FRB beamformer, NUFFT resampling path (issue 8, "Going further"; seed 000 secs. 2.2-2.3
//! and 5, eqs. 7 and 137): J at arbitrary beams as a type-2 non-uniform FFT of the degree
//! (M, N) trigonometric polynomial that eq. 7 makes of J. Math, error bound and the f64 CPU
//! path: `radio_kernels_host::frb_beamformer::nufft`.
//!
//! One fused kernel (`frb_nufft_resample`), f32 arithmetic on the CUDA cores, fixed kernel
//! shape sigma = 2 (fine grid `4M x 4N`) and width [`WIDTH`] = 6. A block owns one channel
//! and [`TBAR_PER_BLOCK`] slow samples, in passes of [`GRIDS`]; per pass:
//!
//! 1. for each of the pass's tbar: I (f16, `[f][tbar][p][q]`) into shared memory as f32
//!    `IT[q][p]`; `V = I B^T` (`V[p][l'] = sum_q I[p][q] B[l'][q]`, 2M x 4N); the fine grid
//!    `g = A V` (4M x 4N) into grid slot k. A (4M x 2M) and B (4N x 2N) are the real matrices
//!    that fold "DFT of I, deapodise, zero-pad, inverse DFT" of one axis into one product
//!    (the host computes them from its plan; stored transposed, `AT[p][l]`, `BT[q][l']`,
//!    copied once per block). Each thread computes 4 rows of one column per unit, reading
//!    4 rows of `IT`/`AT` with one 16-byte load (a warp broadcast) and one column value;
//! 2. every beam of the channel (thread `t`: beams `t, t + 256, ...`): its two tap origins
//!    and 12 weights (`[f][beta]` u32 `x0 | y0 << 16`, `[f][beta][12]` f32 `wx[6] wy[6]`,
//!    from the host) once per pass, then for each of the pass's tbar
//!    `J = sum_i wx_i sum_j wy_j g[(x0 + i) mod 4M][(y0 + j) mod 4N]`, rounded to f16 into
//!    `J[f][tbar][beta]`.
//!
//! Shared memory ([`smem_layout`]): the GRIDS fine grids, V, IT, AT, BT, all f32.

/// Interpolation kernel width (fine cells) of the device path.
pub const WIDTH: u32 = 6;
/// Threads per block.
pub const THREADS: u32 = 256;
/// Fine grids held at once: the tbar one load of a beam's taps serves.
pub const GRIDS: u32 = 4;
/// Slow samples per block (passes of GRIDS): A and B are copied once per block.
pub const TBAR_PER_BLOCK: u32 = 16;
/// f32 weights per beam: wx[6] then wy[6].
pub const WEIGHTS_PER_BEAM: u32 = 2 * WIDTH;

/// Byte offsets of the shared regions and the total (all 16-byte aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemLayout {
    pub grids: u32,
    pub v: u32,
    pub it: u32,
    pub at: u32,
    pub bt: u32,
    pub total: u32,
}

/// Fine-grid cells of one (f, tbar): `4M x 4N`.
pub const fn grid_cells(m: u32, n: u32) -> u32 {
    16 * m * n
}

/// The shared-memory layout for (M, N).
pub const fn smem_layout(m: u32, n: u32) -> SmemLayout {
    let grids = 0;
    let v = grids + 4 * GRIDS * grid_cells(m, n);
    let it = v + 4 * (2 * m) * (4 * n);
    let at = it + 4 * (2 * n) * (2 * m);
    let bt = at + 4 * (2 * m) * (4 * m);
    let total = bt + 4 * (2 * n) * (4 * n);
    SmemLayout { grids, v, it, at, bt, total }
}

/// Work units of the V step (4 rows p of one column l'): `(2M / 4) 4N`.
pub const fn v_units(m: u32, n: u32) -> u32 {
    (2 * m / 4) * (4 * n)
}

/// Work units of the grid step (4 rows l of one column l'): `(4M / 4) 4N`.
pub const fn g_units(m: u32, n: u32) -> u32 {
    m * (4 * n)
}

/// Unit `u` of either step as (first row / 4, column): columns fastest, so a warp's lanes read
/// consecutive words of `BT` / `V` and share (broadcast) the 4-row load of `IT` / `AT`.
pub const fn unit_coordinates(u: u32, n: u32) -> (u32, u32) {
    (u / (4 * n), u % (4 * n))
}

/// A beam's tap origins packed as the kernel reads them.
pub const fn pack_origin(x0: u32, y0: u32) -> u32 {
    x0 | (y0 << 16)
}

/// Inverse of [`pack_origin`].
pub const fn unpack_origin(packed: u32) -> (u32, u32) {
    (packed & 0xffff, packed >> 16)
}

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device {
    use super::*;
    use crate::intrinsics::*;

    #[inline(always)]
    unsafe fn ld_f32x4(address: u32) -> [f32; 4] {
        let v = ld_shared_v4(address);
        [f32::from_bits(v[0]), f32::from_bits(v[1]), f32::from_bits(v[2]), f32::from_bits(v[3])]
    }

    #[inline(always)]
    unsafe fn ld_f32(address: u32) -> f32 {
        f32::from_bits(ld_shared_u32(address))
    }

    #[inline(always)]
    unsafe fn st_f32(address: u32, value: f32) {
        st_shared_u32(address, value.to_bits())
    }

    /// `C[4 r + i][l] = sum_{k < len} A^T[k][4 r + i] B[k][l]` for the `units` units `(r, l)`
    /// of [`unit_coordinates`] this thread owns (`tid`, `tid + THREADS`, ...): `A^T` f32 rows
    /// of `a_stride` words (4 rows of C in one 16-byte load, a warp broadcast), B and C f32
    /// rows of 4N words. Both steps of the fine grid: `V = I B^T` and `g = A V`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn four_row_products(
        units: u32,
        len: u32,
        at: u32,
        a_stride: u32,
        b: u32,
        c: u32,
        n: u32,
        tid: u32,
    ) {
        let ln = 4 * n;
        let mut u = tid;
        while u < units {
            let (rg, l) = unit_coordinates(u, n);
            let mut acc = [0.0f32; 4];
            let mut k = 0;
            while k < len {
                let a = ld_f32x4(at + 4 * (k * a_stride + 4 * rg));
                let v = ld_f32(b + 4 * (k * ln + l));
                unroll!(r in [0, 1, 2, 3] {
                    acc[r] = fma_rn_f32(a[r], v, acc[r]);
                });
                k += 1;
            }
            unroll!(r in [0, 1, 2, 3] {
                st_f32(c + 4 * ((4 * rg + r as u32) * ln + l), acc[r]);
            });
            u += THREADS;
        }
    }

    /// See the module comment. `intensity` f16 `[f][tbar][2M][2N]`, `at` f32 `[2M][4M]`, `bt`
    /// f32 `[2N][4N]`, `origins` u32 `[f][beta]`, `weights` f32 `[f][beta][12]`, `out` f16
    /// `[f][tbar][beta]`. Grid: (tbar blocks, channels); THREADS threads; `smem_layout(m, n)
    /// .total` bytes of dynamic shared memory.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_nufft_resample(
        intensity: *const u16,
        at: *const f32,
        bt: *const f32,
        origins: *const u32,
        weights: *const f32,
        out: *mut u16,
        times: u32,
        beams: u32,
        m: u32,
        n: u32,
    ) {
        let smem = dynamic_shared();
        let layout = smem_layout(m, n);
        let tid = thread_idx_x();
        let channel = block_idx_y();
        let (m2, n2, lm, ln) = (2 * m, 2 * n, 4 * m, 4 * n);
        let cells = grid_cells(m, n);
        let mut i = tid;
        while i < m2 * lm {
            st_f32(smem + layout.at + 4 * i, *at.add(i as usize));
            i += THREADS;
        }
        let mut i = tid;
        while i < n2 * ln {
            st_f32(smem + layout.bt + 4 * i, *bt.add(i as usize));
            i += THREADS;
        }
        let k = m2 * n2;
        let t_first = TBAR_PER_BLOCK * block_idx_x();
        let t_end = if t_first + TBAR_PER_BLOCK < times { t_first + TBAR_PER_BLOCK } else { times };
        let channel_beams = channel as usize * beams as usize;
        let mut t0 = t_first;
        while t0 < t_end {
            let mut slot = 0;
            while slot < GRIDS && t0 + slot < t_end {
                // I of (channel, t0 + slot), transposed to IT[q][p].
                let row =
                    intensity.add((channel as usize * times as usize + (t0 + slot) as usize) * k as usize);
                let mut i = tid;
                while i < k {
                    let (v, _) = f16x2_to_f32x2(*row.add(i as usize) as u32);
                    st_f32(smem + layout.it + 4 * ((i % n2) * m2 + i / n2), v);
                    i += THREADS;
                }
                sync_threads();
                // V = I B^T: 4 rows p of column l' per unit.
                four_row_products(
                    v_units(m, n),
                    n2,
                    smem + layout.it,
                    m2,
                    smem + layout.bt,
                    smem + layout.v,
                    n,
                    tid,
                );
                sync_threads();
                // g = A V into grid slot `slot`: 4 rows l of column l' per unit.
                let grid = smem + layout.grids + 4 * slot * cells;
                four_row_products(g_units(m, n), m2, smem + layout.at, lm, smem + layout.v, grid, n, tid);
                // V and IT are rewritten by the next slot; the grids are read below.
                sync_threads();
                slot += 1;
            }
            let slots = slot;
            // Interpolation: every beam of the channel at the pass's tbar.
            let mut beta = tid;
            while beta < beams {
                let at_beam = channel_beams + beta as usize;
                let (x0, y0) = unpack_origin(*origins.add(at_beam));
                let wp = weights.add(at_beam * WEIGHTS_PER_BEAM as usize) as *const u32;
                let w0 = ld_global_nc_v4(wp);
                let w1 = ld_global_nc_v4(wp.add(4));
                let w2 = ld_global_nc_v4(wp.add(8));
                let w = [w0[0], w0[1], w0[2], w0[3], w1[0], w1[1], w1[2], w1[3], w2[0], w2[1], w2[2], w2[3]]
                    .map(f32::from_bits);
                // Byte offsets of the 6 rows and 6 columns, wrapped once per beam.
                let mut rows = [0u32; 6];
                let mut cols = [0u32; 6];
                unroll!(i in [0, 1, 2, 3, 4, 5] {
                    let x = x0 + i as u32;
                    rows[i] = 4 * ln * if x >= lm { x - lm } else { x };
                    let y = y0 + i as u32;
                    cols[i] = 4 * if y >= ln { y - ln } else { y };
                });
                let mut s = 0;
                while s < slots {
                    let grid = smem + layout.grids + 4 * s * cells;
                    let mut j = 0.0f32;
                    unroll!(i in [0, 1, 2, 3, 4, 5] {
                        let mut r = 0.0f32;
                        unroll!(c in [0, 1, 2, 3, 4, 5] {
                            r = fma_rn_f32(w[6 + c], ld_f32(grid + rows[i] + cols[c]), r);
                        });
                        j = fma_rn_f32(w[i], r, j);
                    });
                    let h = f32x2_to_f16x2(j, 0.0) as u16;
                    let t = t0 + s;
                    *out.add(
                        (channel as usize * times as usize + t as usize) * beams as usize + beta as usize,
                    ) = h;
                    s += 1;
                }
                beta += THREADS;
            }
            // The next pass rewrites the grids.
            sync_threads();
            t0 += GRIDS;
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::frb_beamformer::FRB_CASES;

    #[test]
    fn shared_memory_fits_and_is_aligned_for_every_case() {
        for c in FRB_CASES {
            let l = smem_layout(c.m, c.n);
            assert!(l.total <= 227 * 1024, "({}, {}): {} bytes", c.m, c.n, l.total);
            for offset in [l.grids, l.v, l.it, l.at, l.bt, l.total] {
                assert_eq!(offset % 16, 0, "({}, {})", c.m, c.n);
            }
            // The 16-byte loads of IT and AT: row strides (2M, 4M floats) and the 4-row groups.
            assert_eq!((2 * c.m) % 4, 0);
            assert!(l.it + 4 * (2 * c.n) * (2 * c.m) <= l.at);
        }
        assert_eq!(smem_layout(24, 24).total, 4 * (4 * 9216 + 48 * 96 + 48 * 48 + 48 * 96 + 48 * 96));
    }

    #[test]
    fn units_cover_each_output_once() {
        for c in FRB_CASES {
            let (m, n) = (c.m, c.n);
            let mut v = std::vec![0u8; (2 * m * 4 * n) as usize];
            for u in 0..v_units(m, n) {
                let (pg, l) = unit_coordinates(u, n);
                for r in 0..4 {
                    v[((4 * pg + r) * 4 * n + l) as usize] += 1;
                }
            }
            assert!(v.iter().all(|&x| x == 1));
            let mut g = std::vec![0u8; grid_cells(m, n) as usize];
            for u in 0..g_units(m, n) {
                let (lg, l) = unit_coordinates(u, n);
                for r in 0..4 {
                    g[((4 * lg + r) * 4 * n + l) as usize] += 1;
                }
            }
            assert!(g.iter().all(|&x| x == 1));
        }
    }

    #[test]
    fn origins_round_trip() {
        for (x, y) in [(0, 0), (95, 95), (63, 79), (1, 2)] {
            assert_eq!(unpack_origin(pack_origin(x, y)), (x, y));
        }
    }
}
