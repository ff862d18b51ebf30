//! Facts of the byte format: the frame rule, CBOR items, dtypes, a descriptor's codec parameters.

pub mod cbor;
pub mod dtypes;
pub mod foreign;
pub mod frames;
pub mod params;
