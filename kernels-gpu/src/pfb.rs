//! PFB channelizer (F-engine, seed 004 sec. 2.1, 3.3-3.7, 4.1-4.2): packed real samples of two
//! polarisations to channel-major complex int8 (or int4) heaps.
//!
//! For spectrum m and polarisation p, with n channels, T taps and coarse delay c (seed eq. 1):
//! `g[t] = sum_j s[2nm - c + t + 2nj] w[t + 2nj]` for `0 <= t < 2n`;
//! `X[k] = sum_t g[t] exp(-j pi k t / n)` for `0 <= k < n` (Nyquist dropped);
//! `y[k] = Q( gain[p][k] exp(j pi (phase - fine k / n)) X[k] )` with `phase` in half turns and
//! `fine` the residual delay in samples, `Q` = round half to even, saturate to [-127, 127]
//! (int8) or [-7, 7] (int4).
//!
//! Three kernels (seed sec. 3.4-3.6 and 4): the FIR ([`fir_kernel_name`]) writes `z[q] =
//! g[2q] + j g[2q+1]` already "unzipped" (sec. 4.2, factor [`UNZIP`] = 4): `z[4 q1 + q2]` goes
//! to row q2, column q1 of a `4 x n/4` matrix ([`fft_index`]), so cuFFT runs `n/4`-point C2C
//! transforms on contiguous rows. The post-processing kernel finishes the transform: twiddles
//! and a 4-point DFT across the rows give `Z = FFT_n(z)` (six-step FFT, steps 3-6), then the
//! R2C fix-up (sec. 4.1) `X[k] = (Z[k] + Z*[n-k]) / 2 - j/2 exp(-j pi k / n) (Z[k] - Z*[n-k])`.
//! A post thread owns column `u` and its mirror `n/4 - u` ([`post_thread_columns`]: u from 1
//! to n/8, whose mirror is itself), because channel `u + a v` needs `Z[n - k]`, which lies in
//! the mirror column; so each thread does the two 4-point DFTs of the seed. Column 0 is its
//! own mirror: the blocks of the first column tile compute it apart, one (spectrum,
//! polarisation) per thread, so no warp runs two code paths. A post block is a tile of 16
//! columns by 8 groups of spectra ([`POST_TILE_LOG2`]); it stages its columns' gains, halved,
//! in shared memory once, and computes twice the R2C fix-up ([`r2c_fixup_pair_x2`]), which gives
//! the same products bit for bit without the four halvings of each mirrored pair of channels
//! (the pair shares its halves and its complex product).
//!
//! Layouts: input per polarisation, `bits`-wide two's complement packed MSB-first (sample i is
//! bits `i bits .. (i + 1) bits` of the byte stream, bit 0 the MSB of byte 0), read as
//! little-endian u32 words ([`unpack_pair`]). FIR output / FFT buffers: complex f32
//! `[pol][spectrum][row 4][column n/4]`. Output: complex int8 `[heap][channel][spectrum][pol]`
//! (int4: one byte per complex value, real in the low nibble, as `packing::pack_ci4`);
//! saturation counts u32 `[heap][pol]` (a value counts when either component clipped).
//!
//! FIR (sec. 3.4): a block is a tile of [`fir_block_width`] column pairs and a run of spectra;
//! per batch of [`fir_batch`] spectra it copies the batch's new input rows, still packed, into
//! a ring slot of shared memory with `cp.async` ([`FIR_STAGES`]` - 1` batches ahead, so the
//! bytes in flight take no registers), each thread unpacks its pair of each new row
//! ([`fir_row_start`], [`fir_row_word`]) into its slice of a window ring in shared memory
//! ([`FIR_RING_ROW`]) and streams the window against its weights in registers. At 16 taps
//! ([`fir_warp_rows`]) the window itself stays in registers (no ring), and each warp of a
//! block computes pairs of one row of the unzipped output ([`fir_pair_of_thread`]), so its
//! stores are contiguous.
//!
//! Why no shared-memory transpose across threads (sec. 3.6): a post thread owns
//! [`SPECTRA_PER_POST_THREAD`] consecutive spectra of its 8 channels, so the channel-major
//! output leaves as 16-byte pieces (8 for int4) per channel; the transpose happens in each
//! thread's private shared-memory scratch ([`post_scratch_word`]).
//!
//! Fused paths (sec. 6): [`fused`] (sm_80, n <= 4096) and [`cluster`] (sm_90, n = 1024: the
//! three kernels' factorisation over a 4-block cluster, the rows exchanged through distributed
//! shared memory).
//!
//! Coarse delay (sec. 3.3) is an index offset per spectrum and polarisation read by the FIR
//! kernel; where it changes, the thread reloads its window instead of sliding it, so one
//! launch serves any delay track.

