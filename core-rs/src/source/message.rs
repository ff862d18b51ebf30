//! One message's frames, parsed once: descriptors, metadata and where each object's bytes are.

use std::ops::Range;
use std::sync::OnceLock;

use tensogram::{DataObjectDescriptor, GlobalMetadata};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::wire::params::int_param;
use crate::errors::{CoreError, CoreResult};
use crate::encoding::packing::Packed;
use crate::wire::frames::inline_hash;

pub mod walk;

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
    /// Whether the stored szip RSI offsets were checked against the decoder when the message was
    /// encoded (see `szip.rs`): range decodes then use them as they are.
    pub szip_offsets_verified: bool,
    /// The descriptor used for range decodes of other szip objects, with RSI offsets recomputed
    /// by the decoder; filled on the first partial read.
    pub szip_ranged: OnceLock<CoreResult<DataObjectDescriptor>>,
    /// Result of the hash check (`false`: no hash stored), done at most once per object.
    pub hash_checked: OnceLock<CoreResult<bool>>,
}

impl ObjectEntry {
    /// An object whose frame and payload sit at these byte ranges of the buffer it is read from.
    pub fn new(descriptor: DataObjectDescriptor, frame: Range<usize>, payload: Range<usize>, has_masks: bool) -> Self {
        ObjectEntry {
            access: access_of(&descriptor, has_masks),
            packed: Packed::of(&descriptor, has_masks),
            szip_offsets_verified: descriptor.compression == "szip"
                && crate::encoding::szip::offsets_verified(&descriptor, payload.len()),
            descriptor,
            frame,
            payload,
            szip_ranged: OnceLock::new(),
            hash_checked: OnceLock::new(),
        }
    }

    /// Parses the data-object frame that fills `frame` (a remote read fetches just the frame).
    pub fn from_frame(frame: &[u8]) -> CoreResult<Self> {
        if let Some(o) = walk::frame(frame) {
            return Ok(ObjectEntry::new(o.descriptor, o.frame, o.payload, false));
        }
        let (desc, payload, masks, _) = tensogram::framing::decode_data_object_frame(frame)
            .map_err(|e| CoreError::from_tensogram(&e, "cannot parse the object frame"))?;
        let has_masks = has_masks(&desc, masks);
        let start = offset_in(frame, payload);
        Ok(ObjectEntry::new(desc, 0..frame.len(), start..start + payload.len(), has_masks))
    }

    /// The object's [`fingerprint`], its frame found in `bytes` (the message's).
    pub fn fingerprint(&self, bytes: &[u8]) -> u64 {
        let frame = &bytes[self.frame.clone()];
        match inline_hash(frame) {
            Some(hash) => fingerprint(&self.descriptor, Stored::FrameHash(hash)),
            None => fingerprint(&self.descriptor, Stored::Frame(frame)),
        }
    }

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
    let whole_bytes = || int_param(desc, "sp_bits_per_value").is_some_and(|b| b % 8 == 0);
    match (desc.encoding.as_str(), desc.compression.as_str()) {
        ("none", "none") => Access::Raw,
        // Upstream's range decode of blosc2 reads whole blosc2 items (the packed value's bytes):
        // a stream of sub-byte values that ends inside an item fails at its end.
        ("simple_packing", "blosc2") if !whole_bytes() => Access::Whole,
        ("none" | "simple_packing", "none" | "szip" | "blosc2") => Access::Ranged,
        _ => Access::Whole,
    }
}

fn has_masks(desc: &DataObjectDescriptor, mask_region: &[u8]) -> bool {
    desc.masks.as_ref().is_some_and(|m| !m.is_empty()) || !mask_region.is_empty()
}

/// Offset of `part` inside `whole`, both slices of the same buffer.
fn offset_in(whole: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}

impl ParsedMessage {
    /// Parses a buffer that must hold one message and nothing else (a zarr chunk, a message
    /// given whole): a second message after it is an error, not ignored.
    pub fn parse_single(buf: &[u8]) -> CoreResult<ParsedMessage> {
        if !crate::wire::foreign::starts_as_tensogram(buf) {
            return Err(crate::wire::foreign::not_tensogram("message", buf));
        }
        let length = crate::wire::frames::message_length(buf)
            .map_err(|e| CoreError::format(format!("the buffer of {} bytes is {}", buf.len(), e.message)))?;
        if length != buf.len() {
            return Err(CoreError::format(format!(
                "the buffer holds more than one Tensogram message, or bytes after one (the first ends at byte {length} of {})",
                buf.len()
            )));
        }
        ParsedMessage::parse(buf)
    }

    /// Parses every frame of `bytes` (one whole message) without touching payload bytes.
    pub fn parse(bytes: &[u8]) -> CoreResult<ParsedMessage> {
        if let Some((metadata, walked)) = walk::walk(bytes) {
            let objects = walked
                .into_iter()
                .map(|o| ObjectEntry::new(o.descriptor, o.frame, o.payload, false))
                .collect();
            return Ok(ParsedMessage { metadata, objects });
        }
        let decoded = tensogram::framing::decode_message(bytes)
            .map_err(|e| CoreError::from_tensogram(&e, "cannot parse message frames"))?;
        let mut objects = Vec::with_capacity(decoded.objects.len());
        for (i, (desc, payload, masks, frame_offset)) in decoded.objects.into_iter().enumerate() {
            let frame = crate::wire::frames::frame_range(bytes, frame_offset).map_err(|e| e.context(&format!("object {i}")))?;
            let payload_start = offset_in(bytes, payload);
            let has_masks = has_masks(&desc, masks);
            objects.push(ObjectEntry::new(
                desc,
                frame,
                payload_start..payload_start + payload.len(),
                has_masks,
            ));
        }
        Ok(ParsedMessage { metadata: decoded.global_metadata, objects })
    }
}

/// What a fingerprint identifies an object's stored bytes by.
pub enum Stored<'a> {
    /// The xxh3 the frame carries (over its descriptor, payload and masks).
    FrameHash(u64),
    /// The frame itself (descriptor, payload and masks), hashed here.
    Frame(&'a [u8]),
}

/// The one definition of "the same stored bytes": an object's 64-bit fingerprint, equal for
/// objects stored identically (`FileHandle.fingerprint`, the table's `fingerprints`, remote
/// files, the index's records). The frame's inline hash stands for the bytes when the frame
/// has one (a reader then needs no payload to fingerprint it), else the whole frame is hashed:
/// its descriptor too (byte order, packing parameters, masks), which give the same payload
/// other values.
pub fn fingerprint(desc: &DataObjectDescriptor, stored: Stored<'_>) -> u64 {
    Summary::of(desc).fingerprint(stored)
}

/// What a fingerprint says of a descriptor next to the stored bytes, made once for every
/// object of one kind (a table's rows share a few).
pub struct Summary(String);

impl Summary {
    pub fn of(desc: &DataObjectDescriptor) -> Self {
        Summary(format!("{}:{:?}:{}:{}:{}", desc.dtype, desc.shape, desc.encoding, desc.filter, desc.compression))
    }

    /// [`fingerprint`] of an object of this summary.
    pub fn fingerprint(&self, stored: Stored<'_>) -> u64 {
        let (kind, hash): (&[u8], u64) = match stored {
            Stored::FrameHash(hash) => (b":frame-xxh3:", hash),
            Stored::Frame(frame) => (b":xxh3:", xxh3_64(frame)),
        };
        let mut hasher = Xxh3::new();
        hasher.update(self.0.as_bytes());
        hasher.update(kind);
        hasher.update(&hash.to_le_bytes());
        hasher.digest()
    }
}
