//! The one table of Tensogram dtypes on the Rust side: each dtype and the numpy type string its
//! values have. Wire names (`Display`) and item sizes (`byte_width`) are upstream's.

use tensogram::Dtype;

/// Every Tensogram dtype and the numpy type string (native byte order) of its values; `None`
/// where numpy has no builtin type: bfloat16 (ml_dtypes provides it) and bitmask (bits).
const DTYPES: [(Dtype, Option<&str>); 15] = [
    (Dtype::Float16, Some("f2")),
    (Dtype::Bfloat16, None),
    (Dtype::Float32, Some("f4")),
    (Dtype::Float64, Some("f8")),
    (Dtype::Complex64, Some("c8")),
    (Dtype::Complex128, Some("c16")),
    (Dtype::Int8, Some("i1")),
    (Dtype::Int16, Some("i2")),
    (Dtype::Int32, Some("i4")),
    (Dtype::Int64, Some("i8")),
    (Dtype::Uint8, Some("u1")),
    (Dtype::Uint16, Some("u2")),
    (Dtype::Uint32, Some("u4")),
    (Dtype::Uint64, Some("u8")),
    (Dtype::Bitmask, None),
];

/// The dtype of a wire name (`"float32"`), or `None`.
pub fn parse(name: &str) -> Option<Dtype> {
    DTYPES.iter().map(|&(d, _)| d).find(|d| d.to_string() == name)
}

/// Every dtype's wire name, in the table's order.
pub fn names() -> impl ExactSizeIterator<Item = String> {
    DTYPES.iter().map(|(d, _)| d.to_string())
}

/// Bits one element of `dtype` takes (a bitmask element is one bit).
pub fn bits(dtype: Dtype) -> u64 {
    match dtype {
        Dtype::Bitmask => 1,
        d => 8 * d.byte_width() as u64,
    }
}

/// Bytes `count` elements of `dtype` take decoded (bitmasks: whole bytes of bits); `None` where
/// that overflows.
pub fn decoded_bytes(dtype: Dtype, count: u64) -> Option<u64> {
    Some(count.checked_mul(bits(dtype))?.div_ceil(8))
}

/// The dtypes numpy has a builtin type for, with its type string.
pub fn numpy_typestrs() -> impl Iterator<Item = (Dtype, &'static str)> {
    DTYPES.iter().filter_map(|&(d, t)| Some((d, t?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numpy_types_agree_with_upstream() {
        for (dtype, typestr) in DTYPES {
            assert_eq!(parse(&dtype.to_string()), Some(dtype));
            if let Some(t) = typestr {
                // numpy's type string ends with the item size in bytes.
                assert_eq!(t[1..].parse::<usize>().unwrap(), dtype.byte_width(), "{dtype}");
            }
        }
        assert_eq!(parse("float"), None);
        assert_eq!(numpy_typestrs().count(), 13);
        assert_eq!(names().count(), DTYPES.len());
        assert_eq!(decoded_bytes(Dtype::Bitmask, 65), Some(9));
        assert_eq!(decoded_bytes(Dtype::Bfloat16, 10), Some(20));
        assert_eq!(decoded_bytes(Dtype::Float64, u64::MAX / 4), None);
    }
}
