//! RSI block offsets of szip objects: the decoder's, and the marker that vouches for stored ones.
//!
//! libaec 1.1.4's encoder (which upstream uses to record `szip_block_offsets`) stores wrong
//! offsets after runs of all-zero blocks: on the real land-sea mask 26 of 254 offsets differ
//! from where the blocks really start, and a range decode through them fails or silently returns
//! wrong values. The decoder, with its offset tracking on, finds the true ones. Our vendored
//! libaec's encoder records the true ones too (vendor/README.md): the tests check them against
//! the decoder's.
//!
//! Messages we encode store those offsets and [`VERIFIED_KEY`], a digest of the offsets and of
//! the payload's length: reads trust the stored offsets of an object whose digest matches.
//! Any other object (files upstream wrote, or ours that upstream decoded and encoded again: it
//! keeps unknown parameters but records fresh offsets, so the digest no longer matches) is
//! decoded once with offset tracking before its first partial read.

use ciborium::Value;
use libaec_sys::{
    aec_buffer_seek, aec_decode, aec_decode_count_offsets, aec_decode_enable_offsets, aec_decode_end,
    aec_decode_get_offsets, aec_decode_init, aec_decode_range, aec_encode, aec_encode_count_offsets,
    aec_encode_enable_offsets, aec_encode_end, aec_encode_get_offsets, aec_encode_init, aec_stream, AEC_DATA_3BYTE,
    AEC_DATA_MSB, AEC_FLUSH, AEC_NO_FLUSH, AEC_OK, AEC_PAD_RSI, AEC_RESTRICTED,
};
use tensogram::DataObjectDescriptor;

use crate::errors::{CoreError, CoreResult, Kind};
use crate::wire::params::int_param;

/// The descriptor parameter that marks `szip_block_offsets` as checked against the decoder.
pub const VERIFIED_KEY: &str = "szip_block_offsets_verified";
pub const OFFSETS_KEY: &str = "szip_block_offsets";

/// The libaec flags a stream may be written with: all seven but `AEC_PAD_RSI`, which pads each
/// RSI to a whole byte. Tensogram's decoders (ours, and upstream 0.24's) read such a stream
/// wrong, with a hash that matches: values off by far more than a step, or an error. Found by
/// encoding and decoding every flag at 8 to 32 bits, small and large fields, 1 and 2 threads
/// (`tests/core/test_szip_flags.py` runs that fuzz against this rule). `AEC_RESTRICTED` takes
/// samples of at most 4 bits (libaec refuses it on wider ones, some paths only).
pub const WRITABLE_FLAGS: u32 = 0x7f & !AEC_PAD_RSI;

/// `flags` as written, if every decoder reads back what a stream of `bits`-bit samples (where
/// known) with them holds; else why not.
pub fn writable_flags(flags: i64, bits: Option<u32>) -> CoreResult<u32> {
    let refused = |why: String| Err(CoreError::new(Kind::Codec, why));
    match u32::try_from(flags) {
        Ok(f) if f & !0x7f != 0 => refused(format!("szip_flags must be an integer from 0 to 127; got {flags}")),
        Ok(f) if f & AEC_PAD_RSI != 0 => refused(format!(
            "szip_flags {flags} has AEC_PAD_RSI (32), which pads each RSI to a byte: Tensogram's szip decoders \
             would read the stream back wrong; leave that flag out (szip_flags={})",
            f & WRITABLE_FLAGS
        )),
        Ok(f) if f & AEC_RESTRICTED != 0 && bits.is_some_and(|b| b > 4) => refused(format!(
            "szip_flags {flags} has AEC_RESTRICTED (16), which takes samples of at most 4 bits, not {}; leave \
             that flag out (szip_flags={})",
            bits.unwrap_or_default(),
            f & !AEC_RESTRICTED
        )),
        Ok(f) => Ok(f),
        Err(_) => refused(format!("szip_flags must be an integer from 0 to 127; got {flags}")),
    }
}

