//! A file's metadata as columns, built in one pass over its messages without touching a
//! payload: one row per object, one per message, each metadata key a column of codes into its
//! distinct values. The only builder of it: from whole messages, or from the pieces of a remote
//! message read by its header (`Builder::parts`). `tgm_xarray.table.MetadataTable` is
//! the Python view of it.
//!
//! Metadata is flattened as `tgm_xarray.attrs.flatten` does: nested maps become dotted keys and
//! `_reserved_` entries are left out. The top-level structural keys (`dim_names`,
//! `coordinate_attrs`) get columns of their own.

use std::ops::Range;
use std::rc::Rc;

use ahash::{AHashMap as HashMap, RandomState};
use ciborium::Value;
use serde::{Deserialize, Serialize};
use tensogram::wire::FrameHeader;
use tensogram::DataObjectDescriptor;

use crate::errors::{CoreError, CoreResult};
use crate::wire::cbor::{self, Walker};
use crate::wire::frames::{self, inline_hash};
use crate::source::message::walk;
use crate::encoding::szip;

#[macro_use]
mod columns;
mod prints;
mod stored;

pub use columns::{Field, Rows};
pub use stored::TABLE_FORMAT;

/// Encoder-owned metadata: never flattened.
pub const RESERVED_KEY: &str = "_reserved_";
/// Dimension-name hints, of an object (`base[i]`) or of a message (`_extra_`).
pub const DIM_NAMES_KEY: &str = "dim_names";
/// `_extra_` entry holding attributes of coordinates rebuilt from metadata keys.
pub const COORDINATE_ATTRS_KEY: &str = "coordinate_attrs";
/// An object's `base` entry naming the dtype its values were given in, where they are stored
/// wider (simple packing takes float64 only): the reader gives them back in that dtype. An
/// ordinary key to the table (a column like any other); never an attribute.
pub const VALUES_DTYPE_KEY: &str = "_values_dtype_";
/// Descriptor `params` that belong to the codec pipeline (encoding, not attributes).
pub const CODEC_PARAM_PREFIXES: [&str; 8] = ["sp_", "szip_", "zstd_", "lz4_", "blosc2_", "zfp_", "sz3_", "shuffle_"];

fn is_codec_param(key: &str) -> bool {
    CODEC_PARAM_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// One key over the rows: `values[codes[i]]` is row `i`'s value, `-1` where it lacks the key.
/// Values are distinct as encoded (`1` and `1.0` are two values).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    #[serde(with = "stored::packed")]
    pub codes: Vec<i32>,
    pub values: Vec<Value>,
}

impl Column {
    /// Row `row`'s value, `None` where it has none.
    pub fn get(&self, row: usize) -> Option<&Value> {
        usize::try_from(self.codes[row]).ok().map(|c| &self.values[c])
    }
}

/// Many keys over the rows, kept by entry: `(rows[e], key[e], code[e])` says that row
/// `rows[e]` has value `values[value_starts[key[e]] + code[e]]` for key `keys[key[e]]`; entries
/// run key by key, each key's rows in order, and each key's distinct values are one run of
/// `values`. Only the rows that have a key take room, so a file whose messages each bring keys of
/// their own costs its entries, not keys x rows (a dense column per key aborted at 3,000 messages
/// x 100 keys of their own), and nothing is allocated per key but its name.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyColumns {
    pub keys: Vec<String>,
    /// Every key's distinct values, as encoded (`1` and `1.0` are two values), key by key.
    pub values: Vec<Value>,
    /// Key `k`'s values are `values[value_starts[k]..value_starts[k + 1]]`.
    #[serde(with = "stored::packed")]
    pub value_starts: Vec<u32>,
    #[serde(with = "stored::packed")]
    pub rows: Vec<u32>,
    #[serde(with = "stored::packed")]
    pub key: Vec<u32>,
    #[serde(with = "stored::packed")]
    pub code: Vec<u32>,
}

impl KeyColumns {
    /// Key `k`'s distinct values.
    pub fn values_of(&self, k: usize) -> &[Value] {
        &self.values[self.value_starts[k] as usize..self.value_starts[k + 1] as usize]
    }

    /// Each key with its entries' `(row, value)`, rows in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Vec<(usize, &Value)>)> + '_ {
        let mut first = 0;
        self.keys.iter().enumerate().map(move |(k, name)| {
            let end = first + self.key[first..].iter().take_while(|&&key| key as usize == k).count();
            let values = self.values_of(k);
            let entries = (first..end).map(|e| (self.rows[e] as usize, &values[self.code[e] as usize])).collect();
            first = end;
            (name.as_str(), entries)
        })
    }
}

columns! {
    /// Every object (rows, in message then object order) and every message of a file. Its
    /// columns are named here only: the binding and the index take them from
    /// [`Table::columns`] and [`Table::to_bytes`].
    pub struct Table {
        // per object
        #[serde(with = "stored::packed")]
        msg: Vec<i64>, Objects;
        #[serde(with = "stored::packed")]
        obj: Vec<i64>, Objects;
        /// Index into `shapes`.
        #[serde(with = "stored::packed")]
        shape: Vec<i32>, Objects;
        shapes: Vec<Vec<u64>>, Kinds;
        /// Index into `descriptors`: objects whose descriptors agree but for `params`.
        #[serde(with = "stored::packed")]
        descriptor: Vec<i32>, Objects;
        /// One descriptor per kind of object, without `params`.
        descriptors: Vec<DataObjectDescriptor>, Kinds;
        /// The object's `base` entry flattened, then its descriptor's non-codec `params`.
        own: KeyColumns, Objects;
        codec_params: KeyColumns, Objects;
        own_dim_names: Column, Objects;
        #[serde(with = "stored::packed")]
        frame_hash: Vec<u64>, Objects;
        #[serde(with = "stored::packed")]
        has_frame_hash: Vec<bool>, Objects;
        /// Byte ranges from the start of the file.
        #[serde(with = "stored::packed")]
        frame_start: Vec<i64>, Objects;
        #[serde(with = "stored::packed")]
        frame_end: Vec<i64>, Objects;
        #[serde(with = "stored::packed")]
        payload_start: Vec<i64>, Objects;
        #[serde(with = "stored::packed")]
        payload_end: Vec<i64>, Objects;
        // per message
        extra: KeyColumns, Messages;
        extra_dim_names: Column, Messages;
        coordinate_attrs: Column, Messages;
        #[serde(with = "stored::packed")]
        message_offset: Vec<i64>, Messages;
        #[serde(with = "stored::packed")]
        message_length: Vec<i64>, Messages;
    }
}

