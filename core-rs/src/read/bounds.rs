//! A payload checked against its descriptor before it is decoded, so that a hostile file costs
//! no more memory than the shape it declares.
//!
//! The `tensogram` crate sizes a decoder's output from the payload, not from the descriptor:
//! zstd decodes until its stream ends, lz4 allocates what its size prefix says, blosc2 what each
//! chunk header says, SZ3 what its config trailer says. A few kilobytes can claim gigabytes.
//! Each is checked here against the bytes the descriptor declares. szip and zfp decode to the
//! descriptor's size already; uncompressed payloads must be exactly that long.
//!
//! The NaN/Inf masks of an object are decoded the same ways (zstd, lz4 and blosc2 among them):
//! each is checked against the bits of the object's elements.
//!
//! SZ3 also reports corrupt input by throwing a C++ exception; the vendored shim
//! (`vendor/tensogram-sz3-sys`) catches it and [`sz3_failed`] reports it after the decode.

use std::io::Read;

use tensogram::DataObjectDescriptor;

use crate::errors::{CoreError, CoreResult, Kind};
use crate::wire::params::int_param;

/// Bytes the descriptor's values take before unpacking and unshuffling: what a decompressor
/// must produce.
fn expected_len(desc: &DataObjectDescriptor) -> CoreResult<u64> {
    let overflow = || CoreError::new(Kind::Format, format!("shape {:?} of {} overflows", desc.shape, desc.dtype));
    let n = desc.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).ok_or_else(overflow)?;
    let bytes = match desc.compression.as_str() {
        // Lossy float codecs: they decode float64 values themselves.
        "zfp" | "sz3" => n.checked_mul(8),
        _ if desc.encoding == "simple_packing" => {
            let bits = int_param(desc, "sp_bits_per_value").and_then(|b| u64::try_from(b).ok()).ok_or_else(|| {
                CoreError::new(Kind::Format, "simple_packing parameter sp_bits_per_value is missing or invalid")
            })?;
            n.checked_mul(bits).map(|b| b.div_ceil(8))
        }
        _ => n.checked_mul(desc.dtype.byte_width() as u64),
    };
    bytes.ok_or_else(overflow)
}

/// `what` names the stream: "zstd payload", "lz4 nan mask".
fn too_big(what: &str, claim: impl std::fmt::Display, limit: u64) -> CoreError {
    CoreError::new(Kind::Codec, format!("the {what} decodes to {claim} bytes, but the descriptor declares {limit}"))
}

/// Checks that `payload` cannot decode to more than `desc` declares (and, uncompressed, that
/// it holds exactly that): run before any decoder sees it.
pub fn check_payload(desc: &DataObjectDescriptor, payload: &[u8]) -> CoreResult<()> {
    let limit = expected_len(desc)?;
    match desc.compression.as_str() {
        "none" if payload.len() as u64 != limit => Err(CoreError::new(
            Kind::Format,
            format!("the payload holds {} bytes, but shape {:?} of {} needs {limit}", payload.len(), desc.shape, desc.dtype),
        )),
        "zstd" => zstd_within(payload, limit, "zstd payload"),
        "lz4" => lz4_within(payload, limit, "lz4 payload"),
        "blosc2" => blosc2_within(payload, limit, "blosc2 payload"),
        "sz3" => sz3_within(payload, limit / 8),
        _ => Ok(()),
    }
}

/// Checks that no NaN/Inf mask of the object can decode to more than one bit per element (the
/// bit-packed size upstream's mask codecs decompress to) before upstream decodes them.
/// `frame_from_payload` is the object's frame from its payload's first byte: mask offsets count
/// from there. rle, roaring and uncompressed masks need no check: upstream stops them at the
/// element count (runs past it, keys past it and wrong lengths are errors).
pub fn check_masks(desc: &DataObjectDescriptor, frame_from_payload: &[u8]) -> CoreResult<()> {
    let Some(masks) = &desc.masks else {
        return Ok(());
    };
    let packed_len = desc.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).unwrap_or(u64::MAX).div_ceil(8);
    for (kind, mask) in [("nan", &masks.nan), ("+inf", &masks.pos_inf), ("-inf", &masks.neg_inf)] {
        let Some(mask) = mask else {
            continue;
        };
        let blob = usize::try_from(mask.offset)
            .ok()
            .zip(usize::try_from(mask.length).ok())
            .and_then(|(offset, length)| frame_from_payload.get(offset..offset.checked_add(length)?))
            .ok_or_else(|| {
                CoreError::new(
                    Kind::Format,
                    format!("the {kind} mask (offset {}, {} bytes) lies outside its frame", mask.offset, mask.length),
                )
            })?;
        let what = format!("{} {kind} mask", mask.method);
        match mask.method.as_str() {
            "zstd" => zstd_within(blob, packed_len, &what)?,
            "lz4" => lz4_within(blob, packed_len, &what)?,
            "blosc2" if !blob.is_empty() => blosc2_within(blob, packed_len, &what)?,
            _ => {}
        }
    }
    Ok(())
}

/// lz4_flex's size prefix (a little-endian u32, which it allocates) against `limit`.
fn lz4_within(payload: &[u8], limit: u64, what: &str) -> CoreResult<()> {
    let prefix = payload
        .get(..4)
        .ok_or_else(|| CoreError::new(Kind::Codec, format!("the {what} is shorter than its size prefix")))?;
    let claim = u32::from_le_bytes(prefix.try_into().expect("4 bytes")) as u64;
    if claim > limit {
        return Err(too_big(what, claim, limit));
    }
    Ok(())
}

