//! FRB beamformer, second kernel, factorizable beams (sec. 5.3 of
//! Smith, CHORD FRB beamformer design note (2022)): the
//! beams of channel f are the grid `theta[f][gamma] x theta'[f][gamma']` (G x G' beams,
//! `beta = gamma G' + gamma'`), so eq. 137 factors into
//! `V[tbar][gamma][q] = sum_p U^M_p(theta_gamma) I[tbar][p][q]` (eq. 143) and
//! `J[tbar][gamma][gamma'] = sum_q V[tbar][gamma][q] U^N_q(theta'_gamma')` (eq. 144).
//!
//! One fused kernel per (M, N) (`frb_factorized_M_N`): a block owns one channel and
//! [`BLOCK_TIMES`] slow samples, copies the channel's U matrices into shared memory once and
//! streams I through a double-buffered `cp.async` ring of [`GROUP_TIMES`] samples. A warp item
//! is (sample, 16-row strip of gamma): eq. 143 as m16n8k16 MMAs (A = U^M strip via `ldmatrix`,
//! B = I via `ldmatrix.trans`, f32 accumulators); the accumulators of two adjacent q n-tiles
//! ARE the A fragment of one k16 step of eq. 144 (C rows g, g + 8, columns 2c, 2c + 1), so V
//! goes to f16 in registers and never touches shared or global memory; eq. 144 against U^N
//! from shared memory, J rounded once to f16 and stored from the fragments.
//!
//! Layouts (f16 as raw `u16` bits): I `[f][tbar][p][q]` (the first kernel's), J
//! `[f][tbar][gamma][gamma']` (= `[f][tbar][beta]`); U^M `[f][gamma < Gp][p < 2M]` and U^N
//! `[f][gamma' < Gp'][q < KN]`, with `Gp`, `Gp'` = G, G' rounded up to 16 and KN = 2N rounded
//! up to 16, zero-padded (built on the host in f64). Shared memory: rows padded to an odd
//! number of 16-byte chunks ([`padded_stride`]), so the 8 rows of each `ldmatrix` phase hit 8
//! distinct chunks of the 128-byte bank line. Every Table 2 case has 2M a multiple of 16 (no
//! k edge in eq. 143) and 2N a multiple of 8 (whole q n-tiles; an odd last one via
//! `ldmatrix.x2.trans`, its k16 partner in eq. 144 zero).

/// Warps per block.
pub const FACTOR_WARPS: u32 = 8;
/// Threads per block.
pub const FACTOR_THREADS: u32 = 32 * FACTOR_WARPS;
/// Slow samples per shared-memory buffer of I.
pub const GROUP_TIMES: u32 = 4;
/// Slow samples per block.
pub const BLOCK_TIMES: u32 = 32;
/// Largest G or G' the kernel accepts (shared memory stays below 72 KiB).
pub const MAX_GRID_AXIS: u32 = 128;

/// Bytes of a shared-memory row holding `chunks` 16-byte chunks: an odd number of chunks, so
/// 8 consecutive rows at one chunk column fall on 8 distinct chunks of a 128-byte line.
pub const fn padded_stride(chunks: u32) -> u32 {
    16 * (chunks | 1)
}

/// `x` rounded up to a multiple of 16: the padded beam and k extents (`Gp`, `Gp'`, KN) that
/// make whole m16 strips and k16 steps.
pub const fn round16(x: u32) -> u32 {
    x.div_ceil(16) * 16
}

/// Sizes and shared-memory layout of one factorized job (per channel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactorLayout {
    /// Dish-grid rows M: I has `p < 2M` rows per sample (the k of eq. 143).
    pub m: u32,
    /// Dish-grid columns N: I has `q < 2N` columns per row (the k of eq. 144).
    pub n: u32,
    /// G and G' (beam grid along theta and theta').
    pub g: u32,
    /// G', the beam count along theta' (the columns gamma' of J); see `g`.
    pub g_prime: u32,
}