impl Table {
    /// The columns a file's byte ranges are read by (frames, descriptors, hashes, message spans),
    /// its metadata left out: what a remote file keeps of its index's table.
    pub fn layout(&self) -> Table {
        Table {
            n_messages: self.n_messages,
            msg: self.msg.clone(),
            frame_start: self.frame_start.clone(),
            frame_end: self.frame_end.clone(),
            descriptor: self.descriptor.clone(),
            descriptors: self.descriptors.clone(),
            frame_hash: self.frame_hash.clone(),
            has_frame_hash: self.has_frame_hash.clone(),
            message_offset: self.message_offset.clone(),
            message_length: self.message_length.clone(),
            ..Table::default()
        }
    }
}

/// Builds the table of `messages`, each `(offset in the file, the message's bytes)`;
/// `where_(i)` names message `i` in an error.
pub fn scan<'a>(messages: impl IntoIterator<Item = (usize, &'a [u8])>, where_: impl Fn(usize) -> String) -> CoreResult<Table> {
    let mut builder = Builder::default();
    for (index, (offset, bytes)) in messages.into_iter().enumerate() {
        builder.message(offset, bytes).map_err(|e| e.context(&where_(index)))?;
    }
    Ok(builder.finish())
}

/// One table of several files' tables, in the order given, as one `scan` over their messages
/// would build it but for the order of each column's values: messages are numbered on from one
/// table to the next; byte ranges stay within each table's own file.
pub fn concat(tables: &[&Table]) -> Table {
    let mut builder = Builder::default();
    tables.iter().for_each(|t| builder.append(t));
    builder.finish()
}

/// Codes and distinct values of one column while the table is built, rows given in order.
/// Values are told apart by their CBOR bytes, and decoded once each.
#[derive(Default)]
struct Interned {
    rows: Vec<(u32, u32)>,
    values: Vec<Value>,
    raws: Vec<Vec<u8>>,
    by_hash: HashMap<u64, Vec<u32>>,
    hasher: RandomState,
}

impl Interned {
    fn code(&mut self, raw: &[u8]) -> CoreResult<u32> {
        match self.find(raw) {
            Some(code) => Ok(code),
            None => Ok(self.insert(raw, cbor::decode(raw)?)),
        }
    }

    /// The code of `value`, a value of another table's column.
    fn code_of(&mut self, value: &Value) -> u32 {
        let raw = cbor::encode(value);
        self.find(&raw).unwrap_or_else(|| self.insert(&raw, value.clone()))
    }

    fn find(&self, raw: &[u8]) -> Option<u32> {
        let candidates = self.by_hash.get(&self.hasher.hash_one(raw))?;
        candidates.iter().copied().find(|&c| self.raws[c as usize] == raw)
    }

    fn insert(&mut self, raw: &[u8], value: Value) -> u32 {
        let code = self.values.len() as u32;
        self.values.push(value);
        self.raws.push(raw.to_vec());
        self.by_hash.entry(self.hasher.hash_one(raw)).or_default().push(code);
        code
    }

    /// Adds `column`'s rows as rows `first_row..` (after every row set so far).
    fn append_column(&mut self, column: &Column, first_row: usize) {
        let codes: Vec<u32> = column.values.iter().map(|v| self.code_of(v)).collect();
        for (row, &code) in column.codes.iter().enumerate() {
            if let Ok(code) = usize::try_from(code) {
                self.set(first_row + row, codes[code]);
            }
        }
    }

    /// Sets `row`'s value; a later value for the same row replaces the earlier one, as a later
    /// duplicate key does in a Python dict.
    fn set(&mut self, row: usize, code: u32) {
        match self.rows.last_mut() {
            Some(last) if last.0 as usize == row => last.1 = code,
            _ => self.rows.push((row as u32, code)),
        }
    }

    fn column(self, n: usize) -> Column {
        let mut codes = vec![-1i32; n];
        for (row, code) in self.rows {
            codes[row as usize] = code as i32;
        }
        Column { codes, values: self.values }
    }
}

/// Keys by dotted name (numbered in order of first appearance), their distinct values and the
/// rows that have them, while the table is built. One hash table and one byte buffer serve every
/// key, so a key costs its name and its values: files whose messages each bring keys of their own
/// have hundreds of thousands. Values are told apart by their CBOR bytes, and decoded once each.
#[derive(Default)]
struct Columns {
    ids: HashMap<String, u32>,
    /// Every distinct value, in order of first appearance: `(key, code, value, its bytes in raw)`.
    values: Vec<(u32, u32, Value, Range<usize>)>,
    raw: Vec<u8>,
    /// `(key, hash of the bytes)` -> the value's place in `values`, and the rare further places
    /// of a colliding hash.
    places: HashMap<(u32, u64), u32>,
    collisions: HashMap<(u32, u64), Vec<u32>>,
    hasher: RandomState,
    /// `(row, key, code)` in the order set; per key, its number of values and last entry (row, index).
    entries: Vec<(u32, u32, u32)>,
    counts: Vec<u32>,
    last: Vec<Option<(u32, usize)>>,
}

impl Columns {
    fn id(&mut self, key: &str) -> usize {
        if let Some(&id) = self.ids.get(key) {
            return id as usize;
        }
        let id = self.counts.len();
        self.ids.insert(key.to_owned(), id as u32);
        self.counts.push(0);
        self.last.push(None);
        id
    }

