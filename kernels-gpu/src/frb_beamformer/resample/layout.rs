//! The resampler's pure layout and index functions, shared by the device kernels, the host
//! launchers and the CPU tests: the sm_80 GEMM's tiling and swizzle, the `wgmma` W-path
//! GEMM's tiles and staged J, and the transposed fused kernel's fragments, periods, tiles and
//! staged J (the parent module's docs give the formula and the layouts they serve).

// --- U and W (eq. 7), for every kernel.
/// Threads per block of the U kernel (one per (f, x, beta), beta fastest).
pub const U_THREADS: u32 = 128;

/// Warps (beams) per block of the W kernel.
pub const WEIGHT_WARPS: u32 = 4;
/// Largest 2M or 2N of the cases of Smith, CHORD FRB beamformer design note (2022) (Table 2: M, N <= 24).
pub const MAX_HALF_GRID: u32 = 48;

/// Largest accepted |theta| of a beam position (grid units): over 100x the largest
/// physical position of eq. 1. [`u_function`] forms U in f32 from `2 theta`, which overflows
/// to infinity (and U to NaN) near `|theta| = 2^127`; within the bound f32 still resolves
/// 2^-11 grid units.
pub const MAX_ABS_POSITION: f32 = 4096.0;

/// Whether a beam position is one the W and U kernels accept: finite and within
/// [`MAX_ABS_POSITION`] (NaN fails the comparison).
#[inline(always)]
pub fn position_ok(theta: f32) -> bool {
    theta.abs() <= MAX_ABS_POSITION
}

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

// --- The sm_80 GEMMs (`mma.sync`): tiling, swizzle, fragments.

/// One tiling of the resampling GEMM: warps of `16 mt` rows x `8 nt` beams, `wr` x `wc` of
/// them per block, k-steps of `bk`, a ring of `stages` shared-memory buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// The W-path GEMM entry point of this tiling (the registry's [`super::GEMM_KERNEL`]; the
    /// device code's own copies are unnamed).
    pub name: &'static str,
    /// m16 fragments per warp along tbar: a warp computes `16 mt` rows of J.
    pub mt: u32,
    /// n8 fragments per warp along the beams: a warp computes `8 nt` beams of J.
    pub nt: u32,
    /// Warp rows per block (along tbar).
    pub wr: u32,
    /// Warp columns per block (along the beams).
    pub wc: u32,
    /// K per stage in rho values (f16), 32 or 64: `bk / 16` m16n8k16 k-steps per
    /// shared-memory buffer, rows of `2 bk` bytes.
    pub bk: u32,
    /// Buffers in the `cp.async` ring (copies run `stages - 1` stages ahead).
    pub stages: u32,
}

impl GemmShape {
    /// Block tile rows (tbar).
    pub const fn bm(&self) -> u32 {
        16 * self.mt * self.wr
    }
    /// Block tile columns (beams).
    pub const fn bn(&self) -> u32 {
        8 * self.nt * self.wc
    }
    /// Threads per block, `32 wr wc`.
    pub const fn threads(&self) -> u32 {
        32 * self.wr * self.wc
    }
    /// Warp `warp`'s tile origin in the block tile: (row, beam), warps row-major over
    /// `wr` x `wc`.
    pub const fn warp_origin(&self, warp: u32) -> (u32, u32) {
        (16 * self.mt * (warp / self.wc), 8 * self.nt * (warp % self.wc))
    }
    /// Bytes of one operand row of one stage.
    pub const fn row_bytes(&self) -> u32 {
        2 * self.bk
    }
    /// Bytes of one stage (A then B tile).
    pub const fn stage_bytes(&self) -> u32 {
        (self.bm() + self.bn()) * self.row_bytes()
    }
    /// Dynamic shared memory of the kernel: the ring.
    pub const fn smem_bytes(&self) -> u32 {
        self.stages * self.stage_bytes()
    }
    /// 16-byte chunks per operand row of a stage.
    pub const fn chunks_per_row(&self) -> u32 {
        self.bk / 8
    }
    /// Rows between one thread's successive copies: the block copies `threads` chunks at once.
    pub const fn copy_row_stride(&self) -> u32 {
        self.threads() / self.chunks_per_row()
    }
    /// 16-byte copies per thread per stage for `rows` rows of an operand (the last one only
    /// for the threads whose row is below `rows`).
    pub const fn copies(&self, rows: u32) -> u32 {
        rows.div_ceil(self.copy_row_stride())
    }
    /// The constraints the kernel relies on: at most 8 copies per thread and operand, row
    /// strides and warp row offsets that keep the swizzle pattern (multiples of 16 rows),
    /// `bk` 32 or 64, an even number of n-tiles (B is loaded two n-tiles per `ldmatrix.x4`),
    /// >= 2 stages.
    pub const fn is_valid(&self) -> bool {
        (self.bk == 32 || self.bk == 64)
            && self.nt.is_multiple_of(2)
            && self.stages >= 2
            && self.threads().is_multiple_of(self.chunks_per_row())
            && self.copy_row_stride().is_multiple_of(16)
            && self.copies(self.bm()) <= 8
            && self.copies(self.bn()) <= 8
            && self.smem_bytes() <= 227 * 1024
    }
}

