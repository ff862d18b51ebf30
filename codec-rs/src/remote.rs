//! Remote files read by byte range: `tgm_core::remote_walk` driven by a Python `fetch(ranges)`
//! callback (Python moves the bytes: requests, retries, deadlines), and the per-message state of
//! `tgm_xarray.remote.RemoteHandle`. Where every message came whole the state is the metadata
//! table of the core scan (frames, descriptors, hashes) and nothing is parsed per message;
//! a message's metadata and descriptors are fetched again on first use. Otherwise the table
//! (`table`) joins the tables of the runs of messages that came whole, scanned at opening, and
//! the rows of the messages read by their header, built from their metadata frame and their
//! objects' descriptors once those are described.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tensogram::{DataObjectDescriptor, GlobalMetadata};
use tgm_core::remote_walk::{indexed, Describe, Found, Part, Ranges, Scan, Settings};
use tgm_core::table::{self, ObjectParts, ScanError, Table};

use crate::errors::{CoreError, Kind};
use crate::exceptions::Raised;
use crate::file::{descriptor_to_py, metadata_to_py};
use crate::mapped_file::index_messages;
use crate::message::{fingerprint, ParsedMessage, Stored};

fn format_err(m: impl Into<String>) -> PyErr {
    CoreError::new(Kind::Format, m).raised()
}

/// Calls `fetch(ranges)`, which returns the bytes of each range.
fn fetched(fetch: &Bound<'_, PyAny>, ranges: &Ranges) -> PyResult<Vec<Vec<u8>>> {
    let pieces: Vec<Bound<'_, PyBytes>> = fetch.call1((ranges.clone(),))?.extract()?;
    Ok(pieces.iter().map(|p| p.as_bytes().to_vec()).collect())
}

/// One object of a described message.
struct Object {
    descriptor: DataObjectDescriptor,
    /// Known without fetching the payload (the frame's inline hash, or a frame at hand).
    fingerprint: Option<String>,
    /// `(descriptor CBOR, payload offset in the file, payload length)` where a read may fetch
    /// parts of the payload.
    payload: Option<(Vec<u8>, u64, u64)>,
    /// What the table takes of an object of a message read by its header (`ObjectParts`).
    parts: Option<Parts>,
}

/// `ObjectParts` less the descriptor and frame, which `Object` and `Message` hold.
struct Parts {
    cbor: Vec<u8>,
    payload: Range<u64>,
    hash: Option<u64>,
}

struct Described {
    metadata: GlobalMetadata,
    objects: Vec<Object>,
}

struct Message {
    offset: u64,
    length: u64,
    /// Each data-object frame, `(file offset, length)`; `Err`: the message is corrupt.
    frames: Result<Vec<(u64, u64)>, String>,
    /// The metadata of a message read by its header or footer, and its metadata frame's CBOR
    /// (its objects are described later).
    header: Option<(GlobalMetadata, Vec<u8>)>,
    /// The first row of its objects in the table, when the table holds it.
    first_row: Option<usize>,
    described: OnceLock<Result<Described, String>>,
}

/// Every message of a remote file: the state of a `RemoteHandle`.
#[pyclass(frozen, module = "tgm_xarray._core")]
pub struct RemoteMessages {
    source: String,
    messages: Vec<Message>,
    /// The table, where every message came whole.
    table: Option<Table>,
    /// Else the tables of the runs of messages that came whole, `(their messages, table)`.
    whole_runs: Vec<(Range<usize>, Result<Table, ScanError>)>,
    tail_guess: u64,
}

/// Scans the remote file `source` of `size` bytes: `fetch(ranges)` gives the bytes the walk asks
/// for. `settings`: `(first_block, max_block, read_ahead, whole_message_max, header_guess,
/// tail_guess)`, `tgm_xarray.remote`'s.
#[pyfunction]
pub fn scan_remote(
    py: Python<'_>,
    source: &str,
    size: u64,
    fetch: &Bound<'_, PyAny>,
    settings: (u64, u64, u64, u64, u64, u64),
) -> PyResult<RemoteMessages> {
    let (first_block, max_block, read_ahead, whole_message_max, header_guess, tail_guess) = settings;
    let settings = Settings { first_block, max_block, read_ahead, whole_message_max, header_guess, tail_guess };
    let in_source = |e: String| format_err(format!("{source}: {e}"));
    let mut scan = Scan::new(size, settings, |bytes| index_messages(bytes).map_err(|e| e.message));
    while let Some(ranges) = scan.wanted().map_err(in_source)? {
        scan.feed(fetched(fetch, &ranges)?).map_err(in_source)?;
    }
    let found = scan.finish();
    Ok(py.detach(|| RemoteMessages::new(source, found, tail_guess)))
}

