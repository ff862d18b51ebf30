//! Pieces of messages fetched by byte range (remote files, `remote.py`): preambles and
//! postambles, the metadata and index frames, data-object frame footers and descriptors, and
//! reads of one fetched data-object frame. Python fetches the bytes; every format rule stays
//! here, on top of the `tensogram` crate's wire types.

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tensogram::DataObjectDescriptor;
use tensogram::wire::{
    FrameFlags, FrameHeader, FrameType, MessageFlags, Postamble, Preamble, DATA_OBJECT_FOOTER_SIZE,
    END_MAGIC, FRAME_COMMON_FOOTER_SIZE, FRAME_END, FRAME_HEADER_SIZE, FRAME_MAGIC, POSTAMBLE_SIZE,
};

use crate::errors::{CoreError, Kind};
use crate::exceptions::Raised;
use crate::file::{descriptor_to_py, metadata_to_py};
use crate::mapped_file::index_messages;
use crate::message::{fingerprint, ObjectEntry, ParsedMessage, Stored};
use crate::fetch::PayloadRanges;
use crate::pyarray::{fill_out, out_array, parse_index, read_to_array};

fn format_err(m: impl Into<String>) -> CoreError {
    CoreError::new(Kind::Format, m)
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

/// `(total_length, layout)` of the preamble that starts `buf`. `layout` says where the frames
/// that locate the objects are: `"header"` (metadata and index after the preamble), `"footer"`
/// (before the postamble) or `"whole"` (the message must be read whole: streaming mode, with
/// `total_length` 0, per-object preceder frames, or no index).
#[pyfunction]
pub fn parse_preamble(buf: &[u8]) -> PyResult<(u64, &'static str)> {
    let preamble = Preamble::read_from(buf)
        .map_err(|e| CoreError::from_tensogram(&e, "not a message start (bad preamble)")).raised()?;
    let has = |flag| preamble.flags.has(flag);
    let layout = if preamble.total_length == 0 {
        "whole"
    } else if has(MessageFlags::FOOTER_METADATA) && has(MessageFlags::FOOTER_INDEX) {
        // Streaming writers merge per-object preceder metadata into the footer.
        "footer"
    } else if has(MessageFlags::HEADER_METADATA)
        && has(MessageFlags::HEADER_INDEX)
        && !has(MessageFlags::FOOTER_METADATA)
        && !has(MessageFlags::PRECEDER_METADATA)
    {
        "header"
    } else {
        "whole"
    };
    Ok((preamble.total_length, layout))
}

/// `(first_footer_offset, total_length)` of the postamble in the last 24 bytes of `buf`.
#[pyfunction]
pub fn parse_postamble(buf: &[u8]) -> PyResult<(u64, u64)> {
    let tail = buf.len().checked_sub(POSTAMBLE_SIZE).map(|at| &buf[at..]);
    let postamble = tail
        .filter(|t| t.ends_with(END_MAGIC))
        .ok_or_else(|| format_err("the message does not end with a postamble"))
        .and_then(|t| Postamble::read_from(t).map_err(|e| CoreError::from_tensogram(&e, "bad postamble"))).raised()?;
    Ok((postamble.first_footer_offset, postamble.total_length))
}

/// How a walk over non-data frames ended.
enum Stop {
    /// At a data-object (or preceder) frame: the header frames are complete.
    Data,
    /// At the end of the buffer, at bytes that are no frame (the postamble), or done.
    End,
    /// In a frame that continues past the buffer: this many bytes from its start are needed.
    Need(usize),
}

/// Walks the metadata, index and hash frames at the start of `buf`, which begins `offset` bytes
/// into its message (frames sit at 8-byte offsets from the message start), until it has the
/// metadata and the index.
///
/// Returns `{"metadata": dict | None, "index": (offsets, lengths) | None, "end": bytes of
/// complete frames, "next": "data" | "end" | "more", "need": bytes of buf needed to go on}`.
#[pyfunction]
pub fn parse_frames<'py>(py: Python<'py>, buf: &[u8], offset: u64) -> PyResult<Bound<'py, PyDict>> {
    let mut metadata = None;
    let mut index = None;
    let mut pos = 0usize;
    let align = |p: usize| ((offset as usize + p + 7) & !7) - offset as usize;
    let stop = loop {
        if metadata.is_some() && index.is_some() {
            break Stop::End; // what comes next (the hash frame) is not needed
        }
        let rest = &buf[pos.min(buf.len())..];
        if rest.is_empty() || !FRAME_MAGIC.starts_with(&rest[..rest.len().min(2)]) {
            break Stop::End;
        }
        if rest.len() < FRAME_HEADER_SIZE {
            break Stop::Need(pos + FRAME_HEADER_SIZE);
        }
        let header = FrameHeader::read_from(rest).map_err(|e| CoreError::from_tensogram(&e, "bad frame header")).raised()?;
        if matches!(header.frame_type, FrameType::NTensorFrame | FrameType::PrecederMetadata) {
            break Stop::Data;
        }
        let length = usize::try_from(header.total_length).unwrap_or(usize::MAX);
        if length < FRAME_HEADER_SIZE + FRAME_COMMON_FOOTER_SIZE {
            return Err(format_err(format!("frame at byte {} is {length} bytes long: corrupt", offset as usize + pos)).raised());
        }
        let Some(frame) = rest.get(..length) else {
            break Stop::Need(pos.saturating_add(length));
        };
        if !frame.ends_with(FRAME_END) {
            return Err(format_err(format!("frame at byte {} has no end marker: corrupt", offset as usize + pos)).raised());
        }
        let body = &frame[FRAME_HEADER_SIZE..length - FRAME_COMMON_FOOTER_SIZE];
        match header.frame_type {
            FrameType::HeaderMetadata | FrameType::FooterMetadata => {
                metadata = Some(
                    tensogram::metadata::cbor_to_global_metadata(body)
                        .map_err(|e| CoreError::from_tensogram(&e, "bad metadata frame")).raised()?,
                )
            }
            FrameType::HeaderIndex | FrameType::FooterIndex => {
                let parsed =
                    tensogram::metadata::cbor_to_index(body).map_err(|e| CoreError::from_tensogram(&e, "bad index frame")).raised()?;
                check_index_order(&parsed.offsets, &parsed.lengths).raised()?;
                index = Some(parsed)
            }
            _ => {}
        }
        pos = align(pos + length);
    };
    let result = PyDict::new(py);
    result.set_item("metadata", metadata.map(|m| metadata_to_py(py, &m)).transpose()?)?;
    result.set_item("index", index.map(|i| (i.offsets, i.lengths)))?;
    result.set_item("end", pos.min(buf.len()))?;
    let (next, need) = match stop {
        Stop::Data => ("data", 0),
        Stop::End => ("end", 0),
        Stop::Need(n) => ("more", n),
    };
    result.set_item("next", next)?;
    result.set_item("need", need)?;
    Ok(result)
}

