//! RSI block offsets for szip range decodes, as libaec's decoder finds them.
//!
//! libaec 1.1.4's encoder (which upstream uses to record `szip_block_offsets`) stores wrong
//! offsets after runs of all-zero blocks: on the real land-sea mask 26 of 254 offsets differ
//! from where the blocks really start, and a range decode through them fails or silently returns
//! wrong values. Before the first partial read of an szip object we decode it once with the
//! decoder's offset tracking on and use those offsets instead.

use ciborium::Value;
use libaec_sys::{
    aec_decode, aec_decode_count_offsets, aec_decode_enable_offsets, aec_decode_end,
    aec_decode_get_offsets, aec_decode_init, aec_stream, AEC_DATA_3BYTE, AEC_DATA_MSB, AEC_FLUSH,
    AEC_OK,
};
use tensogram::DataObjectDescriptor;

use crate::errors::{CoreError, CoreResult, Kind};
use crate::message::int_param;

fn param_u32(desc: &DataObjectDescriptor, key: &str) -> CoreResult<u32> {
    int_param(desc, key)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| CoreError::new(Kind::Format, format!("szip parameter {key} is missing or invalid")))
}

/// Returns a copy of `desc` whose `szip_block_offsets` are the decoder's.
pub fn with_decoder_offsets(
    desc: &DataObjectDescriptor,
    payload: &[u8],
) -> CoreResult<DataObjectDescriptor> {
    let num_values: u64 = desc.shape.iter().product();
    let packed = desc.encoding == "simple_packing";
    let bits = if packed {
        param_u32(desc, "sp_bits_per_value")?
    } else {
        desc.dtype.byte_width() as u32 * 8
    };
    let mut flags = param_u32(desc, "szip_flags")?;
    if packed {
        flags |= AEC_DATA_MSB; // simple packing writes big-endian bit streams
    }
    if bits > 16 && bits <= 24 {
        flags |= AEC_DATA_3BYTE;
    }
    let rsi = param_u32(desc, "szip_rsi")?;
    let block_size = param_u32(desc, "szip_block_size")?;
    // The decoded size as tensogram computes it: decoding stops when the output is full.
    let out_size = (num_values * bits as u64).div_ceil(8) as usize;
    let mut out = vec![0u8; out_size];

    // SAFETY: the stream points at `payload` and `out`, which outlive it; libaec reads at most
    // `avail_in` and writes at most `avail_out` bytes, and `aec_decode_end` frees its state.
    let offsets = unsafe {
        let mut strm: aec_stream = std::mem::zeroed();
        strm.next_in = payload.as_ptr();
        strm.avail_in = payload.len();
        strm.next_out = out.as_mut_ptr();
        strm.avail_out = out.len();
        strm.bits_per_sample = bits;
        strm.block_size = block_size;
        strm.rsi = rsi;
        strm.flags = flags;
        check(aec_decode_init(&mut strm), "aec_decode_init")?;
        let result = decode_tracking_offsets(&mut strm);
        aec_decode_end(&mut strm);
        result?
    };

    crate::read::DECODED_ELEMENTS.fetch_add(num_values, std::sync::atomic::Ordering::Relaxed);
    let samples_per_rsi = rsi as u64 * block_size as u64;
    let rsi_blocks = num_values.div_ceil(samples_per_rsi) as usize;
    let offsets: Vec<Value> =
        offsets.into_iter().take(rsi_blocks).map(|o| Value::Integer((o as u64).into())).collect();
    let mut fixed = desc.clone();
    fixed.params.insert("szip_block_offsets".to_string(), Value::Array(offsets));
    Ok(fixed)
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