/// The production tiling: 128 x 256 blocks of 8 warps of 64 x 64, k-steps of 32, a ring of
/// 4 stages (96 KiB, 1 block per SM), chosen by measurement among the valid tilings.
pub const GEMM: GemmShape =
    GemmShape { name: "frb_resample_gemm", mt: 4, nt: 8, wr: 2, wc: 4, bk: 32, stages: 4 };

const _: () = assert!(GEMM.is_valid());
// The fused path forms B row `t` (one beam) in thread `t`.
const _: () = assert!(GEMM.bn() == GEMM.threads());
// J leaves as the wgmma W GEMM's does: the 128 x 256 tile staged in the ring at
// [`staged_offset`], copied out by 256 threads (`store_j::<2>`).
const _: () = assert!(GEMM.bm() == HOPPER_BM && GEMM.bn() == HOPPER_BN);
const _: () = assert!(GEMM.threads() == HOPPER_THREADS);
const _: () = assert!(GEMM.bm() * GEMM.bn() * 2 <= GEMM.stages * GEMM.stage_bytes());

/// Dynamic shared memory of the fused GEMM for grid (M, N): the [`GEMM`] ring, then the beam
/// tile's U^M and U^N in f32 (192 KiB for (24, 24)).
pub const fn fused_smem_bytes(m: u32, n: u32) -> u32 {
    GEMM.smem_bytes() + 4 * GEMM.bn() * (2 * m + 2 * n)
}

/// Byte offset of `U_x` of beam `beam` (of a tile of `bn`) in an f32 `[x/4][beam][4]` array:
/// 16-byte chunks of 4 consecutive x per beam, so the prologue copies whole chunks and the B
/// writer reads `U^N_q .. U^N_{q+7}` of its beam with two 16-byte loads, lanes on consecutive
/// beams (conflict-free).
pub const fn fused_u_offset(x: u32, beam: u32, bn: u32) -> u32 {
    16 * ((x / 4) * bn + beam) + 4 * (x % 4)
}

/// Byte offset, within an operand tile of rows of `bk` halves (`2 bk` = 64 or 128 bytes), of
/// the 16-byte chunk `chunk` (k / 8) of row `row`: the tile is cut into 128-byte lines (two
/// rows of 64 bytes or one of 128) and chunk `c` of line `L` is stored at `c ^ (L % 8)`. The 8
/// rows one `ldmatrix` phase reads (8 consecutive rows from a multiple of 8, one logical chunk)
/// then hit 8 distinct chunk positions, i.e. all 32 banks once. Rows `R + r` with `R` a
/// multiple of 16 sit at `R * 2 bk + swizzled(r, ..)`.
pub const fn swizzled(row: u32, chunk: u32, bk: u32) -> u32 {
    let linear = row * 2 * bk + 16 * chunk;
    let line = linear / 128;
    let c = (linear / 16) % 8;
    128 * line + 16 * (c ^ (line % 8))
}

/// Tile offset of lane `lane`'s `ldmatrix.x4` row for the A block at rows `0 .. 16` (plus a
/// multiple of 16), k `16 ks .. +16`: lanes 0-15 rows 0..16 at k 16 ks, lanes 16-31 the same
/// rows at 16 ks + 8 (registers a0..a3 of m16n8k16).
pub const fn a_ldmatrix_offset(lane: u32, ks: u32, bk: u32) -> u32 {
    swizzled(lane % 16, 2 * ks + lane / 16, bk)
}

