//! The walk over a file read by byte range (a remote object): which bytes to fetch next, where
//! the messages are, and what their fetched pieces say (metadata, index, each object's frame and
//! descriptor), on top of the `tensogram` crate's wire types. The caller only moves bytes: it
//! asks a walk what it `wanted`, fetches those ranges and `feed`s them back, until the walk
//! wants nothing more.
//!
//! Opening ([`Scan`]) reads the file from its start, hopping from preamble to preamble: small
//! messages are read whole, many per request (contiguous blocks, several in flight at once);
//! of large ones only the preamble and header frames (or the footer frames and postamble), never
//! the payload. A message written in streaming mode (no length in its preamble) is walked
//! forward from frame header to frame header, its data-object frames skipped. Descriptors of large messages come later ([`Describe`]), from the end of each
//! data-object frame that the message's index lists.

use std::collections::HashMap;
use std::ops::Range;

use tensogram::types::IndexFrame;
use tensogram::wire::{
    DataObjectFlags, FrameHeader, FrameType, MessageFlags, Preamble, DATA_OBJECT_FOOTER_SIZE, FRAME_HEADER_SIZE,
    POSTAMBLE_SIZE, PREAMBLE_SIZE,
};
use tensogram::{DataObjectDescriptor, GlobalMetadata};

use crate::errors::{CoreError, CoreResult};
use crate::source::message::walk;
use crate::wire::cbor::Walker;
use crate::wire::foreign;
use crate::wire::frames::{self, FrameWalk, Taken};

/// Byte ranges `[start, stop)` of the file.
pub type Ranges = Vec<(u64, u64)>;

/// How much a walk reads at once (the binding takes them from `tgm_xarray.source.remote`'s settings).
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The first request, and the first block of small messages.
    pub first_block: u64,
    /// Blocks double up to this size while the messages are small.
    pub max_block: u64,
    /// Blocks asked for at once while the messages are small.
    pub read_ahead: u64,
    /// Messages up to this size are read whole.
    pub whole_message_max: u64,
    /// First guess of a large message's preamble and header frames.
    pub header_guess: u64,
    /// Bytes read from the end of a message (footer frames) or a data-object frame (descriptor).
    pub tail_guess: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            first_block: 64 << 10,
            max_block: 8 << 20,
            read_ahead: 4,
            whole_message_max: 256 << 10,
            header_guess: 4096,
            tail_guess: 4096,
        }
    }
}

/// Where a message keeps the frames that locate its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Metadata and index after the preamble.
    Header,
    /// Metadata and index before the postamble (streaming writers).
    Footer,
    /// Read whole: per-object preceder frames, or no index.
    Whole,
}

/// `(total_length, layout)` of the preamble that starts `buf` (a length of 0: streaming mode).
pub fn preamble(buf: &[u8]) -> CoreResult<(u64, Layout)> {
    let preamble = Preamble::read_from(buf).map_err(|e| CoreError::format(format!("not a message start (bad preamble): {e}")))?;
    let has = |flag| preamble.flags.has(flag);
    let layout = if has(MessageFlags::FOOTER_METADATA) && has(MessageFlags::FOOTER_INDEX) {
        // Streaming writers merge per-object preceder metadata into the footer.
        Layout::Footer
    } else if has(MessageFlags::HEADER_METADATA)
        && has(MessageFlags::HEADER_INDEX)
        && !has(MessageFlags::FOOTER_METADATA)
        && !has(MessageFlags::PRECEDER_METADATA)
    {
        Layout::Header
    } else {
        Layout::Whole
    };
    Ok((preamble.total_length, layout))
}

/// `(first_footer_offset, total_length)` of the postamble in the last bytes of `buf`.
pub fn postamble(buf: &[u8]) -> CoreResult<(u64, u64)> {
    let postamble = frames::postamble_at_end(buf)?;
    Ok((postamble.first_footer_offset, postamble.total_length))
}

/// How a walk over a message's non-data frames ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// At a data-object (or preceder) frame: the header frames are complete.
    Data,
    /// At the end of the buffer, or done.
    End,
    /// In a frame that continues past the buffer: this many bytes from its start are needed.
    More(usize),
}

/// The metadata and index frames found at the start of a buffer.
#[derive(Debug)]
pub struct Frames {
    /// The metadata, and where its frame's CBOR lies in the buffer.
    pub metadata: Option<(GlobalMetadata, Range<usize>)>,
    pub index: Option<IndexFrame>,
    /// Bytes of complete frames (and their padding to 8 bytes).
    pub end: usize,
    pub next: Next,
}

/// Walks the metadata, index and hash frames at the start of `buf`, which begins `offset` bytes
/// into its message at a frame, by the wire's frame rule (`frames::FrameWalk`), until it has the
/// metadata and the index.
pub fn frames(buf: &[u8], offset: u64) -> CoreResult<Frames> {
    let (mut metadata, mut index) = (None, None);
    let mut walk = FrameWalk::new(buf, 0, buf.len(), offset as usize);
    let next = loop {
        if metadata.is_some() && index.is_some() {
            break Next::End; // what comes next (the hash frame) is not needed
        }
        let header = match walk.next_header()? {
            frames::Next::End => break Next::End,
            frames::Next::Needs(need) => break Next::More(need),
            frames::Next::Header(header) => header,
        };
        if frames::phase(header.frame_type) == 1 {
            break Next::Data;
        }
        let frame = match walk.frame(header)? {
            Taken::Frame(frame) => frame,
            Taken::Needs(need) => break Next::More(need),
        };
        let body = &buf[frame.body()];
        match frame.header.frame_type {
            FrameType::HeaderMetadata | FrameType::FooterMetadata => {
                let parsed = tensogram::metadata::cbor_to_global_metadata(body)
                    .map_err(|e| CoreError::from_tensogram(&e, "bad metadata frame"))?;
                metadata = Some((parsed, frame.body()));
            }
            FrameType::HeaderIndex | FrameType::FooterIndex => {
                let parsed = tensogram::metadata::cbor_to_index(body)
                    .map_err(|e| CoreError::from_tensogram(&e, "bad index frame"))?;
                check_index_order(&parsed.offsets, &parsed.lengths)?;
                index = Some(parsed)
            }
            _ => {}
        }
    };
    // Bytes passed as padding up to the end of the buffer do not count: they may run on into
    // bytes not fetched, and a header walk asks for more only where a frame ends the buffer.
    Ok(Frames { metadata, index, end: walk.passed().min(buf.len()), next })
}