/// Why a message read whole cannot be read, found without parsing it: its postamble disagrees.
fn whole_error(found: &Found) -> Option<String> {
    let agrees = tgm_core::remote_walk::postamble(&found.data).is_ok_and(|(_, length)| length == found.length || length == 0);
    (!agrees).then(|| "its postamble does not match its preamble".to_string())
}

/// The objects of a message read whole, parsed frame by frame (the index is not needed).
fn parse_whole(offset: u64, bytes: &[u8]) -> Result<(Vec<(u64, u64)>, Described), String> {
    let parsed = ParsedMessage::parse(bytes).map_err(|e| e.message)?;
    let mut frames = Vec::with_capacity(parsed.objects.len());
    let mut objects = Vec::with_capacity(parsed.objects.len());
    for entry in &parsed.objects {
        frames.push((offset + entry.frame.start as u64, entry.frame.len() as u64));
        let cbor = tensogram::metadata::object_descriptor_to_cbor(&entry.descriptor).map_err(|e| e.to_string())?;
        objects.push(Object {
            descriptor: entry.descriptor.clone(),
            fingerprint: Some(entry.fingerprint(bytes)),
            payload: Some((cbor, offset + entry.payload.start as u64, entry.payload.len() as u64)),
            parts: None,
        });
    }
    Ok((frames, Described { metadata: parsed.metadata, objects }))
}

impl RemoteMessages {
    fn new(source: &str, found: Vec<Found>, tail_guess: u64) -> Self {
        let mut whole_runs = Self::whole_runs(&found);
        let table = match &mut whole_runs[..] {
            [(run, Ok(table))] if run.len() == found.len() => Some(std::mem::take(table)),
            _ => None,
        };
        let messages = match &table {
            Some(table) => {
                whole_runs.clear();
                Self::from_table(table)
            }
            None => found.iter().map(Self::from_found).collect(),
        };
        RemoteMessages { source: source.to_owned(), messages, table, whole_runs, tail_guess }
    }

    /// The tables of the runs of messages that came whole, each scanned as a mapped file's
    /// messages are (`Err`: the first that cannot be read, numbered in the file).
    fn whole_runs(found: &[Found]) -> Vec<(Range<usize>, Result<Table, ScanError>)> {
        let mut runs = Vec::new();
        let mut first = 0;
        while first < found.len() {
            let end = first + found[first..].iter().take_while(|m| m.part == Part::Whole).count();
            if end == first {
                first += 1;
                continue;
            }
            let run = &found[first..end];
            let bad = run.iter().enumerate().find_map(|(i, m)| whole_error(m).map(|error| ScanError { message: first + i, error }));
            let table = match bad {
                Some(error) => Err(error),
                None => table::scan(run.iter().map(|m| (m.offset as usize, &m.data[..])))
                    .map_err(|e| ScanError { message: first + e.message, error: e.error }),
            };
            runs.push((first..end, table));
            first = end;
        }
        runs
    }

