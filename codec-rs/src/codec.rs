//! Whole messages in memory: encoding (the writer, the zarr codec) and decoding (the zarr codec).

use std::collections::BTreeMap;

use ciborium::Value;
use numpy::{PyArray1, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyMemoryView};
use tensogram::{ByteOrder, DataObjectDescriptor, Dtype, EncodeOptions, GlobalMetadata};
use tgm_core::table::RESERVED_KEY;

use crate::cbor::{from_py, map_from_py};
use tgm_core::errors::{CoreError, CoreResult, Kind};
use crate::exceptions::Raised;
use tgm_core::source::message::ParsedMessage;
use tgm_core::encoding::encode;
use crate::arrays::InBuffer;
use crate::index::parse_index;
use crate::read_into::read_into_out;
use tgm_core::read::object::Verify;

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
            RESERVED_KEY => {
                return Err(CoreError::new(Kind::Value, format!("metadata[{RESERVED_KEY:?}] is written by the library")));
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
    tgm_core::wire::dtypes::parse(name)
        .filter(|d| d.byte_width() > 0)
        .ok_or_else(|| CoreError::new(Kind::Codec, format!("unsupported dtype {name:?}")))
}

/// A descriptor from upstream's dict form: the named fields, every other key a parameter.
pub(crate) fn descriptor(dict: &Bound<'_, PyAny>, what: &str) -> CoreResult<DataObjectDescriptor> {
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

/// `flags` if a szip stream of `bits`-bit samples (where known) written with them reads back
/// (`tgm_core::encoding::szip::writable_flags`), else `TgmCodecError` saying why: the writer's
/// and the zarr codec's check of `szip_flags`.
#[pyfunction]
#[pyo3(signature = (flags, bits = None))]
pub fn writable_szip_flags(flags: i64, bits: Option<u32>) -> PyResult<u32> {
    crate::guard::guarded("writable_szip_flags", || {
        tgm_core::encoding::szip::writable_flags(flags, bits).raised()
    })
}

/// Encodes one message from upstream's dict forms; runs detached. A large packed szip field is
/// encoded on up to `threads` threads of the process-wide budget (`None`: as many as it has
/// free), into the same bytes on any number. `copy=False`: a memoryview of the encoder's own
/// memory instead of `bytes`, a copy fewer (the writer's, which only writes the message out).
#[pyfunction]
#[pyo3(signature = (metadata, objects, hash = true, allow_nan = false, allow_inf = false, threads = None, copy = true))]
#[allow(clippy::too_many_arguments)] // Python's keywords
pub fn encode_message<'py>(
    py: Python<'py>,
    metadata: &Bound<'py, PyDict>,
    objects: &Bound<'py, PyList>,
    hash: bool,
    allow_nan: bool,
    allow_inf: bool,
    threads: Option<usize>,
    copy: bool,
) -> PyResult<Bound<'py, PyAny>> {
    crate::guard::guarded("encode_message", || {
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
            // float32 values of a float64 packed object are packed from float32 (`encode::Values`).
            let float32 = desc.encoding == "simple_packing" && desc.dtype == Dtype::Float64 && is_native_float32(&array)?;
            let itemsize = if float32 { 4 } else { desc.dtype.byte_width() as u64 };
            let expected = desc.shape.iter().product::<u64>() * itemsize;
            if input.len as u64 != expected {
                return Err(CoreError::new(
                    Kind::Value,
                    format!("{what}: the array has {} bytes, shape {:?} of {} needs {expected}", input.len, desc.shape, desc.dtype),
                )
                .raised());
            }
            descriptors.push(desc);
            inputs.push((input, float32));
        }
        let options = EncodeOptions { hashing: hash, threads: 1, allow_nan, allow_inf, ..Default::default() };
        let encoded = py.detach(|| {
            // SAFETY: each input holds its array (so another thread emptying `objects` frees none),
            // and an encoder's input is not written while it is encoded.
            let pairs: Vec<(&DataObjectDescriptor, encode::Values)> = descriptors
                .iter()
                .zip(&inputs)
                .map(|(d, (b, float32))| {
                    let bytes = unsafe { b.as_slice() };
                    (d, if *float32 { encode::Values::Float32(bytes) } else { encode::Values::Stored(bytes) })
                })
                .collect();
            match encode::encode(&global, &pairs, &options, threads) {
                // The encode's reservation failed: once more without the pool's free blocks.
                Err(e) if e.kind == Kind::Memory => {
                    crate::buffers::drain();
                    encode::encode(&global, &pairs, &options, threads)
                }
                done => done,
            }
        }).raised()?;
        if !copy {
            return Ok(PyMemoryView::from(PyArray1::from_vec(py, encoded).as_any())?.into_any());
        }
        Ok(bytes_detached(py, &encoded)?.into_any())
    })
}

