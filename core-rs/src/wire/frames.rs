//! The frame rule of the wire format, written once: what a frame is (its header, a length no
//! shorter than its type's header and footer, `ENDF` at its end), the padding between frames, a
//! data-object frame's footer (descriptor offset, inline hash), a message's bounds, and the walk
//! over a message's frames. It is `tensogram::framing::decode_message`'s rule (not public
//! upstream), followed exactly: the mapped file, the single-message parse and the remote
//! byte-range walk all read frames through here.

use std::ops::Range;

use tensogram::wire::{
    footer_size_for, FrameFlags, FrameHeader, FrameType, Postamble, Preamble, DATA_OBJECT_FOOTER_SIZE,
    END_MAGIC, FRAME_COMMON_FOOTER_SIZE, FRAME_END, FRAME_HEADER_SIZE, FRAME_MAGIC, POSTAMBLE_SIZE, PREAMBLE_SIZE,
};

use crate::errors::{CoreError, CoreResult};

/// A checked frame: its header and where it lies in the bytes walked.
#[derive(Debug, Clone)]
pub struct Frame {
    pub header: FrameHeader,
    pub range: Range<usize>,
}

impl Frame {
    /// The bytes between the frame's header and its footer: a metadata, index or hash frame's
    /// CBOR; a data-object frame's payload, masks and descriptor.
    pub fn body(&self) -> Range<usize> {
        self.range.start + FRAME_HEADER_SIZE..self.range.end - footer_size_for(self.header.frame_type)
    }
}

/// Upstream's frame order: header frames, then data objects (and their preceders), then footer
/// frames.
pub fn phase(frame_type: FrameType) -> u8 {
    match frame_type {
        FrameType::HeaderMetadata | FrameType::HeaderIndex | FrameType::HeaderHash => 0,
        FrameType::NTensorFrame | FrameType::PrecederMetadata => 1,
        FrameType::FooterHash | FrameType::FooterIndex | FrameType::FooterMetadata => 2,
    }
}

/// A frame type as errors name it.
fn kind(frame_type: FrameType) -> &'static str {
    match frame_type {
        FrameType::HeaderMetadata => "header metadata",
        FrameType::HeaderIndex => "header index",
        FrameType::HeaderHash => "header hash",
        FrameType::NTensorFrame => "data-object",
        FrameType::PrecederMetadata => "preceder metadata",
        FrameType::FooterHash => "footer hash",
        FrameType::FooterIndex => "footer index",
        FrameType::FooterMetadata => "footer metadata",
    }
}

/// The length of the frame with this header, checked as upstream checks it: a header and its
/// type's footer at least, and no more than the address space holds. `at`: the frame's byte in
/// its message, for the error.
pub fn frame_length(header: &FrameHeader, at: usize) -> CoreResult<usize> {
    let min = FRAME_HEADER_SIZE + footer_size_for(header.frame_type);
    usize::try_from(header.total_length).ok().filter(|&len| len >= min).ok_or_else(|| {
        CoreError::format(format!(
            "the {} frame at byte {at} is {} bytes long, shorter than its header and footer ({min})",
            kind(header.frame_type),
            header.total_length
        ))
    })
}

/// Where the bytes after a frame of `len` bytes at `pos` start: past its padding to 8 bytes from
/// the frame's start, unless that padding would run past the bytes at hand (`available`).
pub fn after_frame(pos: usize, len: usize, available: usize) -> usize {
    let aligned = pos + len.next_multiple_of(8);
    if aligned <= available { aligned } else { pos + len }
}

/// What a walk finds next.
#[derive(Debug)]
pub enum Next {
    /// A frame header at `FrameWalk::pos`; `FrameWalk::frame` checks and passes the frame.
    Header(FrameHeader),
    /// The bytes end inside a frame header: this many bytes from their start are needed.
    Needs(usize),
    /// The end of the frames: the walk's end, or a streaming message's postamble.
    End,
}

/// A frame found by `FrameWalk::frame`, or the bytes it needs.
#[derive(Debug)]
pub enum Taken {
    Frame(Frame),
    /// The frame runs past the bytes at hand: this many bytes from their start are needed.
    Needs(usize),
}

