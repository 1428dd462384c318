//! Register assignments as data, in the notation of K. Smith's "CHORD FRB beamformer"
//! (the FRB note, App. B.1) and of the CHORD baseband beamformer note (App. A).
//!
//! A warp-distributed matrix has logical coordinates (row, col) and physical locations
//! (lane `t4..t0`, register `r..`, element `b..` within the 32-bit register). A
//! [`Fragment`] writes down which logical bit each physical bit carries, exactly as the
//! notes do: `[(16 x 16) f16 A_ij]  b0 <-> j0  r0 r1 <-> i3 j3  t0 t1 t2 t3 t4 <-> j1 j2 i0 i1 i2`.
//! Kernels and tests move values between matrices and registers only through these
//! functions, so one verified table serves every kernel.
//!
//! Naming: rows and columns are the fragment's own. For A they are (i, j), for B (j, k), for
//! C and D (i, k); [`Fragment::row_letter`] and [`Fragment::col_letter`] record which.
use core::fmt;

/// One logical index bit: bit `n` of the row or of the column index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bit {
    /// Bit `n` of the fragment's row index (`i` for A and C/D, `j` for B); `n < row_bits`.
    Row(u8),
    /// Bit `n` of the fragment's column index (`j` for A, `k` for B and C/D); `n < col_bits`.
    Col(u8),
}

/// Where one matrix element lives in a warp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Lane of the warp, 0..32: the bits `t4..t0` of the notation.
    pub lane: u32,
    /// Register index within the lane, `0..Fragment::registers()`: the bits `r..r0`.
    pub register: u32,
    /// Element index inside the 32-bit register (byte for int8, half for f16, 0 for 32-bit).
    pub element: u32,
}

/// A register assignment of a `rows x cols` matrix over one warp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fragment {
    /// Matrix name as printed by `Display`: `"A"`, `"B"`, `"C"` (C and D share one layout) or
    /// `"Asp"` for the 2:4-sparse A.
    pub name: &'static str,
    /// Element type as printed by `Display`: `"f16"`, `"f32"`, `"int8"` or `"int32"`.
    pub dtype: &'static str,
    /// Letter of the row index in the notation: `'i'` for A, C and D, `'j'` for B.
    pub row_letter: char,
    /// Letter of the column index in the notation: `'j'` for A, `'k'` for B, C and D.
    pub col_letter: char,
    /// log2 of the number of rows: the matrix has `1 << row_bits` rows.
    pub row_bits: u32,
    /// log2 of the number of columns: the matrix has `1 << col_bits` columns.
    pub col_bits: u32,
    /// Bits of one element: 8, 16 or 32.
    pub element_bits: u32,
    /// Logical bits of the element index `b0, b1, ..` inside a register.
    pub byte: &'static [Bit],
    /// Logical bits of the register index `r0, r1, ..`.
    pub register: &'static [Bit],
    /// Logical bits of the lane `t0 .. t4`.
    pub thread: [Bit; 5],
}

const fn bit_of(value: u32, n: u8) -> u32 {
    (value >> n) & 1
}

impl Fragment {
    /// Number of rows of the matrix, `2^row_bits` (e.g. 16 for an m16n8k16 A).
    pub const fn rows(&self) -> u32 {
        1 << self.row_bits
    }
    /// Number of columns of the matrix, `2^col_bits` (e.g. 16 for an m16n8k16 f16 A).
    pub const fn cols(&self) -> u32 {
        1 << self.col_bits
    }
    /// Registers per thread.
    pub const fn registers(&self) -> u32 {
        1 << self.register.len()
    }
    /// Elements per 32-bit register.
    pub const fn elements_per_register(&self) -> u32 {
        1 << self.byte.len()
    }

    const fn logical(&self, bit: Bit, row: u32, col: u32) -> u32 {
        match bit {
            Bit::Row(n) => bit_of(row, n),
            Bit::Col(n) => bit_of(col, n),
        }
    }

    /// Physical location of element (row, col). Bits of (row, col) that no physical bit
    /// carries are ignored, so callers pass in-range coordinates.
    pub const fn location(&self, row: u32, col: u32) -> Location {
        let mut lane = 0;
        let mut t = 0;
        while t < 5 {
            lane |= self.logical(self.thread[t], row, col) << t;
            t += 1;
        }
        let mut register = 0;
        let mut r = 0;
        while r < self.register.len() {
            register |= self.logical(self.register[r], row, col) << r;
            r += 1;
        }
        let mut element = 0;
        let mut b = 0;
        while b < self.byte.len() {
            element |= self.logical(self.byte[b], row, col) << b;
            b += 1;
        }
        Location { lane, register, element }
    }

