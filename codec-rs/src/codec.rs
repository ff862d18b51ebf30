//! Whole messages in memory: encoding (the writer, the zarr codec) and decoding (the zarr codec).

use std::collections::BTreeMap;

use ciborium::Value;
use numpy::PyUntypedArray;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tensogram::framing::{self, DecodedMessage, EncodedObject, HashFramePolicy};
use tensogram::{ByteOrder, DataObjectDescriptor, Dtype, EncodeOptions, GlobalMetadata, MessageFlags};

use crate::cbor::{from_py, map_from_py};
use crate::errors::{CoreError, CoreResult, Kind};
use crate::exceptions::Raised;
use crate::message::ParsedMessage;
use crate::pyarray::{parse_index, read_into_out, InBuffer};
use crate::szip;

fn type_err(m: String) -> CoreError {
    CoreError::new(Kind::Type, m)
}

/// Message metadata from upstream's dict form: `base` is per object, every other key
/// (including `_extra_`'s contents) is a message-level annotation.
fn global_metadata(meta: &Bound<'_, PyDict>, num_objects: usize) -> CoreResult<GlobalMetadata> {
    let mut global = GlobalMetadata::default();
    for (key, value) in meta.iter() {
        let key: String = key.extract().map_err(|_| type_err("metadata keys must be str".into()))?;
        match key.as_str() {
            "base" => {
                let list = value.cast::<PyList>().map_err(|_| type_err("metadata[\"base\"] must be a list".into()))?;
                for (i, entry) in list.iter().enumerate() {
                    global.base.push(map_from_py(&entry, &format!("metadata[\"base\"][{i}]"))?);
                }
            }
            "_extra_" => global.extra.extend(map_from_py(&value, "metadata[\"_extra_\"]")?),
            "_reserved_" => {
                return Err(CoreError::new(Kind::Value, "metadata[\"_reserved_\"] is written by the library"));
            }
            _ => {
                global.extra.insert(key.clone(), from_py(&value, &format!("metadata[{key:?}]"))?);
            }
        }
    }
    if global.base.len() > num_objects {
        return Err(CoreError::new(
            Kind::Value,
            format!("metadata[\"base\"] has {} entries for {num_objects} objects", global.base.len()),
        ));
    }
    Ok(global)
}

/// A dtype an array can be encoded as: any but bitmask (bits, not whole items).
fn parse_dtype(name: &str) -> CoreResult<Dtype> {
    crate::dtypes::parse(name)
        .filter(|d| d.byte_width() > 0)
        .ok_or_else(|| CoreError::new(Kind::Codec, format!("unsupported dtype {name:?}")))
}

/// A descriptor from upstream's dict form: the named fields, every other key a parameter.
fn descriptor(dict: &Bound<'_, PyAny>, what: &str) -> CoreResult<DataObjectDescriptor> {
    let mut fields: BTreeMap<String, Value> = map_from_py(dict, what)?;
    let mut text = |key: &str, default: &str| -> CoreResult<String> {
        match fields.remove(key) {
            None => Ok(default.to_owned()),
            Some(Value::Text(s)) => Ok(s),
            Some(_) => Err(type_err(format!("{what}[{key:?}] must be a string"))),
        }
    };
    let obj_type = text("type", "ntensor")?;
    let dtype = parse_dtype(&text("dtype", "")?).map_err(|e| e.context(what))?;
    let byte_order = match text("byte_order", "")?.as_str() {
        "" => ByteOrder::native(),
        "little" => ByteOrder::Little,
        "big" => ByteOrder::Big,
        other => return Err(CoreError::new(Kind::Value, format!("{what}: byte_order {other:?} is not little or big"))),
    };
    let encoding = text("encoding", "none")?;
    let filter = text("filter", "none")?;
    let compression = text("compression", "none")?;
    let shape: Vec<u64> = match fields.remove("shape") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::Integer(i) => u64::try_from(i128::from(*i)).ok(),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(|| type_err(format!("{what}[\"shape\"] must hold non-negative ints")))?,
        _ => return Err(type_err(format!("{what}[\"shape\"] is required (a list of ints)"))),
    };
    fields.remove("ndim");
    fields.remove("strides");
    let mut strides = vec![1u64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    Ok(DataObjectDescriptor {
        obj_type,
        ndim: shape.len() as u64,
        shape,
        strides,
        dtype,
        byte_order,
        encoding,
        filter,
        compression,
        masks: None,
        params: fields,
    })
}