/// An index lists the data-object frames in the order they are stored, one after the other: a
/// reader that trusts it (a remote one) must never be sent to another object's frame.
pub fn check_index_order(offsets: &[u64], lengths: &[u64]) -> CoreResult<()> {
    let disordered = offsets.len() != lengths.len()
        || offsets.windows(2).zip(lengths).any(|(pair, &length)| pair[0].saturating_add(length) > pair[1]);
    if disordered {
        return Err(CoreError::format("its index does not list the data-object frames in order: corrupt"));
    }
    Ok(())
}

/// What the first (`head`) and last (`tail`) bytes of a data-object frame that the index says
/// is `length` bytes long say: `(cbor_offset, flags, inline hash)` (`frames::object_footer`). The
/// descriptor is the CBOR item at `cbor_offset`. The frame's own header must agree with the index.
fn frame_footer(head: &[u8], tail: &[u8], length: u64) -> CoreResult<(u64, u16, Option<u64>)> {
    let header = FrameHeader::read_from(head).map_err(|e| CoreError::format(format!("bad frame header: {e}")))?;
    if header.frame_type == FrameType::NTensorFrame && header.total_length != length {
        return Err(CoreError::format(format!(
            "the index gives a data-object frame {length} bytes, its header {}: corrupt",
            header.total_length
        )));
    }
    let footer = frames::object_footer(&header, tail)?;
    Ok((footer.cbor_offset as u64, header.flags, footer.hash))
}

/// What `Scan` fetched of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// The whole message.
    Whole,
    /// Its preamble and header frames (metadata, index), and its last 24 bytes (`postamble`).
    Header { postamble: Vec<u8> },
    /// Its footer frames and postamble: `data` ends the message.
    Footer,
}

/// One message of the file and the bytes of it that carry its metadata.
#[derive(Debug, Clone)]
pub struct Found {
    pub offset: u64,
    pub length: u64,
    pub part: Part,
    pub data: Vec<u8>,
}

/// What the header or footer of a message read by it says.
#[derive(Debug, Clone)]
pub struct Indexed {
    pub metadata: GlobalMetadata,
    /// The metadata frame's CBOR, which the metadata table reads (`table::Builder::parts`).
    pub metadata_cbor: Vec<u8>,
    /// Each data-object frame, `(offset in the message, length)`.
    pub frames: Vec<(u64, u64)>,
}

/// A message read by its header or footer: its metadata and its objects' frames, checked
/// against the message.
pub fn indexed(found: &Found) -> CoreResult<Indexed> {
    let (parsed, start) = match &found.part {
        Part::Whole => return Err(CoreError::format("the message was read whole")),
        Part::Header { postamble: tail } => {
            if postamble(tail).map(|(_, length)| length).ok() != Some(found.length) {
                return Err(CoreError::format("its postamble does not match its preamble"));
            }
            let start = PREAMBLE_SIZE.min(found.data.len());
            let parsed = frames(&found.data[start..], PREAMBLE_SIZE as u64)?;
            if matches!(parsed.next, Next::More(_)) {
                return Err(CoreError::format("a header frame runs past the message end"));
            }
            (parsed, start)
        }
        Part::Footer => {
            // A streaming-mode message's postamble gives no length, as its preamble.
            let (first_footer, length) = postamble(&found.data)?;
            if (length != found.length && length != 0) || first_footer != found.length - found.data.len() as u64 {
                return Err(CoreError::format("its postamble does not match its preamble"));
            }
            (frames(&found.data[..found.data.len() - POSTAMBLE_SIZE], first_footer)?, 0)
        }
    };
    let (Some((metadata, cbor)), Some(index)) = (parsed.metadata, parsed.index) else {
        return Err(CoreError::format("its metadata or index frame is missing"));
    };
    let metadata_cbor = found.data[start + cbor.start..start + cbor.end].to_vec();
    let frames: Vec<(u64, u64)> = index.offsets.into_iter().zip(index.lengths).collect();
    if frames.iter().any(|&(offset, length)| offset < PREAMBLE_SIZE as u64 || offset.saturating_add(length) > found.length) {
        return Err(CoreError::format("its index points outside the message"));
    }
    Ok(Indexed { metadata, metadata_cbor, frames })
}

/// Contiguous bytes of the file at hand: `data` starts at `start`.
#[derive(Debug, Default)]
struct Window {
    start: u64,
    data: Vec<u8>,
}

impl Window {
    fn stop(&self) -> u64 {
        self.start + self.data.len() as u64
    }

    fn has(&self, a: u64, b: u64) -> bool {
        self.start <= a && b <= self.stop()
    }

    fn take(&self, a: u64, b: u64) -> &[u8] {
        &self.data[(a - self.start) as usize..(b - self.start) as usize]
    }
}

/// Where the forward walk over a streaming-mode message's frames is: its frame headers are
/// fetched one after the other (with the `ENDF` of the frame before), data-object frames
/// skipped, until the footer frames, fetched whole to the postamble.
#[derive(Debug, Clone)]
struct Stream {
    /// The message's offset.
    start: u64,
    /// Where the next frame header is looked for.
    at: u64,
    /// The frame skipped last, `(start, end, header)`: its `ENDF` is checked before going on.
    skipped: Option<(u64, u64, FrameHeader)>,
    /// Where the first footer frame starts.
    footer: Option<u64>,
    /// Where the message ends, once its postamble is found.
    end: Option<u64>,
    /// Bytes asked for at once: doubling while the frames are small, a header's guess after a
    /// large one (whose payload is not fetched).
    block: u64,
    /// Where the next frame starts if nothing but padding to 8 bytes follows the last one.
    next_frame: u64,
    /// Bytes other than that padding lie between frames: the footer's index, which does not
    /// count them, cannot place the objects (upstream's walk passes them), so the message is
    /// read whole and walked as a local one is.
    irregular: bool,
}

/// A pending request of the window: bytes before `keep_from` are dropped when it is fed.
#[derive(Debug)]
struct Request {
    keep_from: u64,
    ranges: Ranges,
}

