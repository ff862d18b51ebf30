//! Rules about single frames that the `tensogram` crate leaves to its callers.

use tensogram::wire::{FrameFlags, FRAME_COMMON_FOOTER_SIZE};

/// The inline hash of a data-object frame, if it was written with one: it stands for the
/// frame's descriptor, payload and masks, so equal hashes identify equal stored objects
/// without reading a payload.
pub fn inline_hash(frame: &[u8]) -> Option<u64> {
    let flags = u16::from_be_bytes(frame.get(6..8)?.try_into().ok()?);
    if flags & FrameFlags::HASH_PRESENT == 0 {
        return None;
    }
    let slot = frame.len().checked_sub(FRAME_COMMON_FOOTER_SIZE)?;
    Some(u64::from_be_bytes(frame.get(slot..slot + 8)?.try_into().ok()?))
}