/// Decodes the zstd stream into a small scratch buffer, counting: a zstd frame need not record
/// its decoded size, so only decoding tells it. Memory: the scratch and the decoder's window.
fn zstd_within(payload: &[u8], limit: u64, what: &str) -> CoreResult<()> {
    let err = |e: std::io::Error| CoreError::new(Kind::Codec, format!("zstd decode failed ({what}): {e}"));
    let mut decoder = zstd::stream::read::Decoder::with_buffer(payload).map_err(err)?;
    let mut scratch = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = decoder.read(&mut scratch).map_err(err)?;
        if n == 0 {
            return Ok(());
        }
        total += n as u64;
        if total > limit {
            return Err(too_big(what, format!("more than {limit}"), limit));
        }
    }
}

/// Sums the decoded sizes the blosc2 frame's chunk headers record.
///
/// The frame is read in place (`copy = false`): each chunk is fetched through the frame's own
/// checks. The safe wrapper (what upstream decodes with) copies every chunk out of the frame first,
/// and a corrupt chunk there makes c-blosc2 free pointers it never set (`frame_to_schunk`): a
/// crash found by fuzzing. A frame whose chunks all pass here gets through that copy too.
fn blosc2_within(payload: &[u8], limit: u64, what: &str) -> CoreResult<()> {
    use blosc2_sys::{blosc2_cbuffer_sizes, blosc2_schunk_free, blosc2_schunk_from_buffer, blosc2_schunk_get_chunk};
    let corrupt = |why: &str| CoreError::new(Kind::Codec, format!("blosc2 decode failed ({what}): {why}"));
    // As upstream does before it decodes: chunks cannot be read before the library's init.
    static INIT: std::sync::Once = std::sync::Once::new();
    // SAFETY: blosc2_init has no preconditions.
    INIT.call_once(|| unsafe { blosc2_sys::blosc2_init() });
    let len = i64::try_from(payload.len()).map_err(|_| corrupt("the frame is too large"))?;
    // SAFETY: with copy = false the library reads the buffer in place and never frees or writes
    // it (the frame is marked to leave its buffer alone); the schunk is freed below, before
    // `payload` goes.
    let schunk = unsafe { blosc2_schunk_from_buffer(payload.as_ptr().cast_mut(), len, false) };
    if schunk.is_null() {
        return Err(corrupt("not a blosc2 frame"));
    }
    let mut total = 0u64;
    let mut result = Ok(());
    // SAFETY: `schunk` is a valid super-chunk until freed; each chunk the library hands out is
    // read for its header only and freed when it says so.
    unsafe {
        for i in 0..(*schunk).nchunks {
            let (mut chunk, mut needs_free) = (std::ptr::null_mut(), false);
            let (mut nbytes, mut cbytes, mut blocksize) = (0i32, 0i32, 0i32);
            let ok = blosc2_schunk_get_chunk(schunk, i, &mut chunk, &mut needs_free) >= 0
                && !chunk.is_null()
                && blosc2_cbuffer_sizes(chunk.cast(), &mut nbytes, &mut cbytes, &mut blocksize) >= 0;
            if needs_free && !chunk.is_null() {
                libc_free(chunk.cast());
            }
            if !ok {
                result = Err(corrupt(&format!("chunk {i} cannot be read")));
                break;
            }
            total += u64::try_from(nbytes).unwrap_or(u64::MAX);
            if total > limit {
                result = Err(too_big(what, format!("at least {total}"), limit));
                break;
            }
        }
        blosc2_schunk_free(schunk);
    }
    result
}

extern "C" {
    /// The C library's `free`, for chunks c-blosc2 allocated with `malloc`.
    #[link_name = "free"]
    fn libc_free(ptr: *mut std::ffi::c_void);
}

/// Compares the element count SZ3's config trailer records with the descriptor's.
fn sz3_within(payload: &[u8], elements: u64) -> CoreResult<()> {
    use tensogram_sz3_sys::{sz3_dealloc_size_t, sz3_decompress_config};
    // SAFETY: the parser reads at most `payload.len()` bytes (it checks every access) and
    // returns `dims` allocated on its side, freed here.
    let num = unsafe {
        let config = sz3_decompress_config(payload.as_ptr().cast(), payload.len());
        if !config.dims.is_null() {
            sz3_dealloc_size_t(config.dims);
        }
        // N == 0: a malformed stream, which the decoder reports itself.
        (config.N > 0).then_some(config.num as u64)
    };
    match num {
        Some(num) if num != elements => Err(CoreError::new(
            Kind::Codec,
            format!("the sz3 payload holds {num} values, but the descriptor declares {elements}"),
        )),
        _ => Ok(()),
    }
}

/// After an SZ3 decode on this thread: an error if SZ3 threw (the output is then garbage).
pub fn sz3_failed() -> CoreResult<()> {
    // SAFETY: reads and resets a thread-local flag of the shim.
    if unsafe { tensogram_sz3_sys::sz3_take_decompress_failed() } {
        return Err(CoreError::new(Kind::Codec, "sz3 decode failed: the compressed stream is corrupt"));
    }
    Ok(())
}
