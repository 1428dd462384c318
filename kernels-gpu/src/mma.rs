//! Tensor-core wrappers: `D = A B + C` over one warp (`mma.sync.aligned`, PTX ISA 9.7.13).
//!
//! Register assignments use the notation of K. Smith's "CHORD FRB beamformer" (the FRB note,
//! App. B.1) and of the CHORD baseband beamformer note (App. A): physical
//! bits are the thread `t4..t0`, register `r..` and byte `b..` indices of a value, logical bits
//! the row/column bits of the matrix (`i` rows of A and C, `j` the contracted index, `k`
//! columns of B and C). The same tables are data in [`crate::layout`] (`M16N8K8_F16_A`, ...)
//! and the GPU tests in `tests/gpu_mma.rs` load random matrices through those tables and
//! compare with a CPU product: the tables below are verified, not copied.
//!
//! Every wrapper is warp-collective: all 32 lanes must call it with converged control flow.
use core::arch::asm;

/// m16n8k8 f16 (FRB note App. C.1): `D = A B + C`, f16 accumulate.
/// ```text
/// [(16 x 8) f16 A_ij]  b0 <-> j0   r0 <-> i3   t0 t1 t2 t3 t4 <-> j1 j2 i0 i1 i2   (156)
/// [(8 x 8)  f16 B_jk]  b0 <-> j0               t0 t1 t2 t3 t4 <-> j1 j2 k0 k1 k2   (157)
/// [(16 x 8) f16 C_ik]  b0 <-> k0   r0 <-> i3   t0 t1 t2 t3 t4 <-> k1 k2 i0 i1 i2   (158)
/// ```
/// B is one register: the FRB note's eq. 157 also lists `r0 <-> j3`, a bit that does not exist at k = 8.
#[inline(always)]
pub fn mma_m16n8k8_f16(a: [u32; 2], b: u32, c: [u32; 2]) -> [u32; 2] {
    let (d0, d1): (u32, u32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_80+).
    unsafe {
        asm!("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {{{0}, {1}}}, {{{2}, {3}}}, {{{4}}}, {{{5}, {6}}};",
            out(reg32) d0, out(reg32) d1, in(reg32) a[0], in(reg32) a[1], in(reg32) b,
            in(reg32) c[0], in(reg32) c[1], options(pure, nomem, nostack))
    };
    [d0, d1]
}

/// m16n8k16 f16 with f16 accumulate (FRB note App. C.2):
/// ```text
/// [(16 x 16) f16 A_ij]  b0 <-> j0   r0 r1 <-> i3 j3   t0 t1 t2 t3 t4 <-> j1 j2 i0 i1 i2  (159)
/// [(16 x 8)  f16 B_jk]  b0 <-> j0   r0 <-> j3         t0 t1 t2 t3 t4 <-> j1 j2 k0 k1 k2  (160)
/// [(16 x 8)  f16 C_ik]  b0 <-> k0   r0 <-> i3         t0 t1 t2 t3 t4 <-> k1 k2 i0 i1 i2  (161)
/// ```
#[inline(always)]
pub fn mma_m16n8k16_f16(a: [u32; 4], b: [u32; 2], c: [u32; 2]) -> [u32; 2] {
    let (d0, d1): (u32, u32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_80+).
    unsafe {
        asm!("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {{{0}, {1}}}, {{{2}, {3}, {4}, {5}}}, {{{6}, {7}}}, {{{8}, {9}}};",
            out(reg32) d0, out(reg32) d1,
            in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
            in(reg32) b[0], in(reg32) b[1], in(reg32) c[0], in(reg32) c[1],
            options(pure, nomem, nostack))
    };
    [d0, d1]
}