    /// `(column, code)` of a value under `key`.
    fn leaf(&mut self, key: &str, raw: &[u8]) -> CoreResult<(usize, u32)> {
        let id = self.id(key);
        match self.find(id, raw) {
            Some(code) => Ok((id, code)),
            None => Ok((id, self.insert(id, raw, cbor::decode(raw)?))),
        }
    }

    fn find(&self, id: usize, raw: &[u8]) -> Option<u32> {
        let at = (id as u32, self.hasher.hash_one(raw));
        let same = |&place: &u32| {
            let (_, code, _, bytes) = &self.values[place as usize];
            (self.raw[bytes.clone()] == *raw).then_some(*code)
        };
        let first = self.places.get(&at)?;
        same(first).or_else(|| self.collisions.get(&at)?.iter().find_map(same))
    }

    fn insert(&mut self, id: usize, raw: &[u8], value: Value) -> u32 {
        let code = self.counts[id];
        self.counts[id] += 1;
        let place = self.values.len() as u32;
        let bytes = self.raw.len()..self.raw.len() + raw.len();
        self.raw.extend_from_slice(raw);
        self.values.push((id as u32, code, value, bytes));
        let at = (id as u32, self.hasher.hash_one(raw));
        if let Some(first) = self.places.insert(at, place) {
            self.places.insert(at, first);
            self.collisions.entry(at).or_default().push(place);
        }
        code
    }

    /// The code of `value` (a value of another table's column) under key `id`.
    fn code_of(&mut self, id: usize, value: &Value) -> u32 {
        let raw = cbor::encode(value);
        self.find(id, &raw).unwrap_or_else(|| self.insert(id, &raw, value.clone()))
    }

    /// Sets `row`'s value of key `id`; a later value for the same row replaces the earlier one,
    /// as a later duplicate key does in a Python dict. Each key's rows come in order.
    fn set(&mut self, row: usize, id: usize, code: u32) {
        match self.last[id] {
            Some((last, entry)) if last as usize == row => self.entries[entry].2 = code,
            _ => {
                self.last[id] = Some((row as u32, self.entries.len()));
                self.entries.push((row as u32, id as u32, code));
            }
        }
    }

    fn has(&self, row: usize, id: usize) -> bool {
        self.last[id].is_some_and(|(last, _)| last as usize == row)
    }

    /// Entries and values regrouped key by key, by counting (linear in the entries and values:
    /// a sort of hundreds of thousands of entries cost more than the scan).
    fn finish(self) -> KeyColumns {
        let mut keys = vec![String::new(); self.counts.len()];
        for (name, id) in self.ids {
            keys[id as usize] = name;
        }
        let value_starts = starts(self.counts.iter().copied());
        let mut values: Vec<Option<Value>> = vec![None; self.values.len()];
        for (key, code, value, _) in self.values {
            values[(value_starts[key as usize] + code) as usize] = Some(value);
        }
        let mut per_key = vec![0u32; keys.len()];
        self.entries.iter().for_each(|&(_, key, _)| per_key[key as usize] += 1);
        let mut next = starts(per_key.into_iter());
        let (mut rows, mut key, mut code) = (vec![0; self.entries.len()], vec![0; self.entries.len()], vec![0; self.entries.len()]);
        for (row, k, c) in self.entries {
            let e = next[k as usize] as usize;
            next[k as usize] += 1;
            (rows[e], key[e], code[e]) = (row, k, c);
        }
        KeyColumns { keys, values: values.into_iter().flatten().collect(), value_starts, rows, key, code }
    }

    /// Adds another table's `columns`, its rows numbered from `first_row` (after every row set so far).
    fn append(&mut self, columns: &KeyColumns, first_row: usize) {
        let ids: Vec<usize> = columns.keys.iter().map(|k| self.id(k)).collect();
        let codes: Vec<Vec<u32>> =
            ids.iter().enumerate().map(|(k, &id)| columns.values_of(k).iter().map(|v| self.code_of(id, v)).collect()).collect();
        for e in 0..columns.key.len() {
            let k = columns.key[e] as usize;
            self.set(first_row + columns.rows[e] as usize, ids[k], codes[k][columns.code[e] as usize]);
        }
    }
}

/// `[0, c0, c0 + c1, ...]`: where each of the runs of these lengths starts, and the end.
fn starts(counts: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut at = 0;
    std::iter::once(0).chain(counts.map(|c| { at += c; at })).collect()
}

/// Flattened metadata leaves: `(column, code)`.
type Leaves = Vec<(usize, u32)>;

/// A descriptor seen before, and what its `params` contribute to an object's columns.
struct KnownDescriptor {
    index: i32,
    shape: i32,
    own: Leaves,
    codec: Leaves,
}

/// One message's metadata frame, flattened.
#[derive(Default)]
struct MessageMeta {
    base: Vec<Leaves>,
    base_dim_names: Vec<Option<u32>>,
    extra: Leaves,
    extra_dim_names: Option<u32>,
    coordinate_attrs: Option<u32>,
}

/// One data object of a message known by its parts rather than its bytes: a remote message read
/// by its header, whose frames' places come from its index and whose descriptors and hashes come
/// from the frames' ends (`remote_walk::Describe`).
pub struct ObjectParts<'a> {
    /// The descriptor, parsed from `cbor`, its CBOR as the frame stores it.
    pub descriptor: &'a DataObjectDescriptor,
    pub cbor: &'a [u8],
    /// Byte ranges from the start of the file.
    pub frame: Range<usize>,
    pub payload: Range<usize>,
    /// The frame's inline hash, if it has one.
    pub hash: Option<u64>,
}

/// A table built message by message: from the messages' bytes (`message`), from their parts
/// (`parts`) or from another table's rows (`append`), one row-building path for all three.
#[derive(Default)]
pub struct Builder {
    table: Table,
    shapes: HashMap<Vec<u64>, i32>,
    descriptors: HashMap<Vec<u8>, Rc<KnownDescriptor>>,
    /// `table.descriptors` by their summary.
    summaries: HashMap<String, i32>,
    own: Columns,
    codec_params: Columns,
    own_dim_names: Interned,
    extra: Columns,
    extra_dim_names: Interned,
    coordinate_attrs: Interned,
}