/// Whether `array` holds native-order float32 values.
fn is_native_float32(array: &Bound<'_, PyUntypedArray>) -> PyResult<bool> {
    Ok(array.dtype().is_equiv_to(&numpy::dtype::<f32>(array.py())))
}

/// `bytes` holding `data`; a big one is filled with the interpreter released, so that the copy
/// (and the page faults of the bytes' fresh memory) do not hold up the writer's other threads.
fn bytes_detached<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    if data.len() < tgm_core::read::object::RELEASE_MIN_BYTES {
        return Ok(PyBytes::new(py, data));
    }
    // SAFETY: a new bytes object of `data.len()` bytes, not yet filled, that nothing else can
    // reach before this function returns it filled.
    unsafe {
        let bytes = pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), data.len() as pyo3::ffi::Py_ssize_t);
        let bytes = Bound::from_owned_ptr_or_err(py, bytes)?;
        let to = pyo3::ffi::PyBytes_AsString(bytes.as_ptr()) as usize; // an address: Send
        py.detach(|| std::ptr::copy_nonoverlapping(data.as_ptr(), to as *mut u8, data.len()));
        Ok(bytes.cast_into_unchecked())
    }
}

/// Fails unless `objects` is one object, of `shape` and (unless `None`) dtype `dtype`: checked
/// before anything is decoded, so a chunk declaring another size costs nothing.
pub(crate) fn check_holds<'a>(objects: impl IntoIterator<Item = &'a DataObjectDescriptor>, shape: &[u64], dtype: Option<&str>) -> CoreResult<()> {
    let found: Vec<(&[u64], String)> = objects.into_iter().map(|d| (&d.shape[..], d.dtype.to_string())).collect();
    if found.len() == 1 && found[0].0 == shape && dtype.is_none_or(|t| found[0].1 == t) {
        return Ok(());
    }
    let shape_text = |s: &[u64]| match s {
        [n] => format!("({n},)"),
        _ => format!("({})", s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let what = found.iter().map(|(s, t)| format!("shape {} {t}", shape_text(s))).collect::<Vec<_>>().join(", ");
    let what = if what.is_empty() { "no object".to_string() } else { what };
    Err(CoreError::new(
        Kind::Codec,
        format!(
            "tensogram codec: the chunk holds {what}, not one object of shape {}{} as the array's chunk spec says",
            shape_text(shape),
            dtype.map(|t| format!(" {t}")).unwrap_or_default()
        ),
    ))
}

/// Reads `selection` of object `obj` of the message in `buf` (any C-contiguous buffer: bytes,
/// a uint8 array, a memoryview) into `out`; runs detached, on up to `threads` threads (see
/// `read::object::read_object`). `expect`: `(shape, dtype name)` the message must hold as its
/// only object (a zarr chunk spec): the decoder checks only the size of what it fills, and a
/// chunk of another shape or dtype of the same size would decode into wrong values (int64 7 as
/// float64 3.5e-323).
#[pyfunction]
#[pyo3(signature = (buf, obj, selection, out, verify_hash = None, threads = None, expect = None))]
#[allow(clippy::too_many_arguments)]
pub fn decode_message_into(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    obj: usize,
    selection: Option<&Bound<'_, PyAny>>,
    out: &Bound<'_, PyUntypedArray>,
    verify_hash: Option<bool>,
    threads: Option<usize>,
    expect: Option<(Vec<u64>, String)>,
) -> PyResult<()> {
    crate::guard::guarded("decode_message_into", || {
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
        let parsed = py.detach(|| ParsedMessage::parse_single(bytes)).raised()?;
        if let Some((shape, dtype)) = &expect {
            check_holds(parsed.objects.iter().map(|o| &o.descriptor), shape, Some(dtype)).raised()?;
        }
        let entry = parsed.objects.get(obj).ok_or_else(|| {
            CoreError::new(Kind::Index, format!("object {obj} is out of range ({} objects)", parsed.objects.len()))
        }).raised()?;
        let index = parse_index(selection, &entry.descriptor.shape).raised()?;
        read_into_out(py, bytes, entry, index, out, Verify::from_flag(verify_hash), threads).raised()?;
        Ok(())
    })
}
