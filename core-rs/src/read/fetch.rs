//! Reads of an object from byte ranges of its payload, for remote files: which ranges a read
//! needs, and the read from the fetched pieces. Objects qualify when their values sit at fixed
//! byte positions (raw values, or whole-byte simple packing; no filter or masks), or when they
//! are whole-byte simple packing + szip with offsets checked when we wrote them (`szip.rs`): a
//! piece is then the RSI blocks that hold the values. Any other object is fetched whole and
//! read by `object::read_object`.

use std::borrow::Cow;

use tensogram::{ByteOrder, DataObjectDescriptor};

use crate::errors::{CoreError, CoreResult, Kind};
use crate::encoding::packing::{Packed, Unpacked};
use crate::read::object::{check_selection, decode_groups, fill_groups, through_float64, Group};
use crate::read::selection::{AxisSel, Plan};
use crate::encoding::szip;

/// Requests cost a round trip: ranges closer than this many bytes are fetched as one.
const MERGE_BYTES: u64 = 64 * 1024;

/// Where the RSI blocks of an szip payload start (bits), and the values each block holds.
struct Blocks {
    offsets: Vec<u64>,
    values: u64,
}

/// The byte ranges a read needs from a payload, and how to read from them.
pub struct PayloadRanges {
    plan: Plan,
    groups: Vec<Group>,
    /// Bytes a stored value takes (after szip decompression).
    width: usize,
    packed: Option<Packed>,
    blocks: Option<Blocks>,
    payload_len: u64,
    swap_unit: usize,
}

impl PayloadRanges {
    /// `None` when the object must be fetched whole: its encoding does not qualify, or the
    /// ranges would cover more than half of its payload (`payload_len` bytes stored).
    pub fn plan(desc: &DataObjectDescriptor, sel: &[AxisSel], payload_len: u64) -> CoreResult<Option<PayloadRanges>> {
        let itemsize = desc.dtype.byte_width();
        let has_masks = desc.masks.as_ref().is_some_and(|m| !m.is_empty());
        if desc.filter != "none" || has_masks || itemsize == 0 {
            return Ok(None);
        }
        let packed = match desc.encoding.as_str() {
            "simple_packing" => match Packed::of(desc, false) {
                Some(p) if p.value_bytes().is_some() => Some(p),
                _ => return Ok(None),
            },
            "none" => None,
            _ => return Ok(None),
        };
        let width = packed.as_ref().and_then(Packed::value_bytes).unwrap_or(itemsize);
        let blocks = match (desc.compression.as_str(), &packed) {
            ("none", _) => None,
            ("szip", Some(p)) if szip::offsets_verified(desc, payload_len as usize) => Some(Blocks {
                offsets: szip::stored_offsets(desc).unwrap_or_default(),
                values: p.rsi_values(),
            }),
            _ => return Ok(None),
        };
        let plan = check_selection(desc, sel)?;
        // One request per group: a block's values come together anyway, and blocks closer
        // than a request's worth of bytes (short RSIs: the rows of a window) are fetched at once.
        let granule = (MERGE_BYTES / width as u64).max(blocks.as_ref().map_or(0, |b| b.values));
        let groups = decode_groups(&plan.ranges, granule);
        let swap_unit = if packed.is_none() && desc.byte_order != ByteOrder::native() { desc.dtype.swap_unit_size() } else { 1 };
        let ranges = PayloadRanges { plan, groups, width, packed, blocks, payload_len, swap_unit };
        let fetched: u64 = ranges.byte_ranges()?.iter().map(|r| r.1).sum();
        Ok((fetched * 2 <= payload_len).then_some(ranges))
    }

    /// `(start, length)` in bytes from the payload's start, one per piece to fetch.
    pub fn byte_ranges(&self) -> CoreResult<Vec<(u64, u64)>> {
        self.groups.iter().map(|g| self.piece(g).map(|(start, end)| (start, end - start))).collect()
    }

    /// The bytes `[start, end)` of the payload that group `g` needs.
    fn piece(&self, (first, count, _): &Group) -> CoreResult<(u64, u64)> {
        let short = || CoreError::new(Kind::Format, "the payload is shorter than the shape needs");
        let (start, end) = match &self.blocks {
            None => (first * self.width as u64, (first + count) * self.width as u64),
            Some(b) => {
                let (b0, b1) = ((first / b.values) as usize, ((first + count - 1) / b.values) as usize);
                let start = *b.offsets.get(b0).ok_or_else(short)? / 8;
                let end = b.offsets.get(b1 + 1).map_or(self.payload_len, |bit| bit.div_ceil(8));
                (start, end)
            }
        };
        if end > self.payload_len || start > end {
            return Err(short());
        }
        Ok((start, end))
    }

    /// Reads the selection from `pieces` (the bytes of [`byte_ranges`], in order) into `out`, as
    /// `to` where the object is packed, else as stored (`to` F32: float64 values rounded).
    pub fn read(&self, pieces: &[&[u8]], out: &mut [u8], to: Unpacked) -> CoreResult<()> {
        if to == Unpacked::F32 && self.packed.is_none() {
            return through_float64(out, |wide| self.read(pieces, wide, Unpacked::F64));
        }
        let lengths = self.byte_ranges()?;
        if pieces.len() != lengths.len() || pieces.iter().zip(&lengths).any(|(p, r)| p.len() as u64 != r.1) {
            return Err(CoreError::new(Kind::Value, "the fetched pieces do not match the byte ranges"));
        }
        let mut pieces = pieces.iter();
        let mut next_piece = |first: u64, count: u64| -> CoreResult<Cow<[u8]>> {
            let piece: &[u8] = pieces.next().expect("one piece per group");
            match (&self.blocks, &self.packed) {
                (Some(b), Some(packed)) => {
                    // The piece starts at the byte holding the group's first block: offsets
                    // and values count from there.
                    let b0 = (first / b.values) as usize;
                    let base = b.offsets[b0] / 8 * 8;
                    let offsets: Vec<u64> = b.offsets[b0..].iter().map(|bit| bit - base).collect();
                    packed.packed_range(piece, &offsets, first - b0 as u64 * b.values, count)
                }
                _ => Ok(Cow::Borrowed(piece)),
            }
        };
        match &self.packed {
            Some(packed) => {
                fill_groups(&self.plan, &self.groups, self.width, to.width(), out, &mut next_piece, |src, dst| packed.unpack(src, dst, to))?
            }
            None => {
                fill_groups(&self.plan, &self.groups, self.width, self.width, out, &mut next_piece, |src, dst| dst.copy_from_slice(src))?;
                if self.swap_unit > 1 {
                    out.chunks_exact_mut(self.swap_unit).for_each(|c| c.reverse());
                }
            }
        }
        Ok(())
    }
}
