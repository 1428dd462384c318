//! Device intrinsics: inline PTX for everything `core::arch::nvptx` does not offer.
//!
//! Conventions (every kernel of the project relies on them):
//! - Blocks are one-dimensional in x (`blockDim = (32 * warps, 1, 1)`), so the warp index is
//!   `threadIdx.x / 32` and the lane is `threadIdx.x % 32` (read from `%laneid`).
//! - Shared memory is addressed with 32-bit shared-window addresses (`u32`), as CUTLASS does
//!   with `__cvta_generic_to_shared`; `ld.shared`/`st.shared` take them directly, which
//!   saves the 64-bit generic-address arithmetic in inner loops.
//! - Warp-collective functions (`shfl_*`, `match_any`, `vote_*`, the mma wrappers) must be
//!   reached by all 32 lanes of the warp (mask 0xffffffff): none of our kernels diverges
//!   across them.
//!
//! PTX reference: PTX ISA 8.5, sections 9.7.9 (data movement), 9.7.12 (shfl, vote, match),
//! 9.7.8.7 (prmt), 9.7.7.6 (lop3), 9.7.13 (mma).
use core::arch::asm;

/// Full warp member mask.
pub const FULL_WARP: u32 = 0xffff_ffff;

/// Repeats `$body` with `$v` bound to each listed constant: a guaranteed unroll, so register
/// arrays are indexed by constants (a runtime index would put them in local memory).
macro_rules! unroll {
    ($v:ident in [$($i:literal),*] $body:block) => { $( { #[allow(unused)] let $v: usize = $i; $body } )* };
}
pub(crate) use unroll;

// ---------------------------------------------------------------------------------------
// Thread, block, lane and warp indices.

/// Thread index within the block along x, `0..blockDim.x` (`%tid.x`); blocks are one-dimensional,
/// so this is the thread's index in the block.
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { core::arch::nvptx::_thread_idx_x() as u32 }
}

/// Block index along x, `0..gridDim.x` (`%ctaid.x`).
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: as above.
    unsafe { core::arch::nvptx::_block_idx_x() as u32 }
}

/// Block index along y, `0..gridDim.y` (`%ctaid.y`).
#[inline(always)]
pub fn block_idx_y() -> u32 {
    // SAFETY: as above.
    unsafe { core::arch::nvptx::_block_idx_y() as u32 }
}

/// Block index along z, `0..gridDim.z` (`%ctaid.z`).
#[inline(always)]
pub fn block_idx_z() -> u32 {
    // SAFETY: as above.
    unsafe { core::arch::nvptx::_block_idx_z() as u32 }
}

/// Threads per block along x (`%ntid.x`): the block size, a multiple of 32 in every kernel.
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: as above.
    unsafe { core::arch::nvptx::_block_dim_x() as u32 }
}

/// Blocks in the grid along x (`%nctaid.x`).
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: as above.
    unsafe { core::arch::nvptx::_grid_dim_x() as u32 }
}

/// Blocks in the grid along y (`%nctaid.y`).
#[inline(always)]
pub fn grid_dim_y() -> u32 {
    // SAFETY: as above.
    unsafe { core::arch::nvptx::_grid_dim_y() as u32 }
}

/// Lane within the warp, 0..32 (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    let lane: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {0}, %laneid;", out(reg32) lane, options(pure, nomem, nostack)) };
    lane
}

/// Warp index within a one-dimensional block (`threadIdx.x / 32`). Not `%warpid`, which
/// names a hardware slot and may change during execution.
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_idx_x() >> 5
}

/// Global thread index in x (`blockIdx.x * blockDim.x + threadIdx.x`).
#[inline(always)]
pub fn global_thread_x() -> u32 {
    block_idx_x() * block_dim_x() + thread_idx_x()
}

// ---------------------------------------------------------------------------------------
// Barriers.

/// `__syncthreads()`: barrier 0 over the whole block; also orders shared-memory accesses.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: every thread of the block reaches the barrier (callers keep it uniform).
    unsafe { asm!("bar.sync 0;", options(nostack)) };
}

/// `__syncwarp()`: converges the warp and orders its memory accesses.
#[inline(always)]
pub fn sync_warp() {
    // SAFETY: the full warp takes part.
    unsafe { asm!("bar.warp.sync {0};", in(reg32) FULL_WARP, options(nostack)) };
}

