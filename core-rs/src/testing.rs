//! What the unit tests build messages from.

use std::collections::BTreeMap;

use tensogram::{ByteOrder, DataObjectDescriptor, Dtype};

/// A raw little-endian vector of `n` values of `dtype` with these `params`.
pub fn vector_descriptor(n: u64, dtype: Dtype, params: BTreeMap<String, ciborium::Value>) -> DataObjectDescriptor {
    DataObjectDescriptor {
        obj_type: "ntensor".into(),
        ndim: 1,
        shape: vec![n],
        strides: vec![1],
        dtype,
        byte_order: ByteOrder::Little,
        encoding: "none".into(),
        filter: "none".into(),
        compression: "none".into(),
        masks: None,
        params,
    }
}
