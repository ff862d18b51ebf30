//! One mapped `.tgm` file: the walk that finds its messages, and each message's frames parsed
//! on first use. The binding's `FileHandle` is this and its Python methods.

use std::fs::File;
use std::ops::Range;
use std::sync::OnceLock;

use memmap2::Mmap;
use tensogram::wire::MAGIC;

use crate::errors::{CoreError, CoreResult, Kind};
use crate::source::message::ParsedMessage;
use crate::wire::{foreign, frames};

/// A `.tgm` file mapped once and shared by every thread: `&self` methods only.
pub struct MappedFile {
    path: String,
    map: Mmap,
    /// `(offset, length)` of every message; together they cover the file exactly.
    spans: Vec<(usize, usize)>,
    /// Each message's frames, parsed on first use.
    parsed: Vec<OnceLock<CoreResult<ParsedMessage>>>,
    /// Why the bytes after the last message are none ([`MappedFile::open_complete`] only).
    cut: Option<CoreError>,
}

/// Finds every message, requiring that they tile the file: a truncated message or bytes that
/// belong to no message are errors, never skipped (`tensogram::scan` skips them silently).
pub fn index_messages(data: &[u8]) -> CoreResult<Vec<(usize, usize)>> {
    index_messages_with(data, |_| {})
}

/// `index_messages`, calling `passed(end)` after each message.
fn index_messages_with(data: &[u8], passed: impl FnMut(usize)) -> CoreResult<Vec<(usize, usize)>> {
    match complete_messages(data, passed)? {
        (_, Some(cut)) => Err(cut),
        (spans, None) => Ok(spans),
    }
}

/// `(offset, length)` of messages.
type Spans = Vec<(usize, usize)>;

/// The messages up to the first bytes that are not a whole message, and why they are not
/// (`None`: the messages tile the file); an error where the file holds no message at all.
fn complete_messages(data: &[u8], mut passed: impl FnMut(usize)) -> CoreResult<(Spans, Option<CoreError>)> {
    let format = |m: String| CoreError::new(Kind::Format, m);
    if data.is_empty() {
        return Err(format("the file is empty".into()));
    }
    if !foreign::starts_as_tensogram(data) {
        return Err(foreign::not_tensogram("file", data));
    }
    let mut spans = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        let here = |m: &str| {
            format(format!("bytes {pos}..{} (after {} complete message(s)) {m}", data.len(), spans.len()))
        };
        if !data[pos..].starts_with(MAGIC) {
            return Ok((spans.clone(), Some(here("are not a message: trailing garbage or a corrupt file"))));
        }
        let length = match frames::message_length(&data[pos..]) {
            Ok(length) => length,
            Err(e) => return Ok((spans.clone(), Some(here(&format!("are {}", e.message))))),
        };
        spans.push((pos, length));
        pos += length;
        passed(pos);
    }
    Ok((spans, None))
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

impl MappedFile {
    /// Maps the file at `path` and finds its messages.
    pub fn open(path: &str) -> CoreResult<MappedFile> {
        let file = Self::open_complete(path)?;
        match file.cut {
            Some(cut) => Err(cut),
            None => Ok(file),
        }
    }

    /// [`MappedFile::open`] of the complete messages only: a file cut short (or ending in bytes
    /// of no message) keeps the messages before the cut, and [`MappedFile::cut`] says why the
    /// rest is none (cfgrib's `errors="warn"`). A file without one complete message is an error.
    pub fn open_complete(path: &str) -> CoreResult<MappedFile> {
        let os = |e: std::io::Error| CoreError::new(Kind::Os, format!("{path}: {e}"));
        let file = File::open(path).map_err(os)?;
        let size = file.metadata().map_err(os)?.len();
        let map = if size == 0 {
            // mmap refuses empty files; an empty anonymous map gives the same "empty file" error.
            memmap2::MmapOptions::new().len(0).map_anon().and_then(|m| m.make_read_only())
        } else {
            // SAFETY: the map is read-only; a file truncated by another process while mapped
            // is outside what any mmap reader can defend against (documented in docs/errors.md).
            unsafe { Mmap::map(&file) }
        }
        .map_err(|e| CoreError::new(Kind::Os, format!("{path}: cannot map the file: {e}")))?;
        let mut released = 0;
        let (spans, cut) = complete_messages(&map, |pos| {
            if pos - released >= RELEASE_WINDOW {
                release(&map, released..pos);
                released = pos;
            }
        })
        .map_err(|e| e.context(path))?;
        let cut = cut.map(|e| e.context(path));
        if spans.is_empty() {
            if let Some(cut) = cut {
                return Err(cut);
            }
        }
        release(&map, 0..map.len());
        let parsed = spans.iter().map(|_| OnceLock::new()).collect();
        Ok(MappedFile { path: path.to_owned(), map, spans, parsed, cut })
    }