/// Named barrier `id` (1..16) over `threads` threads (a multiple of 32); for producer and
/// consumer warp groups that must not wait on the whole block.
#[inline(always)]
pub fn named_barrier(id: u32, threads: u32) {
    // SAFETY: callers pass the documented ranges and the same values in every thread.
    unsafe { asm!("bar.sync {0}, {1};", in(reg32) id, in(reg32) threads, options(nostack)) };
}

/// `bar.arrive`: counts the calling warp's threads toward named barrier `id` without waiting
/// (the other side of a [`named_barrier`] over the same `threads`).
#[inline(always)]
pub fn named_barrier_arrive(id: u32, threads: u32) {
    // SAFETY: callers pass the documented ranges and the same values in every thread.
    unsafe { asm!("bar.arrive {0}, {1};", in(reg32) id, in(reg32) threads, options(nostack)) };
}

// ---------------------------------------------------------------------------------------
// Warp shuffles. The `c` operand packs the segment mask and the clamp value:
// c = ((32 - width) << 8) | clamp, clamp = 0x1f for bfly/idx/down and 0 for up
// (PTX ISA shfl.sync). We use whole-warp segments (width 32): c = 0x1f for xor and idx.

/// `__shfl_xor_sync(0xffffffff, value, lane_mask)`: value from lane `lane ^ lane_mask`.
#[inline(always)]
pub fn shfl_xor(value: u32, lane_mask: u32) -> u32 {
    let out: u32;
    // SAFETY: warp-collective over the full warp.
    unsafe {
        asm!("shfl.sync.bfly.b32 {d}, {a}, {b}, 0x1f, {m};",
            d = out(reg32) out, a = in(reg32) value, b = in(reg32) lane_mask,
            m = in(reg32) FULL_WARP, options(nomem, nostack))
    };
    out
}

/// `__shfl_sync(0xffffffff, value, src_lane)`: value from lane `src_lane % 32`.
#[inline(always)]
pub fn shfl_idx(value: u32, src_lane: u32) -> u32 {
    let out: u32;
    // SAFETY: warp-collective over the full warp.
    unsafe {
        asm!("shfl.sync.idx.b32 {d}, {a}, {b}, 0x1f, {m};",
            d = out(reg32) out, a = in(reg32) value, b = in(reg32) src_lane,
            m = in(reg32) FULL_WARP, options(nomem, nostack))
    };
    out
}

/// `__shfl_down_sync(0xffffffff, value, delta)`: lane `lane + delta`, or own value past 31.
#[inline(always)]
pub fn shfl_down(value: u32, delta: u32) -> u32 {
    let out: u32;
    // SAFETY: warp-collective over the full warp.
    unsafe {
        asm!("shfl.sync.down.b32 {d}, {a}, {b}, 0x1f, {m};",
            d = out(reg32) out, a = in(reg32) value, b = in(reg32) delta,
            m = in(reg32) FULL_WARP, options(nomem, nostack))
    };
    out
}

/// Warp transpose of App. B.3 of Smith, CHORD FRB beamformer design note (2022): exchanges register
/// bit `r` with thread bit `t_i` (`bit = 1 << i`) for the register pair `(r0, r1)`. One shuffle, no
/// divergence.
#[inline(always)]
pub fn warp_transpose(r0: &mut u32, r1: &mut u32, bit: u32) {
    let upper = (lane_id() & bit) != 0;
    let send = if upper { *r0 } else { *r1 };
    let received = shfl_xor(send, bit);
    if upper {
        *r0 = received;
    } else {
        *r1 = received;
    }
}

/// Lanes whose `value` equals this lane's (`match.any.sync.b32`).
#[inline(always)]
pub fn match_any(value: u32) -> u32 {
    let out: u32;
    // SAFETY: warp-collective over the full warp.
    unsafe {
        asm!("match.any.sync.b32 {d}, {a}, {m};",
            d = out(reg32) out, a = in(reg32) value, m = in(reg32) FULL_WARP,
            options(nomem, nostack))
    };
    out
}

