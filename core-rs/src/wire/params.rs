//! Typed access to the codec parameters a descriptor carries (`sp_*`, `szip_*`, ...).

use tensogram::DataObjectDescriptor;

/// An integer parameter of the descriptor (`None` if missing or not an integer).
pub fn int_param(desc: &DataObjectDescriptor, key: &str) -> Option<i64> {
    match desc.params.get(key)? {
        ciborium::Value::Integer(i) => i64::try_from(i128::from(*i)).ok(),
        _ => None,
    }
}

/// A float parameter of the descriptor (integers are accepted too).
pub fn float_param(desc: &DataObjectDescriptor, key: &str) -> Option<f64> {
    match desc.params.get(key)? {
        ciborium::Value::Float(f) => Some(*f),
        ciborium::Value::Integer(i) => Some(i128::from(*i) as f64),
        _ => None,
    }
}
