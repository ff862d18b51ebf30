//! Decoding a hyperslab of one object into a caller's buffer. Runs with the interpreter detached.

use std::borrow::Cow;

use tensogram::decode::{decode_object_from_frame, decode_range_from_payload, DecodeOptions};
use tensogram::wire::FrameType;
use tensogram::{ByteOrder, DataObjectDescriptor, Dtype};

use crate::buffers::try_zeroed;
use crate::counters::{add_decoded, InFlight};
use crate::errors::{CoreError, CoreResult, Kind};
use crate::source::message::{Access, ObjectEntry};
use crate::wire::params::int_param;
use crate::encoding::packing::{Packed, Unpacked};
use crate::parallel;
use crate::read::selection::{AxisSel, Plan};
use crate::encoding::szip;

use super::{bounds, whole};

/// Parallelism comes from the caller's threads (dask, zarr), never from a pool per call.
fn decode_options() -> DecodeOptions {
    DecodeOptions { threads: 1, native_byte_order: true, verify_hash: false, ..Default::default() }
}

/// Which stored hashes a read checks (`verify_hash=` in Python: `None`, `True`, `False`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verify {
    /// Every object that carries a hash, once per object: the default.
    #[default]
    IfHashed,
    /// The same, and an object without a hash is an error.
    Require,
    /// None (SZ3 objects are still checked: see `read_object`).
    Skip,
}

impl Verify {
    /// `verify_hash=None | True | False`.
    pub fn from_flag(flag: Option<bool>) -> Self {
        match flag {
            None => Verify::IfHashed,
            Some(true) => Verify::Require,
            Some(false) => Verify::Skip,
        }
    }

    /// Whether a read of `entry` still has a hash to check (each object's is checked once).
    fn pending(self, entry: &ObjectEntry) -> bool {
        self != Verify::Skip && entry.hash_checked.get().is_none()
    }
}

/// Checks the object's stored xxh3 hash against its frame, once per object, decoding nothing
/// (so whatever its dtype: bitmasks and bfloat16 too); `Ok(false)` when the object was written
/// without a hash, an error of kind `Hash` when the bytes do not match it.
pub fn check_hash(msg: &[u8], entry: &ObjectEntry) -> CoreResult<bool> {
    entry
        .hash_checked
        .get_or_init(|| {
            tensogram::hash::check_frame_hash(&msg[entry.frame.clone()], FrameType::NTensorFrame)
                .map_err(|e| CoreError::from_tensogram(&e, "hash check failed"))
        })
        .clone()
}

/// Elements a codec decodes at least per range: an szip range starts at an RSI block boundary;
/// elsewhere a range costs a call and an allocation, worth about this many elements decoded.
fn granule(entry: &ObjectEntry) -> u64 {
    match entry.descriptor.compression.as_str() {
        "szip" => {
            let param = |k: &str| int_param(&entry.descriptor, k).unwrap_or(0).max(0) as u64;
            param("szip_rsi") * param("szip_block_size")
        }
        _ => 256,
    }
}

/// `(first element, elements, planned ranges it covers)`: one span decoded (or fetched) at once.
pub(crate) type Group = (u64, u64, std::ops::Range<usize>);

/// The ranges to decode: planned ranges closer than a granule are merged, so that no block is
/// decoded twice (the rows of a window share szip blocks). Each group is `(offset, count,
/// planned ranges it covers)`.
pub(crate) fn decode_groups(ranges: &[(u64, u64)], granule: u64) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for (i, &(off, count)) in ranges.iter().enumerate() {
        match groups.last_mut() {
            Some((g_off, g_count, members)) if off >= *g_off && off <= *g_off + *g_count + granule => {
                *g_count = (*g_count).max(off + count - *g_off);
                members.end = i + 1;
            }
            _ => groups.push((off, count, i..i + 1)),
        }
    }
    groups
}

/// Whether decoding only `groups` is cheaper than decoding the whole object.
fn ranges_pay_off(entry: &ObjectEntry, groups: &[Group]) -> bool {
    let total = entry.num_elements();
    // Each group may decode up to one granule more than it asks for.
    let cost: u64 = groups.iter().map(|g| g.1 + granule(entry)).sum();
    match entry.descriptor.compression.as_str() {
        "blosc2" => cost * 2 <= total,
        _ => cost < total,
    }
}

