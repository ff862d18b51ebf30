//! `FileHandle`: one mapped `.tgm` file, its message index, and hyperslab reads.

use std::fs::File;
use std::ops::Range;
use std::sync::OnceLock;

use memmap2::Mmap;
use numpy::PyUntypedArray;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::cbor::{map_to_py, to_py};
use crate::errors::{CoreError, CoreResult, Kind};
use crate::exceptions::Raised;
use crate::message::ParsedMessage;
use crate::pyarray::{parse_index, read_into_out, read_to_array};
use tensogram::{DataObjectDescriptor, GlobalMetadata};
use tensogram::wire::{
    FrameHeader, Preamble, END_MAGIC, FRAME_HEADER_SIZE, FRAME_MAGIC, MAGIC, POSTAMBLE_SIZE, PREAMBLE_SIZE,
};

/// A `.tgm` file mapped once and shared by every thread: `&self` methods only.
#[pyclass(frozen, module = "tgm_xarray._core")]
pub struct FileHandle {
    path: String,
    map: Mmap,
    /// `(offset, length)` of every message; together they cover the file exactly.
    spans: Vec<(usize, usize)>,
    /// Each message's frames, parsed on first use.
    parsed: Vec<OnceLock<CoreResult<ParsedMessage>>>,
}

/// Finds every message, requiring that they tile the file: a truncated message or bytes that
/// belong to no message are errors, never skipped (`tensogram::scan` skips them silently).
pub(crate) fn index_messages(data: &[u8]) -> CoreResult<Vec<(usize, usize)>> {
    index_messages_with(data, |_| {})
}

/// `index_messages`, calling `passed(end)` after each message.
fn index_messages_with(data: &[u8], mut passed: impl FnMut(usize)) -> CoreResult<Vec<(usize, usize)>> {
    let format = |m: String| CoreError::new(Kind::Format, m);
    if data.is_empty() {
        return Err(format("the file is empty".into()));
    }
    if !data.starts_with(MAGIC) {
        return Err(format("not a Tensogram file (it does not start with the magic bytes TENSOGRM)".into()));
    }
    let mut spans = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        let here = |m: &str| {
            format(format!("bytes {pos}..{} (after {} complete message(s)) {m}", data.len(), spans.len()))
        };
        if !data[pos..].starts_with(MAGIC) {
            return Err(here("are not a message: trailing garbage or a corrupt file"));
        }
        let preamble = Preamble::read_from(&data[pos..]).map_err(|_| here("are a truncated message"))?;
        let length = if preamble.total_length > 0 {
            let length = usize::try_from(preamble.total_length).unwrap_or(usize::MAX);
            let end = pos.checked_add(length).filter(|&e| e <= data.len() && length >= PREAMBLE_SIZE + POSTAMBLE_SIZE);
            match end {
                Some(end) if &data[end - END_MAGIC.len()..end] == END_MAGIC => length,
                Some(_) => return Err(here("are a message whose end marker is missing (corrupt file)")),
                None => return Err(here("are a truncated message")),
            }
        } else {
            streaming_length(&data[pos..]).ok_or_else(|| here("are a truncated or corrupt streaming-mode message"))?
        };
        spans.push((pos, length));
        pos += length;
        passed(pos);
    }
    Ok(spans)
}

/// The length of a message written in streaming mode (no length in its preamble), found by
/// walking its frame headers to the postamble: searching for the end marker instead would stop
/// inside any payload that happens to contain those eight bytes.
fn streaming_length(msg: &[u8]) -> Option<usize> {
    let mut pos = PREAMBLE_SIZE;
    loop {
        let rest = msg.get(pos..)?;
        if rest.starts_with(FRAME_MAGIC) {
            let length = usize::try_from(FrameHeader::read_from(rest).ok()?.total_length).ok()?;
            if length < FRAME_HEADER_SIZE {
                return None;
            }
            // Frames start at 8-byte offsets from the message start.
            pos = pos.checked_add(length)?.checked_add(7)? & !7;
        } else {
            let end = pos.checked_add(POSTAMBLE_SIZE)?;
            return (msg.get(end - END_MAGIC.len()..end)? == END_MAGIC).then_some(end);
        }
    }
}