impl Builder {
    /// Adds the message in `bytes`, which starts `offset` bytes into its file: walked here where
    /// it has the common layout, else read through the `tensogram` crate (which also says what
    /// is wrong with a damaged one).
    pub fn message(&mut self, offset: usize, bytes: &[u8]) -> CoreResult<()> {
        let Some((layout, metadata)) = walk::layout(bytes).and_then(|l| l.metadata(bytes).map(|m| (l, m))) else {
            return self.add_decoded(offset, bytes);
        };
        let meta = self.message_metadata(metadata, layout.objects.len())?;
        let msg = self.table.n_messages;
        for (obj, walked) in layout.objects.iter().enumerate() {
            let (range, frame) = (walked.range.clone(), &bytes[walked.range.clone()]);
            let (desc, payload) = self.descriptor(frame, &walked.header).map_err(|e| e.context(&format!("object {obj}")))?;
            let payload = range.start + payload.start..range.start + payload.end;
            self.object(msg, obj, &meta, desc, offset, range, payload, inline_hash(frame));
        }
        self.finish_message(msg, offset, bytes.len(), &meta);
        Ok(())
    }

    /// Adds the message of `length` bytes at `offset` in its file from its parts: its metadata
    /// frame's CBOR and its objects, with the rules `message` applies to its bytes.
    pub fn parts(&mut self, offset: usize, length: usize, metadata: &[u8], objects: &[ObjectParts]) -> CoreResult<()> {
        let meta = self.message_metadata(metadata, objects.len())?;
        let msg = self.table.n_messages;
        for (obj, o) in objects.iter().enumerate() {
            // A descriptor with masks is never found by `descriptor`, whose payload ranges have none.
            let key = if o.descriptor.masks.is_some() { [b"masked:".as_slice(), o.cbor].concat() } else { descriptor_key(o.cbor) };
            let known = self.known(o.descriptor, &key).map_err(|e| e.context(&format!("object {obj}")))?;
            self.object(msg, obj, &meta, known, 0, o.frame.clone(), o.payload.clone(), o.hash);
        }
        self.finish_message(msg, offset, length, &meta);
        Ok(())
    }

    /// Adds the rows of `t`, another table's, after those added so far: its messages numbered on,
    /// its byte ranges kept (they are in its own file).
    pub fn append(&mut self, t: &Table) {
        let (first_row, first_msg) = (self.table.msg.len(), self.table.n_messages);
        let shapes: Vec<i32> = t.shapes.iter().map(|s| self.shape_code(s)).collect();
        let descriptors: Vec<i32> = t.descriptors.iter().map(|d| self.descriptor_code(d)).collect();
        let out = &mut self.table;
        out.n_messages += t.n_messages;
        out.msg.extend(t.msg.iter().map(|m| m + first_msg as i64));
        out.obj.extend(&t.obj);
        out.shape.extend(t.shape.iter().map(|&s| shapes[s as usize]));
        out.descriptor.extend(t.descriptor.iter().map(|&d| descriptors[d as usize]));
        out.frame_hash.extend(&t.frame_hash);
        out.has_frame_hash.extend(&t.has_frame_hash);
        for (to, from) in [
            (&mut out.frame_start, &t.frame_start),
            (&mut out.frame_end, &t.frame_end),
            (&mut out.payload_start, &t.payload_start),
            (&mut out.payload_end, &t.payload_end),
            (&mut out.message_offset, &t.message_offset),
            (&mut out.message_length, &t.message_length),
        ] {
            to.extend(from);
        }
        self.own.append(&t.own, first_row);
        self.codec_params.append(&t.codec_params, first_row);
        self.own_dim_names.append_column(&t.own_dim_names, first_row);
        self.extra.append(&t.extra, first_msg);
        self.extra_dim_names.append_column(&t.extra_dim_names, first_msg);
        self.coordinate_attrs.append_column(&t.coordinate_attrs, first_msg);
    }

    /// A message read through `tensogram::framing::decode_message` (preceder frames merged into
    /// `base`); its metadata is encoded again so that one flattening serves every message.
    fn add_decoded(&mut self, offset: usize, bytes: &[u8]) -> CoreResult<()> {
        let decoded = tensogram::framing::decode_message(bytes).map_err(|e| CoreError::format(format!("cannot parse message frames: {e}")))?;
        let cbor = tensogram::metadata::global_metadata_to_cbor(&decoded.global_metadata).map_err(|e| CoreError::from_tensogram(&e, "cannot encode the metadata again"))?;
        let meta = self.metadata(&cbor)?;
        let msg = self.table.n_messages;
        for (obj, (desc, payload, _, frame_offset)) in decoded.objects.iter().enumerate() {
            let frame = frames::frame_range(bytes, *frame_offset).map_err(|e| e.context(&format!("object {obj}")))?;
            let payload_start = payload.as_ptr() as usize - bytes.as_ptr() as usize;
            let known = self.known(desc, &tensogram::metadata::object_descriptor_to_cbor(desc).map_err(|e| CoreError::from_tensogram(&e, "cannot encode the descriptor again"))?)?;
            self.object(msg, obj, &meta, known, offset, frame.clone(), payload_start..payload_start + payload.len(), inline_hash(&bytes[frame]));
        }
        self.finish_message(msg, offset, bytes.len(), &meta);
        Ok(())
    }