impl FactorLayout {
    /// `Gp`: G rounded up to 16, the rows of U^M (whole 16-row strips of gamma; the padding
    /// rows are zero and their J rows are not stored).
    pub const fn gp(&self) -> u32 {
        round16(self.g)
    }
    /// `Gp'`: G' rounded up to 16, the rows of U^N (whole 16-row blocks of gamma').
    pub const fn gp_prime(&self) -> u32 {
        round16(self.g_prime)
    }
    /// Eq. 144's k, 2N rounded up to 16.
    pub const fn kn(&self) -> u32 {
        round16(2 * self.n)
    }
    /// Halves of U^M per channel in device memory.
    pub const fn um_len(&self) -> u32 {
        self.gp() * 2 * self.m
    }
    /// Halves of U^N per channel in device memory.
    pub const fn un_len(&self) -> u32 {
        self.gp_prime() * self.kn()
    }
    /// Bytes of one U^M row (fixed gamma, `2M` halves) in shared memory, padded to an odd
    /// number of 16-byte chunks ([`padded_stride`]).
    pub const fn um_stride(&self) -> u32 {
        padded_stride(2 * self.m / 8)
    }
    /// Bytes of one U^N row (fixed gamma', KN halves) in shared memory, padded to an odd
    /// number of 16-byte chunks ([`padded_stride`]).
    pub const fn un_stride(&self) -> u32 {
        padded_stride(self.kn() / 8)
    }
    /// Bytes of one row (fixed p) of I in shared memory.
    pub const fn i_stride(&self) -> u32 {
        padded_stride(2 * self.n / 8)
    }
    /// Shared-memory bytes of the channel's U^M: `Gp` rows of [`FactorLayout::um_stride`].
    pub const fn um_bytes(&self) -> u32 {
        self.gp() * self.um_stride()
    }
    /// Shared-memory bytes of the channel's U^N: `Gp'` rows of [`FactorLayout::un_stride`].
    pub const fn un_bytes(&self) -> u32 {
        self.gp_prime() * self.un_stride()
    }
    /// Shared-memory bytes of one I buffer: [`GROUP_TIMES`] samples of `2M` rows of
    /// [`FactorLayout::i_stride`] (the ring holds two).
    pub const fn i_buffer_bytes(&self) -> u32 {
        GROUP_TIMES * 2 * self.m * self.i_stride()
    }
    /// Dynamic shared memory: U^M, U^N, then two I buffers.
    pub const fn smem_bytes(&self) -> u32 {
        self.um_bytes() + self.un_bytes() + 2 * self.i_buffer_bytes()
    }
}

/// Offset (from a strip's first row) of lane `lane`'s `ldmatrix.x4` row for the eq. 143 A
/// fragment (U^M rows gamma, k = p) of k-step `kp`: matrices (rows 0-7, k 0-7), (8-15, 0-7),
/// (0-7, 8-15), (8-15, 8-15) = a0..a3.
pub const fn um_a_offset(lane: u32, kp: u32, stride: u32) -> u32 {
    (lane % 16) * stride + 16 * (2 * kp + lane / 16)
}

/// Offset (from a sample's first row) of lane `lane`'s `ldmatrix.x4.trans` row for the eq.
/// 143 B fragments (I rows p = k, columns q = n) of k-step `kp` and q n-tiles `2j`, `2j + 1`:
/// matrices (p 0-7, tile 2j), (p 8-15, tile 2j), (p 0-7, 2j + 1), (p 8-15, 2j + 1) = b0, b1
/// of tile 2j then of tile 2j + 1. For `.x2` (tile 2j alone) lanes 0-15 give the addresses.
pub const fn i_b_offset(lane: u32, kp: u32, j: u32, stride: u32) -> u32 {
    (16 * kp + lane % 16) * stride + 16 * (2 * j + lane / 16)
}

