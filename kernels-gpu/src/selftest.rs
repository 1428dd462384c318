//! Self-test kernels: the executable form of the register-assignment tables and intrinsics.
//!
//! Each mma kernel runs one warp per block; block `case` reads its operands as register
//! images `[case][lane][register]` (built on the host from `crate::layout` tables), executes
//! one wrapper, and writes D the same way. The host compares with a CPU product
//! (`radio_kernels_host::selftest`), so a wrong table or wrapper cannot pass.
use crate::bank::warp_access_is_conflict_free;
use crate::intrinsics::*;
use crate::mma::*;

/// Loads `N` consecutive 32-bit registers of this lane from a `[case][lane][N]` image.
#[inline(always)]
unsafe fn load<const N: usize>(image: *const u32) -> [u32; N] {
    let base = image.add(((block_idx_x() * 32 + lane_id()) as usize) * N);
    core::array::from_fn(|r| *base.add(r))
}

#[inline(always)]
unsafe fn store<const N: usize>(image: *mut u32, regs: [u32; N]) {
    let base = image.add(((block_idx_x() * 32 + lane_id()) as usize) * N);
    for (r, v) in regs.into_iter().enumerate() {
        *base.add(r) = v;
    }
}

#[inline(always)]
fn as_i32<const N: usize>(v: [u32; N]) -> [i32; N] {
    v.map(|x| x as i32)
}

#[inline(always)]
fn as_u32<const N: usize>(v: [i32; N]) -> [u32; N] {
    v.map(|x| x as u32)
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_m16n8k8_f16(
    a: *const u32,
    b: *const u32,
    c: *const u32,
    d: *mut u32,
) {
    store::<2>(d, mma_m16n8k8_f16(load::<2>(a), load::<1>(b)[0], load::<2>(c)));
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_m16n8k16_f16(
    a: *const u32,
    b: *const u32,
    c: *const u32,
    d: *mut u32,
) {
    store::<2>(d, mma_m16n8k16_f16(load::<4>(a), load::<2>(b), load::<2>(c)));
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_m16n8k16_f16_f32(
    a: *const u32,
    b: *const u32,
    c: *const u32,
    d: *mut u32,
) {
    let acc = load::<4>(c).map(f32::from_bits);
    store::<4>(d, mma_m16n8k16_f16_f32(load::<4>(a), load::<2>(b), acc).map(f32::to_bits));
}

/// Sparse MMA with metadata image `e` (`[case][lane]`) and selector `selector` (0..4).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_sp_m16n8k16_f16(
    asp: *const u32,
    b: *const u32,
    c: *const u32,
    e: *const u32,
    selector: u32,
    d: *mut u32,
) {
    let (asp, b, c, e) = (load::<2>(asp), load::<2>(b), load::<2>(c), load::<1>(e)[0]);
    let out = match selector {
        0 => mma_sp_m16n8k16_f16::<0>(asp, b, c, e),
        1 => mma_sp_m16n8k16_f16::<1>(asp, b, c, e),
        2 => mma_sp_m16n8k16_f16::<2>(asp, b, c, e),
        _ => mma_sp_m16n8k16_f16::<3>(asp, b, c, e),
    };
    store::<2>(d, out);
}

/// As [`selftest_mma_sp_m16n8k16_f16`] with the unordered `mma.sp` spelling.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_sp_unordered_m16n8k16_f16(
    asp: *const u32,
    b: *const u32,
    c: *const u32,
    e: *const u32,
    selector: u32,
    d: *mut u32,
) {
    let (asp, b, c, e) = (load::<2>(asp), load::<2>(b), load::<2>(c), load::<1>(e)[0]);
    let out = match selector {
        0 => mma_sp_unordered_m16n8k16_f16::<0>(asp, b, c, e),
        1 => mma_sp_unordered_m16n8k16_f16::<1>(asp, b, c, e),
        2 => mma_sp_unordered_m16n8k16_f16::<2>(asp, b, c, e),
        _ => mma_sp_unordered_m16n8k16_f16::<3>(asp, b, c, e),
    };
    store::<2>(d, out);
}

/// The sparse MMA with the universal metadata generated on the device (eq. 173 of Smith's FRB note) and
/// selector `n`, for A matrices containing `delta(i_n, j_1)`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_sp_universal_f16(
    asp: *const u32,
    b: *const u32,
    c: *const u32,
    n: u32,
    d: *mut u32,
) {
    let (asp, b, c) = (load::<2>(asp), load::<2>(b), load::<2>(c));
    let e = universal_sparse_metadata(lane_id());
    let out = match n {
        0 => mma_sp_m16n8k16_f16::<0>(asp, b, c, e),
        1 => mma_sp_m16n8k16_f16::<1>(asp, b, c, e),
        2 => mma_sp_m16n8k16_f16::<2>(asp, b, c, e),
        _ => mma_sp_m16n8k16_f16::<3>(asp, b, c, e),
    };
    store::<2>(d, out);
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_m8n8k16_s8(
    a: *const u32,
    b: *const u32,
    c: *const u32,
    d: *mut u32,
) {
    let out = mma_m8n8k16_s8(load::<1>(a)[0], load::<1>(b)[0], as_i32(load::<2>(c)));
    store::<2>(d, as_u32(out));
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_m8n8k16_s8_satfinite(
    a: *const u32,
    b: *const u32,
    c: *const u32,
    d: *mut u32,
) {
    let out = mma_m8n8k16_s8_satfinite(load::<1>(a)[0], load::<1>(b)[0], as_i32(load::<2>(c)));
    store::<2>(d, as_u32(out));
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_m16n8k32_s8(
    a: *const u32,
    b: *const u32,
    c: *const u32,
    d: *mut u32,
) {
    let out = mma_m16n8k32_s8(load::<4>(a), load::<2>(b), as_i32(load::<4>(c)));
    store::<4>(d, as_u32(out));
}

#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_mma_m16n8k32_s8_satfinite(
    a: *const u32,
    b: *const u32,
    c: *const u32,
    d: *mut u32,
) {
    let out = mma_m16n8k32_s8_satfinite(load::<4>(a), load::<2>(b), as_i32(load::<4>(c)));
    store::<4>(d, as_u32(out));
}

/// Number of 32-word output rows written per warp by [`selftest_shuffles`].
pub const SHUFFLE_OUTPUTS: usize = 10;

/// One warp per block. Output rows `[case][row][lane]`:
/// 0..5: `shfl_xor(v, 1 << row)`; 5: `shfl_idx(v, src)`; 6: `shfl_down(v, 3)`;
/// 7, 8: `warp_transpose(v, !v, 1 << (case % 5))`; 9: `match_any(v & 3)`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_shuffles(values: *const u32, sources: *const u32, out: *mut u32) {
    let case = block_idx_x() as usize;
    let lane = lane_id() as usize;
    let v = *values.add(case * 32 + lane);
    let src = *sources.add(case * 32 + lane);
    let row = |r: usize| out.add((case * SHUFFLE_OUTPUTS + r) * 32 + lane);
    for k in 0..5 {
        *row(k) = shfl_xor(v, 1 << k);
    }
    *row(5) = shfl_idx(v, src);
    *row(6) = shfl_down(v, 3);
    let (mut r0, mut r1) = (v, !v);
    warp_transpose(&mut r0, &mut r1, 1 << (case % 5));
    *row(7) = r0;
    *row(8) = r1;
    *row(9) = match_any(v & 3);
}

/// Per element `n`: `out[4n..4n+4] = [prmt(a, b, s), lop3 0x96 (a^b^s), lop3 0xe8
/// (majority), lop3 0xea ((a&b)|s)]`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_prmt_lop3(
    a: *const u32,
    b: *const u32,
    s: *const u32,
    out: *mut u32,
    n: u32,
) {
    let i = global_thread_x();
    if i < n {
        let (a, b, s) = (*a.add(i as usize), *b.add(i as usize), *s.add(i as usize));
        let o = out.add(4 * i as usize);
        *o = prmt(a, b, s);
        *o.add(1) = lop3::<0x96>(a, b, s);
        *o.add(2) = lop3::<0xe8>(a, b, s);
        *o.add(3) = lop3::<{ (0xf0 & 0xcc) | 0xaa }>(a, b, s);
    }
}