/// Refuses an object whose szip flags would not read back (see [`WRITABLE_FLAGS`]), before
/// anything of its message is encoded.
pub fn check_writable(desc: &DataObjectDescriptor) -> CoreResult<()> {
    if desc.compression != "szip" {
        return Ok(());
    }
    match desc.params.get("szip_flags") {
        Some(Value::Integer(i)) => {
            writable_flags(i64::try_from(*i).unwrap_or(i64::MAX), sample_bits(desc).ok()).map(|_| ())
        }
        _ => Ok(()), // missing or not an integer: upstream's encode says so
    }
}

/// The sample width upstream hands libaec: packed bits, bytes after a shuffle, else the dtype's.
fn sample_bits(desc: &DataObjectDescriptor) -> CoreResult<u32> {
    Ok(if desc.encoding == "simple_packing" {
        param_u32(desc, "sp_bits_per_value")?
    } else if desc.filter == "shuffle" {
        8
    } else {
        desc.dtype.byte_width() as u32 * 8
    })
}

fn param_u32(desc: &DataObjectDescriptor, key: &str) -> CoreResult<u32> {
    int_param(desc, key)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| CoreError::new(Kind::Format, format!("szip parameter {key} is missing or invalid")))
}

/// The RSI block offsets (in bits from the payload's start) where libaec's decoder finds them,
/// and the decompressed stream they come with: decodes the whole payload once.
fn decode_tracking(desc: &DataObjectDescriptor, payload: &[u8]) -> CoreResult<(Vec<u64>, Vec<u8>)> {
    let num_values: u64 = desc.shape.iter().product();
    let packed = desc.encoding == "simple_packing";
    let bits = sample_bits(desc)?;
    let mut flags = param_u32(desc, "szip_flags")?;
    if packed {
        flags |= AEC_DATA_MSB; // simple packing writes big-endian bit streams
    }
    if bits > 16 && bits <= 24 {
        flags |= AEC_DATA_3BYTE;
    }
    let rsi = param_u32(desc, "szip_rsi")?;
    let block_size = param_u32(desc, "szip_block_size")?;
    check_params(bits, block_size, rsi, flags)?;
    // The decoded size as tensogram computes it: decoding stops when the output is full.
    let out_size = (num_values * bits as u64).div_ceil(8) as usize;
    let mut out = crate::buffers::try_zeroed(out_size, "the szip offset scan")?;

    // SAFETY: the stream points at `payload` and `out`, which outlive it; libaec reads at most
    // `avail_in` and writes at most `avail_out` bytes, and `aec_decode_end` frees its state.
    let offsets = unsafe {
        let mut strm = stream_over(payload, bits, block_size, rsi, flags);
        strm.next_out = out.as_mut_ptr();
        strm.avail_out = out.len();
        check(aec_decode_init(&mut strm), "aec_decode_init")?;
        let result = decode_tracking_offsets(&mut strm);
        let short = strm.avail_out > 0;
        aec_decode_end(&mut strm);
        if short && result.is_ok() {
            return Err(CoreError::new(Kind::Codec, "szip stream ends before the shape's values"));
        }
        result?
    };
    let rsi_blocks = num_values.div_ceil(rsi as u64 * block_size as u64) as usize;
    Ok((offsets.into_iter().take(rsi_blocks).map(|o| o as u64).collect(), out))
}

fn decoder_offsets(desc: &DataObjectDescriptor, payload: &[u8]) -> CoreResult<Vec<u64>> {
    Ok(decode_tracking(desc, payload)?.0)
}

fn set_offsets(desc: &mut DataObjectDescriptor, offsets: &[u64]) {
    let values = offsets.iter().map(|&o| Value::Integer(o.into())).collect();
    desc.params.insert(OFFSETS_KEY.to_string(), Value::Array(values));
}

/// A copy of `desc` whose `szip_block_offsets` are the decoder's (for reads of objects whose
/// stored offsets are not vouched for).
pub fn with_decoder_offsets(desc: &DataObjectDescriptor, payload: &[u8]) -> CoreResult<DataObjectDescriptor> {
    let mut fixed = desc.clone();
    set_offsets(&mut fixed, &decoder_offsets(desc, payload)?);
    Ok(fixed)
}

