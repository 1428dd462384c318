//! The resampling GEMM `J = I W` and its fused form on Hopper's warpgroup tensor cores
//! (`wgmma`, sm_90a; seed 000 sec. 5.2, issue 8), for the module `build.rs` compiles with
//! `--cfg radio_sm90a`. Same formula, layouts and results as the sm_80 kernels of the parent
//! module: I `[f][tbar][rho]`, W `[f][beta][rho]` (f16 bits), J `[f][tbar][beta]` f16.
//!
//! W path. Both operands are already K-major (rho contiguous), the form `wgmma` wants, so a
//! stage is a `64 WG x 64` tile of I and a `256 x 64` tile of W, each row 128 bytes in the 128-byte
//! swizzle ([`crate::wgmma::swizzle_128b`]; the sm_80 kernels' `swizzled(.., 64)` is the same
//! map). A block of `WG` warpgroups computes a `64 WG` (tbar) x [`HOPPER_BN`] (beam) tile:
//! warpgroup `w` rows `64 w .. 64 w + 63` with 4 `m64n256k16` per stage (128 f32 accumulators
//! per thread). All threads copy stages ahead with `cp.async` while the tensor cores run
//! stage `s`; one `wgmma` group stays in flight (`wgmma.wait_group 1`). After issuing stage
//! `s`, every thread waits for its group `s - 1` and the block meets a second barrier, so
//! stage `s + S - 1` can go into `s - 1`'s slot. J is staged in the ring ([`staged_offset`])
//! and stored in whole 16-byte chunks, a warp per 512-byte row: on the H200 the direct
//! fragment stores had cost 20% of the HIRAX time (BENCHMARKS.md).
//!
//! Two tiles: narrow, `WG` = 2 ([`HOPPER_BM`] = 128 rows, 256 threads, [`HOPPER_STAGES`] = 4);
//! a tile whose rows all lie in its first 64 (full CHORD's last, 21 of 128) is split by beams
//! instead (`m64n128`, half the wgmma work; the block-uniform branch keeps ptxas from
//! serialising the wgmmas, as a per-warpgroup skip did, C7518). Wide, `WG` = 3 ([`WIDE_BM`] =
//! 192 rows, 384 threads, `.maxnreg 168`): a third more MMA work per byte of I and W pulled
//! from L2, which bounds the narrow kernel near 7 TB/s. Its tiles are never split; instead a
//! warpgroup whose 64 rows all lie past the edge (HIRAX's 980 = 5 x 192 + 20: two of the
//! last tile's three) skips its wgmmas and J staging, which made the wide W GEMM 1.08-1.10x
//! faster for HIRAX on the H200. The host takes the wide tile where it pads no more rows
//! ([`use_wide_tile`]): a tile with idle warpgroups still pulls its whole W tile, so for HIRAX
//! the narrow one stays as fast.
//!
//! Fused path: the transposed GEMM `J^T[beta][tbar] = sum_k W^T[beta][k] I^T[k][tbar]`
//! (`frb_resample_fused_rsp2_n{N}_t{NT}_sm90a`, [`RS_KERNELS`]), with W^T formed in
//! registers as the A operand of `wgmma.mma_async.m64n{NT}k16.f32.f16.f16` in its RS form,
//! so W never exists in device or shared memory. M = beams: 2 warpgroups of 64 (128 beams
//! per block); N = a tile of NT slow samples, 232 or 248 ([`rs_pick_tile`]: 917 = 4 x 232 - 11,
//! 980 = 4 x 248 - 12); K = rho streamed in stages of 64. The B operand is I's rows
//! `[f][tbar][rho]`, K-major as stored, copied per stage by `cp.async` (zero-fill past the
//! last row) into a ring of 6 stages of `NT x 128` bytes in the 128-byte swizzle, 4 stages
//! ahead (one barrier per stage: every warpgroup has waited for stage `s - 2`'s groups before
//! the barrier of stage `s`). Only I crosses L2: 2 / 128 bytes per MAC, whatever N.
//!
//! A fragment (m64k16, `mma.sync` m16n8k16's A per warp; [`rs_a_position`]): warp `w` of a
//! warpgroup owns beams `16 w .. 16 w + 15`, lane `4 g + c` holds registers
//! (beam g, k 2c..2c+1), (beam g + 8, k 2c..), (beam g, k 2c + 8..), (beam g + 8, k 2c + 8..)
//! of each k16 step, each `cvt.rn.f16x2.f32` of two f32 products `U^M_p U^N_q` (the W
//! kernel's arithmetic, so W^T is the W path's W bit for bit). As 2N is a multiple of 8, a
//! thread only needs k = 8 m + 2c + e: chunk m (of 8 k) is p = m / n8, q = 8 (m % n8) + 2c + e
//! with n8 = 2N / 8 ([`rs_chunk_pq`]). The k loop is unrolled over a period ([`rs_period`]:
//! the fewest whole stages covering whole quads of 4 p, 1-5 stages), in which every (p mod 4, q)
//! is a constant; each thread keeps `U^N_{8 j + 2c + e}` of its two beams (4 n8 = N f32,
//! [`rs_un_index`]) for the whole tile and loads U^M of its two beams one 16-byte quad per
//! beam, a period ahead (the U kernel's `[f][p/4][beta][4]`). Per k16 step: `wgmma.fence`, the
//! RS wgmma, commit, `wait_group 1` (the previous step's A registers are then free), and the
//! next step's A (8 FMUL + 4 F2FP) in the shadow of the running wgmma. Beams past the last
//! have zero U^N (their W^T rows are +-0) and their J is not stored.
//!
//! Epilogue: the accumulators are J^T (thread: beams g, g + 8 of its warp, slow-sample pairs
//! 8 j + 2c, + 1). `stmatrix .trans` writes each 8 x 8 block transposed as 8 J rows of 8 beams
//! (16 bytes) into the ring's last `WG` slots ([`rs_staged_offset`]: rows of `2 x 64 WG` bytes, 16-byte
//! chunks XOR-swizzled by `row % 8`, conflict-free both ways), then whole 16-byte chunks of
//! J rows go to device memory. The kernel is persistent: one block per SM (up to 255
//! registers), each looping over every `gridDim.x`-th tile (slow-sample tile fastest, then
//! beam tile, then channel); a tile's first 4 stages are copied into slots 0-3 before the
//! previous tile's J is staged in slots 4-5 and stored, so the epilogue and the next tile's
//! pipeline fill overlap (1.07-1.24x for HIRAX square and pathfinder on the H200). On the
//! H200 the transposed kernel was 1.3-1.8x faster than the earlier fused kernel that formed W
//! in shared memory (bound by its LDS -> FMUL -> F2FP -> STS chains), and this `cp` form
//! 1.06-1.37x faster than the W path for full CHORD and both HIRAX cases (BENCHMARKS.md).
//! Its J equals the W path's bit for bit in every GPU test.
//! Measured slower or level on the H200 in this `cp` form (BENCHMARKS.md): a
//! ring running on across tiles with J staged apart and stored by `cp.async.bulk` (all
//! threads still meeting at every stage's barrier), a deeper ring, two wgmma groups in flight,
//! and a barrier every two stages. For HIRAX square the copies and the stage barriers cost
//! about 6% each, and the bare RS wgmma loop only matched cuBLAS; the TMA form below removes
//! both.
//!
//! TMA form (`frb_resample_fused_rsp2tma_n{16,20,24}_t{232,248}_sm90a`, [`RsKernel::tma`],
//! the production kernels for N = 16, 20 and 24: HIRAX and full CHORD): the same consumer
//! warpgroups and arithmetic, J bit for bit the same, with a producer warpgroup in front (384
//! threads, launched at [`RS_TMA_LAUNCH_REGISTERS`], then `setmaxnreg` gives the consumers
//! 232). Its thread 0 runs through the block's tiles copying each stage by one tensor copy
//! (`cp.async.bulk.tensor`, a tensor map of I from the host: box 64 rho x NT x 1 in the
//! 128-byte swizzle, rows past the last read as zero) into a ring of `S - 2` = 5 slots that
//! runs on across tiles, completing on the slot's `full` mbarrier, as soon as both consumer
//! warpgroups have released the slot on its `empty` mbarrier (after the wgmmas that read it).
//! The consumers issue no copies and meet no barrier per stage or around the epilogue: each
//! stages its own 64-beam half of J in its own slot after the ring (the 128-byte swizzle,
//! [`rs_staged_offset_halves`]), which leaves by one tensor store from its thread 0 (rows and
//! beams past the last are not written; thread stores where `beams` is not a multiple of 8),
//! and warpgroup 1 waits once per tile, before its main loop, for warpgroup 0 to issue the
//! tile's stage [`RS_TMA_LEAD`] (named barrier 4), so that either's epilogue, and the drain
//! and U loads around it, run beside the other's wgmmas. On the H200, under sustained load, this took HIRAX square from 1.07-1.08x
//! cuBLAS's time to 0.94-0.97x and HIRAX rect. from 1.02-1.03x to 0.93-0.94x, and full CHORD
//! to 0.91-0.93x (0.96-0.98x with the 192-beam kernel it replaces there; BENCHMARKS.md).
//! The earlier TMA form, whose two consumer warpgroups staged J together
//! in the ring's last two slots and met at a barrier around each epilogue, had run 1.04-1.08x
//! faster than the `cp` form for HIRAX. Measured and dropped on the way: the
//! tensor copies issued inline by a consumer thread (level), and 2-block clusters multicasting
//! each stage to both blocks (1.3-1.6x slower: the kernel is not bound by L2, ncu: L2
//! throughput 37%).
//!
//! Resident form (`frb_resample_fused_rsp2res_n8_t232_sm90a` and `_n12_t184_sm90a`,
//! [`RsKernel::resident`], the production kernels for the pathfinder grids): where the whole
//! K (256 or 384) fits the ring beside J's staging slots, a block takes a unit (slow-sample
//! tile, channel) at a time, copies its I tile once and runs every beam tile of the unit on
//! it (tiles in beam-fastest order), so I crosses L2 once per unit instead of once per beam
//! tile, with no barrier per stage. Each warpgroup works on its own 64 beams of each tile:
//! its U^M and U^N come a tile ahead by `cp.async` into its own two buffers
//! ([`RsKernel::u_ahead_offset`]; loaded from device memory, their latency had stalled every
//! period), it forms the next k16 step's A before waiting for the previous wgmma, it stages
//! its J half in its own slot, which leaves by one tensor store from its thread 0 (the host's
//! J tensor map; thread stores where `beams` is not a multiple of 8), and the two warpgroups
//! take turns at the tensor cores (named barriers 4 and 5: a warpgroup starts its main loop
//! once the other has issued its own), so that one's epilogue runs beside the other's
//! wgmmas. A warpgroup whose beams all lie past the last skips its wgmmas. On the H200, under
//! sustained load, this took pathfinder square from 1.25-1.30x cuBLAS's time to 0.87-0.92x
//! and rect. from 1.10-1.11x (the 192-beam kernel) to 0.89-0.91x; the tensor stores alone
//! gave 1.10-1.21x over thread stores (BENCHMARKS.md).
//!
//! 192 beams per block (`frb_resample_fused_rsp3_n{12,24}_t184_sm90a`, 3 warpgroups, 384
//! threads, `.maxnreg 168`): a third less I pulled from L2 per MAC (2 / 192 bytes). To fit
//! 168 registers the tile is 184 slow samples (92 accumulators; 917 = 5 x 184 - 3), U^M moves
//! to shared memory (the tile's `2M x 192` f32 in the U kernel's `[p/4][beta][4]` layout,
//! [`rs_um_offset`], copied by `cp.async` with stage 0's group, read by two LDS.32 per p
//! instead of two periods of quads in registers; U^N stays in registers, as from shared memory
//! its 32 bytes per thread per k16 step would have added about two thirds to the wgmmas' own
//! shared-memory reads), copies run `S - 3` = 4 stages ahead in a ring of 7 so that J's staged
//! tile (three slots) is left alone, and the copy-out steps 16 rows at a time from one base
//! (the unrolled form's precomputed addresses spilled). On the H200 it runs 1.05-1.24x faster than
//! the 128-beam kernel for full CHORD (there at or below cuBLAS's time) and 1.13-1.19x for
//! pathfinder rect.; for HIRAX (980 rows -> 5 x 200, 2560 beams -> 14 x 192, 7% padded work)
//! a 200-row form was slower, as was a 256-beam one (4 warpgroups, 144 rows), so HIRAX and
//! pathfinder square keep 128 beams ([`rs_default_kernel`], BENCHMARKS.md, seventh round).
//! Full CHORD and pathfinder rect. have since moved to the TMA and resident forms, which run
//! faster there; the N = 24 instance stays for comparison.

/// Block tile rows (tbar): two warpgroups of 64.
pub const HOPPER_BM: u32 = 128;
/// Block tile columns (beams): one `m64n256` per warpgroup.
pub const HOPPER_BN: u32 = 256;
/// K per stage, in halves: one 128-byte swizzle row.
pub const HOPPER_BK: u32 = 64;
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
pub const WIDE_THREADS: u32 = 128 * WIDE_WARPGROUPS;
pub const WIDE_BM: u32 = 64 * WIDE_WARPGROUPS;
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

