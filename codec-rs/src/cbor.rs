//! CBOR metadata values to and from plain Python objects.

use std::collections::BTreeMap;

use ciborium::Value;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use tgm_core::errors::{CoreError, CoreResult, Kind};

/// Converts a CBOR value to `dict`/`list`/`str`/`int`/`float`/`bool`/`None`/`bytes`.
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Integer(i) => i128::from(*i).into_pyobject(py)?.into_any(),
        Value::Float(f) => PyFloat::new(py, *f).into_any(),
        Value::Text(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::Tag(_, inner) => to_py(py, inner)?,
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                let key = match k {
                    Value::Text(_) | Value::Integer(_) | Value::Bool(_) => to_py(py, k)?,
                    other => PyString::new(py, &format!("{other:?}")).into_any(),
                };
                dict.set_item(key, to_py(py, v)?)?;
            }
            dict.into_any()
        }
        _ => py.None().into_bound(py),
    })
}

pub fn map_to_py<'py>(py: Python<'py>, map: &BTreeMap<String, Value>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in map {
        dict.set_item(k, to_py(py, v)?)?;
    }
    Ok(dict)
}

/// Converts a Python value to CBOR; `path` names the value in errors (`metadata["base"][0]`).
pub fn from_py(obj: &Bound<'_, PyAny>, path: &str) -> CoreResult<Value> {
    let bad = |what: &str| CoreError::new(Kind::Type, format!("{path}: {what}"));
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        let i: i128 = obj.extract().map_err(|_| bad("integer does not fit in 64 bits"))?;
        let i = i.try_into().map_err(|_| bad("integer does not fit in 64 bits"))?;
        return Ok(Value::Integer(i));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::Text(s.to_str().map_err(|_| bad("string is not valid UTF-8"))?.to_owned()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key: String = k.str().map_err(|_| bad("unprintable key"))?.to_string();
            let value = from_py(&v, &format!("{path}[{key:?}]"))?;
            entries.push((Value::Text(key), value));
        }
        return Ok(Value::Map(entries));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut items = vec![];
        for (i, item) in obj.try_iter().map_err(|_| bad("not iterable"))?.enumerate() {
            let item = item.map_err(|_| bad("iteration failed"))?;
            items.push(from_py(&item, &format!("{path}[{i}]"))?);
        }
        return Ok(Value::Array(items));
    }
    // numpy scalars and arrays: `.tolist()` gives plain Python values.
    if let Ok(plain) = obj.call_method0("tolist") {
        return from_py(&plain, path);
    }
    Err(bad(&format!(
        "cannot store a value of type {} as metadata",
        obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
    )))
}

/// Converts a Python `dict` with string keys to a CBOR map.
pub fn map_from_py(obj: &Bound<'_, PyAny>, path: &str) -> CoreResult<BTreeMap<String, Value>> {
    let dict = obj
        .cast::<PyDict>()
        .map_err(|_| CoreError::new(Kind::Type, format!("{path}: expected a dict")))?;
    let mut map = BTreeMap::new();
    for (k, v) in dict.iter() {
        let key: String = k
            .extract()
            .map_err(|_| CoreError::new(Kind::Type, format!("{path}: keys must be str")))?;
        let value = from_py(&v, &format!("{path}[{key:?}]"))?;
        map.insert(key, value);
    }
    Ok(map)
}
