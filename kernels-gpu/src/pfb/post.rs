//! The post-processing kernel of the three-kernel path (sm_80 module): the body [`post`], its
//! loop over a thread's spectra ([`post_loop`]) and the first column tile's column 0
//! ([`post_column0`]). Layouts and the thread/tile decomposition: the module documentation of
//! [`super`].

use super::arith::c32::{ld_c32, ld_global_c32};
use super::*;
use crate::intrinsics::*;

/// [`ld_global_c32`] asking the L2 to fetch the whole 256-byte block from DRAM: the post
/// kernel's FFT reads (faster with the hint; streaming `.cs` stores of its output were not).
#[inline(always)]
unsafe fn load_c32_l2_256(ptr: *const [f32; 2]) -> [f32; 2] {
    let (x, y): (u32, u32);
    core::arch::asm!("ld.global.nc.L2::256B.v2.b32 {{{0}, {1}}}, [{2}];", out(reg32) x, out(reg32) y,
        in(reg64) ptr, options(readonly, nostack));
    [f32::from_bits(x), f32::from_bits(y)]
}

/// FIR body with `TV` compiled taps (the first `TV - taps` slots have zero weights),
/// The loop of [`post`] over its spectra for the columns of thread `u`
/// ([`post_thread_columns`]); returns the saturated counts.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn post_loop<const INT4: bool>(
    u: u32,
    fft: *const [f32; 2],
    gains_shared: u32,
    fine: *const f32,
    rotation: *const [f32; 4],
    scratch: u32,
    tid: u32,
    channels: u32,
    spectra: u32,
    s0: u32,
) -> u32 {
    const G: usize = SPECTRA_PER_POST_THREAD as usize;
    let a = channels / UNZIP;
    let w = a - u;
    let (tw, e) = column_twiddles(u, channels);
    let (twm, em) = column_twiddles(w, channels);
    let mut clipped = 0u32;
    let mut s = 0;
    while s < G {
        let m = s0 as usize + s;
        unroll!(p in [0, 1] {
            let base = fft.add((p * spectra as usize + m) * channels as usize);
            let mut y = [[0.0f32; 2]; 4];
            let mut ym = [[0.0f32; 2]; 4];
            unroll!(r in [0, 1, 2, 3] {
                y[r] = load_c32_l2_256(base.add(r * a as usize + u as usize));
                ym[r] = load_c32_l2_256(base.add(r * a as usize + w as usize));
            });
            // Twice the spectra, with the gains halved in shared memory (both exact). No
            // thread has u = 0: the constant 1 leaves the fix-up without its selects.
            let (x, xm) = fixup_pair(1, unzip_column(y, &tw), unzip_column(ym, &twm), e, em, r2c_fixup_pair_x2);
            let at = p * spectra as usize + m;
            let [fr, fi, sr, si] = *rotation.add(at);
            let (rot, rotm) = post_rotations(u, channels, *fine.add(at), [fr, fi], [sr, si]);
            let shift = if INT4 { 8 * p as u32 } else { 16 * p as u32 };
            unroll!(v in [0, 1, 2, 3] {
                let at = |side: usize| gains_shared + 8 * 16 * (((p * 4 + v) * 2 + side) as u32);
                let (g, gm) = (ld_c32(at(0)), ld_c32(at(1)));
                let (q, c) = quantise_complex(cmul(x[v], cmul(g, rot[v])), INT4);
                let (qm, cm) = quantise_complex(cmul(xm[v], cmul(gm, rotm[v])), INT4);
                clipped += (c + cm) << (16 * p as u32);
                let at = |c: u32| scratch + 4 * post_scratch_word(c, s as u32, tid) + (shift / 8);
                if INT4 {
                    st_shared_u8(at(v as u32), q as u8);
                    st_shared_u8(at(4 + v as u32), qm as u8);
                } else {
                    st_shared_u16(at(v as u32), q as u16);
                    st_shared_u16(at(4 + v as u32), qm as u16);
                }
            });
        });
        s += 1;
    }
    clipped
}

