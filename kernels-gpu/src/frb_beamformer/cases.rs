//! The cases of Table 2 (sec. 4.3) of Smith, CHORD FRB beamformer design note (2022) and the layouts
//! of the note's own first kernel, not
//! written yet: derived constants, the shared-memory layouts of sec. 4.5 (`Fsh1[]`,
//! `Fsh2[]`, `Gsh[]`), the `Freg2[]` assignment of sec. 4.9, the `Gsh[]` store/load lanes of
//! secs. 4.10-4.11 and the E -> F shuffle of sec. 4.6, with CPU checks (the note author's
//! script, as tests) that all six shared-memory access patterns of secs. 4.6-4.11 are
//! bank-conflict free and cover their arrays exactly once. The kernels written so far use
//! [`FRB_CASES`] and [`frb_case`].
use super::layout::{split_field3, x_coordinates};

/// One compile-time case of the note's Table 2: dishes D on an M x N grid, warps per block W, and
/// the outer and inner time blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrbCase {
    /// Dishes D (64, 256 or 512), all on the grid: `D <= M N`.
    pub dishes: u32,
    /// Grid rows M (the first FFT's spectator, the second FFT's length).
    pub m: u32,
    /// Grid columns N (the first FFT's length, padded to `N_pad` in shared memory).
    pub n: u32,
    /// Warps per block W.
    pub warps: u32,
    /// Outer time block `T_outer`: time samples of E one iteration of the outermost loop
    /// reads and grids (even, at most 64; `T_outer / 2` F-array times).
    pub t_outer: u32,
    /// Inner time block `T_inner`: time samples per iteration of the inner (2-d FFT) loop,
    /// a divisor of `T_outer` small enough for the FFT's arrays to fit shared memory.
    pub t_inner: u32,
}

/// The note's Table 2, cases 1-5: CHORD pathfinder square and rectangular, HIRAX square and
/// rectangular, full CHORD.
pub const FRB_CASES: [FrbCase; 5] = [
    FrbCase { dishes: 64, m: 8, n: 8, warps: 4, t_outer: 64, t_inner: 8 },
    FrbCase { dishes: 64, m: 8, n: 12, warps: 6, t_outer: 48, t_inner: 6 },
    FrbCase { dishes: 256, m: 16, n: 16, warps: 16, t_outer: 64, t_inner: 8 },
    FrbCase { dishes: 256, m: 16, n: 20, warps: 20, t_outer: 40, t_inner: 5 },
    FrbCase { dishes: 512, m: 24, n: 24, warps: 24, t_outer: 48, t_inner: 4 },
];

const fn next_power_of_two(x: u32) -> u32 {
    1 << (32 - (x - 1).leading_zeros())
}

const fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Table 2's derived constants and the shared-memory layouts of the note's sec. 4.5, in 4-byte
/// words (`Fsh1[]` and `Fsh2[]` are int32 arrays, `Gsh[]` is half2).
impl FrbCase {
    /// `M` and `N` padded to powers of two (eq. 73).
    pub const fn m_pad(&self) -> u32 {
        next_power_of_two(self.m)
    }
    /// `N` padded to a power of two, `N_pad` (eq. 73).
    pub const fn n_pad(&self) -> u32 {
        next_power_of_two(self.n)
    }
    /// m-indices per mini-tile, `32 / N_pad` (eq. 100).
    pub const fn mt(&self) -> u32 {
        32 / self.n_pad()
    }
    /// Mega-tile shape `(T_w x M_w)` mini-tiles (eq. 104).
    pub const fn mw(&self) -> u32 {
        gcd(self.m / self.mt(), self.warps)
    }
    /// Mega-tile rows `T_w = W / M_w` (eq. 104): the warps along time.
    pub const fn tw(&self) -> u32 {
        self.warps / self.mw()
    }
    /// Mega-tiles per thread block, `(T_r x M_r)` (eq. 105).
    pub const fn mr(&self) -> u32 {
        self.m / (self.mw() * self.mt())
    }
    /// Mega-tiles along time per block, `T_r = T_outer / (2 T_w)` (eq. 105).
    pub const fn tr(&self) -> u32 {
        self.t_outer / 2 / self.tw()
    }
    /// `Freg1[]` and `Freg2[]` registers per thread (eqs. 93, 106).
    pub const fn freg1_registers(&self) -> u32 {
        self.dishes.div_ceil(self.warps)
    }
    /// `Freg2[]` registers per thread, `T_r M_r` (eq. 106).
    pub const fn freg2_registers(&self) -> u32 {
        self.tr() * self.mr()
    }
    /// Eq. 65: the d_hi stride of `Fsh1[]`.
    pub const fn sigma_f1(&self) -> u32 {
        if self.dishes == 64 {
            260
        } else {
            257
        }
    }
    /// Eq. 70: the n stride of `Fsh2[]`.
    pub const fn sigma_f2(&self) -> u32 {
        32 * (self.m + 1) + self.mt()
    }
    /// Eqs. 74-75: the bit-reversed q_1.. stride and the q_0 stride of `Gsh[]`.
    pub const fn sigma_g1(&self) -> u32 {
        2 * self.m_pad() * self.t_inner + 32 / self.n_pad()
    }
    /// Eq. 75: the q_0 stride of `Gsh[]`, `N_pad Sigma_G1 + M_pad`.
    pub const fn sigma_g0(&self) -> u32 {
        self.n_pad() * self.sigma_g1() + self.m_pad()
    }
    /// Footprints in bytes (eqs. 66, 71, 77) and the union's (eq. 60).
    pub const fn fsh1_bytes(&self) -> u32 {
        4 * self.sigma_f1() * (self.dishes / 8)
    }
    /// Bytes of `Fsh2[]`: `N Sigma_F2` words (eq. 71).
    pub const fn fsh2_bytes(&self) -> u32 {
        4 * self.n * self.sigma_f2()
    }
    /// Bytes of `Gsh[]`: `2 Sigma_G0` half2 words (eq. 77).
    pub const fn gsh_bytes(&self) -> u32 {
        4 * 2 * self.sigma_g0()
    }
    /// Shared memory per block: the largest of the three arrays, which share one union
    /// (eq. 60).
    pub const fn shared_bytes(&self) -> u32 {
        let a = self.fsh1_bytes();
        let b = self.fsh2_bytes();
        let c = self.gsh_bytes();
        let ab = if a > b { a } else { b };
        if ab > c {
            ab
        } else {
            c
        }
    }
    /// Eq. 64: word of `Fsh1[tau][d]`, strides (tau, d_lo, d_hi) = (1, 32, Sigma_F1).
    pub const fn fsh1_word(&self, tau: u32, d: u32) -> u32 {
        tau + 32 * (d & 7) + self.sigma_f1() * (d >> 3)
    }
    /// Eq. 69: word of `Fsh2[tau][m][n]`, strides (tau, m, n) = (1, 33, Sigma_F2).
    pub const fn fsh2_word(&self, tau: u32, m: u32, n: u32) -> u32 {
        tau + 33 * m + self.sigma_f2() * n
    }
    /// Eq. 76: word of `Gsh[tau][pol][m][q]`: m stride 1, pol M_pad, tau 2 M_pad, the
    /// bit-reversed `q >> 1` Sigma_G1, `q & 1` Sigma_G0.
    pub const fn gsh_word(&self, tau: u32, pol: u32, m: u32, q: u32) -> u32 {
        let bits = self.n_pad().trailing_zeros();
        let qr = q >> 1;
        let brev = if bits == 0 { 0 } else { qr.reverse_bits() >> (32 - bits) };
        m + pol * self.m_pad() + tau * 2 * self.m_pad() + brev * self.sigma_g1() + (q & 1) * self.sigma_g0()
    }
    /// Eq. 102 with eq. 104: the (tau, m, n) that register (tr, mr) of lane `t` in warp `w`
    /// holds in `Freg2[]`, with `padded` set where n is zero padding (`n_lo >= N/4`).
    ///
    /// Two places differ from the note's pseudocode (108)-(109), which this follows
    /// otherwise: `n_lo` is `n_lo0 + 2 (field / M_t)` as eq. 102 says (108 adds
    /// `field / M_t` unshifted), and register `tr` holds `tau = tau_w + T_w tr` (109 steps
    /// tau by 1 per `tr`, which collides with `tau_w` whenever `T_w > 1`); with `T_w tr` an
    /// inner block of `T_inner` samples is `T_inner / T_w` whole registers (eq. 110).
    pub const fn freg2_element(&self, w: u32, t: u32, tr: u32, mr: u32) -> Freg2Element {
        let mt = self.mt();
        // t0 t1 t2 t3 t4 <-> n_hi0 n_hi1 n_lo0 [m0..m(4-nu) n_lo1..n_lo(nu-3)]
        let field = t >> 3;
        let m_in = field % mt;
        let n_lo = ((t >> 2) & 1) | ((field / mt) << 1);
        let n_hi = t & 3;
        let (tau_w, m_w) = (w / self.mw(), w % self.mw());
        Freg2Element {
            tau: tau_w + self.tw() * tr,
            m: m_in + mt * (m_w + self.mw() * mr),
            n: n_hi * (self.n / 4) + n_lo,
            padded: n_lo >= self.n / 4,
        }
    }
}