    /// Logical coordinates (row, col) held at a physical location: the inverse of
    /// [`Fragment::location`].
    pub const fn coordinates(&self, at: Location) -> (u32, u32) {
        let mut row = 0;
        let mut col = 0;
        let mut t = 0;
        while t < 5 {
            let v = bit_of(at.lane, t as u8);
            match self.thread[t] {
                Bit::Row(n) => row |= v << n,
                Bit::Col(n) => col |= v << n,
            }
            t += 1;
        }
        let mut r = 0;
        while r < self.register.len() {
            let v = bit_of(at.register, r as u8);
            match self.register[r] {
                Bit::Row(n) => row |= v << n,
                Bit::Col(n) => col |= v << n,
            }
            r += 1;
        }
        let mut b = 0;
        while b < self.byte.len() {
            let v = bit_of(at.element, b as u8);
            match self.byte[b] {
                Bit::Row(n) => row |= v << n,
                Bit::Col(n) => col |= v << n,
            }
            b += 1;
        }
        (row, col)
    }

    /// Index of the register value in a `[lane][register]` image of the fragment (32 lanes).
    pub const fn word_index(&self, at: Location) -> usize {
        (at.lane * self.registers() + at.register) as usize
    }

    /// Bit offset of the element inside its 32-bit register.
    pub const fn shift(&self, at: Location) -> u32 {
        at.element * self.element_bits
    }

    /// True when the physical bits carry every logical bit exactly once: the assignment is a
    /// bijection between the matrix and `32 * registers * elements` slots.
    pub const fn is_bijection(&self) -> bool {
        let total = 5 + self.register.len() + self.byte.len();
        if total as u32 != self.row_bits + self.col_bits {
            return false;
        }
        let mut seen: u64 = 0;
        let mut p = 0;
        while p < total {
            let bit = if p < 5 {
                self.thread[p]
            } else if p < 5 + self.register.len() {
                self.register[p - 5]
            } else {
                self.byte[p - 5 - self.register.len()]
            };
            let index = match bit {
                Bit::Row(n) if (n as u32) < self.row_bits => n as u32,
                Bit::Col(n) if (n as u32) < self.col_bits => 32 + n as u32,
                _ => return false,
            };
            if seen & (1 << index) != 0 {
                return false;
            }
            seen |= 1 << index;
            p += 1;
        }
        true
    }
}

/// Prints the FRB note's notation, e.g. `[(16 x 16) f16 A_ij]  b0 <-> j0  r0 r1 <-> i3 j3  t0 t1 t2 t3 t4 <-> j1 j2 i0 i1 i2`.
impl fmt::Display for Fragment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letter = |bit: Bit| match bit {
            Bit::Row(n) => (self.row_letter, n),
            Bit::Col(n) => (self.col_letter, n),
        };
        write!(
            f,
            "[({} x {}) {} {}_{}{}]",
            self.rows(),
            self.cols(),
            self.dtype,
            self.name,
            self.row_letter,
            self.col_letter
        )?;
        for (prefix, bits) in [("b", self.byte), ("r", self.register), ("t", &self.thread[..])] {
            if bits.is_empty() {
                continue;
            }
            f.write_str(" ")?;
            for n in 0..bits.len() {
                write!(f, " {prefix}{n}")?;
            }
            f.write_str(" <->")?;
            for &bit in bits {
                let (l, n) = letter(bit);
                write!(f, " {l}{n}")?;
            }
        }
        Ok(())
    }
}

use Bit::{Col as C, Row as R};

// --- f16 (FRB note App. C) -----------------------------------------------------------

