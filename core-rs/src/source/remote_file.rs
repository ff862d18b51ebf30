//! A remote file read by byte range: every message's place, what is known of its objects, and
//! the walks (`remote_walk`) that fetch the rest, without any I/O of its own. It is built from
//! the opening [`Scan`] ([`RemoteFile::from_scan`]) or from a metadata table that an index
//! carries and the file's size ([`RemoteFile::from_index`]); the caller moves the bytes that
//! [`Description`] and [`PayloadRead`] ask for.
//!
//! Where every message came whole the state is the metadata table of the core scan (frames,
//! descriptors, hashes) and nothing is parsed per message; a message's metadata and descriptors
//! are fetched again on first use. Otherwise the table (`table`) joins the tables of the runs of
//! messages that came whole, scanned at opening, and the rows of the messages read by their
//! header, built from their metadata frame and their objects' descriptors once those are
//! described.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

use tensogram::{DataObjectDescriptor, GlobalMetadata};

use crate::errors::{CoreError, CoreResult, Kind};
use crate::encoding::packing::Unpacked;
use crate::read::fetch::PayloadRanges;
use crate::source::message::{fingerprint, ObjectEntry, ParsedMessage, Stored};
use crate::source::remote_walk::{indexed, postamble, Describe, Found, Part, Ranges, Scan, Settings};
use crate::read::selection::AxisSel;
use crate::wire::frames::{tail_hash, OBJECT_TAIL};
use crate::table::{self, ObjectParts, Table};

fn format_err(m: impl Into<String>) -> CoreError {
    CoreError::new(Kind::Format, m)
}

/// One object of a described message.
#[derive(Debug)]
struct Object {
    descriptor: DataObjectDescriptor,
    /// Known without fetching the payload (the frame's inline hash, or a frame at hand).
    fingerprint: Option<u64>,
    /// `(descriptor CBOR, payload offset in the file, payload length)` where a read may fetch
    /// parts of the payload.
    payload: Option<(Vec<u8>, u64, u64)>,
    /// What the table takes of an object of a message read by its header (`ObjectParts`).
    parts: Option<Parts>,
}

/// `ObjectParts` less the descriptor and frame, which `Object` and `Message` hold.
#[derive(Debug)]
struct Parts {
    cbor: Vec<u8>,
    payload: Range<u64>,
    hash: Option<u64>,
}

#[derive(Debug)]
struct Described {
    metadata: GlobalMetadata,
    objects: Vec<Object>,
}

#[derive(Debug)]
struct Message {
    offset: u64,
    length: u64,
    /// Each data-object frame, `(file offset, length)`; `Err`: the message is corrupt.
    frames: CoreResult<Vec<(u64, u64)>>,
    /// The metadata of a message read by its header or footer, and its metadata frame's CBOR
    /// (its objects are described later).
    header: Option<(GlobalMetadata, Vec<u8>)>,
    /// The first row of its objects in the table, when the table holds it.
    first_row: Option<usize>,
    described: OnceLock<CoreResult<Described>>,
}

/// Where the table of a remote file comes from.
#[derive(Debug)]
enum Known {
    /// The scan's, every message having come whole.
    Scanned(Table),
    /// An index's layout columns: the rest of its table is the index's own.
    Indexed(Table),
    /// Built on demand from the runs of messages that came whole, scanned at opening, and the
    /// messages read by their header, once described: `(their messages, table)`.
    Runs(Vec<(Range<usize>, CoreResult<Table>)>),
}

/// Every message of a remote file: the state of `tgm_xarray.source.remote.RemoteHandle`.
#[derive(Debug)]
pub struct RemoteFile {
    source: String,
    messages: Vec<Message>,
    known: Known,
    tail_guess: u64,
}

/// The opening scan of the remote file of `size` bytes (`RemoteFile::from_scan` takes it once
/// `wanted` gives `None`).
pub fn scan(source: &str, size: u64, settings: Settings) -> Scan {
    Scan::new(source, size, settings)
}

