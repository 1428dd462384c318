//! Hopper warpgroup tensor cores (`wgmma.mma_async`, PTX ISA 9.7.15), for the second PTX
//! module that `build.rs` compiles for `sm_90a` (`--cfg radio_sm90a`). The host loads that
//! module only on compute capability 9.0 and keeps the sm_80 kernels everywhere else.
//!
//! `D (64 x N) += A (64 x K) B (K x N)`: one warpgroup (4 consecutive, 128-aligned warps) per
//! op, A and B read from shared memory through 64-bit matrix descriptors. Both operands here
//! are *K-major* (K contiguous: rows of A, columns of B), the only form wgmma allows for 8-bit
//! types, in the 128-byte swizzle: a tile of R rows x 128 bytes is `R / 8` atoms of 8 rows x
//! 128 B (1024 B, 1024-aligned), and within an atom the 16-byte chunk `c` of row `r` lies at
//! chunk `c ^ (r % 8)` ([`swizzle_128b`]). Operands wider than 128 bytes of K are several such
//! tiles. One op contracts 32 bytes of K (k16 f16, k32 s8); the k-th op of a 128-byte row
//! starts 32 k bytes further ([`descriptor_k_major_128b`] with `start + 32 k`), the swizzle
//! being a function of the address bits, as in CUTLASS's descriptor iterator.
//!
//! Accumulator layout (f32 or s32), thread `t` of the warpgroup, warp `w = t / 32`, lane `l`:
//! register `4 j + 2 h + e` holds `D[16 w + l / 4 + 8 h][8 j + 2 (l % 4) + e]`
//! ([`accumulator_position`]), i.e. `mma.sync`'s m16n8 C fragment repeated over N / 8 column
//! blocks, warp w owning rows 16 w .. 16 w + 15.
//!
//! Ordering rules the callers keep: shared memory written by ordinary stores or `cp.async`
//! must be made visible to the async proxy (`fence_proxy_async_shared`) before the barrier
//! that precedes the wgmma; `fence` before the first wgmma of a chain and after any other
//! instruction touched its accumulators; `commit_group` then `wait_group` before the
//! accumulators are read or the operand buffers overwritten.

/// The 128-byte swizzle: byte offset within a K-major tile (rows of 128 bytes) of byte
/// `byte` of row `row`. The tile base must be 1024-byte aligned.
#[inline(always)]
pub const fn swizzle_128b(row: u32, byte: u32) -> u32 {
    row * 128 + ((((byte >> 4) ^ row) & 7) << 4) + (byte & 15)
}

/// Shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle whose first
/// row starts at shared address `start` (16-byte aligned; its atom 1024-aligned except for the
/// k offset added inside a row). Leading byte offset 1 (unused by this layout), stride byte
/// offset 1024 (one 8-row atom to the next), base offset 0, swizzle mode 1 (128 B).
#[inline(always)]
pub const fn descriptor_k_major_128b(start: u32) -> u64 {
    let address = ((start & 0x3ffff) >> 4) as u64;
    let leading = 1u64;
    let stride = (1024 >> 4) as u64;
    address | (leading << 16) | (stride << 32) | (1u64 << 62)
}

/// (row, column) of D held by register `reg` of thread `thread` (0..128) of the warpgroup.
#[inline(always)]
pub const fn accumulator_position(thread: u32, reg: u32) -> (u32, u32) {
    let (warp, lane) = (thread / 32, thread % 32);
    let (j, h, e) = (reg / 4, (reg / 2) % 2, reg % 2);
    (16 * warp + lane / 4 + 8 * h, 8 * j + 2 * (lane % 4) + e)
}

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub use device::*;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
mod device {
    use core::arch::asm;

