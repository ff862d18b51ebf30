//! Messages as our writers encode them (the writer, the zarr codec): upstream's encoding, then
//! every szip object's RSI offsets, as our libaec's encoder records them, marked verified.

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
        if let Some(Value::Array(items)) = tampered.params.get_mut("szip_block_offsets") {
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
            desc.params.insert("szip_block_offsets".into(), Value::Array(offsets.into_iter().map(|o| Value::Integer(o.into())).collect()));
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
}
