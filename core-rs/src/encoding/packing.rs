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
use tensogram_encodings::compression::{Blosc2Compressor, Compressor};
use tensogram_encodings::libaec::{aec_decompress, AecParams};
use tensogram_encodings::pipeline::Blosc2Codec;
use tensogram_encodings::simple_packing::{self, SimplePackingParams};

use crate::errors::{CoreError, CoreResult, Kind};
use crate::parallel::Grant;
use crate::wire::params::{float_param, int_param};
use crate::encoding::szip::{self, RangeDecoder, StreamDecoder};

/// Values decoded per piece by [`Packed::stream_into`]: their packed bytes (24 KB at 24 bits)
/// and unpacked values (64 KB) stay in the core's caches between the decode and the unpack.
pub const STREAM_VALUES: usize = 8192;

/// The floating-point type packed values are unpacked into: float64, the stored type (upstream's
/// values), or float32, each of those values rounded to nearest: what an object written from
/// float32 is read back as, at half the output traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unpacked {
    #[default]
    F64,
    F32,
}

impl Unpacked {
    /// Bytes per unpacked value.
    pub fn width(self) -> usize {
        match self {
            Unpacked::F64 => 8,
            Unpacked::F32 => 4,
        }
    }
}

/// How the packed bytes of an object are stored.
#[derive(Debug, Clone)]
enum Store {
    Plain,
    Szip(AecParams),
    /// A blosc2 frame of the packed bytes (upstream's compressor decodes it, whole or by range).
    Blosc2,
}

/// How a packed object is stored, when it qualifies for the direct path.
#[derive(Debug, Clone)]
pub struct Packed {
    params: SimplePackingParams,
    store: Store,
    /// Values in the object.
    values: u64,
}

/// Upstream's blosc2 compressor, as a decompressor: a frame records its own codec and sizes.
fn blosc2() -> Blosc2Compressor {
    Blosc2Compressor { codec: Blosc2Codec::Lz4, clevel: 0, typesize: 1, nthreads: 0 }
}

fn blosc2_err(e: impl std::fmt::Display) -> CoreError {
    CoreError::new(Kind::Codec, format!("blosc2 decode failed: {e}"))
}