/// An index lists the data-object frames in the order they are stored, one after the other: a
/// reader that trusts it (a remote one) must never be sent to another object's frame.
fn check_index_order(offsets: &[u64], lengths: &[u64]) -> Result<(), CoreError> {
    let disordered = offsets.len() != lengths.len()
        || offsets.windows(2).zip(lengths).any(|(pair, &length)| pair[0].saturating_add(length) > pair[1]);
    if disordered {
        return Err(format_err("its index does not list the data-object frames in order: corrupt"));
    }
    Ok(())
}

/// What the first (`head`) and last (`tail`) bytes of a data-object frame that the index says
/// is `length` bytes long say: `(cbor_offset, inline hash or None)`. The descriptor is the CBOR
/// item at `cbor_offset`. The frame's own header must agree with the index.
#[pyfunction]
pub fn frame_footer(head: &[u8], tail: &[u8], length: u64) -> PyResult<(u64, Option<u64>)> {
    let header = FrameHeader::read_from(head).map_err(|e| CoreError::from_tensogram(&e, "bad frame header")).raised()?;
    if header.frame_type != FrameType::NTensorFrame {
        return Err(format_err(format!("expected a data-object frame, found {:?}", header.frame_type)).raised());
    }
    if header.total_length != length {
        return Err(format_err(format!(
            "the index gives a data-object frame {length} bytes, its header {}: corrupt",
            header.total_length
        ))
        .raised());
    }
    if tail.len() < DATA_OBJECT_FOOTER_SIZE || !tail.ends_with(FRAME_END) {
        return Err(format_err("the data-object frame has no end marker: corrupt or truncated").raised());
    }
    let footer = &tail[tail.len() - DATA_OBJECT_FOOTER_SIZE..];
    let cbor_offset = u64_at(footer, 0);
    let hash = (header.flags & FrameFlags::HASH_PRESENT != 0).then(|| u64_at(footer, 8));
    if cbor_offset < FRAME_HEADER_SIZE as u64 || cbor_offset + DATA_OBJECT_FOOTER_SIZE as u64 > header.total_length {
        return Err(format_err(format!("descriptor offset {cbor_offset} lies outside the frame: corrupt")).raised());
    }
    Ok((cbor_offset, hash))
}

/// The descriptor encoded by the CBOR item at the start of `cbor`, as a dict.
#[pyfunction]
pub fn parse_descriptor<'py>(py: Python<'py>, cbor: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    descriptor_to_py(py, &object_descriptor(cbor).raised()?)
}

/// `(offset, length)` of every message in `buf`, which they must tile.
#[pyfunction]
pub fn message_spans(py: Python<'_>, buf: &[u8]) -> PyResult<Vec<(usize, usize)>> {
    Ok(py.detach(|| index_messages(buf)).raised()?)
}

