//! Shared-memory bank-conflict model (32 banks of 4 bytes).
//!
//! A warp access of `width` bytes per lane (4, 8 or 16) is split into `width / 4` phases of
//! `128 / width` consecutive lanes; a phase takes one wavefront unless two of its lanes touch
//! the same bank at different 4-byte words (same word is a broadcast, not a conflict). The
//! pure functions let CPU tests prove that a kernel's access pattern is conflict-free; the
//! device check (the idea of sec. 4.14 of Smith, CHORD FRB beamformer design note (2022),
//! generalised to broadcasts and wide accesses) asserts the same at run time in debug builds of the
//! PTX.

/// Lanes per phase for an access of `width` bytes per lane (4, 8 or 16).
pub const fn lanes_per_phase(width: u32) -> u32 {
    128 / width
}

/// Number of shared-memory wavefronts a warp access needs: the sum over phases of the
/// largest number of distinct words any one bank must serve. `width / 4` wavefronts (one
/// per phase) is conflict-free.
pub fn wavefronts(addresses: &[u32; 32], width: u32) -> u32 {
    let per_phase = lanes_per_phase(width) as usize;
    let words_per_lane = width / 4;
    let mut total = 0;
    for phase in addresses.chunks(per_phase) {
        // For each bank, the distinct words requested (at most 32 per phase).
        let mut worst = 0;
        for bank in 0..32u32 {
            let mut words = [u32::MAX; 32];
            let mut count = 0usize;
            for &address in phase {
                for w in 0..words_per_lane {
                    let word = address / 4 + w;
                    if word % 32 == bank && !words[..count].contains(&word) {
                        words[count] = word;
                        count += 1;
                    }
                }
            }
            worst = worst.max(count as u32);
        }
        total += worst.max(1);
    }
    total
}

/// True when the access needs one wavefront per phase.
pub fn is_conflict_free(addresses: &[u32; 32], width: u32) -> bool {
    wavefronts(addresses, width) == width / 4
}

/// The key a lane's access is compared on in the device check: lanes with equal keys share
/// a phase and a bank group of `width` bytes.
pub const fn bank_key(lane: u32, address: u32, width: u32) -> u32 {
    let groups = 128 / width; // bank groups of `width` bytes across the 32 banks
    let phase = lane / lanes_per_phase(width);
    ((address / width) % groups) | (phase << 5)
}

/// Device check: true in every lane iff this warp access (all 32 lanes, shared-window
/// `address`, `width` bytes, address aligned to `width`) is bank-conflict free. Lanes that
/// share a phase and bank group must all read the same `width`-byte word.
#[cfg(target_arch = "nvptx64")]
pub fn warp_access_is_conflict_free(address: u32, width: u32) -> bool {
    use crate::intrinsics::{lane_id, match_any, vote_all};
    let same_bank = match_any(bank_key(lane_id(), address, width));
    let same_word = match_any(address / width);
    vote_all(same_bank & !same_word == 0)
}

/// Traps (the launch fails with an illegal-instruction error) if the warp access conflicts.
/// Compiled in only when the device build has debug assertions on (see CONTRIBUTING.md);
/// otherwise free.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub fn debug_assert_conflict_free(address: u32, width: u32) {
    if cfg!(debug_assertions) && !warp_access_is_conflict_free(address, width) {
        // SAFETY: aborting the kernel is the purpose.
        unsafe { core::arch::nvptx::trap() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(mut f: impl FnMut(u32) -> u32) -> [u32; 32] {
        core::array::from_fn(|lane| f(lane as u32))
    }

    #[test]
    fn consecutive_words_are_free_and_strided_ones_conflict() {
        assert!(is_conflict_free(&pattern(|l| 4 * l), 4));
        assert_eq!(wavefronts(&pattern(|l| 8 * l), 4), 2);
        assert_eq!(wavefronts(&pattern(|l| 128 * l), 4), 32);
        assert!(is_conflict_free(&pattern(|l| 4 * (l ^ 5)), 4));
        // One padding word per 32-word row removes the column-read conflict.
        assert!(is_conflict_free(&pattern(|l| 4 * 33 * l), 4));
    }

    #[test]
    fn broadcast_is_not_a_conflict() {
        assert!(is_conflict_free(&pattern(|_| 64), 4));
        assert!(is_conflict_free(&pattern(|l| 4 * (l / 2)), 4));
    }

    #[test]
    fn sixteen_byte_accesses_use_quarter_warp_phases() {
        assert!(is_conflict_free(&pattern(|l| 16 * l), 16));
        assert_eq!(wavefronts(&pattern(|l| 32 * l), 16), 8);
        // Rows of 128 bytes padded by 16 bytes: lanes 0..8 read a column of 16-byte words.
        assert!(is_conflict_free(&pattern(|l| 144 * (l % 8) + 16 * (l / 8)), 16));
        assert!(!is_conflict_free(&pattern(|l| 128 * (l % 8) + 16 * (l / 8)), 16));
    }

    /// The device rule (equal keys must mean equal words) is exactly the wavefront model.
    #[test]
    fn device_rule_matches_the_model() {
        let mut state = 0x1234_5678u32;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        for width in [4, 8, 16] {
            for _ in 0..2000 {
                let spread = 1 + next() % 64;
                let addrs = pattern(|_| (next() % spread) * width);
                let device = (0..32).all(|a| {
                    (0..32).all(|b| {
                        bank_key(a, addrs[a as usize], width) != bank_key(b, addrs[b as usize], width)
                            || addrs[a as usize] / width == addrs[b as usize] / width
                    })
                });
                assert_eq!(device, is_conflict_free(&addrs, width), "{addrs:?} width {width}");
            }
        }
    }
}