/// Scans release the pages they have passed every this many bytes.
const RELEASE_WINDOW: usize = 32 << 20;

/// Drops the mapped pages of `range` from the process's resident memory. A scan touches a page or
/// two of every message: without this, opening a 1 GB archive of small messages kept ~1 GB
/// resident. The pages stay in the kernel's page cache and a later read maps them again.
fn release(map: &Mmap, range: Range<usize>) {
    if !range.is_empty() {
        // SAFETY: the map is read-only and file-backed: dropping its pages only makes the next
        // access fault them in again from the file, with the same contents.
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, range.len()) };
    }
}

impl FileHandle {
    fn open(path: &str) -> PyResult<FileHandle> {
        let file = File::open(path).map_err(|e| PyOSError::new_err(format!("{path}: {e}")))?;
        let size = file.metadata().map_err(|e| PyOSError::new_err(format!("{path}: {e}")))?.len();
        let map = if size == 0 {
            // mmap refuses empty files; an empty anonymous map gives the same "empty file" error.
            memmap2::MmapOptions::new().len(0).map_anon().and_then(|m| m.make_read_only())
        } else {
            // SAFETY: the map is read-only; a file truncated by another process while mapped
            // is outside what any mmap reader can defend against (documented in docs/errors.md).
            unsafe { Mmap::map(&file) }
        }
        .map_err(|e| PyOSError::new_err(format!("{path}: cannot map the file: {e}")))?;
        let mut released = 0;
        let spans = index_messages_with(&map, |pos| {
            if pos - released >= RELEASE_WINDOW {
                release(&map, released..pos);
                released = pos;
            }
        })
        .map_err(|e| e.context(path)).raised()?;
        release(&map, 0..map.len());
        let parsed = spans.iter().map(|_| OnceLock::new()).collect();
        Ok(FileHandle { path: path.to_owned(), map, spans, parsed })
    }

    /// Drops the file's pages from the process's resident memory (see `release`).
    pub(crate) fn release_all(&self) {
        release(&self.map, 0..self.map.len())
    }

    pub(crate) fn path_str(&self) -> &str {
        &self.path
    }

    pub(crate) fn message_count(&self) -> usize {
        self.spans.len()
    }

