//! What the unit tests build messages from.

use std::collections::BTreeMap;

use tensogram::{ByteOrder, DataObjectDescriptor, Dtype, EncodeOptions, GlobalMetadata};

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

/// A message of `n` float32 values (0, 1, 2, ...) per object, `objects` objects, written by the
/// crate.
pub fn float_message(n: usize, objects: usize) -> Vec<u8> {
    let desc = vector_descriptor(n as u64, Dtype::Float32, BTreeMap::new());
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let meta = GlobalMetadata { base: vec![BTreeMap::new(); objects], ..Default::default() };
    let objects: Vec<_> = (0..objects).map(|_| (&desc, &data[..])).collect();
    tensogram::encode(&meta, &objects, &EncodeOptions::default()).expect("encodes")
}