/// A walk over frames, as `decode_message` walks them: from a frame's end, past its padding,
/// then over any bytes other than `FR` to the next frame header. The bytes may be a whole
/// message or a piece of one fetched by range that starts at a frame (`base` bytes into its
/// message, which errors name).
pub struct FrameWalk<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The end of the last frame taken and its padding to 8 bytes (the walk's start before one).
    passed: usize,
    /// Frames start before this.
    end: usize,
    base: usize,
    /// A streaming message: its frames end at its postamble, wherever that is.
    streaming: bool,
    /// The bytes a frame's padding may run into: those walked, or (a piece of a message fetched
    /// by range) the rest of the file after their start.
    available: usize,
}

impl<'a> FrameWalk<'a> {
    /// A walk over the frames that start in `bytes[start..end]`, which begin `base` bytes into
    /// their message (frames may run on past `end`, as upstream lets them).
    pub fn new(bytes: &'a [u8], start: usize, end: usize, base: usize) -> Self {
        FrameWalk { bytes, pos: start, passed: start, end: end.min(bytes.len()), base, streaming: false, available: bytes.len() }
    }

    /// A walk over the frames of the streaming-mode message (length 0 in its preamble) that
    /// starts `bytes`, ending at the first postamble between frames. Upstream's scan instead
    /// searches for the end marker, which stops inside any payload that holds those 8 bytes.
    pub fn streaming(bytes: &'a [u8]) -> Self {
        Self::streaming_piece(bytes, PREAMBLE_SIZE, 0, bytes.len())
    }

    /// The walk of `streaming` over a piece of such a message fetched by range: `bytes` begin
    /// `base` bytes into the message, at a frame or in the padding after one, and the file holds
    /// `available` bytes from their start. A postamble ends it where the piece holds all of it.
    pub fn streaming_piece(bytes: &'a [u8], start: usize, base: usize, available: usize) -> Self {
        FrameWalk { bytes, pos: start, passed: start, end: bytes.len(), base, streaming: true, available }
    }

    /// Where the walk is in its bytes: at the header `next_header` found, past the frame `frame`
    /// took, or, at the end of a streaming message, at its postamble.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Where the last frame taken ends, with its padding to 8 bytes: what follows up to `pos`
    /// was skipped as padding, which may go on in bytes not fetched yet.
    pub fn passed(&self) -> usize {
        self.passed
    }

    /// The next frame header, past any padding.
    pub fn next_header(&mut self) -> CoreResult<Next> {
        while self.pos < self.end {
            let rest = &self.bytes[self.pos..];
            if !rest.starts_with(FRAME_MAGIC) {
                if FRAME_MAGIC.starts_with(rest) {
                    return Ok(Next::Needs(self.pos + FRAME_HEADER_SIZE)); // `F` ends the bytes
                }
                if self.streaming && Postamble::read_from(rest).is_ok() {
                    return Ok(Next::End);
                }
                self.pos += 1; // padding
                continue;
            }
            if rest.len() < FRAME_HEADER_SIZE {
                return Ok(Next::Needs(self.pos + FRAME_HEADER_SIZE));
            }
            let at = self.base + self.pos;
            return FrameHeader::read_from(rest)
                .map(Next::Header)
                .map_err(|e| CoreError::format(format!("the frame at byte {at}: {e}")));
        }
        Ok(Next::End)
    }

    /// Checks the frame whose header `next_header` found (its length, its `ENDF`) and passes it
    /// and its padding.
    pub fn frame(&mut self, header: FrameHeader) -> CoreResult<Taken> {
        let at = self.base + self.pos;
        let len = frame_length(&header, at)?;
        let rest = &self.bytes[self.pos..];
        let Some(frame) = rest.get(..len) else {
            return Ok(Taken::Needs(self.pos.saturating_add(len)));
        };
        check_frame_end(&header, at, frame)?;
        let range = self.pos..self.pos + len;
        self.pos = after_frame(self.pos, len, self.available);
        self.passed = self.pos;
        Ok(Taken::Frame(Frame { header, range }))
    }