    /// The descriptor of a data-object frame and its payload range in the frame: parsed the
    /// first time these descriptor bytes are seen (and the payload range checked against the
    /// parse's), remembered after (`descriptor_key`).
    fn descriptor(&mut self, frame: &[u8], header: &FrameHeader) -> CoreResult<(Rc<KnownDescriptor>, Range<usize>)> {
        let located = walk::locate(frame, header).ok();
        let key = located.as_ref().map(|(cbor, _)| descriptor_key(&frame[cbor.clone()]));
        if let (Some((_, payload)), Some(known)) = (&located, key.as_ref().and_then(|k| self.descriptors.get(k))) {
            return Ok((known.clone(), payload.clone()));
        }
        let (desc, payload) = match walk::frame(frame) {
            Some(walked) => (walked.descriptor, walked.payload),
            None => {
                let (desc, payload, _, _) = tensogram::framing::decode_data_object_frame(frame).map_err(|e| CoreError::from_tensogram(&e, "cannot parse the object frame"))?;
                let at = payload.as_ptr() as usize - frame.as_ptr() as usize;
                (desc, at..at + payload.len())
            }
        };
        let cacheable = desc.masks.is_none() && located.as_ref().is_some_and(|(_, p)| *p == payload);
        let key = match key {
            Some(key) if cacheable => key,
            // Not the common layout: keyed by its own encoding, never found by `locate`.
            _ => [b"decoded:".as_slice(), &tensogram::metadata::object_descriptor_to_cbor(&desc).map_err(|e| CoreError::from_tensogram(&e, "cannot encode the descriptor again"))?].concat(),
        };
        Ok((self.known(&desc, &key)?, payload))
    }

    /// Interns a descriptor: its index, shape and the leaves its `params` add to an object.
    fn known(&mut self, desc: &DataObjectDescriptor, key: &[u8]) -> CoreResult<Rc<KnownDescriptor>> {
        if !self.descriptors.contains_key(key) {
            let index = self.descriptor_code(desc);
            let shape = self.shape_code(&desc.shape);
            let (mut own, mut codec) = (Leaves::new(), Leaves::new());
            for (key, value) in &desc.params {
                // The szip offset table and its verification mark: internal indexes, not settings.
                if key.starts_with(szip::OFFSETS_KEY) {
                    continue;
                }
                let raw = cbor::encode(value);
                if is_codec_param(key) {
                    codec.push(self.codec_params.leaf(key, &raw)?);
                } else {
                    flatten(&mut self.own, key, &mut Walker::new(&raw), &mut own)?;
                }
            }
            self.descriptors.insert(key.to_vec(), Rc::new(KnownDescriptor { index, shape, own, codec }));
        }
        Ok(self.descriptors[key].clone())
    }

    /// The index in `table.descriptors` of the descriptors that agree with `desc` but for `params`
    /// (looked up by summary: an open is linear in the number of distinct shapes).
    fn descriptor_code(&mut self, desc: &DataObjectDescriptor) -> i32 {
        let next = self.table.descriptors.len() as i32;
        let code = *self.summaries.entry(descriptor_summary(desc)).or_insert(next);
        if code == next {
            // Without `params`: they differ object by object (the columns hold each one's).
            self.table.descriptors.push(DataObjectDescriptor { params: Default::default(), ..desc.clone() });
        }
        code
    }

    /// The index of `shape` in `table.shapes`.
    fn shape_code(&mut self, shape: &[u64]) -> i32 {
        if let Some(&code) = self.shapes.get(shape) {
            return code;
        }
        let code = self.table.shapes.len() as i32;
        self.table.shapes.push(shape.to_vec());
        self.shapes.insert(shape.to_vec(), code);
        code
    }

    /// `metadata` flattened, for a message of `objects` objects (upstream refuses more `base`
    /// entries than objects).
    fn message_metadata(&mut self, metadata: &[u8], objects: usize) -> CoreResult<MessageMeta> {
        let meta = self.metadata(metadata)?;
        if meta.base.len() > objects {
            return Err(CoreError::format(format!("metadata base has {} entries but message contains {objects} objects", meta.base.len())));
        }
        Ok(meta)
    }

    /// Flattens a metadata frame's CBOR map (`tensogram::metadata::cbor_to_global_metadata`'s
    /// rules: free-form top-level keys belong to `_extra_`, and may not repeat one of its keys;
    /// of a repeated top-level key, the last one counts).
    fn metadata(&mut self, cbor: &[u8]) -> CoreResult<MessageMeta> {
        let bad = |e: CoreError| e.context("bad metadata frame");
        let last = last_of_each_key(cbor).map_err(bad)?;
        let mut meta = MessageMeta::default();
        let (mut extra_keys, mut free_keys) = (Vec::new(), Vec::new());
        let mut walker = Walker::new(cbor);
        let mut entry = 0;
        let is_map = walker
            .map_entries(|w| {
                let Some(key) = w.text()? else {
                    return Err(CoreError::format("global metadata has a non-text top-level key"));
                };
                entry += 1;
                if last.get(key) != Some(&entry) {
                    return w.item().map(drop); // repeated later: that one counts
                }
                match key {
                    "base" => {
                        let is_array = w.array_items(|w| {
                            let mut leaves = Leaves::new();
                            let mut dim_names = None;
                            let is_map = w.map_entries(|w| {
                                let key = w.text()?.ok_or_else(|| CoreError::format("a base entry has a non-text key"))?;
                                match key {
                                    DIM_NAMES_KEY => dim_names = Some(self.own_dim_names.code(w.item()?)?),
                                    RESERVED_KEY | COORDINATE_ATTRS_KEY => drop(w.item()?),
                                    _ => flatten(&mut self.own, key, w, &mut leaves)?,
                                }
                                Ok(())
                            })?;
                            if !is_map {
                                return Err(CoreError::format("a base entry is not a map"));
                            }
                            meta.base.push(leaves);
                            meta.base_dim_names.push(dim_names);
                            Ok(())
                        })?;
                        if !is_array {
                            return Err(CoreError::format("base is not an array"));
                        }
                    }
                    RESERVED_KEY => drop(w.item()?),
                    "_extra_" => {
                        let is_map = w.map_entries(|w| {
                            let key = w.text()?.ok_or_else(|| CoreError::format("_extra_ has a non-text key"))?;
                            extra_keys.push(key);
                            self.extra_entry(key, w, &mut meta)
                        })?;
                        if !is_map {
                            return Err(CoreError::format("_extra_ is not a map"));
                        }
                    }
                    _ => {
                        free_keys.push(key);
                        self.extra_entry(key, w, &mut meta)?
                    }
                }
                Ok(())
            })
            .map_err(bad)?;
        if !is_map {
            return Err(bad(CoreError::format("not a map")));
        }
        if let Some(key) = free_keys.iter().find(|k| extra_keys.contains(k)) {
            return Err(bad(CoreError::format(format!("ambiguous metadata: key {key:?} appears both at the top level and inside `_extra_`"))));
        }
        Ok(meta)
    }

