//! Simple-packed fields (optionally szip-compressed) decoded straight into the output array.
//!
//! Upstream's decode returns a fresh `Vec<f64>`, converts it to a second `Vec<u8>`, and we would
//! copy that into numpy: three passes over 8 bytes a value for what is one multiply-add. Here
//! libaec (through upstream's wrapper) fills the packed bytes and one loop writes the values
//! into the caller's array, with upstream's arithmetic (`ref + 2^E * 10^-D * packed`), so the
//! results are bit-identical. Partial reads do the same with the RSI blocks that hold the
//! selected values, unpacking only the selected ones.

use std::borrow::Cow;

use tensogram::DataObjectDescriptor;
use tensogram_encodings::libaec::{aec_decompress, AecParams};
use tensogram_encodings::simple_packing::{self, SimplePackingParams};

use crate::errors::{CoreError, CoreResult, Kind};
use crate::params::{float_param, int_param};
use crate::szip::{RangeDecoder, StreamDecoder};

/// Values decoded per piece by [`Packed::stream_into`]: their packed bytes (24 KB at 24 bits)
/// and unpacked values (64 KB) stay in the core's caches between the decode and the unpack.
pub const STREAM_VALUES: usize = 8192;

/// How a packed object is stored, when it qualifies for the direct path.
#[derive(Debug, Clone)]
pub struct Packed {
    params: SimplePackingParams,
    szip: Option<AecParams>,
    /// Values in the object.
    values: u64,
}

impl Packed {
    /// `Some` for float64 simple packing with no filter, no masks, and no or szip compression.
    pub fn of(desc: &DataObjectDescriptor, has_masks: bool) -> Option<Packed> {
        if desc.encoding != "simple_packing" || desc.dtype != tensogram::Dtype::Float64 || desc.filter != "none" || has_masks {
            return None;
        }
        let params = SimplePackingParams {
            reference_value: float_param(desc, "sp_reference_value")?,
            binary_scale_factor: int_param(desc, "sp_binary_scale_factor")?.try_into().ok()?,
            decimal_scale_factor: int_param(desc, "sp_decimal_scale_factor")?.try_into().ok()?,
            bits_per_value: int_param(desc, "sp_bits_per_value")?.try_into().ok()?,
        };
        let szip = match desc.compression.as_str() {
            "none" => None,
            "szip" => Some(AecParams {
                bits_per_sample: params.bits_per_value,
                block_size: int_param(desc, "szip_block_size")?.try_into().ok()?,
                rsi: int_param(desc, "szip_rsi")?.try_into().ok()?,
                // Simple packing writes MSB-first bit streams (upstream ORs this in too).
                flags: u32::try_from(int_param(desc, "szip_flags")?).ok()? | libaec_sys::AEC_DATA_MSB,
            }),
            _ => return None,
        };
        Some(Packed { params, szip, values: desc.shape.iter().product() })
    }

    /// Decodes all `out.len() / 8` values of `payload` into `out` (native-endian f64 bytes).
    pub fn decode_into(&self, payload: &[u8], out: &mut [u8]) -> CoreResult<()> {
        if self.value_bytes().is_some() {
            // The stream's first RSI block starts at bit 0: no offsets needed.
            return self.stream_into(payload, &[], 0, out);
        }
        let n = out.len() / 8;
        let p = &self.params;
        let packed_len = (n * p.bits_per_value as usize).div_ceil(8);
        let decompressed;
        let packed: &[u8] = match &self.szip {
            None => payload,
            Some(aec) => {
                decompressed = aec_decompress(payload, packed_len, aec).map_err(szip_err)?;
                &decompressed
            }
        };
        if packed.len() < packed_len {
            return Err(CoreError::new(Kind::Codec, "packed payload is shorter than the shape needs"));
        }
        let values =
            simple_packing::decode(packed, n, p).map_err(|e| CoreError::new(Kind::Codec, format!("unpacking failed: {e}")))?;
        for (dst, v) in out.chunks_exact_mut(8).zip(values) {
            dst.copy_from_slice(&v.to_ne_bytes());
        }
        Ok(())
    }

    /// Bytes per packed value when values are whole bytes (8, 16, 24 or 32 bits): ranges of
    /// them can then be unpacked straight into the output.
    pub fn value_bytes(&self) -> Option<usize> {
        matches!(self.params.bits_per_value, 8 | 16 | 24 | 32).then_some(self.params.bits_per_value as usize / 8)
    }

    /// Values in one szip RSI block (0 without szip).
    pub fn rsi_values(&self) -> u64 {
        self.szip.as_ref().map_or(0, |a| a.rsi as u64 * a.block_size as u64)
    }