/// `.maxnreg` caps `build.rs` adds: the wide kernel's 384 threads x 168 fit the SM's 65 536
/// registers (without a cap ptxas would take up to 255).
/// The transposed fused kernels of 3 warpgroups (384 threads) are capped at 168 for one
/// block per SM.
pub const REGISTER_LIMITS: [(&str, u32); 3] = [
    ("frb_resample_gemm_wide_sm90a", 168),
    ("frb_resample_fused_rsp3_n12_t184_sm90a", 168),
    ("frb_resample_fused_rsp3_n24_t184_sm90a", 168),
];

/// The TMA instances ([`RsKernel::tma`]) launch at [`RS_TMA_LAUNCH_REGISTERS`] (`.maxnreg`,
/// which `build.rs` adds to each: 384 threads x 168 fill the register file), then the
/// producer warpgroup gives registers back and the consumers take them (`setmaxnreg`): the
/// consumers of the 248-slow-sample tile use about 230 (ptxas, sm_90a).
pub const RS_TMA_LAUNCH_REGISTERS: u32 = 168;
pub const RS_PRODUCER_REGISTERS: u32 = 40;
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

/// Whether the W-path GEMM takes the wide tile for `times` rows: when its tiles of 192 rows
/// pad no more rows than the 128-row tiles do (a last tile of at most 64 rows counting 64,
/// as it is split by beams). Full CHORD's 917 pad to 960 both ways (wide: a third less L2
/// traffic, 1.05-1.11x faster on the H200); HIRAX's 980 to 1152 against 1024. There the
/// wide tile's last row tile has one busy warpgroup (the other two skip their wgmmas), but
/// that tile still pulls the whole W tile through its ring and costs about 0.6 of a full
/// one, so the narrow tile stays as fast or faster (H200, BENCHMARKS.md, fourth round).
pub const fn use_wide_tile(times: u32) -> bool {
    let rest = times % HOPPER_BM;
    let narrow = times - rest
        + if rest == 0 {
            0
        } else if rest <= 64 {
            64
        } else {
            HOPPER_BM
        };
    times.div_ceil(WIDE_BM) * WIDE_BM <= narrow
}

// --- The transposed fused GEMM ("RS": W^T formed in registers as wgmma's A operand).

/// One instance of the transposed fused kernel `J^T = W^T I^T`: `warpgroups` x 64 beams
/// (wgmma's M) by a tile of `nt` slow samples (wgmma's N), grid `(M, N)` of seed Table 2
/// (M follows from N there), a ring of `stages` I tiles of `nt` x 128 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RsKernel {
    pub name: &'static str,
    pub warpgroups: u32,
    pub nt: u32,
    pub m: u32,
    pub n: u32,
    pub stages: u32,
    /// I's stages arrive by tensor copies (TMA, a producer warpgroup) on per-slot mbarriers
    /// into the first `stages - 2` slots instead of every thread's `cp.async` and a block
    /// barrier per stage, each consumer warpgroup stages its J half in one of the last two
    /// slots and stores it by a tensor store, and warpgroup 1 starts each tile once warpgroup
    /// 0 has issued the tile's stage [`RS_TMA_LEAD`] (module comment); the kernel then takes
    /// the tensor maps of I and J as its last parameter.
    pub tma: bool,
    /// Resident form (`K <= 64 (stages - warpgroups)`, the pathfinder grids): the tile's whole
    /// I stays in the ring while the block runs every beam tile of a (slow-sample tile,
    /// channel) unit; each warpgroup has its U a tile ahead in shared memory, stages its own
    /// J half and stores it by a tensor store (the kernel takes the tensor maps as the TMA
    /// instances do; thread stores where `beams` is not a multiple of 8), and the two take
    /// turns at the tensor cores (module comment).
    pub resident: bool,
}

impl RsKernel {
    /// The block: the consumer warpgroups, and the TMA instances' producer warpgroup.
    pub const fn threads(&self) -> u32 {
        128 * (self.warpgroups + self.tma as u32)
    }
    /// The threads that compute, stage and store J (all but the TMA producer).
    pub const fn consumer_threads(&self) -> u32 {
        128 * self.warpgroups
    }
    /// Whether each consumer warpgroup stages its own 64-beam half of J in its own slot and
    /// stores it itself (TMA and resident forms), instead of the block staging one tile.
    pub const fn own_halves(&self) -> bool {
        self.tma || self.resident
    }
    /// Slots of the ring that hold I: all `stages`, but for the TMA form, whose last
    /// `warpgroups` slots hold J's halves.
    pub const fn ring_slots(&self) -> u32 {
        if self.tma {
            self.stages - self.warpgroups
        } else {
            self.stages
        }
    }
    /// Byte offset of J's f16 element (slow-sample row, beam) in the staged tile:
    /// [`rs_staged_offset`], or with [`RsKernel::own_halves`] [`rs_staged_offset_halves`]
    /// (the tensor stores' layout).
    pub const fn staged_offset(&self, row: u32, beam: u32) -> u32 {
        if self.own_halves() {
            rs_staged_offset_halves(row, beam, self.nt)
        } else {
            rs_staged_offset(row, beam, self.beams())
        }
    }
    /// Beams per block (wgmma rows).
    pub const fn beams(&self) -> u32 {
        64 * self.warpgroups
    }
    pub const fn stage_bytes(&self) -> u32 {
        self.nt * 2 * HOPPER_BK
    }
    /// Whether the tile's U^M sits in shared memory (`[p / 4][beam][4]` f32 after the ring,
    /// [`RsKernel::um_bytes`]) instead of registers: the 3-warpgroup blocks (and any
    /// 4-warpgroup one; none is instantiated), whose 168 (128) registers per thread cannot also
    /// hold two periods of U^M.
    pub const fn um_in_smem(&self) -> bool {
        self.warpgroups >= 3
    }
    /// Bytes of the tile's U^M in shared memory (0 where it stays in registers); for the
    /// resident form, both warpgroups' two buffers of U^M and U^N ([`RsKernel::u_ahead_offset`]).
    pub const fn um_bytes(&self) -> u32 {
        if self.resident {
            2 * self.warpgroups * self.u_ahead_bytes()
        } else if self.um_in_smem() {
            2 * self.m * self.beams() * 4
        } else {
            0
        }
    }
    /// Resident form: one buffer of a warpgroup's U, rows of 64 beams x 16 bytes, the `M / 2`
    /// quads of U^M then the `N / 2` of U^N (`[quad][beam][4]` f32, as the U kernel stores them).
    pub const fn u_ahead_bytes(&self) -> u32 {
        (2 * self.m + 2 * self.n) * 64 * 4
    }
    /// Offset of warpgroup `warpgroup`'s U buffer `buffer` (0, 1) after the ring.
    pub const fn u_ahead_offset(&self, warpgroup: u32, buffer: u32) -> u32 {
        self.stages * self.stage_bytes() + (2 * warpgroup + buffer) * self.u_ahead_bytes()
    }
    /// The ring and J's staged `nt` x `beams` tile in its last `warpgroups` slots (shared
    /// with I in the `cp` form, J's alone in the TMA form; the resident form's I leaves them
    /// free), then U^M or the resident form's U buffers, then the TMA form's mbarriers.
    pub const fn smem_bytes(&self) -> u32 {
        self.barrier_offset() + if self.tma { 16 * self.ring_slots() } else { 0 } + HOPPER_ALIGN_SLACK
    }
    /// Offset of the TMA kernels' mbarriers (`full` per ring slot, then `empty` per ring
    /// slot), after the ring (or J's staged tile) and U^M.
    pub const fn barrier_offset(&self) -> u32 {
        let ring = self.stages * self.stage_bytes();
        let staged = self.nt * 2 * self.beams();
        (if ring > staged { ring } else { staged }) + self.um_bytes()
    }
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
/// `reg` (0..4) half `e` (0 low) of k16 step `step` holds W^T[row][k] of the warp's `row`
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

/// Every instance of the transposed fused kernel, written once: `$callback!` gets (entry
/// point, warpgroups, NT, M, N, stages, its RS wgmma, form: `cp`, `tma` or `res`) for each.
/// [`RS_KERNELS`] and the sm_90a entry points are both made from this list.
macro_rules! rs_instances {
    ($callback:ident) => {
        $callback!(
            (frb_resample_fused_rsp2_n8_t232_sm90a, 2, 232, 8, 8, 6, mma_rs_m64n232k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n8_t248_sm90a, 2, 248, 8, 8, 6, mma_rs_m64n248k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n12_t232_sm90a, 2, 232, 8, 12, 6, mma_rs_m64n232k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n12_t248_sm90a, 2, 248, 8, 12, 6, mma_rs_m64n248k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n16_t232_sm90a, 2, 232, 16, 16, 6, mma_rs_m64n232k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n16_t248_sm90a, 2, 248, 16, 16, 6, mma_rs_m64n248k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n20_t232_sm90a, 2, 232, 16, 20, 6, mma_rs_m64n232k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n20_t248_sm90a, 2, 248, 16, 20, 6, mma_rs_m64n248k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n24_t232_sm90a, 2, 232, 24, 24, 6, mma_rs_m64n232k16_f32_f16, cp),
            (frb_resample_fused_rsp2_n24_t248_sm90a, 2, 248, 24, 24, 6, mma_rs_m64n248k16_f32_f16, cp),
            (frb_resample_fused_rsp3_n12_t184_sm90a, 3, 184, 8, 12, 7, mma_rs_m64n184k16_f32_f16, cp),
            (frb_resample_fused_rsp3_n24_t184_sm90a, 3, 184, 24, 24, 7, mma_rs_m64n184k16_f32_f16, cp),
            (frb_resample_fused_rsp2tma_n16_t232_sm90a, 2, 232, 16, 16, 7, mma_rs_m64n232k16_f32_f16, tma),
            (frb_resample_fused_rsp2tma_n16_t248_sm90a, 2, 248, 16, 16, 7, mma_rs_m64n248k16_f32_f16, tma),
            (frb_resample_fused_rsp2tma_n20_t232_sm90a, 2, 232, 16, 20, 7, mma_rs_m64n232k16_f32_f16, tma),
            (frb_resample_fused_rsp2tma_n20_t248_sm90a, 2, 248, 16, 20, 7, mma_rs_m64n248k16_f32_f16, tma),
            (frb_resample_fused_rsp2tma_n24_t232_sm90a, 2, 232, 24, 24, 7, mma_rs_m64n232k16_f32_f16, tma),
            (frb_resample_fused_rsp2tma_n24_t248_sm90a, 2, 248, 24, 24, 7, mma_rs_m64n248k16_f32_f16, tma),
            (frb_resample_fused_rsp2res_n8_t232_sm90a, 2, 232, 8, 8, 6, mma_rs_m64n232k16_f32_f16, res),
            (frb_resample_fused_rsp2res_n12_t184_sm90a, 2, 184, 8, 12, 8, mma_rs_m64n184k16_f32_f16, res),
        );
    };
}

/// An instance's form flag (`cp`, `tma` or `res`) as ([`RsKernel::tma`], [`RsKernel::resident`]).
macro_rules! rs_form {
    (cp) => {
        (false, false)
    };
    (tma) => {
        (true, false)
    };
    (res) => {
        (false, true)
    };
}

macro_rules! rs_table {
    ($(($name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident, $copy:ident)),* $(,)?) => {
        /// Every instance of the transposed fused kernel (entry points of the sm_90a module).
        pub const RS_KERNELS: &[RsKernel] = &[
            $(RsKernel {
                name: stringify!($name), warpgroups: $wg, nt: $nt, m: $m, n: $n, stages: $s,
                tma: rs_form!($copy).0, resident: rs_form!($copy).1
            }),*
        ];
    };
}
rs_instances!(rs_table);

/// Warpgroups of the production family of the transposed fused kernel.
pub const RS_DEFAULT_WARPGROUPS: u32 = 2;
/// Its slow-sample tiles (instances for every grid).
pub const RS_DEFAULT_TILES: [u32; 2] = [232, 248];

/// Warpgroups and slow-sample tile of the 192-beam instances (U^M in shared memory), which
/// exist for the grids where they ran faster on the H200 (N = 12, 24; seventh round).
pub const RS_WIDE_WARPGROUPS: u32 = 3;
pub const RS_WIDE_TILE: u32 = 184;

/// The production instance of the transposed fused kernel for grid (M, N), `times` rows and
/// `beams` beams, the first of:
/// - the resident instance, where one exists for N (the pathfinder grids, N = 8 and 12) and
///   its tile pads no more rows than the 2-warpgroup tile of [`rs_pick_tile`] (917 -> 928
///   and 920): 1.38-1.41x and 1.22x faster for the pathfinder cases on the H200, sustained
///   (BENCHMARKS.md);
/// - the TMA instance of that tile, where one exists (N = 16, 20 and 24: HIRAX and full
///   CHORD), which runs below cuBLAS's time for all three;
/// - the 3-warpgroup instance (192 beams: a third less I pulled from L2 per MAC) where one
///   exists for N (12) and its tiles pad no more work (padded rows x padded beams) than the
///   2-warpgroup one: pathfinder rect. at other row counts (917 x 960 -> 920 x 960 against
///   928 x 1024 took it, 1.15-1.19x faster on the H200, before the resident form);
/// - the 2-warpgroup `cp` instance of that tile.
pub fn rs_default_kernel(n: u32, times: u32, beams: u32) -> Option<&'static RsKernel> {
    let nt = rs_pick_tile(times, &RS_DEFAULT_TILES);
    let padded_rows = |tile: u32| times.div_ceil(tile) * tile;
    if let Some(resident) =
        RS_KERNELS.iter().find(|k| k.n == n && k.resident && padded_rows(k.nt) <= padded_rows(nt))
    {
        return Some(resident);
    }
    let narrow = |tma: bool| {
        RS_KERNELS.iter().find(|k| {
            k.n == n && k.nt == nt && k.warpgroups == RS_DEFAULT_WARPGROUPS && k.tma == tma && !k.resident
        })
    };
    if let Some(tma) = narrow(true) {
        return Some(tma);
    }
    let narrow = narrow(false)?;
    let padded = |k: &RsKernel| padded_rows(k.nt) as u64 * (beams.div_ceil(k.beams()) * k.beams()) as u64;
    match RS_KERNELS.iter().find(|k| k.n == n && k.warpgroups == RS_WIDE_WARPGROUPS) {
        Some(wide) if padded(wide) <= padded(narrow) => Some(wide),
        _ => Some(narrow),
    }
}