/// Encodes one message from upstream's dict forms; runs detached.
#[pyfunction]
#[pyo3(signature = (metadata, objects, hash = true, allow_nan = false, allow_inf = false))]
pub fn encode_message<'py>(
    py: Python<'py>,
    metadata: &Bound<'py, PyDict>,
    objects: &Bound<'py, PyList>,
    hash: bool,
    allow_nan: bool,
    allow_inf: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let global = global_metadata(metadata, objects.len()).raised()?;
    let mut descriptors = Vec::with_capacity(objects.len());
    let mut inputs = Vec::with_capacity(objects.len());
    for (i, item) in objects.iter().enumerate() {
        let what = format!("objects[{i}]");
        let (desc, array): (Bound<'py, PyAny>, Bound<'py, PyUntypedArray>) = item
            .extract()
            .map_err(|_| type_err(format!("{what} must be a (descriptor dict, numpy array) pair"))).raised()?;
        let desc = descriptor(&desc, &what).raised()?;
        let input = InBuffer::new(&array, &what).raised()?;
        let expected = desc.shape.iter().product::<u64>() * desc.dtype.byte_width() as u64;
        if input.len as u64 != expected {
            return Err(CoreError::new(
                Kind::Value,
                format!("{what}: the array has {} bytes, shape {:?} of {} needs {expected}", input.len, desc.shape, desc.dtype),
            )
            .raised());
        }
        descriptors.push(desc);
        inputs.push(input);
    }
    let options = EncodeOptions { hashing: hash, threads: 1, allow_nan, allow_inf, ..Default::default() };
    let encoded = py.detach(|| {
        // SAFETY: the arrays are referenced by `objects` for the whole call.
        let pairs: Vec<(&DataObjectDescriptor, &[u8])> =
            descriptors.iter().zip(&inputs).map(|(d, b)| (d, unsafe { b.as_slice() })).collect();
        let message =
            tensogram::encode(&global, &pairs, &options).map_err(|e| CoreError::from_tensogram(&e, "encode failed"))?;
        verify_szip_offsets(message)
    }).raised()?;
    Ok(PyBytes::new(py, &encoded))
}

/// `message` with every szip object's RSI offsets replaced by the decoder's and marked verified
/// (see `szip.rs`), so that range reads can trust them; other messages come back as they are.
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
        Ok(())
    })
}

/// The message framed again with each object's descriptor passed through `edit`: the payload
/// and mask bytes, the metadata and the hash settings stay as they were (hashes are recomputed,
/// as they cover the descriptors).
fn reframe(
    decoded: DecodedMessage<'_>,
    mut edit: impl FnMut(&mut DataObjectDescriptor, &[u8]) -> CoreResult<()>,
) -> CoreResult<Vec<u8>> {
    let mut objects = Vec::with_capacity(decoded.objects.len());
    for (i, (mut descriptor, payload, masks, _)) in decoded.objects.into_iter().enumerate() {
        edit(&mut descriptor, payload).map_err(|e| e.context(&format!("object {i}")))?;
        // Masks follow the payload in the frame; their descriptors count from the payload's start.
        objects.push(EncodedObject { descriptor, encoded_payload: [payload, masks].concat() });
    }
    let flags = decoded.preamble.flags;
    let policy = HashFramePolicy {
        header: flags.has(MessageFlags::HEADER_HASHES),
        footer: flags.has(MessageFlags::FOOTER_HASHES),
    };
    framing::encode_message(&decoded.global_metadata, &objects, flags.has(MessageFlags::HASHES_PRESENT), policy)
        .map_err(|e| CoreError::from_tensogram(&e, "cannot frame the message again"))
}

/// Parses an in-memory message (for the zarr codec: one message per chunk).
fn parse(buf: &[u8]) -> CoreResult<ParsedMessage> {
    if crate::mapped_file::index_messages(buf)?.len() != 1 {
        return Err(CoreError::new(Kind::Format, "the buffer holds more than one Tensogram message"));
    }
    ParsedMessage::parse(buf)
}

