//! Messages as our writers encode them (the writer, the zarr codec): packed fields made here and
//! framed by upstream where every object allows it (`encode_direct`), else upstream's encoding;
//! either way every szip object's RSI offsets, as our libaec's encoder records them, are marked
//! verified.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Mutex;

use ciborium::Value;
use tensogram::framing::{self, DecodedMessage, EncodedObject, HashFramePolicy};
use tensogram::{ByteOrder, DataObjectDescriptor, Dtype, EncodeOptions, GlobalMetadata, MessageFlags};
use tensogram_encodings::compression::{Blosc2Compressor, Compressor};
use tensogram_encodings::libaec::{aec_compress, AecParams};
use tensogram_encodings::pipeline::Blosc2Codec;
use tensogram_encodings::simple_packing::{self, SimplePackingParams};

use crate::buffers::try_zeroed;

use crate::errors::{CoreError, CoreResult, Kind};
use crate::wire::params::int_param;
use crate::encoding::packing::{self, Floats, PIECE_VALUES};
use crate::encoding::szip;
use crate::parallel::{self, Grant};

/// An object's values as the caller holds them.
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    /// In the descriptor's dtype and byte order.
    Stored(&'a [u8]),
    /// Native-order float32 values of a float64 simple-packing descriptor: packed from float32
    /// in pieces, so that no float64 copy of the field is made; upcast whole only for
    /// upstream's encode (values that need masks, parameters upstream must judge).
    Float32(&'a [u8]),
}

impl<'a> Values<'a> {
    /// The bytes the descriptor's dtype takes for these values.
    fn stored_len(&self) -> usize {
        match self {
            Values::Stored(data) => data.len(),
            Values::Float32(data) => data.len().saturating_mul(2),
        }
    }

    /// The values as floats, where they are float64 or float32 (aligned, native order).
    fn floats(&self, desc: &DataObjectDescriptor) -> Option<Floats<'a>> {
        match *self {
            Values::Stored(data) if desc.dtype == Dtype::Float64 && desc.byte_order == ByteOrder::native() => as_f64s(data).map(Floats::F64),
            Values::Stored(_) => None,
            Values::Float32(data) => {
                // SAFETY: every bit pattern is an f32; the slice is used only if it covers `data`.
                let (head, values, tail) = unsafe { data.align_to::<f32>() };
                (head.is_empty() && tail.is_empty()).then_some(Floats::F32(values))
            }
        }
    }

    /// The values in the descriptor's dtype, for upstream's encode: float32 upcast into a
    /// buffer allocated fallibly.
    fn stored(&self) -> CoreResult<Cow<'a, [u8]>> {
        match *self {
            Values::Stored(data) => Ok(Cow::Borrowed(data)),
            Values::Float32(data) => {
                let mut wide = try_zeroed(self.stored_len(), "the float64 values upstream's encode takes")?;
                for (dst, src) in wide.chunks_exact_mut(8).zip(data.chunks_exact(4)) {
                    let v = f32::from_ne_bytes(src.try_into().expect("4 bytes"));
                    dst.copy_from_slice(&f64::from(v).to_ne_bytes());
                }
                Ok(Cow::Owned(wide))
            }
        }
    }
}