/// The J copy-out both device modules share (the sm_80 GEMMs of the parent module and the
/// wgmma W-path GEMM here), for a tile staged at [`staged_offset`].
#[cfg(target_arch = "nvptx64")]
pub(super) mod staged_store {
    use super::*;
    use crate::intrinsics::*;

    /// Stores the staged J tile (rows from `row0`, columns from `col0`) to `j`, in whole 16-byte
    /// chunks of J rows: a warp stores 512 contiguous bytes of one row; `128 WG` threads.
    #[inline(always)]
    pub unsafe fn store_j<const WG: u32>(
        j: *mut u16,
        smem: u32,
        tid: u32,
        (row0, col0): (u32, u32),
        times: u32,
        beams: u32,
    ) {
        let c = tid % 32;
        let col = col0 + 8 * c;
        unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            let r = tid / 32 + 4 * WG * i as u32;
            let row = row0 + r;
            if row < times && col < beams {
                let v = ld_shared_v4(smem + staged_offset(r, 8 * c));
                let at = row as usize * beams as usize + col as usize;
                if beams % 8 == 0 {
                    st_global_v4(j.add(at) as *mut u32, v);
                } else {
                    unroll!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
                        if col + (e as u32) < beams {
                            *j.add(at + e) = (v[e / 2] >> (16 * (e % 2))) as u16;
                        }
                    });
                }
            }
        });
    }
}

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
mod device {
    use super::staged_store::store_j;
    use super::*;
    use crate::intrinsics::*;
    use crate::wgmma::{
        commit_group, descriptor_k_major_128b, fence, fence_proxy_async_shared, mma_m64n128k16_f32_f16,
        mma_m64n256k16_f32_f16, swizzle_128b, wait_group,
    };

    /// The GEMM of both paths for `WG` warpgroups (module comment), instantiated for the
    /// wide tile (`WG` = 3). Grid: x = tbar tiles of `64 WG` rows, y = beam tiles, z =
    /// channels; `128 WG` threads. `k` = 4MN, a multiple of [`HOPPER_BK`]. Copies run `S - 1`
    /// stages ahead (a second barrier per stage frees the slot) and J goes through shared
    /// memory. With `WG` = 2, tiles of at most 64 rows are split by beams: that form passed
    /// the GPU tests but ran 2-3% slower on the H200 than the narrow [`gemm`] it generalises
    /// (LLVM hoists its epilogue's addresses over the main loop: 210 registers against 206),
    /// so the narrow kernel stays [`gemm`].
    #[inline(always)]
    unsafe fn gemm_wide<const S: u32, const WG: u32>(
        intensity: *const u16,
        weights: *const u16,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        const { assert!(S >= 3 && (WG == 2 || WG == 3)) };
        let d = S - 1;
        let threads = 128 * WG;
        let stage_bytes = gemm_stage_bytes(WG);
        let b_offset = gemm_b_offset(WG);
        let tid = thread_idx_x();
        let (warpgroup, t) = (tid / 128, tid % 128);
        let channel = block_idx_z();
        let (row0, col0) = (64 * WG * block_idx_x(), HOPPER_BN * block_idx_y());
        let a = intensity.add(channel as usize * times as usize * k as usize);
        let b = weights.wrapping_add(channel as usize * beams as usize * k as usize);
        let smem = (dynamic_shared() + 1023) & !1023;
        // A warpgroup whose 64 rows all lie past the edge (HIRAX's 980 = 5 x 192 + 20: the
        // second and third of the last tbar tile) skips its wgmmas and J staging but keeps
        // copying and meeting the barriers. The condition comes through a shuffle so that
        // ptxas sees it warp-uniform and keeps the wgmmas unserialised (C7518 otherwise).
        let idle = shfl_idx((row0 + 64 * warpgroup >= times) as u32, 0) != 0;

        let (r, c) = gemm_copy_chunk(WG, tid, 0);
        let dst = swizzle_128b(r, 16 * c);
        let rows_a = times.saturating_sub(row0 + r);
        let rows_b = beams.saturating_sub(col0 + r);
        let src_a = a.wrapping_add((row0 + r) as usize * k as usize + 8 * c as usize);
        let src_b = b.wrapping_add((col0 + r) as usize * k as usize + 8 * c as usize);
        let row_stride = threads / 8;
        let row_step = row_stride as usize * k as usize;
        // B copies: whole ones of every thread, then a last one of the first `part` rows.
        let (full_b, part_b) = (HOPPER_BN / row_stride, HOPPER_BN % row_stride);

        let copy_a = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3] {
                let inside = row_stride * (j as u32) < rows_a;
                // Past the edge: zero-fill, the channel's first row as a harmless address.
                let src = if inside { src_a.wrapping_add(j * row_step + k0) } else { a };
                cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
            });
        };
        let copy_b = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + b_offset + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                if (j as u32) < full_b || ((j as u32) == full_b && r < part_b) {
                    let inside = row_stride * (j as u32) < rows_b;
                    let src = if inside { src_b.wrapping_add(j * row_step + k0) } else { intensity };
                    cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
                }
            });
        };
        let steps = k / HOPPER_BK;
        unroll!(s in [0, 1, 2, 3] {
            if (s as u32) < d {
                if (s as u32) < steps {
                    copy_a(s as u32, s as u32);
                    copy_b(s as u32, s as u32);
                }
                cp_async_commit();
            }
        });
        // A tile whose rows all lie in its first 64 (full CHORD's last, 21 rows): both
        // warpgroups take those rows, each with half of the beams (m64n128), instead of the
        // second computing rows past the edge. Block-uniform, so the wgmmas stay unserialised.
        let half = WG == 2 && times - row0 <= 64;
        let (a_off, b_off) = if half {
            (0, b_offset + warpgroup * 128 * 2 * HOPPER_BK)
        } else {
            (hopper_a_offset(warpgroup), b_offset)
        };
        let (a_desc, b_desc) = (smem + a_off, smem + b_off);
        // Tile row and column of this warpgroup's accumulator (0, 0).
        let (wg_row, wg_col) = if half { (0, 128 * warpgroup) } else { (64 * warpgroup, 0) };

        // `main_loop!()`: an idle warpgroup's loop, the same copies and barriers without wgmmas.
        macro_rules! main_loop {
            ($($acc:ident, $mma:ident)?) => {{
                let mut step = 0;
                let mut slot = 0;
                while step < steps {
                    cp_async_wait_pending(d - 1); // stage `step` has landed
                    fence_proxy_async_shared();
                    sync_threads();
                    $(
                        fence();
                        let s = slot * stage_bytes;
                        unroll!(kk in [0, 1, 2, 3] {
                            $mma(
                                &mut $acc,
                                descriptor_k_major_128b(a_desc + s + 32 * kk as u32),
                                descriptor_k_major_128b(b_desc + s + 32 * kk as u32),
                                true,
                            );
                        });
                        commit_group();
                        // The slot of step - 1 is free once every warpgroup has waited for
                        // that step's group: copies run D = S - 1 stages ahead.
                        wait_group::<1>();
                    )?
                    sync_threads();
                    // Stage step + D into the slot read by a group every warpgroup has
                    // waited for before the last barrier, while this step's wgmmas run.
                    let next = step + d;
                    let next_slot = if slot + d >= S { slot + d - S } else { slot + d };
                    if next < steps {
                        copy_a(next, next_slot);
                        copy_b(next, next_slot);
                    }
                    cp_async_commit();
                    slot = if slot + 1 == S { 0 } else { slot + 1 };
                    step += 1;
                }
                cp_async_wait_all();
                $(
                    let _ = stringify!($mma);
                    wait_group::<0>();
                )?
            }};
        }

        let j = out.add(channel as usize * times as usize * beams as usize);
        if half {
            let mut acc = [0.0f32; 64];
            main_loop!(acc, mma_m64n128k16_f32_f16);
            // The ring is free for staging J once every warpgroup's wgmmas are done.
            sync_threads();
            stage_j(&acc, t, wg_row, wg_col, smem);
        } else if idle {
            // Its rows are never stored, so nothing to stage.
            main_loop!();
            sync_threads();
        } else {
            let mut acc = [0.0f32; 128];
            main_loop!(acc, mma_m64n256k16_f32_f16);
            sync_threads();
            stage_j(&acc, t, wg_row, wg_col, smem);
        }
        sync_threads();
        store_j::<WG>(j, smem, tid, (row0, col0), times, beams);
    }

    /// Stages a warpgroup's f32 accumulators (m64n128 with `R` = 64, m64n256 with 128) as f16
    /// pairs in the shared J tile (`staged_offset`), at the warpgroup's offset (`row`, `col`).
    #[inline(always)]
    unsafe fn stage_j<const R: usize>(acc: &[f32; R], t: u32, row: u32, col: u32, smem: u32) {
        crate::for_each_accumulator_128!(|reg: u32| {
            if (reg as usize) < R && reg % 2 == 0 {
                let (r, c) = crate::wgmma::accumulator_position(t, reg);
                let pair = f32x2_to_f16x2(acc[reg as usize & (R - 1)], acc[(reg | 1) as usize & (R - 1)]);
                st_shared_u32(smem + staged_offset(row + r, col + c), pair);
            }
        });
    }

    /// The W-path GEMM (module comment). Grid: x = tbar tiles, y = beam tiles, z = channels;
    /// [`HOPPER_THREADS`] threads. `k` = 4MN, a multiple of [`HOPPER_BK`]. Copies run `S - 1`
    /// stages ahead (a second barrier per stage frees the slot), tiles of at most 64 rows are
    /// split by beams, and J goes through shared memory.
    #[inline(always)]
    unsafe fn gemm<const S: u32>(
        intensity: *const u16,
        weights: *const u16,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        const { assert!(S >= 3) };
        let d = S - 1;
        let stage_bytes = hopper_stage_bytes();
        let tid = thread_idx_x();
        let (warpgroup, t) = (tid / 128, tid % 128);
        let channel = block_idx_z();
        let (row0, col0) = (HOPPER_BM * block_idx_x(), HOPPER_BN * block_idx_y());
        let a = intensity.add(channel as usize * times as usize * k as usize);
        let b = weights.wrapping_add(channel as usize * beams as usize * k as usize);
        let smem = (dynamic_shared() + 1023) & !1023;
        // Every warpgroup runs its wgmmas, also one whose rows are all past the edge (the
        // second of full CHORD's last tbar tile): skipping them puts the wgmmas on a path
        // ptxas deems divergent, and it serialises them (C7518).

        let (r, c) = hopper_copy_chunk(tid, 0);
        let dst = swizzle_128b(r, 16 * c);
        let rows_a = times.saturating_sub(row0 + r);
        let rows_b = beams.saturating_sub(col0 + r);
        let src_a = a.wrapping_add((row0 + r) as usize * k as usize + 8 * c as usize);
        let src_b = b.wrapping_add((col0 + r) as usize * k as usize + 8 * c as usize);
        let row_stride = HOPPER_THREADS / 8;
        let row_step = row_stride as usize * k as usize;

        let copy_a = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3] {
                let inside = row_stride * (j as u32) < rows_a;
                // Past the edge: zero-fill, the channel's first row as a harmless address.
                let src = if inside { src_a.wrapping_add(j * row_step + k0) } else { a };
                cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
            });
        };
        let copy_b = |step: u32, slot: u32| {
            let base = smem + slot * stage_bytes + hopper_b_offset() + dst;
            let k0 = (step * HOPPER_BK) as usize;
            unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                let inside = row_stride * (j as u32) < rows_b;
                let src = if inside { src_b.wrapping_add(j * row_step + k0) } else { intensity };
                cp_async_16(base + row_stride * j as u32 * 128, src as *const u8, if inside { 16 } else { 0 });
            });
        };

        let steps = k / HOPPER_BK;
        unroll!(s in [0, 1, 2, 3] {
            if (s as u32) < d {
                if (s as u32) < steps {
                    copy_a(s as u32, s as u32);
                    copy_b(s as u32, s as u32);
                }
                cp_async_commit();
            }
        });
        // A tile whose rows all lie in its first 64 (full CHORD's last, 21 rows): both
        // warpgroups take those rows, each with half of the beams (m64n128), instead of the
        // second computing rows past the edge. Block-uniform, so the wgmmas stay unserialised.
        let half = times - row0 <= 64;
        let (a_off, b_off) = if half {
            (0, hopper_b_offset() + warpgroup * 128 * 2 * HOPPER_BK)
        } else {
            (hopper_a_offset(warpgroup), hopper_b_offset())
        };
        let (a_desc, b_desc) = (smem + a_off, smem + b_off);
        // Tile row and column of this warpgroup's accumulator (0, 0).
        let (wg_row, wg_col) = if half { (0, 128 * warpgroup) } else { (64 * warpgroup, 0) };

        macro_rules! main_loop {
            ($acc:ident, $mma:ident) => {{
                let mut step = 0;
                let mut slot = 0;
                while step < steps {
                    cp_async_wait_pending(d - 1); // stage `step` has landed
                    fence_proxy_async_shared();
                    sync_threads();
                    fence();
                    let s = slot * stage_bytes;
                    unroll!(kk in [0, 1, 2, 3] {
                        $mma(
                            &mut $acc,
                            descriptor_k_major_128b(a_desc + s + 32 * kk as u32),
                            descriptor_k_major_128b(b_desc + s + 32 * kk as u32),
                            true,
                        );
                    });
                    commit_group();
                    // The slot of step - 1 is free once every warpgroup has waited for that
                    // step's group: copies run D = S - 1 stages ahead.
                    wait_group::<1>();
                    sync_threads();
                    // Stage step + D into the slot read by a group every warpgroup has
                    // waited for before the last barrier, while this step's wgmmas run.
                    let next = step + d;
                    let next_slot = if slot + d >= S { slot + d - S } else { slot + d };
                    if next < steps {
                        copy_a(next, next_slot);
                        copy_b(next, next_slot);
                    }
                    cp_async_commit();
                    slot = if slot + 1 == S { 0 } else { slot + 1 };
                    step += 1;
                }
                cp_async_wait_all();
                wait_group::<0>();
            }};
        }

        let j = out.add(channel as usize * times as usize * beams as usize);
        if half {
            let mut acc = [0.0f32; 64];
            main_loop!(acc, mma_m64n128k16_f32_f16);
            // The ring is free for staging J once every warpgroup's wgmmas are done.
            sync_threads();
            stage_j(&acc, t, wg_row, wg_col, smem);
        } else {
            let mut acc = [0.0f32; 128];
            main_loop!(acc, mma_m64n256k16_f32_f16);
            sync_threads();
            stage_j(&acc, t, wg_row, wg_col, smem);
        }
        sync_threads();
        store_j::<2>(j, smem, tid, (row0, col0), times, beams);
    }

    /// `J = I W` on sm_90a: [`HOPPER_THREADS`] threads, [`hopper_smem_bytes`] of dynamic shared
    /// memory, the sm_80 GEMM's grid with [`HOPPER_BM`] x [`HOPPER_BN`] tiles. `k` = 4MN.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_gemm_sm90a(
        intensity: *const u16,
        weights: *const u16,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        gemm::<HOPPER_STAGES>(intensity, weights, out, times, beams, k)
    }

    /// `J = I W` on sm_90a with 192 x 256 tiles: [`WIDE_THREADS`] threads, [`wide_smem_bytes`]
    /// of dynamic shared memory, grid x = tbar tiles of [`WIDE_BM`].
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn frb_resample_gemm_wide_sm90a(
        intensity: *const u16,
        weights: *const u16,
        out: *mut u16,
        times: u32,
        beams: u32,
        k: u32,
    ) {
        gemm_wide::<WIDE_STAGES, WIDE_WARPGROUPS>(intensity, weights, out, times, beams, k)
    }
}

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub use rs_device::*;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
mod rs_device {
    use super::*;
    use crate::intrinsics::*;
    use crate::wgmma::{
        bulk_commit, bulk_wait, bulk_wait_read, commit_group, descriptor_k_major_128b, fence,
        fence_mbarrier_init, fence_proxy_async_shared, mbarrier_arrive, mbarrier_arrive_expect_tx,
        mbarrier_init, mbarrier_wait, mma_rs_m64n184k16_f32_f16, mma_rs_m64n232k16_f32_f16,
        mma_rs_m64n248k16_f32_f16, set_max_registers, swizzle_128b, tma_load_3d, tma_store_3d, wait_group,
    };