/// [`with_decoder_offsets`] and the decompressed stream, from one decode: a whole read of an
/// object whose offsets are not vouched for finds them on the way.
pub fn decode_with_decoder_offsets(desc: &DataObjectDescriptor, payload: &[u8]) -> CoreResult<(DataObjectDescriptor, Vec<u8>)> {
    let (offsets, decoded) = decode_tracking(desc, payload)?;
    let mut fixed = desc.clone();
    set_offsets(&mut fixed, &offsets);
    Ok((fixed, decoded))
}

/// Marks the offsets our encoder recorded in `desc` verified (at encode time). Where the linked
/// encoder is not ours, or the offsets are of the wrong count or order, they are replaced with
/// the decoder's first.
pub fn verify_offsets(desc: &mut DataObjectDescriptor, payload: &[u8]) -> CoreResult<()> {
    let offsets = match stored_offsets(desc) {
        Some(offsets) if encoder_offsets_trusted() && well_formed(desc, &offsets, payload.len())? => offsets,
        _ => {
            let offsets = decoder_offsets(desc, payload)?;
            set_offsets(desc, &offsets);
            offsets
        }
    };
    desc.params.insert(VERIFIED_KEY.to_string(), Value::Text(digest(&offsets, payload.len())));
    Ok(())
}

/// Whether the linked libaec's encoder records RSI offsets where its decoder finds them (ours
/// does): probed once per process on a stream libaec 1.1.4 gets wrong, so that a build linking
/// another libaec (a stale build of `vendor/libaec-sys`) decodes each object instead.
pub fn encoder_offsets_trusted() -> bool {
    static TRUSTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRUSTED.get_or_init(|| {
        // 1,024 float32 values in RSIs of 8 blocks of 16: RSI 0 ends with zero blocks and then
        // a nonzero one, after which 1.1.4 took RSI 1's offset too early.
        let mut values = [0f32; 1024];
        values[112..117].copy_from_slice(&[0.1, 0.5, 0.9, 0.3, 0.7]);
        values[512..].fill(1.0);
        let samples: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let params = tensogram_encodings::libaec::AecParams { bits_per_sample: 32, block_size: 16, rsi: 8, flags: 8 };
        let Ok((payload, offsets)) = tensogram_encodings::libaec::aec_compress(&samples, &params) else {
            return false;
        };
        let int = |v: u64| Value::Integer(v.into());
        let desc = DataObjectDescriptor {
            obj_type: "ntensor".into(),
            ndim: 1,
            shape: vec![1024],
            strides: vec![1],
            dtype: tensogram::Dtype::Float32,
            byte_order: tensogram::ByteOrder::native(),
            encoding: "none".into(),
            filter: "none".into(),
            compression: "szip".into(),
            masks: None,
            params: [("szip_rsi", int(8)), ("szip_block_size", int(16)), ("szip_flags", int(8))]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        };
        decoder_offsets(&desc, &payload).is_ok_and(|found| found == offsets)
    })
}

/// Whether `offsets` are one per RSI block of `desc`, the first 0, rising, inside the payload.
fn well_formed(desc: &DataObjectDescriptor, offsets: &[u64], payload_len: usize) -> CoreResult<bool> {
    let values_per_rsi = param_u32(desc, "szip_rsi")? as u64 * param_u32(desc, "szip_block_size")? as u64;
    let rsi_blocks = desc.shape.iter().product::<u64>().div_ceil(values_per_rsi.max(1));
    Ok(offsets.len() as u64 == rsi_blocks
        && offsets.first() == Some(&0)
        && offsets.windows(2).all(|w| w[0] < w[1])
        && offsets.last().is_some_and(|&last| last < payload_len as u64 * 8))
}

/// Whether the stored offsets are those [`verify_offsets`] vouched for, for a payload this long.
pub fn offsets_verified(desc: &DataObjectDescriptor, payload_len: usize) -> bool {
    let (Some(Value::Text(mark)), Some(offsets)) = (desc.params.get(VERIFIED_KEY), stored_offsets(desc)) else {
        return false;
    };
    *mark == digest(&offsets, payload_len)
}

/// The RSI block bit offsets `desc` stores, if it stores a valid list.
pub fn stored_offsets(desc: &DataObjectDescriptor) -> Option<Vec<u64>> {
    let Some(Value::Array(items)) = desc.params.get(OFFSETS_KEY) else {
        return None;
    };
    items
        .iter()
        .map(|v| match v {
            Value::Integer(i) => u64::try_from(i128::from(*i)).ok(),
            _ => None,
        })
        .collect()
}