/// True in every lane iff `predicate` holds in every lane (`vote.sync.all.pred`).
#[inline(always)]
pub fn vote_all(predicate: bool) -> bool {
    let out: u32;
    // SAFETY: warp-collective over the full warp.
    unsafe {
        asm!("{{ .reg .pred p, q;",
            "setp.ne.u32 p, {a}, 0;",
            "vote.sync.all.pred q, p, {m};",
            "selp.u32 {d}, 1, 0, q; }}",
            d = out(reg32) out, a = in(reg32) predicate as u32, m = in(reg32) FULL_WARP,
            options(nomem, nostack))
    };
    out != 0
}

// ---------------------------------------------------------------------------------------
// Bit and byte permutes.

/// `__byte_perm(a, b, selector)` (`prmt.b32`, default mode): byte `n` of the result is
/// byte `(selector >> 4n) & 7` of the 8-byte value `b:a` (a = bytes 0..3). Selector bit 3
/// of each nibble (sign replication) is not used by the project; see `packing::byte_perm`
/// for the host model the GPU test compares against.
#[inline(always)]
pub fn prmt(a: u32, b: u32, selector: u32) -> u32 {
    let out: u32;
    // SAFETY: pure ALU instruction.
    unsafe {
        asm!("prmt.b32 {d}, {a}, {b}, {c};",
            d = out(reg32) out, a = in(reg32) a, b = in(reg32) b, c = in(reg32) selector,
            options(pure, nomem, nostack))
    };
    out
}

/// `lop3.b32` with lookup table `LUT`: bit `n` of the result is `LUT >> (a_n*4 + b_n*2 + c_n)`.
/// Build `LUT` as the same expression on the constants `A = 0xf0, B = 0xcc, C = 0xaa`,
/// e.g. `(A & B) | C` is `(0xf0 & 0xcc) | 0xaa`.
#[inline(always)]
pub fn lop3<const LUT: u32>(a: u32, b: u32, c: u32) -> u32 {
    let out: u32;
    // SAFETY: pure ALU instruction.
    unsafe {
        asm!("lop3.b32 {d}, {a}, {b}, {c}, {lut};",
            d = out(reg32) out, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
            lut = const LUT, options(pure, nomem, nostack))
    };
    out
}

// ---------------------------------------------------------------------------------------
// Shared memory through 32-bit shared-window addresses.

/// Declares a block of static shared memory of `$bytes` bytes (16-byte aligned) at module
/// scope and a function `$name() -> u32` giving its shared-window address. Every kernel that
/// calls `$name()` gets its own copy; kernels that do not, pay nothing.
#[macro_export]
macro_rules! static_shared {
    ($vis:vis fn $name:ident, $bytes:expr) => {
        ::core::arch::global_asm!(
            concat!(".shared .align 16 .b8 ", stringify!($name), "[{bytes}];"),
            bytes = const $bytes
        );
        #[inline(always)]
        $vis fn $name() -> u32 {
            let address: u32;
            // SAFETY: takes the address of the shared array declared just above.
            unsafe {
                ::core::arch::asm!(
                    concat!("mov.u32 {0}, ", stringify!($name), ";"),
                    out(reg32) address, options(pure, nomem, nostack))
            };
            address
        }
    };
}

#[cfg(not(radio_sm90a))]
core::arch::global_asm!(".extern .shared .align 16 .b8 radio_kernels_dynamic_smem[];");
// wgmma's 128-byte swizzle repeats every 1024 bytes: ask for that alignment (kernels still
// round their base up, as the driver does not promise it).
#[cfg(radio_sm90a)]
core::arch::global_asm!(".extern .shared .align 1024 .b8 radio_kernels_dynamic_smem[];");

/// Shared-window address of the dynamic shared memory (`extern __shared__`), whose size is
/// set at launch.
#[inline(always)]
pub fn dynamic_shared() -> u32 {
    let address: u32;
    // SAFETY: takes the address of the module-scope extern shared array.
    unsafe {
        asm!("mov.u32 {0}, radio_kernels_dynamic_smem;", out(reg32) address,
            options(pure, nomem, nostack))
    };
    address
}

/// Total shared memory of this block in bytes, static plus dynamic (`%total_smem_size`).
#[inline(always)]
pub fn shared_size() -> u32 {
    let bytes: u32;
    // SAFETY: reads a special register (PTX 4.1+, sm_20+).
    unsafe { asm!("mov.u32 {0}, %total_smem_size;", out(reg32) bytes, options(pure, nomem, nostack)) };
    bytes
}

