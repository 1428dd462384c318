//! Pure index and size functions of the three-kernel path (FIR blocks, staged rows, the
//! unzipped FFT matrix, post tiles and scratch, output positions) and the packed-sample
//! unpacker: shared by the kernels, the host launchers and the CPU tests.

use super::{FIR_VARIANTS, MAX_TAPS, SPECTRA_PER_POST_THREAD, THREADS, UNZIP};

/// Spectra a FIR thread computes together (a batch: one staging slot of new rows, one barrier;
/// its window holds `taps + batch - 1` sample pairs), by compiled tap count. 16 taps: 16, at
/// four blocks per SM instead of five for batches of 8: the per-batch barrier and bookkeeping
/// cost more than the occupancy gains.
pub const fn fir_batch(variant_taps: u32) -> u32 {
    match variant_taps {
        32.. => 4,
        16.. => 16,
        _ => 8,
    }
}
/// Ring slots of staged rows (batches): `FIR_STAGES - 1` batches load while one is read.
pub const FIR_STAGES: u32 = 4;

/// Compiled tap count for a PFB of `taps` taps.
pub const fn fir_variant(taps: u32) -> u32 {
    let mut i = 0;
    while i < FIR_VARIANTS.len() {
        if FIR_VARIANTS[i] >= taps {
            return FIR_VARIANTS[i];
        }
        i += 1;
    }
    MAX_TAPS
}

/// Spectra per FIR thread: each thread computes at least 32T real outputs (16T spectra of its
/// two columns; fewer mean more window reloads and block prologues) unless that leaves fewer
/// than 2^17
/// threads; then rounded up to whole batches ([`fir_batch`]), so only a delay step or the
/// end of the launch leaves the staged path.
pub const fn fir_spectra_per_thread(channels: u32, taps: u32, spectra: u32) -> u32 {
    let batch = fir_batch(fir_variant(taps));
    let by_outputs = 16 * taps;
    let by_threads = (channels as u64 * spectra as u64 / (1 << 17)) as u32;
    let k = if by_threads < by_outputs { by_threads } else { by_outputs };
    let k = if k == 0 { 1 } else { k };
    k.div_ceil(batch) * batch
}

/// Column pairs of one FIR block (its threads): a tile of `min(n, THREADS)` pairs, so all
/// threads of a block share their spectra, their delay steps and their barriers.
pub const fn fir_block_width(channels: u32) -> u32 {
    if channels < THREADS {
        channels
    } else {
        THREADS
    }
}

/// Where a staged FIR row whose first sample is `sample` starts: the 16-byte chunk holding
/// that sample's first bit, and the bit's offset in the chunk. A row of the next spectrum is
/// `2n bits` bits = `n bits / 4` bytes later, a multiple of 16 for n >= 64, so every row of
/// a batch has the same offset.
pub const fn fir_row_start(sample: u64, bits: u32) -> (u64, u32) {
    let bit = sample * bits as u64;
    (bit / 128, (bit % 128) as u32)
}

/// 16-byte chunks of one staged row of a block of `width` pairs: from the first pair's chunk
/// through the word after the last pair's first word ([`unpack_pair_at`] reads two words),
/// at the worst offset (127).
pub const fn fir_row_chunks(bits: u32, width: u32) -> u32 {
    ((127 + 2 * (width - 1) * bits) / 32 + 2).div_ceil(4)
}

/// Bytes from one row of a FIR thread's window ring to the next: one f32 pair per thread of a
/// full block, rows thread-fastest, so a warp's 8-byte accesses are conflict-free.
pub const FIR_RING_ROW: u32 = 8 * THREADS;

/// Dynamic shared memory of a FIR block of `width` pairs and `variant_taps` compiled taps:
/// [`FIR_STAGES`] slots of [`fir_batch`] staged rows, then the window ring of
/// `variant_taps + batch - 1` rows, or with the window in registers ([`fir_warp_rows`]) a
/// scratch of `variant_taps` rows for the rare paths.
pub const fn fir_shared_bytes(bits: u32, width: u32, variant_taps: u32) -> u32 {
    let batch = fir_batch(variant_taps);
    let rows = if fir_warp_rows(variant_taps) { variant_taps } else { variant_taps + batch - 1 };
    FIR_STAGES * batch * 16 * fir_row_chunks(bits, width) + rows * FIR_RING_ROW
}