    use core::arch::asm;

    /// `stmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: register i of lane l holds elements
    /// (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i (low half first); lanes
    /// 8 i .. 8 i + 7 give the addresses of the 16-byte rows of matrix i's transpose.
    #[inline(always)]
    unsafe fn stmatrix_x4_trans(address: u32, r: [u32; 4]) {
        asm!("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [{a}], {{{0}, {1}, {2}, {3}}};",
            in(reg32) r[0], in(reg32) r[1], in(reg32) r[2], in(reg32) r[3], a = in(reg32) address,
            options(nostack));
    }

    /// The 1024-aligned base of the dynamic shared memory, as `dynamic_shared` rounds it, read
    /// anew at each use (not `pure`): LLVM then cannot keep one copy in a register across the
    /// main loop, which under a register cap spilled it.
    #[inline(always)]
    fn fresh_smem() -> u32 {
        let base: u32;
        // SAFETY: takes the address of the module-scope extern shared array.
        unsafe { asm!("mov.u32 {0}, radio_kernels_dynamic_smem;", out(reg32) base, options(nomem, nostack)) };
        (base + 1023) & !1023
    }

    /// As [`stmatrix_x4_trans`] for two matrices (lanes 0..16 give the addresses).
    #[inline(always)]
    unsafe fn stmatrix_x2_trans(address: u32, r: [u32; 2]) {
        asm!("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [{a}], {{{0}, {1}}};",
            in(reg32) r[0], in(reg32) r[1], a = in(reg32) address, options(nostack));
    }