    /// `(offset, bytes)` of every message, in file order; the pages of messages passed are
    /// released as the walk goes on (see `release`).
    pub(crate) fn messages(&self) -> impl Iterator<Item = (usize, &[u8])> + Send + '_ {
        let mut released = 0;
        self.spans.iter().map(move |&(offset, length)| {
            if offset - released >= RELEASE_WINDOW {
                release(&self.map, released..offset);
                released = offset;
            }
            (offset, &self.map[offset..offset + length])
        })
    }

    /// Message `msg` as an index, or an error naming the file (negative indices included).
    fn check_message(&self, msg: i64) -> CoreResult<usize> {
        usize::try_from(msg).ok().filter(|&m| m < self.spans.len()).ok_or_else(|| {
            CoreError::new(
                Kind::Index,
                format!("{}: message {msg} is out of range ({} messages)", self.path, self.spans.len()),
            )
        })
    }

    fn message_bytes(&self, msg: usize) -> &[u8] {
        let (offset, length) = self.spans[msg];
        &self.map[offset..offset + length]
    }

    /// The parsed frames of message `msg` (parsed on first use, then shared).
    fn message(&self, msg: i64) -> CoreResult<&ParsedMessage> {
        let msg = self.check_message(msg)?;
        self.parsed[msg]
            .get_or_init(|| {
                ParsedMessage::parse(self.message_bytes(msg))
                    .map_err(|e| e.context(&format!("{}: message {msg}", self.path)))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// `message(msg)` from attached code: parsing is the only slow lookup, so the interpreter
    /// is released only for a message not parsed yet (a release costs a wake-up on GIL builds).
    fn message_attached(&self, py: Python<'_>, msg: i64) -> CoreResult<&ParsedMessage> {
        let parsed_already = usize::try_from(msg).ok().and_then(|m| self.parsed.get(m)).is_some_and(|p| p.get().is_some());
        if parsed_already {
            self.message(msg)
        } else {
            py.detach(|| self.message(msg))
        }
    }

    /// `object(msg, obj)` from attached code (see `message_attached`).
    fn object_attached(&self, py: Python<'_>, msg: i64, obj: i64) -> CoreResult<(&ParsedMessage, usize)> {
        self.message_attached(py, msg)?;
        self.object(msg, obj)
    }

    fn object(&self, msg: i64, obj: i64) -> CoreResult<(&ParsedMessage, usize)> {
        let parsed = self.message(msg)?;
        let Some(obj) = usize::try_from(obj).ok().filter(|&o| o < parsed.objects.len()) else {
            return Err(CoreError::new(
                Kind::Index,
                format!(
                    "{}: message {msg}: object {obj} is out of range ({} objects)",
                    self.path,
                    parsed.objects.len()
                ),
            ));
        };
        Ok((parsed, obj))
    }
}

/// The descriptor of an object as a Python dict (the wire keys, without the szip offset table
/// and its verification mark: internal indexes, not settings).
pub(crate) fn descriptor_to_py<'py>(py: Python<'py>, d: &DataObjectDescriptor) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("type", &d.obj_type)?;
    dict.set_item("ndim", d.ndim)?;
    dict.set_item("shape", d.shape.clone())?;
    dict.set_item("strides", d.strides.clone())?;
    dict.set_item("dtype", d.dtype.to_string())?;
    dict.set_item("byte_order", format!("{:?}", d.byte_order).to_lowercase())?;
    dict.set_item("encoding", &d.encoding)?;
    dict.set_item("filter", &d.filter)?;
    dict.set_item("compression", &d.compression)?;
    let masks = PyList::empty(py);
    if let Some(m) = &d.masks {
        for (name, present) in [("nan", m.nan.is_some()), ("pos_inf", m.pos_inf.is_some()), ("neg_inf", m.neg_inf.is_some())] {
            if present {
                masks.append(name)?;
            }
        }
    }
    dict.set_item("masks", masks)?;
    let params = PyDict::new(py);
    for (k, v) in d.params.iter().filter(|(k, _)| !k.starts_with("szip_block_offsets")) {
        params.set_item(k, to_py(py, v)?)?;
    }
    dict.set_item("params", params)?;
    Ok(dict)
}

/// Message metadata as `{"base": [...], "_extra_": {...}, "_reserved_": {...}}`.
pub(crate) fn metadata_to_py<'py>(py: Python<'py>, meta: &GlobalMetadata) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    let base = PyList::empty(py);
    for entry in &meta.base {
        base.append(map_to_py(py, entry)?)?;
    }
    dict.set_item("base", base)?;
    dict.set_item("_extra_", map_to_py(py, &meta.extra)?)?;
    dict.set_item("_reserved_", map_to_py(py, &meta.reserved)?)?;
    Ok(dict)
}

#[pymethods]
impl FileHandle {
    #[new]
    fn py_new(py: Python<'_>, path: &str) -> PyResult<FileHandle> {
        py.detach(|| FileHandle::open(path))
    }

    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    #[getter]
    fn file_size(&self) -> usize {
        self.map.len()
    }

    fn __len__(&self) -> usize {
        self.spans.len()
    }

    fn __repr__(&self) -> String {
        format!("<FileHandle {:?}: {} messages>", self.path, self.spans.len())
    }

    /// `(offset, length)` of message `msg` in the file.
    fn message_span(&self, msg: i64) -> PyResult<(usize, usize)> {
        Ok(self.spans[self.check_message(msg).raised()?])
    }