use crate::delay_beamformer::{fma_f32, sincospi, sincospi_reduced};
use crate::packing::saturate_symmetric;

pub mod cluster;
pub mod fused;

/// Supported sample widths in bits.
pub const BITS: [u32; 5] = [4, 8, 10, 12, 16];
/// Unzip factor b of the six-step FFT (sec. 4.2).
pub const UNZIP: u32 = 4;
/// Smallest and largest channel counts (powers of two).
pub const MIN_CHANNELS: u32 = 64;
pub const MAX_CHANNELS: u32 = 65536;
/// Most taps.
pub const MAX_TAPS: u32 = 32;
/// Tap counts with a compiled FIR kernel; a PFB of T taps uses the smallest one >= T, with
/// zero weights in front (those samples are never loaded).
pub const FIR_VARIANTS: [u32; 5] = [1, 4, 8, 16, 32];
/// Threads per block of both kernels.
pub const THREADS: u32 = 128;
/// Spectra one post-processing thread handles (so the heap size must be a multiple).
pub const SPECTRA_PER_POST_THREAD: u32 = 4;
/// Spectra a FIR thread computes together (a batch: one staging slot of new rows, one barrier;
/// its window holds `taps + batch - 1` sample pairs), by compiled tap count. 16 taps: 16 (on
/// the H200 batches of 16 beat 8 by 3%, at four blocks per SM instead of five: the per-batch
/// barrier and bookkeeping cost more than the occupancy).
pub const fn fir_batch(variant_taps: u32) -> u32 {
    match variant_taps {
        32.. => 4,
        16.. => 16,
        _ => 8,
    }
}
/// Ring slots of staged rows (batches): `FIR_STAGES - 1` batches load while one is read.
pub const FIR_STAGES: u32 = 4;
/// Input buffers are u32 words; every launch's sample base is a multiple of this.
pub const SAMPLE_GRANULE: u32 = 32;

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

/// Register caps (`.maxnreg`, applied by the root `build.rs`): the fused kernels'
/// ([`fused::fused_max_registers`]: three or two blocks of 256 threads per SM) and the post
/// kernels' 96 (five blocks per SM; uncapped, ptxas gives the int8 kernel 128 on sm_90, four
/// blocks, without spilling at 96). The FIRs are uncapped: the 16-tap FIR with batches of 16
/// takes 128 registers on sm_90 (four blocks per SM; a cap of 96 for five spilled). The
/// cluster kernels launch at [`cluster::CLUSTER_LAUNCH_REGISTERS`] (then `setmaxnreg`).
pub const REGISTER_LIMITS: [(&str, u32); 20] = {
    let mut limits = [("", 0); 20];
    let mut i = 0;
    while i < 10 {
        let taps = FIR_VARIANTS[i % 5];
        limits[i] = (fused::fused_kernel_name(taps, i >= 5), fused::fused_max_registers(taps));
        i += 1;
    }
    limits[10] = (post_kernel_name(false), 96);
    limits[11] = (post_kernel_name(true), 96);
    while i < 18 {
        limits[i + 2] = (cluster::CLUSTER_KERNELS[i - 10], cluster::CLUSTER_LAUNCH_REGISTERS);
        i += 1;
    }
    limits
};

pub const fn fir_kernel_name(variant_taps: u32) -> &'static str {
    match variant_taps {
        1 => "pfb_fir_t1",
        4 => "pfb_fir_t4",
        8 => "pfb_fir_t8",
        16 => "pfb_fir_t16",
        _ => "pfb_fir_t32",
    }
}

pub const fn post_kernel_name(int4: bool) -> &'static str {
    if int4 {
        "pfb_post_ci4"
    } else {
        "pfb_post_ci8"
    }
}

/// Spectra per FIR thread (seed sec. 3.4, tuned on the H200): each thread computes at least
/// 32T real outputs (16T spectra of its two columns; the seed's 8T left the staged kernel 8%
/// slower: more window reloads and block prologues) unless that leaves fewer than 2^17
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
/// With `warp_rows` and a full block, warp w takes pairs `4 l + w` (l its lanes): z[q] goes to
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
/// (one offset load per lane instead of `batch` per thread). Measured (and tested) only at 16
/// taps on the H200, where row-per-warp and the vote took the FIR from 0.628 to 0.584 ms at
/// n = 32768 with batches of 16, and the register window from 0.584 to 0.437 ms.
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