impl FrbCase {
    /// The `Fsh2[]` word lane `t` of warp `w` loads into `Freg2[tr][mr]` (sec. 4.9). A
    /// zero-padded lane (masked to zero afterwards) loads the word of `n_lo = 0` in its own
    /// `n_hi` group, which a real lane of the warp loads too: a broadcast, so in bounds and
    /// conflict-free. (The note's "same bank, in bounds" substitute `s0 & 31` is a second
    /// word in a used bank whenever the padded `n` is itself in bounds, as in case 2.)
    pub const fn freg2_load_word(&self, w: u32, t: u32, tr: u32, mr: u32) -> u32 {
        let e = self.freg2_element(w, t, tr, mr);
        let n = if e.padded { (t & 3) * (self.n / 4) } else { e.n };
        self.fsh2_word(e.tau, e.m, n)
    }
}

impl FrbCase {
    /// Sec. 4.10: the `Gsh[]` element `(tau, pol, m, q)` that lane `t` of warp `w` stores
    /// from register `r` (`r <-> q_lo0`, eq. 120) after the first FFT of the mini-tile in
    /// `Freg2[tr][mr]`, `tau` counted inside the inner block (`tr < T_inner / T_w`). The
    /// lanes are eq. 26's output assignment with `u = q_hi` and the spectator `s = m`
    /// within the mini-tile; `q` runs over the padded `2 N_pad`.
    pub const fn gsh_write_element(
        &self,
        w: u32,
        t: u32,
        tr: u32,
        mr: u32,
        pol: u32,
        r: u32,
    ) -> (u32, u32, u32, u32) {
        let (q_hi, m_in) = split_field3(self.n, t >> 2);
        let q = 8 * q_hi + (r | ((t & 3) << 1));
        let (tau_w, m_w) = (w / self.mw(), w % self.mw());
        (tau_w + self.tw() * tr, pol, m_in + self.mt() * (m_w + self.mw() * mr), q)
    }

    /// `G`-array tiles of the second FFT (eq. 121): `2N / (32 / M_pad)` of them, each all m
    /// and `32 / M_pad` consecutive q.
    pub const fn g_tiles(&self) -> u32 {
        2 * self.n / (32 / self.m_pad())
    }

