//! One object's hyperslab decoded into a buffer: from its bytes, or from fetched payload ranges.

mod bounds;
pub mod fetch;
pub mod object;
pub mod selection;
mod whole;