/// Why a message read whole cannot be read, found without parsing it: its postamble disagrees.
fn whole_error(found: &Found) -> Option<CoreError> {
    let agrees = postamble(&found.data).is_ok_and(|(_, length)| length == found.length || length == 0);
    (!agrees).then(|| format_err("its postamble does not match its preamble"))
}

/// The objects of a message read whole, parsed frame by frame (the index is not needed).
fn parse_whole(offset: u64, bytes: &[u8]) -> CoreResult<(Vec<(u64, u64)>, Described)> {
    let parsed = ParsedMessage::parse(bytes)?;
    let mut frames = Vec::with_capacity(parsed.objects.len());
    let mut objects = Vec::with_capacity(parsed.objects.len());
    for entry in &parsed.objects {
        frames.push((offset + entry.frame.start as u64, entry.frame.len() as u64));
        let cbor = tensogram::metadata::object_descriptor_to_cbor(&entry.descriptor)
            .map_err(|e| CoreError::from_tensogram(&e, "cannot encode the descriptor again"))?;
        objects.push(Object {
            descriptor: entry.descriptor.clone(),
            fingerprint: Some(entry.fingerprint(bytes)),
            payload: Some((cbor, offset + entry.payload.start as u64, entry.payload.len() as u64)),
            parts: None,
        });
    }
    Ok((frames, Described { metadata: parsed.metadata, objects }))
}

impl RemoteFile {
    /// The file `source` as its scan found it (`found`: `Scan::finish`). `tail_guess`: bytes
    /// fetched from the end of a data-object frame to describe it.
    pub fn from_scan(source: &str, found: Vec<Found>, tail_guess: u64) -> Self {
        let mut runs = Self::whole_runs(source, &found);
        let scanned = match &mut runs[..] {
            [(run, Ok(table))] if run.len() == found.len() => Some(std::mem::take(table)),
            _ => None,
        };
        let (messages, known) = match scanned {
            Some(table) => (Self::from_table(&table), Known::Scanned(table)),
            None => (found.iter().map(Self::from_found).collect(), Known::Runs(runs)),
        };
        RemoteFile { source: source.to_owned(), messages, known, tail_guess }
    }

