//! The J copy-out both schedules share (the sm_80 GEMMs and the `wgmma` W-path GEMMs), for a
//! tile staged at [`staged_offset`].
use super::*;
use crate::intrinsics::*;

/// Stores the staged J tile (rows from `row0`, columns from `col0`) to `j`, in whole 16-byte
/// chunks of J rows: a warp stores 512 contiguous bytes of one row; `128 WG` threads.
#[inline(always)]
pub(super) unsafe fn store_j<const WG: u32>(
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
