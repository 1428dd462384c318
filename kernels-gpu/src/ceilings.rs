//! Ceiling kernels: device-copy and L2-read bandwidth and per-shape mma.sync throughput of
//! this GPU, which every benchmark reports its fraction of (`cargo bench --bench ceilings`).
//!
//! The mma loops keep `CHAINS` independent accumulators per warp so the tensor pipe, not the
//! dependency latency, limits throughput; the operands are lane-dependent (never zero) and
//! the result is stored, so nothing is folded away.
use crate::intrinsics::*;
use crate::mma::*;
use core::arch::asm;

const CHAINS: usize = 8;

/// `dst[i] = src[i]` over `n_vec` 16-byte vectors, grid-stride.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ceiling_copy(src: *const u32, dst: *mut u32, n_vec: u64) {
    let stride = (grid_dim_x() * block_dim_x()) as u64;
    let mut i = global_thread_x() as u64;
    while i < n_vec {
        st_global_v4(dst.add(4 * i as usize), ld_global_nc_v4(src.add(4 * i as usize)));
        i += stride;
    }
}

/// Reads `n_vec` 16-byte vectors of `src` `passes` times with `ld.global.cg` (cached in L2
/// only), grid-stride, four loads in flight per thread; one xor of everything it read per
/// thread into `out`. With `src` a few MiB (well inside the L2) this is the L2-to-SM read
/// bandwidth the `cp.async.cg` GEMM loads draw on.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn ceiling_l2_read(src: *const u32, n_vec: u32, passes: u32, out: *mut u32) {
    let (n_vec, stride, thread) = (n_vec as u64, (grid_dim_x() * block_dim_x()) as u64, global_thread_x());
    let load = |i: u64| -> u32 {
        let (a, b, c, d): (u32, u32, u32, u32);
        asm!(
            "ld.global.cg.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
            a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
            p = in(reg64) src.add(4 * i as usize),
            options(readonly, nostack, preserves_flags),
        );
        a ^ b ^ c ^ d
    };
    let mut acc = 0;
    for _ in 0..passes {
        let mut i = thread as u64;
        while i + 3 * stride < n_vec {
            let (x, y, z, w) = (load(i), load(i + stride), load(i + 2 * stride), load(i + 3 * stride));
            acc ^= x ^ y ^ z ^ w;
            i += 4 * stride;
        }
        while i < n_vec {
            acc ^= load(i);
            i += stride;
        }
    }
    *out.add(thread as usize) = acc;
}

#[inline(always)]
fn operand(salt: u32) -> u32 {
    (lane_id().wrapping_mul(0x9e37_79b9) ^ salt) | 0x0101_0101
}

/// Small f16 operands (|x| < 1) so f16 accumulators stay finite for any loop length.
#[inline(always)]
fn f16_operand(salt: u32) -> u32 {
    operand(salt) & 0x2bff_2bff
}

macro_rules! mma_ceiling {
    ($name:ident, $acc:ty, $zero:expr, $init:expr, |$a:ident, $b:ident, $c:ident| $op:expr) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(iterations: u32, out: *mut u32) {
            let $a = $init;
            let $b = $init;
            let mut acc: [$acc; CHAINS] = [$zero; CHAINS];
            let mut i = 0;
            while i < iterations {
                for $c in acc.iter_mut() {
                    *$c = $op;
                }
                i += 1;
            }
            let mut sum = 0u32;
            for chain in acc {
                for v in chain {
                    sum ^= v as u32;
                }
            }
            *out.add(global_thread_x() as usize) = sum;
        }
    };
}

mma_ceiling!(
    ceiling_mma_m16n8k32_s8,
    [i32; 4],
    [0; 4],
    [operand(1), operand(2), operand(3), operand(4)],
    |a, b, c| mma_m16n8k32_s8(a, [b[0], b[1]], *c)
);
mma_ceiling!(ceiling_mma_m8n8k16_s8, [i32; 2], [0; 2], [operand(1), operand(2)], |a, b, c| mma_m8n8k16_s8(
    a[0], b[1], *c
));
mma_ceiling!(
    ceiling_mma_m16n8k16_f16,
    [u32; 2],
    [0; 2],
    [f16_operand(1), f16_operand(2), f16_operand(3), f16_operand(4)],
    |a, b, c| mma_m16n8k16_f16(a, [b[0], b[1]], *c)
);
mma_ceiling!(
    ceiling_mma_m16n8k16_f16_f32,
    [f32; 4],
    [0.0; 4],
    [f16_operand(1), f16_operand(2), f16_operand(3), f16_operand(4)],
    |a, b, c| mma_m16n8k16_f16_f32(a, [b[0], b[1]], *c)
);
mma_ceiling!(ceiling_mma_m16n8k8_f16, [u32; 2], [0; 2], [f16_operand(1), f16_operand(2)], |a, b, c| {
    mma_m16n8k8_f16(a, b[1], *c)
});
mma_ceiling!(
    ceiling_mma_sp_m16n8k16_f16,
    [u32; 2],
    [0; 2],
    [f16_operand(1), f16_operand(2), universal_sparse_metadata(lane_id())],
    |a, b, c| mma_sp_m16n8k16_f16::<1>([a[0], a[1]], [b[0], b[1]], *c, a[2])
);
mma_ceiling!(
    ceiling_mma_m16n8k64_s4,
    [i32; 4],
    [0; 4],
    [operand(1), operand(2), operand(3), operand(4)],
    |a, b, c| mma_m16n8k64_s4(a, [b[0], b[1]], *c)
);

/// int4 m16n8k64, for the ceilings table only: on Hopper it is emulated (about 26x slower
/// than int8), so no kernel of the project uses it.
#[inline(always)]
fn mma_m16n8k64_s4(a: [u32; 4], b: [u32; 2], c: [i32; 4]) -> [i32; 4] {
    let (d0, d1, d2, d3): (i32, i32, i32, i32);
    // SAFETY: warp-collective tensor-core op on registers only (sm_80+).
    unsafe {
        asm!("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}};",
            out(reg32) d0, out(reg32) d1, out(reg32) d2, out(reg32) d3,
            in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
            in(reg32) b[0], in(reg32) b[1],
            in(reg32) c[0], in(reg32) c[1], in(reg32) c[2], in(reg32) c[3],
            options(pure, nomem, nostack))
    };
    [d0, d1, d2, d3]
}

/// Fills `words` 32-bit words with a hash of (index, seed), grid-stride: benchmark inputs of
/// many gigabytes without a host round trip.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bench_fill_random(out: *mut u32, words: u64, seed: u32) {
    let stride = (grid_dim_x() * block_dim_x()) as u64;
    let mut i = global_thread_x() as u64;
    while i < words {
        let mut x =
            (i as u32) ^ ((i >> 32) as u32).wrapping_mul(0x85eb_ca6b) ^ seed.wrapping_mul(0x9e37_79b9);
        x ^= x >> 16;
        x = x.wrapping_mul(0x7feb_352d);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846c_a68b);
        x ^= x >> 16;
        *out.add(i as usize) = x;
        i += stride;
    }
}