crate::static_shared!(fn selftest_static_smem, 4096);

/// One block of 256 threads moves 1024 words through static shared memory (4-byte accesses
/// with a permuted address) and dynamic shared memory (16-byte accesses), and copies with
/// 16-byte global loads and stores. Outputs: `out_words[t] = input[(t * 5 + 3) % 1024]`
/// for t < 1024 via static smem; `out_vec[t] = input[(t + 16) % 1024]` via dynamic smem and
/// the v4 paths; `out_info[0]` = total shared size seen by the block.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_shared(
    input: *const u32,
    out_words: *mut u32,
    out_vec: *mut u32,
    out_info: *mut u32,
) {
    let t = thread_idx_x();
    let stat = selftest_static_smem();
    for k in 0..4 {
        let w = t + 256 * k;
        st_shared_u32(stat + 4 * w, *input.add(w as usize));
    }
    sync_threads();
    for k in 0..4 {
        let w = t + 256 * k;
        *out_words.add(w as usize) = ld_shared_u32(stat + 4 * ((w * 5 + 3) % 1024));
    }
    // 16-byte path: thread t handles words 4t..4t+4.
    let dynamic = dynamic_shared();
    st_shared_v4(dynamic + 16 * t, ld_global_nc_v4(input.add(4 * t as usize)));
    sync_threads();
    let v = ld_shared_v4(dynamic + 16 * ((t + 4) % 256));
    st_global_v4(out_vec.add(4 * t as usize), v);
    if t == 0 {
        *out_info = shared_size();
        *out_info.add(1) = ld_global_v4(input)[3];
    }
}

/// Block `case`: lane reads `addresses[case][lane]` and `widths[case]`; writes whether the
/// device check calls the access conflict-free.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_bank_check(
    addresses: *const u32,
    widths: *const u32,
    out: *mut u32,
) {
    let case = block_idx_x() as usize;
    let lane = lane_id() as usize;
    let ok = warp_access_is_conflict_free(*addresses.add(case * 32 + lane), *widths.add(case));
    *out.add(case * 32 + lane) = ok as u32;
}

/// `out[n] = f32x2_to_f16x2(x[2n], x[2n+1])`, `back[2n..2n+2]` = that word converted back.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn selftest_f16_convert(x: *const f32, out: *mut u32, back: *mut f32, n: u32) {
    let i = global_thread_x();
    if i < n {
        let packed = f32x2_to_f16x2(*x.add(2 * i as usize), *x.add(2 * i as usize + 1));
        *out.add(i as usize) = packed;
        let (lo, hi) = f16x2_to_f32x2(packed);
        *back.add(2 * i as usize) = lo;
        *back.add(2 * i as usize + 1) = hi;
    }
}