/// The plan of a read of `sel`, once the selection is checked against the object.
pub(crate) fn check_selection(desc: &DataObjectDescriptor, sel: &[AxisSel]) -> CoreResult<Plan> {
    if desc.dtype.byte_width() == 0 {
        return Err(CoreError::new(Kind::Codec, format!("dtype {} cannot be read as an array", desc.dtype)));
    }
    if sel.len() != desc.shape.len() {
        return Err(CoreError::new(
            Kind::Index,
            format!("selection has {} axes but the object has {} dimensions", sel.len(), desc.shape.len()),
        ));
    }
    for (axis, (s, &n)) in sel.iter().zip(&desc.shape).enumerate() {
        s.check(axis, n)?;
    }
    Ok(Plan::new(&desc.shape, sel))
}

/// Below about a microsecond of work a read keeps the interpreter. On a GIL build, a thread that
/// releases it must get it back afterwards, and when another thread holds it by then, waking up
/// costs ~20 µs on our 2-vCPU VMs: two threads doing 4 KB reads that release get 0.77x the work
/// of one thread done, and 1.0x when they keep it (docs/benchmarks.md, "Small reads"). Measured
/// there too: a raw read copies ~32 KB in a microsecond, and each separate run it copies (an
/// index-array entry, an element of a strided slice) costs about as much as copying 128 bytes.
pub const RELEASE_MIN_BYTES: usize = 32 * 1024;
/// Objects at least this large reserve their decode's address space before upstream decodes
/// them (`read_object`): from here calloc maps fresh pages instead of zeroing them.
const PROBE_MIN_BYTES: usize = 1 << 20;
pub const BYTES_PER_PIECE: usize = 128;

/// Whether a read of `out_bytes` in at most `pieces` separate runs should release the
/// interpreter: every decode does (it decodes at least a block), and so do hash checks still to
/// run and raw copies of a microsecond or more.
pub fn worth_releasing(entry: &ObjectEntry, out_bytes: usize, pieces: usize, verify: Verify) -> bool {
    entry.access != Access::Raw
        || verify.pending(entry)
        || out_bytes.saturating_add(pieces.saturating_mul(BYTES_PER_PIECE)) >= RELEASE_MIN_BYTES
}

/// Whether `to` is a type `entry` can be read as: its own, or float32 for float64 objects.
pub fn check_unpacked(entry: &ObjectEntry, to: Unpacked) -> CoreResult<()> {
    if to == Unpacked::F32 && entry.descriptor.dtype != Dtype::Float64 {
        return Err(CoreError::new(Kind::Value, format!("a {} object cannot be read as float32", entry.descriptor.dtype)));
    }
    Ok(())
}

/// Reads float64 values into the float32 `out` through a float64 buffer `fill` fills: the path
/// of float64 objects the packed paths do not unpack straight into float32.
pub fn through_float64(out: &mut [u8], fill: impl FnOnce(&mut [u8]) -> CoreResult<()>) -> CoreResult<()> {
    let mut wide = try_zeroed(out.len() * 2, "the float64 values read as float32")?;
    fill(&mut wide)?;
    for (dst, src) in out.chunks_exact_mut(4).zip(wide.chunks_exact(8)) {
        dst.copy_from_slice(&(f64::from_ne_bytes(src.try_into().expect("8 bytes")) as f32).to_ne_bytes());
    }
    Ok(())
}