    /// `wgmma.fence`: orders earlier register and shared-memory accesses before the wgmmas
    /// that follow. Warpgroup-collective.
    #[inline(always)]
    pub fn fence() {
        // SAFETY: ordering instruction only.
        unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) }
    }

    /// Closes the wgmmas issued so far into one group.
    #[inline(always)]
    pub fn commit_group() {
        // SAFETY: ordering instruction only.
        unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) }
    }

    /// Waits until at most `PENDING` committed groups are still running.
    #[inline(always)]
    pub fn wait_group<const PENDING: u32>() {
        // SAFETY: ordering instruction only.
        unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const PENDING, options(nostack)) }
    }

    /// Makes this thread's generic-proxy shared-memory writes (st.shared, cp.async) visible
    /// to the async proxy that wgmma reads through. Follow with a barrier.
    #[inline(always)]
    pub fn fence_proxy_async_shared() {
        // SAFETY: ordering instruction only.
        unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
    }

    /// Sets this warp's register budget (`setmaxnreg`, warp-specialised kernels): `INC` raises
    /// it, otherwise lowers it. Every warp of the warpgroup must call it alike.
    #[inline(always)]
    pub fn set_max_registers<const COUNT: u32, const INC: bool>() {
        // SAFETY: changes only this warp's register allocation; the kernel's .maxnreg bounds it.
        unsafe {
            if INC {
                asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const COUNT, options(nostack))
            } else {
                asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const COUNT, options(nostack))
            }
        }
    }

    /// `D (64 x N) = A B + (scale_d ? D : 0)`, both operands K-major shared-memory
    /// descriptors, one 32-byte K step: f16 operands with f32 accumulators (`$types`
    /// ".f32.f16.f16", `$tail` ", 1, 1, 0, 0": no scaling or transposition of A and B), or s8
    /// with s32 accumulators, exact (".s32.s8.s8", no tail).
    macro_rules! wgmma_ss {
        ($name:ident, $shape:literal, $types:literal, $tail:literal, $acc:ty, $n:literal,
         [$first:literal $(, $i:literal)*]) => {
            #[doc = concat!("`wgmma.mma_async.sync.aligned.", $shape, $types, "`, A and B in shared memory.")]
            ///
            /// # Safety
            /// Warpgroup-collective; `a` and `b` must describe initialised shared memory that
            /// stays unchanged until the group containing this op has been waited for.
            #[inline(always)]
            pub unsafe fn $name(d: &mut [$acc; $n], a: u64, b: u64, scale_d: bool) {
                asm!(
                    concat!("{{ .reg .pred p; setp.ne.b32 p, {sd}, 0;\n wgmma.mma_async.sync.aligned.", $shape,
                        $types, " {{{", $first, "}" $(, ",{", $i, "}")*, "}}, {a}, {b}, p", $tail, "; }}"),
                    inout(reg32) d[$first] $(, inout(reg32) d[$i])*,
                    a = in(reg64) a, b = in(reg64) b, sd = in(reg32) scale_d as u32,
                    options(nostack),
                );
            }
        };
    }

    /// As `wgmma_ss` with A from registers: thread `t` holds `mma.sync`'s A fragment (m16n8k32
    /// s8, m16n8k16 f16) of rows `16 (t / 32) ..` in 4 registers (f16: a0a1, a2a3, a4a5, a6a7 =
    /// (row g, k 2c), (row g + 8, k 2c), (row g, k 2c + 8), (row g + 8, k 2c + 8), lane =
    /// 4 g + c, low half the lower k); B a K-major shared-memory descriptor. `$tail` as in
    /// `wgmma_ss` less A's transposition, which the register form does not take.
    macro_rules! wgmma_rs {
        ($name:ident, $shape:literal, $types:literal, $tail:literal, $acc:ty, $n:literal,
         [$first:literal $(, $i:literal)*]) => {
            #[doc = concat!("`wgmma.mma_async.sync.aligned.", $shape, $types, "`, A in registers, B in shared memory.")]
            ///
            /// # Safety
            /// Warpgroup-collective; `b` must describe initialised shared memory and `a` stay
            /// unchanged (its registers unwritten) until the group holding this op has been
            /// waited for; `wgmma.fence` between the writes of `a` and this op.
            #[inline(always)]
            pub unsafe fn $name(d: &mut [$acc; $n], a: [u32; 4], b: u64, scale_d: bool) {
                asm!(
                    concat!("{{ .reg .pred p; setp.ne.b32 p, {sd}, 0;\n wgmma.mma_async.sync.aligned.", $shape,
                        $types, " {{{", $first, "}" $(, ",{", $i, "}")*, "}}, {{{a0},{a1},{a2},{a3}}}, {b}, p",
                        $tail, "; }}"),
                    inout(reg32) d[$first] $(, inout(reg32) d[$i])*,
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                    b = in(reg64) b, sd = in(reg32) scale_d as u32,
                    options(nostack),
                );
            }
        };
    }

    /// `$wrapper!(args, N, [0, .., N - 1])`: the wrappers' accumulator register lists
    /// (N = 32, 64, 128 registers for n = 64, 128, 256), each written once.
    macro_rules! with_registers {
        (32, $wrapper:ident!($($args:tt)*)) => {
            $wrapper!($($args)* 32, [
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
                24, 25, 26, 27, 28, 29, 30, 31
            ]);
        };
        (64, $wrapper:ident!($($args:tt)*)) => {
            $wrapper!($($args)* 64, [
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
                24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45,
                46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63
            ]);
        };
        (128, $wrapper:ident!($($args:tt)*)) => {
            $wrapper!($($args)* 128, [
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
                24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45,
                46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67,
                68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89,
                90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108,
                109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125,
                126, 127
            ]);
        };
    }

    with_registers!(32, wgmma_ss!(mma_m64n64k16_f32_f16, "m64n64k16", ".f32.f16.f16", ", 1, 1, 0, 0", f32,));
    with_registers!(
        64,
        wgmma_ss!(mma_m64n128k16_f32_f16, "m64n128k16", ".f32.f16.f16", ", 1, 1, 0, 0", f32,)
    );
    with_registers!(
        128,
        wgmma_ss!(mma_m64n256k16_f32_f16, "m64n256k16", ".f32.f16.f16", ", 1, 1, 0, 0", f32,)
    );
    with_registers!(32, wgmma_ss!(mma_m64n64k32_s32_s8, "m64n64k32", ".s32.s8.s8", "", i32,));
    with_registers!(64, wgmma_ss!(mma_m64n128k32_s32_s8, "m64n128k32", ".s32.s8.s8", "", i32,));
    with_registers!(128, wgmma_ss!(mma_m64n256k32_s32_s8, "m64n256k32", ".s32.s8.s8", "", i32,));
    with_registers!(32, wgmma_rs!(mma_rs_m64n64k32_s32_s8, "m64n64k32", ".s32.s8.s8", "", i32,));
    with_registers!(64, wgmma_rs!(mma_rs_m64n128k32_s32_s8, "m64n128k32", ".s32.s8.s8", "", i32,));
    with_registers!(128, wgmma_rs!(mma_rs_m64n256k32_s32_s8, "m64n256k32", ".s32.s8.s8", "", i32,));

    // RS f16 wgmma with f32 accumulators, for N that are not powers of two
    // (the transposed fused resampling GEMM, `frb_beamformer::resample::hopper`: N = a tile of
    // slow samples sized to cut padding: 232 = 917 / 4 rounded up to 8, 248 for 980, and 184 =
    // 917 / 5 for the 192-beam blocks, whose 92 accumulators fit the 168 registers they allow).
    wgmma_rs!(
        mma_rs_m64n232k16_f32_f16,
        "m64n232k16",
        ".f32.f16.f16",
        ", 1, 1, 0",
        f32,
        116,
        [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
            27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
            51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74,
            75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98,
            99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115
        ]
    );
    wgmma_rs!(
        mma_rs_m64n248k16_f32_f16,
        "m64n248k16",
        ".f32.f16.f16",
        ", 1, 1, 0",
        f32,
        124,
        [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
            27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
            51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74,
            75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98,
            99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117,
            118, 119, 120, 121, 122, 123
        ]
    );
    wgmma_rs!(
        mma_rs_m64n184k16_f32_f16,
        "m64n184k16",
        ".f32.f16.f16",
        ", 1, 1, 0",
        f32,
        92,
        [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
            27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
            51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74,
            75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91
        ]
    );

    /// Applies `$f(r)` to every register index `r` of a 128-register accumulator with `r` a
    /// constant, so the array stays in registers (a loop would index it dynamically).
    #[macro_export]
    macro_rules! for_each_accumulator_128 {
        ($f:expr) => {
            $crate::for_each_accumulator_128!(@ $f; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
                24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53
                54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83
                84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109
                110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127)
        };
        (@ $f:expr; $($r:literal)*) => { $( $f($r); )* };
    }

    // Self-test of the descriptor and swizzle algebra above (host: `selftest::wgmma`):
    // D[64][256] = A[64][256 B of K] B[256][256 B of K]^T, both inputs row-major with K
    // contiguous, through two 128-byte K tiles per operand, the first op with scale_d = false
    // over a poisoned accumulator. One block of 128 threads, 81 KiB of dynamic shared memory.
    const SELFTEST_A_TILE: u32 = 64 * 128;
    const SELFTEST_B_TILE: u32 = 256 * 128;

    /// Copies `rows` x 256 bytes (row-major) into two swizzled K tiles of `rows` x 128 B.
    unsafe fn selftest_stage(src: *const u8, rows: u32, smem: u32, tile_bytes: u32) {
        let thread = crate::intrinsics::thread_idx_x();
        let mut chunk = thread;
        while chunk < rows * 16 {
            let (row, k_chunk) = (chunk / 16, chunk % 16);
            let value = crate::intrinsics::ld_global_v4(src.add(16 * chunk as usize) as *const u32);
            let dst = smem + (k_chunk / 8) * tile_bytes + super::swizzle_128b(row, (k_chunk % 8) * 16);
            crate::intrinsics::st_shared_v4(dst, value);
            chunk += 128;
        }
    }

    /// Shared addresses of the A and B tiles, the base rounded up to 1024 bytes.
    unsafe fn selftest_load(a: *const u8, b: *const u8) -> (u32, u32) {
        let base = (crate::intrinsics::dynamic_shared() + 1023) & !1023;
        let b_base = base + 2 * SELFTEST_A_TILE;
        selftest_stage(a, 64, base, SELFTEST_A_TILE);
        selftest_stage(b, 256, b_base, SELFTEST_B_TILE);
        fence_proxy_async_shared();
        crate::intrinsics::sync_threads();
        (base, b_base)
    }

    /// Self-test of `wgmma` m64n256k16 f32 += f16 x f16: `d[64][256]` f32 (row-major) =
    /// `a[64][128]` f16 times `b[256][128]` f16 transposed (both row-major, K contiguous).
    /// One block of 128 threads with 81 KiB of dynamic shared memory.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn selftest_wgmma_m64n256_f16(a: *const u8, b: *const u8, d: *mut f32) {
        let (a_base, b_base) = selftest_load(a, b);
        let mut acc = [1.0e9f32; 128];
        fence();
        for op in 0..8u32 {
            let (tile, k) = (op / 4, op % 4);
            let desc_a = super::descriptor_k_major_128b(a_base + tile * SELFTEST_A_TILE + 32 * k);
            let desc_b = super::descriptor_k_major_128b(b_base + tile * SELFTEST_B_TILE + 32 * k);
            mma_m64n256k16_f32_f16(&mut acc, desc_a, desc_b, op != 0);
        }
        commit_group();
        wait_group::<0>();
        let thread = crate::intrinsics::thread_idx_x();
        crate::for_each_accumulator_128!(|r: u32| {
            let (row, col) = super::accumulator_position(thread, r);
            *d.add((row * 256 + col) as usize) = acc[r as usize];
        });
    }

    /// Self-test of `wgmma` m64n256k32 s32 += s8 x s8: `d[64][256]` i32 (row-major) =
    /// `a[64][256]` i8 times `b[256][256]` i8 transposed (both row-major, K contiguous).
    /// One block of 128 threads with 81 KiB of dynamic shared memory.
    #[no_mangle]
    pub unsafe extern "ptx-kernel" fn selftest_wgmma_m64n256_s8(a: *const u8, b: *const u8, d: *mut i32) {
        let (a_base, b_base) = selftest_load(a, b);
        let mut acc = [0x5a5a_5a5ai32; 128];
        fence();
        for op in 0..8u32 {
            let (tile, k) = (op / 4, op % 4);
            let desc_a = super::descriptor_k_major_128b(a_base + tile * SELFTEST_A_TILE + 32 * k);
            let desc_b = super::descriptor_k_major_128b(b_base + tile * SELFTEST_B_TILE + 32 * k);
            mma_m64n256k32_s32_s8(&mut acc, desc_a, desc_b, op != 0);
        }
        commit_group();
        wait_group::<0>();
        let thread = crate::intrinsics::thread_idx_x();
        crate::for_each_accumulator_128!(|r: u32| {
            let (row, col) = super::accumulator_position(thread, r);
            *d.add((row * 256 + col) as usize) = acc[r as usize];
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzle_permutes_16_byte_chunks_within_each_row_of_an_atom() {
        for row in 0..64u32 {
            let mut seen = [false; 8];
            for byte in 0..128u32 {
                let at = swizzle_128b(row, byte);
                assert_eq!(at / 128, row, "a row stays in its 128 bytes");
                assert_eq!(at % 16, byte % 16, "16-byte chunks stay whole");
                if byte % 16 == 0 {
                    seen[(at % 128 / 16) as usize] = true;
                }
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn swizzled_stores_of_eight_rows_hit_every_bank_once_per_phase() {
        // A quarter warp (8 lanes) storing 16 bytes each to the same chunk of 8 consecutive
        // rows covers all 32 banks: the staging stores are conflict-free.
        for chunk in 0..8u32 {
            let mut banks = [0u32; 32];
            for row in 0..8u32 {
                let at = swizzle_128b(row, 16 * chunk);
                for word in 0..4 {
                    banks[((at / 4 + word) % 32) as usize] += 1;
                }
            }
            assert!(banks.iter().all(|&n| n == 1), "chunk {chunk}: {banks:?}");
        }
    }

    #[test]
    fn descriptor_fields() {
        let d = descriptor_k_major_128b(0x1_2340);
        assert_eq!(d & 0x3fff, 0x1234);
        assert_eq!((d >> 16) & 0x3fff, 1);
        assert_eq!((d >> 32) & 0x3fff, 1024 >> 4);
        assert_eq!((d >> 49) & 7, 0);
        assert_eq!(d >> 62, 1);
        // The k-th op of a row: 32 bytes further, the other fields unchanged.
        assert_eq!(descriptor_k_major_128b(0x1_2340 + 32) - d, 2);
    }

    #[test]
    fn accumulator_positions_cover_the_tile_once() {
        for n in [64u32, 128, 256] {
            let mut seen = [[false; 256]; 64];
            for thread in 0..128 {
                for reg in 0..n / 2 {
                    let (row, col) = accumulator_position(thread, reg);
                    assert!(row < 64 && col < n);
                    assert!(!seen[row as usize][col as usize], "({row}, {col}) twice");
                    seen[row as usize][col as usize] = true;
                }
            }
        }
    }
}

// --- mbarrier hand-off for warp-specialised kernels (correlator `Split`, the fused
// resampling kernel; PTX ISA 9.7.13.15).
// A shared-memory mbarrier completes a phase once `count` arrivals have come; waiters name
// the phase by its parity (the n-th completion has parity n % 2). `arrive` releases and a
// successful `try_wait` acquires at CTA scope, so data written before an arrival is visible
// after the wait; with `cp_async_arrive` a phase also waits for the arriving thread's
// earlier `cp.async` copies to land, so a copying thread never waits for its own copies.
#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
pub use mbarrier::*;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
mod mbarrier {
    use core::arch::asm;

    /// Initialises the 8-byte mbarrier at shared address `bar` (8-aligned) for `count`
    /// arrivals per phase. One thread, followed by a block barrier before any use.
    ///
    /// # Safety
    /// `bar` must be shared memory of this block, not in use as an mbarrier.
    #[inline(always)]
    pub unsafe fn mbarrier_init(bar: u32, count: u32) {
        asm!("mbarrier.init.shared::cta.b64 [{b}], {n};", b = in(reg32) bar, n = in(reg32) count, options(nostack));
    }

    /// One arrival (release at CTA scope).
    ///
    /// # Safety
    /// `bar` must be an initialised mbarrier whose current phase still expects an arrival.
    #[inline(always)]
    pub unsafe fn mbarrier_arrive(bar: u32) {
        asm!(
            "{{ .reg .b64 state; mbarrier.arrive.shared::cta.b64 state, [{b}]; }}",
            b = in(reg32) bar,
            options(nostack)
        );
    }

    /// Whether the phase of parity `parity` has completed (acquire at CTA scope when true);
    /// the hardware may suspend the thread a while before answering false.
    ///
    /// # Safety
    /// `bar` must be an initialised mbarrier.
    #[inline(always)]
    pub unsafe fn mbarrier_try_wait(bar: u32, parity: u32) -> bool {
        let done: u32;
        asm!(
            "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {parity}; selp.u32 {d}, 1, 0, p; }}",
            b = in(reg32) bar,
            parity = in(reg32) parity,
            d = out(reg32) done,
            options(nostack)
        );
        done != 0
    }

    /// Waits until the phase of parity `parity` has completed.
    ///
    /// # Safety
    /// As [`mbarrier_try_wait`]; the phase must eventually complete.
    #[inline(always)]
    pub unsafe fn mbarrier_wait(bar: u32, parity: u32) {
        while !mbarrier_try_wait(bar, parity) {}
    }

    /// Counted arrival for this thread's `cp.async` copies: raises the pending count now and
    /// lowers it when every copy this thread issued so far has landed, so the phase completes
    /// only after both that and this thread's own [`mbarrier_arrive`]. (The `.noinc` form,
    /// with the init count covering the copy arrivals instead, hung the correlator on the
    /// H200; not investigated further.)
    ///
    /// # Safety
    /// `bar` must be an initialised mbarrier whose phase still expects this thread.
    #[inline(always)]
    pub unsafe fn cp_async_arrive(bar: u32) {
        asm!("cp.async.mbarrier.arrive.shared::cta.b64 [{b}];", b = in(reg32) bar, options(nostack));
    }

    /// Makes [`mbarrier_init`]'s initialisations visible to the async proxy (the tensor
    /// copies that complete transactions on them). One thread, before the block barrier.
    #[inline(always)]
    pub fn fence_mbarrier_init() {
        // SAFETY: ordering instruction only.
        unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) }
    }

    /// One arrival that also expects `bytes` more bytes of transactions in the current phase
    /// (the tensor copies that [`tma_load_3d`] completes on `bar`).
    ///
    /// # Safety
    /// As [`mbarrier_arrive`].
    #[inline(always)]
    pub unsafe fn mbarrier_arrive_expect_tx(bar: u32, bytes: u32) {
        asm!(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};",
            b = in(reg32) bar,
            n = in(reg32) bytes,
            options(nostack)
        );
    }

    /// `cp.async.bulk.tensor.3d` store (TMA): the box at shared address `src`, laid out and
    /// swizzled as the tensor map at generic address `tensor_map` says, to the tensor at
    /// `coords` (innermost first; elements outside the tensor are not written), in this
    /// thread's current bulk group ([`bulk_commit`]).
    ///
    /// # Safety
    /// As [`tma_load_3d`], the tensor writable; `src` must not be written before
    /// [`bulk_wait_read`] returns for its group.
    #[inline(always)]
    pub unsafe fn tma_store_3d(tensor_map: u64, coords: [u32; 3], src: u32) {
        asm!(
            "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [{m}, {{{x}, {y}, {z}}}], [{s}];",
            m = in(reg64) tensor_map,
            x = in(reg32) coords[0],
            y = in(reg32) coords[1],
            z = in(reg32) coords[2],
            s = in(reg32) src,
            options(nostack)
        );
    }

    /// Closes this thread's bulk group of tensor stores.
    #[inline(always)]
    pub fn bulk_commit() {
        // SAFETY: no operands.
        unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) }
    }

    /// Waits until every bulk group of this thread has read its shared memory.
    #[inline(always)]
    pub fn bulk_wait_read() {
        // SAFETY: no operands.
        unsafe { asm!("cp.async.bulk.wait_group.read 0;", options(nostack)) }
    }

    /// Waits until every bulk group of this thread has completed (its writes made).
    #[inline(always)]
    pub fn bulk_wait() {
        // SAFETY: no operands.
        unsafe { asm!("cp.async.bulk.wait_group 0;", options(nostack)) }
    }

    /// `cp.async.bulk.tensor.3d` (TMA): the box of the tensor map at generic address
    /// `tensor_map` whose first element is at `coords` (innermost first; elements outside the
    /// tensor are zero) into shared memory at `dst`, laid out and swizzled as the map says;
    /// the box's bytes complete as transactions on the mbarrier `bar`.
    ///
    /// # Safety
    /// `tensor_map` must address a valid tensor map (kernel parameter or global memory) whose
    /// tensor is readable; `dst` must hold the box, aligned as its swizzle requires (1024
    /// bytes for the 128-byte swizzle); `bar`'s phase must expect the bytes.
    #[inline(always)]
    pub unsafe fn tma_load_3d(dst: u32, tensor_map: u64, bar: u32, coords: [u32; 3]) {
        asm!(
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}, {z}}}], [{b}];",
            d = in(reg32) dst,
            m = in(reg64) tensor_map,
            x = in(reg32) coords[0],
            y = in(reg32) coords[1],
            z = in(reg32) coords[2],
            b = in(reg32) bar,
            options(nostack)
        );
    }
}