/// Log2 of the columns of a post block's tile (16 columns by 8 groups of 4 spectra): on the
/// H200 at n = 32768 the post kernel took 0.438 ms against 0.455 (8 columns), 0.557 (32),
/// 0.659 (128) and 0.678 for the earlier blocks of 128 consecutive columns of one group,
/// whose channel-major output left in 16-byte pieces 1 KB apart; n = 1024 and 4096 were
/// fastest at 16 too (and 8 columns were 5-6% slower again with the kernel of
/// [`post_thread_columns`]).
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

// -------------------------------------------------------------------------------------------
// Post-processing arithmetic, identical on the host (CPU tests) and the device.

pub type C32 = [f32; 2];

/// `fma(a, b, -(c d))`. On the device one inline block: LLVM moves the negation onto `d`,
/// and where `d` was loaded or shuffled (an integer register to LLVM) it becomes an integer
/// `xor` (a `LOP3` per product in the SASS) instead of the `FFMA` operand modifier it is here.
#[inline(always)]
fn fma_minus_product(a: f32, b: f32, c: f32, d: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: pure ALU instructions.
        unsafe {
            core::arch::asm!("{{ .reg .f32 t; mul.rn.f32 t, {3}, {4}; neg.f32 t, t; fma.rn.f32 {0}, {1}, {2}, t; }}",
                out(reg32) out, in(reg32) a, in(reg32) b, in(reg32) c, in(reg32) d, options(pure, nomem, nostack))
        };
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    fma_f32(a, b, -(c * d))
}

/// Complex product with two FMAs (Rust never contracts `a * b + c` by itself).
#[inline(always)]
pub fn cmul(a: C32, b: C32) -> C32 {
    [fma_minus_product(a[0], b[0], a[1], b[1]), fma_f32(a[0], b[1], a[1] * b[0])]
}

/// `a * conj(b)`.
#[inline(always)]
pub fn cmul_conj(a: C32, b: C32) -> C32 {
    [fma_f32(a[0], b[0], a[1] * b[1]), fma_minus_product(a[1], b[0], a[0], b[1])]
}

#[inline(always)]
pub(crate) fn cadd(a: C32, b: C32) -> C32 {
    [a[0] + b[0], a[1] + b[1]]
}

#[inline(always)]
pub(crate) fn csub(a: C32, b: C32) -> C32 {
    [a[0] - b[0], a[1] - b[1]]
}

/// `-j x`.
#[inline(always)]
pub(crate) fn mul_neg_j(x: C32) -> C32 {
    [x[1], -x[0]]
}

/// `exp(j pi x)` as a complex value.
#[inline(always)]
pub fn expj_pi(x: f32) -> C32 {
    let (s, c) = sincospi(x);
    [c, s]
}

/// The fine-delay and fringe rotations `exp(j pi (phase - fine k / n))` of channels
/// `u + a v` and `w + a v` (v = 0..4, w the second column of [`post_columns`]), from the
/// spectrum's `fringe = exp(j pi phase)` and `step = exp(-j pi fine / 4)` (precomputed on the
/// host in f64) and one short polynomial: `|fine u / n| <= 1/16` needs no range reduction,
/// and the mirror's `exp(-j pi fine w / n) = step conj(exp(-j pi fine u / n))` (thread 0's
/// column n/8 gets the polynomial, its column 0 the fringe alone).
#[inline(always)]
pub fn rotations(u: u32, channels: u32, fine: f32, fringe: C32, step: C32) -> ([C32; 4], [C32; 4]) {
    // Thread 0's second column is n/8 ([`post_columns`]): its own polynomial, |fine / 8| <= 1/16.
    let x = if u == 0 { 0.125 } else { u as f32 / channels as f32 };
    let (s, c) = sincospi_reduced(-fine * x);
    let ru = [c, s];
    let rot = if u == 0 { fringe } else { cmul(fringe, ru) };
    let rotm = cmul(fringe, if u == 0 { ru } else { cmul_conj(step, ru) });
    // Written out, not looped (see `post_pair`).
    let (rot1, rotm1) = (cmul(rot, step), cmul(rotm, step));
    let (rot2, rotm2) = (cmul(rot1, step), cmul(rotm1, step));
    let (rot3, rotm3) = (cmul(rot2, step), cmul(rotm2, step));
    ([rot, rot1, rot2, rot3], [rotm, rotm1, rotm2, rotm3])
}

/// Twiddles of column `u`: `W_n^(u r)` for rows r = 1, 2, 3, and `exp(-j pi u / n)`.
#[inline(always)]
pub fn column_twiddles(u: u32, channels: u32) -> ([C32; 3], C32) {
    let x = u as f32 / channels as f32; // exact: n is a power of two
    ([expj_pi(-2.0 * x), expj_pi(-4.0 * x), expj_pi(-6.0 * x)], expj_pi(-x))
}

