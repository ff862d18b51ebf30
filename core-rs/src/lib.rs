//! The PyO3-free core of tgm-xarray: format rules on top of the `tensogram` crate that the
//! Python binding (`codec-rs`) exposes. Nothing here needs an interpreter: `cargo test -p
//! tgm-core` runs without Python.

pub mod cbor;
pub mod frame;
pub mod table;
pub mod remote_walk;