/// m16n8k16 f16 with f32 accumulate. A and B as [`mma_m16n8k16_f16`]; C and D are f32:
/// ```text
/// [(16 x 8) f32 C_ik]  r0 r1 <-> k0 i3   t0 t1 t2 t3 t4 <-> k1 k2 i0 i1 i2
/// ```
#[inline(always)]
pub fn mma_m16n8k16_f16_f32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_80+).
    unsafe {
        asm!("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}};",
            out(reg32) d0, out(reg32) d1, out(reg32) d2, out(reg32) d3,
            in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
            in(reg32) b[0], in(reg32) b[1],
            in(reg32) c[0], in(reg32) c[1], in(reg32) c[2], in(reg32) c[3],
            options(pure, nomem, nostack))
    };
    [d0, d1, d2, d3]
}

/// Sparse m16n8k16 f16 (FRB note App. C.3), `mma.sp::ordered_metadata` form, sparsity
/// selector `F` (0..4: the lane `t0 t1` inside each quad that supplies metadata).
/// ```text
/// [(16 x 4 x 2) f16 Asp_ij'J]  b0 <-> J   r0 <-> i3   t0 t1 t2 t3 t4 <-> j2 j3 i0 i1 i2  (164)
/// [(16 x 8) f16 B_jk]          b0 <-> j0  r0 <-> j3   t0 t1 t2 t3 t4 <-> j1 j2 k0 k1 k2  (165)
/// [(16 x 8) f16 C_ik]          b0 <-> k0  r0 <-> i3   t0 t1 t2 t3 t4 <-> k1 k2 i0 i1 i2  (166)
/// [(16 x 4 x 2) int2 E_ij'J]   b0 b1 b2 b3 <-> J j2 j3 i3   t2 t3 t4 <-> i0 i1 i2;
///                              t0 t1 = F                                               (167)
/// ```
/// with `Asp[i][j'][J] = A[i][4 j' + E[i][j'][J]]` (163), `E[i][j'][0] < E[i][j'][1]`.
/// The GPU test `sparse_metadata_forms` checks both PTX forms against eq. 163; this one is
/// the form PTX ISA 8.5 defines for sm_80 and later, and the one we use.
#[inline(always)]
pub fn mma_sp_m16n8k16_f16<const F: u32>(asp: [u32; 2], b: [u32; 2], c: [u32; 2], e: u32) -> [u32; 2] {
    let (d0, d1): (u32, u32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_80+, PTX 8.5).
    unsafe {
        asm!("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {{{0}, {1}}}, {{{2}, {3}}}, {{{4}, {5}}}, {{{6}, {7}}}, {8}, {9};",
            out(reg32) d0, out(reg32) d1, in(reg32) asp[0], in(reg32) asp[1],
            in(reg32) b[0], in(reg32) b[1], in(reg32) c[0], in(reg32) c[1], in(reg32) e,
            const F, options(pure, nomem, nostack))
    };
    [d0, d1]
}

/// The same operation with the older `mma.sp` (unordered metadata) spelling, kept so the
/// GPU test can show on each architecture which form gives eq. 163.
#[inline(always)]
pub fn mma_sp_unordered_m16n8k16_f16<const F: u32>(
    asp: [u32; 2],
    b: [u32; 2],
    c: [u32; 2],
    e: u32,
) -> [u32; 2] {
    let (d0, d1): (u32, u32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_80+).
    unsafe {
        asm!("mma.sp.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {{{0}, {1}}}, {{{2}, {3}}}, {{{4}, {5}}}, {{{6}, {7}}}, {8}, {9};",
            out(reg32) d0, out(reg32) d1, in(reg32) asp[0], in(reg32) asp[1],
            in(reg32) b[0], in(reg32) b[1], in(reg32) c[0], in(reg32) c[1], in(reg32) e,
            const F, options(pure, nomem, nostack))
    };
    [d0, d1]
}

/// The FRB note's eq. 173 (the universal sparsity metadata for the selector `F = n`), shared with
/// the host.
pub use crate::layout::universal_sparse_metadata;