/// The scan of a file that opening does: every message, with the bytes that carry its metadata.
#[derive(Debug)]
pub struct Scan {
    /// The file's name, which every error of the scan starts with.
    source: String,
    size: u64,
    settings: Settings,
    window: Window,
    block: u64,
    pending: Option<Request>,
    pos: u64,
    /// Blocks fetched at once: one until the first message says whether the messages are small.
    small: bool,
    ahead: u64,
    header_guess: u64,
    footer_guess: u64,
    found: Vec<Found>,
    /// Postambles of messages read by their header, by where they end.
    postambles: HashMap<u64, Vec<u8>>,
    /// Set once every message is found: the ends of the postambles still to fetch.
    missing: Option<Vec<u64>>,
    /// `(offset, total_length, layout)` of the last preamble parsed.
    head: Option<(u64, u64, Layout)>,
    /// The walk over the streaming-mode message at hand, and the block its walk starts with
    /// (the last one's: small messages follow each other).
    stream: Option<Stream>,
    stream_block: u64,
}

/// What a step of the scan needs: the bytes are at hand, or these ranges must be fetched first.
type Step<T> = Result<T, Ranges>;

impl Scan {
    pub fn new(source: &str, size: u64, settings: Settings) -> Self {
        Scan {
            source: source.to_owned(),
            size,
            window: Window::default(),
            block: settings.first_block,
            pending: None,
            pos: 0,
            small: true,
            ahead: 1,
            header_guess: settings.header_guess,
            footer_guess: settings.tail_guess,
            found: Vec::new(),
            postambles: HashMap::new(),
            missing: None,
            head: None,
            stream: None,
            stream_block: settings.header_guess,
            settings,
        }
    }

    /// Bytes `[a, b)` (clipped to the file's end) if at hand, else the ranges to fetch for them.
    /// `blocks`: how many whole blocks to fetch at once (growing to `max_block`), for small
    /// messages; 0: just what is missing.
    fn need(&mut self, a: u64, b: u64, blocks: u64) -> Step<&[u8]> {
        let b = b.min(self.size);
        if self.window.has(a, b) {
            return Ok(self.window.take(a, b));
        }
        let from = if self.window.start <= a && a <= self.window.stop() { self.window.stop() } else { a };
        let ranges = if blocks > 0 {
            let count = blocks.max((b - from).div_ceil(self.block));
            let last = self.size.min(from + count * self.block);
            let ranges = (from..last).step_by(self.block as usize).map(|p| (p, (p + self.block).min(self.size))).collect();
            self.block = (2 * self.block).min(self.settings.max_block);
            ranges
        } else {
            vec![(from, b)]
        };
        self.pending = Some(Request { keep_from: a, ranges: ranges.clone() });
        Err(ranges)
    }

    /// The ranges to fetch next, `None` when the scan is complete.
    pub fn wanted(&mut self) -> CoreResult<Option<Ranges>> {
        self.next_wanted().map_err(|e| e.context(&self.source))
    }

    fn next_wanted(&mut self) -> CoreResult<Option<Ranges>> {
        if let Some(missing) = &self.missing {
            let tail = POSTAMBLE_SIZE as u64;
            return Ok((!missing.is_empty()).then(|| missing.iter().map(|&end| (end - tail, end)).collect()));
        }
        while self.pos < self.size {
            match self.message()? {
                Ok(()) => {}
                Err(ranges) => return Ok(Some(ranges)),
            }
        }
        // The postambles of messages read by their header, to check them as a local read does:
        // most came with the next message's preamble, the others come in one batch.
        let missing: Vec<u64> = self
            .found
            .iter()
            .filter(|m| matches!(m.part, Part::Header { .. }) && !self.postambles.contains_key(&(m.offset + m.length)))
            .map(|m| m.offset + m.length)
            .collect();
        let wanted = self.missing.insert(missing);
        Ok((!wanted.is_empty()).then(|| wanted.iter().map(|&end| (end - POSTAMBLE_SIZE as u64, end)).collect()))
    }

    /// The bytes of the ranges `wanted` gave, in its order.
    pub fn feed(&mut self, pieces: Vec<Vec<u8>>) -> CoreResult<()> {
        self.take(pieces).map_err(|e| e.context(&self.source))
    }

    fn take(&mut self, pieces: Vec<Vec<u8>>) -> CoreResult<()> {
        if let Some(missing) = self.missing.take() {
            if pieces.len() != missing.len() {
                return Err(CoreError::format(format!("{} pieces fed for {} ranges", pieces.len(), missing.len())));
            }
            self.postambles.extend(missing.into_iter().zip(pieces));
            self.missing = Some(Vec::new());
            return Ok(());
        }
        let request = self.pending.take().ok_or_else(|| CoreError::format("bytes fed that no step asked for"))?;
        if pieces.len() != request.ranges.len() {
            return Err(CoreError::format(format!("{} pieces fed for {} ranges", pieces.len(), request.ranges.len())));
        }
        for (piece, &(a, b)) in pieces.iter().zip(&request.ranges) {
            if piece.len() as u64 != b - a {
                return Err(CoreError::format(format!("{} bytes fed for bytes {a}..{b}", piece.len())));
            }
        }
        let (a, window) = (request.keep_from, &mut self.window);
        if !(window.start <= a && a <= window.stop()) {
            // A gap: start afresh at `a`.
            *window = Window { start: a, data: Vec::new() };
        }
        // Bytes before `a` are done with.
        window.data.drain(..(a - window.start) as usize);
        window.start = a;
        pieces.iter().for_each(|p| window.data.extend_from_slice(p));
        Ok(())
    }

    /// Every message found, once `wanted` gives `None`.
    pub fn finish(mut self) -> Vec<Found> {
        for m in &mut self.found {
            if let Part::Header { postamble } = &mut m.part {
                *postamble = self.postambles.remove(&(m.offset + m.length)).unwrap_or_default();
            }
        }
        self.found
    }