    fn extra_entry(&mut self, key: &str, w: &mut Walker, meta: &mut MessageMeta) -> CoreResult<()> {
        match key {
            DIM_NAMES_KEY => meta.extra_dim_names = Some(self.extra_dim_names.code(w.item()?)?),
            COORDINATE_ATTRS_KEY => meta.coordinate_attrs = Some(self.coordinate_attrs.code(w.item()?)?),
            RESERVED_KEY => drop(w.item()?),
            _ => flatten(&mut self.extra, key, w, &mut meta.extra)?,
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn object(&mut self, msg: usize, obj: usize, meta: &MessageMeta, desc: Rc<KnownDescriptor>, offset: usize, frame: Range<usize>, payload: Range<usize>, hash: Option<u64>) {
        let row = self.table.msg.len();
        let t = &mut self.table;
        t.msg.push(msg as i64);
        t.obj.push(obj as i64);
        t.shape.push(desc.shape);
        t.descriptor.push(desc.index);
        t.frame_hash.push(hash.unwrap_or(0));
        t.has_frame_hash.push(hash.is_some());
        t.frame_start.push((offset + frame.start) as i64);
        t.frame_end.push((offset + frame.end) as i64);
        t.payload_start.push((offset + payload.start) as i64);
        t.payload_end.push((offset + payload.end) as i64);
        for &(column, code) in meta.base.get(obj).into_iter().flatten() {
            self.own.set(row, column, code);
        }
        if let Some(Some(code)) = meta.base_dim_names.get(obj) {
            self.own_dim_names.set(row, *code);
        }
        // Older converters put per-field keys in the params; the object's own metadata wins.
        for &(column, code) in &desc.own {
            if !self.own.has(row, column) {
                self.own.set(row, column, code);
            }
        }
        for &(column, code) in &desc.codec {
            self.codec_params.set(row, column, code);
        }
    }

    fn finish_message(&mut self, msg: usize, offset: usize, length: usize, meta: &MessageMeta) {
        for &(column, code) in &meta.extra {
            self.extra.set(msg, column, code);
        }
        if let Some(code) = meta.extra_dim_names {
            self.extra_dim_names.set(msg, code);
        }
        if let Some(code) = meta.coordinate_attrs {
            self.coordinate_attrs.set(msg, code);
        }
        self.table.message_offset.push(offset as i64);
        self.table.message_length.push(length as i64);
        self.table.n_messages += 1;
    }

    pub fn finish(self) -> Table {
        let (rows, messages) = (self.table.msg.len(), self.table.n_messages);
        Table {
            own: self.own.finish(),
            codec_params: self.codec_params.finish(),
            own_dim_names: self.own_dim_names.column(rows),
            extra: self.extra.finish(),
            extra_dim_names: self.extra_dim_names.column(messages),
            coordinate_attrs: self.coordinate_attrs.column(messages),
            ..self.table
        }
    }
}

/// The number (from 1) of the last entry of each text key of the CBOR map `cbor`: upstream
/// decodes the map into a `BTreeMap`, so a repeated key's last value replaces the earlier ones.
fn last_of_each_key(cbor: &[u8]) -> CoreResult<HashMap<&str, usize>> {
    let mut last = HashMap::default();
    let mut entry = 0;
    Walker::new(cbor).map_entries(|w| {
        entry += 1;
        match w.text()? {
            Some(key) => drop(last.insert(key, entry)),
            None => drop(w.item()?),
        }
        w.item().map(drop)
    })?;
    Ok(last)
}

/// What a descriptor is remembered by: its CBOR less any szip offsets table, which the table
/// does not keep (one entry per RSI block, different in every szip object: a key of them would
/// hold ~40 KB a 0.25-degree field, gigabytes over an archive).
fn descriptor_key(cbor: &[u8]) -> Vec<u8> {
    walk::split_offsets(cbor).map_or_else(|| cbor.to_vec(), |(rest, _)| rest)
}

/// What tells descriptors apart apart from their `params`.
fn descriptor_summary(d: &DataObjectDescriptor) -> String {
    let masks = d.masks.as_ref().map(|m| (m.nan.is_some(), m.pos_inf.is_some(), m.neg_inf.is_some()));
    format!(
        "{}|{}|{:?}|{:?}|{}|{:?}|{}|{}|{}|{:?}",
        d.obj_type, d.ndim, d.shape, d.strides, d.dtype, d.byte_order, d.encoding, d.filter, d.compression, masks
    )
}

/// Adds to `leaves` the `(column, code)` of every non-map value of the item at `w` under `key`
/// (dotted keys for nested maps), leaving out `_reserved_` entries at any depth.
fn flatten(columns: &mut Columns, key: &str, w: &mut Walker, leaves: &mut Leaves) -> CoreResult<()> {
    let mut name = key.to_owned();
    flatten_under(columns, &mut name, w, leaves, 0)
}

fn flatten_under(columns: &mut Columns, name: &mut String, w: &mut Walker, leaves: &mut Leaves, depth: usize) -> CoreResult<()> {
    if depth > cbor::MAX_DEPTH {
        return Err(CoreError::format(format!("metadata nested deeper than {}", cbor::MAX_DEPTH)));
    }
    let item = w.item()?;
    let mut inner = Walker::new(item);
    // Tags around a map are dropped, as the binding's conversion to Python drops them.
    inner.skip_tags()?;
    let is_map = inner.map_entries(|e| {
        let key = match e.text()? {
            Some(k) => k.to_owned(),
            None => key_text(&cbor::decode(e.item()?)?),
        };
        if key == RESERVED_KEY {
            return e.item().map(drop);
        }
        let length = name.len();
        name.push('.');
        name.push_str(&key);
        let result = flatten_under(columns, name, e, leaves, depth + 1);
        name.truncate(length);
        result
    })?;
    if !is_map {
        leaves.push(columns.leaf(name, item)?);
    }
    Ok(())
}

/// A map key as Python's `str()` shows the key the binding makes of it.
fn key_text(key: &Value) -> String {
    match key {
        Value::Tag(_, inner) => key_text(inner),
        Value::Text(s) => s.clone(),
        Value::Integer(i) => i128::from(*i).to_string(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::vector_descriptor;
    use std::collections::BTreeMap;
    use tensogram::{Dtype, EncodeOptions, GlobalMetadata};

    fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    fn map(entries: &[(&str, Value)]) -> Value {
        Value::Map(entries.iter().map(|(k, v)| (text(k), v.clone())).collect())
    }

    /// One message of a 2-element float32 field with MARS keys and `_extra_` entries.
    pub(super) fn message(step: i64, hashing: bool) -> Vec<u8> {
        let mut base = BTreeMap::new();
        base.insert("name".into(), text("t"));
        base.insert("mars".into(), map(&[("step", Value::Integer(step.into())), (RESERVED_KEY, text("x"))]));
        base.insert(DIM_NAMES_KEY.into(), Value::Array(vec![text("x")]));
        let mut extra = BTreeMap::new();
        extra.insert("centre".into(), text("ecmf"));
        extra.insert(DIM_NAMES_KEY.into(), Value::Array(vec![text("x")]));
        let meta = GlobalMetadata { base: vec![base], extra, ..Default::default() };
        let mut params = BTreeMap::new();
        params.insert("units".into(), text("K"));
        params.insert("name".into(), text("ignored: base names it"));
        let desc = vector_descriptor(2, Dtype::Float32, params);
        let data = [1f32.to_le_bytes(), 2f32.to_le_bytes()].concat();
        let options = EncodeOptions { hashing, ..Default::default() };
        tensogram::encode(&meta, &[(&desc, &data)], &options).expect("encodes")
    }

    #[test]
    fn flattens_metadata_into_columns() {
        let (a, b) = (message(0, true), message(6, false));
        let file = [a.clone(), b.clone()].concat();
        let table = scan([(0, &file[..a.len()]), (a.len(), &file[a.len()..])], |m| format!("message {m}")).expect("scans");
        assert_eq!((table.n_messages, table.msg.clone(), table.obj.clone()), (2, vec![0, 1], vec![0, 0]));
        let own: BTreeMap<_, _> = table.own.iter().collect();
        assert_eq!(own.keys().copied().collect::<Vec<_>>(), ["mars.step", "name", "units"]);
        assert_eq!(own["mars.step"][1], (1, &Value::Integer(6.into())));
        // The object's own `name` wins over the descriptor param of that name.
        assert_eq!(own["name"], [(0, &text("t")), (1, &text("t"))]);
        assert_eq!(table.extra.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["centre"]);
        assert_eq!(table.extra_dim_names.get(1), Some(&Value::Array(vec![text("x")])));
        assert_eq!(table.own_dim_names.codes, vec![0, 0]);
        assert_eq!((table.shapes.clone(), table.shape.clone(), table.descriptor.clone()), (vec![vec![2]], vec![0, 0], vec![0, 0]));
        assert_eq!(table.has_frame_hash, vec![true, false]);
        // Byte ranges are in the file: the payload holds the values.
        let (start, end) = (table.payload_start[1] as usize, table.payload_end[1] as usize);
        assert_eq!(&file[start..end], &[1f32.to_le_bytes(), 2f32.to_le_bytes()].concat()[..]);
        assert_eq!((table.message_offset.clone(), table.message_length[1] as usize), (vec![0, a.len() as i64], b.len()));
    }

    /// Every row's value of every column, by key.
    fn by_row(columns: &KeyColumns) -> BTreeMap<String, Vec<(usize, Value)>> {
        columns.iter().map(|(k, entries)| (k.to_owned(), entries.into_iter().map(|(r, v)| (r, v.clone())).collect())).collect()
    }

    #[test]
    fn concatenated_tables_hold_what_one_scan_of_their_messages_holds() {
        let (a, b, c) = (message(0, true), message(6, false), message(12, true));
        let first = scan([(0, &a[..]), (a.len(), &b[..])], |m| format!("message {m}")).expect("scans");
        let second = scan([(0, &c[..])], |m| format!("message {m}")).expect("scans");
        // The second file's message starts at 0 of its own file, as in the concatenation.
        let whole = scan([(0, &a[..]), (a.len(), &b[..]), (0, &c[..])], |m| format!("message {m}")).expect("scans");
        let joined = concat(&[&first, &second]);
        assert_eq!(joined.n_messages, 3);
        assert_eq!((&joined.msg, &joined.obj, &joined.shape, &joined.descriptor), (&whole.msg, &whole.obj, &whole.shape, &whole.descriptor));
        assert_eq!((&joined.shapes, joined.descriptors.len()), (&whole.shapes, whole.descriptors.len()));
        for (x, y) in [(&joined.frame_start, &whole.frame_start), (&joined.payload_end, &whole.payload_end), (&joined.message_offset, &whole.message_offset)] {
            assert_eq!(x, y);
        }
        assert_eq!((&joined.frame_hash, &joined.has_frame_hash), (&whole.frame_hash, &whole.has_frame_hash));
        assert_eq!(joined.msg.len(), whole.msg.len());
        assert_eq!(by_row(&joined.own), by_row(&whole.own));
        assert_eq!(by_row(&joined.codec_params), by_row(&whole.codec_params));
        assert_eq!(by_row(&joined.extra), by_row(&whole.extra));
        assert_eq!(joined.own_dim_names.codes, whole.own_dim_names.codes);
        assert_eq!(joined.extra_dim_names.values, whole.extra_dim_names.values);
        // Equal values share a code across the tables.
        let steps = joined.own.keys.iter().position(|k| k == "mars.step").expect("a step column");
        assert_eq!(joined.own.values_of(steps).len(), 3);
    }

    /// A message of one szip-compressed float32 vector (RSI blocks of 128 values).
    fn szip_message(values: &[f32]) -> Vec<u8> {
        let params = [("szip_rsi", 8), ("szip_block_size", 16), ("szip_flags", 8)]
            .iter()
            .map(|&(k, v)| (k.to_string(), Value::Integer(v.into())))
            .collect();
        let desc = DataObjectDescriptor { compression: "szip".into(), ..vector_descriptor(values.len() as u64, Dtype::Float32, params) };
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        tensogram::encode(&GlobalMetadata::default(), &[(&desc, &data)], &EncodeOptions::default()).expect("encodes")
    }

    #[test]
    fn szip_objects_alike_but_for_their_values_are_remembered_once() {
        let smooth: Vec<f32> = (0..1024).map(|i| i as f32).collect();
        let noisy: Vec<f32> = (0..1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as f32).collect();
        let (a, b) = (szip_message(&smooth), szip_message(&noisy));
        let mut builder = Builder::default();
        builder.message(0, &a).expect("scans");
        builder.message(a.len(), &b).expect("scans");
        let table = scan([(0, &a[..]), (a.len(), &b[..])], |m| format!("message {m}")).expect("scans");
        let offsets = |m: &[u8]| tensogram::framing::decode_message(m).unwrap().objects[0].0.params[szip::OFFSETS_KEY].clone();
        assert_ne!(offsets(&a), offsets(&b), "the offsets tables differ");
        // One key (the descriptor less its offsets table), not one per object.
        assert_eq!(builder.descriptors.len(), 1);
        assert_eq!((table.descriptor.clone(), table.descriptors.len()), (vec![0, 0], 1));
        assert!(table.descriptors[0].params.is_empty(), "the table keeps no object's params");
    }

    /// The table of `file`'s messages from their parts, as a remote reader gets them: each
    /// message's header (metadata frame, index), then its descriptors from the frames' ends.
    fn table_of_parts(file: &[u8]) -> Table {
        use crate::source::remote_walk::{indexed, Describe, Scan, Settings};
        let settings = Settings { first_block: 64, whole_message_max: 0, ..Settings::default() };
        let mut walk = Scan::new("file", file.len() as u64, settings);
        let bytes = |ranges: Vec<(u64, u64)>| ranges.iter().map(|&(a, b)| file[a as usize..b as usize].to_vec()).collect();
        while let Some(ranges) = walk.wanted().expect("wanted") {
            walk.feed(bytes(ranges)).expect("fed");
        }
        let mut builder = Builder::default();
        for found in walk.finish() {
            let header = indexed(&found).expect("read by its header");
            let frames: Vec<(u64, u64)> = header.frames.iter().map(|&(o, l)| (found.offset + o, l)).collect();
            let mut describe = Describe::new(frames.clone(), vec![(found.offset, 0); frames.len()], 64);
            while let Some(ranges) = describe.wanted().expect("wanted") {
                describe.feed(bytes(ranges)).expect("fed");
            }
            let described = describe.finish().expect("described");
            let objects: Vec<ObjectParts> = described
                .iter()
                .zip(&frames)
                .map(|(d, &(start, length))| ObjectParts {
                    descriptor: &d.descriptor,
                    cbor: &d.cbor,
                    frame: start as usize..(start + length) as usize,
                    payload: d.stored.start as usize..d.stored.end as usize,
                    hash: d.hash,
                })
                .collect();
            builder.parts(found.offset as usize, found.length as usize, &header.metadata_cbor, &objects).expect("tabled");
        }
        builder.finish()
    }

    #[test]
    fn a_message_known_by_its_parts_gives_the_rows_of_its_bytes() {
        let messages = [message(0, true), message(6, false), szip_message(&(0..1024).map(|i| i as f32).collect::<Vec<_>>())];
        let file = messages.concat();
        let mut offset = 0;
        let bytes = scan(messages.iter().map(|m| {
            offset += m.len();
            (offset - m.len(), &m[..])
        }), |m| format!("message {m}"))
        .expect("scans");
        let parts = table_of_parts(&file);
        assert_eq!((parts.n_messages, &parts.msg, &parts.obj), (3, &bytes.msg, &bytes.obj));
        assert_eq!((&parts.shapes, &parts.shape, &parts.descriptor), (&bytes.shapes, &bytes.shape, &bytes.descriptor));
        let summaries = |t: &Table| t.descriptors.iter().map(descriptor_summary).collect::<Vec<_>>();
        assert_eq!(summaries(&parts), summaries(&bytes));
        for (x, y) in [
            (&parts.frame_start, &bytes.frame_start),
            (&parts.frame_end, &bytes.frame_end),
            (&parts.payload_start, &bytes.payload_start),
            (&parts.payload_end, &bytes.payload_end),
            (&parts.message_offset, &bytes.message_offset),
            (&parts.message_length, &bytes.message_length),
        ] {
            assert_eq!(x, y);
        }
        assert_eq!((&parts.frame_hash, &parts.has_frame_hash), (&bytes.frame_hash, &bytes.has_frame_hash));
        assert_eq!(by_row(&parts.own), by_row(&bytes.own));
        assert_eq!(by_row(&parts.codec_params), by_row(&bytes.codec_params));
        assert_eq!(by_row(&parts.extra), by_row(&bytes.extra));
        for (x, y) in [(&parts.own_dim_names, &bytes.own_dim_names), (&parts.extra_dim_names, &bytes.extra_dim_names)] {
            assert_eq!(x, y);
        }
    }

    #[test]
    fn names_the_message_that_fails() {
        let a = message(0, true);
        let err = scan([(0, &a[..]), (a.len(), &a[..a.len() - 9])], |m| format!("message {m}")).expect_err("a truncated message");
        assert!(err.message.starts_with("message 1: "), "{}", err.message);
    }
}
