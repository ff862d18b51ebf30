//! A CBOR walker over borrowed bytes: item headers and extents without building values.
//!
//! The metadata scan reads thousands of small maps per file; building `ciborium::Value`s for
//! each (and for `_reserved_` subtrees nobody reads) cost most of its time. The walker finds
//! where items start and end; only values not seen before are decoded, by ciborium.

use crate::errors::{CoreError, CoreResult};

/// Nesting deeper than this is refused (a hostile file cannot exhaust the stack): ciborium's
/// recursion limit, which upstream's metadata parse has, so the table reads what upstream reads.
pub const MAX_DEPTH: usize = 256;

/// The head of one data item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Unsigned or negative integer, byte or text string of a definite length, or a simple value.
    Scalar,
    /// A byte or text string; `None`: indefinite length (chunks until a break).
    Bytes(Option<u64>),
    Text(Option<u64>),
    Array(Option<u64>),
    Map(Option<u64>),
    Tag,
    /// The end of an indefinite-length item.
    Break,
}

fn err<T>(m: impl Into<String>) -> CoreResult<T> {
    Err(CoreError::format(m))
}

/// A position in a CBOR buffer.
pub struct Walker<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Walker<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Walker { buf, pos: 0 }
    }

    fn take(&mut self, n: usize) -> CoreResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else { return err(format!("CBOR item at byte {} runs past the end", self.pos)) };
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    /// Reads one head: its first byte, major type and argument (`None`: indefinite length).
    fn raw_head(&mut self) -> CoreResult<(u8, u8, Option<u64>)> {
        let first = self.take(1)?[0];
        let (major, info) = (first >> 5, first & 0x1f);
        let arg = match info {
            0..=23 => Some(u64::from(info)),
            24 => Some(u64::from(self.take(1)?[0])),
            25 => Some(u64::from(u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")))),
            26 => Some(u64::from(u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))),
            27 => Some(u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes"))),
            31 => None,
            _ => return err(format!("bad CBOR head 0x{first:02x} at byte {}", self.pos - 1)),
        };
        Ok((first, major, arg))
    }

    /// Reads one head; string heads leave the position at the string's bytes.
    pub fn head(&mut self) -> CoreResult<Head> {
        let (first, major, arg) = self.raw_head()?;
        Ok(match (major, arg) {
            (0 | 1, Some(_)) => Head::Scalar,
            (2, n) => Head::Bytes(n),
            (3, n) => Head::Text(n),
            (4, n) => Head::Array(n),
            (5, n) => Head::Map(n),
            (6, Some(_)) => Head::Tag,
            (7, Some(_)) => Head::Scalar, // simple values and floats: the argument was the value
            (7, None) => Head::Break,
            _ => return err(format!("bad CBOR head 0x{first:02x} at byte {}", self.pos - 1)),
        })
    }

    /// An unsigned integer's value, else `None` and the position is unchanged.
    pub fn uint(&mut self) -> CoreResult<Option<u64>> {
        let start = self.pos;
        match self.raw_head()? {
            (_, 0, Some(value)) => Ok(Some(value)),
            _ => {
                self.pos = start;
                Ok(None)
            }
        }
    }

    /// A definite-length text string's contents (a map key), else `None` and the position is
    /// unchanged.
    pub fn text(&mut self) -> CoreResult<Option<&'a str>> {
        let start = self.pos;
        if let Head::Text(Some(n)) = self.head()? {
            let n = usize::try_from(n).map_err(|_| CoreError::format("text length overflows"))?;
            let bytes = self.take(n)?;
            return std::str::from_utf8(bytes).map(Some).map_err(|_| CoreError::format("text is not UTF-8"));
        }
        self.pos = start;
        Ok(None)
    }

    /// Skips one data item and returns its bytes.
    pub fn item(&mut self) -> CoreResult<&'a [u8]> {
        let start = self.pos;
        self.skip(0)?;
        Ok(&self.buf[start..self.pos])
    }

    fn skip(&mut self, depth: usize) -> CoreResult<()> {
        if depth > MAX_DEPTH {
            return err(format!("CBOR nested deeper than {MAX_DEPTH}"));
        }
        match self.head()? {
            Head::Scalar => Ok(()),
            Head::Bytes(Some(n)) | Head::Text(Some(n)) => {
                self.take(usize::try_from(n).map_err(|_| CoreError::format("string length overflows"))?)?;
                Ok(())
            }
            Head::Bytes(None) | Head::Text(None) | Head::Array(None) | Head::Map(None) => {
                while !self.at_break()? {
                    self.skip(depth + 1)?;
                }
                Ok(())
            }
            Head::Array(Some(n)) => (0..n).try_for_each(|_| self.skip(depth + 1)),
            Head::Map(Some(n)) => (0..n).try_for_each(|_| self.skip(depth + 1).and_then(|_| self.skip(depth + 1))),
            Head::Tag => self.skip(depth + 1),
            Head::Break => err(format!("unexpected CBOR break at byte {}", self.pos - 1)),
        }
    }

    /// Skips the tags in front of the next item.
    pub fn skip_tags(&mut self) -> CoreResult<()> {
        while self.buf.get(self.pos).is_some_and(|b| b >> 5 == 6) {
            self.head()?;
        }
        Ok(())
    }

    /// Consumes a break if one is next (the end of an indefinite-length item).
    pub fn at_break(&mut self) -> CoreResult<bool> {
        match self.buf.get(self.pos) {
            Some(0xff) => {
                self.pos += 1;
                Ok(true)
            }
            Some(_) => Ok(false),
            None => err("CBOR ends inside an indefinite-length item"),
        }
    }

    /// Visits the entries of a map (definite or indefinite): `entry(walker)` must consume the
    /// key and the value. `Ok(false)` when the next item is no map (nothing is consumed).
    pub fn map_entries(&mut self, mut entry: impl FnMut(&mut Self) -> CoreResult<()>) -> CoreResult<bool> {
        let start = self.pos;
        match self.head()? {
            Head::Map(Some(n)) => (0..n).try_for_each(|_| entry(self))?,
            Head::Map(None) => {
                while !self.at_break()? {
                    entry(self)?
                }
            }
            _ => {
                self.pos = start;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Visits the items of an array; `Ok(false)` when the next item is no array.
    pub fn array_items(&mut self, mut item: impl FnMut(&mut Self) -> CoreResult<()>) -> CoreResult<bool> {
        let start = self.pos;
        match self.head()? {
            Head::Array(Some(n)) => (0..n).try_for_each(|_| item(self))?,
            Head::Array(None) => {
                while !self.at_break()? {
                    item(self)?
                }
            }
            _ => {
                self.pos = start;
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Appends the head of an item of major type `major` (0 to 7) with argument `arg`, in the
/// shortest form, as ciborium writes it.
pub fn push_head(out: &mut Vec<u8>, major: u8, arg: u64) {
    let major = major << 5;
    match arg {
        0..=23 => out.push(major | arg as u8),
        24..=0xff => out.extend([major | 24, arg as u8]),
        0x100..=0xffff => out.extend([[major | 25].as_slice(), &(arg as u16).to_be_bytes()].concat()),
        0x1_0000..=0xffff_ffff => out.extend([[major | 26].as_slice(), &(arg as u32).to_be_bytes()].concat()),
        _ => out.extend([[major | 27].as_slice(), &arg.to_be_bytes()].concat()),
    }
}

/// Decodes one item's bytes (as `Walker::item` returns them) into a value.
pub fn decode(item: &[u8]) -> CoreResult<ciborium::Value> {
    // `from_reader` zeroes a 4 KiB scratch buffer per call: most metadata values are a few
    // bytes, and a file of many distinct values spent most of its scan zeroing. A string
    // longer than the scratch buffer is read into its own allocation, so a small one is enough.
    const SMALL: usize = 64;
    let decoded = if item.len() <= SMALL {
        ciborium::de::from_reader_with_buffer(item, &mut [0u8; SMALL])
    } else {
        ciborium::from_reader(item)
    };
    decoded.map_err(|e| CoreError::format(format!("bad CBOR value: {e}")))
}

/// Encodes a value (descriptor params, which the `tensogram` crate hands over decoded).
pub fn encode(value: &ciborium::Value) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("a CBOR value encodes into memory");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ciborium::Value;

    #[test]
    fn items_round_trip_and_nesting_is_bounded() {
        let value = Value::Map(vec![
            (Value::Text("a".into()), Value::Array(vec![Value::Integer(1.into()), Value::Float(2.5)])),
            (Value::Text("b".into()), Value::Tag(1, Box::new(Value::Bytes(vec![1, 2])))),
        ]);
        let bytes = encode(&value);
        let mut w = Walker::new(&bytes);
        assert_eq!(decode(w.item().unwrap()).unwrap(), value);
        assert_eq!(w.pos, bytes.len());
        // Indefinite-length array of one text string, then a truncated item.
        assert_eq!(Walker::new(&[0x9f, 0x61, b'x', 0xff]).item().unwrap().len(), 4);
        assert!(Walker::new(&[0x82, 0x01]).item().is_err());
        let deep = [vec![0x81u8; MAX_DEPTH + 2], vec![0x01]].concat();
        assert!(Walker::new(&deep).item().is_err());
    }

    #[test]
    fn unsigned_integers_and_heads() {
        for n in [0u64, 23, 24, 255, 256, 65_535, 65_536, u32::MAX as u64, u32::MAX as u64 + 1, u64::MAX] {
            let bytes = encode(&Value::Integer(n.into()));
            let mut head = Vec::new();
            push_head(&mut head, 0, n);
            assert_eq!(head, bytes, "{n}");
            let mut w = Walker::new(&bytes);
            assert_eq!(w.uint().unwrap(), Some(n));
            assert_eq!(w.pos, bytes.len());
        }
        // A negative integer, a float and a text are no unsigned integers: nothing is consumed.
        for value in [Value::Integer((-1).into()), Value::Float(1.0), Value::Text("1".into())] {
            let bytes = encode(&value);
            let mut w = Walker::new(&bytes);
            assert_eq!(w.uint().unwrap(), None);
            assert_eq!(w.pos, 0);
        }
        assert!(Walker::new(&[0x1b, 0x00]).uint().is_err());
    }
}
