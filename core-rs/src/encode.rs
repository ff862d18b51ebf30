//! Messages as our writers encode them (the writer, the zarr codec): upstream's encoding, then
//! every szip object's RSI offsets checked against the decoder and marked verified.

use tensogram::framing::{self, DecodedMessage, EncodedObject, HashFramePolicy};
use tensogram::{DataObjectDescriptor, EncodeOptions, GlobalMetadata, MessageFlags};

use crate::errors::{CoreError, CoreResult, Kind};
use crate::szip;

/// Encodes one message of `objects` (descriptor and native-order values each).
pub fn encode(
    global: &GlobalMetadata,
    objects: &[(&DataObjectDescriptor, &[u8])],
    options: &EncodeOptions,
) -> CoreResult<Vec<u8>> {
    take_sz3_compress_failure(); // one left by an encode that failed before asking
    let message =
        tensogram::encode(global, objects, options).map_err(|e| CoreError::from_tensogram(&e, "encode failed"));
    sz3_compressed()?;
    verify_szip_offsets(message?)
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