/// `ld.shared.b32` from a 4-byte aligned shared-window address.
///
/// # Safety
/// `address` must be 4-byte aligned and inside this block's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_u32(address: u32) -> u32 {
    let value: u32;
    asm!("ld.shared.b32 {0}, [{1}];", out(reg32) value, in(reg32) address, options(readonly, nostack));
    value
}

/// `st.shared.b32` to a 4-byte aligned shared-window address.
///
/// # Safety
/// `address` must be 4-byte aligned and inside this block's shared memory.
#[inline(always)]
pub unsafe fn st_shared_u32(address: u32, value: u32) {
    asm!("st.shared.b32 [{0}], {1};", in(reg32) address, in(reg32) value, options(nostack));
}

/// `st.shared.u8` of one byte to a shared-window address.
///
/// # Safety
/// `address` must be inside this block's shared memory.
#[inline(always)]
pub unsafe fn st_shared_u8(address: u32, value: u8) {
    asm!("st.shared.u8 [{0}], {1};", in(reg32) address, in(reg16) value as u16, options(nostack));
}

/// `st.shared.v2.b32` to an 8-byte aligned shared-window address.
///
/// # Safety
/// `address` must be 8-byte aligned and inside this block's shared memory.
#[inline(always)]
pub unsafe fn st_shared_v2(address: u32, v: [u32; 2]) {
    asm!("st.shared.v2.b32 [{0}], {{{1}, {2}}};", in(reg32) address, in(reg32) v[0], in(reg32) v[1],
        options(nostack));
}

/// `ld.shared.v4.b32` from a 16-byte aligned shared-window address.
///
/// # Safety
/// `address` must be 16-byte aligned and inside this block's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_v4(address: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.shared.v4.b32 {{{0}, {1}, {2}, {3}}}, [{4}];",
        out(reg32) x, out(reg32) y, out(reg32) z, out(reg32) w, in(reg32) address,
        options(readonly, nostack));
    [x, y, z, w]
}

/// `st.shared.v4.b32` to a 16-byte aligned shared-window address.
///
/// # Safety
/// `address` must be 16-byte aligned and inside this block's shared memory.
#[inline(always)]
pub unsafe fn st_shared_v4(address: u32, v: [u32; 4]) {
    asm!("st.shared.v4.b32 [{0}], {{{1}, {2}, {3}, {4}}};",
        in(reg32) address, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
        options(nostack));
}

// ---------------------------------------------------------------------------------------
// 16-byte global memory accesses.

/// `ld.global.v4.b32`: 16 bytes from global memory.
///
/// # Safety
/// `ptr` must be 16-byte aligned and point to 16 readable bytes of global memory.
#[inline(always)]
pub unsafe fn ld_global_v4(ptr: *const u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.global.v4.b32 {{{0}, {1}, {2}, {3}}}, [{4}];",
        out(reg32) x, out(reg32) y, out(reg32) z, out(reg32) w, in(reg64) ptr,
        options(readonly, nostack));
    [x, y, z, w]
}

/// `ld.global.nc.v4.b32`: 16 bytes through the read-only (non-coherent) path, for inputs
/// that no thread of the launch writes.
///
/// # Safety
/// As [`ld_global_v4`], and the memory must not be written during the launch.
#[inline(always)]
pub unsafe fn ld_global_nc_v4(ptr: *const u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.global.nc.v4.b32 {{{0}, {1}, {2}, {3}}}, [{4}];",
        out(reg32) x, out(reg32) y, out(reg32) z, out(reg32) w, in(reg64) ptr,
        options(readonly, nostack));
    [x, y, z, w]
}

/// `st.global.v4.b32`: 16 bytes to global memory.
///
/// # Safety
/// `ptr` must be 16-byte aligned and point to 16 writable bytes of global memory.
#[inline(always)]
pub unsafe fn st_global_v4(ptr: *mut u32, v: [u32; 4]) {
    asm!("st.global.v4.b32 [{0}], {{{1}, {2}, {3}, {4}}};",
        in(reg64) ptr, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
        options(nostack));
}