/// Reads `sel` of object `entry` (of message `msg`) into `out`, in native byte order, on up to
/// `threads` threads (`None`: as the process-wide budget allows, see `parallel.rs`), as the
/// object's dtype or, for float64 objects, as float32 (`to`): packed objects of whole-byte values
/// unpack straight into float32, the others are read as float64 and rounded.
pub fn read_object(
    msg: &[u8],
    entry: &ObjectEntry,
    sel: &[AxisSel],
    out: &mut [u8],
    verify: Verify,
    threads: Option<usize>,
    to: Unpacked,
) -> CoreResult<()> {
    check_unpacked(entry, to)?;
    let direct_f32 = entry.packed.as_ref().is_some_and(|p| p.value_bytes().is_some());
    if to == Unpacked::F32 && !direct_f32 {
        return through_float64(out, |wide| read_object(msg, entry, sel, wide, verify, threads, Unpacked::F64));
    }
    let desc = &entry.descriptor;
    // Only packed objects reach here with float32.
    let itemsize = if to == Unpacked::F32 { 4 } else { desc.dtype.byte_width() };
    let plan = check_selection(desc, sel)?;
    if out.len() as u64 != plan.out_len * itemsize as u64 {
        return Err(CoreError::new(
            Kind::Value,
            format!("output buffer holds {} bytes, the selection needs {}", out.len(), plan.out_len * itemsize as u64),
        ));
    }
    // The whole frame is hashed, whatever part of it the read decodes. SZ3 trusts its input more
    // than the other decoders (its exceptions are caught, but what a corrupt stream does short of
    // throwing is unknown): its stored hash is checked even with `Verify::Skip`.
    if verify != Verify::Skip || desc.compression == "sz3" {
        let hashed = check_hash(msg, entry)?;
        if verify == Verify::Require && !hashed {
            return Err(CoreError::new(Kind::Hash, "verify_hash=True but the object was written without a hash"));
        }
    }
    if plan.out_len == 0 {
        return Ok(());
    }
    let payload = &msg[entry.payload.clone()];
    // Before any decoder sees it, on every path: a split read of a payload longer than its
    // shape would otherwise read the shape's part of it without complaint.
    bounds::check_payload(desc, payload)?;
    let _in_flight = InFlight::enter();
    if read_split(msg, entry, &plan, out, threads, to)? {
        return Ok(());
    }
    let groups = match entry.access {
        Access::Ranged => decode_groups(&plan.ranges, granule(entry)),
        _ => Vec::new(),
    };
    let options = decode_options();
    let codec_err = |e: tensogram::TensogramError| CoreError::from_tensogram(&e, "decode failed");

    let decoded = match entry.access {
        Access::Raw => {
            for (i, &(off, count)) in plan.ranges.iter().enumerate() {
                plan.scatter(i, values_at(payload, off, count, itemsize)?, out, itemsize);
            }
            if desc.byte_order != ByteOrder::native() {
                swap_bytes(out, desc.dtype.swap_unit_size());
            }
            plan.decoded_len()
        }
        Access::Ranged if ranges_pay_off(entry, &groups) => {
            let ranged_desc = if desc.compression == "szip" && !entry.szip_offsets_verified {
                entry
                    .szip_ranged
                    .get_or_init(|| {
                        add_decoded(entry.num_elements());
                        szip::with_decoder_offsets(desc, payload)
                    })
                    .as_ref()
                    .map_err(Clone::clone)?
            } else {
                desc
            };
            if let Some(packed) = entry.packed.as_ref().filter(|p| p.value_bytes().is_some()) {
                read_packed_ranges(packed, ranged_desc, payload, &plan, &groups, out, to)?;
            } else {
                let spans: Vec<(u64, u64)> = groups.iter().map(|g| (g.0, g.1)).collect();
                let parts = decode_range_from_payload(ranged_desc, payload, &spans, &options).map_err(codec_err)?;
                for ((g_off, _, members), part) in groups.iter().zip(&parts) {
                    for i in members.clone() {
                        let (off, count) = plan.ranges[i];
                        plan.scatter(i, values_at(part, off - g_off, count, itemsize)?, out, itemsize);
                    }
                }
            }
            groups.iter().map(|g| g.1).sum()
        }
        _ => {
            let whole_len = entry.num_elements() as usize * itemsize;
            if plan.is_whole(entry.num_elements()) {
                // The whole object, in order: decoded straight into the output.
                let done = match &entry.packed {
                    Some(packed) => packed.decode_into(payload, out, to).map(|()| true)?,
                    None => whole::decode_into(desc, payload, out)?,
                };
                if done {
                    add_decoded(entry.num_elements());
                    return Ok(());
                }
            }
            let whole = match &entry.packed {
                Some(packed) => {
                    let mut whole = try_zeroed(whole_len, "the decoded object")?;
                    packed.decode_into(payload, &mut whole, to)?;
                    whole
                }
                None => match whole::decode(desc, payload, whole_len)? {
                    Some(values) => values,
                    None => {
                        // Upstream decodes the NaN/Inf masks here too.
                        bounds::check_masks(desc, &msg[entry.payload.start..entry.frame.end])?;
                        // Upstream's decoders (blosc2, zfp, sz3, masks) allocate infallibly: the
                        // address space they take (the values and one copy of them in its
                        // pipeline) is reserved fallibly first and given back, so that a limit
                        // (`ulimit -v`) ends the read with a MemoryError, not the process. Small
                        // objects skip it: calloc would zero what the decoder is about to fill.
                        if whole_len >= PROBE_MIN_BYTES {
                            drop(try_zeroed(whole_len.saturating_mul(2), "the decoded object")?);
                        }
                        let decoded = decode_object_from_frame(&msg[entry.frame.clone()], &options).map_err(codec_err)?.1;
                        if desc.compression == "sz3" {
                            bounds::sz3_failed()?;
                        }
                        decoded
                    }
                },
            };
            if whole.len() != whole_len {
                return Err(CoreError::new(Kind::Codec, "decoded payload has the wrong size"));
            }
            for (i, &(off, count)) in plan.ranges.iter().enumerate() {
                plan.scatter(i, values_at(&whole, off, count, itemsize)?, out, itemsize);
            }
            entry.num_elements()
        }
    };
    add_decoded(decoded);
    Ok(())
}