    /// The transposed fused GEMM (module comment, [`RsKernel`]): `WG` warpgroups of 64 beams,
    /// a tile of `NT` slow samples (`ACC` = NT / 2 accumulators per thread), grid (M, N), a
    /// ring of `S` I tiles copied `d = S - WG` ahead. Persistent: a 1-d grid of resident
    /// blocks, each taking every `gridDim.x`-th tile (slow-sample tile fastest, then beam tile,
    /// then channel): a tile's first copies are issued before the previous tile's epilogue,
    /// which goes through the ring's last `WG` slots (`NT x 64 WG` beams x 2 bytes: exactly
    /// `WG` stages), so the two overlap. The TMA form's ring is the first `S - WG` slots, on
    /// across tiles, and J has the last `WG` to itself; the resident form walks its tiles and
    /// fills its ring otherwise (module comment, [`rs_next_tile`]).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn fused_rs<
        const WG: u32,
        const NT: u32,
        const M: u32,
        const N: u32,
        const S: u32,
        const ACC: usize,
        const TMA: bool,
        const RESIDENT: bool,
    >(
        intensity: *const u16,
        u_m: *const f32,
        u_n: *const f32,
        out: *mut u16,
        (times, beams, channels): (u32, u32, u32),
        tensor_map: u64,
        mma: impl Fn(&mut [f32; ACC], [u32; 4], u64),
    ) {
        const {
            assert!(2 * ACC as u32 == NT && NT.is_multiple_of(8));
            assert!(
                !TMA || WG == 2,
                "TMA form: one 64-beam J half per consumer warpgroup, barrier 4 for two"
            );
            assert!(S >= 3 && N.is_multiple_of(4) && N <= 24 && WG >= 2 && WG <= 4);
            assert!(S >= WG + 2 && S - WG <= 7, "the staged J tile is the last WG slots");
            assert!(WG == 2 || M.is_multiple_of(4), "U^M copies: M / 4 per thread");
            assert!(!RESIDENT || (!TMA && WG == 2 && M * N / 16 <= S - WG), "the whole K in the ring");
            assert!(!TMA || rs_tma_lead_fits(S - WG, M * N / 16, RS_TMA_LEAD), "the lead fits the ring");
        };
        let kernel = RsKernel {
            name: "",
            warpgroups: WG,
            nt: NT,
            m: M,
            n: N,
            stages: S,
            tma: TMA,
            resident: RESIDENT,
        };
        // TMA form: I's ring is the first `S - WG` slots, J's staged halves the last `WG`.
        let ring = kernel.ring_slots();
        let next_slot = |slot: u32| if slot + 1 == ring { 0 } else { slot + 1 };
        let previous_slot = |slot: u32| if slot == 0 { ring - 1 } else { slot - 1 };
        let own_halves = kernel.own_halves();
        // U^M in shared memory (`RsKernel::um_in_smem`) for 3 and 4 warpgroups.
        let um_smem = WG >= 3;
        let threads = 128 * WG;
        let bb = 64 * WG;
        let stage_bytes = NT * 2 * HOPPER_BK;
        let k = 4 * M * N;
        let steps = M * N / 16;
        let (period, quads) = const { rs_period(N) };
        let periods = steps / period;
        let n8 = N / 4;
        // Copies run `S - WG` stages ahead, so that the next tile's first stages leave the
        // last WG slots (J's staged tile) alone.
        let d = S - WG;
        let smem = (dynamic_shared() + 1023) & !1023;
        let staged = smem + (S - WG) * stage_bytes;
        // The tile's U^M, `[p / 4][beam in tile][4]` f32, after the ring.
        let um_s = smem + S * stage_bytes;
        let (tiles_x, tiles_y) = (times.div_ceil(NT), beams.div_ceil(bb));
        let total = tiles_x * tiles_y * channels;
        // Resident form: tiles in beam-tile-fastest order, a block taking every
        // `gridDim.x`-th unit (slow-sample tile, channel) and all of its beam tiles.
        let (first, stride) = if RESIDENT {
            (block_idx_x() * tiles_y, grid_dim_x() * tiles_y)
        } else {
            (block_idx_x(), grid_dim_x())
        };
        let next_tile = |tile: u32| rs_next_tile(tile, stride, if RESIDENT { tiles_y } else { 1 });
        // The tile's first slow sample, first beam and channel. Past the last tile (the
        // consumers' pass that only stores the previous J): the last tile's channel, so that
        // the U loads stay inside the arrays.
        let tile_origin = |tile: u32| {
            let channel = tile.min(total - 1) / (tiles_x * tiles_y);
            if RESIDENT {
                (NT * ((tile / tiles_y) % tiles_x), bb * (tile % tiles_y), channel)
            } else {
                (NT * (tile % tiles_x), bb * ((tile / tiles_x) % tiles_y), channel)
            }
        };
        // TMA form (warp-specialised): warpgroup 0 is the producer, whose thread 0 copies
        // every stage of the block's tiles by one tensor copy into the ring, in order, each
        // once the slot is free; warpgroups 1 ..= WG are the consumers, the `WG` warpgroups of
        // the `cp` form (thread indices from 0 again). `full[slot]` completes when a stage has
        // landed (thread 0's arrival plus the stage's bytes); `empty[slot]` when every consumer
        // warpgroup has released the slot (one arrival each) after waiting for the wgmmas
        // that read it.
        let bars = smem + kernel.barrier_offset();
        let full = |slot: u32| bars + 8 * slot;
        let empty = |slot: u32| bars + 8 * (ring + slot);
        if TMA {
            if thread_idx_x() == 0 {
                for slot in 0..ring {
                    mbarrier_init(full(slot), 1);
                    mbarrier_init(empty(slot), WG);
                }
                fence_mbarrier_init();
            }
            sync_threads();
            if thread_idx_x() < 128 {
                set_max_registers::<RS_PRODUCER_REGISTERS, false>();
                if thread_idx_x() == 0 {
                    // Per slot: filled before, and the parity of the next release to wait for.
                    // The ring runs on across tiles (`slot`: the next stage's).
                    let (mut filled, mut empty_phase) = (0u32, 0u32);
                    let mut tile = first;
                    let mut slot = 0u32;
                    while tile < total {
                        let (row0, _, channel) = tile_origin(tile);
                        for step in 0..steps {
                            if filled & (1 << slot) != 0 {
                                mbarrier_wait(empty(slot), (empty_phase >> slot) & 1);
                                empty_phase ^= 1 << slot;
                            } else {
                                filled |= 1 << slot;
                            }
                            mbarrier_arrive_expect_tx(full(slot), stage_bytes);
                            tma_load_3d(
                                smem + slot * stage_bytes,
                                tensor_map,
                                full(slot),
                                [step * HOPPER_BK, row0, channel],
                            );
                            slot = next_slot(slot);
                        }
                        tile = next_tile(tile);
                    }
                }
                return;
            }
            set_max_registers::<RS_CONSUMER_REGISTERS, true>();
        }
        let tid = if TMA { thread_idx_x() - 128 } else { thread_idx_x() };
        let (warpgroup, t) = (tid / 128, tid % 128);
        let lane = t % 32;
        let c = lane % 4;
        // The warpgroup's own barrier (resident and TMA forms: each stages and stores its J half).
        let wg_sync = || named_barrier(2 + warpgroup, 128);
        // Per slot, the parity of the phase the next wait names (persisting across tiles).
        let mut full_phase = 0u32;
        // A consumer warpgroup's release of `slot`.
        let release = |slot: u32| {
            if t == 0 {
                mbarrier_arrive(empty(slot));
            }
        };
        // This thread's beams within a tile: A rows g and g + 8 of its warp's 16 (lane = 4 g + c).
        let beam_in_tile = 64 * warpgroup + 16 * (t / 32) + lane / 4;
        let (r, cc) = (tid / 8, tid % 8);
        let dst = swizzle_128b(r, 16 * cc);
        let row_stride = threads / 8;
        let row_step = row_stride as usize * k as usize;

        // J of the tile at (row0, col0, channel) from `acc`, staged transposed as J rows (slow
        // samples) of `bb` beams: matrix (j, h) of the accumulators (slow samples 8 j ..,
        // beams 16 w + 8 h ..) per `stmatrix`; then whole 16-byte chunks of J rows, 8
        // consecutive threads reading 8 chunks of one row. `cp` form: callers put a barrier
        // between the last wgmma reading the staging slots and this; TMA and resident forms:
        // the warpgroup's thread 0 has waited for its previous tensor store's reads, then the
        // warpgroup's barrier.
        let warp_beam = 64 * warpgroup + 16 * (t / 32);
        let mi = lane / 8;
        // 8 J values (beams col .. col + 7 of a row, one staged chunk `v`) to `to`: one 16-byte
        // store where rows are whole chunks, else those inside `beams` one by one.
        let store_chunk = |to: *mut u16, col: u32, v: [u32; 4]| {
            if beams.is_multiple_of(8) {
                st_global_v4(to as *mut u32, v);
            } else {
                unroll!(e in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if col + (e as u32) < beams {
                        *to.add(e) = (v[e / 2] >> (16 * (e % 2))) as u16;
                    }
                });
            }
        };
        let epilogue = |acc: &[f32; ACC], (row0, col0, channel): (u32, u32, u32)| {
            // Capped kernels (WG >= 3): the staging base afresh, so that it is not kept in a
            // register across the main loop (it spilled at 168).
            let staged = if WG >= 3 { fresh_smem() + (S - WG) * stage_bytes } else { staged };
            unroll!(jp in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                let pack = |i: usize| {
                    f32x2_to_f16x2(acc[(8 * jp + 2 * i).min(ACC - 2)], acc[(8 * jp + 2 * i + 1).min(ACC - 1)])
                };
                if 16 * (jp as u32) + 16 <= NT {
                    let row = 8 * (2 * jp as u32 + mi / 2) + lane % 8;
                    let at = staged + kernel.staged_offset(row, warp_beam + 8 * (mi % 2));
                    stmatrix_x4_trans(at, [pack(0), pack(1), pack(2), pack(3)]);
                } else if 16 * (jp as u32) + 8 == NT {
                    let row = 8 * (2 * jp as u32) + lane % 8;
                    stmatrix_x2_trans(staged + kernel.staged_offset(row, warp_beam + 8 * (mi % 2)), [pack(0), pack(1)]);
                }
            });
            let j = out.add(channel as usize * times as usize * beams as usize);
            if own_halves && beams.is_multiple_of(8) {
                // This warpgroup's half (64 beams, its own slot) by one tensor store, issued
                // by its thread 0, which waits for its reads before the next staging.
                fence_proxy_async_shared();
                wg_sync();
                if t == 0 {
                    tma_store_3d(
                        tensor_map + 128,
                        [col0 + 64 * warpgroup, row0, channel],
                        staged + warpgroup * NT * 128,
                    );
                    bulk_commit();
                }
                return;
            }
            if own_halves {
                // This warpgroup's half (64 beams, its own slot): 8 threads per 128-byte row.
                wg_sync();
                let chunk = t % 8;
                let half_beam = 64 * warpgroup + 8 * chunk;
                let col = col0 + half_beam;
                unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                    let r = t / 8 + 16 * i as u32;
                    if r < NT && row0 + r < times && col < beams {
                        let v = ld_shared_v4(staged + rs_staged_offset_halves(r, half_beam, NT));
                        store_chunk(j.add((row0 + r) as usize * beams as usize + col as usize), col, v);
                    }
                });
                return;
            }
            sync_threads();
            let per_row = bb / 8;
            if WG == 2 {
                // The 2-warpgroup kernels keep the form they were measured in (sixth round):
                // every step's (row, chunk) unrolled.
                unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                    let idx = tid + threads * i as u32;
                    if (i as u32) < NT.div_ceil(16) && idx < NT * per_row {
                        let (r, chunk) = (idx / per_row, idx % per_row);
                        let (row, col) = (row0 + r, col0 + 8 * chunk);
                        if row < times && col < beams {
                            let v = ld_shared_v4(staged + kernel.staged_offset(r, 8 * chunk));
                            store_chunk(j.add(row as usize * beams as usize + col as usize), col, v);
                        }
                    }
                });
                return;
            }
            // The block's `128 WG` threads cover 16 rows of `8 WG` chunks: a thread keeps its
            // chunk and its row modulo 16 (so its swizzle) and steps 16 rows at a time, one
            // shared and one global address advanced by constants (the unrolled form above,
            // with every step's addresses precomputed, spilled at 168 registers).
            let (r0, chunk) = (tid / per_row, tid % per_row);
            let col = col0 + 8 * chunk;
            let from = staged + rs_staged_offset(r0, 8 * chunk, bb);
            let mut to = j.wrapping_add((row0 + r0) as usize * beams as usize + col as usize);
            let mut r = r0;
            while r < NT {
                if row0 + r < times && col < beams {
                    store_chunk(to, col, ld_shared_v4(from + (r - r0) * 2 * bb));
                }
                to = to.wrapping_add(16 * beams as usize);
                r += 16;
            }
        };

        let mut acc = [0.0f32; ACC];
        let mut prev = (0, 0, 0);
        let mut have_prev = false;
        let mut ran = false;
        let mut tile = first;
        // Resident form: each warpgroup's U^M and U^N of its 64 beams, a tile ahead, in two
        // buffers by tile parity (`RsKernel::u_ahead_offset`); `count` tiles done so far.
        let mut count = 0u32;
        let mut ring_slot = 0u32;
        // (A group is committed even past the last tile, so the main loop's wait can always
        // leave exactly the newest one pending.)
        let u_ahead = |tile: u32, buffer: u32| {
            if !RESIDENT {
                return;
            }
            if tile < total {
                let (_, col0, channel) = tile_origin(tile);
                let um_g = u_m.add(channel as usize * (M / 2) as usize * beams as usize * 4);
                let un_g = u_n.add(channel as usize * (N / 2) as usize * beams as usize * 4);
                let base = smem + kernel.u_ahead_offset(warpgroup, buffer);
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] {
                    if (j as u32) < (M + N) / 4 {
                        // Rows of 64 beams x 16 bytes: the quads of U^M, then those of U^N.
                        let (row, b) = ((t + 128 * j as u32) / 64, t % 64);
                        let beam = col0 + 64 * warpgroup + b;
                        let ok = beam < beams;
                        let from = if row < M / 2 {
                            um_g.wrapping_add(4 * (row * beams + beam) as usize)
                        } else {
                            un_g.wrapping_add(4 * ((row - M / 2) * beams + beam) as usize)
                        };
                        // Past the last beam: zero (the W^T row is 0; its J is not stored).
                        let from = if ok { from } else { um_g };
                        cp_async_16(base + 16 * (row * 64 + b), from as *const u8, if ok { 16 } else { 0 });
                    }
                });
            }
            cp_async_commit();
        };
        u_ahead(tile, 0);
        // One call site for the (large) epilogue, so that it is inlined and `acc` stays in
        // registers: each pass stores the previous tile's J, after the next tile's first copies.
        loop {
            let has_tile = tile < total;
            let (row0, col0, channel) = tile_origin(tile);
            let a = intensity.add(channel as usize * times as usize * k as usize);

            // I tile copies: thread `tid` copies chunk `tid % 8` of rows `tid / 8 + (threads / 8) j`.
            let rows_left = times.saturating_sub(row0 + r);
            let src = a.wrapping_add((row0 + r) as usize * k as usize + 8 * cc as usize);
            let copy = |step: u32, slot: u32| {
                let base = smem + slot * stage_bytes + dst;
                let k0 = (step * HOPPER_BK) as usize;
                unroll!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                    // Whole warps: NT and the warp's 4 rows are multiples of 4 and 8 rows apart.
                    if r + row_stride * (j as u32) < NT {
                        let ok = row_stride * (j as u32) < rows_left;
                        // Past the edge: zero-fill, the channel's first row as a harmless address.
                        let from = if ok { src.wrapping_add(j * row_step + k0) } else { a };
                        cp_async_16(base + row_stride * j as u32 * 128, from as *const u8, if ok { 16 } else { 0 });
                    }
                });
            };
            // The tile's U^M (2M x bb f32, `M / 4` 16-byte chunks per thread) into shared memory
            // with stage 0's group; read after the previous tile's last barrier, so free.
            let um_g = u_m.add(channel as usize * (M / 2) as usize * beams as usize * 4);
            if um_smem && has_tile {
                unroll!(j in [0, 1, 2, 3, 4, 5] {
                    if (j as u32) < M / 4 {
                        let (quad, b) = (2 * j as u32 + tid / bb, tid % bb);
                        let ok = col0 + b < beams;
                        // Past the last beam: zero (the W^T row is 0; its J is not stored).
                        let from = if ok { um_g.add(4 * (quad * beams + col0 + b) as usize) } else { um_g };
                        // (The base afresh: kept across the main loop, it spilled at 168.)
                        let to = fresh_smem() + S * stage_bytes + 16 * (quad * bb + b);
                        cp_async_16(to, from as *const u8, if ok { 16 } else { 0 });
                    }
                });
            }
            // The first stages into slots 0 .. S - WG - 1, free once every warpgroup waited
            // for the previous tile's last group (the barrier that ended its main loop). (The
            // TMA form's producer copies every stage.) Resident form: the whole K at a unit's
            // first beam tile, once both warpgroups are done with the previous unit's I.
            let fresh = !RESIDENT || tile % tiles_y == 0;
            if RESIDENT && has_tile && fresh {
                if have_prev {
                    sync_threads();
                }
                unroll!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if (s as u32) < steps {
                        copy(s as u32, s as u32);
                    }
                });
                cp_async_commit();
            }
            if RESIDENT && has_tile {
                // The next tile's U (its buffer's last reader, this warpgroup's main loop of
                // the previous tile, ended at the warpgroup barrier).
                u_ahead(next_tile(tile), (count + 1) % 2);
            } else if has_tile && !TMA && !RESIDENT {
                unroll!(s in [0, 1, 2, 3, 4, 5, 6, 7] {
                    if (s as u32) < d {
                        if (s as u32) < steps {
                            copy(s as u32, s as u32);
                        }
                        cp_async_commit();
                    }
                });
            }

            // U of this tile's beams (device memory) before the previous tile's epilogue, so
            // that their latency overlaps it.
            let first_beam = col0 + beam_in_tile;
            let beam = [first_beam, first_beam + 8];
            let inside = beam.map(|b| has_tile && b < beams);
            // Past the last beam: the last beam's U^M (a valid address; U^N is zero there, so
            // the row of W^T is +-0 and its J is never stored).
            let clamped = beam.map(|b| b.min(beams - 1));
            // U^N_{8 j + 2 c + e} of both beams, for the whole tile (`rs_un_index`).
            let un_g = u_n.add(channel as usize * (N / 2) as usize * beams as usize * 4);
            let mut un = [0.0f32; 24];
            unroll!(j in [0, 1, 2, 3, 4, 5] {
                if !RESIDENT && (j as u32) < n8 {
                    unroll!(h in [0, 1] {
                        let at = 4 * ((2 * j as u32 + c / 2) * beams + clamped[h]) + 2 * (c % 2);
                        let v = ld_global_nc_v2(un_g.add(at as usize) as *const u32);
                        let i = rs_un_index(j as u32, h as u32, 0) as usize;
                        un[i] = if inside[h] { f32::from_bits(v[0]) } else { 0.0 };
                        un[i + 1] = if inside[h] { f32::from_bits(v[1]) } else { 0.0 };
                    });
                }
            });
            // U^M of both beams for the `quads` quads of p of a period: `[quad][h][p % 4]`
            // (device memory, mostly L1/L2 hits: a tile's U^M is 2M x 128 x 4 bytes). With
            // U^M in shared memory, none.
            let load_um = |period_index: u32| {
                let mut um = [0.0f32; 16];
                unroll!(x in [0, 1] {
                    if !um_smem && !RESIDENT && (x as u32) < quads {
                        unroll!(h in [0, 1] {
                            let quad = period_index * quads + x as u32;
                            let v = ld_global_nc_v4(um_g.add(4 * (quad * beams + clamped[h]) as usize) as *const u32);
                            unroll!(i in [0, 1, 2, 3] {
                                um[(2 * x + h) * 4 + i] = f32::from_bits(v[i]);
                            });
                        });
                    }
                });
                um
            };
            let mut um = load_um(0);

            if have_prev {
                epilogue(&acc, prev);
            }
            if !has_tile {
                break;
            }
            if um_smem {
                // U^M (stage 0's group) has landed and is visible to the block.
                cp_async_wait_pending(d - 1);
                sync_threads();
            }
            // Resident form: the tile's U (and at a unit's first tile its I) has landed; only
            // the next tile's U may still be in flight.
            let u_base = smem + kernel.u_ahead_offset(warpgroup, count % 2);
            if RESIDENT {
                cp_async_wait_pending(1);
                if fresh {
                    fence_proxy_async_shared();
                    sync_threads();
                } else {
                    wg_sync();
                }
                let beam_in_wg = 16 * (t / 32) + lane / 4;
                unroll!(j in [0, 1, 2, 3, 4, 5] {
                    if (j as u32) < n8 {
                        unroll!(h in [0, 1] {
                            let row = M / 2 + 2 * j as u32 + c / 2;
                            let v = ld_shared_v2(u_base + 16 * (row * 64 + beam_in_wg + 8 * h as u32) + 8 * (c % 2));
                            let i = rs_un_index(j as u32, h as u32, 0) as usize;
                            un[i] = f32::from_bits(v[0]);
                            un[i + 1] = f32::from_bits(v[1]);
                        });
                    }
                });
            }

            // The A fragment of k16 step `u` of a period: chunks 2u (registers 0, 1) and 2u + 1
            // (2, 3), beams g (0, 2) and g + 8 (1, 3); U^M_p U^N_q in f32, then f16 (rn): the
            // W kernel's arithmetic, so W^T is the W path's W bit for bit.
            // With U^M in shared memory (period `pi`), each beam's U^M_p is loaded once per p,
            // at the chunk that starts it (q = 0), into `cur`: two LDS.32 per p, 8 distinct
            // 16-byte chunks per warp (conflict-free, `rs_um_offset`).
            let (um_beam, um_stride) = if RESIDENT {
                (u_base + rs_um_offset(0, 16 * (t / 32) + lane / 4, 64), 64)
            } else {
                (um_s + rs_um_offset(0, beam_in_tile, bb), bb)
            };
            let form = |u: u32, um: &[f32; 16], pi: u32, cur: &mut [f32; 2]| {
                let mut r = [0u32; 4];
                unroll!(half in [0, 1] {
                    let chunk = 2 * u + half as u32;
                    let (p, q) = rs_chunk_pq(chunk, N);
                    unroll!(h in [0, 1] {
                        let x = if um_smem || RESIDENT {
                            if q == 0 {
                                let at = um_beam + rs_um_offset(4 * quads * pi + p, 8 * h as u32, um_stride);
                                cur[h] = f32::from_bits(ld_shared_u32(at));
                            }
                            cur[h]
                        } else {
                            um[((2 * (p / 4) + h as u32) * 4 + p % 4) as usize]
                        };
                        let i = rs_un_index(q / 8, h as u32, 0) as usize;
                        r[2 * half + h] = f32x2_to_f16x2(x * un[i], x * un[i + 1]);
                    });
                });
                r
            };

            if TMA && warpgroup == 1 {
                // Warpgroup 1 starts each tile's main loop once warpgroup 0 has issued stage
                // `RS_TMA_LEAD`'s first wgmma, so that either's epilogue runs beside the
                // other's wgmmas.
                named_barrier(4, 256);
            }
            if RESIDENT && (warpgroup == 1 || ran) {
                // Our turn at the tensor cores: the other warpgroup has issued its main loop.
                named_barrier(if warpgroup == 0 { 5 } else { 4 }, 256);
            }
            acc = [0.0f32; ACC];
            let mut cur = [0.0f32; 2];
            let mut frag = [form(0, &um, 0, &mut cur), [0u32; 4]];
            let mut slot = if TMA { ring_slot } else { 0 };
            let mut stage = 0;
            let mut pi = 0;
            // Resident form: a warpgroup whose 64 beams all lie past the last skips its
            // wgmmas (pathfinder rect.'s 960 = 7.5 x 128); its J is not stored.
            let idle = RESIDENT && col0 + 64 * warpgroup >= beams;
            while pi < periods && !idle {
                // The next period's U^M (the last period reloads its own), a period ahead.
                let pn = if pi + 1 < periods { pi + 1 } else { pi };
                let um_next = load_um(pn);
                unroll!(u in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19] {
                    if (u as u32) < 4 * period {
                        let kk = u as u32 % 4;
                        if kk == 0 && TMA {
                            mbarrier_wait(full(slot), (full_phase >> slot) & 1);
                            full_phase ^= 1 << slot;
                        } else if kk == 0 && !RESIDENT {
                            cp_async_wait_pending(d - 1); // stage `stage` has landed
                            fence_proxy_async_shared();
                            // Also: the previous tile's staged J has been read out.
                            sync_threads();
                        }
                        fence();
                        mma(&mut acc, frag[u % 2], descriptor_k_major_128b(smem + slot * stage_bytes + 32 * kk));
                        commit_group();
                        if TMA && warpgroup == 0 && kk == 0 && stage == RS_TMA_LEAD {
                            named_barrier_arrive(4, 256);
                        }
                        let mut form_next = |cur: &mut [f32; 2]| {
                            if (u as u32) + 1 < 4 * period {
                                form(u as u32 + 1, &um, pi, cur)
                            } else {
                                form(0, &um_next, pn, cur)
                            }
                        };
                        // Resident form: the next step's A into fresh registers while this
                        // step's and the previous step's wgmmas run (only one warpgroup issues
                        // at a time when the two take turns).
                        let early = if RESIDENT { form_next(&mut cur) } else { [0; 4] };
                        // The group of step u - 1 is done: its A registers are free.
                        wait_group::<1>();
                        if kk == 0 && TMA {
                            // Stage - 1's groups are done: release its slot (the tile's last
                            // stage is released after the loop).
                            if stage >= 1 {
                                release(previous_slot(slot));
                            }
                        } else if kk == 0 && !RESIDENT {
                            // Every warpgroup waited for stage - WG's groups before the
                            // barrier above, so its slot takes stage + d (d = S - WG).
                            let next = stage + d;
                            let next_slot = if slot + d >= S { slot + d - S } else { slot + d };
                            if next < steps {
                                copy(next, next_slot);
                            }
                            cp_async_commit();
                        }
                        frag[(u + 1) % 2] = if RESIDENT { early } else { form_next(&mut cur) };
                        if kk == 3 {
                            slot = next_slot(slot);
                            stage += 1;
                        }
                    }
                });
                um = um_next;
                pi += 1;
            }
            if RESIDENT {
                named_barrier_arrive(if warpgroup == 0 { 4 } else { 5 }, 256);
            }
            ran = true;
            wait_group::<0>();
            if TMA {
                // The tile's last stage; the next tile goes on in the ring from the next slot.
                release(previous_slot(slot));
                ring_slot = slot;
            }
            // `cp` form: the ring is free (for staging J, or the next tile's first copies) once
            // every warpgroup's wgmmas are done. Resident and TMA forms: this warpgroup's J
            // slot is free once the previous tile's tensor store has read it.
            if own_halves {
                if t == 0 {
                    // The previous tile's tensor store has read this warpgroup's J half.
                    bulk_wait_read();
                }
                wg_sync();
            } else {
                sync_threads();
            }
            prev = (row0, col0, channel);
            have_prev = true;
            count += 1;
            tile = next_tile(tile);
        }
        if RESIDENT && warpgroup == 0 && ran {
            // The other warpgroup's last turn.
            named_barrier(5, 256);
        }
        if own_halves && t == 0 {
            bulk_wait();
        }
        if !TMA {
            cp_async_wait_all();
        }
    }

    macro_rules! rs_kernels {
        ($(($name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident, $copy:ident)),* $(,)?) => {
            $( rs_kernel!($copy, $name, $wg, $nt, $m, $n, $s, $mma); )*
        };
    }

    macro_rules! rs_kernel {
        (cp, $name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident) => {
            rs_kernel!(@entry $name, $wg, $nt, $m, $n, $s, $mma, cp,);
        };
        (@entry $name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident,
         $form:ident, $($maps:ident: $maps_type:ty)?) => {
            /// The transposed fused GEMM ([`RS_KERNELS`]): `J = I W` with W^T formed in
            /// registers; [`RsKernel::threads`] threads, [`RsKernel::smem_bytes`] of dynamic
            /// shared memory. The TMA and resident instances ([`RsKernel::tma`],
            /// [`RsKernel::resident`]) take one more argument: the tensor maps of I and of J
            /// (two `CUtensorMap`s in device memory, 64-byte aligned, written before the
            /// launch; J's used only where `beams` is a multiple of 8).
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(
                intensity: *const u16,
                u_m: *const f32,
                u_n: *const f32,
                out: *mut u16,
                times: u32,
                beams: u32,
                channels: u32,
                $($maps: $maps_type)?
            ) {
                fused_rs::<$wg, $nt, $m, $n, $s, { $nt / 2 }, { rs_form!($form).0 }, { rs_form!($form).1 }>(
                    intensity,
                    u_m,
                    u_n,
                    out,
                    (times, beams, channels),
                    0 $(+ $maps as u64)?,
                    |d, a, b| $mma(d, a, b, true),
                )
            }
        };
        // `tma` and `res`: the tensor maps as the last argument.
        ($form:ident, $name:ident, $wg:literal, $nt:literal, $m:literal, $n:literal, $s:literal, $mma:ident) => {
            rs_kernel!(@entry $name, $wg, $nt, $m, $n, $s, $mma, $form, tensor_maps: *const u8);
        };
    }
    rs_instances!(rs_kernels);
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::bank::is_conflict_free;
    use crate::wgmma::swizzle_128b;
    use std::vec::Vec;

    #[test]
    fn the_swizzle_is_the_sm80_kernels_for_128_byte_rows() {
        for row in 0..256 {
            for chunk in 0..8 {
                assert_eq!(swizzle_128b(row, 16 * chunk), super::super::swizzled(row, chunk, 64));
            }
        }
    }

    /// `copies(rows)` copies by `threads` threads through `chunk(thread, j)` cover a stage of
    /// `rows` x 128 bytes once, each warp's 16-byte stores conflict-free, and every later copy
    /// of a thread is its first plus whole rows (the form the kernel computes).
    fn check_copies(threads: u32, copies: impl Fn(u32) -> u32, chunk: impl Fn(u32, u32) -> (u32, u32)) {
        for rows in [HOPPER_BM, HOPPER_BN] {
            let mut seen = [0u32; (HOPPER_BN * 8) as usize];
            for j in 0..copies(rows) {
                for warp in 0..threads / 32 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let (r, c) = chunk(32 * warp + l as u32, j);
                        let (r0, _) = chunk(32 * warp + l as u32, 0);
                        assert_eq!(swizzle_128b(r, 16 * c), swizzle_128b(r0, 16 * c) + (r - r0) * 128);
                        swizzle_128b(r, 16 * c)
                    });
                    assert!(is_conflict_free(&at, 16), "rows {rows} copy {j} warp {warp}");
                    for a in at {
                        seen[(a / 16) as usize] += 1;
                    }
                }
            }
            assert!(seen[..(rows * 8) as usize].iter().all(|&n| n == 1), "rows {rows}");
        }
    }

    #[test]
    fn copies_cover_each_stage_once_without_conflicts() {
        check_copies(HOPPER_THREADS, hopper_copies, hopper_copy_chunk);
    }

    #[test]
    fn wide_copies_cover_each_stage_once_without_conflicts() {
        // 384 threads: A (192 rows) in 4 copies; B (256 rows) in 5 whole copies and a sixth
        // of the first 16 rows of 48 (threads 0..127, whole warps).
        for (rows, copies) in [(WIDE_BM, 4), (HOPPER_BN, 6)] {
            let mut seen = [0u32; (HOPPER_BN * 8) as usize];
            for j in 0..copies {
                for warp in 0..WIDE_THREADS / 32 {
                    let lanes: Vec<u32> = (0..32)
                        .map(|l| 32 * warp + l)
                        .filter(|&t| gemm_copy_chunk(WIDE_WARPGROUPS, t, j).0 < rows)
                        .collect();
                    assert!(
                        lanes.is_empty() || lanes.len() == 32,
                        "rows {rows} copy {j}: partial warp {warp}"
                    );
                    let at: Vec<u32> = lanes
                        .iter()
                        .map(|&t| {
                            let (r, c) = gemm_copy_chunk(WIDE_WARPGROUPS, t, j);
                            let (r0, _) = gemm_copy_chunk(WIDE_WARPGROUPS, t, 0);
                            // A thread's later copies are its first plus whole rows.
                            assert_eq!(swizzle_128b(r, 16 * c), swizzle_128b(r0, 16 * c) + (r - r0) * 128);
                            swizzle_128b(r, 16 * c)
                        })
                        .collect();
                    if let Ok(at) = <[u32; 32]>::try_from(at) {
                        assert!(is_conflict_free(&at, 16), "rows {rows} copy {j} warp {warp}");
                        for a in at {
                            seen[(a / 16) as usize] += 1;
                        }
                    }
                }
            }
            assert!(seen[..(rows * 8) as usize].iter().all(|&n| n == 1), "rows {rows}");
            assert!(seen[(rows * 8) as usize..].iter().all(|&n| n == 0), "rows {rows}");
        }
        // The kernel's copy guard: whole copies `256 / 48`, then rows below `256 % 48`.
        assert_eq!((HOPPER_BN / (WIDE_THREADS / 8), HOPPER_BN % (WIDE_THREADS / 8)), (5, 16));
        for t in 0..HOPPER_THREADS {
            assert_eq!(gemm_copy_chunk(2, t, 3), hopper_copy_chunk(t, 3));
        }
    }

    use crate::frb_beamformer::FRB_CASES;

    #[test]
    fn rs_periods_cover_whole_quads_of_p_in_whole_stages() {
        for case in FRB_CASES {
            let (m, n) = (case.m, case.n);
            let (stages, quads) = rs_period(n);
            let n8 = n / 4;
            // 8 chunks per stage, n8 chunks per p, 4 p per quad.
            assert_eq!(8 * stages, 4 * quads * n8, "N = {n}");
            assert!((m * n / 16).is_multiple_of(stages), "({m}, {n}): whole periods");
            assert!((2 * m).is_multiple_of(4 * quads));
            // The kernel's unroll bounds: 4 P <= 20 k16 steps, Q <= 2 quads, n8 <= 6.
            assert!(4 * stages <= 20 && quads <= 2 && n8 <= 6, "N = {n}");
        }
        assert_eq!([8, 12, 16, 20, 24].map(rs_period), [(1, 1), (3, 2), (2, 1), (5, 2), (3, 1)]);
    }

    #[test]
    fn rs_a_fragment_is_w_transposed_at_k_2n_p_plus_q() {
        // Thread (lane = 4 g + c), register `reg`, half `e` of k16 step `u` of period `pi`:
        // the kernel takes chunk 2u + reg / 2 of the period, (p, q0) = rs_chunk_pq, q = q0 +
        // 2c + e, U^M from `[quad][h][p % 4]` of the period's quads and U^N from
        // rs_un_index(q0 / 8, h, e); this must be W^T[row][k] with k = 2N p + q (global).
        for case in FRB_CASES {
            let n = case.n;
            let (stages, quads) = rs_period(n);
            for pi in 0..(case.m * n / 16 / stages) {
                for u in 0..4 * stages {
                    let mut seen = [[false; 16]; 16];
                    for lane in 0..32 {
                        let (g, c) = (lane / 4, lane % 4);
                        for reg in 0..4 {
                            for e in 0..2 {
                                let (row, k_rel) = rs_a_position(lane, reg, e, u);
                                assert!(!core::mem::replace(
                                    &mut seen[row as usize][(k_rel % 16) as usize],
                                    true
                                ));
                                let (p, q0) = rs_chunk_pq(2 * u + reg / 2, n);
                                let h = reg % 2;
                                assert_eq!(row, g + 8 * h);
                                let k = 64 * stages * pi + k_rel;
                                assert_eq!(
                                    (k / (2 * n), k % (2 * n)),
                                    (4 * quads * pi + p, q0 + 2 * c + e),
                                    "N {n}"
                                );
                                // Constant register indices inside the kernel's arrays.
                                assert!(p / 4 < quads && (2 * (p / 4) + h) * 4 + p % 4 < 16);
                                let i = rs_un_index(q0 / 8, h, e);
                                assert!(q0 % 8 == 0 && i < n && i < 24);
                            }
                        }
                    }
                    assert!(seen.iter().flatten().all(|&s| s), "the m16k16 fragment once");
                }
            }
            // A thread's U^N registers: each (j, h, e) once.
            let mut used = [false; 24];
            for j in 0..n / 4 {
                for h in 0..2 {
                    for e in 0..2 {
                        assert!(!core::mem::replace(&mut used[rs_un_index(j, h, e) as usize], true));
                    }
                }
            }
        }
    }

    #[test]
    fn rs_staged_epilogue_is_a_conflict_free_bijection() {
        for kernel in RS_KERNELS {
            let (nt, bb) = (kernel.nt, kernel.beams());
            let mut seen = std::vec![false; (nt * bb) as usize];
            for row in 0..nt {
                for beam in 0..bb {
                    let at = kernel.staged_offset(row, beam);
                    if kernel.tma || kernel.resident {
                        // The tensor store's box of each 64 beams: 128-byte rows from a
                        // 1024-byte aligned base, 16-byte chunks XOR-ed by `row % 8` (the
                        // 128-byte swizzle of the tensor map).
                        let half = (beam / 64) * kernel.stage_bytes();
                        assert_eq!(at - half, swizzle_128b(row, 2 * (beam % 64)));
                    }
                    assert!(at < nt * bb * 2 && at % 16 == 2 * (beam % 8));
                    assert!(!core::mem::replace(&mut seen[(at / 2) as usize], true), "{kernel:?}");
                }
            }
            // stmatrix .x4 .trans: lane l gives row 8 (2 jp + l / 16) + l % 8 of beam chunk
            // (warp beam + 8 ((l / 8) % 2)) / 8; phases are the 4 matrices of 8 lanes.
            for warp in 0..kernel.warpgroups * 4 {
                let warp_beam = 64 * (warp / 4) + 16 * (warp % 4);
                for jp in 0..nt / 16 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let (l, mi) = (l as u32, l as u32 / 8);
                        kernel.staged_offset(8 * (2 * jp + mi / 2) + l % 8, warp_beam + 8 * (mi % 2))
                    });
                    assert!(crate::bank::is_conflict_free(&at, 16), "{kernel:?} warp {warp} jp {jp}");
                }
            }
            // The copy-out: thread `tid` reads chunk `(tid + threads i) % (bb / 8)` of row
            // `(tid + threads i) / (bb / 8)`; whole warps conflict-free.
            let per_row = bb / 8;
            for i in 0..nt.div_ceil(16) {
                for warp in 0..kernel.consumer_threads() / 32 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let idx = (32 * warp + l as u32 + kernel.consumer_threads() * i) % (nt * per_row);
                        kernel.staged_offset(idx / per_row, 8 * (idx % per_row))
                    });
                    assert!(crate::bank::is_conflict_free(&at, 16), "{kernel:?} copy-out {i}");
                }
            }
            // The store loop's bound covers the tile.
            assert!(nt.div_ceil(16) * kernel.consumer_threads() >= nt * per_row && nt.div_ceil(16) <= 16);
        }
    }

    #[test]
    fn rs_um_in_shared_memory_is_copied_once_and_read_conflict_free() {
        for kernel in RS_KERNELS.iter().filter(|k| k.um_in_smem()) {
            let (bb, threads) = (kernel.beams(), kernel.threads());
            // Copy j of thread tid: chunk (quad 2 j + tid / bb, beam tid % bb), whole warps
            // storing 512 consecutive bytes.
            let mut seen = std::vec![0u32; (kernel.um_bytes() / 16) as usize];
            for j in 0..kernel.m / 4 {
                for warp in 0..threads / 32 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let tid = 32 * warp + l as u32;
                        let (quad, b) = (2 * j + tid / bb, tid % bb);
                        assert_eq!(rs_um_offset(4 * quad, b, bb), 16 * (quad * bb + b));
                        16 * (quad * bb + b)
                    });
                    assert!(is_conflict_free(&at, 16), "{kernel:?}");
                    for a in at {
                        seen[(a / 16) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{kernel:?}");
            // Reads: lane 4 g + c of warp w loads U^M_p of beam 16 (w % 4) + 64 (w / 4) + g + 8 h.
            for p in 0..2 * kernel.m {
                for warp in 0..threads / 32 {
                    for h in 0..2 {
                        let at: [u32; 32] = core::array::from_fn(|l| {
                            let beam = 64 * (warp / 4) + 16 * (warp % 4) + l as u32 / 4;
                            rs_um_offset(0, beam, bb) + rs_um_offset(p, 8 * h, bb)
                        });
                        assert!(at.iter().all(|&a| a + 4 <= kernel.um_bytes() && a % 4 == 0));
                        assert!(is_conflict_free(&at, 4), "{kernel:?} p {p}");
                    }
                }
            }
        }
    }

    #[test]
    fn rs_resident_form_covers_every_tile_and_its_buffers_fit() {
        // Every tile once, a block's units in beam-tile runs.
        for (tiles, run, grid) in [(40, 5, 3), (12, 2, 5), (7, 7, 1), (8, 1, 3), (30, 3, 132)] {
            let mut seen = std::vec![0u32; tiles as usize];
            for block in 0..grid {
                let mut tile = block * run;
                while tile < tiles {
                    seen[tile as usize] += 1;
                    let next = rs_next_tile(tile, grid * run, run);
                    assert!(next > tile && (next == tile + 1 || next.is_multiple_of(run)));
                    tile = next;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{tiles} {run} {grid}");
        }
        assert_eq!(rs_next_tile(u32::MAX - 1, 10, 1), u32::MAX);
        for kernel in RS_KERNELS.iter().filter(|k| k.resident) {
            let (m, n, wg) = (kernel.m, kernel.n, kernel.warpgroups);
            assert!(wg == 2 && !kernel.tma && !kernel.um_in_smem());
            // The whole K in the slots before J's staging slots; U copies per thread.
            assert!(m * n / 16 <= kernel.stages - wg && (m + n) / 4 <= 12 && (m + n) % 4 == 0);
            assert!((kernel.u_ahead_bytes() / 16).is_multiple_of(128));
            // The four U buffers follow the ring, apart, before the (unused) barrier slot.
            let ring = kernel.stages * kernel.stage_bytes();
            for (i, (w, b)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
                assert_eq!(kernel.u_ahead_offset(w, b), ring + i as u32 * kernel.u_ahead_bytes());
            }
            assert_eq!(kernel.u_ahead_offset(1, 1) + kernel.u_ahead_bytes(), kernel.barrier_offset());
            assert!(kernel.smem_bytes() <= 227 * 1024, "{kernel:?}");
            // U copies: row (t + 128 j) / 64, beam t % 64, each chunk once, warps conflict-free.
            let rows = (m + n) / 2;
            let mut seen = std::vec![0u32; (rows * 64) as usize];
            for j in 0..(m + n) / 4 {
                for warp in 0..4 {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let t = 32 * warp + l as u32;
                        16 * ((t + 128 * j) / 64 * 64 + t % 64)
                    });
                    assert!(is_conflict_free(&at, 16));
                    for a in at {
                        seen[(a / 16) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "{kernel:?}");
            // Reads of lane 4 g + c of warp w (beams 16 w + g + 8 h): U^M_p (4 bytes, four
            // lanes per word) conflict-free; U^N pairs (8 bytes) at most 2-way, once per tile.
            for warp in 0..4 {
                for h in 0..2 {
                    for p in 0..2 * m {
                        let at: [u32; 32] = core::array::from_fn(|l| {
                            rs_um_offset(0, 16 * warp + l as u32 / 4, 64) + rs_um_offset(p, 8 * h, 64)
                        });
                        assert!(is_conflict_free(&at, 4));
                    }
                    for j in 0..n / 4 {
                        let at: [u32; 32] = core::array::from_fn(|l| {
                            let (g, c) = (l as u32 / 4, l as u32 % 4);
                            let row = m / 2 + 2 * j + c / 2;
                            16 * (row * 64 + 16 * warp + g + 8 * h) + 8 * (c % 2)
                        });
                        assert!(at.iter().all(|&a| a + 8 <= kernel.u_ahead_bytes()));
                        assert!(crate::bank::wavefronts(&at, 8) <= 4);
                    }
                }
            }
            // J: each warpgroup's copy-out of its half, 8 threads per row, conflict-free.
            for w in 0..2 {
                for i in 0..kernel.nt.div_ceil(16) {
                    for warp in 0..4 {
                        let at: [u32; 32] = core::array::from_fn(|l| {
                            let t = 32 * warp + l as u32;
                            kernel.staged_offset((t / 8 + 16 * i) % kernel.nt, 64 * w + 8 * (t % 8))
                        });
                        assert!(is_conflict_free(&at, 16), "{kernel:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn rs_copies_cover_each_i_tile_once_without_conflicts() {
        for kernel in RS_KERNELS {
            let (threads, nt) = (kernel.threads(), kernel.nt);
            let stride = threads / 8;
            let mut seen = std::vec![0u32; (nt * 8) as usize];
            for j in 0..8 {
                for warp in 0..threads / 32 {
                    let lanes: Vec<u32> =
                        (0..32).map(|l| 32 * warp + l).filter(|t| t / 8 + stride * j < nt).collect();
                    assert!(lanes.is_empty() || lanes.len() == 32, "{kernel:?}: whole warps");
                    if let Ok(at) = <[u32; 32]>::try_from(
                        lanes
                            .iter()
                            .map(|t| swizzle_128b(t / 8 + stride * j, 16 * (t % 8)))
                            .collect::<Vec<_>>(),
                    ) {
                        assert!(crate::bank::is_conflict_free(&at, 16));
                        for a in at {
                            seen[(a / 16) as usize] += 1;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{kernel:?}");
        }
    }

    /// A model of the TMA form's protocol over `tiles` tiles of `steps` stages, a ring of
    /// `ring` slots and warpgroup 1 starting each tile `lead` stages behind: the producer
    /// fills a slot once both consumer warpgroups released its previous stage; a warpgroup
    /// issues a stage once it has landed, releasing the previous one as it does (a tile's last
    /// stage after the tile); warpgroup 0 arrives on barrier 4 as it issues a tile's stage
    /// `lead`, and warpgroup 1 waits there before each tile. The producer goes first, then
    /// warpgroup 0, warpgroup 1 only when neither can move: warpgroup 0 as far ahead as the
    /// ring lets it. Err if the three stop short of the last stage (a deadlock), or if
    /// warpgroup 0 arrives for tile t + 1 before warpgroup 1 has passed tile t's wait (the
    /// arrival would fall into the wrong phase of the barrier).
    fn rs_tma_protocol(ring: u32, steps: u32, lead: u32, tiles: u32) -> Result<(), std::string::String> {
        let total = tiles * steps;
        // Stages loaded; issued per warpgroup.
        let (mut loaded, mut issued) = (0u32, [0u32; 2]);
        let released = |issued: u32| if issued.is_multiple_of(steps) { issued } else { issued - 1 };
        while issued != [total; 2] {
            if loaded < total && loaded < ring + released(issued[0]).min(released(issued[1])) {
                loaded += 1;
            } else if issued[0] < total && issued[0] < loaded {
                let (tile, stage) = (issued[0] / steps, issued[0] % steps);
                // Warpgroup 1 has passed tile - 1's wait once it has issued a stage of it.
                if stage == lead && tile >= 1 && issued[1] <= (tile - 1) * steps {
                    return Err(std::format!(
                        "arrival for tile {tile} while warpgroup 1 waits for tile {}",
                        tile - 1
                    ));
                }
                issued[0] += 1;
            } else if issued[1] < total
                && issued[1] < loaded
                && (!issued[1].is_multiple_of(steps) || issued[0] > issued[1] + lead)
            {
                issued[1] += 1;
            } else {
                return Err(std::format!("stuck at {loaded} loaded, {issued:?} issued"));
            }
        }
        Ok(())
    }

    #[test]
    fn rs_tma_protocol_runs_to_the_end_exactly_where_the_lead_fits() {
        for ring in 2..9 {
            for steps in 1..12 {
                for lead in 0..10 {
                    for tiles in 1..5 {
                        let model = rs_tma_protocol(ring, steps, lead, tiles);
                        // One tile has no next arrival to misplace.
                        let fits = rs_tma_lead_fits(ring, steps, lead)
                            || (tiles == 1 && lead < ring && lead < steps);
                        assert_eq!(
                            model.is_ok(),
                            fits,
                            "ring {ring}, {steps} stages, lead {lead}, {tiles} tiles: {model:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn rs_kernels_fit_and_the_default_pads_least() {
        for (i, kernel) in RS_KERNELS.iter().enumerate() {
            assert!(RS_KERNELS[..i].iter().all(|k| k.name != kernel.name));
            assert!(FRB_CASES.iter().any(|c| (c.m, c.n) == (kernel.m, kernel.n)));
            assert!(kernel.nt % 8 == 0 && kernel.nt <= 256 && kernel.stages >= 3);
            assert!(kernel.stage_bytes() % 1024 == 0, "{kernel:?}: whole atoms per stage");
            // J's staged tile is exactly the last WG slots (`cp` form: of the ring, which the
            // next tile's first S - WG stages, at least 2, at most 7 groups pending, leave
            // alone; TMA form: after its ring of S - WG).
            let wg = kernel.warpgroups;
            assert!((2..=4).contains(&wg) && kernel.stages >= wg + 2 && kernel.stages - wg <= 7);
            assert_eq!(kernel.nt * 2 * kernel.beams(), wg * kernel.stage_bytes());
            // U^M in shared memory: M / 4 whole 16-byte chunks per thread, after the ring.
            assert_eq!(kernel.um_in_smem(), wg >= 3);
            if kernel.um_in_smem() {
                assert!(kernel.m.is_multiple_of(4) && kernel.m / 4 <= 6);
                assert_eq!(kernel.um_bytes(), 16 * (kernel.m / 4) * kernel.threads());
            }
            // 256 threads without a cap run one block per SM (ptxas may take 255 registers);
            // capped kernels fit their blocks per SM in registers and shared memory.
            let cap = REGISTER_LIMITS.iter().find(|(k, _)| *k == kernel.name).map(|l| l.1);
            // TMA instances: `build.rs` caps them at launch; two warpgroups consume.
            let cap = if kernel.tma {
                assert!(cap.is_none() && kernel.warpgroups == 2);
                let (ring, steps) = (kernel.ring_slots(), kernel.m * kernel.n / 16);
                assert!(rs_tma_lead_fits(ring, steps, RS_TMA_LEAD), "{kernel:?}");
                for tiles in 1..6 {
                    assert_eq!(rs_tma_protocol(ring, steps, RS_TMA_LEAD, tiles), Ok(()), "{kernel:?}");
                }
                Some(RS_TMA_LAUNCH_REGISTERS)
            } else {
                cap
            };
            let blocks = match cap {
                Some(cap) => 65536 / (cap * kernel.threads()),
                None => {
                    assert_eq!(kernel.threads(), 256, "{kernel:?} needs a register cap");
                    1
                }
            };
            assert!(blocks >= 1 && blocks * (kernel.smem_bytes() + 1024) <= 228 * 1024, "{kernel:?}");
        }
        assert_eq!(rs_pick_tile(917, &RS_DEFAULT_TILES), 232);
        assert_eq!(rs_pick_tile(980, &RS_DEFAULT_TILES), 248);
        assert_eq!(rs_pick_tile(1, &RS_DEFAULT_TILES), 232);
        assert_eq!(rs_pick_tile(496, &RS_DEFAULT_TILES), 248);
        for case in FRB_CASES {
            for times in [1, 200, 917, 980] {
                for beams in [1, 640, 960, 2560, 5760] {
                    let k = rs_default_kernel(case.n, times, beams).expect("a default for every grid");
                    assert_eq!(k.m, case.m);
                    assert!(k.warpgroups == RS_DEFAULT_WARPGROUPS || k.warpgroups == RS_WIDE_WARPGROUPS);
                }
            }
        }
        // Seed Table 4 (B = 10 MN): the TMA form for full CHORD and HIRAX.
        let pick = |n, times, beams| rs_default_kernel(n, times, beams).unwrap().name;
        assert_eq!(pick(24, 917, 5760), "frb_resample_fused_rsp2tma_n24_t232_sm90a");
        // N = 12 where the resident tile pads more rows (496 = 2 x 248 against 3 x 184): the
        // 192-beam kernel where it pads no more work (552 x 192 against 496 x 256), else the
        // 2-warpgroup `cp` kernel (552 x 1152 against 496 x 1024).
        assert_eq!(pick(12, 496, 192), "frb_resample_fused_rsp3_n12_t184_sm90a");
        // The pathfinder grids: the resident form.
        assert_eq!(pick(12, 917, 960), "frb_resample_fused_rsp2res_n12_t184_sm90a");
        assert_eq!(pick(8, 917, 640), "frb_resample_fused_rsp2res_n8_t232_sm90a");
        // Not where its tile pads more rows: 496 = 2 x 248, against 3 x 232.
        assert_eq!(pick(8, 496, 640), "frb_resample_fused_rsp2_n8_t248_sm90a");
        assert_eq!(pick(16, 980, 2560), "frb_resample_fused_rsp2tma_n16_t248_sm90a");
        assert_eq!(pick(20, 980, 3200), "frb_resample_fused_rsp2tma_n20_t248_sm90a");
        assert_eq!(pick(16, 917, 2560), "frb_resample_fused_rsp2tma_n16_t232_sm90a");
        assert_eq!(pick(24, 980, 5760), "frb_resample_fused_rsp2tma_n24_t248_sm90a");
        assert_eq!(pick(24, 917, 128), "frb_resample_fused_rsp2tma_n24_t232_sm90a");
        assert_eq!(pick(12, 496, 1024), "frb_resample_fused_rsp2_n12_t248_sm90a");
        for kernel in RS_KERNELS.iter().filter(|k| k.warpgroups == RS_WIDE_WARPGROUPS) {
            assert_eq!(kernel.nt, RS_WIDE_TILE);
        }
    }

    #[test]
    fn the_wide_tile_is_taken_where_it_pads_no_more_rows() {
        // Seed Table 4: 917 slow samples (pathfinder, full CHORD) and 980 (HIRAX).
        assert!(use_wide_tile(917));
        assert!(!use_wide_tile(980));
        for times in [1, 64, 70, 128, 200, 300] {
            assert!(!use_wide_tile(times), "{times}");
        }
        for times in [129, 192, 384, 576, 960] {
            assert!(use_wide_tile(times), "{times}");
        }
    }

    #[test]
    fn wide_kernels_fit_registers_shared_memory_and_atoms() {
        let cap =
            REGISTER_LIMITS.iter().find(|(k, _)| *k == "frb_resample_gemm_wide_sm90a").expect("listed").1;
        assert!(cap * WIDE_THREADS <= 65536 && cap % 8 == 0);
        assert!(wide_smem_bytes() <= 227 * 1024);
        for wg in [2, 3] {
            assert_eq!(gemm_stage_bytes(wg) % 1024, 0);
            assert_eq!(gemm_b_offset(wg) % 1024, 0);
            assert_eq!(hopper_a_offset(wg - 1) % 1024, 0);
        }
        assert_eq!(gemm_stage_bytes(2), hopper_stage_bytes());
        // J (192 x 256 f16) is staged in the ring.
        let staged = (0..HOPPER_BN).map(|col| staged_offset(WIDE_BM - 1, col) + 2).max().unwrap();
        assert_eq!(staged, WIDE_BM * HOPPER_BN * 2);
        assert!(staged <= WIDE_STAGES * gemm_stage_bytes(WIDE_WARPGROUPS));
    }

    #[test]
    fn staged_epilogue_is_a_conflict_free_bijection() {
        use crate::wgmma::accumulator_position;
        let mut seen = [false; (HOPPER_BM * HOPPER_BN) as usize];
        for row in 0..HOPPER_BM {
            for col in 0..HOPPER_BN {
                let at = staged_offset(row, col);
                assert!(at < HOPPER_BM * HOPPER_BN * 2 && at.is_multiple_of(2));
                assert!(!core::mem::replace(&mut seen[(at / 2) as usize], true));
                // 8 consecutive columns from a multiple of 8 stay one 16-byte chunk.
                assert_eq!(at % 16, 2 * (col % 8));
            }
        }
        // Accumulator pair stores (full tiles: rows 64 w + ..; half tiles: columns 128 w + ..).
        for (row_base, col_base) in [(0, 0), (64, 0), (0, 128)] {
            for warp in 0..4 {
                for reg in (0..128).step_by(2) {
                    let at: [u32; 32] = core::array::from_fn(|l| {
                        let (r, c) = accumulator_position(32 * warp + l as u32, reg);
                        staged_offset(row_base + r, (col_base + c) % HOPPER_BN)
                    });
                    assert!(is_conflict_free(&at, 4), "warp {warp} reg {reg}");
                }
            }
        }
        // The copy-out: warp w reads row r's 32 chunks.
        for row in 0..HOPPER_BM {
            let at: [u32; 32] = core::array::from_fn(|c| staged_offset(row, 8 * c as u32));
            assert!(is_conflict_free(&at, 16), "row {row}");
        }
        assert!(HOPPER_BM * HOPPER_BN * 2 <= HOPPER_STAGES * hopper_stage_bytes());
    }

    #[test]
    fn tiles_sit_on_1024_byte_atoms_and_fit_shared_memory() {
        assert_eq!(hopper_stage_bytes() % 1024, 0);
        assert_eq!(hopper_a_offset(1) % 1024, 0);
        assert_eq!(hopper_b_offset() % 1024, 0);
        assert!(hopper_smem_bytes() <= 227 * 1024);
        const { assert!(HOPPER_STAGES >= 3, "the W kernel copies S - 1 >= 2 stages ahead") };
        assert_eq!(hopper_copies(HOPPER_BM), 4);
        assert_eq!(hopper_copies(HOPPER_BN), 8);
    }
}