    /// The next frame, where the bytes hold every frame whole (a whole message); `None` at the
    /// end of the frames.
    pub fn next_frame(&mut self) -> CoreResult<Option<Frame>> {
        let header = match self.next_header()? {
            Next::End => return Ok(None),
            Next::Header(header) => header,
            Next::Needs(_) => return Err(self.runs_past()),
        };
        match self.frame(header)? {
            Taken::Frame(frame) => Ok(Some(frame)),
            Taken::Needs(_) => Err(self.runs_past()),
        }
    }

    fn runs_past(&self) -> CoreError {
        CoreError::format(format!("the frame at byte {} runs past the end of the message", self.base + self.pos))
    }
}

/// Checks that the frame with this header at byte `at` of its message ends with `ENDF`: `end`
/// holds its last bytes (4 at least).
pub fn check_frame_end(header: &FrameHeader, at: usize, end: &[u8]) -> CoreResult<()> {
    if end.ends_with(FRAME_END) {
        return Ok(());
    }
    Err(CoreError::format(format!("the {} frame at byte {at} does not end with ENDF", kind(header.frame_type))))
}

/// Where the frame at `offset` of `bytes` lies: one that upstream's `decode_message` found and
/// checked, which gives only its start.
pub fn frame_range(bytes: &[u8], offset: usize) -> CoreResult<Range<usize>> {
    let header = bytes.get(offset..).map(FrameHeader::read_from);
    let header = header.and_then(Result::ok).ok_or_else(|| CoreError::format(format!("no frame at byte {offset}")))?;
    let end = offset.checked_add(frame_length(&header, offset)?).filter(|&end| end <= bytes.len());
    let end = end.ok_or_else(|| CoreError::format(format!("the frame at byte {offset} runs past the end of the message")))?;
    Ok(offset..end)
}

/// The data-object (or other) frame that is all of `bytes`: a frame fetched on its own.
pub fn whole_frame(bytes: &[u8]) -> CoreResult<Frame> {
    let header = FrameHeader::read_from(bytes).map_err(|e| CoreError::format(format!("bad frame header: {e}")))?;
    let length = header.total_length;
    match FrameWalk::new(bytes, 0, 1, 0).frame(header)? {
        Taken::Frame(frame) if frame.range.end == bytes.len() => Ok(frame),
        _ => Err(CoreError::format(format!("{} bytes hold a frame of {length}", bytes.len()))),
    }
}

/// The frames of the message that is `bytes` (nothing after it), in order and checked as
/// `decode_message` checks them: the preamble, the postamble (whose length, when not 0, must be
/// the preamble's), each frame, and the order of header, data-object and footer frames.
pub fn message_frames(bytes: &[u8]) -> CoreResult<Vec<Frame>> {
    let preamble = Preamble::read_from(bytes).map_err(|e| CoreError::format(format!("bad preamble: {e}")))?;
    let msg_end = if preamble.total_length == 0 {
        bytes.len().checked_sub(POSTAMBLE_SIZE).ok_or_else(|| CoreError::format("the message has no postamble"))?
    } else {
        let total = usize::try_from(preamble.total_length)
            .ok()
            .filter(|&t| (PREAMBLE_SIZE + POSTAMBLE_SIZE..=bytes.len()).contains(&t))
            .ok_or_else(|| {
                CoreError::format(format!("the preamble gives {} bytes, the message has {}", preamble.total_length, bytes.len()))
            })?;
        let postamble = postamble_at_end(&bytes[..total])?;
        if postamble.total_length != 0 && postamble.total_length != preamble.total_length {
            return Err(CoreError::format(format!(
                "the postamble gives {} bytes, the preamble {}",
                postamble.total_length, preamble.total_length
            )));
        }
        total - POSTAMBLE_SIZE
    };
    let mut walk = FrameWalk::new(bytes, PREAMBLE_SIZE, msg_end, 0);
    let (mut frames, mut current) = (Vec::new(), 0);
    while let Some(frame) = walk.next_frame()? {
        let frame_phase = phase(frame.header.frame_type);
        if frame_phase < current {
            return Err(CoreError::format(format!(
                "the {} frame at byte {} comes after frames it must precede (header frames, data objects, footer frames)",
                kind(frame.header.frame_type),
                frame.range.start
            )));
        }
        current = frame_phase;
        frames.push(frame);
    }
    Ok(frames)
}