impl Packed {
    /// `Some` for float64 simple packing with no filter, no masks, and no, szip or blosc2
    /// compression.
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
        let store = match desc.compression.as_str() {
            "none" => Store::Plain,
            "blosc2" => Store::Blosc2,
            "szip" => Store::Szip(AecParams {
                bits_per_sample: params.bits_per_value,
                block_size: int_param(desc, "szip_block_size")?.try_into().ok()?,
                rsi: int_param(desc, "szip_rsi")?.try_into().ok()?,
                // Simple packing writes MSB-first bit streams (upstream ORs this in too).
                flags: u32::try_from(int_param(desc, "szip_flags")?).ok()? | libaec_sys::AEC_DATA_MSB,
            }),
            _ => return None,
        };
        Some(Packed { params, store, values: desc.shape.iter().product() })
    }

    /// Decodes all `out.len() / to.width()` values of `payload` into `out` (native-endian).
    pub fn decode_into(&self, payload: &[u8], out: &mut [u8], to: Unpacked) -> CoreResult<()> {
        if self.value_bytes().is_some() && !matches!(self.store, Store::Blosc2) {
            // The stream's first RSI block starts at bit 0: no offsets needed.
            return self.stream_into(payload, &[], 0, out, to);
        }
        let n = out.len() / to.width();
        let p = &self.params;
        let packed_len = (n * p.bits_per_value as usize).div_ceil(8);
        let decompressed;
        let packed: &[u8] = match &self.store {
            Store::Plain => payload,
            Store::Szip(aec) => {
                decompressed = aec_decompress(payload, packed_len, aec).map_err(szip_err)?;
                &decompressed
            }
            Store::Blosc2 => {
                decompressed = blosc2().decompress(payload, packed_len).map_err(blosc2_err)?;
                &decompressed
            }
        };
        if packed.len() < packed_len {
            return Err(CoreError::new(Kind::Codec, "packed payload is shorter than the shape needs"));
        }
        if self.value_bytes().is_some() {
            self.unpack(&packed[..packed_len], out, to);
            return Ok(());
        }
        let values =
            simple_packing::decode(packed, n, p).map_err(|e| CoreError::new(Kind::Codec, format!("unpacking failed: {e}")))?;
        match to {
            Unpacked::F64 => out.chunks_exact_mut(8).zip(values).for_each(|(dst, v)| dst.copy_from_slice(&v.to_ne_bytes())),
            Unpacked::F32 => out.chunks_exact_mut(4).zip(values).for_each(|(dst, v)| dst.copy_from_slice(&(v as f32).to_ne_bytes())),
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
        match &self.store {
            Store::Szip(a) => a.rsi as u64 * a.block_size as u64,
            _ => 0,
        }
    }

    /// Unpacks values `first..first + out.len() / to.width()` (whole-byte values only) into
    /// `out`. With szip, libaec decodes forward from the RSI block that holds `first` (which
    /// starts at bit `offsets[block]`; block 0 needs none) in pieces of [`STREAM_VALUES`], each
    /// unpacked while it is in the cache; blosc2 decodes the blocks that hold the range.
    pub fn stream_into(&self, payload: &[u8], offsets: &[u64], first: u64, out: &mut [u8], to: Unpacked) -> CoreResult<()> {
        let width = self.value_bytes().expect("whole-byte values");
        let n = (out.len() / to.width()) as u64;
        if first.checked_add(n).is_none_or(|end| end > self.values) {
            return Err(CoreError::new(Kind::Codec, "packed range lies past the end of the object"));
        }
        let aec = match &self.store {
            Store::Szip(aec) => aec,
            Store::Plain => {
                let src = payload.get(first as usize * width..(first + n) as usize * width);
                let src = src.ok_or_else(|| CoreError::new(Kind::Codec, "packed payload is shorter than the shape needs"))?;
                self.unpack(src, out, to);
                return Ok(());
            }
            Store::Blosc2 => {
                self.unpack(&self.reader(payload, offsets)?.range(first, n)?, out, to);
                return Ok(());
            }
        };
        // (An RSI of 0 is refused by the decoder, which checks the parameters.)
        let block = first / self.rsi_values().max(1);
        let offset = match block {
            0 => 0,
            b => *offsets.get(b as usize).ok_or_else(|| {
                CoreError::new(Kind::Format, format!("{} are missing or too few for a partial decode", szip::OFFSETS_KEY))
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
        for dst in out.chunks_mut(STREAM_VALUES * to.width()) {
            let src = &mut piece[..dst.len() / to.width() * width];
            decoder.fill(src)?;
            self.unpack(src, dst, to);
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
        let store = match &self.store {
            Store::Plain => Stored::Plain,
            Store::Blosc2 => Stored::Blosc2,
            Store::Szip(aec) => {
                let total = usize::try_from(self.values).unwrap_or(usize::MAX).saturating_mul(width);
                Stored::Szip(RangeDecoder::new(payload, offsets, total, aec.bits_per_sample, aec.block_size, aec.rsi, aec.flags)?)
            }
        };
        Ok(PackedReader { width, payload, store })
    }

    /// `reference + 2^E * 10^-D * packed` of each whole-byte big-endian value of `packed`, as
    /// native-endian bytes of `to` into `out`: upstream's arithmetic, so bit-identical values
    /// (float32: those values rounded).
    pub fn unpack(&self, packed: &[u8], out: &mut [u8], to: Unpacked) {
        let p = &self.params;
        let inv_scale = 2f64.powi(p.binary_scale_factor) * 10f64.powi(-p.decimal_scale_factor);
        let r = p.reference_value;
        match (p.bits_per_value, to) {
            (8, Unpacked::F64) => unpack_aligned::<1, 8>(packed, r, inv_scale, out),
            (16, Unpacked::F64) => unpack_aligned::<2, 8>(packed, r, inv_scale, out),
            (24, Unpacked::F64) => unpack_aligned::<3, 8>(packed, r, inv_scale, out),
            (_, Unpacked::F64) => unpack_aligned::<4, 8>(packed, r, inv_scale, out),
            (8, Unpacked::F32) => unpack_aligned::<1, 4>(packed, r, inv_scale, out),
            (16, Unpacked::F32) => unpack_aligned::<2, 4>(packed, r, inv_scale, out),
            (24, Unpacked::F32) => unpack_aligned::<3, 4>(packed, r, inv_scale, out),
            (_, Unpacked::F32) => unpack_aligned::<4, 4>(packed, r, inv_scale, out),
        }
    }
}

/// Where a [`PackedReader`] finds packed bytes.
enum Stored<'a> {
    Plain,
    Szip(RangeDecoder<'a>),
    Blosc2,
}

/// See [`Packed::reader`].
pub struct PackedReader<'a> {
    width: usize,
    payload: &'a [u8],
    store: Stored<'a>,
}

impl<'a> PackedReader<'a> {
    /// The packed bytes of values `first..first + count`.
    pub fn range(&mut self, first: u64, count: u64) -> CoreResult<Cow<'a, [u8]>> {
        let (start, len) = (first as usize * self.width, count as usize * self.width);
        match &mut self.store {
            Stored::Plain => self
                .payload
                .get(start..start + len)
                .map(Cow::Borrowed)
                .ok_or_else(|| CoreError::new(Kind::Codec, "packed payload is shorter than the shape needs")),
            Stored::Blosc2 => blosc2().decompress_range(self.payload, &[], start, len).map(Cow::Owned).map_err(blosc2_err),
            Stored::Szip(decoder) => {
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

/// Values per piece of the scans of a large field on several threads: a few hundred
/// microseconds each.
pub const PIECE_VALUES: usize = 1 << 16;

/// The least and greatest finite values of `values` (`None`: none is finite), and whether every
/// value is finite: what simple packing's parameters are found from. One vectorised pass, in
/// pieces of [`PIECE_VALUES`] on `threads` threads.
pub fn finite_range(values: Floats<'_>, grant: &mut Grant) -> (Option<(f64, f64)>, bool) {
    let pieces = values.len().div_ceil(PIECE_VALUES);
    let ranges = crate::parallel::map_pieces(pieces, grant, |i| {
        let mut range = (f64::INFINITY, f64::NEG_INFINITY, true);
        values.slice(i * PIECE_VALUES, PIECE_VALUES).each_f64(|_, piece| range = joined(range, range_of(piece)));
        range
    });
    let (lo, hi, all_finite) = ranges.into_iter().fold((f64::INFINITY, f64::NEG_INFINITY, true), joined);
    ((lo <= hi).then_some((lo, hi)), all_finite)
}

fn joined((a, b, f): (f64, f64, bool), (lo, hi, finite): (f64, f64, bool)) -> (f64, f64, bool) {
    (a.min(lo), b.max(hi), f && finite)
}

/// Values to pack: float64, or float32 (a float32 variable packed as float64 objects, upstream
/// 0.24 packing float64 only), upcast in pieces of [`UPCAST_VALUES`] as they are scanned and
/// packed, so that no float64 copy of the field is made (every f32 is an f64: the same bytes).
#[derive(Debug, Clone, Copy)]
pub enum Floats<'a> {
    F64(&'a [f64]),
    F32(&'a [f32]),
}

/// Values upcast at a time by [`Floats::each_f64`]: 8 KB on the stack, in the core's cache.
const UPCAST_VALUES: usize = 1024;

impl<'a> Floats<'a> {
    pub fn len(&self) -> usize {
        match self {
            Floats::F64(v) => v.len(),
            Floats::F32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values `start..start + len` (fewer at the end).
    pub fn slice(&self, start: usize, len: usize) -> Floats<'a> {
        let end = |n: usize| start.saturating_add(len).min(n);
        match self {
            Floats::F64(v) => Floats::F64(&v[start.min(v.len())..end(v.len())]),
            Floats::F32(v) => Floats::F32(&v[start.min(v.len())..end(v.len())]),
        }
    }

    /// Calls `f(index of the piece's first value, piece)` on the values as float64, in order.
    pub fn each_f64(&self, mut f: impl FnMut(usize, &[f64])) {
        match self {
            Floats::F64(v) => f(0, v),
            Floats::F32(v) => {
                let mut wide = [0f64; UPCAST_VALUES];
                for (i, piece) in v.chunks(UPCAST_VALUES).enumerate() {
                    wide.iter_mut().zip(piece).for_each(|(w, &x)| *w = f64::from(x));
                    f(i * UPCAST_VALUES, &wide[..piece.len()]);
                }
            }
        }
    }

    /// All the values as float64: borrowed, or a copy of float32 values (for upstream's packing
    /// of other widths than [`pack_finite`]'s).
    pub fn to_f64(&self) -> Cow<'a, [f64]> {
        match self {
            Floats::F64(v) => Cow::Borrowed(v),
            Floats::F32(v) => Cow::Owned(v.iter().map(|&x| f64::from(x)).collect()),
        }
    }
}

/// [`finite_range`] of one piece, in eight independent lanes of branch-free compares and selects
/// (a NaN or an infinity fails `abs() < INFINITY`: it counts as +inf for the least and -inf for
/// the greatest).
fn range_of(piece: &[f64]) -> (f64, f64, bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { range_of_avx2(piece) };
    }
    range_of_lanes(piece)
}

/// [`range_of`] with AVX2 intrinsics, eight values a step (the compiled lanes of
/// [`range_of_lanes`] do not vectorise); that function does the tail.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn range_of_avx2(piece: &[f64]) -> (f64, f64, bool) {
    use std::arch::x86_64::*;
    let (magnitude, up, down) =
        (_mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX)), _mm256_set1_pd(f64::INFINITY), _mm256_set1_pd(f64::NEG_INFINITY));
    let (mut lo, mut hi, mut finite) = ([up; 2], [down; 2], _mm256_castsi256_pd(_mm256_set1_epi64x(-1)));
    let steps = piece.chunks_exact(8);
    let tail = steps.remainder();
    for step in steps {
        for (k, at) in [0, 4].into_iter().enumerate() {
            let v = _mm256_loadu_pd(step.as_ptr().add(at));
            let ok = _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_and_pd(v, magnitude), up);
            finite = _mm256_and_pd(finite, ok);
            lo[k] = _mm256_min_pd(lo[k], _mm256_blendv_pd(up, v, ok));
            hi[k] = _mm256_max_pd(hi[k], _mm256_blendv_pd(down, v, ok));
        }
    }
    let (mut low, mut high) = ([0.0; 4], [0.0; 4]);
    _mm256_storeu_pd(low.as_mut_ptr(), _mm256_min_pd(lo[0], lo[1]));
    _mm256_storeu_pd(high.as_mut_ptr(), _mm256_max_pd(hi[0], hi[1]));
    let (tail_low, tail_high, tail_finite) = range_of_lanes(tail);
    (
        low.into_iter().fold(tail_low, f64::min),
        high.into_iter().fold(tail_high, f64::max),
        _mm256_movemask_pd(finite) == 0b1111 && tail_finite,
    )
}

fn range_of_lanes(piece: &[f64]) -> (f64, f64, bool) {
    const LANES: usize = 8;
    let (mut lo, mut hi, mut bad) = ([f64::INFINITY; LANES], [f64::NEG_INFINITY; LANES], [0u64; LANES]);
    let mut step = |k: usize, v: f64| {
        let ok = v.abs() < f64::INFINITY;
        let (low, high) = if ok { (v, v) } else { (f64::INFINITY, f64::NEG_INFINITY) };
        lo[k] = if low < lo[k] { low } else { lo[k] };
        hi[k] = if high > hi[k] { high } else { hi[k] };
        bad[k] |= u64::from(!ok);
    };
    let chunks = piece.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (k, &v) in chunk.iter().enumerate() {
            step(k, v);
        }
    }
    for (k, &v) in rest.iter().enumerate() {
        step(k, v);
    }
    (lo.into_iter().fold(f64::INFINITY, f64::min), hi.into_iter().fold(f64::NEG_INFINITY, f64::max), bad.iter().all(|&b| b == 0))
}

/// `values` simple-packed to whole-byte widths (8, 16, 24, 32 bits) with upstream's arithmetic
/// (`simple_packing::encode`: the same bytes, the tests compare), in one pass that also checks
/// them: `None` for other widths, parameters upstream refuses, or a NaN or infinite value.
/// Upstream checks the values in a pass of their own, and rounds through a libm call where the
/// CPU has SSE4.1's rounding instruction.
pub fn pack_finite(values: Floats<'_>, params: &SimplePackingParams) -> Option<Vec<u8>> {
    let mut out = vec![0u8; values.len().checked_mul(packed_width(params)?)?];
    pack_finite_into(values, params, &mut out).then_some(out)
}

/// Bytes per packed value, for the widths [`pack_finite`] packs (`None`: another width, or
/// parameters upstream refuses).
pub fn packed_width(params: &SimplePackingParams) -> Option<usize> {
    simple_packing::encode(&[], params).ok()?; // upstream's check of the parameters
    match params.bits_per_value {
        8 => Some(1),
        16 => Some(2),
        24 => Some(3),
        32 => Some(4),
        _ => None,
    }
}

/// [`pack_finite`] into `out` (`packed_width` bytes per value, checked by the caller); whether
/// every value was finite.
pub fn pack_finite_into(values: Floats<'_>, params: &SimplePackingParams, out: &mut [u8]) -> bool {
    let scale = 10f64.powi(params.decimal_scale_factor) * 2f64.powi(-params.binary_scale_factor);
    let (reference, max) = (params.reference_value, (1u64 << params.bits_per_value) - 1);
    let width = (params.bits_per_value / 8) as usize;
    let mut finite = true;
    values.each_f64(|first, piece| {
        let out = &mut out[first * width..(first + piece.len()) * width];
        finite &= match width {
            1 => pack_dispatch::<1>(piece, out, reference, scale, max),
            2 => pack_dispatch::<2>(piece, out, reference, scale, max),
            3 => pack_dispatch::<3>(piece, out, reference, scale, max),
            _ => pack_dispatch::<4>(piece, out, reference, scale, max),
        };
    });
    finite
}

fn pack_dispatch<const N: usize>(values: &[f64], out: &mut [u8], reference: f64, scale: f64, max: u64) -> bool {
    #[cfg(target_arch = "x86_64")]
    if N < 4 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { pack_bytes_avx2::<N>(values, out, reference, scale, max) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { pack_avx2::<N>(values, out, reference, scale, max) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.1") {
        // SAFETY: the CPU has SSE4.1.
        return unsafe { pack_sse41::<N>(values, out, reference, scale, max) };
    }
    pack::<N>(values, out, reference, scale, max)
}

/// [`pack`] compiled with AVX2: four values an instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_avx2<const N: usize>(values: &[f64], out: &mut [u8], reference: f64, scale: f64, max: u64) -> bool {
    pack::<N>(values, out, reference, scale, max)
}

/// [`pack`] of 8, 16 and 24 bits with AVX2 intrinsics, eight values a step: each four quantised
/// to i32 lanes, whose big-endian low `N` bytes one byte shuffle gathers into one store (the
/// next store overwrites what it writes past them). Rounding is LLVM's lowering of `round` (the
/// `pack` loop's): `trunc(x + 0.49999999999999994)`, here for `x >= 0` only, as anything
/// below 0 packs to 0 either way. [`pack`] does the tail.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_bytes_avx2<const N: usize>(values: &[f64], out: &mut [u8], reference: f64, scale: f64, max: u64) -> bool {
    use std::arch::x86_64::*;
    const STEP: usize = 8;
    // Byte `4j + i` of lane j is its i-th least significant: lane j's low N bytes go to
    // `N j..`, most significant first; -1 writes a zero.
    let order: [i8; 16] = std::array::from_fn(|at| if at < 4 * N { (at / N * 4 + (N - 1 - at % N)) as i8 } else { -1 });
    let order = _mm_loadu_si128(order.as_ptr().cast());
    let (offset, factor, top) = (_mm256_set1_pd(reference), _mm256_set1_pd(scale), _mm256_set1_pd(max as f64));
    let (half, zero) = (_mm256_set1_pd(0.49999999999999994), _mm256_setzero_pd());
    let (magnitude, infinity) = (_mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX)), _mm256_set1_pd(f64::INFINITY));
    let mut finite = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
    let quantise = |v: __m256d| {
        let x = _mm256_max_pd(_mm256_add_pd(_mm256_mul_pd(_mm256_sub_pd(v, offset), factor), half), zero);
        let x = _mm256_min_pd(_mm256_round_pd::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(x), top);
        _mm_shuffle_epi8(_mm256_cvttpd_epi32(x), order)
    };
    // Whole steps whose second 16-byte store (at 4 N past the step's start) ends inside `out`.
    let steps = (values.len() / STEP).min(out.len().saturating_sub(4 * N + 16) / (STEP * N));
    for step in 0..steps {
        let src = values.as_ptr().add(step * STEP);
        let dst = out.as_mut_ptr().add(step * STEP * N);
        let (a, b) = (_mm256_loadu_pd(src), _mm256_loadu_pd(src.add(4)));
        let both = _mm256_and_pd(
            _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_and_pd(a, magnitude), infinity),
            _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_and_pd(b, magnitude), infinity),
        );
        finite = _mm256_and_pd(finite, both);
        _mm_storeu_si128(dst.cast(), quantise(a));
        _mm_storeu_si128(dst.add(4 * N).cast(), quantise(b));
    }
    let done = steps * STEP;
    let rest = pack::<N>(&values[done..], &mut out[done * N..], reference, scale, max);
    _mm256_movemask_pd(finite) == 0b1111 && rest
}