/// Steps 3-5 of the six-step FFT for one column: twiddles, then the 4-point DFT across the
/// rows: `Z[u + a v] = sum_r (-j)^(v r) W_n^(u r) Y_r[u]`.
#[inline(always)]
pub fn unzip_column(y: [C32; 4], twiddles: &[C32; 3]) -> [C32; 4] {
    let a0 = y[0];
    let a1 = cmul(y[1], twiddles[0]);
    let a2 = cmul(y[2], twiddles[1]);
    let a3 = cmul(y[3], twiddles[2]);
    let (s02, d02) = (cadd(a0, a2), csub(a0, a2));
    let (s13, d13) = (cadd(a1, a3), mul_neg_j(csub(a1, a3)));
    [cadd(s02, s13), cadd(d02, d13), csub(s02, s13), csub(d02, d13)]
}

/// `exp(-j pi v / 4)` for v = 0..4 (the row part of the R2C twiddle of channel `u + a v`).
const ROW_TWIDDLE: [C32; 4] = [
    [1.0, 0.0],
    [core::f32::consts::FRAC_1_SQRT_2, -core::f32::consts::FRAC_1_SQRT_2],
    [0.0, -1.0],
    [-core::f32::consts::FRAC_1_SQRT_2, -core::f32::consts::FRAC_1_SQRT_2],
];

/// R2C fix-up of one channel: `X = (z + m*) / 2 - j/2 t (z - m*)` with `z = Z[k]`,
/// `m = Z[n-k]`, `t = exp(-j pi k / n)`.
#[inline(always)]
pub fn r2c_fixup(z: C32, m: C32, t: C32) -> C32 {
    let even = [0.5 * (z[0] + m[0]), 0.5 * (z[1] - m[1])];
    let odd = [0.5 * (z[0] - m[0]), 0.5 * (z[1] + m[1])];
    cadd(even, mul_neg_j(cmul(t, odd)))
}

/// The R2C fix-up of channel `k` and of its mirror `n - k` at once, from `z = Z[k]`,
/// `m = Z[n-k]` and `t = exp(-j pi k / n)`: with `even = (z + m*) / 2`, `odd = (z - m*) / 2`
/// and `p = t odd`, `X[k] = even - j p` ([`r2c_fixup`], bit for bit) and
/// `X[n-k] = conj(even + j p)`: one complex product for both. The second is
/// `r2c_fixup(m, z, -conj(t))` bit for bit (its halves and product are these, negated
/// exactly), `-conj(t)` being the mirror's twiddle.
#[inline(always)]
pub fn r2c_fixup_pair(z: C32, m: C32, t: C32) -> (C32, C32) {
    let even = [0.5 * (z[0] + m[0]), 0.5 * (z[1] - m[1])];
    let odd = [0.5 * (z[0] - m[0]), 0.5 * (z[1] + m[1])];
    fixup_from_halves(even, odd, t)
}

/// Twice [`r2c_fixup_pair`], bit for bit (the halves are exact, so the caller folds them into
/// its gains).
#[inline(always)]
pub fn r2c_fixup_pair_x2(z: C32, m: C32, t: C32) -> (C32, C32) {
    let even = [z[0] + m[0], z[1] - m[1]];
    let odd = [z[0] - m[0], z[1] + m[1]];
    fixup_from_halves(even, odd, t)
}

#[inline(always)]
fn fixup_from_halves(even: C32, odd: C32, t: C32) -> (C32, C32) {
    let p = cmul(t, odd);
    ([even[0] + p[1], even[1] - p[0]], [even[0] - p[1], -(even[1] + p[0])])
}

/// The R2C twiddles `exp(-j pi (col + a v) / n)` of channels `col` and `col + a` (v = 0, 1)
/// from the column's `e = exp(-j pi col / n)`, as [`fixup_pair`] forms them (so a table of
/// them gives its values bit for bit).
#[inline(always)]
pub fn r2c_twiddles(e: C32) -> [C32; 2] {
    [e, cmul(e, ROW_TWIDDLE[1])]
}