// ---------------------------------------------------------------------------------------
// Conversions.

/// Two f32 to one f16x2 register, round to nearest even: `lo` in bits 0..16, `hi` in 16..32
/// (`cvt.rn.f16x2.f32 d, hi, lo`: the first source goes to the upper half).
#[inline(always)]
pub fn f32x2_to_f16x2(lo: f32, hi: f32) -> u32 {
    let out: u32;
    // SAFETY: pure conversion (sm_80+).
    unsafe {
        asm!("cvt.rn.f16x2.f32 {0}, {1}, {2};", out(reg32) out, in(reg32) hi, in(reg32) lo,
            options(pure, nomem, nostack))
    };
    out
}

/// The two halves of an f16x2 register as f32 (`lo`, `hi`), exactly.
#[inline(always)]
pub fn f16x2_to_f32x2(packed: u32) -> (f32, f32) {
    let (lo, hi): (f32, f32);
    // SAFETY: pure conversions.
    unsafe {
        asm!("{{ .reg .b16 l, h;",
            "mov.b32 {{l, h}}, {2};",
            "cvt.f32.f16 {0}, l;",
            "cvt.f32.f16 {1}, h; }}",
            out(reg32) lo, out(reg32) hi, in(reg32) packed, options(pure, nomem, nostack))
    };
    (lo, hi)
}

// ---------------------------------------------------------------------------------------
// Matrix loads and integer dot products.

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: four 8x8 matrices of 16-bit elements, lanes
/// 8i .. 8i + 8 addressing the rows of matrix i; lane l receives row l / 4, elements
/// 2 (l % 4), 2 (l % 4) + 1 of each matrix (register i from matrix i).
///
/// # Safety
/// `address` must be 16-byte aligned and inside this block's shared memory; warp-collective.
#[inline(always)]
pub unsafe fn ldmatrix_x4(address: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{0}, {1}, {2}, {3}}}, [{4}];",
        out(reg32) x, out(reg32) y, out(reg32) z, out(reg32) w, in(reg32) address,
        options(readonly, nostack));
    [x, y, z, w]
}

/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: four 8x8 matrices of 16-bit elements,
/// transposed. Lanes 8m..8m+8 give the shared-window addresses of the 8 rows (16 bytes each)
/// of matrix m; register m of lane l receives elements `(2 (l % 4), l / 4)` and
/// `(2 (l % 4) + 1, l / 4)` (row, column) of matrix m. Warp-collective.
///
/// # Safety
/// Every lane's address must be 16-byte aligned and inside this block's shared memory.
#[inline(always)]
pub unsafe fn ldmatrix_x4_trans(address: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{0}, {1}, {2}, {3}}}, [{4}];",
        out(reg32) x, out(reg32) y, out(reg32) z, out(reg32) w, in(reg32) address,
        options(readonly, nostack));
    [x, y, z, w]
}

/// `dp4a.s32.s32`: `c + sum_n a.byte[n] * b.byte[n]` over the four signed bytes.
#[inline(always)]
pub fn dp4a(a: u32, b: u32, c: i32) -> i32 {
    let out: i32;
    // SAFETY: pure ALU instruction (sm_61+).
    unsafe {
        asm!("dp4a.s32.s32 {0}, {1}, {2}, {3};", out(reg32) out, in(reg32) a, in(reg32) b, in(reg32) c,
            options(pure, nomem, nostack))
    };
    out
}

/// 8-byte global store of two 32-bit words (`st.global.v2.b32`).
///
/// # Safety
/// `ptr` must be 8-byte aligned and point to 8 writable bytes of global memory.
#[inline(always)]
pub unsafe fn st_global_v2(ptr: *mut u32, v: [u32; 2]) {
    asm!("st.global.v2.b32 [{0}], {{{1}, {2}}};", in(reg64) ptr, in(reg32) v[0], in(reg32) v[1],
        options(nostack));
}

// ---------------------------------------------------------------------------------------
// Asynchronous global-to-shared copies (sm_80).