    /// The metadata table of the messages (`table::table_of_files`): the scan's where every
    /// message came whole, else built here, which needs every message read by its header
    /// described (`describe`; `RemoteHandle.parse_all`).
    pub(crate) fn table(&self) -> PyResult<Cow<'_, Table>> {
        if let Some(table) = &self.table {
            return Ok(Cow::Borrowed(table));
        }
        let in_message = |msg: usize, e: String| format_err(format!("{}: message {msg}: {e}", self.source));
        let mut builder = table::Builder::default();
        let mut runs = self.whole_runs.iter().peekable();
        let mut msg = 0;
        while msg < self.messages.len() {
            if let Some((run, table)) = runs.next_if(|(run, _)| run.start == msg) {
                builder.append(table.as_ref().map_err(|e| in_message(e.message, e.error.clone()))?);
                msg = run.end;
                continue;
            }
            let m = &self.messages[msg];
            let frames = m.frames.as_ref().map_err(|e| format_err(format!("{}: {e}", self.source)))?;
            let (Some((_, metadata)), Some(described)) = (&m.header, m.described.get()) else {
                let why = "its descriptors are not fetched yet (RemoteHandle.parse_all fetches them)";
                return Err(CoreError::new(Kind::Value, format!("{}: message {msg}: {why}", self.source)).raised());
            };
            let described = described.as_ref().map_err(|e| format_err(format!("{}: {e}", self.source)))?;
            let objects = described.objects.iter().zip(frames).map(|(o, &(start, length))| {
                let parts = o.parts.as_ref().expect("objects described from their frames have their parts");
                ObjectParts {
                    descriptor: &o.descriptor,
                    cbor: &parts.cbor,
                    frame: start as usize..(start + length) as usize,
                    payload: parts.payload.start as usize..parts.payload.end as usize,
                    hash: parts.hash,
                }
            });
            let objects: Vec<ObjectParts> = objects.collect();
            builder.parts(m.offset as usize, m.length as usize, metadata, &objects).map_err(|e| in_message(msg, e))?;
            msg += 1;
        }
        Ok(Cow::Owned(builder.finish()))
    }

    /// The messages as the table lists them: nothing parsed again.
    fn from_table(table: &Table) -> Vec<Message> {
        let mut first = 0;
        (0..table.n_messages)
            .map(|msg| {
                let rows = table.msg[first..].iter().take_while(|&&m| m == msg as i64).count();
                let frames = (first..first + rows)
                    .map(|r| (table.frame_start[r] as u64, (table.frame_end[r] - table.frame_start[r]) as u64))
                    .collect();
                let message = Message {
                    offset: table.message_offset[msg] as u64,
                    length: table.message_length[msg] as u64,
                    frames: Ok(frames),
                    header: None,
                    first_row: Some(first),
                    described: OnceLock::new(),
                };
                first += rows;
                message
            })
            .collect()
    }

    /// A message as the scan found it: parsed now where it came whole (the table could not be
    /// built), else its metadata and index, checked against it.
    fn from_found(found: &Found) -> Message {
        let mut message = Message {
            offset: found.offset,
            length: found.length,
            frames: Ok(Vec::new()),
            header: None,
            first_row: None,
            described: OnceLock::new(),
        };
        let at = |e: String| format!("message at byte {}: {e}", found.offset);
        if found.part == Part::Whole {
            match whole_error(found).map_or_else(|| parse_whole(found.offset, &found.data), Err) {
                Ok((frames, described)) => {
                    message.frames = Ok(frames);
                    let _ = message.described.set(Ok(described));
                }
                Err(e) => message.frames = Err(at(e)),
            }
        } else {
            match indexed(found) {
                Ok(indexed) => {
                    message.frames = Ok(indexed.frames.into_iter().map(|(o, l)| (found.offset + o, l)).collect());
                    message.header = Some((indexed.metadata, indexed.metadata_cbor));
                }
                Err(e) => message.frames = Err(at(e)),
            }
        }
        message
    }

    fn message(&self, msg: usize) -> PyResult<&Message> {
        let n = self.messages.len();
        self.messages.get(msg).ok_or_else(|| {
            CoreError::new(Kind::Index, format!("{}: message {msg} is out of range ({n} messages)", self.source)).raised()
        })
    }

    fn frames(&self, msg: usize) -> PyResult<&[(u64, u64)]> {
        self.message(msg)?.frames.as_deref().map_err(|e| format_err(format!("{}: {e}", self.source)))
    }

    fn described(&self, msg: usize) -> PyResult<&Described> {
        self.frames(msg)?;
        match self.messages[msg].described.get() {
            Some(Ok(described)) => Ok(described),
            Some(Err(e)) => Err(format_err(format!("{}: {e}", self.source))),
            None => Err(format_err(format!("{}: message {msg} is not described yet", self.source))),
        }
    }

    /// Object `obj`'s descriptor from the message's description, else the table's, which has no
    /// `params` (they differ object by object): for layouts and fingerprints only.
    fn layout_descriptor(&self, msg: usize, obj: usize) -> PyResult<&DataObjectDescriptor> {
        let m = self.message(msg)?;
        if let (None, Some(table), Some(first)) = (m.described.get(), &self.table, m.first_row) {
            return Ok(&table.descriptors[table.descriptor[first + obj] as usize]);
        }
        Ok(&self.described(msg)?.objects[obj].descriptor)
    }

    fn object(&self, msg: usize, obj: usize) -> PyResult<(u64, u64)> {
        let frames = self.frames(msg)?;
        frames.get(obj).copied().ok_or_else(|| {
            let message = format!("{}: message {msg}: object {obj} is out of range ({} objects)", self.source, frames.len());
            CoreError::new(Kind::Index, message).raised()
        })
    }
}