/// Offset (from a 16-row block of gamma') of lane `lane`'s `ldmatrix.x4` row for the eq. 144
/// B fragments (U^N rows gamma' = n, k = q) of k-step `kq`: b0, b1 of gamma' 0-7, then of 8-15.
pub const fn un_b_offset(lane: u32, kq: u32, stride: u32) -> u32 {
    (lane % 8 + 8 * (lane / 16)) * stride + 16 * (2 * kq + (lane / 8) % 2)
}

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub(crate) use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device {
    use super::*;
    use crate::intrinsics::*;
    use crate::mma::mma_m16n8k16_f16_f32;
    use core::arch::asm;

    /// `ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16`: lanes 0-15 address the rows of two
    /// 8x8 matrices; register i of lane l receives elements (2 (l % 4), l / 4) and
    /// (2 (l % 4) + 1, l / 4) of matrix i.
    #[inline(always)]
    unsafe fn ldmatrix_x2_trans(address: u32) -> [u32; 2] {
        let (x, y): (u32, u32);
        asm!("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{{0}, {1}}}, [{2}];",
            out(reg32) x, out(reg32) y, in(reg32) address, options(readonly, nostack));
        [x, y]
    }

    /// See the module comment. Grid: x = blocks of [`BLOCK_TIMES`] samples, y = channels;
    /// `32 FACTOR_WARPS` threads, `FactorLayout::smem_bytes` of dynamic shared memory.
    #[inline(always)]
    pub(crate) unsafe fn factorized<const M: u32, const N: u32>(
        intensity: *const u16,
        um: *const u16,
        un: *const u16,
        out: *mut u16,
        times: u32,
        g: u32,
        g_prime: u32,
    ) {
        let layout = FactorLayout { m: M, n: N, g, g_prime };
        let kp_steps = (2 * M / 16) as usize; // 1..=3
        let q_tiles = (2 * N / 8) as usize; // 2..=6
        let kq_steps = q_tiles.div_ceil(2); // 1..=3
        let (ums, uns, is) = (layout.um_stride(), layout.un_stride(), layout.i_stride());
        let channel = block_idx_y();
        let t_begin = BLOCK_TIMES * block_idx_x();
        let t_end = if times - t_begin < BLOCK_TIMES { times } else { t_begin + BLOCK_TIMES };
        let smem = dynamic_shared();
        let um_s = smem;
        let un_s = um_s + layout.um_bytes();
        let i_s = un_s + layout.un_bytes();
        let ibuf = layout.i_buffer_bytes();
        let (tid, warp, lane) = (thread_idx_x(), warp_id(), lane_id());
        let threads = 32 * FACTOR_WARPS;

        // The channel's U matrices (part of the first cp.async group).
        let um_g = um.add(channel as usize * layout.um_len() as usize) as *const u8;
        let cm = 2 * M / 8;
        let mut x = tid;
        while x < layout.gp() * cm {
            cp_async_16(um_s + (x / cm) * ums + 16 * (x % cm), um_g.add(16 * x as usize), 16);
            x += threads;
        }
        let un_g = un.add(channel as usize * layout.un_len() as usize) as *const u8;
        let cn = layout.kn() / 8;
        let mut x = tid;
        while x < layout.gp_prime() * cn {
            cp_async_16(un_s + (x / cn) * uns + 16 * (x % cn), un_g.add(16 * x as usize), 16);
            x += threads;
        }

        let ci = 2 * N / 8; // chunks per row of I
        let chunks_per_t = 2 * M * ci;
        let k = (4 * M * N) as usize;
        let copy_group = |t0: u32, buf: u32| {
            let base = i_s + buf * ibuf;
            let mut x = tid;
            while x < GROUP_TIMES * chunks_per_t {
                let (tl, rem) = (x / chunks_per_t, x % chunks_per_t);
                let (p, c) = (rem / ci, rem % ci);
                let t = t0 + tl;
                // Samples past the end are never read.
                if t < t_end {
                    let src =
                        intensity.add((channel * times + t) as usize * k + (p * 2 * N + 8 * c) as usize);
                    cp_async_16(base + (tl * 2 * M + p) * is + 16 * c, src as *const u8, 16);
                }
                x += threads;
            }
        };

        let strips = layout.gp() / 16;
        let pairs = layout.gp_prime() / 16;
        let groups = (t_end - t_begin).div_ceil(GROUP_TIMES);
        let (gq, cq) = (lane / 4, lane % 4);
        copy_group(t_begin, 0);
        cp_async_commit();
        let mut group = 0;
        while group < groups {
            if group + 1 < groups {
                copy_group(t_begin + (group + 1) * GROUP_TIMES, (group + 1) % 2);
            }
            cp_async_commit();
            // Group `group` (and the U matrices) landed; the next one may still be in flight.
            cp_async_wait_group::<1>();
            sync_threads();
            let buffer = i_s + (group % 2) * ibuf;
            let mut item = warp;
            while item < strips * GROUP_TIMES {
                let (tl, strip) = (item / strips, item % strips);
                let t = t_begin + group * GROUP_TIMES + tl;
                if t < t_end {
                    // Eq. 143 for gamma in 16 strip .. + 16, all q.
                    let tile = buffer + tl * 2 * M * is;
                    let mut fa = [[0u32; 4]; 3];
                    unroll!(kp in [0, 1, 2] {
                        if kp < kp_steps {
                            fa[kp] = ldmatrix_x4(um_s + 16 * strip * ums + um_a_offset(lane, kp as u32, ums));
                        }
                    });
                    let mut v = [[0.0f32; 4]; 6];
                    unroll!(j in [0, 1, 2] {
                        if 2 * j + 1 < q_tiles {
                            unroll!(kp in [0, 1, 2] {
                                if kp < kp_steps {
                                    let b = ldmatrix_x4_trans(tile + i_b_offset(lane, kp as u32, j as u32, is));
                                    v[2 * j] = mma_m16n8k16_f16_f32(fa[kp], [b[0], b[1]], v[2 * j]);
                                    v[2 * j + 1] = mma_m16n8k16_f16_f32(fa[kp], [b[2], b[3]], v[2 * j + 1]);
                                }
                            });
                        } else if 2 * j < q_tiles {
                            unroll!(kp in [0, 1, 2] {
                                if kp < kp_steps {
                                    let b = ldmatrix_x2_trans(tile + i_b_offset(lane % 16, kp as u32, j as u32, is));
                                    v[2 * j] = mma_m16n8k16_f16_f32(fa[kp], b, v[2 * j]);
                                }
                            });
                        }
                    });
                    // V (f32 C fragments of q tiles 2kq, 2kq + 1) -> eq. 144's f16 A fragments.
                    let mut va = [[0u32; 4]; 3];
                    unroll!(kq in [0, 1, 2] {
                        if kq < kq_steps {
                            let lo = v[2 * kq];
                            va[kq][0] = f32x2_to_f16x2(lo[0], lo[1]);
                            va[kq][1] = f32x2_to_f16x2(lo[2], lo[3]);
                            if 2 * kq + 1 < q_tiles {
                                let hi = v[2 * kq + 1];
                                va[kq][2] = f32x2_to_f16x2(hi[0], hi[1]);
                                va[kq][3] = f32x2_to_f16x2(hi[2], hi[3]);
                            }
                        }
                    });
                    // Eq. 144, 16 gamma' at a time, stored straight from the fragments.
                    let j_rows = out.add((channel * times + t) as usize * g as usize * g_prime as usize);
                    let mut pair = 0;
                    while pair < pairs {
                        let mut acc = [[0.0f32; 4]; 2];
                        unroll!(kq in [0, 1, 2] {
                            if kq < kq_steps {
                                let b = ldmatrix_x4(un_s + 16 * pair * uns + un_b_offset(lane, kq as u32, uns));
                                acc[0] = mma_m16n8k16_f16_f32(va[kq], [b[0], b[1]], acc[0]);
                                acc[1] = mma_m16n8k16_f16_f32(va[kq], [b[2], b[3]], acc[1]);
                            }
                        });
                        unroll!(i in [0, 1] {
                            unroll!(h in [0, 1] {
                                let gamma = 16 * strip + gq + 8 * h as u32;
                                let col = 16 * pair + 8 * i as u32 + 2 * cq;
                                if gamma < g && col < g_prime {
                                    let value = f32x2_to_f16x2(acc[i][2 * h], acc[i][2 * h + 1]);
                                    let at = gamma as usize * g_prime as usize + col as usize;
                                    if g_prime % 2 == 0 {
                                        *(j_rows.add(at) as *mut u32) = value;
                                    } else {
                                        *j_rows.add(at) = value as u16;
                                        if col + 1 < g_prime {
                                            *j_rows.add(at + 1) = (value >> 16) as u16;
                                        }
                                    }
                                }
                            });
                        });
                        pair += 1;
                    }
                }
                item += FACTOR_WARPS;
            }
            // Every warp is done with this buffer before the next iteration refills it.
            sync_threads();
            group += 1;
        }
        cp_async_wait_all();
    }
}