/// The R2C fix-up of channels `u + a v` and `w + a v` (v = 0..4; `w` from [`post_columns`])
/// from the unzipped values `z[v] = Z[u + a v]`, `zm[v] = Z[w + a v]` and the columns'
/// twiddles `e = exp(-j pi u / n)`, `em = exp(-j pi w / n)`. For u > 0 the mirror of
/// `u + a v` is `w + a (3 - v)`, and each mirrored pair is fixed up at once
/// ([`r2c_fixup_pair`] or [`r2c_fixup_pair_x2`] as `fixup`) with the twiddle of its channel
/// `u`, `u + a`, `w` or `w + a` ([`fixup_columns`]). For u = 0 (columns 0 and n/8): channels 0
/// and 2a are their own mirrors, a and 3a each other's, and in column n/8 `n/8 + a v` and
/// `n/8 + a (3 - v)`. Shared by the three-kernel post ([`post_pair`]) and the fused kernels.
#[inline(always)]
pub fn fixup_pair(
    u: u32,
    z: [C32; 4],
    zm: [C32; 4],
    e: C32,
    em: C32,
    fixup: impl Fn(C32, C32, C32) -> (C32, C32),
) -> ([C32; 4], [C32; 4]) {
    let first = u == 0;
    // Selecting the values, not the arrays: a select of two arrays became a select of their
    // addresses, which puts them in local memory.
    let pick =
        |first: bool, a: C32, b: C32| [if first { a[0] } else { b[0] }, if first { a[1] } else { b[1] }];
    let (t, tm) = (r2c_twiddles(e), r2c_twiddles(em));
    let a = fixup(z[0], pick(first, z[0], zm[3]), t[0]);
    let b = fixup(z[1], pick(first, z[3], zm[2]), t[1]);
    let c = fixup(zm[0], pick(first, zm[3], z[3]), tm[0]);
    let d = fixup(zm[1], pick(first, zm[2], z[2]), tm[1]);
    // Column 0's channel 2a, its own mirror (unused for u > 0).
    let own = fixup(z[2], z[2], cmul(e, ROW_TWIDDLE[2])).0;
    let x = [a.0, b.0, pick(first, own, d.1), pick(first, b.1, c.1)];
    let xm = [c.0, d.0, pick(first, d.1, b.1), pick(first, c.1, a.1)];
    (x, xm)
}

/// [`fixup_pair`] for u > 0 from the channels' R2C twiddles `t` (of `u`, [`r2c_twiddles`])
/// and `tm` (of `w`). For `u = w` (column n/8 as its own mirror, with `tm = t`) both halves
/// are the same values, bit for bit.
#[inline(always)]
pub fn fixup_columns(
    z: [C32; 4],
    zm: [C32; 4],
    t: &[C32; 2],
    tm: &[C32; 2],
    fixup: impl Fn(C32, C32, C32) -> (C32, C32),
) -> ([C32; 4], [C32; 4]) {
    let a = fixup(z[0], zm[3], t[0]);
    let b = fixup(z[1], zm[2], t[1]);
    let c = fixup(zm[0], z[3], tm[0]);
    let d = fixup(zm[1], z[2], tm[1]);
    ([a.0, b.0, d.1, c.1], [c.0, d.0, b.1, a.1])
}

/// The spectra of column `u` and its mirror `w` (see [`post_columns`]): from the FFT rows
/// `y[r]` at column u and `ym[r]` at column w, channels `u + a v` and `w + a v` for v = 0..4.
/// `tw`/`twm` and `e`/`em` are the columns' [`column_twiddles`].
#[inline(always)]
pub fn post_pair(
    u: u32,
    y: [C32; 4],
    ym: [C32; 4],
    tw: &[C32; 3],
    twm: &[C32; 3],
    e: C32,
    em: C32,
) -> ([C32; 4], [C32; 4]) {
    fixup_pair(u, unzip_column(y, tw), unzip_column(ym, twm), e, em, r2c_fixup_pair)
}

/// Twice [`post_pair`], bit for bit ([`r2c_fixup_pair_x2`]).
#[inline(always)]
pub fn post_pair_x2(
    u: u32,
    y: [C32; 4],
    ym: [C32; 4],
    tw: &[C32; 3],
    twm: &[C32; 3],
    e: C32,
    em: C32,
) -> ([C32; 4], [C32; 4]) {
    fixup_pair(u, unzip_column(y, tw), unzip_column(ym, twm), e, em, r2c_fixup_pair_x2)
}

/// The two columns post thread `t` (`0 <= t < n/8`) owns: `u = t + 1` and its mirror
/// `n/4 - u`. The last thread (`u = n/8`) has one column, its own mirror, twice; column 0 (its
/// own mirror within the column) has no thread: the post kernel's first tile of blocks
/// computes it apart ([`post_columns`] gives thread 0 both self-mirrored columns instead, which
/// costs a divergent second loop in every warp of that tile: 9% more warp instructions at
/// n = 1024).
pub const fn post_thread_columns(t: u32, channels: u32) -> (u32, u32) {
    let u = t + 1;
    (u, channels / UNZIP - u)
}