/// Tile offset of lane `lane`'s `ldmatrix.x4` row for two n-tiles of B (`[beam][k]` rows) at
/// beams `0 .. 16` (plus a multiple of 16), k `16 ks .. +16`: lanes 0-7 beams 0..8 at 16 ks,
/// 8-15 the same at 16 ks + 8, 16-23 beams 8..16 at 16 ks, 24-31 at 16 ks + 8, so the
/// registers are b0, b1 of the first n-tile, then b0, b1 of the second.
pub const fn b_ldmatrix_offset(lane: u32, ks: u32, bk: u32) -> u32 {
    swizzled(lane % 8 + 8 * (lane / 16), 2 * ks + (lane / 8) % 2, bk)
}

/// The chunk thread `thread` copies first into an operand tile: (row, chunk); its copy `j`
/// is `copy_row_stride() * j` rows further.
pub const fn copy_chunk(shape: &GemmShape, thread: u32) -> (u32, u32) {
    (thread / shape.chunks_per_row(), thread % shape.chunks_per_row())
}

// --- The `wgmma` W-path GEMMs: tiles, copies, staged J.

/// Block tile rows (tbar): two warpgroups of 64.
pub const HOPPER_BM: u32 = 128;
/// Block tile columns (beams): one `m64n256` per warpgroup.
pub const HOPPER_BN: u32 = 256;
/// K per stage, in halves: one 128-byte swizzle row.
pub const HOPPER_BK: u32 = 64;
/// Threads per block of the 2-warpgroup W-path GEMM: two consumer warpgroups, no producer.
pub const HOPPER_THREADS: u32 = 256;
/// Ring depth of the W-path kernel (copies 3 stages ahead).
pub const HOPPER_STAGES: u32 = 4;
/// Slack for rounding the dynamic shared memory's base up to 1024 bytes.
pub const HOPPER_ALIGN_SLACK: u32 = 1024;

/// Bytes of one stage: the A tile then the B tile, 128 bytes per row.
pub const fn hopper_stage_bytes() -> u32 {
    (HOPPER_BM + HOPPER_BN) * 2 * HOPPER_BK
}

/// Dynamic shared memory of the W-path kernel.
pub const fn hopper_smem_bytes() -> u32 {
    HOPPER_STAGES * hopper_stage_bytes() + HOPPER_ALIGN_SLACK
}

/// Bytes of one stage of the `WG`-warpgroup GEMM (tile `64 WG` x [`HOPPER_BN`]): A then B.
pub const fn gemm_stage_bytes(warpgroups: u32) -> u32 {
    (64 * warpgroups + HOPPER_BN) * 2 * HOPPER_BK
}

/// Offset of the B tile within a stage of the `WG`-warpgroup GEMM (whole 1024-byte atoms).
pub const fn gemm_b_offset(warpgroups: u32) -> u32 {
    64 * warpgroups * 2 * HOPPER_BK
}

/// Warpgroups and ring depth of the wide GEMMs (tile 192 x 256, 384 threads): a third more
/// MMA work per byte of I and W tiles pulled from L2 than the 128 x 256 tile.
pub const WIDE_WARPGROUPS: u32 = 3;
/// Threads per block of the wide GEMMs, 384.
pub const WIDE_THREADS: u32 = 128 * WIDE_WARPGROUPS;
/// Block tile rows (tbar) of the wide GEMMs, 192: one `m64n256` per warpgroup.
pub const WIDE_BM: u32 = 64 * WIDE_WARPGROUPS;
/// Ring depth of the wide W-path GEMM (copies 3 stages ahead).
pub const WIDE_STAGES: u32 = 4;

/// Dynamic shared memory of the wide W-path GEMM.
pub const fn wide_smem_bytes() -> u32 {
    WIDE_STAGES * gemm_stage_bytes(WIDE_WARPGROUPS) + HOPPER_ALIGN_SLACK
}

/// The 16-byte chunk thread `thread` of a `WG`-warpgroup block copies in copy `j` of an
/// operand tile: (row, chunk); eight threads per 128-byte row.
pub const fn gemm_copy_chunk(warpgroups: u32, thread: u32, j: u32) -> (u32, u32) {
    (thread / 8 + 16 * warpgroups * j, thread % 8)
}

/// The 16-byte chunk thread `thread` copies in copy `j` of an operand tile: (row, chunk).
/// Eight threads cover one 128-byte row, so a warp's copy fills 4 rows and, the 8 lanes of a
/// phase hitting distinct swizzled chunks of one row, stores without bank conflicts.
pub const fn hopper_copy_chunk(thread: u32, j: u32) -> (u32, u32) {
    (thread / 8 + (HOPPER_THREADS / 8) * j, thread % 8)
}