/// One instance of the factorized kernel: its spec ([`FACTOR_THREADS`] threads; the dynamic
/// shared memory is [`FactorLayout::smem_bytes`] of the job) and its grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactorizedKernel {
    /// The registry entry `frb_factorized_{M}_{N}`: [`FACTOR_THREADS`] threads, shared
    /// memory set per launch.
    pub spec: crate::modules::KernelSpec,
    /// Dish-grid rows M the kernel is compiled for.
    pub m: u32,
    /// Dish-grid columns N the kernel is compiled for.
    pub n: u32,
}

/// The kernel for grid (M, N), if it is a Table 2 case.
pub fn kernel(m: u32, n: u32) -> Option<&'static FactorizedKernel> {
    super::FACTORIZED_KERNELS.iter().find(|k| (k.m, k.n) == (m, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bank::is_conflict_free;
    use crate::frb_beamformer::FRB_CASES;

    fn layouts() -> impl Iterator<Item = FactorLayout> {
        FRB_CASES.iter().flat_map(|c| {
            [(4 * c.m, 4 * c.n), (1, 1), (2 * c.m, 2 * c.n), (MAX_GRID_AXIS, MAX_GRID_AXIS), (37, 21)]
                .map(|(g, g_prime)| FactorLayout { m: c.m, n: c.n, g, g_prime })
        })
    }

    #[test]
    fn every_case_has_a_kernel_and_fits_shared_memory() {
        for l in layouts() {
            assert!(kernel(l.m, l.n).is_some());
            assert!(l.smem_bytes() <= 72 * 1024, "{l:?}: {}", l.smem_bytes());
            // The k-step and n-tile shapes the kernel assumes.
            assert!((2 * l.m).is_multiple_of(16) && (2 * l.n).is_multiple_of(8) && 2 * l.n <= 48);
            for bytes in [l.um_bytes(), l.un_bytes(), l.i_buffer_bytes()] {
                assert!(bytes.is_multiple_of(16));
            }
            // Rows hold their data chunks (the I row also the unread pad chunk).
            assert!(l.um_stride() >= 4 * l.m && l.un_stride() >= 2 * l.kn() && l.i_stride() >= 4 * l.n);
        }
        assert_eq!(kernel(8, 10), None);
    }

    #[test]
    fn ldmatrix_reads_are_conflict_free_and_stay_in_their_rows() {
        for l in layouts() {
            for kp in 0..2 * l.m / 16 {
                let a: [u32; 32] = core::array::from_fn(|x| um_a_offset(x as u32, kp, l.um_stride()));
                assert!(is_conflict_free(&a, 16), "{l:?} U^M kp {kp}");
                for j in 0..(2 * l.n / 8).div_ceil(2) {
                    let b: [u32; 32] = core::array::from_fn(|x| i_b_offset(x as u32, kp, j, l.i_stride()));
                    assert!(is_conflict_free(&b, 16), "{l:?} I kp {kp} j {j}");
                    // Every chunk read lies in the sample's 2M rows, inside the data columns
                    // (lanes 16-31 of an `.x2` are not read).
                    let tiles = 2 * l.n / 8;
                    for (x, &at) in b.iter().enumerate() {
                        if 2 * j + 1 == tiles && x >= 16 {
                            continue;
                        }
                        let (row, chunk) = (at / l.i_stride(), at % l.i_stride() / 16);
                        assert!(row < 2 * l.m && chunk < tiles, "{l:?} lane {x}");
                    }
                }
            }
            for kq in 0..l.kn() / 16 {
                let b: [u32; 32] = core::array::from_fn(|x| un_b_offset(x as u32, kq, l.un_stride()));
                assert!(is_conflict_free(&b, 16), "{l:?} U^N kq {kq}");
            }
        }
    }

    /// The (row, k) each lane's address names is the m16n8k16 fragment's.
    #[test]
    fn ldmatrix_rows_are_the_fragment_rows() {
        let s = 48;
        for lane in 0..32 {
            let (i, r) = (lane / 8, lane % 8);
            for ks in 0..3 {
                // A: a0 (rows 0-7, k 0-7), a1 (8-15), a2 (0-7, k 8-15), a3 (8-15, k 8-15).
                assert_eq!(um_a_offset(lane, ks, s), (r + 8 * (i % 2)) * s + 16 * (2 * ks + i / 2));
                // I (k rows): b0 (k 0-7), b1 (k 8-15) of tile 2j, then of 2j + 1.
                for j in 0..3 {
                    assert_eq!(
                        i_b_offset(lane, ks, j, s),
                        (16 * ks + r + 8 * (i % 2)) * s + 16 * (2 * j + i / 2)
                    );
                }
                // U^N (n rows): b0, b1 of n 0-7, then of n 8-15.
                assert_eq!(un_b_offset(lane, ks, s), (r + 8 * (i / 2)) * s + 16 * (2 * ks + i % 2));
            }
        }
    }
}