/// [`rotations`] for the columns of [`post_thread_columns`] (`u >= 1`): for `u = n/8` the
/// mirror's rotations are the column's own, bit for bit, so both halves of that thread give
/// the same values (its saturation counts are halved).
#[inline(always)]
pub fn post_rotations(u: u32, channels: u32, fine: f32, fringe: C32, step: C32) -> ([C32; 4], [C32; 4]) {
    let x = u as f32 / channels as f32;
    let (s, c) = sincospi_reduced(-fine * x);
    let ru = [c, s];
    let rot = cmul(fringe, ru);
    let other = cmul_conj(step, ru);
    let own = 8 * u == channels;
    let rotm = cmul(fringe, [if own { ru[0] } else { other[0] }, if own { ru[1] } else { other[1] }]);
    let (rot1, rotm1) = (cmul(rot, step), cmul(rotm, step));
    let (rot2, rotm2) = (cmul(rot1, step), cmul(rotm1, step));
    let (rot3, rotm3) = (cmul(rot2, step), cmul(rotm2, step));
    ([rot, rot1, rot2, rot3], [rotm, rotm1, rotm2, rotm3])
}

/// Round to nearest even and saturate to `[-max, max]`; returns the value and whether it
/// clipped. NaN gives 0 and counts as clipped.
#[inline(always)]
pub fn quantise(v: f32, max: i32) -> (i32, bool) {
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_s32_f32(v);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = crate::delay_beamformer::rint_f32(v) as i32; // saturating cast, NaN -> 0
    let q = saturate_symmetric(r, max);
    (q, q != r || v.is_nan())
}

/// `rint(v)` saturated to [-128, 127], NaN to 0: one conversion on the device.
#[inline(always)]
fn rint_sat_s8(v: f32) -> i32 {
    #[cfg(target_arch = "nvptx64")]
    let r = crate::intrinsics::cvt_rni_sat_s8_f32(v);
    #[cfg(not(target_arch = "nvptx64"))]
    let r = (crate::delay_beamformer::rint_f32(v) as i32).clamp(-128, 127); // `as`: NaN -> 0
    r
}

/// 1 when the larger magnitude of `x`'s components reaches `limit` or either is NaN, else 0.
#[inline(always)]
fn clips(x: C32, limit: f32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    let c = 0u32.wrapping_sub(crate::intrinsics::abs_max_at_least(x[0], x[1], limit));
    #[cfg(not(target_arch = "nvptx64"))]
    let c = (x[0].is_nan() || x[1].is_nan() || x[0].abs().max(x[1].abs()) >= limit) as u32;
    c
}

/// One output value: quantised complex and 1 if it saturated (else 0). int8: two bytes
/// (re, im) in bits 0..16; int4: one byte, re in the low nibble. Each component is
/// [`quantise`]'s, with fewer instructions: a saturating conversion and a bound, and one
/// compare for both components, since a component clips exactly when `|v| >= max + 1/2`
/// (round to nearest even takes `max + 1/2` to the even `max + 1`). Non-finite components: an
/// infinity saturates to `+-max` and NaN gives 0, and both count as clipped (the host's
/// `quantise_reference` does the same; the host bounds weights and gains so that neither
/// arises).
#[inline(always)]
pub fn quantise_complex(x: C32, int4: bool) -> (u32, u32) {
    let bound = |v: f32| {
        let r = rint_sat_s8(v);
        if int4 {
            r.clamp(-7, 7)
        } else {
            r.max(-127)
        }
    };
    let (re, im) = (bound(x[0]), bound(x[1]));
    let packed = if int4 {
        (re as u32 & 0xf) | ((im as u32 & 0xf) << 4)
    } else {
        (re as u32 & 0xff) | ((im as u32 & 0xff) << 8)
    };
    (packed, clips(x, if int4 { 7.5 } else { 127.5 }))
}

/// Complex f32 loads and stores of the PFB kernels (both PTX modules).
#[cfg(target_arch = "nvptx64")]
pub(crate) mod c32 {
    //! The loads give f32 registers, not bit patterns: LLVM turns the negation of a value
    //! reinterpreted from an integer into an integer `xor` (a `LOP3` in the SASS), where the
    //! negation of a float is a free operand modifier of the `FFMA` that uses it.
    use super::C32;
    use crate::intrinsics::st_shared_v2;
    use core::arch::asm;