#[pymethods]
impl RemoteMessages {
    fn __len__(&self) -> usize {
        self.messages.len()
    }


    /// `(offset, length)` of message `msg`.
    fn span(&self, msg: usize) -> PyResult<(u64, u64)> {
        let m = self.message(msg)?;
        Ok((m.offset, m.length))
    }

    /// Whether message `msg`'s metadata and descriptors are at hand (or it is known corrupt).
    fn is_described(&self, msg: usize) -> PyResult<bool> {
        let m = self.message(msg)?;
        Ok(m.frames.is_err() || m.described.get().is_some())
    }

    /// Whether reads of message `msg` need it described first: it was read by its header or
    /// footer, and its objects' payloads are found from their descriptors.
    fn reads_need_description(&self, msg: usize) -> PyResult<bool> {
        let m = self.message(msg)?;
        Ok(m.header.is_some() && m.described.get().is_none())
    }

    /// `(start, stop)` in the file of object `obj`'s data-object frame.
    fn frame_range(&self, msg: usize, obj: usize) -> PyResult<(u64, u64)> {
        let (start, length) = self.object(msg, obj)?;
        Ok((start, start + length))
    }

    /// `(file offset, length)` of every data-object frame of message `msg`.
    fn frame_spans(&self, msg: usize) -> PyResult<Vec<(u64, u64)>> {
        Ok(self.frames(msg)?.to_vec())
    }

    /// Fetches (through `fetch(ranges)`) and parses what describes the messages `wanted` not
    /// described yet, all in the same requests: the objects' descriptors from the ends of their
    /// frames for messages read by their header or footer, the whole message for the others.
    fn describe(&self, py: Python<'_>, wanted: Vec<usize>, fetch: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut todo = Vec::new();
        for msg in wanted {
            if !self.is_described(msg)? && !todo.contains(&msg) {
                todo.push(msg);
            }
        }
        let (by_index, whole): (Vec<usize>, Vec<usize>) = todo.into_iter().partition(|&m| self.messages[m].header.is_some());
        let objects: Vec<(usize, usize)> = by_index.iter().flat_map(|&m| (0..self.frames(m).map_or(0, |f| f.len())).map(move |o| (m, o))).collect();
        let frames: Vec<(u64, u64)> = by_index.iter().flat_map(|&m| self.frames(m).map(|f| f.to_vec()).unwrap_or_default()).collect();
        let spans: Ranges = whole.iter().map(|&m| (self.messages[m].offset, self.messages[m].offset + self.messages[m].length)).collect();
        let in_object = |(i, e): (usize, String)| {
            let (m, o) = objects[i];
            format_err(format!("{}: message at byte {}, object {o}: {e}", self.source, self.messages[m].offset))
        };
        let mut walk = Describe::new(frames, self.tail_guess);
        // The first batch: the whole messages and the ends of the frames at once.
        let first = walk.wanted().map_err(in_object)?.unwrap_or_default();
        let mut pieces = fetched(fetch, &[spans.clone(), first].concat())?;
        let rest = pieces.split_off(spans.len());
        if !objects.is_empty() {
            walk.feed(rest).map_err(format_err)?;
            while let Some(ranges) = walk.wanted().map_err(in_object)? {
                walk.feed(fetched(fetch, &ranges)?).map_err(format_err)?;
            }
        }
        let objects_described = py.detach(|| walk.finish());
        let mut parsed = Vec::with_capacity(whole.len());
        for (&msg, bytes) in whole.iter().zip(&pieces) {
            let m = &self.messages[msg];
            let result = py.detach(|| parse_whole(m.offset, bytes));
            parsed.push(result.and_then(|(frames, described)| {
                // The table's frames and the parse's agree, or the file changed under us.
                if Ok(&frames) == m.frames.as_ref() { Ok(described) } else { Err("the message changed since it was opened".into()) }
            }));
        }
        let mut described = objects_described.map_err(in_object)?.into_iter();
        for &msg in &by_index {
            let m = &self.messages[msg];
            let objects = described
                .by_ref()
                .take(m.frames.as_ref().map_or(0, |f| f.len()))
                .map(|d| Object {
                    fingerprint: match (d.hash, &d.frame) {
                        (Some(hash), _) => Some(fingerprint(&d.descriptor, Stored::FrameHash(hash))),
                        (None, Some(frame)) => crate::message::ObjectEntry::from_frame(frame).ok().map(|e| e.fingerprint(frame)),
                        (None, None) => None,
                    },
                    payload: d.payload.map(|(cbor, range)| (cbor, range.start, range.end - range.start)),
                    parts: Some(Parts { cbor: d.cbor, payload: d.stored, hash: d.hash }),
                    descriptor: d.descriptor,
                })
                .collect();
            let metadata = m.header.as_ref().map(|(metadata, _)| metadata.clone()).unwrap_or_default();
            let _ = m.described.set(Ok(Described { metadata, objects }));
        }
        let mut first_error = None;
        for (&msg, result) in whole.iter().zip(parsed) {
            let m = &self.messages[msg];
            let result = result.map_err(|e| format!("message at byte {}: {e}", m.offset));
            if let Err(e) = &result {
                first_error.get_or_insert_with(|| e.clone());
            }
            let _ = m.described.set(result);
        }
        first_error.map_or(Ok(()), |e| Err(format_err(format!("{}: {e}", self.source))))
    }