/// The length of the message that starts `bytes` (whatever follows it): its preamble's, its end
/// marker where that says; for a message written in streaming mode (length 0), up to the
/// postamble after its last frame. The error says what the bytes are ("a truncated message").
pub fn message_length(bytes: &[u8]) -> CoreResult<usize> {
    let truncated = || CoreError::format("a truncated message");
    let preamble = Preamble::read_from(bytes).map_err(|_| truncated())?;
    if preamble.total_length == 0 {
        return streaming_length(bytes).map_err(|e| {
            CoreError::format(format!("a truncated or corrupt streaming-mode message ({})", e.message))
        });
    }
    let length = usize::try_from(preamble.total_length).unwrap_or(usize::MAX);
    if length > bytes.len() || length < PREAMBLE_SIZE + POSTAMBLE_SIZE {
        return Err(truncated());
    }
    if !bytes[..length].ends_with(END_MAGIC) {
        return Err(CoreError::format("a message whose end marker is missing (corrupt file)"));
    }
    Ok(length)
}

/// The length of the streaming-mode message that starts `bytes`, found by walking its frames to
/// the postamble.
fn streaming_length(bytes: &[u8]) -> CoreResult<usize> {
    let mut walk = FrameWalk::streaming(bytes);
    while walk.next_frame()?.is_some() {}
    match walk.pos() {
        at if at < bytes.len() => Ok(at + POSTAMBLE_SIZE),
        _ => Err(CoreError::format("no postamble follows its frames")),
    }
}

/// The postamble in the last bytes of `bytes`.
pub fn postamble_at_end(bytes: &[u8]) -> CoreResult<Postamble> {
    let tail = bytes.len().checked_sub(POSTAMBLE_SIZE).map(|at| &bytes[at..]);
    let tail = tail.ok_or_else(|| CoreError::format("the message does not end with a postamble"))?;
    Postamble::read_from(tail).map_err(|_| CoreError::format("the message does not end with a postamble"))
}

/// What a data-object frame's footer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectFooter {
    /// Where the descriptor starts, from the frame's start.
    pub cbor_offset: usize,
    /// The inline hash, where the header's `HASH_PRESENT` flag says the frame has one (the flag
    /// decides, not the slot's value, as upstream's hash check decides).
    pub hash: Option<u64>,
}

/// The footer of the data-object frame with this header, read from `tail`, the frame's last
/// bytes (20 at least; the whole frame where it is at hand), checked as
/// `decode_data_object_frame` checks it: `ENDF` at its end, the descriptor between the header
/// and the footer.
pub fn object_footer(header: &FrameHeader, tail: &[u8]) -> CoreResult<ObjectFooter> {
    if header.frame_type != FrameType::NTensorFrame {
        return Err(CoreError::format(format!("expected a data-object frame, found a {} frame", kind(header.frame_type))));
    }
    if tail.len() < DATA_OBJECT_FOOTER_SIZE || !tail.ends_with(FRAME_END) {
        return Err(CoreError::format("the data-object frame does not end with ENDF: corrupt or truncated"));
    }
    let footer = &tail[tail.len() - DATA_OBJECT_FOOTER_SIZE..];
    let u64_at = |at: usize| u64::from_be_bytes(footer[at..at + 8].try_into().expect("8 bytes"));
    let raw = u64_at(0);
    let footer_start = header.total_length.checked_sub(DATA_OBJECT_FOOTER_SIZE as u64);
    let cbor_offset = usize::try_from(raw)
        .ok()
        .filter(|&o| o >= FRAME_HEADER_SIZE && footer_start.is_some_and(|f| raw <= f))
        .ok_or_else(|| CoreError::format(format!("the descriptor offset {raw} lies outside the data-object frame")))?;
    let hash = (header.flags & FrameFlags::HASH_PRESENT != 0).then(|| u64_at(DATA_OBJECT_FOOTER_SIZE - FRAME_COMMON_FOOTER_SIZE));
    Ok(ObjectFooter { cbor_offset, hash })
}