    /// `(offset, length)` in the file of each object's data-object frame in message `msg`: the
    /// bytes a virtual reference points at (`read_frame` decodes them without the message).
    fn frame_spans(&self, py: Python<'_>, msg: i64) -> PyResult<Vec<(usize, usize)>> {
        let parsed = self.message_attached(py, msg).raised()?;
        let base = self.spans[msg as usize].0;
        Ok(parsed.objects.iter().map(|o| (base + o.frame.start, o.frame.len())).collect())
    }

    /// Parses every message's frames (detached); later metadata calls cost no parsing.
    fn parse_all(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| (0..self.spans.len() as i64).try_for_each(|i| self.message(i).map(|_| ()))).raised()?;
        Ok(())
    }

    /// The message's metadata: `{"base": [...], "_extra_": {...}, "_reserved_": {...}}`.
    fn metadata<'py>(&self, py: Python<'py>, msg: i64) -> PyResult<Bound<'py, PyDict>> {
        let parsed = self.message_attached(py, msg).raised()?;
        metadata_to_py(py, &parsed.metadata)
    }

    /// The descriptors of the message's objects, as dicts.
    fn descriptors<'py>(&self, py: Python<'py>, msg: i64) -> PyResult<Bound<'py, PyList>> {
        let parsed = self.message_attached(py, msg).raised()?;
        let list = PyList::empty(py);
        for entry in &parsed.objects {
            list.append(descriptor_to_py(py, &entry.descriptor)?)?;
        }
        Ok(list)
    }

    /// An identity of the object's stored bytes: equal for objects stored identically.
    fn fingerprint(&self, py: Python<'_>, msg: i64, obj: i64) -> PyResult<String> {
        Ok(py.detach(|| -> CoreResult<String> {
            let (parsed, obj) = self.object(msg, obj)?;
            Ok(parsed.objects[obj].fingerprint(self.message_bytes(msg as usize)))
        }).raised()?)
    }

    /// Reads `index` of object `obj` of message `msg` (numpy outer indexing: slices, ints, 1-D
    /// integer or boolean arrays, `...`) into `out`, or into a new array, and returns it. One
    /// call does all: the index is resolved here and the interpreter is released once, for the
    /// decode, so reads from many threads spend next to no time holding it. `threads`: at most
    /// this many threads decode one large read (`None`: the process-wide budget decides, see
    /// docs/architecture.md).
    #[pyo3(signature = (msg, obj, index = None, out = None, verify_hash = false, threads = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn read<'py>(
        &self,
        py: Python<'py>,
        msg: i64,
        obj: i64,
        index: Option<&Bound<'py, PyAny>>,
        out: Option<Bound<'py, PyUntypedArray>>,
        verify_hash: bool,
        threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyUntypedArray>> {
        let (parsed, obj) = self.object_attached(py, msg, obj).raised()?;
        let where_ = || format!("{}: message {msg}, object {obj}", self.path);
        read_to_array(py, self.message_bytes(msg as usize), &parsed.objects[obj], index, out, verify_hash, threads, &where_)
    }

    /// Reads `selection` of object `obj` of message `msg` into `out` (see docs/architecture.md).
    #[pyo3(signature = (msg, obj, selection, out, verify_hash = false, threads = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn read_into(
        &self,
        py: Python<'_>,
        msg: i64,
        obj: i64,
        selection: Option<&Bound<'_, PyAny>>,
        out: &Bound<'_, PyUntypedArray>,
        verify_hash: bool,
        threads: Option<usize>,
    ) -> PyResult<()> {
        let (parsed, obj) = self.object_attached(py, msg, obj).raised()?;
        let entry = &parsed.objects[obj];
        let where_ = || format!("{}: message {msg}, object {obj}", self.path);
        let bytes = self.message_bytes(msg as usize);
        parse_index(selection, &entry.descriptor.shape)
            .and_then(|index| read_into_out(py, bytes, entry, index, out, verify_hash, threads))
            .map_err(|e| e.context(&where_()).raised())
    }
}