    /// Message `msg`'s metadata (described first).
    fn metadata<'py>(&self, py: Python<'py>, msg: usize) -> PyResult<Bound<'py, PyDict>> {
        metadata_to_py(py, &self.described(msg)?.metadata)
    }

    /// Message `msg`'s descriptors (described first).
    fn descriptors<'py>(&self, py: Python<'py>, msg: usize) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for object in &self.described(msg)?.objects {
            list.append(descriptor_to_py(py, &object.descriptor)?)?;
        }
        Ok(list)
    }

    /// `(shape, dtype)` of each object of message `msg`: the table's where it holds the message
    /// (nothing fetched), else from its description.
    fn object_layouts(&self, msg: usize) -> PyResult<Vec<(Vec<u64>, String)>> {
        (0..self.frames(msg)?.len())
            .map(|obj| self.layout_descriptor(msg, obj).map(|d| (d.shape.clone(), d.dtype.to_string())))
            .collect()
    }

    /// Object `obj`'s shape (as `object_layouts`).
    fn shape(&self, msg: usize, obj: usize) -> PyResult<Vec<u64>> {
        self.object(msg, obj)?;
        Ok(self.layout_descriptor(msg, obj)?.shape.clone())
    }

    /// `FileHandle.fingerprint` of object `obj` where it is known without fetching the payload
    /// (the frame's inline hash, or a frame read with its message), else `None`.
    fn fingerprint(&self, msg: usize, obj: usize) -> PyResult<Option<String>> {
        self.object(msg, obj)?;
        let m = &self.messages[msg];
        if let Some(Ok(described)) = m.described.get() {
            return Ok(described.objects[obj].fingerprint.clone());
        }
        let (Some(table), Some(first)) = (&self.table, m.first_row) else {
            return Ok(None);
        };
        let row = first + obj;
        let descriptor = &table.descriptors[table.descriptor[row] as usize];
        Ok(table.has_frame_hash[row].then(|| fingerprint(descriptor, Stored::FrameHash(table.frame_hash[row]))))
    }

    /// `(descriptor CBOR, payload offset in the file, payload length)` of object `obj` where a
    /// read may fetch parts of its payload (see `read_payload_ranges`), else `None`.
    fn payload<'py>(&self, py: Python<'py>, msg: usize, obj: usize) -> PyResult<Option<(Bound<'py, PyBytes>, u64, u64)>> {
        self.object(msg, obj)?;
        let Some(Ok(described)) = self.messages[msg].described.get() else {
            return Ok(None);
        };
        Ok(described.objects[obj].payload.as_ref().map(|(cbor, offset, length)| (PyBytes::new(py, cbor), *offset, *length)))
    }
}

/// Adds this module's class and function to `_core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RemoteMessages>()?;
    m.add_function(wrap_pyfunction!(scan_remote, m)?)
}