/// Reads `selection` of object `obj` of the message in `buf` (any C-contiguous buffer: bytes,
/// a uint8 array, a memoryview) into `out`; runs detached, on up to `threads` threads (see
/// `read::read_object`).
#[pyfunction]
#[pyo3(signature = (buf, obj, selection, out, verify_hash = false, threads = None))]
pub fn decode_message_into(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    obj: usize,
    selection: Option<&Bound<'_, PyAny>>,
    out: &Bound<'_, PyUntypedArray>,
    verify_hash: bool,
    threads: Option<usize>,
) -> PyResult<()> {
    let view = PyBuffer::<u8>::get(buf)?;
    if !view.is_c_contiguous() {
        return Err(CoreError::new(Kind::Value, "buf must be a C-contiguous buffer").raised());
    }
    // SAFETY: `view` holds the buffer (and its exporter) for the whole call; only read.
    let bytes: &[u8] = if view.len_bytes() == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(view.buf_ptr() as *const u8, view.len_bytes()) }
    };
    let parsed = py.detach(|| parse(bytes)).raised()?;
    let entry = parsed.objects.get(obj).ok_or_else(|| {
        CoreError::new(Kind::Index, format!("object {obj} is out of range ({} objects)", parsed.objects.len()))
    }).raised()?;
    let index = parse_index(selection, &entry.descriptor.shape).raised()?;
    read_into_out(py, bytes, entry, index, out, verify_hash, threads).raised()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensogram::decode::{decode_range_from_payload, DecodeOptions};

    fn descriptor(n: u64, dtype: Dtype, compression: &str, params: &[(&str, u64)]) -> DataObjectDescriptor {
        DataObjectDescriptor {
            obj_type: "ntensor".into(),
            ndim: 1,
            shape: vec![n],
            strides: vec![1],
            dtype,
            byte_order: ByteOrder::native(),
            encoding: "none".into(),
            filter: "none".into(),
            compression: compression.into(),
            masks: None,
            params: params.iter().map(|&(k, v)| (k.to_string(), Value::Integer(v.into()))).collect(),
        }
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
        desc.params["szip_block_offsets"].clone()
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
            let again = reframe(framing::decode_message(&message).unwrap(), |_, _| Ok(())).unwrap();
            assert!(again == message, "hashing={hashing}");
        }
    }

    #[test]
    fn szip_objects_get_the_decoder_s_offsets_and_the_marker() {
        let (desc, values) = zero_runs();
        let other = (descriptor(4, Dtype::Uint8, "lz4", &[]), vec![1, 2, 3, 4]);
        let message = encode(&[(desc, values.clone()), other], true);
        let fixed = verify_szip_offsets(message.clone()).unwrap();
        let (before, after) = (framing::decode_message(&message).unwrap(), framing::decode_message(&fixed).unwrap());
        let ((stored, payload, ..), (checked, fixed_payload, ..)) = (&before.objects[0], &after.objects[0]);

        assert_eq!(payload, fixed_payload);
        assert_eq!(before.objects[1].0.params, after.objects[1].0.params);
        assert_ne!(offsets(stored), offsets(checked), "libaec now stores these offsets right");
        assert!(szip::offsets_verified(checked, payload.len()));
        assert!(!szip::offsets_verified(stored, payload.len()));
        assert!(!szip::offsets_verified(checked, payload.len() + 1));
        // Upstream's stored offsets miss RSI block 1 (elements 128..256); the checked ones find it.
        let options = DecodeOptions::default();
        let block_1 = &values[128 * 4..256 * 4];
        let wrong = decode_range_from_payload(stored, payload, &[(128, 128)], &options);
        assert!(wrong.map_or(true, |parts| parts[0] != block_1));
        assert_eq!(decode_range_from_payload(checked, payload, &[(128, 128)], &options).unwrap()[0], block_1);
        // The rewritten message still passes upstream's hash check.
        let decoded = tensogram::decode(&fixed, &DecodeOptions { verify_hash: true, ..Default::default() }).unwrap();
        assert_eq!(decoded.1[0].1, values);

        // Tampered offsets are no longer vouched for.
        let mut tampered = checked.clone();
        if let Some(Value::Array(items)) = tampered.params.get_mut("szip_block_offsets") {
            items[1] = Value::Integer(1u64.into());
        }
        assert!(!szip::offsets_verified(&tampered, payload.len()));

        // Messages without szip objects come back untouched.
        let plain = encode(&[(descriptor(4, Dtype::Uint8, "lz4", &[]), vec![1, 2, 3, 4])], true);
        assert!(verify_szip_offsets(plain.clone()).unwrap() == plain);
    }
}