    /// From an 8-byte aligned shared-window address.
    #[inline(always)]
    pub(crate) unsafe fn ld_c32(address: u32) -> C32 {
        let (x, y): (f32, f32);
        asm!("ld.shared.v2.f32 {{{0}, {1}}}, [{2}];", out(reg32) x, out(reg32) y, in(reg32) address,
            options(readonly, nostack));
        [x, y]
    }

    #[inline(always)]
    pub(crate) unsafe fn st_c32(address: u32, v: C32) {
        st_shared_v2(address, [v[0].to_bits(), v[1].to_bits()]);
    }

    /// Through the read-only path (for buffers no thread writes during the launch).
    #[inline(always)]
    pub(crate) unsafe fn ld_global_c32(ptr: *const [f32; 2]) -> C32 {
        let (x, y): (f32, f32);
        asm!("ld.global.nc.v2.f32 {{{0}, {1}}}, [{2}];", out(reg32) x, out(reg32) y, in(reg64) ptr,
            options(readonly, nostack));
        [x, y]
    }

    /// `ld.shared::cluster`: from the 8-byte aligned shared-window address `address` of block
    /// `rank` of the cluster (distributed shared memory, sm_90; `mapa` each load).
    ///
    /// # Safety
    /// `address` must lie inside the shared memory of block `rank`, which must still be running.
    #[cfg(radio_sm90a)]
    #[inline(always)]
    pub(crate) unsafe fn ld_cluster_c32(address: u32, rank: u32) -> C32 {
        let (x, y): (f32, f32);
        asm!("{{ .reg .b32 remote; mapa.shared::cluster.u32 remote, {2}, {3}; ld.shared::cluster.v2.f32 {{{0}, {1}}}, [remote]; }}",
            out(reg32) x, out(reg32) y, in(reg32) address, in(reg32) rank, options(readonly, nostack));
        [x, y]
    }

    /// `shfl.sync.idx` of an f32 over the full warp.
    #[inline(always)]
    pub(crate) fn shfl_idx_f32(value: f32, src_lane: u32) -> f32 {
        let out: f32;
        // SAFETY: warp-collective over the full warp.
        unsafe {
            asm!("shfl.sync.idx.b32 {0}, {1}, {2}, 0x1f, 0xffffffff;", out(reg32) out, in(reg32) value,
                in(reg32) src_lane, options(nomem, nostack))
        };
        out
    }
}

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", not(radio_sm90a)))]
mod device {
    use super::c32::{ld_c32, ld_global_c32};
    use super::*;
    use crate::intrinsics::*;

    /// [`ld_global_c32`] asking the L2 to fetch the whole 256-byte block from DRAM: the post
    /// kernel's FFT reads (the kernel 1.7-1.9% faster on the H200 at n = 1024, 4096 and 32768
    /// than without the hint; streaming `.cs` stores of its output were not).
    #[inline(always)]
    unsafe fn load_c32_l2_256(ptr: *const [f32; 2]) -> [f32; 2] {
        let (x, y): (u32, u32);
        core::arch::asm!("ld.global.nc.L2::256B.v2.b32 {{{0}, {1}}}, [{2}];", out(reg32) x, out(reg32) y,
            in(reg64) ptr, options(readonly, nostack));
        [f32::from_bits(x), f32::from_bits(y)]
    }

    /// FIR body with `TV` compiled taps (the first `TV - taps` slots have zero weights),
    /// batches of `B` spectra and a ring of `S` batches of staged rows.
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
    unsafe fn fir<const TV: usize, const B: usize, const S: usize>(
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

    macro_rules! fir_kernel {
        ($name:ident, $tv:literal) => {
            /// See the module documentation and [`fir`]. 1-D blocks of `fir_block_width(n)`
            /// threads over `channels * ceil(spectra / per_thread)` threads (x) and 2
            /// polarisations (y); `fir_shared_bytes(bits, width, TV)` bytes of dynamic shared
            /// memory.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(
                input0: *const u32,
                input1: *const u32,
                offsets: *const u32,
                weights: *const f32,
                out: *mut [f32; 2],
                channels: u32,
                taps: u32,
                spectra: u32,
                per_thread: u32,
                bits: u32,
            ) {
                let inputs = [input0, input1];
                if fir_warp_rows($tv) {
                    fir_rw::<$tv, { fir_batch($tv) as usize }, { FIR_STAGES as usize }>(
                        inputs, offsets, weights, out, channels, taps, spectra, per_thread, bits,
                    );
                } else {
                    fir::<$tv, { fir_batch($tv) as usize }, { FIR_STAGES as usize }>(
                        inputs, offsets, weights, out, channels, taps, spectra, per_thread, bits,
                    );
                }
            }
        };
    }

