//! Messages of the common layout read here (their frames found by `wire::frames`'s walk) rather
//! than by `tensogram::framing::decode_message` (and data-object frames read on their own rather
//! than by `decode_data_object_frame`), for one cost: upstream deserialises a descriptor through serde's `flatten`, which buffers
//! every parameter, and the `szip_block_offsets` of an szip object (one per RSI block: 508 in a
//! 361 x 720 zarr chunk at 512-value blocks) then cost ~110 ns each, ~57 us a message: a
//! quarter of the time of a 1/16 box of such a chunk. Here the walker reads the offsets and
//! upstream parses the rest of the descriptor.
//!
//! Every other check upstream makes is made here too, with its own functions where it has
//! public ones. What this walk does not take (streaming messages, preceder frames, the CBOR
//! descriptor before the payload, NaN/Inf masks) or finds fault with, it leaves to upstream:
//! `decode_message`'s result, or its error, is then the answer.

use std::ops::Range;

use ciborium::Value;
use tensogram::metadata::{cbor_to_global_metadata, cbor_to_hash_frame, cbor_to_index, cbor_to_object_descriptor};
use tensogram::wire::{DataObjectFlags, FrameHeader, FrameType, Preamble, DATA_OBJECT_FOOTER_SIZE, FRAME_HEADER_SIZE};
use tensogram::{DataObjectDescriptor, GlobalMetadata};

use crate::wire::cbor::{push_head, Head, Walker};
use crate::errors::{CoreError, CoreResult};
use crate::encoding::szip::OFFSETS_KEY;
use crate::wire::frames::{self, Frame};

/// One data object of a walked message; ranges in the message.
pub struct WalkedObject {
    pub descriptor: DataObjectDescriptor,
    pub frame: Range<usize>,
    pub payload: Range<usize>,
}

/// The frames of a message of the common layout (`frames::message_frames`), split by kind.
pub struct Layout {
    /// Each header and footer frame (metadata, index, hash).
    pub others: Vec<Frame>,
    /// Each data-object frame.
    pub objects: Vec<Frame>,
}

impl Layout {
    /// The body of the message's last metadata frame (a footer's wins over a header's).
    pub fn metadata<'a>(&self, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let frame = self
            .others
            .iter()
            .rev()
            .find(|f| matches!(f.header.frame_type, FrameType::HeaderMetadata | FrameType::FooterMetadata))?;
        Some(&bytes[frame.body()])
    }
}

/// The frames of `bytes` (one whole message); `None` when the message is not of the common
/// layout (streaming, preceder frames) or its frames are damaged: upstream's `decode_message`
/// then reads it, or says what is wrong.
pub fn layout(bytes: &[u8]) -> Option<Layout> {
    // Streaming messages (total length 0) end where the buffer does: upstream's to walk.
    if Preamble::read_from(bytes).ok()?.total_length == 0 {
        return None;
    }
    let mut layout = Layout { others: Vec::new(), objects: Vec::new() };
    for frame in frames::message_frames(bytes).ok()? {
        match frame.header.frame_type {
            FrameType::PrecederMetadata => return None,
            FrameType::NTensorFrame => layout.objects.push(frame),
            _ => layout.others.push(frame),
        }
    }
    Some(layout)
}

/// The message's metadata and objects, as `decode_message` would give them; `None` when the
/// message is not of the common layout or upstream would refuse it.
pub fn walk(bytes: &[u8]) -> Option<(GlobalMetadata, Vec<WalkedObject>)> {
    let layout = layout(bytes)?;
    let mut metadata = None;
    for frame in &layout.others {
        let body = &bytes[frame.body()];
        match frame.header.frame_type {
            FrameType::HeaderMetadata | FrameType::FooterMetadata => metadata = Some(cbor_to_global_metadata(body).ok()?),
            FrameType::HeaderIndex | FrameType::FooterIndex => drop(cbor_to_index(body).ok()?),
            _ => drop(cbor_to_hash_frame(body).ok()?),
        }
    }
    let objects = layout
        .objects
        .iter()
        .map(|f| object(&bytes[f.range.clone()], &f.header, f.range.start))
        .collect::<Option<Vec<_>>>()?;
    let mut metadata: GlobalMetadata = metadata?;
    if metadata.base.len() > objects.len() {
        return None;
    }
    metadata.base.resize_with(objects.len(), Default::default);
    Some((metadata, objects))
}