/// m16n8k8 f16 A (16 x 8), eq. 156.
pub const M16N8K8_F16_A: Fragment = Fragment {
    name: "A",
    dtype: "f16",
    row_letter: 'i',
    col_letter: 'j',
    row_bits: 4,
    col_bits: 3,
    element_bits: 16,
    byte: &[C(0)],
    register: &[R(3)],
    thread: [C(1), C(2), R(0), R(1), R(2)],
};
/// m16n8k8 f16 B (8 x 8), eq. 157 (one register).
pub const M16N8K8_F16_B: Fragment = Fragment {
    name: "B",
    dtype: "f16",
    row_letter: 'j',
    col_letter: 'k',
    row_bits: 3,
    col_bits: 3,
    element_bits: 16,
    byte: &[R(0)],
    register: &[],
    thread: [R(1), R(2), C(0), C(1), C(2)],
};
/// m16n8k8 / m16n8k16 f16 C and D (16 x 8), eqs. 158, 161, 166.
pub const M16N8_F16_C: Fragment = Fragment {
    name: "C",
    dtype: "f16",
    row_letter: 'i',
    col_letter: 'k',
    row_bits: 4,
    col_bits: 3,
    element_bits: 16,
    byte: &[C(0)],
    register: &[R(3)],
    thread: [C(1), C(2), R(0), R(1), R(2)],
};
/// m16n8k16 f16 A (16 x 16), eq. 159.
pub const M16N8K16_F16_A: Fragment = Fragment {
    name: "A",
    dtype: "f16",
    row_letter: 'i',
    col_letter: 'j',
    row_bits: 4,
    col_bits: 4,
    element_bits: 16,
    byte: &[C(0)],
    register: &[R(3), C(3)],
    thread: [C(1), C(2), R(0), R(1), R(2)],
};
/// m16n8k16 f16 B (16 x 8), eqs. 160, 165.
pub const M16N8K16_F16_B: Fragment = Fragment {
    name: "B",
    dtype: "f16",
    row_letter: 'j',
    col_letter: 'k',
    row_bits: 4,
    col_bits: 3,
    element_bits: 16,
    byte: &[R(0)],
    register: &[R(3)],
    thread: [R(1), R(2), C(0), C(1), C(2)],
};
/// m16n8k16 f32 C and D (16 x 8), f32 accumulate.
pub const M16N8_F32_C: Fragment = Fragment {
    name: "C",
    dtype: "f32",
    row_letter: 'i',
    col_letter: 'k',
    row_bits: 4,
    col_bits: 3,
    element_bits: 32,
    byte: &[],
    register: &[C(0), R(3)],
    thread: [C(1), C(2), R(0), R(1), R(2)],
};
/// Sparse m16n8k16 f16 compressed A (16 x 8), eq. 164: column `c = 2 j' + J`, so
/// `c0 = J` and `c1 c2 = j' = j2 j3` of the dense matrix.
pub const M16N8K16_SPARSE_F16_A: Fragment = Fragment {
    name: "Asp",
    dtype: "f16",
    row_letter: 'i',
    col_letter: 'c',
    row_bits: 4,
    col_bits: 3,
    element_bits: 16,
    byte: &[C(0)],
    register: &[R(3)],
    thread: [C(1), C(2), R(0), R(1), R(2)],
};

// --- int8 (baseband note App. A; m16n8k32 is two copies of m8n8k16) -------------------------

/// m8n8k16 s8 A (8 x 16), baseband note eq. 39.
pub const M8N8K16_S8_A: Fragment = Fragment {
    name: "A",
    dtype: "int8",
    row_letter: 'i',
    col_letter: 'j',
    row_bits: 3,
    col_bits: 4,
    element_bits: 8,
    byte: &[C(0), C(1)],
    register: &[],
    thread: [C(2), C(3), R(0), R(1), R(2)],
};
/// m8n8k16 s8 B (16 x 8), baseband note eq. 40.
pub const M8N8K16_S8_B: Fragment = Fragment {
    name: "B",
    dtype: "int8",
    row_letter: 'j',
    col_letter: 'k',
    row_bits: 4,
    col_bits: 3,
    element_bits: 8,
    byte: &[R(0), R(1)],
    register: &[],
    thread: [R(2), R(3), C(0), C(1), C(2)],
};
/// m8n8k16 s32 C and D (8 x 8), baseband note eq. 41.
pub const M8N8K16_S32_C: Fragment = Fragment {
    name: "C",
    dtype: "int32",
    row_letter: 'i',
    col_letter: 'k',
    row_bits: 3,
    col_bits: 3,
    element_bits: 32,
    byte: &[],
    register: &[C(0)],
    thread: [C(1), C(2), R(0), R(1), R(2)],
};
/// m16n8k32 s8 A (16 x 32).
pub const M16N8K32_S8_A: Fragment = Fragment {
    name: "A",
    dtype: "int8",
    row_letter: 'i',
    col_letter: 'j',
    row_bits: 4,
    col_bits: 5,
    element_bits: 8,
    byte: &[C(0), C(1)],
    register: &[R(3), C(4)],
    thread: [C(2), C(3), R(0), R(1), R(2)],
};
/// m16n8k32 s8 B (32 x 8).
pub const M16N8K32_S8_B: Fragment = Fragment {
    name: "B",
    dtype: "int8",
    row_letter: 'j',
    col_letter: 'k',
    row_bits: 5,
    col_bits: 3,
    element_bits: 8,
    byte: &[R(0), R(1)],
    register: &[R(4)],
    thread: [R(2), R(3), C(0), C(1), C(2)],
};
/// m16n8k32 s32 C and D (16 x 8).
pub const M16N8K32_S32_C: Fragment = Fragment {
    name: "C",
    dtype: "int32",
    row_letter: 'i',
    col_letter: 'k',
    row_bits: 4,
    col_bits: 3,
    element_bits: 32,
    byte: &[],
    register: &[C(0), R(3)],
    thread: [C(1), C(2), R(0), R(1), R(2)],
};