/// m8n8k16 s8 with s32 accumulate (baseband note App. A, eqs. 39-41), wrapping on overflow:
/// ```text
/// [(8 x 16) int8 A_ij]   b0 b1 <-> j0 j1   t0 t1 t2 t3 t4 <-> j2 j3 i0 i1 i2   (39)
/// [(16 x 8) int8 B_jk]   b0 b1 <-> j0 j1   t0 t1 t2 t3 t4 <-> j2 j3 k0 k1 k2   (40)
/// [(8 x 8) int32 C_ik]   r0 <-> k0         t0 t1 t2 t3 t4 <-> k1 k2 i0 i1 i2   (41)
/// ```
#[inline(always)]
pub fn mma_m8n8k16_s8(a: u32, b: u32, c: [i32; 2]) -> [i32; 2] {
    let (d0, d1): (i32, i32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_75+).
    unsafe {
        asm!("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {{{0}, {1}}}, {{{2}}}, {{{3}}}, {{{4}, {5}}};",
            out(reg32) d0, out(reg32) d1, in(reg32) a, in(reg32) b, in(reg32) c[0], in(reg32) c[1],
            options(pure, nomem, nostack))
    };
    [d0, d1]
}

/// [`mma_m8n8k16_s8`] with `.satfinite`: results clamp to `[i32::MIN, i32::MAX]`.
#[inline(always)]
pub fn mma_m8n8k16_s8_satfinite(a: u32, b: u32, c: [i32; 2]) -> [i32; 2] {
    let (d0, d1): (i32, i32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_75+).
    unsafe {
        asm!("mma.sync.aligned.m8n8k16.row.col.satfinite.s32.s8.s8.s32 {{{0}, {1}}}, {{{2}}}, {{{3}}}, {{{4}, {5}}};",
            out(reg32) d0, out(reg32) d1, in(reg32) a, in(reg32) b, in(reg32) c[0], in(reg32) c[1],
            options(pure, nomem, nostack))
    };
    [d0, d1]
}

/// m16n8k32 s8 with s32 accumulate, wrapping on overflow. Its tables are two copies of the
/// m8n8k16 ones (baseband note footnote 7): `i3` and `j4` become register bits.
/// ```text
/// [(16 x 32) int8 A_ij]  b0 b1 <-> j0 j1   r0 r1 <-> i3 j4   t0 t1 t2 t3 t4 <-> j2 j3 i0 i1 i2
/// [(32 x 8) int8 B_jk]   b0 b1 <-> j0 j1   r0 <-> j4         t0 t1 t2 t3 t4 <-> j2 j3 k0 k1 k2
/// [(16 x 8) int32 C_ik]  r0 r1 <-> k0 i3                     t0 t1 t2 t3 t4 <-> k1 k2 i0 i1 i2
/// ```
#[inline(always)]
pub fn mma_m16n8k32_s8(a: [u32; 4], b: [u32; 2], c: [i32; 4]) -> [i32; 4] {
    let (d0, d1, d2, d3): (i32, i32, i32, i32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_80+).
    unsafe {
        asm!("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}};",
            out(reg32) d0, out(reg32) d1, out(reg32) d2, out(reg32) d3,
            in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
            in(reg32) b[0], in(reg32) b[1],
            in(reg32) c[0], in(reg32) c[1], in(reg32) c[2], in(reg32) c[3],
            options(pure, nomem, nostack))
    };
    [d0, d1, d2, d3]
}

/// [`mma_m16n8k32_s8`] with `.satfinite`: results clamp to `[i32::MIN, i32::MAX]`.
#[inline(always)]
pub fn mma_m16n8k32_s8_satfinite(a: [u32; 4], b: [u32; 2], c: [i32; 4]) -> [i32; 4] {
    let (d0, d1, d2, d3): (i32, i32, i32, i32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_80+).
    unsafe {
        asm!("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}};",
            out(reg32) d0, out(reg32) d1, out(reg32) d2, out(reg32) d3,
            in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
            in(reg32) b[0], in(reg32) b[1],
            in(reg32) c[0], in(reg32) c[1], in(reg32) c[2], in(reg32) c[3],
            options(pure, nomem, nostack))
    };
    [d0, d1, d2, d3]
}
