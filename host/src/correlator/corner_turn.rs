//! The X-engine's corner turn on the host: F-engine heaps (one per dish and heap time,
//! channel-major) into the correlator's time-major input.
//!
//! Formula: with `H` heap times per chunk, `D` dishes, `C` channels and `S` spectra per heap,
//! and one 4-byte word per (channel, spectrum) holding both polarisations' int8 (re, im) as
//! katgpucbf's F-engine heap does (`[channel][spectrum][pol][re, im]`),
//!
//! `out[(h S + s) C D + c D + d] = heaps[((h D + d) C + c) S + s]`,
//!
//! i.e. `heaps` is `[h][d][c][s]` (the heaps of a chunk side by side, as received) and `out`
//! the correlator input `[t][c][d][pol][re, im]` with `t = h S + s` (`Order::StationPol`,
//! two polarisations, `Format::Ci8`).
//!
//! Design: for each channel `c` the heaps hold a `D x S` matrix (dish rows of `S` spectra)
//! that the output holds transposed (spectrum rows of `D` dishes, `C D` words apart). It is
//! transposed in tiles of 16 x 16 words: 16 dish rows of 16 spectra (one 64-byte cache line
//! each) are read into a local tile and written out as 16 spectrum rows of 16 dishes (again
//! one cache line each), so both sides move whole lines and the working set is one tile.
//! Threads take disjoint ranges of output rows (blocks of 16 spectra), so they write disjoint
//! memory.
use crate::error::{Error, Result};

/// Spectra per block: one 64-byte cache line of 4-byte words.
const BLOCK: usize = 16;

/// The corner turn above, on `threads` threads (at least 1). `heaps` and `out` hold
/// `H D C S` words each; errors (nothing written) on a zero size, a size that overflows
/// `usize` or a slice of another length.
pub fn corner_turn(
    heaps: &[u32],
    out: &mut [u32],
    heaps_per_chunk: usize,
    dishes: usize,
    channels: usize,
    spectra: usize,
    threads: usize,
) -> Result<()> {
    let (h, d, c, s) = (heaps_per_chunk, dishes, channels, spectra);
    if h == 0 || d == 0 || c == 0 || s == 0 {
        return Err(Error::InvalidConfig(format!(
            "corner turn needs positive sizes, got {h} heap times, {d} dishes, {c} channels, {s} spectra"
        )));
    }
    let words = h
        .checked_mul(d)
        .and_then(|x| x.checked_mul(c))
        .and_then(|x| x.checked_mul(s))
        .ok_or_else(|| Error::InvalidConfig("corner turn: the chunk's size overflows usize".into()))?;
    if heaps.len() != words {
        return Err(Error::ShapeMismatch {
            what: "corner turn heaps (words)",
            expected: words,
            actual: heaps.len(),
        });
    }
    if out.len() != words {
        return Err(Error::ShapeMismatch {
            what: "corner turn output (words)",
            expected: words,
            actual: out.len(),
        });
    }
    let row = c * d; // words per output time row
    let rows = h * s;
    let blocks = rows.div_ceil(BLOCK);
    let threads = threads.clamp(1, blocks);
    let per_thread = blocks.div_ceil(threads) * BLOCK; // rows per thread
    std::thread::scope(|scope| {
        for (part, out) in out.chunks_mut(per_thread * row).enumerate() {
            scope.spawn(move || {
                let first = part * per_thread;
                let count = out.len() / row;
                let mut tile = [[0u32; BLOCK]; BLOCK];
                let mut t0 = 0;
                while t0 < count {
                    // Spectra s0 .. s0 + n of heap time hh (rows t0 .. t0 + n of this part).
                    let t = first + t0;
                    let (hh, s0) = (t / s, t % s);
                    let n = BLOCK.min(s - s0).min(count - t0);
                    for ci in 0..c {
                        let mut d0 = 0;
                        while d0 < d {
                            let m = BLOCK.min(d - d0);
                            // Read m dish rows of n spectra (a cache line each) ...
                            for (i, line) in tile.iter_mut().enumerate().take(m) {
                                let src = ((hh * d + d0 + i) * c + ci) * s + s0;
                                line[..n].copy_from_slice(&heaps[src..src + n]);
                            }
                            // ... and write n output rows of m dishes (a cache line each).
                            for k in 0..n {
                                let dst = (t0 + k) * row + ci * d + d0;
                                for (w, line) in out[dst..dst + m].iter_mut().zip(&tile) {
                                    *w = line[k];
                                }
                            }
                            d0 += m;
                        }
                    }
                    t0 += n;
                }
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(heaps: &[u32], h: usize, d: usize, c: usize, s: usize) -> Vec<u32> {
        let mut out = vec![0; heaps.len()];
        for hh in 0..h {
            for di in 0..d {
                for ci in 0..c {
                    for si in 0..s {
                        out[(hh * s + si) * c * d + ci * d + di] = heaps[((hh * d + di) * c + ci) * s + si];
                    }
                }
            }
        }
        out
    }

    #[test]
    fn equals_the_formula_for_odd_shapes_and_thread_counts() {
        for &(h, d, c, s) in
            &[(1, 1, 1, 1), (2, 3, 5, 7), (3, 8, 4, 40), (1, 5, 3, 16), (4, 2, 1, 33), (2, 37, 3, 50)]
        {
            let heaps: Vec<u32> = (0..(h * d * c * s) as u32).map(|x| x.wrapping_mul(2654435761)).collect();
            let want = naive(&heaps, h, d, c, s);
            for threads in [1, 2, 3, 7, 64] {
                let mut out = vec![0xdead_beef; heaps.len()];
                corner_turn(&heaps, &mut out, h, d, c, s, threads).unwrap();
                assert_eq!(out, want, "h {h} d {d} c {c} s {s} threads {threads}");
            }
        }
    }

    #[test]
    fn refuses_wrong_sizes() {
        let heaps = vec![0u32; 24];
        let mut out = vec![0u32; 24];
        assert!(matches!(corner_turn(&heaps, &mut out, 0, 2, 3, 4, 1), Err(Error::InvalidConfig(_))));
        assert!(matches!(
            corner_turn(&heaps[..23], &mut out, 1, 2, 3, 4, 1),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(matches!(
            corner_turn(&heaps, &mut out[..23], 1, 2, 3, 4, 1),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(matches!(
            corner_turn(&heaps, &mut out, usize::MAX, 2, 3, 4, 1),
            Err(Error::InvalidConfig(_))
        ));
        assert!(corner_turn(&heaps, &mut out, 1, 2, 3, 4, 0).is_ok());
    }
}