/// The descriptor whose szip offsets a range decode can use without decoding the object first:
/// `None` for szip objects whose offsets are neither vouched for nor found by an earlier read.
fn known_ranged_descriptor(entry: &ObjectEntry) -> Option<&DataObjectDescriptor> {
    if entry.descriptor.compression != "szip" || entry.szip_offsets_verified {
        return Some(&entry.descriptor);
    }
    entry.szip_ranged.get().and_then(|r| r.as_ref().ok())
}

/// Reads a plan that fills `out` with one run of elements (the whole object, a band of rows)
/// on several threads when the object decodes by range and the budget gives more than one
/// thread: each thread range-decodes its part straight into its slice of `out`. `Ok(false)`
/// when the read is left to the serial paths.
fn read_split(msg: &[u8], entry: &ObjectEntry, plan: &Plan, out: &mut [u8], threads: Option<usize>, to: Unpacked) -> CoreResult<bool> {
    let &[(off, count)] = plan.ranges.as_slice() else {
        return Ok(false);
    };
    if entry.access != Access::Ranged || threads == Some(1) || plan.destination(0, 1) != Some(0..count as usize) {
        return Ok(false);
    }
    let grant = parallel::grant(threads, count);
    if grant.threads < 2 {
        return Ok(false);
    }
    let payload = &msg[entry.payload.clone()];
    let whole_bytes = entry.packed.as_ref().filter(|p| p.value_bytes().is_some());
    let Some(desc) = known_ranged_descriptor(entry) else {
        // Szip offsets nobody vouched for: a packed object finds them while it decodes this
        // read (as a serial read would decode it), so that the next reads split.
        let Some(packed) = whole_bytes else {
            return Ok(false);
        };
        let (fixed, stream) = szip::decode_with_decoder_offsets(&entry.descriptor, payload)?;
        let _ = entry.szip_ranged.set(Ok(fixed));
        add_decoded(entry.num_elements());
        let width = packed.value_bytes().expect("whole-byte values");
        return parallel::for_each_part(out, to.width(), off, 1, grant.threads, |first, n, part| {
            let src = stream.get(first as usize * width..(first + n) as usize * width);
            packed.unpack(src.ok_or_else(|| CoreError::new(Kind::Codec, "szip stream is shorter than the shape needs"))?, part, to);
            Ok(())
        })
        .map(|()| true);
    };
    let itemsize = if whole_bytes.is_some() { to.width() } else { desc.dtype.byte_width() };
    let offsets = match (whole_bytes, desc.compression.as_str()) {
        (Some(_), "szip") => szip::stored_offsets(desc).ok_or_else(|| {
            CoreError::new(Kind::Format, format!("{} are missing or invalid (a split decode needs them)", szip::OFFSETS_KEY))
        })?,
        _ => Vec::new(),
    };
    // Parts meet on RSI block boundaries: no block is decoded by two threads.
    let align = granule(entry).max(1);
    let options = decode_options();
    parallel::for_each_part(out, itemsize, off, align, grant.threads, |first, n, part| {
        match whole_bytes {
            Some(packed) => packed.stream_into(payload, &offsets, first, part, to)?,
            None => {
                let decoded = decode_range_from_payload(desc, payload, &[(first, n)], &options)
                    .map_err(|e| CoreError::from_tensogram(&e, "decode failed"))?;
                match decoded.first() {
                    Some(d) if d.len() == part.len() => part.copy_from_slice(d),
                    _ => return Err(CoreError::new(Kind::Codec, "decoded range has the wrong size")),
                }
            }
        }
        add_decoded(n);
        Ok(())
    })?;
    Ok(true)
}