/// Bytes at the end of a data-object frame that hold its inline hash (the footer).
pub const OBJECT_TAIL: u64 = DATA_OBJECT_FOOTER_SIZE as u64;

/// The hash slot of the footer that ends `tail` (a data-object frame's last bytes, at least
/// [`OBJECT_TAIL`]), where it ends with `ENDF`: the frame's inline hash when it has one.
pub fn tail_hash(tail: &[u8]) -> Option<u64> {
    (tail.len() >= DATA_OBJECT_FOOTER_SIZE && tail.ends_with(FRAME_END)).then(|| {
        let at = tail.len() - FRAME_COMMON_FOOTER_SIZE;
        u64::from_be_bytes(tail[at..at + 8].try_into().expect("8 bytes"))
    })
}

/// The inline hash of the data-object frame that is all of `frame`, if it was written with one:
/// it stands for the frame's descriptor, payload and masks, so equal hashes identify equal
/// stored objects without reading a payload.
pub fn inline_hash(frame: &[u8]) -> Option<u64> {
    let header = FrameHeader::read_from(frame).ok()?;
    object_footer(&header, frame).ok()?.hash
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::{message, Written};

    const LAYOUTS: [Written; 3] = [Written::Header, Written::Footer, Written::Streaming];

    /// `msg` with `n` zero bytes after the frame at `frame_start` and its padding: the lengths
    /// (preamble, postamble; 0 stays 0) and the postamble's first footer offset moved to match.
    /// Index offsets are left: the frames' walk does not read them.
    pub(crate) fn padded(msg: &[u8], frame_start: usize, n: usize) -> Vec<u8> {
        let header = FrameHeader::read_from(&msg[frame_start..]).expect("a frame");
        let at = frame_start + (header.total_length as usize).next_multiple_of(8);
        let mut out = [&msg[..at], &vec![0; n], &msg[at..]].concat();
        let len = out.len();
        let mut shift = |slot: usize, moved: &dyn Fn(u64) -> u64| {
            let value = u64::from_be_bytes(out[slot..slot + 8].try_into().expect("8 bytes"));
            out[slot..slot + 8].copy_from_slice(&moved(value).to_be_bytes());
        };
        for slot in [16, len - 16] {
            shift(slot, &|v| if v == 0 { 0 } else { len as u64 });
        }
        shift(len - 24, &|v| if v as usize >= at { v + n as u64 } else { v });
        out
    }

    /// Where the first footer frame of `msg` starts, else its first frame.
    pub(crate) fn first_footer_or_frame(msg: &[u8]) -> usize {
        let frames = message_frames(msg).expect("a message");
        let footer = frames.iter().find(|f| phase(f.header.frame_type) == 2);
        footer.unwrap_or(&frames[0]).range.start
    }

    /// The offsets of the data-object frames: ours, and upstream's `decode_message`'s.
    fn object_offsets(msg: &[u8]) -> (Vec<usize>, Vec<usize>) {
        let ours = message_frames(msg).expect("our walk reads it");
        let ours = ours.iter().filter(|f| f.header.frame_type == FrameType::NTensorFrame).map(|f| f.range.start);
        let upstream = tensogram::framing::decode_message(msg).expect("upstream reads it");
        (ours.collect(), upstream.objects.iter().map(|o| o.3).collect())
    }

    #[test]
    fn bytes_after_a_frames_padding_are_skipped_as_upstream_skips_them() {
        // Upstream's walk passes any bytes other than `FR` after a frame's padding. A streaming
        // message's length walk failed on them (the file would not open), and the remote walk
        // stopped at them (`remote_walk::tests` has its side).
        for written in LAYOUTS {
            for n in [3, 8, 21] {
                let msg = padded(&message(&[1, 2, 3, 4], written), first_footer_or_frame(&message(&[1, 2, 3, 4], written)), n);
                let (ours, upstream) = object_offsets(&msg);
                assert_eq!(ours, upstream, "{written:?}, {n} bytes");
                assert_eq!(message_length(&[msg.as_slice(), &msg].concat()).ok(), Some(msg.len()), "{written:?}, {n} bytes");
                assert_eq!(tensogram::scan(&msg), vec![(0, msg.len())]);
            }
        }
    }

    /// The streaming message's data-object frame, its last 4 bytes replaced.
    fn streaming_with_frame_end(end: &[u8; 4]) -> Vec<u8> {
        let mut msg = message(&[1, 2, 3, 4], Written::Streaming);
        let frames = message_frames(&msg).expect("a message");
        let object = frames.iter().find(|f| f.header.frame_type == FrameType::NTensorFrame).expect("an object");
        msg[object.range.end - 4..object.range.end].copy_from_slice(end);
        msg
    }

    #[test]
    fn a_frame_without_its_end_marker_ends_a_streaming_messages_walk_as_upstreams() {
        // The streaming length walk read frame headers only: such a message opened, and failed
        // only when upstream read it.
        let msg = streaming_with_frame_end(b"ENDX");
        assert!(tensogram::framing::decode_message(&msg).is_err());
        let err = message_length(&msg).expect_err("no end marker").message;
        assert!(err.contains("streaming-mode") && err.contains("does not end with ENDF"), "{err}");
        assert!(message_length(&streaming_with_frame_end(b"ENDF")).is_ok());
    }

    #[test]
    fn a_frame_shorter_than_its_header_and_footer_is_refused_as_upstream_refuses_it() {
        // The streaming length walk took any frame of a header's length or more (16 bytes);
        // upstream wants the footer too: 28 bytes, 36 for a data-object frame.
        let msg = message(&[1, 2, 3, 4], Written::Streaming);
        let at = msg.len() - POSTAMBLE_SIZE;
        for (frame_type, len) in [(FrameType::FooterHash, 16), (FrameType::FooterHash, 24), (FrameType::NTensorFrame, 32)] {
            let mut short = Vec::new();
            FrameHeader { frame_type, version: 1, flags: 0, total_length: len }.write_to(&mut short);
            if len > FRAME_HEADER_SIZE as u64 {
                short.resize(len as usize - 4, 0);
                short.extend_from_slice(FRAME_END);
            }
            let crafted = [&msg[..at], &short, &msg[at..]].concat();
            assert!(tensogram::framing::decode_message(&crafted).is_err());
            let err = message_length(&crafted).expect_err("too short").message;
            assert!(err.contains("shorter than its header and footer"), "{err}");
        }
    }

    #[test]
    fn a_data_object_footer_is_read_as_upstream_reads_it() {
        // The descriptor offset must lie between the header and the footer; the inline hash is
        // there when the header's flag says so, whatever the slot holds.
        let msg = message(&[1, 2, 3, 4], Written::Header);
        let frames = message_frames(&msg).expect("a message");
        let object = frames.iter().find(|f| f.header.frame_type == FrameType::NTensorFrame).expect("an object");
        let frame = msg[object.range.clone()].to_vec();
        let len = frame.len();
        for cbor_offset in [0, 15, 16, len - 21, len - 20, len - 19, len] {
            let mut crafted = frame.clone();
            crafted[len - 20..len - 12].copy_from_slice(&(cbor_offset as u64).to_be_bytes());
            let ours = object_footer(&object.header, &crafted);
            let upstream = tensogram::framing::decode_data_object_frame(&crafted);
            let upstream_range_error = upstream.as_ref().err().is_some_and(|e| e.to_string().contains("out of valid range"));
            assert_eq!(ours.is_err(), upstream_range_error, "offset {cbor_offset}: {ours:?}");
            assert_eq!(whole_frame(&crafted).expect("a whole frame").range, 0..len);
        }
        let hashed = object_footer(&object.header, &frame).expect("a footer").hash;
        let mut header = object.header.clone();
        header.flags ^= FrameFlags::HASH_PRESENT;
        let flipped = object_footer(&header, &frame).expect("a footer").hash;
        assert!(hashed.is_some() != flipped.is_some(), "{hashed:?} {flipped:?}");
        assert_eq!(inline_hash(&frame), hashed);
    }
}