    /// Goes over the message at `pos`; its state changes only once it is complete, so a step
    /// that has to fetch first starts afresh when fed.
    fn message(&mut self) -> CoreResult<Step<()>> {
        let (pos, size, head, tail) = (self.pos, self.size, PREAMBLE_SIZE as u64, POSTAMBLE_SIZE as u64);
        let found = self.found.len();
        // The preamble once: later steps of the message may have dropped it from the window.
        let (total, layout) = match self.head {
            Some((at, total, layout)) if at == pos => (total, layout),
            _ => {
                let step = if self.small {
                    self.need(pos, pos + head, self.ahead)
                } else {
                    // The preamble and a header's worth, with the postamble before them.
                    self.need(pos - tail, pos + self.header_guess, 0)
                };
                if let Err(ranges) = step {
                    return Ok(Err(ranges));
                }
                if matches!(self.found.last(), Some(Found { part: Part::Header { .. }, .. })) && self.window.has(pos - tail, pos) {
                    self.postambles.insert(pos, self.window.take(pos - tail, pos).to_vec());
                }
                let parsed = match preamble(self.window.take(pos, (pos + head).min(self.window.stop()))) {
                    Ok(parsed) => parsed,
                    Err(_) if found == 0 && !foreign::starts_as_tensogram(self.window.take(pos, self.window.stop())) => {
                        return Err(foreign::not_tensogram("file", self.window.take(pos, self.window.stop())))
                    }
                    Err(_) => {
                        return Err(CoreError::format(format!(
                            "bytes {pos}..{size} (after {found} complete message(s)) are not a message: trailing garbage, \
                             or a corrupt or truncated file"
                        )))
                    }
                };
                self.head = Some((pos, parsed.0, parsed.1));
                parsed
            }
        };
        if total == 0 {
            return self.streaming(pos, layout).map_err(|e| {
                let message = format!(
                    "bytes {pos}..{size} (after {found} complete message(s)) are a truncated or corrupt streaming-mode message ({})",
                    e.message
                );
                CoreError::new(e.kind, message)
            });
        }
        if pos.saturating_add(total) > size {
            return Err(CoreError::format(format!(
                "bytes {pos}..{size} (after {found} complete message(s)) are a truncated message ({total} bytes announced)"
            )));
        }
        let end = pos + total;
        let small = total <= self.settings.whole_message_max;
        let ahead = if small { self.settings.read_ahead } else { 0 };
        let mut header_guess = self.header_guess;
        let mut footer_guess = self.footer_guess;
        let message = if small || layout == Layout::Whole {
            match self.need(pos, end, ahead) {
                Ok(data) => Found { offset: pos, length: total, part: Part::Whole, data: data.to_vec() },
                Err(ranges) => return Ok(Err(ranges)),
            }
        } else if layout == Layout::Header {
            let mut at_hand = self.window.take(pos + head, end.min(self.window.stop()));
            let mut parsed = frames(at_hand, head)?;
            // A header longer than the guess: its tail (a frame that runs past the message end
            // is left for `indexed` to report).
            loop {
                let need = match parsed.next {
                    Next::More(need) => need,
                    // The bytes at hand end where a frame does, before the metadata and index
                    // are found: the next frame's header says whether the header goes on.
                    Next::End if (parsed.metadata.is_none() || parsed.index.is_none()) && parsed.end == at_hand.len() => {
                        parsed.end + FRAME_HEADER_SIZE + 7
                    }
                    _ => break,
                };
                if head + need as u64 > total {
                    break;
                }
                match self.need(pos, pos + head + need as u64, 0) {
                    Ok(bytes) => {
                        at_hand = &bytes[head as usize..];
                        parsed = frames(at_hand, head)?;
                    }
                    Err(ranges) => return Ok(Err(ranges)),
                }
            }
            let header_end = if matches!(parsed.next, Next::More(_)) { end } else { pos + head + parsed.end as u64 };
            header_guess = self.settings.header_guess.max(2 * (head + parsed.end as u64)); // room for a longer one
            let data = self.window.take(pos, header_end.min(self.window.stop())).to_vec();
            Found { offset: pos, length: total, part: Part::Header { postamble: Vec::new() }, data }
        } else {
            // The footer frames before the postamble (which `indexed` checks).
            let mut from = pos.max(end.saturating_sub(footer_guess));
            let bytes = match self.need(from, end, 0) {
                Ok(bytes) => bytes,
                Err(ranges) => return Ok(Err(ranges)),
            };
            let first_footer = postamble(bytes).map(|(first, _)| first).ok();
            if let Some(first) = first_footer.filter(|&f| head <= f && f <= total - tail) {
                footer_guess = total - first;
                from = pos + first;
            }
            match self.need(from, end, 0) {
                Ok(data) => Found { offset: pos, length: total, part: Part::Footer, data: data.to_vec() },
                Err(ranges) => return Ok(Err(ranges)),
            }
        };
        self.found.push(message);
        (self.small, self.ahead, self.header_guess, self.footer_guess) = (small, ahead, header_guess, footer_guess);
        self.pos = end;
        Ok(Ok(()))
    }
}

impl Scan {
    /// Goes over the streaming-mode message at `pos` (its preamble parsed): its walk (`stream`)
    /// is kept between fetches.
    fn streaming(&mut self, pos: u64, layout: Layout) -> CoreResult<Step<()>> {
        let mut s = match self.stream.take() {
            Some(s) if s.start == pos => s,
            _ => Stream {
                start: pos,
                at: pos + PREAMBLE_SIZE as u64,
                skipped: None,
                footer: None,
                end: None,
                block: self.stream_block,
                next_frame: pos + PREAMBLE_SIZE as u64,
                irregular: false,
            },
        };
        let step = self.stream_step(&mut s, layout)?;
        if step.is_err() {
            self.stream = Some(s);
        }
        Ok(step)
    }

    /// The bytes of the window from `a` on (none where it does not hold `a`).
    fn at_hand(&self, a: u64) -> &[u8] {
        if self.window.start <= a && a <= self.window.stop() { self.window.take(a, self.window.stop()) } else { &[] }
    }

    /// Where the walk `s` reads from: the first footer frame, or the last bytes of the frame
    /// skipped last, or where the next header is looked for.
    fn stream_from(s: &Stream) -> u64 {
        s.footer.unwrap_or_else(|| s.skipped.as_ref().map_or(s.at, |&(_, end, _)| end - 4))
    }