/// xxh3-64 (hex, as upstream writes hashes) of the payload length and the offsets, little-endian.
fn digest(offsets: &[u64], payload_len: usize) -> String {
    let bytes: Vec<u8> =
        std::iter::once(payload_len as u64).chain(offsets.iter().copied()).flat_map(u64::to_le_bytes).collect();
    tensogram::compute_hash(&bytes)
}

/// Refuses the parameters libaec's encoder never writes (as upstream's wrapper does before its
/// decodes): its decoder trusts them, and an RSI of 0 would make an RSI block hold no values.
fn check_params(bits: u32, block_size: u32, rsi: u32, flags: u32) -> CoreResult<()> {
    let block_ok = if flags & libaec_sys::AEC_NOT_ENFORCE != 0 {
        block_size > 0 && block_size.is_multiple_of(2)
    } else {
        matches!(block_size, 8 | 16 | 32 | 64)
    };
    if !(1..=32).contains(&bits) || !block_ok || !(1..=4096).contains(&rsi) {
        return Err(CoreError::new(
            Kind::Format,
            format!("szip parameters out of range: {bits} bits, block size {block_size}, RSI {rsi}"),
        ));
    }
    Ok(())
}

/// A libaec stream that reads `payload` with these parameters; its output is set by the caller.
fn stream_over(payload: &[u8], bits: u32, block_size: u32, rsi: u32, flags: u32) -> aec_stream {
    // SAFETY: all zeroes is the state libaec expects a stream to start from.
    let mut strm: aec_stream = unsafe { std::mem::zeroed() };
    strm.next_in = payload.as_ptr();
    strm.avail_in = payload.len();
    strm.bits_per_sample = bits;
    strm.block_size = block_size;
    strm.rsi = rsi;
    strm.flags = flags;
    strm
}

/// `samples` (whole samples of `bits` bits) szip-encoded by libaec, and the bit offsets its
/// encoder records: where each RSI block starts and, last, where the stream ends (before the
/// zero bits that fill its last byte). `None` where libaec fails or records another count, for
/// the caller's other path to report. Each RSI block is coded on its own (CCSDS 121: a
/// reference sample interval), so encoding whole RSIs apart and joining their bits at these
/// ends gives the bytes of one encode (`join_bits`).
pub fn encode_with_end(samples: &[u8], bits: u32, block_size: u32, rsi: u32, flags: u32) -> Option<(Vec<u8>, Vec<u64>)> {
    check_params(bits, block_size, rsi, flags).ok()?;
    let flags = if bits > 16 && bits <= 24 { flags | AEC_DATA_3BYTE } else { flags };
    let width = if bits > 16 && bits <= 24 { 3 } else { bits.div_ceil(8).next_power_of_two() as usize };
    if samples.is_empty() || !samples.len().is_multiple_of(width) {
        return None;
    }
    let blocks = (samples.len() / width).div_ceil(block_size as usize * rsi as usize);
    // Room for incompressible data (upstream's bound): libaec records offsets only while it
    // writes straight into the output.
    // Not zeroed: libaec writes what `written` counts, and only that is kept.
    let mut out = Vec::<u8>::with_capacity(samples.len() + samples.len() / 4 + 256);
    let mut strm = Box::new(stream_over(samples, bits, block_size, rsi, flags));
    strm.next_out = out.as_mut_ptr();
    strm.avail_out = out.capacity();
    // SAFETY: the stream reads `samples` and writes `out`, both outliving it, within the counts
    // it was given; it is boxed (libaec keeps its address) and ended on every path.
    let offsets = unsafe {
        if aec_encode_init(&mut *strm) != AEC_OK as i32 {
            return None;
        }
        let mut offsets = vec![0usize; blocks + 1];
        let mut count = 0;
        let done = aec_encode_enable_offsets(&mut *strm) == AEC_OK as i32
            && aec_encode(&mut *strm, AEC_FLUSH as i32) == AEC_OK as i32
            && aec_encode_count_offsets(&mut *strm, &mut count) == AEC_OK as i32
            && count == blocks + 1
            && aec_encode_get_offsets(&mut *strm, offsets.as_mut_ptr(), count) == AEC_OK as i32;
        let written = out.capacity() - strm.avail_out;
        aec_encode_end(&mut *strm);
        if !done || offsets.last().map(|&end| end.div_ceil(8)) != Some(written) {
            return None;
        }
        out.set_len(written);
        offsets
    };
    Some((out, offsets.into_iter().map(|o| o as u64).collect()))
}