/// [`pack`] compiled with SSE4.1: `round` becomes two instructions instead of a call.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
unsafe fn pack_sse41<const N: usize>(values: &[f64], out: &mut [u8], reference: f64, scale: f64, max: u64) -> bool {
    pack::<N>(values, out, reference, scale, max)
}

/// Values quantised at a time by [`pack`], before their bytes are written.
const PACK_LANES: usize = 16;

/// Packs `values` into `out` (`N` big-endian bytes each); whether they were all finite.
#[inline(always)]
fn pack<const N: usize>(values: &[f64], out: &mut [u8], reference: f64, scale: f64, max: u64) -> bool {
    let mut finite = true;
    let mut q = [0u64; PACK_LANES];
    for (dst, src) in out.chunks_mut(N * PACK_LANES).zip(values.chunks(PACK_LANES)) {
        // Quantised in a loop of its own, which vectorises, then stored bytewise.
        for (q, &v) in q.iter_mut().zip(src) {
            finite &= v.is_finite();
            *q = quantise::<N>(v, reference, scale, max);
        }
        // Each value as one 8-byte store where the chunk has room: the next value's store
        // overwrites the zeros past its N bytes.
        let room = dst.len();
        for (at, q) in (0..room).step_by(N).zip(q) {
            let word = (q << (64 - 8 * N)).to_be_bytes();
            if at + 8 <= room {
                dst[at..at + 8].copy_from_slice(&word);
            } else {
                dst[at..at + N].copy_from_slice(&word[..N]);
            }
        }
    }
    finite
}