/// Pair (column pair offset in the block) of FIR thread `tid` in a block of `width` threads.
/// With `warp_rows` and a full block, warp w takes pairs `4 l + w` (l its lanes): `z[q]` goes to
/// row `q % 4` of the unzipped matrix ([`fft_index`]), so each warp's output store is 256
/// contiguous bytes of one row instead of four 64-byte pieces of four rows. The price: a
/// warp's staged-row reads ([`fir_row_word`]) step `8 bits` bits per lane: 2-way bank
/// conflicts at 8 and 10 bits, 4-way at 16, none at 4 and 12.
pub const fn fir_pair_of_thread(tid: u32, width: u32, warp_rows: bool) -> u32 {
    if warp_rows && width == THREADS {
        4 * (tid % 32) + tid / 32
    } else {
        tid
    }
}

/// Whether the FIR kernel of `variant_taps` compiled taps keeps its window in registers
/// (needs `variant_taps - 1 <= batch`; no shared ring, [`fir_shared_bytes`]), uses
/// [`fir_pair_of_thread`]'s row-per-warp order and a warp vote for its batch contiguity checks
/// (one offset load per lane instead of `batch` per thread). Only at 16 taps, the tap count
/// it was measured and tested at.
pub const fn fir_warp_rows(variant_taps: u32) -> bool {
    variant_taps == 16
}

/// Shared-window byte address of the first word thread `t` reads from a staged row (row at
/// `row`, first bit at `offset`): words of one warp are consecutive, so conflict-free.
pub const fn fir_row_word(row: u32, offset: u32, t: u32, bits: u32) -> u32 {
    row + 4 * ((offset + 2 * t * bits) / 32)
}

/// Position of `z[q]` (complex) of one spectrum in the unzipped FFT input: row `q % 4`,
/// column `q / 4` of a `4 x n/4` row-major matrix.
pub const fn fft_index(q: u32, channels: u32) -> u32 {
    (q % UNZIP) * (channels / UNZIP) + q / UNZIP
}

/// The two columns a post thread owns, for `0 <= u < n/8`: `u` and its mirror `n/4 - u`;
/// columns 0 and n/8 are their own mirrors, so thread 0 takes both (n/8 threads per group, a
/// power of two, which tiles a block exactly).
pub const fn post_columns(u: u32, channels: u32) -> (u32, u32) {
    let a = channels / UNZIP;
    if u == 0 {
        (0, a / 2)
    } else {
        (u, a - u)
    }
}

/// Word of post thread `t`'s shared scratch holding output channel slot `c` (0..8: columns u
/// and w, rows 0..4) of spectrum `j` of its group (both polarisations, as `packed`):
/// thread-fastest, so a warp's 2-byte (int8) or 1-byte (int4) stores and its word loads
/// touch 32 consecutive words, conflict-free.
pub const fn post_scratch_word(c: u32, j: u32, t: u32) -> u32 {
    (c * SPECTRA_PER_POST_THREAD + j) * THREADS + t
}

/// Bytes of a post block's scratch ([`post_scratch_word`]).
pub const POST_SCRATCH_BYTES: u32 = 4 * 8 * SPECTRA_PER_POST_THREAD * THREADS;
/// Dynamic shared memory of a post block: its threads' scratch, then the block's gains (16
/// columns at most, both columns of each, 4 rows, 2 polarisations).
pub const POST_SHARED_BYTES: u32 = POST_SCRATCH_BYTES + 8 * 256;

/// Post threads per group of spectra: columns `0 .. n/8` ([`post_columns`]).
pub const fn post_threads_per_group(channels: u32) -> u32 {
    channels / UNZIP / 2
}

/// Log2 of the columns of one post block's tile (the rest of its `THREADS` threads are groups
/// of spectra): `tile_log2` capped at the columns of a group.
pub const fn post_tile_log2(channels: u32, tile_log2: u32) -> u32 {
    let cols = post_threads_per_group(channels).trailing_zeros();
    if tile_log2 < cols {
        tile_log2
    } else {
        cols
    }
}