    /// The request for the walk `s`'s bytes up to `at_least` (a block more where the frames are
    /// small). While the message may still be read whole, its bytes are kept from its start.
    fn stream_fetch<T>(&mut self, s: &mut Stream, at_least: u64) -> CoreResult<Step<T>> {
        let from = Self::stream_from(s);
        if at_least > self.size {
            return Err(CoreError::format(format!("the frame at byte {} runs past the end of the file", from - s.start)));
        }
        let keep = if from + s.block - s.start <= self.settings.whole_message_max { s.start } else { from };
        let stop = if self.window.has(from, from) { self.window.stop() } else { from };
        let b = at_least.max(stop + s.block);
        s.block = (2 * s.block).min(self.settings.max_block);
        match self.need(keep, b, 0) {
            Err(ranges) => Ok(Err(ranges)),
            Ok(_) => Err(CoreError::format("no postamble follows its frames")), // nothing more to fetch
        }
    }

    fn stream_step(&mut self, s: &mut Stream, layout: Layout) -> CoreResult<Step<()>> {
        let (size, whole_max) = (self.size, self.settings.whole_message_max);
        let end = loop {
            if let Some(end) = s.end {
                break end;
            }
            let from = Self::stream_from(s);
            let bytes = self.at_hand(from);
            let available = (size - from) as usize;
            let mut walk = FrameWalk::streaming_piece(bytes, 0, (from - s.start) as usize, available);
            if let Some(footer) = s.footer {
                // The footer frames, whole, to the postamble.
                let need = loop {
                    match walk.next_header()? {
                        frames::Next::Header(header) if frames::phase(header.frame_type) < 2 => {
                            let at = footer - s.start + walk.pos() as u64;
                            return Err(CoreError::format(format!(
                                "the frame at byte {at} comes after the footer frames it must precede"
                            )));
                        }
                        frames::Next::Header(header) => {
                            s.irregular |= walk.pos() != walk.passed();
                            match walk.frame(header)? {
                                Taken::Frame(_) => {}
                                Taken::Needs(need) => break need,
                            }
                        }
                        frames::Next::Needs(need) => break need,
                        frames::Next::End if walk.pos() < bytes.len() => {
                            s.end = Some(footer + (walk.pos() + POSTAMBLE_SIZE) as u64);
                            break 0;
                        }
                        frames::Next::End if bytes.len() == available => {
                            return Err(CoreError::format("no postamble follows its frames"))
                        }
                        frames::Next::End => break bytes.len() + 1,
                    }
                };
                if s.end.is_none() {
                    return self.stream_fetch(s, footer + need as u64);
                }
                continue;
            }
            if let Some((start, _, header)) = &s.skipped {
                if bytes.len() < 4 {
                    return self.stream_fetch(s, from + 4);
                }
                frames::check_frame_end(header, (start - s.start) as usize, &bytes[..4])?;
                s.skipped = None;
                continue;
            }
            match walk.next_header()? {
                frames::Next::Header(header) => {
                    let at = from + walk.pos() as u64;
                    s.irregular |= at != s.next_frame;
                    if frames::phase(header.frame_type) == 2 {
                        s.footer = Some(at);
                        continue;
                    }
                    let length = frames::frame_length(&header, (at - s.start) as usize)? as u64;
                    let end = at.checked_add(length).filter(|&end| end <= size).ok_or_else(|| {
                        CoreError::format(format!("the frame at byte {} runs past the end of the file", at - s.start))
                    })?;
                    s.at = at + frames::after_frame(0, length as usize, (size - at) as usize) as u64;
                    s.next_frame = s.at;
                    if length > whole_max {
                        s.block = self.settings.header_guess;
                    }
                    s.skipped = Some((at, end, header));
                }
                frames::Next::Needs(need) => return self.stream_fetch(s, from + need as u64),
                frames::Next::End if walk.pos() < bytes.len() => {
                    // A postamble before any footer frame.
                    s.end = Some(from + (walk.pos() + POSTAMBLE_SIZE) as u64);
                }
                frames::Next::End if bytes.len() == available => return Err(CoreError::format("no postamble follows its frames")),
                frames::Next::End => {
                    // The last bytes may start a postamble not all fetched: they are looked at again.
                    let len = bytes.len() as u64;
                    s.at = s.at.max(from + len.saturating_sub(POSTAMBLE_SIZE as u64 - 1));
                    return self.stream_fetch(s, from + len + 1);
                }
            }
        };
        let length = end - s.start;
        let footer = s.footer.filter(|_| length > whole_max && layout == Layout::Footer && !s.irregular);
        let (from, part) = match footer {
            Some(footer) => (footer, Part::Footer),
            None => (s.start, Part::Whole),
        };
        let data = match self.need(from, end, 0) {
            Ok(data) => data.to_vec(),
            Err(ranges) => return Ok(Err(ranges)),
        };
        self.found.push(Found { offset: s.start, length, part, data });
        self.stream_block = s.block;
        self.small = length <= whole_max;
        self.ahead = if self.small { self.settings.read_ahead } else { 0 };
        self.pos = end;
        Ok(Ok(()))
    }
}

/// One object described from the ends of its frame.
#[derive(Debug, Clone)]
pub struct Described {
    pub descriptor: DataObjectDescriptor,
    /// The frame's inline hash, if it has one.
    pub hash: Option<u64>,
    /// The whole frame, where it was fetched whole and has no inline hash (to fingerprint it).
    pub frame: Option<Vec<u8>>,
    /// `(descriptor CBOR, payload range in the file)` of an object whose payload precedes its
    /// descriptor: a read may fetch parts of that payload.
    pub payload: Option<(Vec<u8>, Range<u64>)>,
    /// The descriptor's CBOR as the frame stores it, and the payload's bytes in the file without
    /// the masks that follow it, as a mapped message's frame gives them to the metadata table.
    pub cbor: Vec<u8>,
    pub stored: Range<u64>,
}

/// The descriptors of data-object frames, each `(file offset, length)` as an index lists them,
/// fetched from the end of each frame: its first and last bytes, and where the descriptor starts
/// before those, one more batch.
#[derive(Debug)]
pub struct Describe {
    frames: Vec<(u64, u64)>,
    /// Per frame: its message's offset and its object's number, to name it in errors.
    objects: Vec<(u64, usize)>,
    tail_guess: u64,
    /// Per frame: its head and tail (the same bytes when it came whole).
    ends: Vec<(Vec<u8>, Vec<u8>)>,
    /// Per frame: its descriptor region, where it starts before the tail.
    regions: HashMap<usize, Vec<u8>>,
    /// The frames whose descriptor regions were asked for.
    asked: Option<Vec<usize>>,
}

