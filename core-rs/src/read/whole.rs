//! zstd and lz4 objects decoded whole into buffers allocated fallibly.
//!
//! Upstream's decoders grow infallible `Vec`s (zstd decodes until its stream ends, lz4 allocates
//! what its size prefix says) and its pipeline copies the result again: under an address-space
//! limit (`ulimit -v`, as batch systems set) a read that numpy could still hold aborted the
//! process. Here every buffer is `try_zeroed` at the size the descriptor declares, and a
//! failed allocation is a `MemoryError`.

use tensogram::{ByteOrder, DataObjectDescriptor};

use crate::buffers::try_zeroed;
use crate::errors::{CoreError, CoreResult, Kind};
use crate::wire::params::int_param;

/// Decodes `desc`'s object from `payload` straight into `out` (its values, in native byte
/// order); `Ok(false)` where the object is not one this path decodes (masks, packing, or
/// another codec: upstream does).
pub fn decode_into(desc: &DataObjectDescriptor, payload: &[u8], out: &mut [u8]) -> CoreResult<bool> {
    if desc.masks.is_some() || desc.encoding != "none" || !matches!(desc.compression.as_str(), "zstd" | "lz4") {
        return Ok(false);
    }
    match desc.filter.as_str() {
        "none" => decompress_into(desc, payload, out)?,
        "shuffle" => {
            let size = int_param(desc, "shuffle_element_size")
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n > 0 && out.len().is_multiple_of(n))
                .ok_or_else(|| CoreError::new(Kind::Format, "shuffle parameter shuffle_element_size is missing or invalid"))?;
            let mut planes = try_zeroed(out.len(), "the decoded object")?;
            decompress_into(desc, payload, &mut planes)?;
            unshuffle(&planes, size, out);
        }
        _ => return Ok(false),
    }
    if desc.byte_order != ByteOrder::native() {
        let unit = desc.dtype.swap_unit_size();
        if unit > 1 {
            out.chunks_exact_mut(unit).for_each(|c| c.reverse());
        }
    }
    Ok(true)
}

/// [`decode_into`] a new buffer of `len` bytes; `None` where that path does not apply.
pub fn decode(desc: &DataObjectDescriptor, payload: &[u8], len: usize) -> CoreResult<Option<Vec<u8>>> {
    let mut values = try_zeroed(len, "the decoded object")?;
    Ok(decode_into(desc, payload, &mut values)?.then_some(values))
}

fn decompress_into(desc: &DataObjectDescriptor, payload: &[u8], out: &mut [u8]) -> CoreResult<()> {
    match desc.compression.as_str() {
        "zstd" => zstd_into(payload, out),
        _ => lz4_into(payload, out),
    }
}

/// The shuffle filter undone: byte `b` of every element is stored in plane `b`.
fn unshuffle(planes: &[u8], size: usize, out: &mut [u8]) {
    let n = out.len() / size;
    for (b, plane) in planes.chunks_exact(n.max(1)).enumerate().take(size) {
        for (i, &byte) in plane.iter().enumerate() {
            out[i * size + b] = byte;
        }
    }
}

fn wrong_size(what: &str, got: usize, want: usize) -> CoreError {
    CoreError::new(
        Kind::Codec,
        format!("the {what} decodes to {got} bytes, but the descriptor declares {want}"),
    )
}

fn zstd_into(payload: &[u8], out: &mut [u8]) -> CoreResult<()> {
    let mut decoder = zstd::bulk::Decompressor::new()
        .map_err(|e| CoreError::new(Kind::Memory, format!("zstd: {e}")))?;
    let n = decoder
        .decompress_to_buffer(payload, out)
        .map_err(|e| CoreError::new(Kind::Codec, format!("zstd decode failed: {e}")))?;
    if n != out.len() {
        return Err(wrong_size("zstd payload", n, out.len()));
    }
    Ok(())
}

/// tensogram's lz4 payload: the decoded length (u32, little-endian), then one lz4 block.
fn lz4_into(payload: &[u8], out: &mut [u8]) -> CoreResult<()> {
    let (prefix, block) = payload.split_first_chunk::<4>().ok_or_else(|| {
        CoreError::new(
            Kind::Codec,
            "the lz4 payload is shorter than its size prefix",
        )
    })?;
    let claimed = u32::from_le_bytes(*prefix) as usize;
    if claimed != out.len() {
        return Err(wrong_size("lz4 payload", claimed, out.len()));
    }
    let n = lz4_flex::block::decompress_into(block, out)
        .map_err(|e| CoreError::new(Kind::Codec, format!("lz4 decode failed: {e}")))?;
    if n != out.len() {
        return Err(wrong_size("lz4 payload", n, out.len()));
    }
    Ok(())
}