/// Copies per thread per stage of an operand tile of `rows` rows.
pub const fn hopper_copies(rows: u32) -> u32 {
    rows * 8 / HOPPER_THREADS
}

/// Offset of warpgroup `w`'s A rows (and of the B tile) within a stage: whole 1024-byte
/// atoms, as the descriptors require.
pub const fn hopper_a_offset(warpgroup: u32) -> u32 {
    64 * warpgroup * 2 * HOPPER_BK
}
/// Offset of the B (W) tile within a stage of the 2-warpgroup GEMM: after the
/// [`HOPPER_BM`] rows of A, a whole number of 1024-byte atoms.
pub const fn hopper_b_offset() -> u32 {
    HOPPER_BM * 2 * HOPPER_BK
}

/// Byte offset of J's f16 element (row, col) of a block tile staged in shared memory for
/// the epilogue: rows of 512 bytes whose 16-byte chunks are XOR-swizzled by `row % 8`, so a
/// warp's accumulator pairs (8 rows, 4 words of one chunk each) hit 32 distinct banks and a
/// warp reading one row's 32 chunks takes the minimum 4 wavefronts.
pub const fn staged_offset(row: u32, col: u32) -> u32 {
    row * 2 * HOPPER_BN + 16 * ((col / 8) ^ (row % 8)) + 2 * (col % 8)
}

/// Register cap of the wide W-path GEMM (384 threads): 384 x 168 fit the SM's 65 536
/// registers (without a cap ptxas would take up to 255 and the block could not launch).
pub const WIDE_GEMM_REGISTERS: u32 = 168;
const _: () = assert!(WIDE_GEMM_REGISTERS * WIDE_THREADS <= 65536);

// --- The transposed fused kernel ("RS": W^T formed in registers as wgmma's A operand).

/// Register cap of the 3-warpgroup transposed kernels (384 threads): one block per SM.
pub const RS_WIDE_REGISTERS: u32 = 168;

/// The TMA instances (`RsKernel::tma`) launch at [`RS_TMA_LAUNCH_REGISTERS`] (`.maxnreg`,
/// which `build.rs` adds to each: 384 threads x 168 fill the register file), then the
/// producer warpgroup gives registers back and the consumers take them (`setmaxnreg`): the
/// consumers of the 248-slow-sample tile use about 230 (ptxas, sm_90a).
pub const RS_TMA_LAUNCH_REGISTERS: u32 = 168;
/// `setmaxnreg` target of the TMA instances' producer warpgroup, which only issues TMA
/// copies and waits on mbarriers.
pub const RS_PRODUCER_REGISTERS: u32 = 40;
/// `setmaxnreg` target of the TMA instances' two consumer warpgroups: 128 x 40 + 256 x 232
/// registers fit the 384 x [`RS_TMA_LAUNCH_REGISTERS`] the block launched with.
pub const RS_CONSUMER_REGISTERS: u32 = 232;
const _: () =
    assert!(128 * RS_PRODUCER_REGISTERS + 256 * RS_CONSUMER_REGISTERS <= 384 * RS_TMA_LAUNCH_REGISTERS);
/// The TMA instances' stagger: consumer warpgroup 1 starts each tile's main loop once
/// warpgroup 0 has issued this stage's first wgmma (a stage of 64 rho: 4 of each
/// warpgroup's k16 steps), so that each one's epilogue runs beside the other's wgmmas
/// ([`rs_tma_lead_fits`]).
pub const RS_TMA_LEAD: u32 = 2;

/// Whether a lead of `lead` stages works with a ring of `ring` slots and `steps` stages per
/// tile: less than the ring, which holds warpgroup 0's lead (the producer refills a slot
/// only once both warpgroups have released it; else a deadlock), and less than a tile; and
/// `steps + lead >= ring`, so that warpgroup 0 cannot reach the next tile's lead stage (its
/// next `bar.arrive` on barrier 4) before warpgroup 1 has passed this tile's `bar.sync`
/// (else two arrivals of warpgroup 0 would complete one phase of the barrier).
pub const fn rs_tma_lead_fits(ring: u32, steps: u32, lead: u32) -> bool {
    lead < ring && lead < steps && steps + lead >= ring
}

/// The period of the transposed fused kernel's unrolled k loop for grid N: (stages of 64 k,
/// quads of 4 p). A period is the fewest whole stages whose chunks (k / 8, `2N / 8 = n8` per p)
/// cover whole quads of p, so that every (p mod 4, q) in it is a constant and one 16-byte
/// load per beam and quad fetches U^M (`[p/4][beta][4]`).
pub const fn rs_period(n: u32) -> (u32, u32) {
    let n8 = n / 4;
    let mut stages = 1u32;
    while !(8 * stages).is_multiple_of(4 * n8) {
        stages += 1;
    }
    (stages, 8 * stages / (4 * n8))
}