    fir_kernel!(pfb_fir_t1, 1);
    fir_kernel!(pfb_fir_t4, 4);
    fir_kernel!(pfb_fir_t8, 8);
    fir_kernel!(pfb_fir_t16, 16);
    fir_kernel!(pfb_fir_t32, 32);

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
    unsafe fn fir_rw<const TV: usize, const B: usize, const S: usize>(
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
        // FIR ran 2-3% slower on the H200.
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
        let out = out.add((pol * spectra) as usize * channels as usize + fft_index(q, channels) as usize)
            as *mut u32;
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
    unsafe fn post<const INT4: bool>(
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
        // per SM; 96 and five with the gains in shared memory): on the H200 at n = 32768 that
        // beat one (spectrum, polarisation) per iteration
        // (72 registers, seven blocks) by 8% and a polarisation-outer loop with the gains
        // loaded once per polarisation (96, five) by 4%, though both were up to 7% faster at
        // n = 1024 and 4096.
        let scratch = dynamic_shared();
        // Saturated values of pol 0 in the low half, pol 1 in the high half (at most 32 each);
        // thread u = n/8 counted its one column twice.
        let clipped = {
            let c =
                post_loop::<INT4>(u, fft, gains_shared, fine, rotation, scratch, tid, channels, spectra, s0);
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

    macro_rules! post_kernel {
        ($name:ident, $int4:literal) => {
            /// See the module documentation (int4 output when the name says ci4). 1-D blocks of
            /// `THREADS` threads, `post_blocks(n, spectra, tile_log2)` blocks;
            /// `POST_SHARED_BYTES` bytes of dynamic shared memory.
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(
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
                post::<$int4>(
                    fft,
                    gains,
                    fine,
                    rotation,
                    out,
                    saturated,
                    channels,
                    spectra,
                    spectra_per_heap,
                    tile_log2,
                );
            }
        };
    }

    post_kernel!(pfb_post_ci8, false);
    post_kernel!(pfb_post_ci4, true);
}

use crate::modules::{Arch, Family, KernelSpec};

/// The family's kernels: every entry point of its PTX modules, with what `build.rs` adds to
/// each (register cap, cluster shape) and what the host launches it with.
pub const KERNELS: &[KernelSpec] = &[
    KernelSpec::new("pfb_fir_t1", Family::Pfb, Arch::Sm80),
    KernelSpec::new("pfb_fir_t16", Family::Pfb, Arch::Sm80),
    KernelSpec::new("pfb_fir_t32", Family::Pfb, Arch::Sm80),
    KernelSpec::new("pfb_fir_t4", Family::Pfb, Arch::Sm80),
    KernelSpec::new("pfb_fir_t8", Family::Pfb, Arch::Sm80),
    KernelSpec::new("pfb_fused_t16_ci4", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t16_ci8", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t1_ci4", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t1_ci8", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t32_ci4", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t32_ci8", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t4_ci4", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t4_ci8", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t8_ci4", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_fused_t8_ci8", Family::Pfb, Arch::Sm80).max_registers(128),
    KernelSpec::new("pfb_post_ci4", Family::Pfb, Arch::Sm80).max_registers(96),
    KernelSpec::new("pfb_post_ci8", Family::Pfb, Arch::Sm80).max_registers(96),
    KernelSpec::new("pfb_cluster_t16_ci4", Family::Pfb, Arch::Sm90a).max_registers(128).cluster(4, 1, 1),
    KernelSpec::new("pfb_cluster_t16_ci8", Family::Pfb, Arch::Sm90a).max_registers(128).cluster(4, 1, 1),
    KernelSpec::new("pfb_cluster_t1_ci4", Family::Pfb, Arch::Sm90a).max_registers(128).cluster(4, 1, 1),
    KernelSpec::new("pfb_cluster_t1_ci8", Family::Pfb, Arch::Sm90a).max_registers(128).cluster(4, 1, 1),
    KernelSpec::new("pfb_cluster_t4_ci4", Family::Pfb, Arch::Sm90a).max_registers(128).cluster(4, 1, 1),
    KernelSpec::new("pfb_cluster_t4_ci8", Family::Pfb, Arch::Sm90a).max_registers(128).cluster(4, 1, 1),
    KernelSpec::new("pfb_cluster_t8_ci4", Family::Pfb, Arch::Sm90a).max_registers(128).cluster(4, 1, 1),
    KernelSpec::new("pfb_cluster_t8_ci8", Family::Pfb, Arch::Sm90a).max_registers(128).cluster(4, 1, 1),
];