/// Every fragment above, for table-wide checks.
pub const ALL_FRAGMENTS: [&Fragment; 13] = [
    &M16N8K8_F16_A,
    &M16N8K8_F16_B,
    &M16N8_F16_C,
    &M16N8K16_F16_A,
    &M16N8K16_F16_B,
    &M16N8_F32_C,
    &M16N8K16_SPARSE_F16_A,
    &M8N8K16_S8_A,
    &M8N8K16_S8_B,
    &M8N8K16_S32_C,
    &M16N8K32_S8_A,
    &M16N8K32_S8_B,
    &M16N8K32_S32_C,
];

// --- sparse metadata (FRB note eqs. 167, 171-173) --------------------------------------

/// Position of the 2-bit metadata field `E[i][j'][J]` in a thread's metadata register,
/// eq. 167: `b0 b1 b2 b3 <-> J j'0 j'1 i3` over 2-bit fields, `t2 t3 t4 <-> i0 i1 i2`.
/// Returns (lane within the quad-aligned group, i.e. lane with t0 t1 = 0, bit shift).
pub const fn sparse_metadata_slot(row: u32, group: u32, half: u32) -> (u32, u32) {
    let lane = (row & 7) << 2;
    let field = (half & 1) | ((group & 3) << 1) | (((row >> 3) & 1) << 3);
    (lane, 2 * field)
}

/// The metadata register of `lane` for sparsity pattern `e(row, group, half) -> 0..4`
/// (eq. 163: `Asp[i][j'][J] = A[i][4 j' + E[i][j'][J]]`). Every lane of a quad gets the same
/// word, so any selector `F` reads it.
pub fn sparse_metadata<E: Fn(u32, u32, u32) -> u32>(lane: u32, e: E) -> u32 {
    let mut word = 0;
    let mut field = 0;
    while field < 16 {
        let half = field & 1;
        let group = (field >> 1) & 3;
        let row = ((lane >> 2) & 7) | ((field >> 3) << 3);
        word |= (e(row, group, half) & 3) << (2 * field);
        field += 1;
    }
    word
}