/// `cp.async.cg.shared.global [dst], [src], 16, src_bytes`: copies `src_bytes` (0 or 16)
/// bytes and zero-fills the rest of the 16, bypassing registers and L1.
///
/// # Safety
/// `dst` must be a 16-byte aligned shared-window address of this block; when `src_bytes` is
/// 16, `src` must be 16-byte aligned global memory.
#[inline(always)]
pub unsafe fn cp_async_16(dst: u32, src: *const u8, src_bytes: u32) {
    asm!("cp.async.cg.shared.global [{0}], [{1}], 16, {2};", in(reg32) dst, in(reg64) src, in(reg32) src_bytes,
        options(nostack));
}

/// `cp.async.commit_group`: closes the group of copies issued so far by this thread.
#[inline(always)]
pub fn cp_async_commit() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// `cp.async.wait_all`: waits for all of this thread's copies; a barrier afterwards makes
/// them visible to the block.
#[inline(always)]
pub fn cp_async_wait_all() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.wait_all;", options(nostack)) };
}

/// `cp.async.wait_group N`: waits until at most `N` of this thread's most recent copy groups
/// are still in flight (a ring of `N + 2` buffers keeps `N + 1` stages loading while one is
/// read); a barrier afterwards makes the landed ones visible to the block.
#[inline(always)]
pub fn cp_async_wait_group<const N: u32>() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) };
}

/// [`cp_async_wait_group`] with a run-time count: waits until at most `pending` of this
/// thread's copy groups are in flight (`pending` is a constant after inlining, so this is one
/// instruction; above 6 it waits for all, which is always safe).
#[inline(always)]
pub fn cp_async_wait_pending(pending: u32) {
    match pending {
        0 => cp_async_wait_group::<0>(),
        1 => cp_async_wait_group::<1>(),
        2 => cp_async_wait_group::<2>(),
        3 => cp_async_wait_group::<3>(),
        4 => cp_async_wait_group::<4>(),
        5 => cp_async_wait_group::<5>(),
        6 => cp_async_wait_group::<6>(),
        _ => cp_async_wait_all(),
    }
}

/// `red.global.add.u32`: atomic add without return (two's complement, so exact for signed
/// integers modulo 2^32).
///
/// # Safety
/// `ptr` must be 4-byte aligned global memory.
#[inline(always)]
pub unsafe fn red_add_u32(ptr: *mut u32, value: u32) {
    asm!("red.global.add.u32 [{0}], {1};", in(reg64) ptr, in(reg32) value, options(nostack));
}

/// `red.global.add.u64`: atomic add without return (exact for signed integers modulo 2^64).
///
/// # Safety
/// `ptr` must be 8-byte aligned global memory.
#[inline(always)]
pub unsafe fn red_add_u64(ptr: *mut u64, value: u64) {
    asm!("red.global.add.u64 [{0}], {1};", in(reg64) ptr, in(reg64) value, options(nostack));
}

// ---------------------------------------------------------------------------------------
// Float arithmetic with a stated rounding, conversions and warp reductions.

/// `fma.rn.f32`: `a * b + c` rounded once (what `xorwow` and `delay_beamformer` model on the
/// host with an exact emulation).
#[inline(always)]
pub fn fma_rn_f32(a: f32, b: f32, c: f32) -> f32 {
    let out: f32;
    // SAFETY: pure ALU instruction.
    unsafe {
        asm!("fma.rn.f32 {0}, {1}, {2}, {3};", out(reg32) out, in(reg32) a, in(reg32) b, in(reg32) c,
            options(pure, nomem, nostack))
    };
    out
}

/// Returns `values` unchanged through an empty volatile `asm!`, which runs where it is
/// written on every lane that reaches it. A warp-collective result passed through it is
/// computed before any later branch: the mma wrappers are `pure`, and LLVM may sink a pure
/// instruction whose result only a conditional block uses into that block, where part of
/// the warp would skip it.
#[inline(always)]
pub fn converged<const N: usize>(mut values: [u32; N]) -> [u32; N] {
    for v in values.iter_mut() {
        // SAFETY: an empty instruction sequence; only the compiler's view changes.
        unsafe { asm!("// converged {0}", inout(reg32) * v, options(nomem, nostack)) };
    }
    values
}

/// `fma.rn.f16x2`: `a * b + c` on both halves, each rounded once to f16.
#[inline(always)]
pub fn hfma2(a: u32, b: u32, c: u32) -> u32 {
    let out: u32;
    // SAFETY: pure ALU instruction (sm_53+).
    unsafe {
        asm!("fma.rn.f16x2 {0}, {1}, {2}, {3};", out(reg32) out, in(reg32) a, in(reg32) b, in(reg32) c,
            options(pure, nomem, nostack))
    };
    out
}