impl Describe {
    /// `objects`: for each of `frames`, its message's offset and its object's number.
    pub fn new(frames: Vec<(u64, u64)>, objects: Vec<(u64, usize)>, tail_guess: u64) -> Self {
        Describe { frames, objects, tail_guess, ends: Vec::new(), regions: HashMap::new(), asked: None }
    }

    /// Whether there is no frame to describe.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// `e` of frame `i`, naming its message and object.
    fn in_frame(&self, i: usize, e: CoreError) -> CoreError {
        let (offset, o) = self.objects[i];
        e.context(&format!("message at byte {offset}, object {o}"))
    }

    fn whole(&self, length: u64) -> bool {
        length <= self.tail_guess
    }

    /// The ranges to fetch next, `None` when every descriptor is at hand.
    pub fn wanted(&mut self) -> CoreResult<Option<Ranges>> {
        if self.ends.len() < self.frames.len() {
            let header = FRAME_HEADER_SIZE as u64;
            let mut ranges = Ranges::new();
            for &(start, length) in &self.frames {
                if self.whole(length) {
                    ranges.push((start, start + length));
                } else {
                    ranges.extend([(start, start + header), (start + length - self.tail_guess, start + length)]);
                }
            }
            return Ok(Some(ranges));
        }
        if self.asked.is_some() {
            return Ok(None);
        }
        let mut asked = Vec::new();
        let mut ranges = Ranges::new();
        for (i, (&(start, length), (head, tail))) in self.frames.iter().zip(&self.ends).enumerate() {
            let (cbor_offset, _, _) = frame_footer(head, tail, length).map_err(|e| self.in_frame(i, e))?;
            if cbor_offset < length - tail.len() as u64 {
                asked.push(i);
                ranges.push((start + cbor_offset, start + length - DATA_OBJECT_FOOTER_SIZE as u64));
            }
        }
        self.asked = Some(asked);
        Ok((!ranges.is_empty()).then_some(ranges))
    }

    /// The bytes of the ranges `wanted` gave, in its order.
    pub fn feed(&mut self, pieces: Vec<Vec<u8>>) -> CoreResult<()> {
        if self.ends.len() < self.frames.len() {
            let mut pieces = pieces.into_iter();
            let fewer = || CoreError::format("fewer pieces fed than asked for");
            for &(_, length) in &self.frames {
                let head = pieces.next().ok_or_else(fewer)?;
                let tail = if self.whole(length) { head.clone() } else { pieces.next().ok_or_else(fewer)? };
                self.ends.push((head, tail));
            }
            return Ok(());
        }
        let asked = self.asked.as_ref().ok_or_else(|| CoreError::format("bytes fed that no step asked for"))?;
        if asked.len() != pieces.len() {
            return Err(CoreError::format(format!("{} pieces fed for {} ranges", pieces.len(), asked.len())));
        }
        self.regions.extend(asked.iter().copied().zip(pieces));
        Ok(())
    }