/// A persistent block's tile after `tile`, its tiles `stride` apart in runs of `run`
/// consecutive ones (the resident form: the `tiles_y` beam tiles of a unit, `stride` =
/// `gridDim.x tiles_y`; otherwise runs of 1). The step to the next run saturates.
pub const fn rs_next_tile(tile: u32, stride: u32, run: u32) -> u32 {
    if !(tile + 1).is_multiple_of(run) {
        tile + 1
    } else {
        (tile + 1).saturating_add(stride - run)
    }
}

/// Chunk `chunk` (k / 8, k = 2N p + q) of grid N: (p, q of its first element).
pub const fn rs_chunk_pq(chunk: u32, n: u32) -> (u32, u32) {
    let n8 = n / 4;
    (chunk / n8, 8 * (chunk % n8))
}

/// The wgmma A fragment (m64k16, `mma.sync` m16n8k16's A per warp): lane `lane` register
/// `reg` (0..4) half `e` (0 low) of k16 step `step` holds `W^T[row][k]` of the warp's `row`
/// (0..16) and `k`: (row, k).
pub const fn rs_a_position(lane: u32, reg: u32, e: u32, step: u32) -> (u32, u32) {
    let (g, c) = (lane / 4, lane % 4);
    (g + 8 * (reg % 2), 16 * step + 8 * (reg / 2) + 2 * c + e)
}

/// Index of `U^N_{8 j + 2 c + e}` of the thread's beam `h` (rows g, g + 8) in its register
/// array (lane = 4 g + c): j < n8 = 2N / 8.
pub const fn rs_un_index(j: u32, h: u32, e: u32) -> u32 {
    (2 * j + h) * 2 + e
}

/// Byte offset of J's f16 element (slow-sample row `row`, beam `beam`) of the transposed
/// kernel's tile staged for the epilogue: rows of `2 beams` bytes (a multiple of 128), 16-byte
/// chunks of 8 beams XOR-swizzled by `row % 8`, so `stmatrix .trans` (8 rows of one beam chunk
/// per matrix) and the copy-out (8 consecutive chunks of a row per phase) are conflict-free.
pub const fn rs_staged_offset(row: u32, beam: u32, beams: u32) -> u32 {
    row * 2 * beams + 16 * ((beam / 8) ^ (row % 8)) + 2 * (beam % 8)
}

/// As [`rs_staged_offset`] for the TMA instances (two warpgroups): J's staged tile as two
/// halves of 64 beams, `nt` rows of 128 bytes each, in the 128-byte swizzle (chunk XOR
/// `row % 8`), the layout of the tensor store of each half. `stmatrix .trans` and the
/// copy-out (8 consecutive chunks of a row) stay conflict-free.
pub const fn rs_staged_offset_halves(row: u32, beam: u32, nt: u32) -> u32 {
    (beam / 64) * nt * 128 + row * 128 + 16 * (((beam % 64) / 8) ^ (row % 8)) + 2 * (beam % 8)
}

/// Byte offset of U^M_p of beam `beam` (within the tile of `beams`) in the shared U^M of the
/// 3-warpgroup kernels: the U kernel's `[p / 4][beam][4]` f32 layout, so that the tile
/// is copied in 16-byte chunks as stored. A warp's loads of one p (beams 16 w + g + 8 h, four
/// lanes c sharing each) touch 8 distinct 16-byte chunks: one wavefront.
pub const fn rs_um_offset(p: u32, beam: u32, beams: u32) -> u32 {
    16 * ((p / 4) * beams + beam) + 4 * (p % 4)
}

/// The slow-sample tile for `times` among `tiles` (the wgmma N of the instances of one
/// family): the fewest padded rows, ties to the larger tile. 917 -> 232 (4 x 232 = 928),
/// 980 -> 248 (992).
pub const fn rs_pick_tile(times: u32, tiles: &[u32]) -> u32 {
    let mut best = tiles[0];
    let mut i = 1;
    while i < tiles.len() {
        let (t, b) = (tiles[i], best);
        let (pt, pb) = (times.div_ceil(t) * t, times.div_ceil(b) * b);
        if pt < pb || (pt == pb && t > b) {
            best = t;
        }
        i += 1;
    }
    best
}