/// `mul.rn.f16x2`: `a * b` on both halves, rounded to f16.
#[inline(always)]
pub fn hmul2(a: u32, b: u32) -> u32 {
    let out: u32;
    // SAFETY: pure ALU instruction (sm_53+).
    unsafe {
        asm!("mul.rn.f16x2 {0}, {1}, {2};", out(reg32) out, in(reg32) a, in(reg32) b, options(pure, nomem, nostack))
    };
    out
}

/// `add.rn.f16x2`: `a + b` on both halves, rounded to f16.
#[inline(always)]
pub fn hadd2(a: u32, b: u32) -> u32 {
    let out: u32;
    // SAFETY: pure ALU instruction (sm_53+).
    unsafe {
        asm!("add.rn.f16x2 {0}, {1}, {2};", out(reg32) out, in(reg32) a, in(reg32) b, options(pure, nomem, nostack))
    };
    out
}

/// `sub.rn.f16x2`: `a - b` on both halves, rounded to f16.
#[inline(always)]
pub fn hsub2(a: u32, b: u32) -> u32 {
    let out: u32;
    // SAFETY: pure ALU instruction (sm_53+).
    unsafe {
        asm!("sub.rn.f16x2 {0}, {1}, {2};", out(reg32) out, in(reg32) a, in(reg32) b, options(pure, nomem, nostack))
    };
    out
}

/// `neg.f16x2`: both halves negated (exact; flips the sign bits).
#[inline(always)]
pub fn hneg2(a: u32) -> u32 {
    let out: u32;
    // SAFETY: pure ALU instruction (sm_53+).
    unsafe { asm!("neg.f16x2 {0}, {1};", out(reg32) out, in(reg32) a, options(pure, nomem, nostack)) };
    out
}

/// `cvt.rz.f32.s32`: int32 to f32 rounding toward zero.
#[inline(always)]
pub fn cvt_rz_f32_s32(i: i32) -> f32 {
    let out: f32;
    // SAFETY: pure conversion.
    unsafe { asm!("cvt.rz.f32.s32 {0}, {1};", out(reg32) out, in(reg32) i, options(pure, nomem, nostack)) };
    out
}

/// `cvt.rni.s32.f32`: round to nearest even, saturating to the int32 range, NaN to 0.
#[inline(always)]
pub fn cvt_rni_s32_f32(v: f32) -> i32 {
    let out: i32;
    // SAFETY: pure conversion.
    unsafe { asm!("cvt.rni.s32.f32 {0}, {1};", out(reg32) out, in(reg32) v, options(pure, nomem, nostack)) };
    out
}

/// `cvt.rni.sat.s8.f32`: round to nearest even, saturating to [-128, 127], NaN to 0
/// (sign-extended to 32 bits: PTX lets `cvt` write a wider register than its type).
#[inline(always)]
pub fn cvt_rni_sat_s8_f32(v: f32) -> i32 {
    let out: i32;
    // SAFETY: pure conversion.
    unsafe {
        asm!("cvt.rni.sat.s8.f32 {0}, {1};", out(reg32) out, in(reg32) v, options(pure, nomem, nostack))
    };
    out
}

/// `set.geu.u32.f32` of `max.NaN(|a|, |b|)` against `limit`: all ones when it is at least
/// `limit` or either value is NaN (`max.NaN` propagates a NaN, and the unordered compare takes
/// it as true), else 0. The magnitudes are operand modifiers of one `FMNMX`, where Rust's
/// `abs` became separate masks.
#[inline(always)]
pub fn abs_max_at_least(a: f32, b: f32, limit: f32) -> u32 {
    let out: u32;
    // SAFETY: pure ALU instructions.
    unsafe {
        asm!("{{ .reg .f32 t0, t1; abs.f32 t0, {1}; abs.f32 t1, {2}; max.NaN.f32 t0, t0, t1; set.geu.u32.f32 {0}, t0, {3}; }}",
            out(reg32) out, in(reg32) a, in(reg32) b, in(reg32) limit, options(pure, nomem, nostack))
    };
    out
}

