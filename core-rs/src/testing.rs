//! What the unit tests build messages from.

use std::collections::BTreeMap;

use tensogram::{ByteOrder, DataObjectDescriptor, Dtype};

/// A raw little-endian float32 vector of `n` values with these `params`.
pub fn float32_descriptor(n: u64, params: BTreeMap<String, ciborium::Value>) -> DataObjectDescriptor {
    DataObjectDescriptor {
        obj_type: "ntensor".into(),
        ndim: 1,
        shape: vec![n],
        strides: vec![1],
        dtype: Dtype::Float32,
        byte_order: ByteOrder::Little,
        encoding: "none".into(),
        filter: "none".into(),
        compression: "none".into(),
        masks: None,
        params,
    }
}