/// Column 0 (channels `a v`; the mirror of `a v` is `a ((4 - v) % 4)`, in the same column)
/// of the block's spectra from `first`: `items` (spectrum, polarisation) pairs, one per
/// thread, each value stored alone (2 bytes, or 1 for int4; a warp's stores of one channel
/// are contiguous). Done by every thread of the first column tile's blocks, so no warp
/// diverges; its loads mostly hit the L1 (column 0 shares its sectors with columns 1-3).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn post_column0<const INT4: bool>(
    fft: *const [f32; 2],
    gains: *const [f32; 2],
    fine: *const f32,
    rotation: *const [f32; 4],
    out: *mut u32,
    saturated: *mut u32,
    channels: u32,
    spectra: u32,
    spectra_per_heap: u32,
    first: u32,
    items: u32,
    tid: u32,
) {
    let a = channels / UNZIP;
    let (tw, e) = column_twiddles(0, channels);
    let mut it = tid;
    while it < items {
        let m = first + (it >> 1);
        let p = it & 1;
        if m < spectra {
            let at = (p * spectra + m) as usize;
            let base = fft.add(at * channels as usize);
            let mut y = [[0.0f32; 2]; 4];
            unroll!(r in [0, 1, 2, 3] {
                y[r] = ld_global_c32(base.add(r * a as usize));
            });
            let z = unzip_column(y, &tw);
            let (x, _) = fixup_pair(0, z, z, e, e, r2c_fixup_pair_x2);
            let [fr, fi, sr, si] = *rotation.add(at);
            let (rot, _) = rotations(0, channels, *fine.add(at), [fr, fi], [sr, si]);
            let heap = m / spectra_per_heap;
            let s_in_heap = m % spectra_per_heap;
            let mut clipped = 0u32;
            unroll!(v in [0, 1, 2, 3] {
                let k = a * v as u32;
                let [gr, gi] = ld_global_c32(gains.add((p * channels + k) as usize));
                let g = [0.5 * gr, 0.5 * gi];
                let (q, c) = quantise_complex(cmul(x[v], cmul(g, rot[v])), INT4);
                clipped += c;
                let index = output_index(heap, k, s_in_heap, p, channels, spectra_per_heap) as usize;
                if INT4 {
                    *(out as *mut u8).add(index) = q as u8;
                } else {
                    *(out as *mut u16).add(index) = q as u16;
                }
            });
            if clipped != 0 {
                red_add_u32(saturated.add((heap * 2 + p) as usize), clipped);
            }
        }
        it += THREADS;
    }
}

