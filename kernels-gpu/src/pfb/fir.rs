//! The FIR of the three-kernel path (sm_80 module): the staged-ring body [`fir`] and the
//! register-window body [`fir_rw`] (16 taps, [`super::fir_warp_rows`]). Layouts, batching and
//! staging: the module documentation of [`super`] and the layout functions it names.
//!
//! Each body is one function of about 200 lines on purpose: its prologue, staging closure and
//! batch loop share the thread's weights, window and ring addresses in registers, and the
//! two bodies are not factored into shared helpers because ptxas scheduled the 16-tap kernel
//! differently (and slower) when their common prologue was a shared function.

use super::*;
use crate::intrinsics::*;

/// Thread: column pair q (`g[2q], g[2q+1]`), a run of `per_thread` spectra of one
/// polarisation (grid y); a block is `fir_block_width` consecutive pairs with the same
/// run. `offsets[pol][spectrum]`: first sample of the spectrum's window relative to the
/// polarisation's input. `weights[t + 2n j]` (f32, `2n taps`).
///
/// The thread keeps its `2 TV` weights and 2B accumulators in registers; its window of
/// `TV + B - 1` unpacked sample pairs lives in its slice of a shared-memory ring
/// ([`FIR_RING_ROW`]), streamed tap-major per batch: one pair loaded, added into every
/// output of the batch it belongs to. A batch of consecutive windows (no coarse-delay step
/// inside) needs B new rows, one per spectrum: the block copies them, packed, for its
/// whole tile into a shared-memory slot with `cp.async`, `S - 1` batches ahead, so the
/// bytes in flight take no registers (the register-window kernel this replaced held 12
/// loads per thread in registers: 128 registers, latency-bound). A continuing batch writes
/// its B new pairs over the B oldest rows and moves the ring's head by B; a batch that
/// does not continue the previous one loads its `TV - 1` older pairs from global memory;
/// a batch with a delay step inside, or the ragged end, goes one spectrum at a time, each
/// window read directly (its staged rows, if any, are not used).
#[inline(always)]
pub(super) unsafe fn fir<const TV: usize, const B: usize, const S: usize>(
    inputs: [*const u32; 2],
    offsets: *const u32,
    weights: *const f32,
    out: *mut [f32; 2],
    channels: u32,
    taps: u32,
    spectra: u32,
    per_thread: u32,
    bits: u32,
) {
    let pol = block_idx_y();
    let id = global_thread_x();
    let tid = thread_idx_x();
    let width = block_dim_x();
    let q0 = (id & (channels - 1)) - tid;
    let t = fir_pair_of_thread(tid, width, false);
    let q = q0 + t;
    let piece = id >> channels.trailing_zeros();
    let first = piece * per_thread;
    // Uniform across the block (its threads share `piece`), so the barriers below are.
    if first >= spectra {
        return;
    }
    let last = if first + per_thread < spectra { first + per_thread } else { spectra };
    let input = if pol == 0 { inputs[0] } else { inputs[1] };
    let offsets = offsets.add((pol * spectra) as usize);
    let step = 2 * channels;
    let pad = TV as u32 - taps;
    let mut w = [[0.0f32; 2]; TV];
    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
        if j < TV && j as u32 >= pad {
            let at = ((j as u32 - pad) * step + 2 * q) as usize;
            let [w0, w1] = ld_global_nc_v2(weights.add(at) as *const u32);
            w[j] = [f32::from_bits(w0), f32::from_bits(w1)];
        }
    });
    let out = out.add((pol * spectra) as usize * channels as usize + fft_index(q, channels) as usize);

    let row_bytes = 16 * fir_row_chunks(bits, width);
    let row_step = (channels * bits / 4) as usize; // bytes from one row to the next
    let smem = dynamic_shared();
    let rows_r = (TV + B - 1) as u32;
    let ring = smem + S as u32 * B as u32 * row_bytes + 8 * tid;
    let ring_end = ring + rows_r * FIR_RING_ROW;
    // Address of window pair k for a head at `head` (an address in the ring).
    let slot_of = |head: u32, k: usize| -> u32 {
        let a = head + k as u32 * FIR_RING_ROW;
        if a >= ring_end {
            a - rows_r * FIR_RING_ROW
        } else {
            a
        }
    };
    let batches = (last - first).div_ceil(B as u32);
    let row_sample = |s0: u32| s0 as u64 + 2 * q0 as u64 + (taps - 1) as u64 * step as u64;
    let contiguous = |k: u32| -> bool {
        let m = first + k * B as u32;
        let s0 = *offsets.add(m as usize);
        let mut ok = m + B as u32 <= last;
        unroll!(i in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            if i < B {
                let at = if m + (i as u32) < last { m + i as u32 } else { last - 1 };
                ok &= *offsets.add(at as usize) == s0.wrapping_add(i as u32 * step);
            }
        });
        ok
    };
    let stage = |k: u32, slot: u32| -> bool {
        let m = first + k * B as u32;
        let staged = k < batches && contiguous(k);
        if staged {
            let (chunk, _) = fir_row_start(row_sample(*offsets.add(m as usize)), bits);
            let src = (input as *const u8).add(16 * chunk as usize);
            let dst = smem + slot * B as u32 * row_bytes;
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if i < B {
                    let mut j = 16 * tid;
                    while j < row_bytes {
                        cp_async_16(dst + i as u32 * row_bytes + j, src.add(i * row_step + j as usize), 16);
                        j += 16 * width;
                    }
                }
            });
        }
        cp_async_commit();
        staged
    };
    let mut staged = 0u32;
    unroll!(k in [0, 1, 2, 3, 4, 5, 6, 7] {
        if k + 1 < S {
            staged |= (stage(k as u32, k as u32) as u32) << k;
        }
    });
    // Stores window[pad .. count] (pair at sample `base` + 2n (k - pad)) from global memory.
    let row_words = (step * bits / 32) as usize;
    // A real loop (its trip count depends on `taps`): unrolled, the compiler issued every
    // load at once and the rare path set the register count of the whole kernel.
    let load_window = |head: u32, base: u64, count: usize| {
        let bit = base * bits as u64;
        let shift = (bit % 32) as u32;
        let mut ptr = input.add((bit / 32) as usize);
        let mut j = pad as usize;
        while j < count {
            let (a, b) = unpack_words(*ptr, *ptr.add(1), shift, bits);
            st_shared_v2(slot_of(head, j), [(a as f32).to_bits(), (b as f32).to_bits()]);
            ptr = ptr.add(row_words);
            j += 1;
        }
    };
    let pair = |address: u32| -> [f32; 2] {
        let [a, b] = ld_shared_v2(address);
        [f32::from_bits(a), f32::from_bits(b)]
    };
    // Rows before `pad` are never written: zero them once (their weights are zero, but
    // stale shared memory could hold a NaN pattern).
    unroll!(k in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47] {
        if k < TV + B - 1 {
            st_shared_v2(ring + k as u32 * FIR_RING_ROW, [0, 0]);
        }
    });
    let mut head = ring;
    let mut expected = u32::MAX;
    let mut k = 0;
    let mut slot = 0;
    while k < batches {
        cp_async_wait_pending(S as u32 - 2);
        sync_threads();
        let free = if slot == 0 { S as u32 - 1 } else { slot - 1 };
        let ahead = stage(k + S as u32 - 1, free);
        staged = (staged & !(1 << free)) | ((ahead as u32) << free);
        let m = first + k * B as u32;
        if staged & (1 << slot) != 0 {
            let s0 = *offsets.add(m as usize);
            if s0 == expected {
                head = slot_of(head, B);
            } else {
                load_window(head, s0 as u64 + 2 * q as u64, TV - 1);
            }
            let (_, offset) = fir_row_start(row_sample(s0), bits);
            let rows = smem + slot * B as u32 * row_bytes;
            let at = fir_row_word(0, offset, t, bits);
            let bit = ((offset + 2 * t * bits) % 32) as u64;
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if i < B {
                    let row = rows + i as u32 * row_bytes + at;
                    let (a, b) = unpack_pair_at(|x| ld_shared_u32(row + 4 * x as u32), bit, bits);
                    st_shared_v2(slot_of(head, TV - 1 + i), [(a as f32).to_bits(), (b as f32).to_bits()]);
                }
            });
            // Tap-major over the window: pair k feeds output i with weight k - i. The
            // order of the sum for each output is still taps ascending.
            let mut acc = [[0.0f32; 2]; 16];
            unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47] {
                if kk < TV + B - 1 && kk as u32 >= pad {
                    let x = pair(slot_of(head, kk));
                    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                        if i < B && kk >= i && kk - i < TV {
                            acc[i][0] = fma_rn_f32(w[kk - i][0], x[0], acc[i][0]);
                            acc[i][1] = fma_rn_f32(w[kk - i][1], x[1], acc[i][1]);
                        }
                    });
                }
            });
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if i < B {
                    *out.add((m as usize + i) * channels as usize) = acc[i];
                }
            });
            expected = s0.wrapping_add(B as u32 * step);
        } else {
            let mut mm = m;
            while mm < last && mm < m + B as u32 {
                load_window(head, *offsets.add(mm as usize) as u64 + 2 * q as u64, TV);
                let mut acc = [0.0f32; 2];
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                    if j < TV && j as u32 >= pad {
                        let x = pair(slot_of(head, j));
                        acc[0] = fma_rn_f32(w[j][0], x[0], acc[0]);
                        acc[1] = fma_rn_f32(w[j][1], x[1], acc[1]);
                    }
                });
                *out.add(mm as usize * channels as usize) = acc;
                mm += 1;
            }
            expected = u32::MAX;
        }
        k += 1;
        slot = if slot + 1 == S as u32 { 0 } else { slot + 1 };
    }
}