/// The planned ranges of a packed object whose values are whole bytes: each group's szip RSI
/// blocks are decompressed once, by one decoder set up once, and only the planned values are
/// unpacked (upstream's range
/// decode unpacks every value of the group into a fresh `Vec<f64>`, converts it to bytes, and
/// the plan then copies out what it needs).
fn read_packed_ranges(
    packed: &Packed,
    desc: &DataObjectDescriptor,
    payload: &[u8],
    plan: &Plan,
    groups: &[Group],
    out: &mut [u8],
    to: Unpacked,
) -> CoreResult<()> {
    let offsets = match desc.compression.as_str() {
        "szip" => szip::stored_offsets(desc).ok_or_else(|| {
            CoreError::new(Kind::Format, format!("{} are missing or invalid (a partial decode needs them)", szip::OFFSETS_KEY))
        })?,
        _ => Vec::new(),
    };
    let width = packed.value_bytes().expect("whole-byte values");
    let mut reader = packed.reader(payload, &offsets)?;
    fill_groups(plan, groups, width, to.width(), out, |off, count| reader.range(off, count), |src, dst| packed.unpack(src, dst, to))
}

/// Fills `out` from `groups`: `group_bytes(first, count)` gives a group's stored values
/// (`width` bytes each) and `convert` turns the values of each planned range into output
/// elements (`out_itemsize` bytes each), straight into their place unless the plan reorders them.
pub(crate) fn fill_groups<'a>(
    plan: &Plan,
    groups: &[Group],
    width: usize,
    out_itemsize: usize,
    out: &mut [u8],
    mut group_bytes: impl FnMut(u64, u64) -> CoreResult<Cow<'a, [u8]>>,
    convert: impl Fn(&[u8], &mut [u8]),
) -> CoreResult<()> {
    let mut picked = Vec::new();
    for (g_off, g_count, members) in groups {
        let bytes = group_bytes(*g_off, *g_count)?;
        for i in members.clone() {
            let (off, count) = plan.ranges[i];
            let src = values_at(&bytes, off - g_off, count, width)?;
            match plan.destination(i, out_itemsize) {
                Some(dst) => convert(src, &mut out[dst]),
                None => {
                    picked.resize(count as usize * out_itemsize, 0);
                    convert(src, &mut picked);
                    plan.scatter(i, &picked, out, out_itemsize);
                }
            }
        }
    }
    Ok(())
}

/// Values `first..first + count` (`width` bytes each) of `bytes`, or an error when a decoder
/// gave fewer than the descriptor promised.
fn values_at(bytes: &[u8], first: u64, count: u64, width: usize) -> CoreResult<&[u8]> {
    let (start, len) = (first as usize * width, count as usize * width);
    bytes
        .get(start..start + len)
        .ok_or_else(|| CoreError::new(Kind::Codec, "the decoded values are fewer than the shape needs"))
}

fn swap_bytes(buf: &mut [u8], unit: usize) {
    if unit > 1 {
        buf.chunks_exact_mut(unit).for_each(|c| c.reverse());
    }
}

/// Every element of an object of this shape.
pub fn full_selection(shape: &[u64]) -> Vec<AxisSel> {
    shape.iter().map(|&n| AxisSel::full(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::decode_groups;

    #[test]
    fn ranges_closer_than_a_granule_decode_together() {
        let rows = [(10, 4), (18, 4), (26, 4), (100, 4)];
        let groups = decode_groups(&rows, 8);
        assert_eq!(groups, vec![(10, 20, 0..3), (100, 4, 3..4)]);
        // Without a granule only touching ranges merge.
        assert_eq!(decode_groups(&[(0, 4), (4, 4), (9, 1)], 0), vec![(0, 8, 0..2), (9, 1, 2..3)]);
        // Repeated ranges share one decode.
        assert_eq!(decode_groups(&[(5, 2), (5, 2)], 0), vec![(5, 2, 0..2)]);
        // Out-of-order ranges (reversed selections) stay apart.
        assert_eq!(decode_groups(&[(8, 4), (0, 4)], 100).len(), 2);
    }
}