    /// Why the bytes after the last message are not one (a file [`MappedFile::open_complete`]
    /// kept the complete messages of), else `None`.
    pub fn cut(&self) -> Option<&CoreError> {
        self.cut.as_ref()
    }

    /// Drops the file's pages from the process's resident memory (see `release`).
    pub fn release_all(&self) {
        release(&self.map, 0..self.map.len())
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn message_count(&self) -> usize {
        self.spans.len()
    }

    /// `(offset, bytes)` of every message, in file order; the pages of messages passed are
    /// released as the walk goes on (see `release`).
    pub fn messages(&self) -> impl Iterator<Item = (usize, &[u8])> + Send + '_ {
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
    pub fn check_message(&self, msg: i64) -> CoreResult<usize> {
        usize::try_from(msg).ok().filter(|&m| m < self.spans.len()).ok_or_else(|| {
            CoreError::new(
                Kind::Index,
                format!("{}: message {msg} is out of range ({} messages)", self.path, self.spans.len()),
            )
        })
    }

    pub fn message_bytes(&self, msg: usize) -> &[u8] {
        let (offset, length) = self.spans[msg];
        &self.map[offset..offset + length]
    }

    /// The parsed frames of message `msg` (parsed on first use, then shared).
    pub fn message(&self, msg: i64) -> CoreResult<&ParsedMessage> {
        let msg = self.check_message(msg)?;
        self.parsed[msg]
            .get_or_init(|| {
                ParsedMessage::parse(self.message_bytes(msg))
                    .map_err(|e| e.context(&format!("{}: message {msg}", self.path)))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Message `msg` parsed and object `obj`'s place in it, or an error naming the file.
    pub fn object(&self, msg: i64, obj: i64) -> CoreResult<(&ParsedMessage, usize)> {
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

    /// The file's size in bytes.
    pub fn size(&self) -> usize {
        self.map.len()
    }

    /// `(offset, length)` of every message, in file order.
    pub fn spans(&self) -> &[(usize, usize)] {
        &self.spans
    }

    /// Whether message `msg` has been parsed already (a lookup that costs nothing).
    pub fn is_parsed(&self, msg: i64) -> bool {
        usize::try_from(msg).ok().and_then(|m| self.parsed.get(m)).is_some_and(|p| p.get().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{self, Written};
    use tensogram::wire::END_MAGIC;

    /// A message of one object holding `values`.
    fn message(values: &[u8]) -> Vec<u8> {
        testing::message(values, Written::Header)
    }

    /// The same, written in streaming mode (no length in the preamble). Its payload holds the
    /// end marker: a walk that searched for it would stop inside the payload.
    fn streaming_message() -> Vec<u8> {
        testing::message(&[END_MAGIC.as_slice(), END_MAGIC].concat(), Written::Streaming)
    }

    fn error(data: &[u8]) -> String {
        let err = index_messages(data).unwrap_err();
        assert_eq!(err.kind, Kind::Format);
        err.message
    }

    #[test]
    fn messages_must_tile_the_file() {
        let (a, b, s) = (message(&[1, 2, 3]), message(&[4; 100]), streaming_message());
        let file = [a.as_slice(), &s, &b].concat();
        assert_eq!(index_messages(&file).unwrap(), vec![(0, a.len()), (a.len(), s.len()), (a.len() + s.len(), b.len())]);

        assert!(error(&[]).contains("the file is empty"));
        assert!(error(b"GRIB....").contains("not a Tensogram file"));
        assert!(error(&[a.as_slice(), b"junk"].concat()).contains("trailing garbage"));
        let truncated = &file[..file.len() - 1];
        assert!(error(truncated).contains("truncated"), "{}", error(truncated));
        assert!(error(truncated).contains("after 2 complete message(s)"));
        assert!(error(&s[..s.len() - 1]).contains("streaming-mode"));
    }

    #[test]
    fn a_mapped_file_names_itself_in_errors() {
        let path = std::env::temp_dir().join(format!("tgm-core-mapped-{}.tgm", std::process::id()));
        std::fs::write(&path, [message(&[1, 2, 3]), message(&[4, 5])].concat()).unwrap();
        let name = path.to_str().unwrap();
        let file = MappedFile::open(name).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.message_count(), 2);
        assert!(!file.is_parsed(1));
        let (parsed, obj) = file.object(1, 0).unwrap();
        assert_eq!(parsed.objects[obj].descriptor.shape, vec![2]);
        assert!(file.is_parsed(1) && !file.is_parsed(0));
        for err in [file.check_message(2).unwrap_err(), file.object(0, 1).unwrap_err(), file.message(-1).unwrap_err()] {
            assert_eq!(err.kind, Kind::Index);
            assert!(err.message.starts_with(name), "{}", err.message);
        }
        let missing = MappedFile::open(name).err().unwrap();
        assert_eq!(missing.kind, Kind::Os);
        assert!(missing.message.starts_with(name));
    }
}
