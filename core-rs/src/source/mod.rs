//! Where a file's messages are and what their frames hold: mapped, or walked by byte range.

pub mod mapped_file;
pub mod message;
pub mod remote_file;
pub mod remote_walk;