/// Upstream's `(((v - reference) * scale).round() as u64).min(max)`: its saturating cast sends
/// negatives (and NaN) to 0, `min` a rounding overshoot. Clamped in f64 first by selects, the
/// same integer converts without the cast's checks, through i32 below 32 bits, which x86 does
/// four (AVX2) at a time.
#[inline(always)]
fn quantise<const N: usize>(v: f64, reference: f64, scale: f64, max: u64) -> u64 {
    let x = ((v - reference) * scale).round();
    let x = if x > 0.0 { x } else { 0.0 }; // NaN too
    let top = max as f64; // exact: at most 2^32 - 1
    let x = if x < top { x } else { top };
    // SAFETY: `x` is a whole number in 0..=max, which fits i32 below 32 bits and u64 at 32.
    unsafe { if N < 4 { u64::from(x.to_int_unchecked::<i32>() as u32) } else { x.to_int_unchecked::<u64>() } }
}

/// Unpacks `N`-byte values into `W`-byte floats (8: f64, 4: f32 rounded from the f64).
fn unpack_aligned<const N: usize, const W: usize>(packed: &[u8], reference: f64, inv_scale: f64, out: &mut [u8]) {
    for (dst, src) in out.chunks_exact_mut(W).zip(packed.chunks_exact(N)) {
        let raw = src.iter().fold(0u32, |acc, &b| (acc << 8) | b as u32);
        // Below 32 bits the value converts as an i32, which x86 does in one instruction (and
        // four at a time); u64 -> f64 has no instruction before AVX-512. Exact either way.
        let value = reference + inv_scale * if N < 4 { raw as i32 as f64 } else { raw as f64 };
        if W == 8 {
            dst.copy_from_slice(&value.to_ne_bytes());
        } else {
            dst.copy_from_slice(&(value as f32).to_ne_bytes());
        }
    }
}