    /// Unpacks values `first..first + out.len() / 8` (whole-byte values only) into `out`. With
    /// szip, libaec decodes forward from the RSI block that holds `first` (which starts at bit
    /// `offsets[block]`; block 0 needs none) in pieces of [`STREAM_VALUES`], each unpacked while
    /// it is in the cache.
    pub fn stream_into(&self, payload: &[u8], offsets: &[u64], first: u64, out: &mut [u8]) -> CoreResult<()> {
        let width = self.value_bytes().expect("whole-byte values");
        let n = (out.len() / 8) as u64;
        if first.checked_add(n).is_none_or(|end| end > self.values) {
            return Err(CoreError::new(Kind::Codec, "packed range lies past the end of the object"));
        }
        let Some(aec) = &self.szip else {
            let src = payload.get(first as usize * width..(first + n) as usize * width);
            let src = src.ok_or_else(|| CoreError::new(Kind::Codec, "packed payload is shorter than the shape needs"))?;
            self.unpack(src, out);
            return Ok(());
        };
        // (An RSI of 0 is refused by the decoder, which checks the parameters.)
        let block = first / self.rsi_values().max(1);
        let offset = match block {
            0 => 0,
            b => *offsets.get(b as usize).ok_or_else(|| {
                CoreError::new(Kind::Format, "szip_block_offsets are missing or too few for a partial decode")
            })?,
        };
        let mut decoder = StreamDecoder::new(payload, offset, aec.bits_per_sample, aec.block_size, aec.rsi, aec.flags)?;
        let mut piece = vec![0u8; STREAM_VALUES * width];
        // Values of the block before `first`: decoded (the next ones depend on them), not kept.
        let mut skip = (first - block * self.rsi_values().max(1)) as usize;
        while skip > 0 {
            let k = skip.min(STREAM_VALUES);
            decoder.fill(&mut piece[..k * width])?;
            skip -= k;
        }
        for dst in out.chunks_mut(STREAM_VALUES * 8) {
            let src = &mut piece[..dst.len() / 8 * width];
            decoder.fill(src)?;
            self.unpack(src, dst);
        }
        Ok(())
    }

    /// The packed bytes of values `first..first + count` (whole-byte values only): a slice of
    /// the payload, or decompressed from the szip RSI blocks that hold them, which start at the
    /// bit `offsets`.
    pub fn packed_range<'a>(&self, payload: &'a [u8], offsets: &[u64], first: u64, count: u64) -> CoreResult<Cow<'a, [u8]>> {
        self.reader(payload, offsets)?.range(first, count)
    }

    /// A reader of the packed bytes of ranges of values (whole-byte values only), with one szip
    /// decoder for all the ranges it reads.
    pub fn reader<'a>(&self, payload: &'a [u8], offsets: &[u64]) -> CoreResult<PackedReader<'a>> {
        let width = self.value_bytes().expect("whole-byte values");
        let szip = match &self.szip {
            None => None,
            Some(aec) => {
                let total = usize::try_from(self.values).unwrap_or(usize::MAX).saturating_mul(width);
                Some(RangeDecoder::new(payload, offsets, total, aec.bits_per_sample, aec.block_size, aec.rsi, aec.flags)?)
            }
        };
        Ok(PackedReader { width, payload, szip })
    }

    /// `reference + 2^E * 10^-D * packed` of each whole-byte big-endian value of `packed`, as
    /// native-endian f64 bytes into `out`: upstream's arithmetic, so bit-identical values.
    pub fn unpack(&self, packed: &[u8], out: &mut [u8]) {
        let p = &self.params;
        let inv_scale = 2f64.powi(p.binary_scale_factor) * 10f64.powi(-p.decimal_scale_factor);
        match p.bits_per_value {
            8 => unpack_aligned::<1>(packed, p.reference_value, inv_scale, out),
            16 => unpack_aligned::<2>(packed, p.reference_value, inv_scale, out),
            24 => unpack_aligned::<3>(packed, p.reference_value, inv_scale, out),
            _ => unpack_aligned::<4>(packed, p.reference_value, inv_scale, out),
        }
    }
}

/// See [`Packed::reader`].
pub struct PackedReader<'a> {
    width: usize,
    payload: &'a [u8],
    szip: Option<RangeDecoder<'a>>,
}

impl<'a> PackedReader<'a> {
    /// The packed bytes of values `first..first + count`.
    pub fn range(&mut self, first: u64, count: u64) -> CoreResult<Cow<'a, [u8]>> {
        let (start, len) = (first as usize * self.width, count as usize * self.width);
        match &mut self.szip {
            None => self
                .payload
                .get(start..start + len)
                .map(Cow::Borrowed)
                .ok_or_else(|| CoreError::new(Kind::Codec, "packed payload is shorter than the shape needs")),
            Some(decoder) => {
                let mut bytes = Vec::new();
                bytes.try_reserve_exact(len).map_err(|e| CoreError::new(Kind::Codec, format!("szip range of {len} bytes: {e}")))?;
                bytes.resize(len, 0);
                decoder.decode(start, &mut bytes)?;
                Ok(Cow::Owned(bytes))
            }
        }
    }
}

fn szip_err(e: impl std::fmt::Display) -> CoreError {
    CoreError::new(Kind::Codec, format!("szip decode failed: {e}"))
}

fn unpack_aligned<const N: usize>(packed: &[u8], reference: f64, inv_scale: f64, out: &mut [u8]) {
    for (dst, src) in out.chunks_exact_mut(8).zip(packed.chunks_exact(N)) {
        let raw = src.iter().fold(0u32, |acc, &b| (acc << 8) | b as u32);
        // Below 32 bits the value converts as an i32, which x86 does in one instruction (and
        // four at a time); u64 -> f64 has no instruction before AVX-512. Exact either way.
        let value = if N < 4 { raw as i32 as f64 } else { raw as f64 };
        dst.copy_from_slice(&(reference + inv_scale * value).to_ne_bytes());
    }
}