/// Appends the first `n` bits of `bits` to the bit stream `out`, which holds `*end` bits (MSB
/// first, as szip writes them); its last byte's unused bits are zero, and stay so.
pub fn join_bits(out: &mut Vec<u8>, end: &mut u64, bits: &[u8], n: u64) {
    let bytes = &bits[..n.div_ceil(8) as usize];
    let shift = (*end % 8) as u32;
    let held = end.div_ceil(8) as usize;
    out.truncate(held);
    if shift == 0 || bytes.is_empty() {
        out.extend_from_slice(bytes);
    } else {
        // Each byte out takes the low bits of one byte in and the high bits of the next: a
        // loop over pairs, which the compiler vectorises.
        out.resize(held + bytes.len(), 0);
        let to = &mut out[held - 1..];
        to[0] |= bytes[0] >> shift;
        for (b, pair) in to[1..].iter_mut().zip(bytes.windows(2)) {
            *b = (pair[0] << (8 - shift)) | (pair[1] >> shift);
        }
        to[bytes.len()] = bytes[bytes.len() - 1] << (8 - shift);
    }
    *end += n;
    out.truncate(end.div_ceil(8) as usize);
    if let (Some(last), used @ 1..) = (out.last_mut(), *end % 8) {
        *last &= 0xffu8 << (8 - used);
    }
}

/// One libaec decoder over an szip payload, set up once for any number of range decodes (the
/// rows of a window): upstream's range decode sets a decoder up, and frees it, per range.
pub struct RangeDecoder<'a> {
    /// Boxed: libaec keeps the stream's address in its state.
    strm: Box<aec_stream>,
    offsets: Vec<usize>,
    /// Decompressed bytes in the whole stream: ranges past it are refused.
    total: usize,
    _payload: std::marker::PhantomData<&'a [u8]>,
}

/// A libaec decoder of `payload`, initialised (its owner ends it): parameters checked, and
/// 3-byte samples flagged as libaec wants them.
fn decoding_stream(payload: &[u8], bits: u32, block_size: u32, rsi: u32, flags: u32) -> CoreResult<Box<aec_stream>> {
    check_params(bits, block_size, rsi, flags)?;
    let mut flags = flags;
    if bits > 16 && bits <= 24 {
        flags |= AEC_DATA_3BYTE;
    }
    let mut strm = Box::new(stream_over(payload, bits, block_size, rsi, flags));
    // SAFETY: the stream is set up and boxed: libaec keeps its address while it lives.
    check(unsafe { aec_decode_init(&mut *strm) }, "aec_decode_init")?;
    Ok(strm)
}

impl<'a> RangeDecoder<'a> {
    /// A decoder of `payload` (at most `total` decompressed bytes) whose RSI blocks start at the
    /// bit `offsets`; `flags` as libaec takes them (3-byte samples are flagged here).
    pub fn new(payload: &'a [u8], offsets: &[u64], total: usize, bits: u32, block_size: u32, rsi: u32, flags: u32) -> CoreResult<Self> {
        // Blocks that start past the payload are not in it (a remote read fetches some blocks).
        let offsets: Vec<usize> =
            offsets.iter().map_while(|&o| usize::try_from(o).ok().filter(|&o| o / 8 < payload.len())).collect();
        // The stream reads `payload`, which outlives the decoder (`'a`); Drop frees it.
        let strm = decoding_stream(payload, bits, block_size, rsi, flags)?;
        Ok(RangeDecoder { strm, offsets, total, _payload: std::marker::PhantomData })
    }

