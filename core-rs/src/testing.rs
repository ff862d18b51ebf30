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

/// `float_message` written by upstream's streaming encoder into a pipe: length 0 in the
/// preamble, the metadata and index after the objects.
pub fn streaming_float_message(n: usize, objects: usize) -> Vec<u8> {
    let desc = vector_descriptor(n as u64, Dtype::Float32, BTreeMap::new());
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut encoder = tensogram::StreamingEncoder::new(Vec::new(), &GlobalMetadata::default(), &EncodeOptions::default())
        .expect("starts");
    (0..objects).for_each(|_| encoder.write_object(&desc, &data).expect("writes"));
    encoder.finish().expect("finishes")
}

/// How upstream writes a message: buffered (metadata and index before the objects), streamed
/// into a seekable sink (after them, lengths filled in) or into a pipe (after them, length 0).
#[derive(Debug, Clone, Copy)]
pub enum Written {
    Header,
    Footer,
    Streaming,
}

/// A message of one `uint8` vector holding `values`, written as `written` says.
pub fn message(values: &[u8], written: Written) -> Vec<u8> {
    use tensogram::{EncodeOptions, GlobalMetadata, StreamingEncoder};
    let desc = vector_descriptor(values.len() as u64, Dtype::Uint8, BTreeMap::new());
    let (meta, options) = (GlobalMetadata::default(), EncodeOptions::default());
    match written {
        Written::Header => tensogram::encode(&meta, &[(&desc, values)], &options).expect("encodes"),
        Written::Footer => {
            let mut encoder = StreamingEncoder::new(std::io::Cursor::new(Vec::new()), &meta, &options).expect("starts");
            encoder.write_object(&desc, values).expect("writes");
            encoder.finish_with_backfill().expect("finishes").into_inner()
        }
        Written::Streaming => {
            let mut encoder = StreamingEncoder::new(Vec::new(), &meta, &options).expect("starts");
            encoder.write_object(&desc, values).expect("writes");
            encoder.finish().expect("finishes")
        }
    }
}