/// A data-object frame read on its own (`frame` holds exactly the frame: a remote read, a
/// virtual reference's chunk), as `decode_data_object_frame` reads it; ranges in `frame`.
/// `None` where the message walk would decline it, or the frame is not exactly `frame`.
pub fn frame(frame: &[u8]) -> Option<WalkedObject> {
    let whole = frames::whole_frame(frame).ok()?;
    object(frame, &whole.header, 0)
}

/// A data-object frame (`frame`, at `pos` in the message) with its descriptor after the
/// payload and no masks.
fn object(frame: &[u8], header: &FrameHeader, pos: usize) -> Option<WalkedObject> {
    if header.flags & DataObjectFlags::CBOR_AFTER_PAYLOAD == 0 {
        return None;
    }
    let (cbor, payload) = locate(frame, header).ok()?;
    let descriptor = descriptor(&frame[cbor])?;
    if descriptor.masks.is_some() {
        return None; // upstream splits the mask region off the payload
    }
    Some(WalkedObject {
        descriptor,
        frame: pos..pos + frame.len(),
        payload: pos + payload.start..pos + payload.end,
    })
}

/// Where the data-object frame that is all of `frame` keeps its descriptor and payload:
/// `(descriptor CBOR, payload)`, ranges in the frame. Mirrors
/// `tensogram::framing::decode_data_object_frame`, which checks it whenever a descriptor is new.
pub(crate) fn locate(frame: &[u8], header: &FrameHeader) -> CoreResult<(Range<usize>, Range<usize>)> {
    let cbor_offset = frames::object_footer(header, frame)?.cbor_offset;
    let footer = frame.len() - DATA_OBJECT_FOOTER_SIZE;
    let region = frame.get(cbor_offset..footer).ok_or_else(|| CoreError::format(format!(
        "the descriptor offset {cbor_offset} lies past the footer of the {}-byte data-object frame", frame.len()
    )))?;
    if header.flags & DataObjectFlags::CBOR_AFTER_PAYLOAD != 0 {
        Ok((cbor_offset..footer, FRAME_HEADER_SIZE..cbor_offset))
    } else {
        let item = Walker::new(region).item().map_err(|e| e.context("bad object descriptor"))?;
        let cbor_end = cbor_offset + item.len();
        Ok((cbor_offset..cbor_end, cbor_end..footer))
    }
}

/// The payload at the start of `region` (a data-object frame's bytes between its descriptor and
/// footer, or its header and descriptor): all of it, or up to the first of the NaN/Inf masks
/// the descriptor places after it, checked as `decode_data_object_frame` checks them (its rule
/// is not public). For frames read by their ends, whose bytes the crate never sees whole.
pub fn payload_in(region: Range<u64>, desc: &DataObjectDescriptor) -> CoreResult<Range<u64>> {
    let Some(masks) = &desc.masks else { return Ok(region) };
    let length = region.end - region.start;
    let mut end = length;
    for (mask, kind) in [(&masks.nan, "nan"), (&masks.pos_inf, "inf+"), (&masks.neg_inf, "inf-")] {
        if let Some(mask) = mask {
            if mask.offset.checked_add(mask.length).is_none_or(|e| e > length) {
                return Err(CoreError::format(format!("mask_{kind}.offset + length exceeds the payload region ({length} bytes)")));
            }
            end = end.min(mask.offset);
        }
    }
    Ok(region.start..region.start + end)
}

/// A descriptor parsed as `cbor_to_object_descriptor` parses it (the same descriptor; upstream's
/// error, as a format error), with its `szip_block_offsets` (a definite-length array of unsigned
/// integers, given once) read by the walker and the rest parsed by upstream. Any other shape of the offsets,
/// and any descriptor upstream refuses, is parsed by upstream whole.
pub fn parse_descriptor(cbor: &[u8]) -> CoreResult<DataObjectDescriptor> {
    if let Some((rest, offsets)) = split_offsets(cbor) {
        if let Ok(mut descriptor) = cbor_to_object_descriptor(&rest) {
            let values = offsets.into_iter().map(|o| Value::Integer(o.into())).collect();
            descriptor.params.insert(OFFSETS_KEY.to_string(), Value::Array(values));
            return Ok(descriptor);
        }
    }
    cbor_to_object_descriptor(cbor).map_err(|e| CoreError::format(format!("bad object descriptor: {e}")))
}