    /// Decompresses the bytes `pos..pos + out.len()` of the stream into `out`: from the RSI
    /// block that holds `pos`, and no further than the range's end.
    pub fn decode(&mut self, pos: usize, out: &mut [u8]) -> CoreResult<()> {
        if out.is_empty() {
            return Ok(());
        }
        if pos.checked_add(out.len()).is_none_or(|end| end > self.total) {
            return Err(CoreError::new(Kind::Codec, "szip range lies past the end of the object"));
        }
        self.strm.next_out = out.as_mut_ptr();
        self.strm.avail_out = out.len();
        // SAFETY: libaec writes at most `avail_out` bytes to `next_out` (`out`), reads the
        // payload within `avail_in`, and the offsets are checked to lie inside the payload.
        let rc = unsafe { aec_decode_range(&mut *self.strm, self.offsets.as_ptr(), self.offsets.len(), pos, out.len()) };
        check(rc, "aec_decode_range")
    }
}

impl Drop for RangeDecoder<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, ended once.
        unsafe { aec_decode_end(&mut *self.strm) };
    }
}

/// A libaec decoder that runs forward through an szip stream from the start of one RSI block,
/// filling the caller's buffers piece by piece. A long range then needs no buffer of its own,
/// where libaec's range decode allocates one for the whole range and copies it out, and the
/// pieces stay in the cache while they are unpacked.
pub struct StreamDecoder<'a> {
    /// Boxed: libaec keeps the stream's address in its state.
    strm: Box<aec_stream>,
    _payload: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> StreamDecoder<'a> {
    /// A decoder of `payload` positioned at bit `offset`, where an RSI block starts (0 for the
    /// first); `flags` as for [`RangeDecoder::new`].
    pub fn new(payload: &'a [u8], offset: u64, bits: u32, block_size: u32, rsi: u32, flags: u32) -> CoreResult<Self> {
        let offset = usize::try_from(offset)
            .ok()
            .filter(|&o| o / 8 < payload.len())
            .ok_or_else(|| CoreError::new(Kind::Codec, "szip RSI block offset lies past the payload"))?;
        let strm = decoding_stream(payload, bits, block_size, rsi, flags)?;
        let mut decoder = StreamDecoder { strm, _payload: std::marker::PhantomData };
        // SAFETY: moves the input position within `avail_in` (libaec checks it).
        check(unsafe { aec_buffer_seek(&mut *decoder.strm, offset) }, "aec_buffer_seek")?;
        Ok(decoder)
    }

    /// Decompresses the next `out.len()` bytes of the stream (whole samples) into `out`.
    pub fn fill(&mut self, out: &mut [u8]) -> CoreResult<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.strm.next_out = out.as_mut_ptr();
        self.strm.avail_out = out.len();
        // SAFETY: libaec writes at most `avail_out` bytes to `next_out` (`out`) and reads the
        // payload within `avail_in`; its state carries over from the previous piece.
        check(unsafe { aec_decode(&mut *self.strm, AEC_NO_FLUSH as i32) }, "aec_decode")?;
        if self.strm.avail_out > 0 {
            return Err(CoreError::new(Kind::Codec, "szip stream ends before the shape's values"));
        }
        Ok(())
    }
}

impl Drop for StreamDecoder<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, ended once.
        unsafe { aec_decode_end(&mut *self.strm) };
    }
}

fn check(rc: i32, what: &str) -> CoreResult<()> {
    if rc == AEC_OK as i32 {
        Ok(())
    } else {
        Err(CoreError::new(Kind::Codec, format!("szip: {what} failed with code {rc}")))
    }
}

/// Decodes the whole stream with offset tracking on and returns the RSI bit offsets.
///
/// # Safety
/// `strm` must be initialised by `aec_decode_init` with valid input and output buffers.
unsafe fn decode_tracking_offsets(strm: &mut aec_stream) -> CoreResult<Vec<usize>> {
    check(aec_decode_enable_offsets(strm), "aec_decode_enable_offsets")?;
    check(aec_decode(strm, AEC_FLUSH as i32), "aec_decode")?;
    let mut count = 0usize;
    check(aec_decode_count_offsets(strm, &mut count), "aec_decode_count_offsets")?;
    let mut offsets = vec![0usize; count];
    check(aec_decode_get_offsets(strm, offsets.as_mut_ptr(), count), "aec_decode_get_offsets")?;
    Ok(offsets)
}