/// Log2 of the columns of a post block's tile (16 columns by 8 groups of 4 spectra): the
/// block writes 8 groups' 16-byte pieces of each of its channels (128 contiguous bytes),
/// where blocks of consecutive columns of one group wrote 16-byte pieces 1 KB apart; 16
/// columns measured fastest of 8 to 128.
pub const POST_TILE_LOG2: u32 = 4;
// The post block's gains in shared memory ([`POST_SHARED_BYTES`]) hold tiles of 16 columns.
const _: () = assert!(POST_TILE_LOG2 <= 4);

/// Blocks of a post launch: column tiles times tiles of `THREADS >> tile` groups.
pub const fn post_blocks(channels: u32, spectra: u32, tile_log2: u32) -> u32 {
    let t = post_tile_log2(channels, tile_log2);
    let groups = spectra / SPECTRA_PER_POST_THREAD;
    (post_threads_per_group(channels) >> t) * groups.div_ceil(THREADS >> t)
}

/// Output position (in complex values) of channel `k`, spectrum `s` of heap `heap`,
/// polarisation `pol`.
pub const fn output_index(
    heap: u32,
    channel: u32,
    s: u32,
    pol: u32,
    channels: u32,
    spectra_per_heap: u32,
) -> u64 {
    (((heap as u64 * channels as u64 + channel as u64) * spectra_per_heap as u64 + s as u64) * 2) + pol as u64
}

/// Samples `sample` and `sample + 1` of a packed stream of `bits`-bit two's complement values,
/// MSB first, whose u32 words (little-endian, as loaded from memory) `word(i)` returns. Always
/// reads the word after the pair's first word (no divergent branch on the device), so buffers
/// carry one word of padding.
#[inline(always)]
pub fn unpack_pair(word: impl Fn(usize) -> u32, sample: u64, bits: u32) -> (i32, i32) {
    unpack_pair_at(word, sample * bits as u64, bits)
}

/// As [`unpack_pair`], for the pair whose first bit is `bit` of the stream `word` returns.
#[inline(always)]
pub fn unpack_pair_at(word: impl Fn(usize) -> u32, bit: u64, bits: u32) -> (i32, i32) {
    let w = (bit / 32) as usize;
    unpack_words(word(w), word(w + 1), (bit % 32) as u32, bits)
}

/// The pair whose first bit is bit `shift` (< 32) of the word `first`, followed by `second`
/// (both little-endian, as loaded).
#[inline(always)]
pub fn unpack_words(first: u32, second: u32, shift: u32, bits: u32) -> (i32, i32) {
    let v = (((first.swap_bytes() as u64) << 32) | second.swap_bytes() as u64) << shift;
    ((v as i64 >> (64 - bits)) as i32, ((v << bits) as i64 >> (64 - bits)) as i32)
}

/// As [`unpack_words`], with 32-bit shifts only: a funnel shift takes the 32 bits from bit
/// `shift` (both samples lie in them, as `2 bits <= 32`), two arithmetic shifts sign-extend.
#[inline(always)]
pub fn unpack_words32(first: u32, second: u32, shift: u32, bits: u32) -> (i32, i32) {
    let v = ((first.swap_bytes() as u64) << 32) | second.swap_bytes() as u64;
    let top = (v >> (32 - shift)) as u32;
    ((top as i32) >> (32 - bits), ((top << bits) as i32) >> (32 - bits))
}