/// `parse_descriptor`, `None` where upstream refuses the descriptor.
pub fn descriptor(cbor: &[u8]) -> Option<DataObjectDescriptor> {
    parse_descriptor(cbor).ok()
}

/// `(the descriptor map without its offsets entry, the offsets)`, when the map is of definite
/// length and holds one offsets entry of unsigned integers.
pub(crate) fn split_offsets(cbor: &[u8]) -> Option<(Vec<u8>, Vec<u64>)> {
    let mut w = Walker::new(cbor);
    let Ok(Head::Map(Some(entries))) = w.head() else { return None };
    let mut kept = Vec::with_capacity(cbor.len());
    let mut offsets = None;
    for _ in 0..entries {
        let key = w.pos;
        if w.text().ok()? == Some(OFFSETS_KEY) {
            if offsets.is_some() {
                return None; // which one counts is upstream's rule
            }
            offsets = Some(uints(&mut w)?);
        } else {
            w.pos = key;
            w.item().ok()?;
            w.item().ok()?;
            kept.extend_from_slice(&cbor[key..w.pos]);
        }
    }
    let offsets = offsets?;
    let mut rest = Vec::with_capacity(kept.len() + 9);
    push_head(&mut rest, 5, entries - 1);
    rest.extend_from_slice(&kept);
    Some((rest, offsets))
}

