//! Payload encodings run here rather than upstream (simple packing, szip) and messages made with them.

pub mod encode;
pub mod packing;
pub mod szip;