/// FIR body with the window in registers (`TV - 1 <= B`): as [`fir`], but a continuing
/// batch keeps the `TV - 1` older pairs of its window in registers (the new rows of the
/// previous batch) instead of a shared ring, so no ring address arithmetic, and the staged
/// rows' loads are not ordered behind ring stores. A batch whose window does not continue
/// the previous one reloads its older pairs from global memory through a per-thread
/// shared scratch of `TV` rows; spectra outside whole staged batches use that scratch as
/// [`fir`] uses its ring. Each output's sum runs over taps ascending, as in [`fir`]; the
/// FMAs with the zero weights in front (`taps < TV`) are kept, which adds +-0 to a sum that
/// starts at +0 and so changes no bit.
#[inline(always)]
pub(super) unsafe fn fir_rw<const TV: usize, const B: usize, const S: usize>(
    inputs: [*const u32; 2],
    offsets: *const u32,
    weights: *const f32,
    out: *mut [f32; 2],
    channels: u32,
    taps: u32,
    spectra: u32,
    per_thread: u32,
    bits: u32,
) {
    // The same prologue as `fir`'s, written out: as a shared function returning the
    // thread's place and weights, ptxas scheduled this kernel differently and the 16-tap
    // FIR ran slower.
    let pol = block_idx_y();
    let id = global_thread_x();
    let tid = thread_idx_x();
    let width = block_dim_x();
    let q0 = (id & (channels - 1)) - tid;
    let t = fir_pair_of_thread(tid, width, true);
    let q = q0 + t;
    let piece = id >> channels.trailing_zeros();
    let first = piece * per_thread;
    if first >= spectra {
        return;
    }
    let last = if first + per_thread < spectra { first + per_thread } else { spectra };
    let input = if pol == 0 { inputs[0] } else { inputs[1] };
    let offsets = offsets.add((pol * spectra) as usize);
    let step = 2 * channels;
    let pad = TV as u32 - taps;
    let mut w = [[0.0f32; 2]; TV];
    unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
        if j < TV && j as u32 >= pad {
            let at = ((j as u32 - pad) * step + 2 * q) as usize;
            let [w0, w1] = ld_global_nc_v2(weights.add(at) as *const u32);
            w[j] = [f32::from_bits(w0), f32::from_bits(w1)];
        }
    });
    let out =
        out.add((pol * spectra) as usize * channels as usize + fft_index(q, channels) as usize) as *mut u32;
    let out_row = 2 * channels as usize; // u32 words from one spectrum's output to the next

    let row_bytes = 16 * fir_row_chunks(bits, width);
    let row_step = (channels * bits / 4) as usize;
    let smem = dynamic_shared();
    let scratch = smem + S as u32 * B as u32 * row_bytes + 8 * tid;
    let batches = (last - first).div_ceil(B as u32);
    let row_sample = |s0: u32| s0 as u64 + 2 * q0 as u64 + (taps - 1) as u64 * step as u64;
    let contiguous = |k: u32| -> bool {
        let m = first + k * B as u32;
        let s0 = *offsets.add(m as usize);
        // Lane l checks spectrum m + l % B (B divides 32), the warp votes: one offset load
        // per lane instead of B per thread.
        let i = tid % 32 % B as u32;
        let at = if m + i < last { m + i } else { last - 1 };
        vote_all(m + B as u32 <= last && *offsets.add(at as usize) == s0.wrapping_add(i * step))
    };
    let stage = |k: u32, slot: u32| -> bool {
        let m = first + k * B as u32;
        let staged = k < batches && contiguous(k);
        if staged {
            let (chunk, _) = fir_row_start(row_sample(*offsets.add(m as usize)), bits);
            let src = (input as *const u8).add(16 * chunk as usize);
            let dst = smem + slot * B as u32 * row_bytes;
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if i < B {
                    let mut j = 16 * tid;
                    while j < row_bytes {
                        cp_async_16(dst + i as u32 * row_bytes + j, src.add(i * row_step + j as usize), 16);
                        j += 16 * width;
                    }
                }
            });
        }
        cp_async_commit();
        staged
    };
    let mut staged = 0u32;
    unroll!(k in [0, 1, 2, 3, 4, 5, 6, 7] {
        if k + 1 < S {
            staged |= (stage(k as u32, k as u32) as u32) << k;
        }
    });
    let row_words = (step * bits / 32) as usize;
    // Scratch rows pad .. count from global memory (pair at `base` + 2n (k - pad)); a real
    // loop, as in [`fir`].
    let load_scratch = |base: u64, count: usize| {
        let bit = base * bits as u64;
        let shift = (bit % 32) as u32;
        let mut ptr = input.add((bit / 32) as usize);
        let mut j = pad as usize;
        while j < count {
            let (a, b) = unpack_words(*ptr, *ptr.add(1), shift, bits);
            st_shared_v2(scratch + j as u32 * FIR_RING_ROW, [(a as f32).to_bits(), (b as f32).to_bits()]);
            ptr = ptr.add(row_words);
            j += 1;
        }
    };
    let pair = |address: u32| -> [f32; 2] {
        let [a, b] = ld_shared_v2(address);
        [f32::from_bits(a), f32::from_bits(b)]
    };
    unroll!(k in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
        if k < TV {
            st_shared_v2(scratch + k as u32 * FIR_RING_ROW, [0, 0]);
        }
    });
    // Window pairs 0 .. TV - 1 of the next batch.
    let mut old = [[0.0f32; 2]; 32];
    let mut expected = u32::MAX;
    let mut k = 0;
    let mut slot = 0;
    while k < batches {
        cp_async_wait_pending(S as u32 - 2);
        sync_threads();
        let free = if slot == 0 { S as u32 - 1 } else { slot - 1 };
        let ahead = stage(k + S as u32 - 1, free);
        staged = (staged & !(1 << free)) | ((ahead as u32) << free);
        let m = first + k * B as u32;
        if staged & (1 << slot) != 0 {
            let s0 = *offsets.add(m as usize);
            if s0 != expected {
                load_scratch(s0 as u64 + 2 * q as u64, TV - 1);
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                    if j + 1 < TV {
                        old[j] = pair(scratch + j as u32 * FIR_RING_ROW);
                    }
                });
            }
            let (_, offset) = fir_row_start(row_sample(s0), bits);
            let rows = smem + slot * B as u32 * row_bytes + fir_row_word(0, offset, t, bits);
            let bit = (offset + 2 * t * bits) % 32;
            let mut raw = [[0u32; 2]; 16];
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if i < B {
                    let row = rows + i as u32 * row_bytes;
                    raw[i] = [ld_shared_u32(row), ld_shared_u32(row + 4)];
                }
            });
            let mut new = [[0.0f32; 2]; 16];
            let mut acc = [[0.0f32; 2]; 16];
            unroll!(kk in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47] {
                if kk < TV + B - 1 {
                    let x = if kk + 1 < TV {
                        old[kk % 32]
                    } else {
                        let i = (kk + 1 - TV) % 16;
                        let (a, b) = unpack_words32(raw[i][0], raw[i][1], bit, bits);
                        new[i] = [a as f32, b as f32];
                        new[i]
                    };
                    unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                        if i < B && kk >= i && kk - i < TV {
                            acc[i][0] = fma_rn_f32(w[kk - i][0], x[0], acc[i][0]);
                            acc[i][1] = fma_rn_f32(w[kk - i][1], x[1], acc[i][1]);
                        }
                    });
                }
            });
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if i < B {
                    st_global_v2(out.add((m as usize + i) * out_row), [acc[i][0].to_bits(), acc[i][1].to_bits()]);
                }
            });
            // The next window's older pairs: this window's pairs B .. B + TV - 1, all new
            // rows since TV - 1 <= B.
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                if j + 1 < TV {
                    old[j] = new[(B + j + 1 - TV) % 16];
                }
            });
            expected = s0.wrapping_add(B as u32 * step);
        } else {
            let mut mm = m;
            while mm < last && mm < m + B as u32 {
                load_scratch(*offsets.add(mm as usize) as u64 + 2 * q as u64, TV);
                let mut acc = [0.0f32; 2];
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] {
                    if j < TV && j as u32 >= pad {
                        let x = pair(scratch + j as u32 * FIR_RING_ROW);
                        acc[0] = fma_rn_f32(w[j][0], x[0], acc[0]);
                        acc[1] = fma_rn_f32(w[j][1], x[1], acc[1]);
                    }
                });
                st_global_v2(out.add(mm as usize * out_row), [acc[0].to_bits(), acc[1].to_bits()]);
                mm += 1;
            }
            expected = u32::MAX;
        }
        k += 1;
        slot = if slot + 1 == S as u32 { 0 } else { slot + 1 };
    }
}