/// `redux.sync.add.u32` over the full warp (sm_80): every lane gets the sum.
#[inline(always)]
pub fn redux_add_u32(value: u32) -> u32 {
    let out: u32;
    // SAFETY: warp-collective over the full warp.
    unsafe {
        asm!("redux.sync.add.u32 {0}, {1}, {2};", out(reg32) out, in(reg32) value, in(reg32) FULL_WARP,
            options(nomem, nostack))
    };
    out
}

/// `ld.shared.v2.b32` from an 8-byte aligned shared-window address.
///
/// # Safety
/// `address` must be 8-byte aligned and inside this block's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_v2(address: u32) -> [u32; 2] {
    let (x, y): (u32, u32);
    asm!("ld.shared.v2.b32 {{{0}, {1}}}, [{2}];", out(reg32) x, out(reg32) y, in(reg32) address,
        options(readonly, nostack));
    [x, y]
}

/// `ld.global.nc.v2.b32`: 8 bytes through the read-only path.
///
/// # Safety
/// `ptr` must be 8-byte aligned, readable, and not written during the launch.
#[inline(always)]
pub unsafe fn ld_global_nc_v2(ptr: *const u32) -> [u32; 2] {
    let (x, y): (u32, u32);
    asm!("ld.global.nc.v2.b32 {{{0}, {1}}}, [{2}];", out(reg32) x, out(reg32) y, in(reg64) ptr,
        options(readonly, nostack));
    [x, y]
}

/// `st.shared.u16` of two bytes to a 2-byte aligned shared-window address.
///
/// # Safety
/// `address` must be 2-byte aligned and inside this block's shared memory.
#[inline(always)]
pub unsafe fn st_shared_u16(address: u32, value: u16) {
    asm!("st.shared.u16 [{0}], {1};", in(reg32) address, in(reg16) value, options(nostack));
}

// ---------------------------------------------------------------------------------------
// Thread-block clusters (sm_90, PTX ISA 9.7.12.3 barrier.cluster, 9.7.9.21 mapa).

/// This block's rank in its cluster (`%cluster_ctarank`).
#[cfg(radio_sm90a)]
#[inline(always)]
pub fn cluster_rank() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {0}, %cluster_ctarank;", out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// The cluster's index in x (`%clusterid.x`).
#[cfg(radio_sm90a)]
#[inline(always)]
pub fn cluster_id() -> u32 {
    let id: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {0}, %clusterid.x;", out(reg32) id, options(pure, nomem, nostack)) };
    id
}

/// A barrier of every thread of the cluster: shared-memory writes before it (release) are
/// visible to every block of the cluster after it (acquire).
#[cfg(radio_sm90a)]
#[inline(always)]
pub fn cluster_sync() {
    // SAFETY: every thread of the cluster reaches it (callers keep it uniform).
    unsafe {
        asm!(
            "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;",
            options(nostack)
        )
    }
}

/// The arrive half of [`cluster_sync`] (release): shared-memory writes before it are visible
/// to every block of the cluster after the matching [`cluster_wait`].
#[cfg(radio_sm90a)]
#[inline(always)]
pub fn cluster_arrive() {
    // SAFETY: every thread of the cluster arrives once per phase (callers keep it uniform).
    unsafe { asm!("barrier.cluster.arrive.release.aligned;", options(nostack)) }
}

/// [`cluster_arrive`] without release semantics: for a thread whose only duty at the barrier
/// is to say it has finished reading other blocks' shared memory (its loads have returned:
/// their values were used), so it need not wait for its own writes to drain (no `MEMBAR`).
#[cfg(radio_sm90a)]
#[inline(always)]
pub fn cluster_arrive_relaxed() {
    // SAFETY: as `cluster_arrive`.
    unsafe { asm!("barrier.cluster.arrive.relaxed.aligned;", options(nostack)) }
}

/// The wait half of [`cluster_sync`] (acquire): returns once every thread of the cluster has
/// arrived in the current phase.
#[cfg(radio_sm90a)]
#[inline(always)]
pub fn cluster_wait() {
    // SAFETY: follows this thread's arrive of the same phase.
    unsafe { asm!("barrier.cluster.wait.acquire.aligned;", options(nostack)) }
}