/// A definite-length array of unsigned integers.
fn uints(w: &mut Walker<'_>) -> Option<Vec<u64>> {
    let Ok(Head::Array(Some(n))) = w.head() else { return None };
    // Each item takes a byte at least: a hostile length cannot reserve more than the CBOR holds.
    let mut values = Vec::with_capacity(usize::try_from(n).ok()?.min(w.buf.len() - w.pos));
    for _ in 0..n {
        values.push(w.uint().ok()??);
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use ciborium::Value;
    use tensogram::metadata::cbor_to_object_descriptor;

    use super::*;
    use crate::wire::cbor::{decode, encode};

    /// Every `.tgm` file of the golden fixtures (one per option-table row) and the shared ones.
    fn fixture_files() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dirs = ["tests/golden", "../shared/fixtures/real", "../shared/fixtures/upstream/golden",
            "../shared/fixtures/upstream/remote-parity"];
        let mut files: Vec<PathBuf> = dirs
            .iter()
            .filter_map(|d| std::fs::read_dir(root.join(d)).ok())
            .flatten()
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "tgm"))
            .collect();
        files.sort();
        files
    }

    /// Whether the walk gives what `decode_message` gives: equal metadata, descriptors (their
    /// `Debug` forms: every field and parameter), frames and payloads. `false`: it declined.
    fn walk_agrees(bytes: &[u8]) -> bool {
        let upstream = tensogram::framing::decode_message(bytes);
        let Some((metadata, objects)) = walk(bytes) else {
            return false;
        };
        let upstream = upstream.expect("the walk took a message upstream refuses");
        assert_eq!(format!("{metadata:?}"), format!("{:?}", upstream.global_metadata));
        assert_eq!(objects.len(), upstream.objects.len());
        for (ours, (desc, payload, masks, frame_offset)) in objects.iter().zip(&upstream.objects) {
            assert_eq!(format!("{:?}", ours.descriptor), format!("{desc:?}"));
            assert_eq!(ours.frame.start, *frame_offset);
            let start = payload.as_ptr() as usize - bytes.as_ptr() as usize;
            assert_eq!(ours.payload, start..start + payload.len());
            assert!(masks.is_empty());
        }
        true
    }

    /// Whether `frame` read alone gives what `decode_data_object_frame` gives.
    fn frame_agrees(frame_bytes: &[u8]) -> bool {
        let Some(ours) = frame(frame_bytes) else {
            return false;
        };
        let (desc, payload, masks, _) = tensogram::framing::decode_data_object_frame(frame_bytes)
            .expect("the walk took a frame upstream refuses");
        assert_eq!(format!("{:?}", ours.descriptor), format!("{desc:?}"));
        let start = payload.as_ptr() as usize - frame_bytes.as_ptr() as usize;
        assert_eq!((ours.frame, ours.payload), (0..frame_bytes.len(), start..start + payload.len()));
        assert!(masks.is_empty());
        true
    }

    #[test]
    fn walked_messages_equal_upstreams_parse() {
        let files = fixture_files();
        assert!(files.len() >= 40, "fixtures not found: {files:?}");
        let (mut walked, mut szip) = (0, 0);
        for path in &files {
            let bytes = std::fs::read(path).expect("a fixture");
            for (start, len) in tensogram::scan(&bytes) {
                let message = &bytes[start..start + len];
                if walk_agrees(message) {
                    walked += 1;
                    for object in walk(message).expect("walked").1 {
                        szip += usize::from(object.descriptor.params.contains_key(OFFSETS_KEY));
                        assert!(frame_agrees(&message[object.frame.clone()]));
                        // A buffer longer than its frame is upstream's to read.
                        let longer = [&message[object.frame.clone()], &[0u8; 8][..]].concat();
                        assert!(frame(&longer).is_none());
                    }
                }
            }
        }
        // Messages with masks go to upstream; every other fixture is walked.
        assert!(walked >= 40 && szip >= 6, "walked {walked} messages, {szip} szip objects");
    }

    /// An szip descriptor's CBOR whose offsets are `offsets` (any value).
    fn szip_descriptor(offsets: Value) -> Vec<u8> {
        let bytes = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/codec-packing24-szip.tgm"))
            .expect("a golden fixture");
        let (desc, _, _, _) = tensogram::framing::decode_message(&bytes).expect("a message").objects.remove(0);
        let Value::Map(mut entries) = decode(&tensogram::metadata::object_descriptor_to_cbor(&desc).unwrap()).unwrap()
        else {
            panic!("a descriptor is a map")
        };
        let slot = entries.iter_mut().find(|(k, _)| *k == Value::Text(OFFSETS_KEY.into())).expect("offsets");
        slot.1 = offsets;
        encode(&Value::Map(entries))
    }

    fn same_as_upstream(cbor: &[u8]) {
        let ours = descriptor(cbor).map(|d| format!("{d:?}"));
        let upstream = cbor_to_object_descriptor(cbor).ok().map(|d| format!("{d:?}"));
        assert_eq!(ours, upstream);
    }

    #[test]
    fn hostile_offsets_parse_as_upstream_parses_them() {
        let ints = |v: &[i64]| Value::Array(v.iter().map(|&i| Value::Integer(i.into())).collect());
        let cases = [
            ints(&[0, 100, 200]),
            ints(&[]),
            ints(&[0, -8]),                                            // not unsigned
            Value::Array(vec![Value::Integer(0.into()), Value::Float(1.5)]), // not integers
            Value::Array(vec![Value::Text("0".into())]),
            Value::Integer(3.into()),                                  // not an array
            Value::Tag(2, Box::new(Value::Bytes(vec![1]))),
            ints(&(0..100_000).collect::<Vec<_>>()),                   // far too many
        ];
        for offsets in cases {
            let cbor = szip_descriptor(offsets);
            same_as_upstream(&cbor);
            // Truncated anywhere: refused by both, or (cut in a trailing item) parsed alike.
            for cut in [1, cbor.len() / 2, cbor.len() - 1] {
                same_as_upstream(&cbor[..cut]);
            }
        }
        // An array of indefinite length, and the key twice: upstream parses those.
        let cbor = szip_descriptor(ints(&[0, 1]));
        let at = cbor.windows(3).position(|w| w == [0x82, 0x00, 0x01]).expect("the offsets array");
        same_as_upstream(&[&cbor[..at], &[0x9f, 0x00, 0x01, 0xff], &cbor[at + 3..]].concat());
        let Value::Map(mut entries) = decode(&cbor).unwrap() else { unreachable!() };
        entries.push((Value::Text(OFFSETS_KEY.into()), ints(&[7])));
        same_as_upstream(&encode(&Value::Map(entries)));
    }
}