/// Eqs. 171-173: `E^uni[i][j'][J][n] = 2 i_n + J` with `t0 t1 <-> n0 n1`. With selector
/// `F = n` the sparse MMA uses the metadata of an A containing `delta(i_n, j_1)`.
pub const fn universal_sparse_metadata(lane: u32) -> u32 {
    let n = lane & 3;
    let row_lo = (lane >> 2) & 7;
    let row_hi = row_lo | 8;
    let lo = if row_lo & (1 << n) != 0 { 0x0000_eeee } else { 0x0000_4444 };
    let hi = if row_hi & (1 << n) != 0 { 0xeeee_0000 } else { 0x4444_0000 };
    lo | hi
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;

    #[test]
    fn every_fragment_is_a_bijection_and_inverts() {
        for frag in ALL_FRAGMENTS {
            assert!(frag.is_bijection(), "{frag}");
            assert_eq!(32 * frag.registers() * frag.elements_per_register(), frag.rows() * frag.cols());
            let mut hit = std::vec![false; (frag.rows() * frag.cols()) as usize];
            for row in 0..frag.rows() {
                for col in 0..frag.cols() {
                    let at = frag.location(row, col);
                    assert!(at.lane < 32 && at.register < frag.registers());
                    assert!(at.element < frag.elements_per_register());
                    assert_eq!(frag.coordinates(at), (row, col), "{frag}");
                    let slot =
                        (frag.word_index(at) as u32 * frag.elements_per_register() + at.element) as usize;
                    assert!(!hit[slot]);
                    hit[slot] = true;
                }
            }
        }
    }

    #[test]
    fn notation_matches_the_seed() {
        assert_eq!(
            format!("{M16N8K16_F16_A}"),
            "[(16 x 16) f16 A_ij]  b0 <-> j0  r0 r1 <-> i3 j3  t0 t1 t2 t3 t4 <-> j1 j2 i0 i1 i2"
        );
        assert_eq!(
            format!("{M8N8K16_S8_B}"),
            "[(16 x 8) int8 B_jk]  b0 b1 <-> j0 j1  t0 t1 t2 t3 t4 <-> j2 j3 k0 k1 k2"
        );
        assert_eq!(
            format!("{M8N8K16_S32_C}"),
            "[(8 x 8) int32 C_ik]  r0 <-> k0  t0 t1 t2 t3 t4 <-> k1 k2 i0 i1 i2"
        );
    }

    /// PTX ISA's fragment formulas (groupID = lane / 4, threadID_in_group = lane % 4) for the
    /// shapes we use, written independently of the bit tables above.
    #[test]
    fn tables_agree_with_the_ptx_isa_formulas() {
        for lane in 0..32 {
            let (g, q) = (lane / 4, lane % 4);
            for reg in 0..4 {
                for e in 0..4 {
                    // m16n8k32 s8 A: row = g + 8 * (reg % 2), col = 4q + e + 16 * (reg / 2).
                    let at = Location { lane, register: reg, element: e };
                    assert_eq!(
                        M16N8K32_S8_A.coordinates(at),
                        (g + 8 * (reg % 2), 4 * q + e + 16 * (reg / 2))
                    );
                }
                // m16n8k32 s32 C: row = g + 8 * (reg / 2), col = 2q + reg % 2.
                let at = Location { lane, register: reg, element: 0 };
                assert_eq!(M16N8K32_S32_C.coordinates(at), (g + 8 * (reg / 2), 2 * q + reg % 2));
                assert_eq!(M16N8_F32_C.coordinates(at), (g + 8 * (reg / 2), 2 * q + reg % 2));
                for e in 0..2 {
                    // m16n8k16 f16 A: row = g + 8 * (reg % 2), col = 2q + e + 8 * (reg / 2).
                    let at = Location { lane, register: reg, element: e };
                    assert_eq!(
                        M16N8K16_F16_A.coordinates(at),
                        (g + 8 * (reg % 2), 2 * q + e + 8 * (reg / 2))
                    );
                }
            }
            for reg in 0..2 {
                for e in 0..4 {
                    // m16n8k32 s8 B: row = 4q + e + 16 * reg, col = g.
                    let at = Location { lane, register: reg, element: e };
                    assert_eq!(M16N8K32_S8_B.coordinates(at), (4 * q + e + 16 * reg, g));
                }
                for e in 0..2 {
                    let at = Location { lane, register: reg, element: e };
                    // m16n8k16 f16 B: row = 2q + e + 8 * reg, col = g.
                    assert_eq!(M16N8K16_F16_B.coordinates(at), (2 * q + e + 8 * reg, g));
                    // f16 C: row = g + 8 * reg, col = 2q + e.
                    assert_eq!(M16N8_F16_C.coordinates(at), (g + 8 * reg, 2 * q + e));
                    // m16n8k8 A: row = g + 8 * reg, col = 2q + e.
                    assert_eq!(M16N8K8_F16_A.coordinates(at), (g + 8 * reg, 2 * q + e));
                }
            }
            for e in 0..2 {
                let at = Location { lane, register: 0, element: e };
                assert_eq!(M16N8K8_F16_B.coordinates(at), (2 * q + e, g));
            }
        }
    }

    #[test]
    fn universal_metadata_is_the_general_metadata_of_eq_171() {
        for lane in 0..32 {
            let n = lane & 3;
            let general = sparse_metadata(lane, |row, _group, half| 2 * ((row >> n) & 1) + half);
            assert_eq!(universal_sparse_metadata(lane), general, "lane {lane}");
        }
    }

    #[test]
    fn metadata_slots_cover_each_field_once() {
        let mut seen = [[0u32; 32]; 32];
        for row in 0..16 {
            for group in 0..4 {
                for half in 0..2 {
                    let (lane, shift) = sparse_metadata_slot(row, group, half);
                    assert_eq!(lane % 4, 0);
                    seen[lane as usize][shift as usize] += 1;
                }
            }
        }
        for lane in (0..32).step_by(4) {
            for shift in (0..32).step_by(2) {
                assert_eq!(seen[lane][shift], 1);
            }
        }
    }
}
