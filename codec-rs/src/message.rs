//! One message's frames, parsed once: descriptors, metadata and where each object's bytes are.

use std::ops::Range;
use std::sync::OnceLock;

use tensogram::wire::FrameHeader;
use tensogram::{DataObjectDescriptor, GlobalMetadata};

use crate::errors::{CoreError, CoreResult};
use crate::packing::Packed;

/// How an object's payload can serve a partial read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Raw values in the file: copied straight from the message bytes.
    Raw,
    /// `decode_range` decodes only the requested elements (simple packing, szip, blosc2).
    Ranged,
    /// The codec cannot decode a range (zstd, lz4, zfp, sz3, shuffle, masks): decode it whole.
    Whole,
}

/// One data object of a parsed message. Byte ranges are relative to the message start.
#[derive(Debug)]
pub struct ObjectEntry {
    pub descriptor: DataObjectDescriptor,
    pub frame: Range<usize>,
    pub payload: Range<usize>,
    pub access: Access,
    /// Set when whole-object reads can unpack straight into the output (see `packing.rs`).
    pub packed: Option<Packed>,
    /// The descriptor used for range decodes of szip objects, with RSI offsets recomputed by
    /// the decoder (see `szip.rs`); filled on the first partial read.
    pub szip_ranged: OnceLock<CoreResult<DataObjectDescriptor>>,
    /// Result of the hash check (`false`: no hash stored), done at most once per object.
    pub hash_checked: OnceLock<CoreResult<bool>>,
}

impl ObjectEntry {
    pub fn num_elements(&self) -> u64 {
        self.descriptor.shape.iter().product()
    }
}

#[derive(Debug)]
pub struct ParsedMessage {
    pub metadata: GlobalMetadata,
    pub objects: Vec<ObjectEntry>,
}

fn access_of(desc: &DataObjectDescriptor, has_masks: bool) -> Access {
    if has_masks || desc.filter != "none" {
        return Access::Whole;
    }
    match (desc.encoding.as_str(), desc.compression.as_str()) {
        ("none", "none") => Access::Raw,
        ("none" | "simple_packing", "none" | "szip" | "blosc2") => Access::Ranged,
        _ => Access::Whole,
    }
}

/// Offset of `part` inside `whole`, both slices of the same buffer.
fn offset_in(whole: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}

impl ParsedMessage {
    /// Parses every frame of `bytes` (one whole message) without touching payload bytes.
    pub fn parse(bytes: &[u8]) -> CoreResult<ParsedMessage> {
        let decoded = tensogram::framing::decode_message(bytes)
            .map_err(|e| CoreError::from_tensogram(&e, "cannot parse message frames"))?;
        let mut objects = Vec::with_capacity(decoded.objects.len());
        for (i, (desc, payload, masks, frame_offset)) in decoded.objects.into_iter().enumerate() {
            let header = FrameHeader::read_from(&bytes[frame_offset..])
                .map_err(|e| CoreError::from_tensogram(&e, &format!("object {i}")))?;
            let frame_end = frame_offset + header.total_length as usize;
            let payload_start = offset_in(bytes, payload);
            let has_masks = desc.masks.as_ref().is_some_and(|m| !m.is_empty()) || !masks.is_empty();
            objects.push(ObjectEntry {
                access: access_of(&desc, has_masks),
                packed: Packed::of(&desc, has_masks),
                descriptor: desc,
                frame: frame_offset..frame_end,
                payload: payload_start..payload_start + payload.len(),
                szip_ranged: OnceLock::new(),
                hash_checked: OnceLock::new(),
            });
        }
        Ok(ParsedMessage { metadata: decoded.global_metadata, objects })
    }
}

/// An integer parameter of the descriptor (`None` if missing or not an integer).
pub fn int_param(desc: &DataObjectDescriptor, key: &str) -> Option<i64> {
    match desc.params.get(key)? {
        ciborium::Value::Integer(i) => i64::try_from(i128::from(*i)).ok(),
        _ => None,
    }
}

/// A float parameter of the descriptor (integers are accepted too).
pub fn float_param(desc: &DataObjectDescriptor, key: &str) -> Option<f64> {
    match desc.params.get(key)? {
        ciborium::Value::Float(f) => Some(*f),
        ciborium::Value::Integer(i) => Some(i128::from(*i) as f64),
        _ => None,
    }
}
