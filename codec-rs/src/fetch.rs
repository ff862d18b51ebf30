//! Reads of an object from byte ranges of its payload, for remote files: which ranges a read
//! needs, and the read from the fetched pieces. Only objects whose values sit at fixed byte
//! positions qualify (raw values, or whole-byte simple packing, with no compression, filter or
//! masks); any other object is fetched whole and read by `read::read_object`.

use std::borrow::Cow;

use tensogram::{ByteOrder, DataObjectDescriptor};

use crate::errors::{CoreError, CoreResult, Kind};
use crate::packing::Packed;
use crate::read::{check_selection, decode_groups, fill_groups, Group};
use crate::selection::{AxisSel, Plan};

/// Requests cost a round trip: ranges closer than this many bytes are fetched as one.
const MERGE_BYTES: u64 = 64 * 1024;

/// The byte ranges a read needs from a payload, and how to read from them.
pub struct PayloadRanges {
    plan: Plan,
    groups: Vec<Group>,
    /// Bytes a stored value takes.
    width: usize,
    packed: Option<Packed>,
    swap_unit: usize,
}

impl PayloadRanges {
    /// `None` when the object must be fetched whole: its encoding is not byte-addressable, or
    /// the ranges would cover more than half of its payload (`payload_len` bytes available).
    pub fn plan(desc: &DataObjectDescriptor, sel: &[AxisSel], payload_len: u64) -> CoreResult<Option<PayloadRanges>> {
        let itemsize = desc.dtype.byte_width();
        let has_masks = desc.masks.as_ref().is_some_and(|m| !m.is_empty());
        if desc.compression != "none" || desc.filter != "none" || has_masks || itemsize == 0 {
            return Ok(None);
        }
        let (width, packed) = match desc.encoding.as_str() {
            "none" => (itemsize, None),
            "simple_packing" => match Packed::of(desc, false) {
                Some(p) if p.value_bytes().is_some() => (p.value_bytes().unwrap_or(0), Some(p)),
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        let plan = check_selection(desc, sel)?;
        let groups = decode_groups(&plan.ranges, MERGE_BYTES / width as u64);
        let total: u64 = desc.shape.iter().product();
        let needed: u64 = groups.iter().map(|g| g.1).sum();
        if needed * 2 > total {
            return Ok(None);
        }
        if let Some(last) = groups.iter().map(|g| (g.0 + g.1) * width as u64).max() {
            if last > payload_len {
                return Err(CoreError::new(Kind::Format, "the payload is shorter than the shape needs"));
            }
        }
        let swap_unit = if packed.is_none() && desc.byte_order != ByteOrder::native() { desc.dtype.swap_unit_size() } else { 1 };
        Ok(Some(PayloadRanges { plan, groups, width, packed, swap_unit }))
    }

    /// `(start, length)` in bytes from the payload's start, one per piece to fetch.
    pub fn byte_ranges(&self) -> Vec<(u64, u64)> {
        let w = self.width as u64;
        self.groups.iter().map(|g| (g.0 * w, g.1 * w)).collect()
    }

    /// Reads the selection from `pieces` (the bytes of [`byte_ranges`], in order) into `out`.
    pub fn read(&self, pieces: &[&[u8]], out: &mut [u8]) -> CoreResult<()> {
        if pieces.len() != self.groups.len() || pieces.iter().zip(self.byte_ranges()).any(|(p, r)| p.len() as u64 != r.1) {
            return Err(CoreError::new(Kind::Value, "the fetched pieces do not match the byte ranges"));
        }
        let mut pieces = pieces.iter();
        let next_piece = |_, _| Ok(Cow::Borrowed(*pieces.next().expect("one piece per group")));
        match &self.packed {
            Some(packed) => fill_groups(&self.plan, &self.groups, self.width, 8, out, next_piece, |src, dst| packed.unpack(src, dst))?,
            None => {
                fill_groups(&self.plan, &self.groups, self.width, self.width, out, next_piece, |src, dst| dst.copy_from_slice(src))?;
                if self.swap_unit > 1 {
                    out.chunks_exact_mut(self.swap_unit).for_each(|c| c.reverse());
                }
            }
        }
        Ok(())
    }
}