    /// Sec. 4.11: the `(m, q)` lane `t` reads for `G`-tile `tile` (eq. 123: eq. 25 with
    /// `c = m_hi`, `d = m_lo`, spectator `s = q` within the tile), and whether `m_lo` is
    /// zero padding (`m_lo >= M/4`, case 5 only), whose value the kernel masks to zero.
    pub const fn gsh_read_element(&self, t: u32, tile: u32) -> (u32, u32, bool) {
        let (m_hi, m_lo, q_in) = x_coordinates(self.m, t);
        let m = (self.m / 4) * m_hi + m_lo;
        (m, tile * (32 / self.m_pad()) + q_in, m_lo >= self.m / 4)
    }
}

/// The E -> F shuffle of sec. 4.6 (eqs. 80-82), thread-local, 28 operations (8 `prmt` for a
/// 4 x 4 byte transpose, then per output register two shifts, two single-immediate `lop3`s
/// and one `prmt`); for the note's design, not used by a kernel yet.
/// Input: four ci4 words `e[tau_hi + 2 pol]`, nibble `ReIm + 2 d` (eq. 80: byte d of a word
/// is dish d, real part low). Output: `f[d]`, nibble `pol + 2 tau_hi + 4 ReIm` (eq. 81), so
/// the low 16 bits hold the four real parts and the high 16 the imaginary ones (the
/// `b2 <-> ReIm` that sec. 4.10's int4 -> f16 unpacking wants). `prmt` is the device
/// instruction or its host model `packing::byte_perm`.
#[inline(always)]
pub fn e_to_f_shuffle<P: Fn(u32, u32, u32) -> u32>(e: [u32; 4], prmt: P) -> [u32; 4] {
    // Byte p = pol + 2 tau_hi of t[d] is dish d of e[tau_hi + 2 pol]: pair e0 with e2 and e1
    // with e3, so that p comes out in output order.
    let lo02 = prmt(e[0], e[2], 0x5140);
    let hi02 = prmt(e[0], e[2], 0x7362);
    let lo13 = prmt(e[1], e[3], 0x5140);
    let hi13 = prmt(e[1], e[3], 0x7362);
    let t = [
        prmt(lo02, lo13, 0x5410),
        prmt(lo02, lo13, 0x7632),
        prmt(hi02, hi13, 0x5410),
        prmt(hi02, hi13, 0x7632),
    ];
    t.map(|t| {
        // Bytes 0 and 2 of `re`: (re_p, re_p+1); bytes 1 and 3 of `im`: (im_p, im_p+1).
        let re = (t & 0x0f0f_0f0f) | ((t >> 4) & 0xf0f0_f0f0);
        let im = ((t << 4) & 0x0f0f_0f0f) | (t & 0xf0f0_f0f0);
        prmt(re, im, 0x7520)
    })
}

/// One `Freg2[]` slot: see [`FrbCase::freg2_element`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freg2Element {
    /// Time sample within the outer block, `tau_w + T_w tr`.
    pub tau: u32,
    /// Grid row m, `0..M`.
    pub m: u32,
    /// Grid column n, `n_hi (N / 4) + n_lo`; meaningless where `padded`.
    pub n: u32,
    /// The slot is zero padding (`n_lo >= N / 4`): the kernel masks its value to zero.
    pub padded: bool,
}