    /// Every frame's object, in the order given, once `wanted` gives `None`.
    pub fn finish(mut self) -> CoreResult<Vec<Described>> {
        let mut described = Vec::with_capacity(self.frames.len());
        for (i, (&(start, length), (head, tail))) in self.frames.iter().zip(&self.ends).enumerate() {
            let (cbor_offset, flags, hash) = frame_footer(head, tail, length).map_err(|e| self.in_frame(i, e))?;
            let footer = length - DATA_OBJECT_FOOTER_SIZE as u64;
            let region = match self.regions.remove(&i) {
                Some(region) => region,
                None => {
                    let tail_start = length - tail.len() as u64;
                    tail[(cbor_offset - tail_start) as usize..(footer - tail_start) as usize].to_vec()
                }
            };
            // The descriptor is the first CBOR item of its region.
            let descriptor = walk::parse_descriptor(&region).map_err(|e| self.in_frame(i, e))?;
            let cbor = Walker::new(&region).item().map_err(|e| self.in_frame(i, e.context("bad object descriptor")))?.to_vec();
            let payload_start = FRAME_HEADER_SIZE as u64;
            let cbor_after = flags & DataObjectFlags::CBOR_AFTER_PAYLOAD != 0;
            let region_of_payload =
                if cbor_after { payload_start..cbor_offset } else { cbor_offset + cbor.len() as u64..footer };
            let stored = walk::payload_in(region_of_payload, &descriptor).map_err(|e| self.in_frame(i, e))?;
            let stored = start + stored.start..start + stored.end;
            let payload = (cbor_after && cbor_offset > payload_start).then(|| (region, start + payload_start..start + cbor_offset));
            let frame = (hash.is_none() && tail.len() as u64 == length).then(|| tail.clone());
            described.push(Described { descriptor, hash, frame, payload, cbor, stored });
        }
        Ok(described)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::float_message as message;

    /// Runs `scan` over `file`: what it found and the ranges it asked for, batch by batch.
    fn scan(file: &[u8], settings: Settings) -> CoreResult<(Vec<Found>, Vec<Ranges>)> {
        let mut scan = Scan::new("file", file.len() as u64, settings);
        let mut requests = Vec::new();
        while let Some(ranges) = scan.wanted()? {
            requests.push(ranges.clone());
            scan.feed(ranges.iter().map(|&(a, b)| file[a as usize..b as usize].to_vec()).collect())?;
        }
        Ok((scan.finish(), requests))
    }

    #[test]
    fn small_messages_are_read_whole_in_few_blocks() {
        let one = message(16, 2);
        let file = one.repeat(500);
        let (found, batches) = scan(&file, Settings { first_block: 1024, ..Settings::default() }).expect("scans");
        assert_eq!(found.len(), 500);
        assert!(found.iter().enumerate().all(|(i, m)| m.offset == (i * one.len()) as u64 && m.part == Part::Whole && m.data == one));
        // Blocks doubling in size, `read_ahead` of them at once, each byte asked for once.
        assert!(batches.len() <= 7, "{} batches", batches.len());
        let ranges: Ranges = batches.concat();
        assert_eq!((ranges[0], ranges.last().unwrap().1), ((0, 1024), file.len() as u64));
        assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0));
    }

    #[test]
    fn large_messages_give_their_header_and_index() {
        let one = message(4096, 3);
        let file = one.repeat(3);
        let settings = Settings { first_block: 1024, whole_message_max: 1024, ..Settings::default() };
        let (found, _) = scan(&file, settings).expect("scans");
        assert_eq!(found.iter().map(|m| (m.offset, m.length)).collect::<Vec<_>>(), (0..3).map(|i| ((i * one.len()) as u64, one.len() as u64)).collect::<Vec<_>>());
        for m in &found {
            assert!(matches!(&m.part, Part::Header { postamble } if postamble.len() == POSTAMBLE_SIZE));
            assert!(m.data.len() < 1024);
            let frames = indexed(m).expect("indexed").frames;
            assert_eq!(frames.len(), 3);
            // The descriptors, from the ends of the frames.
            let absolute: Vec<_> = frames.iter().map(|&(o, l)| (m.offset + o, l)).collect();
            let mut describe = Describe::new(absolute.clone(), vec![(m.offset, 0); absolute.len()], 256);
            while let Some(ranges) = describe.wanted().expect("wanted") {
                describe.feed(ranges.iter().map(|&(a, b)| file[a as usize..b as usize].to_vec()).collect()).expect("fed");
            }
            let described = describe.finish().expect("described");
            assert!(described.iter().all(|d| d.descriptor.shape == vec![4096]));
            if let Some((_, payload)) = &described[0].payload {
                assert_eq!(&file[payload.start as usize..payload.start as usize + 8], &[0f32.to_le_bytes(), 1f32.to_le_bytes()].concat()[..]);
            }
        }
    }

    #[test]
    fn a_header_longer_than_the_first_block_and_the_guess_is_read_to_its_index() {
        // Each request for the rest of a frame ends where that frame does: the walk must go on
        // to the index frame after it.
        let one = message(4096, 3);
        for (first_block, header_guess) in [(64, 64), (64, 4096), (1024, 64)] {
            let settings = Settings { first_block, whole_message_max: 1024, header_guess, ..Settings::default() };
            let (found, _) = scan(&one.repeat(2), settings).expect("scans");
            for m in &found {
                assert_eq!(indexed(m).expect("indexed").frames.len(), 3, "blocks of {first_block}, a guess of {header_guess}");
            }
        }
    }

    #[test]
    fn a_walk_over_large_messages_never_asks_for_the_same_bytes_forever() {
        let one = message(4096, 2);
        let file = [message(16, 1), one.clone(), one].concat();
        let settings = Settings { first_block: 256, whole_message_max: 1024, header_guess: 64, tail_guess: 64, ..Settings::default() };
        let mut scan = Scan::new("file", file.len() as u64, settings);
        let mut batches = 0;
        while let Some(ranges) = scan.wanted().expect("wanted") {
            batches += 1;
            assert!(batches < 50, "the walk asks for the same bytes again and again");
            scan.feed(ranges.iter().map(|&(a, b)| file[a as usize..b as usize].to_vec()).collect()).expect("fed");
        }
        assert_eq!(scan.finish().len(), 3);
    }

    #[test]
    fn a_truncated_file_and_garbage_are_errors() {
        let one = message(16, 1);
        let err = scan(&one[..one.len() - 5], Settings::default()).expect_err("truncated").message;
        assert!(err.starts_with("file: ") && err.contains("truncated message"), "{err}");
        let err = scan(&[one.clone(), b"x".repeat(100)].concat(), Settings::default()).expect_err("garbage").message;
        assert!(err.contains(&format!("bytes {}..{} (after 1 complete message(s)) are not a message", one.len(), one.len() + 100)), "{err}");
        let err = scan(&[b"GRIB".as_slice(), &[0; 200]].concat(), Settings::default()).expect_err("not tgm").message;
        assert!(err.starts_with("file: not a Tensogram file: it is GRIB"), "{err}");
    }

    #[test]
    fn a_postamble_that_disagrees_fails_its_message() {
        let mut one = message(4096, 1);
        let end = one.len();
        one[end - 16..end - 8].copy_from_slice(&(end as u64 + 8).to_be_bytes());
        let (found, _) = scan(&one, Settings { first_block: 1024, whole_message_max: 0, ..Settings::default() }).expect("scans");
        assert_eq!(indexed(&found[0]).expect_err("disagrees").message, "its postamble does not match its preamble");
    }

    #[test]
    fn an_index_must_list_frames_in_order_without_overlaps() {
        assert!(check_index_order(&[480, 17024], &[16538, 16538]).is_ok());
        assert!(check_index_order(&[], &[]).is_ok());
        assert!(check_index_order(&[17024, 480], &[16538, 16538]).is_err()); // swapped
        assert!(check_index_order(&[480, 490], &[16538, 16538]).is_err()); // overlapping
        assert!(check_index_order(&[480], &[16538, 16538]).is_err()); // lengths without offsets
    }

    #[test]
    fn a_header_or_footer_with_bytes_after_a_frames_padding_is_read_as_upstream_reads_it() {
        // Upstream passes any bytes other than `FR` between frames; this walk stopped at them,
        // before the index, and the message could not be read.
        use crate::testing::{message, Written};
        use crate::wire::frames::tests::{first_footer_or_frame, padded};
        for (written, part) in [(Written::Header, Part::Header { postamble: Vec::new() }), (Written::Footer, Part::Footer)] {
            for n in [3, 8, 21] {
                let one = message(&[1, 2, 3, 4], written);
                let msg = padded(&one, first_footer_or_frame(&one), n);
                let (length, tail) = (msg.len() as u64, msg[msg.len() - POSTAMBLE_SIZE..].to_vec());
                let (part, data) = match &part {
                    Part::Header { .. } => (Part::Header { postamble: tail }, msg.clone()),
                    _ => (Part::Footer, msg[first_footer_or_frame(&msg)..].to_vec()),
                };
                let found = Found { offset: 0, length, part, data };
                let frames = indexed(&found).unwrap_or_else(|e| panic!("{written:?}, {n} bytes: {}", e.message)).frames;
                assert_eq!(frames.len(), 1, "{written:?}, {n} bytes");
            }
        }
    }

    #[test]
    fn zeros_where_a_header_frame_should_be_are_not_fetched_a_few_bytes_at_a_time() {
        // Padding is skipped only as far as the bytes at hand: a message that is zeros after its
        // metadata frame fails after a few requests, not one per frame header's worth of bytes.
        let mut one = message(4096, 1);
        let metadata = FrameHeader::read_from(&one[PREAMBLE_SIZE..]).expect("a frame");
        let index_at = PREAMBLE_SIZE + (metadata.total_length as usize).next_multiple_of(8);
        let end = one.len() - POSTAMBLE_SIZE;
        one[index_at..end].fill(0);
        let settings = Settings { first_block: 64, whole_message_max: 1024, header_guess: 64, ..Settings::default() };
        let (found, batches) = scan(&one, settings).expect("scans");
        assert!(batches.len() < 10, "{} batches", batches.len());
        assert_eq!(indexed(&found[0]).expect_err("no index").message, "its metadata or index frame is missing");
    }

    /// Runs `scan` over `file`, failing a walk that asks for more than `max_batches` batches.
    fn bounded_scan(file: &[u8], settings: Settings, max_batches: usize) -> CoreResult<(Vec<Found>, Vec<Ranges>)> {
        let mut scan = Scan::new("file", file.len() as u64, settings);
        let mut requests = Vec::new();
        while let Some(ranges) = scan.wanted()? {
            requests.push(ranges.clone());
            assert!(requests.len() <= max_batches, "{} batches", requests.len());
            scan.feed(ranges.iter().map(|&(a, b)| file[a as usize..b as usize].to_vec()).collect())?;
        }
        Ok((scan.finish(), requests))
    }

    const STREAMED: Settings =
        Settings { first_block: 1024, max_block: 8 << 20, read_ahead: 4, whole_message_max: 1024, header_guess: 256, tail_guess: 256 };

    #[test]
    fn streaming_mode_messages_are_walked_by_their_frame_headers() {
        // Streaming messages (no length) among a normal one: each found where the mapped
        // reader's rule finds it, read by its footer, and no payload fetched.
        use crate::source::mapped_file::index_messages;
        use crate::testing::streaming_float_message as streamed;
        let file = [streamed(4096, 3), streamed(2048, 5), message(4096, 2), streamed(4096, 1)].concat();
        let (found, batches) = bounded_scan(&file, STREAMED, 100).expect("scans");
        let spans: Vec<(u64, u64)> = index_messages(&file).expect("a file").into_iter().map(|(o, l)| (o as u64, l as u64)).collect();
        assert_eq!(found.iter().map(|m| (m.offset, m.length)).collect::<Vec<_>>(), spans);
        for (m, objects) in found.iter().zip([3, 5, 2, 1]) {
            assert!(m.part != Part::Whole, "message at {}", m.offset);
            assert_eq!(indexed(m).expect("indexed").frames.len(), objects);
        }
        let fetched: u64 = batches.concat().iter().map(|(a, b)| b - a).sum();
        assert!(fetched * 5 < file.len() as u64, "{fetched} of {} bytes fetched", file.len());
    }

    #[test]
    fn small_streaming_mode_messages_come_whole_in_few_requests() {
        use crate::testing::streaming_float_message as streamed;
        let one = streamed(16, 2);
        let file = one.repeat(200);
        let (found, batches) = bounded_scan(&file, Settings { first_block: 1024, ..Settings::default() }, 20).expect("scans");
        assert_eq!(found.len(), 200);
        assert!(found.iter().all(|m| m.part == Part::Whole && m.data == one));
        assert!(batches.len() < 20, "{} batches", batches.len());
    }

    #[test]
    fn a_forged_or_truncated_streaming_message_is_an_error_in_few_requests() {
        use crate::testing::streaming_float_message as streamed;
        let one = streamed(4096, 2);
        let fails = |file: &[u8], why: &str| {
            let err = bounded_scan(file, STREAMED, 40).expect_err(why).message;
            assert!(err.starts_with("file: bytes 0..") && err.contains("truncated or corrupt streaming-mode message"), "{why}: {err}");
            err
        };
        for cut in [30, 100, 1000, one.len() / 2, one.len() - 30, one.len() - 10, one.len() - 1] {
            fails(&one[..cut], &format!("cut at {cut}"));
        }
        let first = FrameHeader::read_from(&one[PREAMBLE_SIZE..]).expect("a frame");
        let object_at = PREAMBLE_SIZE + (first.total_length as usize).next_multiple_of(8);
        let object = FrameHeader::read_from(&one[object_at..]).expect("an object");
        let with_length = |length: u64| {
            let mut forged = one.clone();
            forged[object_at + 8..object_at + 16].copy_from_slice(&length.to_be_bytes());
            forged
        };
        // A frame length past the end of the file, or short of a header and footer, or one that
        // lands in its payload (no ENDF there).
        let err = fails(&with_length(u64::MAX), "past the end");
        assert!(err.contains("runs past the end of the file"), "{err}");
        let err = fails(&with_length(0), "zero length");
        assert!(err.contains("shorter than its header and footer"), "{err}");
        let err = fails(&with_length(object.total_length - 64), "inside the payload");
        assert!(err.contains("does not end with ENDF"), "{err}");
        // Zeros (or garbage) after the preamble: walked as padding, in blocks that double.
        let mut zeros = one[..PREAMBLE_SIZE].to_vec();
        zeros.resize(1 << 20, 0);
        let err = fails(&zeros, "zeros");
        assert!(err.contains("no postamble follows its frames"), "{err}");
        let mut garbage = one[..PREAMBLE_SIZE].to_vec();
        garbage.extend((0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8 | 0x80));
        fails(&garbage, "garbage");
    }

    #[test]
    fn a_frame_of_another_length_than_its_index_entry_is_an_error() {
        let one = message(64, 1);
        let frames = {
            let found = Found { offset: 0, length: one.len() as u64, part: Part::Header { postamble: one[one.len() - 24..].to_vec() }, data: one.clone() };
            indexed(&found).expect("indexed").frames
        };
        let (start, length) = frames[0];
        let frame = &one[start as usize..(start + length) as usize];
        let err = frame_footer(frame, frame, length + 8).expect_err("wrong length");
        assert!(err.message.starts_with("the index gives a data-object frame"), "{}", err.message);
    }
}