/// Post-processing body. Thread: column pair `t` (`0 .. n/8`, [`post_thread_columns`])
/// and a group of `SPECTRA_PER_POST_THREAD` spectra; a block is a tile of `2^tile` columns
/// (fastest) by `THREADS >> tile` groups ([`post_tile_log2`], [`POST_TILE_LOG2`]), blocks
/// column-tile fastest, so a block writes 8 groups' 16-byte pieces of each channel (128
/// contiguous bytes) and the blocks in flight read whole rows of a few spectra. The blocks
/// of the first tile also compute column 0 ([`post_column0`]).
/// `fft[pol][spectrum][row][column]` (cuFFT output);
/// `gains[pol][channel]` complex f32; `fine[pol][spectrum]` residual delay in samples;
/// `rotation[pol][spectrum]` = (exp(j pi phase), exp(-j pi fine / 4)) ([`rotations`]);
/// `saturated[heap][pol]`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn post<const INT4: bool>(
    fft: *const [f32; 2],
    gains: *const [f32; 2],
    fine: *const f32,
    rotation: *const [f32; 4],
    out: *mut u32,
    saturated: *mut u32,
    channels: u32,
    spectra: u32,
    spectra_per_heap: u32,
    tile_log2: u32,
) {
    const G: usize = SPECTRA_PER_POST_THREAD as usize;
    let tile = post_tile_log2(channels, tile_log2);
    let tiles_log2 = post_threads_per_group(channels).trailing_zeros() - tile;
    let tid = thread_idx_x();
    let b = block_idx_x();
    let t = ((b & ((1 << tiles_log2) - 1)) << tile) + (tid & ((1 << tile) - 1));
    let u = t + 1;
    let group = ((b >> tiles_log2) << (THREADS.trailing_zeros() - tile)) + (tid >> tile);
    let s0 = group * G as u32;
    let a = channels / UNZIP;
    // The block's gains (16 pol x row x side combinations of its <= 16 columns), halved,
    // go to shared memory once, read there by every group (needs tile_log2 <= 4).
    let gains_base = dynamic_shared() + POST_SCRATCH_BYTES;
    {
        let u0 = (b & ((1 << tiles_log2) - 1)) << tile;
        unroll!(r in [0, 1] {
            let e = tid + THREADS * r as u32;
            let col = e & 15;
            if col < (1 << tile) {
                let combo = e >> 4;
                let (p, v, side) = (combo >> 3, (combo >> 1) & 3, combo & 1);
                let (cu, cw) = post_thread_columns(u0 + col, channels);
                let k = if side == 0 { cu } else { cw } + a * v;
                let [gr, gi] = ld_global_nc_v2(gains.add((p * channels + k) as usize) as *const u32);
                let g = [(0.5 * f32::from_bits(gr)).to_bits(), (0.5 * f32::from_bits(gi)).to_bits()];
                st_shared_v2(gains_base + 8 * e, g);
            }
        });
        sync_threads();
    }
    if (b & ((1 << tiles_log2) - 1)) == 0 {
        let first = ((b >> tiles_log2) << (THREADS.trailing_zeros() - tile)) * G as u32;
        let items = 2 * G as u32 * (THREADS >> tile);
        post_column0::<INT4>(
            fft,
            gains,
            fine,
            rotation,
            out,
            saturated,
            channels,
            spectra,
            spectra_per_heap,
            first,
            items,
            tid,
        );
    }
    if s0 >= spectra {
        return;
    }
    let gains_shared = gains_base + 8 * (tid & ((1 << tile) - 1));
    let w = a - u;
    // Channel c's value of spectrum j of the group, both polarisations (int8: 4 bytes;
    // int4: 2 bytes in the low half), is word `post_scratch_word(c, j, tid)` of this
    // thread's shared scratch, each value stored as it is quantised (packed in registers,
    // with selects to place a spectrum's values, it took 165 registers). The spectra are a
    // real loop (when unrolled, the compiler hoisted every load of the group and spilled);
    // both polarisations of a spectrum go in one iteration (then 128 registers, four blocks
    // per SM; 96 and five with the gains in shared memory): at large n that beat one
    // (spectrum, polarisation) per iteration (72 registers, seven blocks) and a
    // polarisation-outer loop with the gains loaded once per polarisation (96, five).
    let scratch = dynamic_shared();
    // Saturated values of pol 0 in the low half, pol 1 in the high half (at most 32 each);
    // thread u = n/8 counted its one column twice.
    let clipped = {
        let c = post_loop::<INT4>(u, fft, gains_shared, fine, rotation, scratch, tid, channels, spectra, s0);
        if u == w {
            c >> 1
        } else {
            c
        }
    };
    // int4 wrote only the low two bytes of each word.
    let mask = if INT4 { 0xffff } else { u32::MAX };
    let mut packed = [[0u32; G]; 8];
    unroll!(c in [0, 1, 2, 3, 4, 5, 6, 7] {
        unroll!(j in [0, 1, 2, 3] {
            packed[c][j] = ld_shared_u32(scratch + 4 * post_scratch_word(c as u32, j as u32, tid)) & mask;
        });
    });
    let heap = s0 / spectra_per_heap;
    let s_in_heap = s0 % spectra_per_heap;
    unroll!(v in [0, 1, 2, 3, 4, 5, 6, 7] {
        let column = if v < 4 { u } else { w };
        {
            let k = column + a * (v as u32 % 4);
            let at = output_index(heap, k, s_in_heap, 0, channels, spectra_per_heap);
            // int8: 4 bytes per (spectrum, both pols); int4: 2 bytes.
            let word = if INT4 { at / 4 } else { at / 2 };
            let ptr = out.add(word as usize);
            if INT4 {
                let pair = |j: usize| packed[v][2 * j] | (packed[v][2 * j + 1] << 16);
                st_global_v2(ptr, [pair(0), pair(1)]);
            } else {
                st_global_v4(ptr, [packed[v][0], packed[v][1], packed[v][2], packed[v][3]]);
            }
        }
    });
    unroll!(p in [0, 1] {
        let count = (clipped >> (16 * p)) & 0xffff;
        if count != 0 {
            red_add_u32(saturated.add((heap * 2) as usize + p), count);
        }
    });
}
