//! wgmma ceilings (the sm_90a module): the throughput of Hopper's warpgroup MMA with both
//! operands in shared memory (SS), at m64n256, the widest shape, which the project's wgmma
//! kernels issue. The `wgmma` kernels' figures are quoted as fractions of these, the
//! `mma.sync` kernels' as fractions of the `mma.sync` ceilings (`ceilings.rs`).
//!
//! One warpgroup per block, operands staged once (a hash pattern; small values for f16 so the
//! accumulators stay finite), then `iterations` times [`ROUNDS`] rounds of 8 chained wgmmas into
//! one accumulator, one commit group per round with at most one group pending, so a round
//! issues while the previous one executes. The accumulators are xor-folded and stored, so nothing is
//! folded away. Shared memory: [`SHARED_BYTES`] (a 64 x 128-byte A tile and a 256 x 128-byte B
//! tile, 1024-aligned).
//!
//! The constants below are also built on the host, which launches these kernels.

const A_TILE: u32 = 64 * 128;
const B_TILE: u32 = 256 * 128;
/// Threads of a `ceiling_wgmma_*` block: one warpgroup.
pub const THREADS: u32 = 128;
/// Commit groups of 8 wgmmas per iteration.
pub const ROUNDS: u32 = 4;
/// wgmmas per iteration.
pub const OPS_PER_ITERATION: u32 = 8 * ROUNDS;
/// Dynamic shared memory of a `ceiling_wgmma_*` block: both tiles and the alignment slack.
pub const SHARED_BYTES: u32 = 1024 + A_TILE + B_TILE;

#[cfg(all(target_arch = "nvptx64", radio_sm90a))]
mod device {
    use super::*;
    use crate::intrinsics::*;
    use crate::wgmma::*;

    /// Fills both tiles with `hash(word) & mask | set` and returns their descriptors' bases.
    #[inline(always)]
    unsafe fn stage(mask: u32, set: u32) -> (u32, u32) {
        let base = (dynamic_shared() + 1023) & !1023;
        let mut word = thread_idx_x();
        while word < (A_TILE + B_TILE) / 4 {
            let value = (word.wrapping_mul(0x9e37_79b9) ^ (word >> 7)) & mask | set;
            st_shared_u32(base + 4 * word, value);
            word += block_dim_x();
        }
        fence_proxy_async_shared();
        sync_threads();
        (base, base + A_TILE)
    }

    macro_rules! wgmma_ceiling {
        ($name:ident, $acc:ty, $zero:expr, $mask:expr, $set:expr, $mma:ident) => {
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $name(iterations: u32, out: *mut u32) {
                let (a, b) = stage($mask, $set);
                let mut acc: [$acc; 128] = [$zero; 128];
                let mut i = 0;
                while i < iterations {
                    // Inside the loop, so the accumulators' initialisation is ordered before it.
                    fence();
                    for round in 0..ROUNDS {
                        for op in 0..8u32 {
                            let k = 32 * (op % 4);
                            $mma(
                                &mut acc,
                                descriptor_k_major_128b(a + k),
                                descriptor_k_major_128b(b + k),
                                true,
                            );
                        }
                        commit_group();
                        if round + 1 < ROUNDS {
                            wait_group::<1>();
                        }
                    }
                    // Drained inside the loop: the accumulators may then flow out of it (register
                    // moves at the loop exit would otherwise serialise every wgmma; ptxas C7514).
                    wait_group::<0>();
                    i += 1;
                }
                let mut sum = 0u32;
                crate::for_each_accumulator_128!(|r: usize| sum ^= acc[r] as u32);
                *out.add(global_thread_x() as usize) = sum;
            }
        };
    }

    wgmma_ceiling!(ceiling_wgmma_m64n256k32_s8, i32, 0, u32::MAX, 0x0101_0101, mma_m64n256k32_s32_s8);
    wgmma_ceiling!(ceiling_wgmma_m64n256k16_f16_f32, f32, 0.0, 0x2bff_2bff, 0, mma_m64n256k16_f32_f16);
}
