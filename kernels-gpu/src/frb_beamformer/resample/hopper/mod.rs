//! The resampling GEMM `J = I W` and its fused form on Hopper's warpgroup tensor cores
//! (`wgmma`, sm_90a), for the module `build.rs` compiles with `--cfg radio_sm90a`. Same
//! formula, layouts and results as the sm_80 kernels: I `[f][tbar][rho]`, W `[f][beta][rho]`
//! (f16 bits), J `[f][tbar][beta]` f16. Layout functions: the parent's `layout`; entry points:
//! the parent's `device`. Device code: `gemm` (the W-path GEMMs) and `fused` (the
//! transposed fused kernel: scheduler, producer, mainloop, epilogue).
//!
//! W path (`gemm`). Both operands are already K-major (rho contiguous), the form `wgmma`
//! wants, so a stage is a `64 WG x 64` tile of I and a `256 x 64` tile of W, each row 128
//! bytes in the 128-byte swizzle ([`crate::wgmma::swizzle_128b`]; the sm_80 kernels'
//! `swizzled(.., 64)` is the same map). A block of `WG` warpgroups computes a `64 WG` (tbar)
//! x [`HOPPER_BN`] (beam) tile: warpgroup `w` rows `64 w .. 64 w + 63` with 4 `m64n256k16`
//! per stage (128 f32 accumulators per thread). All threads copy stages ahead with
//! `cp.async` while the tensor cores run stage `s`; one `wgmma` group stays in flight
//! (`wgmma.wait_group 1`). After issuing stage `s`, every thread waits for its group `s - 1`
//! and the block meets a second barrier, so stage `s + S - 1` can go into `s - 1`'s slot. J
//! is staged in the ring ([`staged_offset`]) and stored in whole 16-byte chunks, a warp per
//! 512-byte row, rather than by the fragments' scattered 4-byte stores.
//!
//! Two tiles: narrow, `WG` = 2 ([`HOPPER_BM`] = 128 rows, 256 threads, [`HOPPER_STAGES`] =
//! 4); a tile whose rows all lie in its first 64 (full CHORD's last, 21 of 128) is split by
//! beams instead (`m64n128`, half the wgmma work; the block-uniform branch keeps ptxas from
//! serialising the wgmmas, as a per-warpgroup skip did, C7518). Wide, `WG` = 3 ([`WIDE_BM`]
//! = 192 rows, 384 threads, [`WIDE_GEMM_REGISTERS`]): a third more MMA work per byte of I and
//! W pulled from L2, which bounds the narrow kernel. Its tiles are never split; instead a
//! warpgroup whose 64 rows all lie past the edge (HIRAX's 980 = 5 x 192 + 20: two of the
//! last tile's three) skips its wgmmas and J staging. The host takes the wide tile where it
//! pads no more rows ([`use_wide_tile`]): a tile with idle warpgroups still pulls its whole
//! W tile.
//!
//! Fused path (`fused`): the transposed GEMM `J^T[beta][tbar] = sum_k W^T[beta][k]
//! I^T[k][tbar]` (`frb_resample_fused_rsp{WG}{form}_n{N}_t{NT}_sm90a`, [`RS_KERNELS`]), with
//! W^T formed in registers as the A operand of `wgmma.mma_async.m64n{NT}k16.f32.f16.f16` in
//! its RS form, so W never exists in device or shared memory. M = beams: `WG` warpgroups of
//! 64 (128 or 192 beams per block); N = a tile of NT slow samples, 232 or 248 for 128 beams
//! ([`rs_pick_tile`]: 917 = 4 x 232 - 11, 980 = 4 x 248 - 12); K = rho streamed in stages of
//! 64. The B operand is I's rows `[f][tbar][rho]`, K-major as stored, in a ring of stages of
//! `NT x 128` bytes in the 128-byte swizzle (rows past the last read as zero). Only I crosses
//! L2: 2 / 128 bytes per MAC, whatever N.
//!
//! A fragment (m64k16, `mma.sync` m16n8k16's A per warp; [`rs_a_position`]): warp `w` of a
//! warpgroup owns beams `16 w .. 16 w + 15`, lane `4 g + c` holds registers
//! (beam g, k 2c..2c+1), (beam g + 8, k 2c..), (beam g, k 2c + 8..), (beam g + 8, k 2c + 8..)
//! of each k16 step, each `cvt.rn.f16x2.f32` of two f32 products `U^M_p U^N_q` (the W
//! kernel's arithmetic, so W^T is the W path's W bit for bit). As 2N is a multiple of 8, a
//! thread only needs k = 8 m + 2c + e: chunk m (of 8 k) is p = m / n8, q = 8 (m % n8) + 2c + e
//! with n8 = 2N / 8 ([`rs_chunk_pq`]). The k loop is unrolled over a period ([`rs_period`]:
//! the fewest whole stages covering whole quads of 4 p, 1-5 stages), in which every (p mod 4,
//! q) is a constant; each thread keeps `U^N_{8 j + 2c + e}` of its two beams (4 n8 = N f32,
//! [`rs_un_index`]) for the whole tile and loads U^M of its two beams one 16-byte quad per
//! beam, a period ahead (the U kernel's `[f][p/4][beta][4]`). Per k16 step: `wgmma.fence`,
//! the RS wgmma, commit, `wait_group 1` (the previous step's A registers are then free), and
//! the next step's A (8 FMUL + 4 F2FP) in the shadow of the running wgmma. Beams past the
//! last have zero U^N (their W^T rows are +-0) and their J is not stored.
//!
//! Epilogue: the accumulators are J^T (thread: beams g, g + 8 of its warp, slow-sample pairs
//! 8 j + 2c, + 1). `stmatrix .trans` writes each 8 x 8 block transposed as 8 J rows of 8
//! beams (16 bytes) into the ring's last `WG` slots ([`rs_staged_offset`]: rows of
//! `2 x 64 WG` bytes, 16-byte chunks XOR-swizzled by `row % 8`, conflict-free both ways),
//! then whole 16-byte chunks of J rows go to device memory. The kernel is persistent: one
//! block per SM, each looping over every `gridDim.x`-th tile (slow-sample tile fastest, then
//! beam tile, then channel).
//!
//! `cp` form (`rsp2`, `rsp3`): every thread copies I's stages by `cp.async` into a ring of
//! `S` slots, `S - WG` stages ahead, one block barrier per stage (every warpgroup has waited
//! for stage `s - WG`'s groups before the barrier of stage `s`); a tile's first stages are
//! copied into the first slots before the previous tile's J is staged in the last `WG` and
//! stored, so the epilogue and the next tile's pipeline fill overlap. Its J equals the W
//! path's bit for bit in every GPU test. The 3-warpgroup instance (192 beams, 384 threads,
//! [`RS_WIDE_REGISTERS`]) pulls a third less I from L2 per MAC; to fit 168 registers its tile
//! is 184 slow samples (92 accumulators; 917 = 5 x 184 - 3), U^M moves to shared memory (the
//! tile's `2M x 192` f32 in the U kernel's `[p/4][beta][4]` layout, [`rs_um_offset`], copied
//! by `cp.async` with stage 0's group, read by two LDS.32 per p; U^N stays in registers, as
//! from shared memory its 32 bytes per thread per k16 step would add about two thirds to the
//! wgmmas' own shared-memory reads), copies run `S - 3` = 4 stages ahead in a ring of 7 so
//! that J's staged tile (three slots) is left alone, and the copy-out steps 16 rows at a time
//! from one base (the unrolled form's precomputed addresses spilled).
//!
//! TMA form (`rsp2tma`, [`RsKernel::tma`], N = 16, 20 and 24: HIRAX and full CHORD): the
//! same consumer warpgroups and arithmetic, J bit for bit the same, with a producer
//! warpgroup in front (384 threads, launched at [`RS_TMA_LAUNCH_REGISTERS`], then
//! `setmaxnreg` gives the consumers [`RS_CONSUMER_REGISTERS`]). Its thread 0 runs through
//! the block's tiles copying each stage by one tensor copy (`cp.async.bulk.tensor`, a tensor
//! map of I from the host: box 64 rho x NT x 1 in the 128-byte swizzle, rows past the last
//! read as zero) into a ring of `S - 2` = 5 slots that runs on across tiles, completing on
//! the slot's `full` mbarrier, as soon as both consumer warpgroups have released the slot on
//! its `empty` mbarrier (after the wgmmas that read it). The consumers issue no copies and
//! meet no barrier per stage or around the epilogue: each stages its own 64-beam half of J in
//! its own slot after the ring (the 128-byte swizzle, [`rs_staged_offset_halves`]), which
//! leaves by one tensor store from its thread 0 (rows and beams past the last are not
//! written; thread stores where `beams` is not a multiple of 8), and warpgroup 1 waits once
//! per tile, before its main loop, for warpgroup 0 to issue the tile's stage
//! [`RS_TMA_LEAD`] (named barrier 4; [`rs_tma_lead_fits`]), so that either's epilogue, and
//! the drain and U loads around it, run beside the other's wgmmas.
//!
//! Resident form (`rsp2res`, [`RsKernel::resident`], the pathfinder grids): where the whole
//! K (256 or 384) fits the ring beside J's staging slots, a block takes a unit (slow-sample
//! tile, channel) at a time, copies its I tile once and runs every beam tile of the unit on
//! it (tiles in beam-fastest order, [`rs_next_tile`]), so I crosses L2 once per unit instead
//! of once per beam tile, with no barrier per stage. Each warpgroup works on its own 64
//! beams of each tile: its U^M and U^N come a tile ahead by `cp.async` into its own two
//! buffers ([`RsKernel::u_ahead_offset`]; loaded from device memory, their latency stalls
//! every period), it forms the next k16 step's A before waiting for the previous wgmma, it
//! stages its J half in its own slot, which leaves by one tensor store from its thread 0
//! (the host's J tensor map; thread stores where `beams` is not a multiple of 8), and the two
//! warpgroups take turns at the tensor cores (named barriers 4 and 5: a warpgroup starts its
//! main loop once the other has issued its own), so that one's epilogue runs beside the
//! other's wgmmas. A warpgroup whose beams all lie past the last skips its wgmmas.

#[allow(unused_imports)]
use super::*;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub(super) mod fused;
#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub(super) mod gemm;