#[cfg(test)]
mod pack_tests {
    use super::*;

    /// Values across the range and past it (rounding overshoots, negatives after the
    /// reference), at every whole-byte width and with decimal scaling.
    #[test]
    fn finite_range_passes_over_nan_and_infinity_on_any_number_of_threads() {
        let mut values: Vec<f64> = (0..200_003).map(|i| ((i * 7919) % 10_007) as f64 - 5000.0).collect();
        let naive = |v: &[f64]| {
            let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
            let range = (!finite.is_empty()).then(|| (finite.iter().copied().fold(f64::INFINITY, f64::min), finite.iter().copied().fold(f64::NEG_INFINITY, f64::max)));
            (range, finite.len() == v.len())
        };
        for threads in [1, 2, 3] {
            assert_eq!(finite_range(Floats::F64(&values), &mut Grant::fixed(threads)), naive(&values));
        }
        // A non-finite value anywhere, the last (in the remainder of four) included.
        for (at, bad) in [(0, f64::NAN), (13, f64::INFINITY), (131_072, f64::INFINITY), (200_002, f64::NEG_INFINITY)] {
            let kept = values[at];
            values[at] = bad;
            for threads in [1, 2] {
                assert_eq!(finite_range(Floats::F64(&values), &mut Grant::fixed(threads)), naive(&values), "{bad} at {at}");
            }
            values[at] = kept;
        }
        assert_eq!(finite_range(Floats::F64(&[f64::NAN, f64::INFINITY]), &mut Grant::fixed(1)), (None, false));
        assert_eq!(finite_range(Floats::F64(&[]), &mut Grant::fixed(1)), (None, true));
        assert_eq!(finite_range(Floats::F64(&[-0.5]), &mut Grant::fixed(2)), (Some((-0.5, -0.5)), true));
    }

