//! Moving matrices into and out of warp register images through the layout tables of
//! `radio_kernels_gpu::layout`. An image is `[lane][register]` 32-bit words for one warp.
use radio_kernels_gpu::layout::{Fragment, Location};

/// Packs a row-major `rows x cols` matrix of raw element bits (the low `element_bits` of
/// each value are used) into a 32-lane register image.
pub fn pack(fragment: &Fragment, matrix: &[u32]) -> Vec<u32> {
    assert_eq!(matrix.len(), (fragment.rows() * fragment.cols()) as usize, "matrix size for {fragment}");
    let mask = element_mask(fragment);
    let mut image = vec![0u32; (32 * fragment.registers()) as usize];
    for row in 0..fragment.rows() {
        for col in 0..fragment.cols() {
            let at = fragment.location(row, col);
            let value = matrix[(row * fragment.cols() + col) as usize] & mask;
            image[fragment.word_index(at)] |= value << fragment.shift(at);
        }
    }
    image
}

/// Unpacks a 32-lane register image into a row-major matrix of raw element bits.
pub fn unpack(fragment: &Fragment, image: &[u32]) -> Vec<u32> {
    assert_eq!(image.len(), (32 * fragment.registers()) as usize, "image size for {fragment}");
    let mask = element_mask(fragment);
    let mut matrix = vec![0u32; (fragment.rows() * fragment.cols()) as usize];
    for lane in 0..32 {
        for register in 0..fragment.registers() {
            for element in 0..fragment.elements_per_register() {
                let at = Location { lane, register, element };
                let (row, col) = fragment.coordinates(at);
                let word = image[fragment.word_index(at)];
                matrix[(row * fragment.cols() + col) as usize] = (word >> fragment.shift(at)) & mask;
            }
        }
    }
    matrix
}

/// Where an image slot (lane, register, element) of a fragment sits in a flat
/// `[lane][registers][elements]` array.
fn slot(fragment: &Fragment, at: Location) -> usize {
    fragment.word_index(at) * fragment.elements_per_register() as usize + at.element as usize
}

/// `[lane][registers][elements]` values (one per element, any type) of a row-major matrix
/// under `fragment`: the unpacked form of [`pack`], for models that compute on the slots.
pub fn to_slots<T: Copy + Default>(fragment: &Fragment, matrix: &[T]) -> Vec<T> {
    let mut out = vec![T::default(); matrix.len()];
    for row in 0..fragment.rows() {
        for col in 0..fragment.cols() {
            out[slot(fragment, fragment.location(row, col))] = matrix[(row * fragment.cols() + col) as usize];
        }
    }
    out
}

/// The row-major matrix held in `[lane][registers][elements]` slots under `fragment`.
pub fn from_slots<T: Copy + Default>(fragment: &Fragment, slots: &[T]) -> Vec<T> {
    let mut out = vec![T::default(); slots.len()];
    for row in 0..fragment.rows() {
        for col in 0..fragment.cols() {
            out[(row * fragment.cols() + col) as usize] = slots[slot(fragment, fragment.location(row, col))];
        }
    }
    out
}

fn element_mask(fragment: &Fragment) -> u32 {
    if fragment.element_bits == 32 {
        u32::MAX
    } else {
        (1 << fragment.element_bits) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use radio_kernels_gpu::layout::ALL_FRAGMENTS;

    #[test]
    fn pack_then_unpack_is_identity_for_every_fragment() {
        for fragment in ALL_FRAGMENTS {
            let mask = element_mask(fragment);
            let matrix: Vec<u32> = (0..fragment.rows() * fragment.cols())
                .map(|n| n.wrapping_mul(0x9e37_79b9).rotate_left(7) & mask)
                .collect();
            assert_eq!(unpack(fragment, &pack(fragment, &matrix)), matrix, "{fragment}");
        }
    }
}