/// The case of (D, M, N), if Table 2 has one.
pub const fn frb_case(dishes: u32, m: u32, n: u32) -> Option<FrbCase> {
    let mut k = 0;
    while k < FRB_CASES.len() {
        let c = FRB_CASES[k];
        if c.dishes == dishes && c.m == m && c.n == n {
            return Some(c);
        }
        k += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frb_beamformer::*;

    /// The derived constants reproduce the note's Table 2 column by column.
    #[test]
    fn derived_constants_are_table_2() {
        let get = |f: fn(&FrbCase) -> u32| FRB_CASES.map(|c| f(&c));
        assert_eq!(get(FrbCase::mt), [4, 2, 2, 1, 1]);
        assert_eq!(get(FrbCase::mw), [2, 2, 8, 4, 24]);
        assert_eq!(get(FrbCase::tw), [2, 3, 2, 5, 1]);
        assert_eq!(get(FrbCase::mr), [1, 2, 1, 4, 1]);
        assert_eq!(get(FrbCase::tr), [16, 8, 16, 4, 24]);
        assert_eq!(get(FrbCase::sigma_f1), [260, 260, 257, 257, 257]);
        assert_eq!(get(FrbCase::sigma_f2), [292, 290, 546, 545, 801]);
        assert_eq!(get(FrbCase::sigma_g1), [132, 98, 258, 161, 257]);
        assert_eq!(get(FrbCase::sigma_g0), [1064, 1576, 4144, 5168, 8256]);
        assert_eq!(get(FrbCase::fsh1_bytes), [8320, 8320, 32896, 32896, 65792]);
        assert_eq!(get(FrbCase::fsh2_bytes), [9344, 13920, 34944, 43600, 76896]);
        assert_eq!(get(FrbCase::gsh_bytes), [8512, 12608, 33152, 41344, 66048]);
        assert_eq!(get(FrbCase::shared_bytes), [9344, 13920, 34944, 43600, 76896]);
        assert_eq!(get(FrbCase::freg1_registers), [16, 11, 16, 13, 22]);
        assert_eq!(get(FrbCase::freg2_registers), [16, 16, 16, 16, 24]);
    }

    /// The compile-time asserts of eqs. 78, 83/88, 98, 107 and 110 hold for every case.
    #[test]
    fn compile_time_asserts_of_sec_4_hold() {
        for c in FRB_CASES {
            assert!(c.t_outer <= 64 && c.sigma_f2() >= 33 * c.m, "{c:?}: eq. 78");
            if c.dishes == 64 {
                assert!(c.t_outer % 8 == 0 && (c.t_outer / 8) % c.warps == 0, "{c:?}: eq. 83");
            } else {
                assert!(
                    c.dishes % 256 == 0 && ((c.dishes / 256) * (c.t_outer / 2)) % c.warps == 0,
                    "{c:?}: eq. 88"
                );
            }
            assert!((c.m * c.n) % c.warps == 0 && c.m * c.n / c.warps <= 32, "{c:?}: eq. 98");
            assert!(
                c.m % c.mt() == 0 && (c.t_outer / 2) % c.tw() == 0 && c.m % (c.mw() * c.mt()) == 0,
                "{c:?}: eq. 107"
            );
            assert!(c.t_inner % c.tw() == 0, "{c:?}: eq. 110");
        }
    }

    fn conflict_free(words: [u32; 32]) -> bool {
        crate::bank::is_conflict_free(&words.map(|w| 4 * w), 4)
    }

    /// Sec. 4.6: the eight 32-bit `Fsh1[]` stores of a tile, lanes per eq. 87 (cases 1-2,
    /// `t <-> d4 d5 d3 tau_lo0 tau_lo1`) or eq. 92 (cases 3-5, `t <-> d4 d5 d6 d7 d3`),
    /// register `r <-> d0 d1 d2`; and sec. 4.7's `Fsh1[]` loads (lane t reads tau = t).
    #[test]
    fn fsh1_accesses_are_conflict_free() {
        for c in FRB_CASES {
            let words = c.fsh1_bytes() / 4;
            for r in 0..8 {
                let tiles = if c.dishes == 64 { c.t_outer / 8 } else { (c.dishes / 256) * (c.t_outer / 2) };
                for tile in 0..tiles {
                    let addr: [u32; 32] = core::array::from_fn(|t| {
                        let t = t as u32;
                        let bit = |k: u32| (t >> k) & 1;
                        let (tau, d) = if c.dishes == 64 {
                            let d = r | bit(2) << 3 | bit(0) << 4 | bit(1) << 5;
                            (4 * tile + (t >> 3), d)
                        } else {
                            let (tau, block) = (tile % (c.t_outer / 2), tile / (c.t_outer / 2));
                            (tau, 256 * block + (r | bit(4) << 3 | (t & 15) << 4))
                        };
                        c.fsh1_word(tau, d)
                    });
                    assert!(conflict_free(addr), "{c:?} Fsh1 store r={r} tile={tile}");
                    assert!(addr.iter().all(|&a| a < words));
                }
            }
            for d in 0..c.dishes {
                let addr: [u32; 32] = core::array::from_fn(|t| c.fsh1_word(t as u32, d));
                assert!(conflict_free(addr) && addr.iter().all(|&a| a < words), "{c:?} Fsh1 load d={d}");
            }
        }
    }

    /// Sec. 4.8: for any dish map (here shuffled with a fixed LCG), warp w's i-th store writes
    /// lane t to `s_d + t`, d = w + i W (dummy dishes included); sec. 4.9: the `Freg2[]`
    /// loads, with zero-padded lanes moved to the same bank inside the array, are conflict
    /// free, and the non-padded slots hold every (tau, m, n) of the outer block exactly once.
    #[test]
    fn fsh2_accesses_are_conflict_free_and_freg2_covers_the_block() {
        for c in FRB_CASES {
            let words = c.fsh2_bytes() / 4;
            let points = c.m * c.n;
            let mut order: [u32; 1024] = core::array::from_fn(|k| k as u32);
            let mut state = 12345u32;
            for k in (1..points as usize).rev() {
                state = state.wrapping_mul(1664525).wrapping_add(1013904223);
                order.swap(k, (state >> 8) as usize % (k + 1));
            }
            for w in 0..c.warps {
                for i in 0..points / c.warps {
                    let grid = order[(w + i * c.warps) as usize];
                    let s_d = c.fsh2_word(0, grid / c.n, grid % c.n);
                    let addr: [u32; 32] = core::array::from_fn(|t| s_d + t as u32);
                    assert!(conflict_free(addr) && addr.iter().all(|&a| a < words), "{c:?} Fsh2 store");
                }
            }
            let mut seen = [0u8; 32 * 24 * 24];
            for w in 0..c.warps {
                for tr in 0..c.tr() {
                    for mr in 0..c.mr() {
                        let addr: [u32; 32] = core::array::from_fn(|t| {
                            let e = c.freg2_element(w, t as u32, tr, mr);
                            if !e.padded {
                                seen[((e.tau * c.m + e.m) * c.n + e.n) as usize] += 1;
                            }
                            c.freg2_load_word(w, t as u32, tr, mr)
                        });
                        assert!(conflict_free(addr), "{c:?} Freg2 load w={w} tr={tr} mr={mr}");
                        assert!(addr.iter().all(|&a| a < words));
                    }
                }
            }
            let block = (c.t_outer / 2 * c.m * c.n) as usize;
            assert!(seen[..block].iter().all(|&k| k == 1), "{c:?}: Freg2 is not a bijection");
        }
    }

    /// Sec. 4.10: every `Gsh[]` store (warp, inner-block register, pol, r) is conflict free
    /// and in bounds, and together they write each `(tau, pol, m, q)` of the inner block,
    /// `q < 2 N_pad`, exactly once. Sec. 4.11: every load of a G-tile (any tau, pol) is
    /// conflict free and in bounds, and the tiles read each real `(m, q)`, `q < 2N`, once.
    #[test]
    fn gsh_accesses_are_conflict_free_and_cover_g() {
        extern crate std;
        for c in FRB_CASES {
            let words = c.gsh_bytes() / 4;
            let mut written = std::vec![0u8; (c.t_inner * 2 * c.m * 2 * c.n_pad()) as usize];
            for w in 0..c.warps {
                for tr in 0..c.t_inner / c.tw() {
                    for mr in 0..c.mr() {
                        for pol in 0..2 {
                            for r in 0..2 {
                                let addr: [u32; 32] = core::array::from_fn(|t| {
                                    let (tau, pol, m, q) = c.gsh_write_element(w, t as u32, tr, mr, pol, r);
                                    written[(((tau * 2 + pol) * c.m + m) * 2 * c.n_pad() + q) as usize] += 1;
                                    c.gsh_word(tau, pol, m, q)
                                });
                                assert!(
                                    conflict_free(addr),
                                    "{c:?} Gsh store w={w} tr={tr} mr={mr} pol={pol} r={r}"
                                );
                                assert!(addr.iter().all(|&a| a < words));
                            }
                        }
                    }
                }
            }
            assert!(written.iter().all(|&k| k == 1), "{c:?}: Gsh stores are not a bijection");
            assert!(c.g_tiles() % c.warps == 0 && 2 * c.n % (32 / c.m_pad()) == 0, "{c:?}: eq. 121");
            for tau in 0..c.t_inner {
                for pol in 0..2 {
                    let mut read = std::vec![0u8; (c.m * 2 * c.n) as usize];
                    for tile in 0..c.g_tiles() {
                        let addr: [u32; 32] = core::array::from_fn(|t| {
                            let (m, q, padded) = c.gsh_read_element(t as u32, tile);
                            if !padded {
                                read[(m * 2 * c.n + q) as usize] += 1;
                            }
                            c.gsh_word(tau, pol, m, q)
                        });
                        assert!(conflict_free(addr), "{c:?} Gsh load tau={tau} pol={pol} tile={tile}");
                        assert!(addr.iter().all(|&a| a < words));
                    }
                    assert!(read.iter().all(|&k| k == 1), "{c:?}: G tiles are not a bijection");
                }
            }
        }
    }

    /// Eq. 80 -> eq. 81 nibble by nibble on random words, with the host model of `prmt`.
    #[test]
    fn e_to_f_shuffle_moves_every_nibble_as_eqs_80_81_say() {
        let mut state = 0x2545_f491u32;
        for _ in 0..20000 {
            let e: [u32; 4] = core::array::from_fn(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state
            });
            let f = e_to_f_shuffle(e, crate::packing::byte_perm);
            for d in 0..4 {
                for pol in 0..2 {
                    for tau_hi in 0..2 {
                        for reim in 0..2 {
                            let from = (e[(tau_hi + 2 * pol) as usize] >> (4 * (reim + 2 * d))) & 15;
                            let to = (f[d as usize] >> (4 * (pol + 2 * tau_hi + 4 * reim))) & 15;
                            assert_eq!(from, to, "d={d} pol={pol} tau_hi={tau_hi} reim={reim}");
                        }
                    }
                }
            }
        }
    }

    /// A mini-tile (eq. 102) is the short FFT's input (eq. 25) with `c = n_hi`, `d = n_lo`
    /// and the spectator `s = m` within the mini-tile: `Freg2[]` feeds the first FFT (eq.
    /// 56) with no data movement.
    #[test]
    fn mini_tiles_are_the_fft_input_assignment() {
        for c in FRB_CASES {
            for t in 0..32 {
                let e = c.freg2_element(0, t, 0, 0);
                let (n_hi, n_lo) = (t & 3, e.n - (t & 3) * (c.n / 4));
                assert_eq!(x_coordinates(c.n, t), (n_hi, n_lo, e.m), "{c:?} lane {t}");
                assert_eq!(e.padded, n_lo >= c.n / 4);
            }
        }
    }

    /// Eq. 59's compile-time asserts and the grid capacity hold for every case.
    #[test]
    fn table_2_cases_satisfy_eq_59() {
        for c in FRB_CASES {
            assert!(is_fft_size(c.m) && is_fft_size(c.n), "{c:?}");
            assert!(c.t_outer % 2 == 0 && c.t_outer % c.t_inner == 0, "{c:?}");
            assert!(c.dishes <= c.m * c.n, "{c:?}");
            assert_eq!(frb_case(c.dishes, c.m, c.n), Some(c));
        }
        assert_eq!(frb_case(64, 12, 8), None);
        assert_eq!(frb_case(512, 24, 32), None);
    }
}