/// A whole message: `(metadata, [(descriptor, frame_offset, frame_length), ...])`.
#[pyfunction]
pub fn parse_message<'py>(py: Python<'py>, buf: &[u8]) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyList>)> {
    let parsed = py.detach(|| ParsedMessage::parse(buf)).raised()?;
    let objects = PyList::empty(py);
    for entry in &parsed.objects {
        objects.append((descriptor_to_py(py, &entry.descriptor)?, entry.frame.start, entry.frame.len()))?;
    }
    Ok((metadata_to_py(py, &parsed.metadata)?, objects))
}

/// `FileHandle.read` for the object in the data-object frame `frame` (a remote read fetches
/// just the frame); `context` names the object in errors.
#[pyfunction]
#[pyo3(signature = (frame, index = None, out = None, verify_hash = false, context = "", threads = None))]
pub fn read_frame<'py>(
    py: Python<'py>,
    frame: &Bound<'py, PyBytes>,
    index: Option<&Bound<'py, PyAny>>,
    out: Option<Bound<'py, PyUntypedArray>>,
    verify_hash: bool,
    context: &str,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let bytes = frame.as_bytes();
    let entry = py.detach(|| ObjectEntry::from_frame(bytes)).map_err(|e| e.context(context)).raised()?;
    read_to_array(py, bytes, &entry, index, out, verify_hash, threads, &|| context.to_owned())
}

/// `FileHandle.read` of an object from byte ranges of its payload (`payload_len` bytes stored;
/// the CBOR item `cbor` describes the object): `fetch([(start, length), ...])`, with offsets
/// from the payload's start, returns those bytes. `None` when the object should be fetched whole
/// (see `fetch.rs`); `fetch` is then not called. The index is parsed and planned once, with the
/// interpreter detached, and the read runs detached too.
#[pyfunction]
#[pyo3(signature = (cbor, payload_len, fetch, index = None, out = None, context = ""))]
pub fn read_payload_ranges<'py>(
    py: Python<'py>,
    cbor: &[u8],
    payload_len: u64,
    fetch: &Bound<'py, PyAny>,
    index: Option<&Bound<'py, PyAny>>,
    out: Option<Bound<'py, PyUntypedArray>>,
    context: &str,
) -> PyResult<Option<Bound<'py, PyUntypedArray>>> {
    let in_context = |e: CoreError| e.context(context).raised();
    let desc = object_descriptor(cbor).map_err(in_context)?;
    let index = parse_index(index, &desc.shape).map_err(in_context)?;
    let shape = index.shape.clone();
    let planned = py.detach(|| PayloadRanges::plan(&desc, &index.selection()?, payload_len)).map_err(in_context)?;
    let Some(ranges) = planned else {
        return Ok(None);
    };
    let pieces: Vec<Bound<'py, PyBytes>> = fetch.call1((ranges.byte_ranges().map_err(in_context)?,))?.extract()?;
    let pieces: Vec<&[u8]> = pieces.iter().map(|p| p.as_bytes()).collect();
    let out = out_array(py, &desc, &shape, out, &|| context.to_owned())?;
    // Released always: the fetch before it costs far more than a hand-off.
    fill_out(py, &out, desc.dtype.byte_width(), true, |bytes| ranges.read(&pieces, bytes)).map_err(in_context)?;
    Ok(Some(out))
}

fn object_descriptor(cbor: &[u8]) -> Result<DataObjectDescriptor, CoreError> {
    tensogram::metadata::cbor_to_object_descriptor(cbor).map_err(|e| CoreError::from_tensogram(&e, "bad object descriptor"))
}

/// The fingerprint `FileHandle.fingerprint` gives the object in the data-object frame `frame`.
#[pyfunction]
pub fn frame_fingerprint(py: Python<'_>, frame: &Bound<'_, PyBytes>) -> PyResult<String> {
    let bytes = frame.as_bytes();
    Ok(py.detach(|| ObjectEntry::from_frame(bytes).map(|e| e.fingerprint(bytes))).raised()?)
}

/// The same fingerprint from the frame's descriptor (the CBOR item starting `cbor`) and its
/// inline hash: what a remote reader knows without fetching the payload.
#[pyfunction]
pub fn hashed_fingerprint(cbor: &[u8], frame_hash: u64) -> PyResult<String> {
    Ok(fingerprint(&object_descriptor(cbor).raised()?, Stored::FrameHash(frame_hash)))
}

#[cfg(test)]
mod tests {
    use super::check_index_order;

    #[test]
    fn an_index_must_list_frames_in_order_without_overlaps() {
        assert!(check_index_order(&[480, 17024], &[16538, 16538]).is_ok());
        assert!(check_index_order(&[], &[]).is_ok());
        assert!(check_index_order(&[17024, 480], &[16538, 16538]).is_err()); // swapped
        assert!(check_index_order(&[480, 490], &[16538, 16538]).is_err()); // overlapping
        assert!(check_index_order(&[480], &[16538, 16538]).is_err()); // lengths without offsets
    }
}