    #[test]
    fn pack_finite_gives_upstream_s_bytes() {
        let mut state = 1u64;
        let mut values: Vec<f64> = (0..200_003)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                200.0 + 120.0 * ((state >> 11) as f64 / (1u64 << 53) as f64) + (i % 7) as f64 * 1e-9
            })
            .collect();
        values.extend([200.0, 320.0, 199.999, 320.5, 260.0 + 0.5e-6, -1e300, 1e300]);
        for bits in [8, 16, 24, 32] {
            for decimal in [0, 2, -1] {
                let params = simple_packing::compute_params(&values[..200_003], bits, decimal).unwrap();
                let ours = pack_finite(Floats::F64(&values), &params).unwrap();
                assert!(ours == simple_packing::encode(&values, &params).unwrap(), "{bits} bits, D={decimal}");
            }
        }
    }

    #[test]
    fn pack_finite_rounds_halves_and_clamps_as_upstream_does_at_every_position() {
        // Reference 0 and scale 1: the values are what gets rounded. Halves round away from 0,
        // the doubles just below a half round down, a rounding past the top stays at the top;
        // each at every position of an eight-value step and of the tail.
        for bits in [8u32, 16, 24, 32] {
            let top = ((1u64 << bits) - 1) as f64;
            let edges = [0.0, 0.5, 0.49999999999999994, 1.5, 2.5, 1.4999999999999998, 1000.5, 1000.4999999999999,
                         top - 0.5, top - 0.5000000001, top + 0.4, -0.3, -0.5, -7.0, 3.0];
            let params = SimplePackingParams { reference_value: 0.0, binary_scale_factor: 0, decimal_scale_factor: 0, bits_per_value: bits };
            for shift in 0..8 {
                let values: Vec<f64> = (0..37).map(|i| edges[(i + shift) % edges.len()]).collect();
                assert_eq!(pack_finite(Floats::F64(&values), &params).unwrap(), simple_packing::encode(&values, &params).unwrap(), "{bits} bits, shift {shift}");
            }
        }
    }

    #[test]
    fn pack_finite_refuses_non_finite_values_other_widths_and_bad_parameters() {
        let params = |bits, reference_value| SimplePackingParams { reference_value, binary_scale_factor: -10, decimal_scale_factor: 0, bits_per_value: bits };
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(pack_finite(Floats::F64(&[1.0, bad, 2.0]), &params(24, 0.0)).is_none());
            for at in [0, 5, 31, 60] {  // in eight-value steps and in the tail
                let mut values = vec![1.0; 64];
                values[at] = bad;
                assert!(pack_finite(Floats::F64(&values), &params(8, 0.0)).is_none(), "{bad} at {at}");
            }
        }
        assert!(pack_finite(Floats::F64(&[1.0, 2.0]), &params(12, 0.0)).is_none());
        assert!(pack_finite(Floats::F64(&[1.0, 2.0]), &params(24, f64::NAN)).is_none());
        assert_eq!(pack_finite(Floats::F64(&[1.0, 2.0]), &params(16, 0.0)).unwrap(), simple_packing::encode(&[1.0, 2.0], &params(16, 0.0)).unwrap());
    }
}