/// Encodes one message of `objects` (descriptor and native-order values each). A large packed
/// szip field is encoded on what the process-wide budget of [`parallel::budgeted`] has free, at
/// most `threads` (`None`: no limit but the cores), into the bytes one thread writes: encodes
/// running at once (the writer's message threads, dask's) share the cores, never more.
pub fn encode(
    global: &GlobalMetadata,
    objects: &[(&DataObjectDescriptor, Values<'_>)],
    options: &EncodeOptions,
    threads: Option<usize>,
) -> CoreResult<Vec<u8>> {
    for (i, &(desc, values)) in objects.iter().enumerate() {
        szip::check_writable(desc).map_err(|e| e.context(&format!("object {i}")))?;
        if matches!(values, Values::Float32(_))
            && (desc.encoding != "simple_packing" || desc.dtype != Dtype::Float64 || desc.byte_order != ByteOrder::native())
        {
            return Err(CoreError::new(Kind::Value, format!("object {i}: float32 values are taken for float64 simple packing only")));
        }
    }
    reserve_for_encode(objects.iter().map(|(_, values)| values.stored_len()).sum())?;
    let described = objects
        .iter()
        .enumerate()
        .map(|(i, &(desc, values))| Ok((with_packing_params(desc, values, threads).map_err(|e| e.context(&format!("object {i}")))?, values)))
        .collect::<CoreResult<Vec<_>>>()?;
    let objects: Vec<(&DataObjectDescriptor, Values)> = described.iter().map(|((desc, _), values)| (desc.as_ref(), *values)).collect();
    // Values the scan found NaN or infinite in need masks: the direct path would pack and
    // compress them before finding out.
    let need_masks = described.iter().any(|((_, finite), _)| !finite);
    if !need_masks {
        if let Some(message) = encode_direct(global, &objects, options, threads)? {
            return Ok(message);
        }
    }
    let stored = objects.iter().map(|(_, values)| values.stored()).collect::<CoreResult<Vec<_>>>()?;
    let objects: Vec<(&DataObjectDescriptor, &[u8])> = objects.iter().zip(&stored).map(|((desc, _), data)| (*desc, data.as_ref())).collect();
    take_sz3_compress_failure(); // one left by an encode that failed before asking
    let message =
        tensogram::encode(global, &objects, options).map_err(|e| CoreError::from_tensogram(&e, "encode failed"));
    sz3_compressed()?;
    verify_szip_offsets(message?)
}

/// The address space an encode of `input` bytes may take at once, in inputs: the values'
/// packed or compressed copy, upstream's copy of the stored bytes while it frames them, the
/// message it frames them into, which it grows (and so copies) once more near the end, and the
/// codecs' own buffers. Measured (VmPeak less VmSize before, a 32 MB float64 field): 3.0 packed
/// to 16 bits, 4.1 szip, 4.3 blosc2, 4.8 zstd, 5.0 uncompressed, 6.6 lz4 (its worst-case bound),
/// 7.9 sz3 (128 MB of values).
const ENCODE_COPIES: usize = 8;

/// Fails with a `MemoryError` when the address space an encode of `input` bytes may take cannot
/// be had now: upstream frames messages with infallible allocations, which end the process
/// (`ulimit -v` on HPC login nodes) where this ends the write, whose temporary file the writer
/// then removes. A mapping made and dropped, never touched: it costs no page of memory.
fn reserve_for_encode(input: usize) -> CoreResult<()> {
    let need = input.saturating_mul(ENCODE_COPIES);
    if need < RESERVE_MIN_BYTES {
        return Ok(());
    }
    memmap2::MmapMut::map_anon(need).map(drop).map_err(|_| CoreError::out_of_memory(need, "encoding the message"))
}

/// Encodes smaller than this skip [`reserve_for_encode`]: a failure there is one of many small
/// allocations everywhere.
const RESERVE_MIN_BYTES: usize = 1 << 20;

/// The message, when every object's stored bytes can be made here: float64 simple packing (no
/// filter; szip, blosc2 or no compression) of finite values (from float64 or float32), and plain
/// values with no NaN or infinity, uncompressed or with blosc2 (a field left unpacked, the
/// coordinates beside it). Upstream's encode scans the values for NaN and infinity
/// (a classifying pass that costs about what blosc2 does), copies them to find the packing
/// parameters, then scans them again before packing; here they are checked in one fast pass,
/// packed and compressed, szip records its block offsets as it compresses, and upstream frames
/// the result (`encode_pre_encoded`: the bytes its own encode stores, see the tests). `None`
/// sends the message to upstream's encode: other codecs, values that need NaN or infinity
/// masks, and parameters upstream refuses (its error then says why).
fn encode_direct(
    global: &GlobalMetadata,
    objects: &[(&DataObjectDescriptor, Values<'_>)],
    options: &EncodeOptions,
    threads: Option<usize>,
) -> CoreResult<Option<Vec<u8>>> {
    let mut stored = Vec::with_capacity(objects.len());
    for &(desc, values) in objects {
        let Some(object) = direct_object(desc, values, threads) else {
            return Ok(None);
        };
        stored.push(object);
    }
    // Bytes made here are framed as no payload (upstream's framing copies a payload it is given),
    // then moved into the frame.
    let framed: Vec<(Cow<DataObjectDescriptor>, &[u8])> = stored.iter().map(Direct::framed_as).collect();
    let pairs: Vec<(&DataObjectDescriptor, &[u8])> = framed.iter().map(|(desc, data)| (desc.as_ref(), *data)).collect();
    let message = tensogram::encode_pre_encoded(global, &pairs, options)
        .map_err(|e| CoreError::from_tensogram(&e, "encode failed"))?;
    if stored.iter().all(|o| matches!(o, Direct::Given(..))) {
        return Ok(Some(message));
    }
    // The parts of the message, with the payloads made here moved in and none yet where the
    // values are compressed here; the message (their uncompressed copy) is dropped before they
    // are: the encode never holds more at once than upstream's own.
    let mut compress_later = Vec::with_capacity(stored.len());
    let mut reframed = {
        let decoded = framing::decode_message(&message)
            .map_err(|e| CoreError::from_tensogram(&e, "cannot parse the encoded message"))?;
        let mut objects = stored.into_iter();
        Reframed::of(decoded, |descriptor, _| {
            let (payload, later) = match objects.next() {
                Some(Direct::Made(desc, bytes)) => {
                    *descriptor = desc; // its szip offsets back
                    (Some(bytes), None)
                }
                Some(Direct::Compressed { values, compression, compressor, .. }) => {
                    (Some(Vec::new()), Some((values, compression, compressor)))
                }
                _ => (None, None),
            };
            compress_later.push(later);
            Ok(payload)
        })?
    };
    drop(message);
    for (object, later) in reframed.objects.iter_mut().zip(compress_later) {
        if let Some((values, compression, compressor)) = later {
            let Ok(compressed) = compressor.compress(values) else {
                return Ok(None); // upstream's encode says why
            };
            object.descriptor.compression = compression;
            object.encoded_payload = compressed.data;
        }
    }
    reframed.framed().map(Some)
}

/// An object `encode_direct` stores.
enum Direct<'a> {
    /// The caller's descriptor and bytes, which upstream stores as they are.
    Given(&'a DataObjectDescriptor, &'a [u8]),
    /// The descriptor upstream's encode would store and the bytes it would store, made here:
    /// framed with no payload, then moved into the frame.
    Made(DataObjectDescriptor, Vec<u8>),
    /// Plain values compressed here: upstream's framing takes no compressed bytes of values that
    /// are not encoded, so it frames them under `raw` (the descriptor with no compression), and
    /// the frame then gets back `compression` and the values compressed by `compressor` (the
    /// hash covers them).
    Compressed { raw: DataObjectDescriptor, values: &'a [u8], compression: String, compressor: Blosc2Compressor },
}

impl Direct<'_> {
    /// The descriptor and bytes upstream frames: bytes made here as no payload, under their
    /// descriptor without the szip offsets (which it would check against the payload); plain
    /// values under their uncompressed descriptor (upstream checks their length).
    fn framed_as(&self) -> (Cow<'_, DataObjectDescriptor>, &[u8]) {
        match self {
            Direct::Given(desc, data) => (Cow::Borrowed(*desc), data),
            Direct::Made(desc, _) => {
                let mut placeholder = desc.clone();
                placeholder.params.remove(szip::OFFSETS_KEY);
                (Cow::Owned(placeholder), &[])
            }
            Direct::Compressed { raw, values, .. } => (Cow::Borrowed(raw), values),
        }
    }
}

/// How `encode_direct` stores `desc`'s values, if it makes their bytes.
fn direct_object<'a>(desc: &'a DataObjectDescriptor, values: Values<'a>, threads: Option<usize>) -> Option<Direct<'a>> {
    if desc.filter != "none" || desc.masks.is_some() || desc.byte_order != ByteOrder::native() {
        return None;
    }
    match (desc.encoding.as_str(), desc.compression.as_str(), values) {
        ("none", "none", Values::Stored(data)) if plain_values_need_no_masks(desc.dtype, data)? => {
            Some(Direct::Given(desc, data))
        }
        ("none", "blosc2", Values::Stored(data)) if plain_values_need_no_masks(desc.dtype, data)? => {
            let compressor = blosc2_compressor(desc, desc.dtype.byte_width())?;
            let raw = DataObjectDescriptor { compression: "none".to_string(), ..desc.clone() };
            Some(Direct::Compressed { raw, values: data, compression: desc.compression.clone(), compressor })
        }
        ("simple_packing", "none" | "szip" | "blosc2", _) => {
            packed_object(desc, values.floats(desc)?, threads).map(|(d, bytes)| Direct::Made(d, bytes))
        }
        _ => None,
    }
}

/// Whether plain values of `dtype` hold no NaN or infinity (upstream would mask them);
/// `None` for dtypes left to upstream.
fn plain_values_need_no_masks(dtype: Dtype, data: &[u8]) -> Option<bool> {
    use Dtype::*;
    match dtype {
        Int8 | Int16 | Int32 | Int64 | Uint8 | Uint16 | Uint32 | Uint64 => Some(true),
        Float64 => Some(as_f64s(data)?.iter().all(|v| v.is_finite())),
        Float32 => {
            // SAFETY: every bit pattern is an f32; the slice is used only if it covers `data`.
            let (head, values, tail) = unsafe { data.align_to::<f32>() };
            (head.is_empty() && tail.is_empty()).then(|| values.iter().all(|v| v.is_finite()))
        }
        _ => None,
    }
}

fn as_f64s(data: &[u8]) -> Option<&[f64]> {
    // SAFETY: every bit pattern is an f64; the slice is used only if it covers `data`.
    let (head, values, tail) = unsafe { data.align_to::<f64>() };
    (head.is_empty() && tail.is_empty()).then_some(values)
}

/// `desc` with simple packing's reference value and binary scale factor where it packs float64
/// values and gives neither: upstream's rule (`compute_params`) on the least and greatest finite
/// values (`packing::finite_range`, on the threads the budget grants), so that fields with NaN
/// or infinities pack too (upstream's own computation refuses them; the encoder stores them as
/// masks). Spreads no packing step of tensogram's holds are refused with their range.
/// Descriptors that are anything else come back as they are, for upstream's encode to judge.
/// With it, whether the values are known to hold no NaN or infinity (`false` only where the
/// scan found one).
fn with_packing_params<'a>(desc: &'a DataObjectDescriptor, values: Values<'_>, threads: Option<usize>) -> CoreResult<(Cow<'a, DataObjectDescriptor>, bool)> {
    let given = |key| desc.params.contains_key(key);
    // (values in another byte order are read by upstream)
    if desc.encoding != "simple_packing" || given("sp_reference_value") || given("sp_binary_scale_factor") {
        return Ok((Cow::Borrowed(desc), true));
    }
    let (Some(values), Some(bits), Some(decimal)) = (
        values.floats(desc),
        int_param(desc, "sp_bits_per_value").and_then(|b| u32::try_from(b).ok()),
        match desc.params.get("sp_decimal_scale_factor") {
            None => Some(0),
            Some(_) => int_param(desc, "sp_decimal_scale_factor").and_then(|d| i32::try_from(d).ok()),
        },
    ) else {
        return Ok((Cow::Borrowed(desc), true));
    };
    let mut grant = parallel::budgeted(threads.unwrap_or(usize::MAX), values.len() as u64);
    let (range, finite) = packing::finite_range(values, &mut grant);
    let (low, high) = range.unwrap_or((0.0, 0.0));
    let params = packing_params(low, high, bits, decimal)?;
    let mut described = desc.clone();
    let keys = [
        ("sp_reference_value", Value::Float(params.reference_value)),
        ("sp_binary_scale_factor", Value::Integer(params.binary_scale_factor.into())),
        ("sp_decimal_scale_factor", Value::Integer(params.decimal_scale_factor.into())),
    ];
    described.params.extend(keys.into_iter().map(|(k, v)| (k.to_string(), v)));
    Ok((Cow::Owned(described), finite))
}

/// Upstream's packing parameters of values from `low` to `high` (they depend on nothing else),
/// or why tensogram cannot pack them: a packing step beyond upstream's bounds (its encode's
/// own check), or beyond float64's range.
fn packing_params(low: f64, high: f64, bits: u32, decimal: i32) -> CoreResult<SimplePackingParams> {
    let params = simple_packing::compute_params(&[low, high], bits, decimal)
        .map_err(|e| CoreError::new(Kind::Codec, format!("simple packing to {bits} bits: {e}")))?;
    if simple_packing::encode(&[], &params).is_ok() {
        return Ok(params);
    }
    let step = (high - low) * 10f64.powi(decimal) / ((1u128 << bits) - 1) as f64;
    let needed = if step.is_normal() { format!("2**{}", params.binary_scale_factor) } else { "outside float64's range".to_string() };
    let decimal = if decimal == 0 { String::new() } else { format!(" with decimal_scale_factor={decimal}") };
    let bound = simple_packing::MAX_REASONABLE_BINARY_SCALE;
    Err(CoreError::new(
        Kind::Codec,
        format!(
            "simple packing to {bits} bits cannot hold values from {low:?} to {high:?}{decimal}: the packing step would be \
             {needed}, and tensogram encodes steps from 2**-{bound} to 2**{bound} only; store them unpacked (drop \
             bits_per_value) or rescale them"
        ),
    ))
}

/// Simple packing of `values` as upstream's encode does it, with the descriptor's parameters
/// (`with_packing_params` gives them): its packing (ours at whole-byte widths; both refuse NaN
/// and infinity), then szip with the block offsets recorded and vouched for.
fn packed_object(desc: &DataObjectDescriptor, values: Floats<'_>, threads: Option<usize>) -> Option<(DataObjectDescriptor, Vec<u8>)> {
    if values.is_empty() {
        return None;
    }
    let bits = u32::try_from(int_param(desc, "sp_bits_per_value")?).ok()?;
    let decimal = match desc.params.get("sp_decimal_scale_factor") {
        None => 0,
        Some(_) => i32::try_from(int_param(desc, "sp_decimal_scale_factor")?).ok()?,
    };
    let Some(&Value::Float(reference_value)) = desc.params.get("sp_reference_value") else {
        return None;
    };
    let binary_scale_factor = i32::try_from(int_param(desc, "sp_binary_scale_factor")?).ok()?;
    let params = SimplePackingParams { reference_value, binary_scale_factor, decimal_scale_factor: decimal, bits_per_value: bits };
    let mut stored = desc.clone();
    stored.params.entry("sp_decimal_scale_factor".to_string()).or_insert(Value::Integer(0.into()));
    let mut grant = parallel::budgeted(threads.unwrap_or(usize::MAX), values.len() as u64);
    let aec = match desc.compression.as_str() {
        "none" => None,
        "blosc2" => return blosc2_object(stored, values, &params),
        _ => Some(AecParams {
            bits_per_sample: bits,
            block_size: u32::try_from(int_param(desc, "szip_block_size")?).ok()?,
            rsi: u32::try_from(int_param(desc, "szip_rsi")?).ok()?,
            // Simple packing writes MSB-first bit streams (upstream's pipeline ORs this in too).
            flags: u32::try_from(int_param(desc, "szip_flags")?).ok()? | libaec_sys::AEC_DATA_MSB,
        }),
    };
    let encoded = aec.as_ref().and_then(|aec| packed_szip_in_pieces(values, &params, aec, &mut grant));
    let (compressed, offsets) = match (encoded, aec) {
        (Some(encoded), _) => encoded,
        (None, aec) => {
            let packed = packed_bytes(values, &params)?;
            let Some(aec) = aec else {
                return Some((stored, packed));
            };
            aec_compress(&packed, &aec).ok()?
        }
    };
    let offsets = offsets.into_iter().map(|o| Value::Integer(o.into())).collect();
    stored.params.insert(szip::OFFSETS_KEY.to_string(), Value::Array(offsets));
    szip::verify_offsets(&mut stored, &compressed).ok()?;
    Some((stored, compressed))
}

/// The packed bytes upstream's packing stores: ours at whole-byte widths, upstream's at others
/// (both refuse NaN and infinity).
fn packed_bytes(values: Floats<'_>, params: &SimplePackingParams) -> Option<Vec<u8>> {
    match packing::pack_finite(values, params) {
        Some(packed) => Some(packed),
        None if !matches!(params.bits_per_value, 8 | 16 | 24 | 32) => simple_packing::encode(&values.to_f64(), params).ok(),
        None => None,
    }
}

/// Simple packing and blosc2 as upstream's pipeline does them: the packed bytes compressed with
/// the packed value's whole bytes as blosc2's type size (so the same bytes as its encode).
fn blosc2_object(stored: DataObjectDescriptor, values: Floats<'_>, params: &SimplePackingParams) -> Option<(DataObjectDescriptor, Vec<u8>)> {
    let compressor = blosc2_compressor(&stored, (params.bits_per_value as usize).div_ceil(8))?;
    let compressed = compressor.compress(&packed_bytes(values, params)?).ok()?;
    Some((stored, compressed.data))
}

/// The blosc2 compressor upstream's pipeline builds for `desc` (`typesize`: the bytes of one
/// stored value), on one thread as our encodes ask. `None` where a parameter is missing or not
/// one upstream knows: its encode then says why.
fn blosc2_compressor(desc: &DataObjectDescriptor, typesize: usize) -> Option<Blosc2Compressor> {
    let codec = match desc.params.get("blosc2_codec")?.as_text()? {
        "blosclz" => Blosc2Codec::Blosclz,
        "lz4" => Blosc2Codec::Lz4,
        "lz4hc" => Blosc2Codec::Lz4hc,
        "zlib" => Blosc2Codec::Zlib,
        "zstd" => Blosc2Codec::Zstd,
        _ => return None,
    };
    let clevel = i32::try_from(int_param(desc, "blosc2_clevel")?).ok()?;
    Some(Blosc2Compressor { codec, clevel, typesize, nthreads: 0 })
}

/// Packing and szip of a field of more than [`PIECE_VALUES`] values in pieces of whole RSI
/// blocks, on the grant's threads (the caller's and helpers, more as the budget gets cores
/// back), joined at the bit where each piece ends (`szip::encode_with_end`). The pieces depend
/// only on the field, so the bytes are the same on any number of threads; and they are a valid
/// szip stream with the block offsets and length of one encode. Not always its bytes: where two
/// splitting options code a block in as many bits, libaec picks the one nearer the previous
/// block's, and each piece starts afresh (the tests check that upstream decodes the same values).
/// `None` for a field of one piece (one encode, upstream's bytes), widths packed elsewhere and
/// non-finite values.
fn packed_szip_in_pieces(values: Floats<'_>, params: &SimplePackingParams, aec: &AecParams, grant: &mut Grant) -> Option<(Vec<u8>, Vec<u64>)> {
    let width = packing::packed_width(params)?;
    let per_block = aec.block_size as usize * aec.rsi as usize;
    let blocks = values.len().div_ceil(per_block);
    let per_piece = (PIECE_VALUES / per_block).max(1);
    let pieces = blocks.div_ceil(per_piece);
    if pieces < 2 {
        return None;
    }
    let encode_piece = |i: usize| {
        let values = values.slice(i * per_piece * per_block, per_piece * per_block);
        let mut packed = vec![0u8; values.len() * width];
        packing::pack_finite_into(values, params, &mut packed).then_some(())?;
        szip::encode_with_end(&packed, aec.bits_per_sample, aec.block_size, aec.rsi, aec.flags)
    };
    // Room for values szip cannot compress: stored as they are, with a few bits more per block
    // (2% for blocks of 32 8-bit samples; where a stream needs more, the join grows it, copying).
    let packed = values.len() * width;
    let joined = Mutex::new(Joined::new(packed + packed / 32 + 256 * pieces, blocks));
    parallel::map_pieces(pieces, grant, |i| {
        let piece = encode_piece(i);
        joined.lock().unwrap_or_else(|p| p.into_inner()).take(i, piece);
    });
    let joined = joined.into_inner().unwrap_or_else(|p| p.into_inner());
    (!joined.failed && joined.next == pieces).then_some((joined.out, joined.offsets))
}

/// Encoded pieces joined in their order as they come in, by the thread that finishes the piece
/// the join waits for: the join runs beside the encoding of the later pieces, not after them.
struct Joined {
    out: Vec<u8>,
    /// Bits in `out`.
    end: u64,
    offsets: Vec<u64>,
    /// The piece to join next, and the pieces that came in before it.
    next: usize,
    waiting: BTreeMap<usize, (Vec<u8>, Vec<u64>)>,
    failed: bool,
}

impl Joined {
    fn new(bytes: usize, blocks: usize) -> Joined {
        let (out, offsets) = (Vec::with_capacity(bytes), Vec::with_capacity(blocks));
        Joined { out, end: 0, offsets, next: 0, waiting: BTreeMap::new(), failed: false }
    }

    /// Piece `i` (its bytes and bit offsets, the last its end; `None`: its encode failed).
    fn take(&mut self, i: usize, piece: Option<(Vec<u8>, Vec<u64>)>) {
        match piece {
            Some(piece) if !self.failed => self.waiting.insert(i, piece),
            _ => {
                self.failed = true;
                self.waiting.clear();
                return;
            }
        };
        while let Some((bytes, ends)) = self.waiting.remove(&self.next) {
            let Some((&stop, starts)) = ends.split_last() else {
                self.failed = true;
                return;
            };
            self.offsets.extend(starts.iter().map(|o| self.end + o));
            szip::join_bits(&mut self.out, &mut self.end, &bytes, stop);
            self.next += 1;
        }
    }
}

/// SZ3 throws C++ exceptions; the vendored shim catches them during compression and its
/// compressor then returns an empty stream, which upstream would write as the payload. The
/// shim records the failure per thread: our callers encode with `threads: 1`, on this thread.
fn sz3_compressed() -> CoreResult<()> {
    match take_sz3_compress_failure() {
        tensogram_sz3_sys::COMPRESS_OK => Ok(()),
        tensogram_sz3_sys::COMPRESS_OUT_OF_MEMORY => {
            Err(CoreError::new(Kind::Memory, "sz3 encode failed: out of memory"))
        }
        _ => Err(CoreError::new(Kind::Codec, "sz3 encode failed: SZ3 refused the values or its configuration")),
    }
}

fn take_sz3_compress_failure() -> std::ffi::c_int {
    // SAFETY: reads and resets a thread-local of the shim.
    unsafe { tensogram_sz3_sys::sz3_take_compress_failure() }
}

/// `message` with every szip object's RSI offsets marked verified (see `szip.rs`), so that range
/// reads can trust them; other messages come back as they are.
fn verify_szip_offsets(message: Vec<u8>) -> CoreResult<Vec<u8>> {
    let decoded = framing::decode_message(&message)
        .map_err(|e| CoreError::from_tensogram(&e, "cannot parse the encoded message"))?;
    if decoded.objects.iter().all(|(desc, ..)| desc.compression != "szip") {
        return Ok(message);
    }
    reframe(decoded, |desc, payload| {
        // An empty object has no RSI block to find (and nothing to read by range).
        if desc.compression == "szip" && desc.shape.iter().product::<u64>() > 0 {
            szip::verify_offsets(desc, payload)?;
        }
        Ok(None)
    })
}

/// The message framed again with each object's descriptor passed through `edit` (see
/// [`Reframed::of`]).
fn reframe(
    decoded: DecodedMessage<'_>,
    edit: impl FnMut(&mut DataObjectDescriptor, &[u8]) -> CoreResult<Option<Vec<u8>>>,
) -> CoreResult<Vec<u8>> {
    Reframed::of(decoded, edit)?.framed()
}

/// A decoded message's parts, owned (so that the message they came from can be dropped before
/// they are framed again: large fields are then not held three times).
struct Reframed {
    global_metadata: GlobalMetadata,
    flags: MessageFlags,
    objects: Vec<EncodedObject>,
}

impl Reframed {
    /// Each object's descriptor passed through `edit`, which may also give the payload to store
    /// instead (`None`: the payload as it was); the mask bytes, the metadata and the hash
    /// settings stay as they were.
    fn of(
        decoded: DecodedMessage<'_>,
        mut edit: impl FnMut(&mut DataObjectDescriptor, &[u8]) -> CoreResult<Option<Vec<u8>>>,
    ) -> CoreResult<Reframed> {
        let mut objects = Vec::with_capacity(decoded.objects.len());
        for (i, (mut descriptor, payload, masks, _)) in decoded.objects.into_iter().enumerate() {
            let replaced = edit(&mut descriptor, payload).map_err(|e| e.context(&format!("object {i}")))?;
            // Masks follow the payload in the frame; their descriptors count from the payload's start.
            let encoded_payload = match replaced {
                Some(bytes) if masks.is_empty() => bytes, // moved, not copied: large fields come here
                Some(bytes) => [bytes.as_slice(), masks].concat(),
                None => [payload, masks].concat(),
            };
            objects.push(EncodedObject { descriptor, encoded_payload });
        }
        Ok(Reframed { global_metadata: decoded.global_metadata, flags: decoded.preamble.flags, objects })
    }

    /// The message of these parts (hashes recomputed, as they cover descriptors and payloads).
    fn framed(self) -> CoreResult<Vec<u8>> {
        let flags = self.flags;
        let policy = HashFramePolicy {
            header: flags.has(MessageFlags::HEADER_HASHES),
            footer: flags.has(MessageFlags::FOOTER_HASHES),
        };
        framing::encode_message(&self.global_metadata, &self.objects, flags.has(MessageFlags::HASHES_PRESENT), policy)
            .map_err(|e| CoreError::from_tensogram(&e, "cannot frame the message again"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::vector_descriptor;
    use ciborium::Value;
    use tensogram::decode::{decode_range_from_payload, DecodeOptions};
    use tensogram::{ByteOrder, Dtype, EncodeOptions, GlobalMetadata};

    fn descriptor(n: u64, dtype: Dtype, compression: &str, params: &[(&str, u64)]) -> DataObjectDescriptor {
        let params = params.iter().map(|&(k, v)| (k.to_string(), Value::Integer(v.into()))).collect();
        // Native order: the values are given as `to_ne_bytes`.
        DataObjectDescriptor { byte_order: ByteOrder::native(), compression: compression.into(), ..vector_descriptor(n, dtype, params) }
    }

    /// 1,024 float32 values, szip in RSI blocks of 128: zeros with five values at 112 and ones
    /// from 512. libaec 1.1.4's encoder stores a wrong offset for RSI block 1.
    fn zero_runs() -> (DataObjectDescriptor, Vec<u8>) {
        let mut values = vec![0f32; 1024];
        values[112..117].copy_from_slice(&[0.1, 0.5, 0.9, 0.3, 0.7]);
        values[512..].fill(1.0);
        let szip = [("szip_rsi", 8), ("szip_block_size", 16), ("szip_flags", 8)];
        (descriptor(1024, Dtype::Float32, "szip", &szip), values.iter().flat_map(|v| v.to_ne_bytes()).collect())
    }

    fn encode(objects: &[(DataObjectDescriptor, Vec<u8>)], hashing: bool) -> Vec<u8> {
        let pairs: Vec<(&DataObjectDescriptor, &[u8])> = objects.iter().map(|(d, b)| (d, b.as_slice())).collect();
        let options = EncodeOptions { hashing, allow_nan: true, ..Default::default() };
        tensogram::encode(&GlobalMetadata::default(), &pairs, &options).unwrap()
    }

    fn offsets(desc: &DataObjectDescriptor) -> Value {
        desc.params[szip::OFFSETS_KEY].clone()
    }

    #[test]
    fn reframing_without_edits_gives_the_same_bytes() {
        let with_nan: Vec<u8> = [1.0f64, f64::NAN, 3.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let objects = [
            zero_runs(),
            (descriptor(3, Dtype::Float64, "none", &[]), with_nan), // a NaN mask after the payload
            (descriptor(2, Dtype::Int32, "zstd", &[("zstd_level", 3)]), vec![7; 8]),
        ];
        for hashing in [true, false] {
            let message = encode(&objects, hashing);
            let again = reframe(framing::decode_message(&message).unwrap(), |_, _| Ok(None)).unwrap();
            assert!(again == message, "hashing={hashing}");
        }
    }

    #[test]
    fn szip_objects_keep_the_encoder_s_offsets_which_are_the_decoder_s_and_get_the_marker() {
        let (desc, values) = zero_runs();
        let other = (descriptor(4, Dtype::Uint8, "lz4", &[]), vec![1, 2, 3, 4]);
        let message = encode(&[(desc, values.clone()), other], true);
        let marked = verify_szip_offsets(message.clone()).unwrap();
        let (before, after) = (framing::decode_message(&message).unwrap(), framing::decode_message(&marked).unwrap());
        let ((stored, payload, ..), (checked, marked_payload, ..)) = (&before.objects[0], &after.objects[0]);

        assert_eq!(payload, marked_payload);
        assert_eq!(before.objects[1].0.params, after.objects[1].0.params);
        // libaec 1.1.4's encoder stored a wrong offset for RSI block 1 here; ours stores the decoder's.
        assert!(szip::encoder_offsets_trusted());
        assert_eq!(offsets(stored), offsets(checked));
        assert_eq!(szip::stored_offsets(stored).unwrap(), szip::with_decoder_offsets(stored, payload).map(|d| szip::stored_offsets(&d).unwrap()).unwrap());
        assert!(szip::offsets_verified(checked, payload.len()));
        assert!(!szip::offsets_verified(stored, payload.len()));
        assert!(!szip::offsets_verified(checked, payload.len() + 1));
        let options = DecodeOptions::default();
        let block_1 = &values[128 * 4..256 * 4];
        assert_eq!(decode_range_from_payload(checked, payload, &[(128, 128)], &options).unwrap()[0], block_1);
        // The rewritten message still passes upstream's hash check.
        let decoded = tensogram::decode(&marked, &DecodeOptions { verify_hash: true, ..Default::default() }).unwrap();
        assert_eq!(decoded.1[0].1, values);

        // Tampered offsets are no longer vouched for.
        let mut tampered = checked.clone();
        if let Some(Value::Array(items)) = tampered.params.get_mut(szip::OFFSETS_KEY) {
            items[1] = Value::Integer(1u64.into());
        }
        assert!(!szip::offsets_verified(&tampered, payload.len()));

        // Messages without szip objects come back untouched.
        let plain = encode(&[(descriptor(4, Dtype::Uint8, "lz4", &[]), vec![1, 2, 3, 4])], true);
        assert!(verify_szip_offsets(plain.clone()).unwrap() == plain);
    }

    #[test]
    fn offsets_of_the_wrong_count_or_order_are_replaced_with_the_decoder_s() {
        let (desc, values) = zero_runs();
        let message = encode(&[(desc, values)], false);
        let decoded = framing::decode_message(&message).unwrap();
        let (stored, payload, ..) = &decoded.objects[0];
        let truth = szip::stored_offsets(stored).unwrap();
        let set = |offsets: Vec<u64>| {
            let mut desc = stored.clone();
            desc.params.insert(szip::OFFSETS_KEY.into(), Value::Array(offsets.into_iter().map(|o| Value::Integer(o.into())).collect()));
            desc
        };
        let too_late = u64::try_from(payload.len()).unwrap() * 8;
        let mut swapped = truth.clone();
        swapped.swap(1, 2);
        for wrong in [truth[..3].to_vec(), swapped, [truth[..7].to_vec(), vec![too_late]].concat(), [vec![1], truth[1..].to_vec()].concat()] {
            let mut desc = set(wrong.clone());
            szip::verify_offsets(&mut desc, payload).unwrap();
            assert_eq!(szip::stored_offsets(&desc).unwrap(), truth, "{wrong:?}");
            assert!(szip::offsets_verified(&desc, payload.len()));
        }
    }

    /// Blocks of zeros (all, or all but the last of an RSI, across segment ends of 64 blocks)
    /// and values of every sample width: the encoder's offsets are where the decoder finds the
    /// RSI blocks.
    #[test]
    fn the_encoder_records_the_decoder_s_offsets() {
        let mut state = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for case in 0..300 {
            let bits = [8u64, 16, 24, 32][case % 4];
            let block_size = [8u64, 16, 32, 64][(case / 4) % 4];
            let rsi = [1u64, 2, 3, 4, 8, 70, 128][case % 7];
            let n = (next() % (rsi * block_size * 6)).max(1) + 1;
            let zero_odds = next() % 4; // of 4: how many blocks are all zero
            let mut samples = vec![0u32; n as usize];
            for block in samples.chunks_mut(block_size as usize) {
                if next() % 4 >= zero_odds {
                    let keep = next() % block.len() as u64; // one nonzero sample, or all
                    for (i, s) in block.iter_mut().enumerate() {
                        if next() % 2 == 0 || i as u64 == keep {
                            *s = (next() & ((1u64 << bits) - 1)) as u32;
                        }
                    }
                }
            }
            let (dtype, bytes): (Dtype, Vec<u8>) = match bits {
                8 => (Dtype::Uint8, samples.iter().map(|&s| s as u8).collect()),
                16 => (Dtype::Uint16, samples.iter().flat_map(|&s| (s as u16).to_ne_bytes()).collect()),
                _ => (Dtype::Uint32, samples.iter().flat_map(|&s| s.to_ne_bytes()).collect()),
            };
            let mut desc = descriptor(n, dtype, "szip", &[("szip_rsi", rsi), ("szip_block_size", block_size), ("szip_flags", [0, 8][case % 2])]);
            if bits == 24 {
                // 24-bit samples are what simple packing hands szip.
                desc = DataObjectDescriptor { encoding: "simple_packing".into(), dtype: Dtype::Float64, ..desc };
                let params = [("sp_bits_per_value", Value::Integer(24.into())), ("sp_reference_value", Value::Float(0.0)),
                              ("sp_binary_scale_factor", Value::Integer(0.into())), ("sp_decimal_scale_factor", Value::Integer(0.into()))];
                desc.params.extend(params.into_iter().map(|(k, v)| (k.to_string(), v)));
                let values: Vec<u8> = samples.iter().flat_map(|&s| f64::from(s & 0xff_ffff).to_ne_bytes()).collect();
                let message = encode(&[(desc, values)], false);
                check_offsets(&message, case);
                continue;
            }
            check_offsets(&encode(&[(desc, bytes)], false), case);
        }
    }

    fn check_offsets(message: &[u8], case: usize) {
        let decoded = framing::decode_message(message).unwrap();
        let (desc, payload, ..) = &decoded.objects[0];
        let from_decoder = szip::with_decoder_offsets(desc, payload).unwrap();
        assert_eq!(szip::stored_offsets(desc), szip::stored_offsets(&from_decoder), "case {case}: {:?}", desc.params);
    }

    /// A descriptor of `shape` (native order) with these parameters.
    fn with_params(shape: &[u64], dtype: Dtype, encoding: &str, compression: &str, params: Vec<(&str, Value)>) -> DataObjectDescriptor {
        let params = params.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let n = shape.iter().product();
        DataObjectDescriptor {
            ndim: shape.len() as u64,
            shape: shape.to_vec(),
            strides: shape.iter().rev().scan(1, |s, &d| { let st = *s; *s *= d; Some(st) }).collect::<Vec<_>>().into_iter().rev().collect(),
            byte_order: ByteOrder::native(),
            encoding: encoding.into(),
            compression: compression.into(),
            ..vector_descriptor(n, dtype, params)
        }
    }

    /// A smooth field with noise, 150 x 260, and a flat band (runs of zero szip blocks).
    fn field() -> Vec<f64> {
        let mut state = 7u64;
        (0..150 * 260)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let (y, x) = ((i / 260) as f64, (i % 260) as f64);
                if (40.0..60.0).contains(&y) { 250.0 } else { 230.0 + 40.0 * (y / 30.0).sin() * (x / 50.0).cos() + (state >> 40) as f64 / 1e7 }
            })
            .collect()
    }

    fn ne_bytes(values: &[f64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    /// Upstream's encode with the offsets marked: what `encode` wrote before `encode_direct`.
    fn as_values<'a>(objects: &[(&'a DataObjectDescriptor, &'a [u8])]) -> Vec<(&'a DataObjectDescriptor, Values<'a>)> {
        objects.iter().map(|&(d, b)| (d, Values::Stored(b))).collect()
    }

    fn encode_stored(global: &GlobalMetadata, objects: &[(&DataObjectDescriptor, &[u8])], options: &EncodeOptions, threads: Option<usize>) -> CoreResult<Vec<u8>> {
        super::encode(global, &as_values(objects), options, threads)
    }

    fn through_upstream(objects: &[(&DataObjectDescriptor, &[u8])], options: &EncodeOptions) -> Vec<u8> {
        let global = GlobalMetadata::default();
        verify_szip_offsets(tensogram::encode(&global, objects, options).unwrap()).unwrap()
    }

    /// Equal but for the provenance upstream stamps on every message (time, uuid).
    fn assert_same_message(ours: &[u8], theirs: &[u8], what: &str) {
        let (a, b) = (framing::decode_message(ours).unwrap(), framing::decode_message(theirs).unwrap());
        assert_eq!(a.global_metadata.base, b.global_metadata.base, "{what}");
        assert_eq!(a.objects.len(), b.objects.len(), "{what}");
        for (i, (x, y)) in a.objects.iter().zip(&b.objects).enumerate() {
            assert_eq!(format!("{:?}", x.0), format!("{:?}", y.0), "{what}: descriptor {i}");
            assert!(x.1 == y.1, "{what}: payload {i}");
            assert!(x.2 == y.2, "{what}: masks {i}");
        }
        assert_eq!(a.preamble.flags.has(MessageFlags::HASHES_PRESENT), b.preamble.flags.has(MessageFlags::HASHES_PRESENT));
    }

    #[test]
    fn the_direct_path_stores_what_upstream_s_encode_stores() {
        let values = field();
        let bytes = ne_bytes(&values);
        let lat: Vec<f64> = (0..150).map(|i| 90.0 - i as f64).collect();
        let lat_bytes = ne_bytes(&lat);
        let lon: Vec<u8> = (0..260).flat_map(|i| (i as f32 * 0.5).to_ne_bytes()).collect();
        let steps: Vec<u8> = (0..4i32).flat_map(|i| (i * 6).to_ne_bytes()).collect();
        let int = |v: i64| Value::Integer(v.into());
        let szip = |rsi: i64| vec![("szip_rsi", int(rsi)), ("szip_block_size", int(32)), ("szip_flags", int(8))];
        let mut cases: Vec<(String, DataObjectDescriptor)> = Vec::new();
        for bits in [8, 16, 24, 32] {
            for rsi in [4, 128] {
                let params = [vec![("sp_bits_per_value", int(bits))], szip(rsi)].concat();
                cases.push((format!("{bits} bits, szip rsi {rsi}"), with_params(&[150, 260], Dtype::Float64, "simple_packing", "szip", params)));
            }
        }
        for bits in [12, 16] {
            let params = vec![("sp_bits_per_value", int(bits)), ("blosc2_codec", Value::Text("zstd".into())), ("blosc2_clevel", int(3))];
            cases.push((format!("{bits} bits, blosc2"), with_params(&[150, 260], Dtype::Float64, "simple_packing", "blosc2", params)));
        }
        cases.push(("12 bits, decimal 1, no compression".into(), with_params(&[150, 260], Dtype::Float64, "simple_packing", "none",
            vec![("sp_bits_per_value", int(12)), ("sp_decimal_scale_factor", int(1))])));
        // Parameters the caller gives.
        let given = [vec![("sp_bits_per_value", int(24)), ("sp_reference_value", Value::Float(230.0 - 40.0)),
                          ("sp_binary_scale_factor", int(-18))], szip(4)].concat();
        cases.push(("given parameters".into(), with_params(&[150, 260], Dtype::Float64, "simple_packing", "szip", given)));
        // The field unpacked, with blosc2: each codec, the value's bytes as its type size.
        for codec in ["zstd", "lz4", "blosclz", "lz4hc", "zlib"] {
            let params = vec![("blosc2_codec", Value::Text(codec.into())), ("blosc2_clevel", int(1))];
            cases.push((format!("unpacked, blosc2 {codec}"), with_params(&[150, 260], Dtype::Float64, "none", "blosc2", params)));
        }
        let plain = |shape: &[u64], dtype| with_params(shape, dtype, "none", "none", vec![]);
        let lon_desc = with_params(&[260], Dtype::Float32, "none", "blosc2", vec![("blosc2_codec", Value::Text("zstd".into())), ("blosc2_clevel", int(5))]);
        let (lat_desc, steps_desc) = (plain(&[150], Dtype::Float64), plain(&[4], Dtype::Int32));
        for hashing in [true, false] {
            let options = EncodeOptions { hashing, threads: 1, allow_nan: true, allow_inf: true, ..Default::default() };
            for (what, desc) in &cases {
                let objects = [(desc, bytes.as_slice()), (&lat_desc, lat_bytes.as_slice()), (&lon_desc, lon.as_slice()), (&steps_desc, steps.as_slice())];
                let described: Vec<_> = objects.iter().map(|&(d, b)| (with_packing_params(d, Values::Stored(b), None).unwrap().0, b)).collect();
                let described: Vec<(&DataObjectDescriptor, &[u8])> = described.iter().map(|(d, b)| (d.as_ref(), *b)).collect();
                assert!(encode_direct(&GlobalMetadata::default(), &as_values(&described), &options, None).unwrap().is_some(), "{what}");
                let ours = encode_stored(&GlobalMetadata::default(), &objects, &options, None).unwrap();
                assert_same_message(&ours, &through_upstream(&objects, &options), &format!("{what}, hashing {hashing}"));
            }
        }
    }

    #[test]
    fn packing_parameters_come_from_the_finite_values_or_say_why_none_fit() {
        let int = |v: i64| Value::Integer(v.into());
        let packed = with_params(&[150 * 260], Dtype::Float64, "simple_packing", "none", vec![("sp_bits_per_value", int(16))]);
        let mut values = field();
        let finite = values.clone();
        values[7] = f64::NAN;
        values[8] = f64::NEG_INFINITY;
        let (found, all_finite) = with_packing_params(&packed, Values::Stored(&ne_bytes(&values)), None).unwrap();
        assert!(!all_finite, "the scan saw the NaN");
        let expected = simple_packing::compute_params(&finite, 16, 0).unwrap();
        assert_eq!(found.params.get("sp_reference_value"), Some(&Value::Float(expected.reference_value)));
        assert_eq!(int_param(&found, "sp_binary_scale_factor"), Some(expected.binary_scale_factor.into()));
        let options = EncodeOptions { hashing: true, threads: 1, allow_nan: true, allow_inf: true, ..Default::default() };
        encode_stored(&GlobalMetadata::default(), &[(&packed, ne_bytes(&values).as_slice())], &options, None).unwrap();
        // Values in the other byte order are read by upstream, which finds their parameters.
        let swapped_order = if ByteOrder::native() == ByteOrder::Little { ByteOrder::Big } else { ByteOrder::Little };
        let swapped = DataObjectDescriptor { byte_order: swapped_order, ..packed.clone() };
        let swapped_bytes: Vec<u8> = finite.iter().flat_map(|v| v.to_bits().swap_bytes().to_ne_bytes()).collect();
        assert!(matches!(with_packing_params(&swapped, Values::Stored(&swapped_bytes), None).unwrap(), (Cow::Borrowed(_), true)));
        let message = encode_stored(&GlobalMetadata::default(), &[(&swapped, swapped_bytes.as_slice())], &options, None).unwrap();
        let stored = &framing::decode_message(&message).unwrap().objects[0].0;
        assert_eq!(stored.params.get("sp_reference_value"), Some(&Value::Float(expected.reference_value)));
        for (low, high, bits, says) in [
            (-1e300, 1e300, 16, "cannot hold values from -1e300 to 1e300: the packing step would be 2**982, "),
            (-1.7e308, 1.7e308, 16, "to 1.7e308: the packing step would be outside float64's range"),
            (0.0, 1e-90, 24, "the packing step would be 2**-322, and tensogram encodes steps from 2**-256 to 2**256"),
        ] {
            let error = packing_params(low, high, bits, 0).unwrap_err();
            assert!(error.message.contains(says), "{}", error.message);
        }
    }

    #[test]
    fn values_needing_masks_and_other_codecs_go_through_upstream() {
        let options = EncodeOptions { hashing: true, threads: 1, allow_nan: true, allow_inf: true, ..Default::default() };
        let int = |v: i64| Value::Integer(v.into());
        // Given parameters (those of values with NaN come from the finite ones, see above).
        let packed = with_params(&[150, 260], Dtype::Float64, "simple_packing", "szip",
            vec![("sp_bits_per_value", int(24)), ("sp_reference_value", Value::Float(190.0)), ("sp_binary_scale_factor", int(-18)),
                 ("szip_rsi", int(4)), ("szip_block_size", int(32)), ("szip_flags", int(8))]);
        let mut with_nan = field();
        with_nan[1000] = f64::NAN;
        with_nan[2000] = f64::INFINITY;
        let with_nan = ne_bytes(&with_nan);
        let plain = with_params(&[150 * 260], Dtype::Float64, "none", "none", vec![]);
        let zstd = with_params(&[150 * 260], Dtype::Float64, "none", "zstd", vec![("zstd_level", int(3))]);
        let clean = ne_bytes(&field());
        let messages: [&[(&DataObjectDescriptor, &[u8])]; 3] = [
            &[(&packed, with_nan.as_slice())],
            &[(&packed, clean.as_slice()), (&plain, with_nan.as_slice())],
            &[(&packed, clean.as_slice()), (&zstd, clean.as_slice())],
        ];
        for (i, objects) in messages.iter().enumerate() {
            assert!(encode_direct(&GlobalMetadata::default(), &as_values(objects), &options, None).unwrap().is_none(), "message {i}");
            let ours = encode_stored(&GlobalMetadata::default(), objects, &options, None).unwrap();
            assert_same_message(&ours, &through_upstream(objects, &options), &format!("message {i}"));
            let decoded = tensogram::decode(&ours, &DecodeOptions { verify_hash: true, ..Default::default() }).unwrap();
            assert_eq!(decoded.1.len(), objects.len());
        }
        // Without allow_nan, upstream's error is the one reported.
        let strict = EncodeOptions { allow_nan: false, allow_inf: false, ..options };
        let error = encode_stored(&GlobalMetadata::default(), &[(&packed, with_nan.as_slice())], &strict, None).unwrap_err();
        assert!(error.message.to_lowercase().contains("nan"), "{}", error.message);
    }

    #[test]
    fn pieces_joined_in_any_order_of_arrival_give_the_stream_of_their_order() {
        // Five pieces of 8 RSI blocks of 16-bit samples, each ending inside a byte.
        let samples: Vec<u8> = (0..5 * 8 * 128u32).flat_map(|i| ((i * 37 % 1000) as u16 + (i / 64) as u16).to_be_bytes()).collect();
        let pieces: Vec<_> = samples
            .chunks(8 * 128 * 2)
            .map(|piece| szip::encode_with_end(piece, 16, 32, 4, 8 | libaec_sys::AEC_DATA_MSB).unwrap())
            .collect();
        assert!(pieces.iter().any(|(_, ends)| ends.last().unwrap() % 8 != 0), "some piece ends inside a byte");
        let join = |order: &[usize]| {
            let mut joined = Joined::new(0, 0);
            for &i in order {
                joined.take(i, Some(pieces[i].clone()));
            }
            assert_eq!(joined.next, pieces.len(), "{order:?}");
            (joined.out, joined.offsets)
        };
        let in_order = join(&[0, 1, 2, 3, 4]);
        assert_eq!(in_order.1.len(), 5 * 8, "every RSI block's offset");
        for order in [[4, 3, 2, 1, 0], [2, 0, 4, 1, 3], [1, 0, 3, 2, 4]] {
            assert!(join(&order) == in_order, "{order:?}");
        }
        let mut failed = Joined::new(0, 0);
        for (i, piece) in [(1, Some(pieces[1].clone())), (0, None), (2, Some(pieces[2].clone()))] {
            failed.take(i, piece);
        }
        assert!(failed.failed && failed.next == 0 && failed.waiting.is_empty());
    }

    #[test]
    fn a_field_encoded_in_pieces_has_the_same_bytes_on_any_threads_and_decodes_as_one_encode() {
        // 2.6 x 10^5 values (4 to 128 pieces), ending in a part of an RSI block; noise (few zero
        // blocks) and a flat band (runs of zero blocks).
        let (ny, nx) = (403, 651);
        let mut state = 11u64;
        let values: Vec<f64> = (0..ny * nx)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let (y, x) = ((i / nx) as f64, (i % nx) as f64);
                if (100.0..180.0).contains(&y) { 250.0 } else { 230.0 + 40.0 * (y / 30.0).sin() * (x / 50.0).cos() + (state >> 40) as f64 / 1e7 }
            })
            .collect();
        let bytes = ne_bytes(&values);
        let int = |v: i64| Value::Integer(v.into());
        let options = EncodeOptions { hashing: true, threads: 1, ..Default::default() };
        let _budget = parallel::BUDGET_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        for bits in [8, 16, 24, 32] {
            for (rsi, block) in [(4, 8), (128, 32), (64, 16)] {
                let what = format!("{bits} bits, RSI {rsi} x {block}");
                let params = simple_packing::compute_params(&values, bits as u32, 0).unwrap();
                let aec = AecParams { bits_per_sample: bits as u32, block_size: block as u32, rsi: rsi as u32, flags: 8 | libaec_sys::AEC_DATA_MSB };
                let desc = with_params(&[ny as u64, nx as u64], Dtype::Float64, "simple_packing", "szip", vec![
                    ("sp_bits_per_value", int(bits)), ("szip_rsi", int(rsi)), ("szip_block_size", int(block)), ("szip_flags", int(8))]);
                for threads in [1, 2, 3] {
                    let (found, finite) = with_packing_params(&desc, Values::Stored(&bytes), Some(threads)).unwrap();
                    assert!(finite, "{what}");
                    let found = (found.params.get("sp_reference_value"), int_param(&found, "sp_binary_scale_factor"));
                    assert_eq!(found, (Some(&Value::Float(params.reference_value)), Some(params.binary_scale_factor.into())), "{what}: parameters");
                }
                let one = aec_compress(&packing::pack_finite(Floats::F64(&values), &params).unwrap(), &aec).unwrap();
                let pieces = packed_szip_in_pieces(Floats::F64(&values), &params, &aec, &mut Grant::fixed(1)).expect("pieces");
                // Where a piece starts, libaec may break a tie between two equally short codings
                // another way: the same lengths and offsets, maybe other bits.
                assert_eq!((pieces.0.len(), &pieces.1), (one.0.len(), &one.1), "{what}");
                for threads in [2, 3, 8] {
                    assert!(packed_szip_in_pieces(Floats::F64(&values), &params, &aec, &mut Grant::fixed(threads)).as_ref() == Some(&pieces), "{what}, {threads} threads");
                }
                let objects = [(&desc, bytes.as_slice())];
                let ours = encode_stored(&GlobalMetadata::default(), &objects, &options, Some(2)).unwrap();
                assert_same_message(&ours, &encode_stored(&GlobalMetadata::default(), &objects, &options, Some(1)).unwrap(), &what);
                let decode = |message: &[u8]| tensogram::decode(message, &DecodeOptions { verify_hash: true, ..Default::default() }).unwrap().1;
                let (a, b) = (decode(&ours), decode(&through_upstream(&objects, &options)));
                assert!(a[0].1 == b[0].1, "{what}: upstream decodes the values of one encode");
            }
        }
    }

    #[test]
    fn float32_values_pack_as_their_float64_upcast_does_on_every_path() {
        let int = |v: i64| Value::Integer(v.into());
        let narrow: Vec<f32> = field().iter().map(|&v| v as f32).collect();
        let f32_bytes: Vec<u8> = narrow.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let wide = ne_bytes(&narrow.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
        let mut with_nan = narrow.clone();
        with_nan[77] = f32::NAN;
        let nan_bytes: Vec<u8> = with_nan.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let nan_wide = ne_bytes(&with_nan.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
        let szip = vec![("szip_rsi", int(4)), ("szip_block_size", int(32)), ("szip_flags", int(8))];
        let blosc2 = vec![("blosc2_codec", Value::Text("zstd".into())), ("blosc2_clevel", int(3))];
        let options = EncodeOptions { hashing: true, threads: 1, allow_nan: true, allow_inf: true, ..Default::default() };
        for (compression, extra) in [("none", vec![]), ("szip", szip), ("blosc2", blosc2)] {
            for bits in [12, 16, 24] {
                if compression == "szip" && bits == 12 {
                    continue;
                }
                let params = [vec![("sp_bits_per_value", int(bits))], extra.clone()].concat();
                let desc = with_params(&[150, 260], Dtype::Float64, "simple_packing", compression, params);
                let what = format!("{bits} bits, {compression}");
                for threads in [1, 2] {
                    let ours = super::encode(&GlobalMetadata::default(), &[(&desc, Values::Float32(&f32_bytes))], &options, Some(threads)).unwrap();
                    assert_same_message(&ours, &encode_stored(&GlobalMetadata::default(), &[(&desc, &wide)], &options, Some(threads)).unwrap(), &what);
                }
                // With a NaN: upstream's encode (masks), from the upcast values.
                let ours = super::encode(&GlobalMetadata::default(), &[(&desc, Values::Float32(&nan_bytes))], &options, None).unwrap();
                let wide = encode_stored(&GlobalMetadata::default(), &[(&desc, &nan_wide)], &options, None).unwrap();
                assert_same_message(&ours, &wide, &format!("{what}, a NaN"));
                assert!(framing::decode_message(&ours).unwrap().objects[0].0.masks.is_some(), "{what}: a NaN mask");
            }
        }
        let plain = with_params(&[150 * 260], Dtype::Float64, "none", "none", vec![]);
        let error = super::encode(&GlobalMetadata::default(), &[(&plain, Values::Float32(&f32_bytes))], &options, None).unwrap_err();
        assert!(error.message.contains("float64 simple packing only"), "{}", error.message);
    }
}