    /// The file `source` of `size` bytes as an index's metadata table lists it: nothing is
    /// fetched. Of `table` only the layout columns are read: `n_messages`, `msg`, `frame_start`,
    /// `frame_end`, `descriptor`, `descriptors`, `frame_hash`, `has_frame_hash`,
    /// `message_offset` and `message_length`. Metadata and descriptors (with their `params`) are
    /// fetched on first use, each message whole, and checked against the table.
    pub fn from_index(source: &str, size: u64, table: Table, tail_guess: u64) -> CoreResult<Self> {
        let bad = |why: String| format_err(format!("{source}: the index does not fit the file: {why}"));
        let rows = table.msg.len();
        let per_row = [table.frame_start.len(), table.frame_end.len(), table.descriptor.len(), table.frame_hash.len(), table.has_frame_hash.len()];
        if per_row.iter().any(|&n| n != rows) || [table.message_offset.len(), table.message_length.len()] != [table.n_messages; 2] {
            return Err(bad("its columns differ in length".into()));
        }
        let mut end = 0;
        for (msg, (&offset, &length)) in table.message_offset.iter().zip(&table.message_length).enumerate() {
            if offset < end || length <= 0 || offset.saturating_add(length) as u64 > size {
                return Err(bad(format!("message {msg} lies outside the file or overlaps another")));
            }
            end = offset + length;
        }
        let mut frame_end = 0;
        for (row, &msg) in table.msg.iter().enumerate() {
            let (start, stop) = (table.frame_start[row], table.frame_end[row]);
            let within = usize::try_from(msg).ok().filter(|&m| m < table.n_messages).is_some_and(|m| {
                let (offset, length) = (table.message_offset[m], table.message_length[m]);
                offset <= start && start < stop && stop <= offset + length
            });
            let known = usize::try_from(table.descriptor[row]).is_ok_and(|d| d < table.descriptors.len());
            if !within || !known || start < frame_end || table.msg[..row].last().is_some_and(|&m| m > msg) {
                return Err(bad(format!("object row {row} lies outside its message or out of order")));
            }
            frame_end = stop;
        }
        let messages = Self::from_table(&table);
        Ok(RemoteFile { source: source.to_owned(), messages, known: Known::Indexed(table), tail_guess })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The table that lists every message's objects, where there is one (a scan's or an index's).
    fn layout_table(&self) -> Option<&Table> {
        match &self.known {
            Known::Scanned(table) | Known::Indexed(table) => Some(table),
            Known::Runs(_) => None,
        }
    }

    /// The tables of the runs of messages that came whole, each scanned as a mapped file's
    /// messages are (`Err`: the first that cannot be read, named by its number in `source`).
    fn whole_runs(source: &str, found: &[Found]) -> Vec<(Range<usize>, CoreResult<Table>)> {
        let mut runs = Vec::new();
        let mut first = 0;
        while first < found.len() {
            let end = first + found[first..].iter().take_while(|m| m.part == Part::Whole).count();
            if end == first {
                first += 1;
                continue;
            }
            let run = &found[first..end];
            let where_ = |i: usize| format!("{source}: message {}", first + i);
            let bad = run.iter().enumerate().find_map(|(i, m)| whole_error(m).map(|e| e.context(&where_(i))));
            let table = match bad {
                Some(error) => Err(error),
                None => table::scan(run.iter().map(|m| (m.offset as usize, &m.data[..])), where_),
            };
            runs.push((first..end, table));
            first = end;
        }
        runs
    }

    /// The metadata table of the messages (`table::table_of_files`): the scan's where every
    /// message came whole, else built here, which needs every message read by its header
    /// described (`describe`). A file opened from an index has none here: the index holds it.
    pub fn table(&self) -> CoreResult<Cow<'_, Table>> {
        let runs = match &self.known {
            Known::Scanned(table) => return Ok(Cow::Borrowed(table)),
            Known::Indexed(_) => {
                let why = "opened from its index, whose metadata table is the one to use";
                return Err(CoreError::new(Kind::Value, format!("{}: {why}", self.source)));
            }
            Known::Runs(runs) => runs,
        };
        let mut builder = table::Builder::default();
        let mut runs = runs.iter().peekable();
        let mut msg = 0;
        while msg < self.messages.len() {
            if let Some((run, table)) = runs.next_if(|(run, _)| run.start == msg) {
                builder.append(table.as_ref().map_err(CoreError::clone)?);
                msg = run.end;
                continue;
            }
            let m = &self.messages[msg];
            let frames = m.frames.as_ref().map_err(|e| self.in_file(e))?;
            let (Some((_, metadata)), Some(described)) = (&m.header, m.described.get()) else {
                let why = "its descriptors are not fetched yet (RemoteHandle.parse_all fetches them)";
                return Err(CoreError::new(Kind::Value, format!("{}: message {msg}: {why}", self.source)));
            };
            let described = described.as_ref().map_err(|e| self.in_file(e))?;
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
            builder.parts(m.offset as usize, m.length as usize, metadata, &objects)
                .map_err(|e| e.context(&format!("{}: message {msg}", self.source)))?;
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
        let at = |e: CoreError| e.context(&format!("message at byte {}", found.offset));
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

    /// A stored error of one of the file's messages, named by the file.
    fn in_file(&self, e: &CoreError) -> CoreError {
        e.clone().context(&self.source)
    }

    fn message(&self, msg: usize) -> CoreResult<&Message> {
        let n = self.messages.len();
        self.messages
            .get(msg)
            .ok_or_else(|| CoreError::new(Kind::Index, format!("{}: message {msg} is out of range ({n} messages)", self.source)))
    }

    /// `(file offset, length)` of every data-object frame of message `msg`.
    pub fn frames(&self, msg: usize) -> CoreResult<&[(u64, u64)]> {
        self.message(msg)?.frames.as_deref().map_err(|e| self.in_file(e))
    }

    fn described(&self, msg: usize) -> CoreResult<&Described> {
        self.frames(msg)?;
        match self.messages[msg].described.get() {
            Some(Ok(described)) => Ok(described),
            Some(Err(e)) => Err(self.in_file(e)),
            None => Err(format_err(format!("{}: message {msg} is not described yet", self.source))),
        }
    }

    /// Object `obj`'s descriptor from the message's description, else the table's, which has no
    /// `params` (they differ object by object): for layouts and fingerprints only.
    fn layout_descriptor(&self, msg: usize, obj: usize) -> CoreResult<&DataObjectDescriptor> {
        let m = self.message(msg)?;
        if let (None, Some(table), Some(first)) = (m.described.get(), self.layout_table(), m.first_row) {
            return Ok(&table.descriptors[table.descriptor[first + obj] as usize]);
        }
        Ok(&self.described(msg)?.objects[obj].descriptor)
    }

    fn object(&self, msg: usize, obj: usize) -> CoreResult<(u64, u64)> {
        let frames = self.frames(msg)?;
        frames.get(obj).copied().ok_or_else(|| {
            let message = format!("{}: message {msg}: object {obj} is out of range ({} objects)", self.source, frames.len());
            CoreError::new(Kind::Index, message)
        })
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// `(offset, length)` of message `msg`.
    pub fn span(&self, msg: usize) -> CoreResult<(u64, u64)> {
        let m = self.message(msg)?;
        Ok((m.offset, m.length))
    }

    /// Whether message `msg`'s metadata and descriptors are at hand (or it is known corrupt).
    pub fn is_described(&self, msg: usize) -> CoreResult<bool> {
        let m = self.message(msg)?;
        Ok(m.frames.is_err() || m.described.get().is_some())
    }

    /// Whether reads of message `msg` need it described first: it was read by its header or
    /// footer, and its objects' payloads are found from their descriptors.
    pub fn reads_need_description(&self, msg: usize) -> CoreResult<bool> {
        let m = self.message(msg)?;
        Ok(m.header.is_some() && m.described.get().is_none())
    }

    /// `(start, stop)` in the file of object `obj`'s data-object frame.
    pub fn frame_range(&self, msg: usize, obj: usize) -> CoreResult<(u64, u64)> {
        let (start, length) = self.object(msg, obj)?;
        Ok((start, start + length))
    }

    /// The walk that fetches what describes the messages `wanted` not described yet, all in the
    /// same requests: the objects' descriptors from the ends of their frames for messages read
    /// by their header or footer, the whole message for the others. [`RemoteFile::described_by`]
    /// keeps what it found.
    pub fn describe(&self, wanted: &[usize]) -> CoreResult<Description> {
        let mut todo = Vec::new();
        for &msg in wanted {
            if !self.is_described(msg)? && !todo.contains(&msg) {
                todo.push(msg);
            }
        }
        let (by_index, whole): (Vec<usize>, Vec<usize>) = todo.into_iter().partition(|&m| self.messages[m].header.is_some());
        let frame_list = |m: usize| self.frames(m).map(<[_]>::to_vec).unwrap_or_default();
        let objects: Vec<(u64, usize)> =
            by_index.iter().flat_map(|&m| (0..frame_list(m).len()).map(move |o| (self.messages[m].offset, o))).collect();
        let frames: Vec<(u64, u64)> = by_index.iter().flat_map(|&m| frame_list(m)).collect();
        let spans: Ranges = whole.iter().map(|&m| (self.messages[m].offset, self.messages[m].offset + self.messages[m].length)).collect();
        Ok(Description {
            source: self.source.clone(),
            by_index,
            whole,
            spans,
            walk: Describe::new(frames, objects, self.tail_guess),
            stage: Stage::First,
            whole_bytes: Vec::new(),
        })
    }

    /// Keeps what `description` (of this file, fed until it wanted nothing more) found: every
    /// message it describes is described, or known corrupt (the first such error is returned).
    pub fn described_by(&self, description: Description) -> CoreResult<()> {
        let Description { source, by_index, whole, walk, whole_bytes, .. } = description;
        let mut described = walk.finish().map_err(|e| e.context(&source))?.into_iter();
        for &msg in &by_index {
            let m = &self.messages[msg];
            let objects = described
                .by_ref()
                .take(m.frames.as_ref().map_or(0, |f| f.len()))
                .map(|d| Object {
                    fingerprint: match (d.hash, &d.frame) {
                        (Some(hash), _) => Some(fingerprint(&d.descriptor, Stored::FrameHash(hash))),
                        (None, Some(frame)) => ObjectEntry::from_frame(frame).ok().map(|e| e.fingerprint(frame)),
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
        for (&msg, bytes) in whole.iter().zip(&whole_bytes) {
            let m = &self.messages[msg];
            let result = parse_whole(m.offset, bytes).and_then(|(frames, described)| {
                // The table's frames and the parse's agree, or the file changed under us.
                if m.frames.as_ref().is_ok_and(|known| *known == frames) {
                    Ok(described)
                } else {
                    Err(format_err("the message changed since it was opened"))
                }
            });
            let result = result.map_err(|e| e.context(&format!("message at byte {}", m.offset)));
            if let Err(e) = &result {
                first_error.get_or_insert_with(|| e.clone());
            }
            let _ = m.described.set(result);
        }
        first_error.map_or(Ok(()), |e| Err(self.in_file(&e)))
    }

    /// Message `msg`'s metadata (described first).
    pub fn metadata(&self, msg: usize) -> CoreResult<&GlobalMetadata> {
        Ok(&self.described(msg)?.metadata)
    }

    /// Message `msg`'s descriptors (described first).
    pub fn descriptors(&self, msg: usize) -> CoreResult<Vec<&DataObjectDescriptor>> {
        Ok(self.described(msg)?.objects.iter().map(|o| &o.descriptor).collect())
    }

    /// `(shape, dtype)` of each object of message `msg`: the table's where it holds the message
    /// (nothing fetched), else from its description.
    pub fn object_layouts(&self, msg: usize) -> CoreResult<Vec<(Vec<u64>, String)>> {
        (0..self.frames(msg)?.len())
            .map(|obj| self.layout_descriptor(msg, obj).map(|d| (d.shape.clone(), d.dtype.to_string())))
            .collect()
    }

    /// Object `obj`'s shape (as `object_layouts`).
    pub fn shape(&self, msg: usize, obj: usize) -> CoreResult<&[u64]> {
        self.object(msg, obj)?;
        Ok(&self.layout_descriptor(msg, obj)?.shape)
    }

    /// `FileHandle.fingerprint` of object `obj` where it is known without fetching the payload
    /// (the frame's inline hash, or a frame read with its message), else `None`.
    pub fn fingerprint(&self, msg: usize, obj: usize) -> CoreResult<Option<u64>> {
        self.object(msg, obj)?;
        let m = &self.messages[msg];
        if let Some(Ok(described)) = m.described.get() {
            return Ok(described.objects[obj].fingerprint);
        }
        let (Some(table), Some(first)) = (self.layout_table(), m.first_row) else {
            return Ok(None);
        };
        Ok(table.hashed_fingerprint(first + obj))
    }

    /// The inline hash the table (the scan's, or the index's) records of object `obj`'s frame.
    fn recorded_hash(&self, msg: usize, obj: usize) -> Option<u64> {
        let (table, first) = (self.layout_table()?, self.messages.get(msg)?.first_row?);
        let row = first + obj;
        table.has_frame_hash.get(row).copied().unwrap_or(false).then(|| table.frame_hash[row])
    }

    /// Checks object `obj`'s frame as fetched (all of it, or its last [`OBJECT_TAIL`] bytes)
    /// against the hash the table records of it: a file republished since it was opened or
    /// indexed (objects moved, sizes kept) is found by the read that would serve another
    /// object's values, whatever the table was made from.
    pub fn check_frame(&self, msg: usize, obj: usize, fetched: &[u8]) -> CoreResult<()> {
        self.object(msg, obj)?;
        match self.recorded_hash(msg, obj) {
            Some(expected) => check_tail(fetched, expected),
            None => Ok(()),
        }
    }

    /// The read of `sel` of object `obj` from byte ranges of its payload, where its message is
    /// described and the object qualifies (`PayloadRanges::plan`); else `None`: the read
    /// fetches the object's frame. The frame's footer is fetched with the payload's ranges where
    /// the table records its hash (see [`RemoteFile::check_frame`]).
    pub fn payload_read(&self, msg: usize, obj: usize, sel: &[AxisSel]) -> CoreResult<Option<PayloadRead>> {
        let (_, stop) = self.frame_range(msg, obj)?;
        let Some(Ok(described)) = self.messages[msg].described.get() else {
            return Ok(None);
        };
        let object = &described.objects[obj];
        let Some((_, offset, length)) = &object.payload else {
            return Ok(None);
        };
        let tail = self.recorded_hash(msg, obj).map(|hash| (stop.saturating_sub(OBJECT_TAIL), hash));
        let ranges = PayloadRanges::plan(&object.descriptor, sel, *length)?;
        Ok(ranges.map(|ranges| PayloadRead { descriptor: object.descriptor.clone(), offset: *offset, ranges, tail, pieces: None }))
    }
}

/// Where a [`Description`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Nothing asked yet.
    First,
    /// The whole messages and the ends of the frames asked for, at once.
    AskedFirst,
    /// The rest of the descriptors, in the walk's batches.
    Walk,
}

/// The walk of [`RemoteFile::describe`]: ask it what it `wanted`, `feed` it those bytes, until
/// it wants nothing more; then [`RemoteFile::described_by`].
#[derive(Debug)]
pub struct Description {
    source: String,
    by_index: Vec<usize>,
    whole: Vec<usize>,
    spans: Ranges,
    walk: Describe,
    stage: Stage,
    whole_bytes: Vec<Vec<u8>>,
}

impl Description {
    fn in_file(&self, e: CoreError) -> CoreError {
        e.context(&self.source)
    }

    /// The ranges to fetch next, `None` when everything asked for is at hand.
    pub fn wanted(&mut self) -> CoreResult<Option<Ranges>> {
        match self.stage {
            Stage::First => {
                let first = self.walk.wanted().map_err(|e| self.in_file(e))?.unwrap_or_default();
                self.stage = Stage::AskedFirst;
                let ranges = [self.spans.clone(), first].concat();
                Ok((!ranges.is_empty()).then_some(ranges))
            }
            Stage::AskedFirst => Ok(None), // fed nothing: `feed` moves on
            Stage::Walk if self.walk.is_empty() => Ok(None),
            Stage::Walk => self.walk.wanted().map_err(|e| self.in_file(e)),
        }
    }

    /// The bytes of the ranges `wanted` gave, in its order.
    pub fn feed(&mut self, mut pieces: Vec<Vec<u8>>) -> CoreResult<()> {
        match self.stage {
            Stage::First => Err(format_err("bytes fed that no step asked for")),
            Stage::AskedFirst => {
                if pieces.len() < self.spans.len() {
                    return Err(format_err(format!("{} pieces fed for {} messages", pieces.len(), self.spans.len())));
                }
                let rest = pieces.split_off(self.spans.len());
                self.whole_bytes = pieces;
                self.stage = Stage::Walk;
                if self.walk.is_empty() {
                    return Ok(());
                }
                self.walk.feed(rest)
            }
            Stage::Walk => self.walk.feed(pieces),
        }
    }
}

/// The frame's bytes as fetched are not those the table describes.
fn check_tail(fetched: &[u8], expected: u64) -> CoreResult<()> {
    if tail_hash(fetched) == Some(expected) {
        return Ok(());
    }
    Err(CoreError::new(
        Kind::Stale,
        "the object's bytes are not those the file's table (or its index) describes: the file changed since it was \
         opened or indexed (republished in place, its size kept); open it again (with index=False if its index is stale)",
    ))
}

/// A read of an object from byte ranges of its payload: `wanted` once, `feed`, then `read`.
pub struct PayloadRead {
    descriptor: DataObjectDescriptor,
    /// The payload's offset in the file.
    offset: u64,
    ranges: PayloadRanges,
    /// Where the frame's last [`OBJECT_TAIL`] bytes start in the file and the hash they must hold,
    /// fetched with the payload's ranges, where the table records the hash.
    tail: Option<(u64, u64)>,
    pieces: Option<Vec<Vec<u8>>>,
}

impl PayloadRead {
    pub fn descriptor(&self) -> &DataObjectDescriptor {
        &self.descriptor
    }

    /// The ranges of the file to fetch, `None` once they are fed.
    pub fn wanted(&self) -> CoreResult<Option<Ranges>> {
        if self.pieces.is_some() {
            return Ok(None);
        }
        let ranges = self.ranges.byte_ranges()?;
        let payload = ranges.into_iter().map(|(start, length)| (self.offset + start, self.offset + start + length));
        Ok(Some(payload.chain(self.tail.map(|(start, _)| (start, start + OBJECT_TAIL))).collect()))
    }

    pub fn feed(&mut self, mut pieces: Vec<Vec<u8>>) -> CoreResult<()> {
        if self.pieces.is_some() {
            return Err(format_err("bytes fed that no step asked for"));
        }
        if let Some((_, expected)) = self.tail {
            check_tail(&pieces.pop().unwrap_or_default(), expected)?;
        }
        self.pieces = Some(pieces);
        Ok(())
    }

    /// Reads the selection into `out` from the bytes fed, as `to` (see `PayloadRanges::read`).
    pub fn read(&self, out: &mut [u8], to: Unpacked) -> CoreResult<()> {
        let pieces = self.pieces.as_ref().ok_or_else(|| CoreError::new(Kind::Value, "the payload's bytes are not fed yet"))?;
        let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        self.ranges.read(&pieces, out, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::float_message as message;

    fn serve(file: &[u8], ranges: &Ranges) -> Vec<Vec<u8>> {
        ranges.iter().map(|&(a, b)| file[a as usize..b as usize].to_vec()).collect()
    }

    /// Opens `file` as the scan does, with these settings.
    fn open(file: &[u8], settings: Settings) -> RemoteFile {
        let mut walk = scan("file", file.len() as u64, settings);
        while let Some(ranges) = walk.wanted().expect("wanted") {
            walk.feed(serve(file, &ranges)).expect("fed");
        }
        RemoteFile::from_scan("mem", walk.finish(), settings.tail_guess)
    }

    fn describe(remote: &RemoteFile, file: &[u8], wanted: &[usize]) -> CoreResult<()> {
        let mut d = remote.describe(wanted)?;
        while let Some(ranges) = d.wanted()? {
            d.feed(serve(file, &ranges))?;
        }
        remote.described_by(d)
    }

    const LARGE: Settings =
        Settings { first_block: 1024, max_block: 8 << 20, read_ahead: 4, whole_message_max: 1024, header_guess: 4096, tail_guess: 256 };

    #[test]
    fn small_messages_give_the_scans_table_and_describe_whole() {
        let file = [message(16, 2), message(8, 1)].concat();
        let remote = open(&file, Settings::default());
        assert_eq!(remote.len(), 2);
        assert_eq!(remote.table().expect("table").n_messages, 2);
        assert_eq!(remote.object_layouts(1).expect("layouts"), vec![(vec![8], "float32".to_string())]);
        assert!(!remote.is_described(0).unwrap() && !remote.reads_need_description(0).unwrap());
        describe(&remote, &file, &[0, 0]).expect("described");
        assert_eq!(remote.descriptors(0).expect("descriptors").len(), 2);
        assert!(remote.fingerprint(0, 1).expect("fingerprint").is_some());
    }

    #[test]
    fn large_messages_are_described_from_their_frames_then_read_by_range() {
        let one = message(4096, 3);
        let file = one.repeat(2);
        let remote = open(&file, LARGE);
        assert!(remote.reads_need_description(1).unwrap());
        let err = remote.table().expect_err("not described");
        assert!(err.message.contains("not fetched yet"), "{}", err.message);
        describe(&remote, &file, &[0, 1]).expect("described");
        assert_eq!(remote.table().expect("table").msg.len(), 6);
        // Values 100..110 of object 2 of message 1, from byte ranges of its payload.
        let mut read = remote.payload_read(1, 2, &[AxisSel::Range { start: 100, step: 1, len: 10 }]).expect("plan").expect("by range");
        let ranges = read.wanted().expect("wanted").expect("ranges");
        assert!(ranges.iter().map(|(a, b)| b - a).sum::<u64>() < 4096);
        read.feed(serve(&file, &ranges)).expect("fed");
        assert!(read.wanted().expect("wanted").is_none());
        let mut out = vec![0u8; 40];
        read.read(&mut out, Unpacked::F64).expect("read");
        let values: Vec<f32> = out.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(values, (100..110).map(|v| v as f32).collect::<Vec<_>>());
    }

    #[test]
    fn a_file_from_an_index_fetches_nothing_until_described_and_checks_the_index() {
        let one = message(4096, 2);
        let file = one.repeat(3);
        let table = table::scan([(0, &one[..]), (one.len(), &one[..]), (2 * one.len(), &one[..])], |m| format!("message {m}")).expect("table");
        let remote = RemoteFile::from_index("mem", file.len() as u64, table.clone(), 256).expect("fits");
        assert_eq!(remote.len(), 3);
        assert_eq!(remote.object_layouts(2).expect("layouts"), vec![(vec![4096], "float32".to_string()); 2]);
        assert_eq!(remote.frame_range(1, 1).unwrap(), (table.frame_start[3] as u64, table.frame_end[3] as u64));
        assert!(remote.fingerprint(0, 0).expect("fingerprint").is_some()); // the frame's inline hash
        assert!(remote.table().expect_err("the index's").message.contains("opened from its index"));
        describe(&remote, &file, &[1]).expect("described whole");
        assert_eq!(remote.descriptors(1).expect("descriptors").len(), 2);
        // A table of another file: too large, or its frames elsewhere.
        let err = RemoteFile::from_index("mem", file.len() as u64 - 1, table.clone(), 256).expect_err("too short");
        assert!(err.message.starts_with("mem: the index does not fit the file"), "{}", err.message);
        let mut moved = table.clone();
        moved.frame_start[1] = moved.frame_start[0];
        assert!(RemoteFile::from_index("mem", file.len() as u64, moved, 256).is_err());
        let mut shifted = table;
        shifted.frame_start.iter_mut().chain(shifted.frame_end.iter_mut()).for_each(|b| *b += 8);
        let remote = RemoteFile::from_index("mem", file.len() as u64, shifted, 256).expect("fits");
        let err = describe(&remote, &file, &[0]).expect_err("disagrees with the file");
        assert!(err.message.contains("the message changed since it was opened"), "{}", err.message);
    }
}