/// The two columns post thread `t` (`0 <= t < n/8`) owns: `u = t + 1` and its mirror
/// `n/4 - u`. The last thread (`u = n/8`) has one column, its own mirror, twice; column 0 (its
/// own mirror within the column) has no thread: the post kernel's first tile of blocks
/// computes it apart ([`post_columns`] gives thread 0 both self-mirrored columns instead, which
/// costs a divergent second loop in every warp of that tile).
pub const fn post_thread_columns(t: u32, channels: u32) -> (u32, u32) {
    let u = t + 1;
    (u, channels / UNZIP - u)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::pfb::BITS;

    #[test]
    fn fir_threads_take_whole_batches_and_follow_the_heuristic() {
        for (n, taps, spectra) in
            [(64u32, 1u32, 8u32), (1024, 16, 65536), (32768, 16, 2048), (65536, 32, 8), (4096, 3, 16)]
        {
            let batch = fir_batch(fir_variant(taps));
            let k = fir_spectra_per_thread(n, taps, spectra);
            assert!(k >= batch && k.is_multiple_of(batch), "n {n} T {taps}: {k} spectra per thread");
            // 16T spectra (32T outputs) per thread, rounded up to whole batches, unless that
            // leaves fewer than 2^17 threads.
            let by_threads = ((n as u64 * spectra as u64) >> 17) as u32;
            if by_threads >= 16 * taps {
                assert_eq!(k, (16 * taps).div_ceil(batch) * batch, "n {n} T {taps}");
            } else {
                assert_eq!(k, by_threads.max(1).div_ceil(batch) * batch, "n {n} T {taps}");
            }
            assert!(k < 16 * taps + batch, "n {n} T {taps}: no more than the heuristic asks, rounded up");
        }
        assert_eq!(fir_variant(3), 4);
        assert_eq!(fir_variant(17), 32);
    }

    /// The 16-tap FIR's row-per-warp order: a permutation of a full block's pairs (identity
    /// otherwise); each warp's 32 outputs are consecutive in one row of the unzipped matrix;
    /// its staged-row reads need at most `bits / 4` wavefronts (none extra at 4 and 12 bits).
    #[test]
    fn fir_warp_rows_store_contiguously_and_read_with_few_conflicts() {
        use crate::bank::wavefronts;
        assert!(fir_warp_rows(16));
        assert!(FIR_VARIANTS.iter().filter(|&&t| t != 16).all(|&t| !fir_warp_rows(t)));
        let mut seen = [false; THREADS as usize];
        for tid in 0..THREADS {
            let t = fir_pair_of_thread(tid, THREADS, true);
            assert!(!seen[t as usize], "pair {t} taken twice");
            seen[t as usize] = true;
            assert_eq!(fir_pair_of_thread(tid % 64, 64, true), tid % 64);
            assert_eq!(fir_pair_of_thread(tid, THREADS, false), tid);
        }
        for n in [128u32, 1024, 65536] {
            for q0 in (0..n).step_by(THREADS as usize).take(8) {
                for warp in 0..THREADS / 32 {
                    let at: std::vec::Vec<u32> = (0..32)
                        .map(|l| fft_index(q0 + fir_pair_of_thread(32 * warp + l, THREADS, true), n))
                        .collect();
                    assert!(at.windows(2).all(|p| p[1] == p[0] + 1), "n {n} q0 {q0} warp {warp}");
                }
            }
        }
        for bits in BITS {
            let most = match bits {
                4 | 12 => 1,
                8 | 10 => 2,
                _ => 4,
            };
            let mut worst = 0;
            for offset in 0..128 {
                for warp in 0..THREADS / 32 {
                    for second in [0, 4] {
                        let addresses: [u32; 32] = std::array::from_fn(|l| {
                            let t = fir_pair_of_thread(32 * warp + l as u32, THREADS, true);
                            fir_row_word(0, offset, t, bits) + second
                        });
                        worst = worst.max(wavefronts(&addresses, 4));
                    }
                }
            }
            assert_eq!(worst, most, "bits {bits}");
            assert!(worst <= bits.div_ceil(4));
        }
    }

    #[test]
    fn fft_index_is_a_permutation_and_post_columns_cover_each_column_once() {
        for n in [64u32, 1024, 65536] {
            let mut seen = std::vec![false; n as usize];
            for q in 0..n {
                let i = fft_index(q, n) as usize;
                assert!(!seen[i]);
                seen[i] = true;
            }
            let a = n / 4;
            let mut owned = std::vec![0; a as usize];
            for u in 0..post_threads_per_group(n) {
                let (c, w) = post_columns(u, n);
                owned[c as usize] += 1;
                if w != c {
                    owned[w as usize] += 1;
                }
            }
            assert!(owned.iter().all(|&o| o == 1), "n {n}");
        }
    }
}
