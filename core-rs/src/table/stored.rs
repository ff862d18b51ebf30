//! The table as bytes, for an index to keep (`Table::to_bytes`, `Table::from_bytes`), and the
//! check that what comes back is a table every reader of it may index without a bounds error.

use super::{Column, Field, KeyColumns, Rows, Table};
use crate::errors::{CoreError, CoreResult};

/// The stored form's version: bumped with every change of a column (its name, type or meaning),
/// so that a table stored by another version is refused, never misread.
pub const TABLE_FORMAT: u32 = 1;

const MAGIC: &[u8; 4] = b"TGMT";

impl Table {
    /// The table as bytes: `TGMT`, [`TABLE_FORMAT`] (little-endian u32), then the table's CBOR.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = [MAGIC.as_slice(), &TABLE_FORMAT.to_le_bytes()].concat();
        ciborium::into_writer(self, &mut out).expect("a table serialises into memory");
        out
    }

    /// The table `to_bytes` gave, checked ([`Table::check`]); a format error for bytes of
    /// another version or that are no consistent table.
    pub fn from_bytes(data: &[u8]) -> CoreResult<Table> {
        let (head, body) = data.split_at_checked(8).ok_or_else(|| CoreError::format("a stored table is cut short"))?;
        if &head[..4] != MAGIC {
            return Err(CoreError::format("not a stored table"));
        }
        let format = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
        if format != TABLE_FORMAT {
            return Err(CoreError::format(format!("a stored table of format {format}, not {TABLE_FORMAT}")));
        }
        let table: Table = ciborium::from_reader(body).map_err(|e| CoreError::format(format!("a stored table: {e}")))?;
        table.check()?;
        Ok(table)
    }

    /// Checks that every column has one entry per object or message and that every code points
    /// at a value: what the builder guarantees, for a table from elsewhere.
    pub fn check(&self) -> CoreResult<()> {
        let rows = self.msg.len();
        for (name, per, field) in self.columns() {
            let n = match per {
                Rows::Objects => rows,
                Rows::Messages => self.n_messages,
                Rows::Kinds => continue,
            };
            let bad = |why: String| CoreError::format(format!("a stored table's column {name}: {why}"));
            match field {
                Field::Keys(k) => check_keys(k, n).map_err(bad)?,
                Field::Codes(c) => check_codes(c, n).map_err(bad)?,
                _ if field.entries() != Some(n) => return Err(bad(format!("{} entries for {n}", field.entries().unwrap_or(0)))),
                _ => {}
            }
        }
        let in_range = |codes: &[i32], name: &str, kinds: usize| match codes.iter().find(|&&c| c < 0 || c as usize >= kinds) {
            Some(c) => Err(CoreError::format(format!("a stored table points at {name} {c} of {kinds}"))),
            None => Ok(()),
        };
        in_range(&self.shape, "shapes", self.shapes.len())?;
        in_range(&self.descriptor, "descriptors", self.descriptors.len())?;
        if self.msg.iter().any(|&m| m < 0 || m as usize >= self.n_messages) || self.msg.windows(2).any(|w| w[0] > w[1]) {
            return Err(CoreError::format("a stored table's messages are out of order or range"));
        }
        Ok(())
    }
}

fn check_codes(c: &Column, n: usize) -> Result<(), String> {
    if c.codes.len() != n {
        return Err(format!("{} entries for {n}", c.codes.len()));
    }
    match c.codes.iter().find(|&&code| code < -1 || code >= c.values.len() as i32) {
        Some(code) => Err(format!("code {code} of {} values", c.values.len())),
        None => Ok(()),
    }
}

fn check_keys(k: &KeyColumns, n: usize) -> Result<(), String> {
    let starts = &k.value_starts;
    if starts.len() != k.keys.len() + 1 || starts[0] != 0 || starts.windows(2).any(|w| w[0] > w[1])
        || *starts.last().expect("one start at least") as usize != k.values.len()
    {
        return Err("its values are not one run per key".into());
    }
    if k.rows.len() != k.key.len() || k.code.len() != k.key.len() {
        return Err("its entries' rows, keys and codes differ in number".into());
    }
    let entries = k.rows.iter().zip(&k.key).zip(&k.code);
    for ((&row, &key), &code) in entries {
        let key = key as usize;
        if row as usize >= n || key >= k.keys.len() || code >= starts[key + 1] - starts[key] {
            return Err(format!("an entry (row {row}, key {key}, code {code}) points past its {n} rows or its values"));
        }
    }
    if k.key.windows(2).any(|w| w[0] > w[1]) {
        return Err("its entries do not run key by key".into());
    }
    Ok(())
}

/// Numeric columns stored as one CBOR byte string each (little-endian values), not as arrays of
/// integers: a table of 10^5 rows reads back in a few milliseconds instead of ~80.
pub(super) mod packed {
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    pub trait Scalar: Copy {
        const SIZE: usize;
        fn put(self, out: &mut Vec<u8>);
        fn get(bytes: &[u8]) -> Self;
    }

    macro_rules! scalar {
        ($($ty:ty),*) => {$(
            impl Scalar for $ty {
                const SIZE: usize = std::mem::size_of::<$ty>();
                fn put(self, out: &mut Vec<u8>) {
                    out.extend_from_slice(&self.to_le_bytes());
                }
                fn get(bytes: &[u8]) -> Self {
                    <$ty>::from_le_bytes(bytes.try_into().expect("SIZE bytes"))
                }
            }
        )*};
    }
    scalar!(i64, i32, u64, u32);

    impl Scalar for bool {
        const SIZE: usize = 1;
        fn put(self, out: &mut Vec<u8>) {
            out.push(self as u8);
        }
        fn get(bytes: &[u8]) -> Self {
            bytes[0] != 0
        }
    }

    pub fn serialize<T: Scalar, S: Serializer>(values: &[T], s: S) -> Result<S::Ok, S::Error> {
        let mut out = Vec::with_capacity(values.len() * T::SIZE);
        values.iter().for_each(|v| v.put(&mut out));
        s.serialize_bytes(&out)
    }

    pub fn deserialize<'de, T: Scalar, D: Deserializer<'de>>(d: D) -> Result<Vec<T>, D::Error> {
        struct Values<T>(std::marker::PhantomData<T>);
        impl<T: Scalar> Visitor<'_> for Values<T> {
            type Value = Vec<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a byte string of {}-byte values", T::SIZE)
            }
            fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<Vec<T>, E> {
                if !bytes.len().is_multiple_of(T::SIZE) {
                    return Err(E::custom(format!("{} bytes are no whole number of {}-byte values", bytes.len(), T::SIZE)));
                }
                Ok(bytes.chunks_exact(T::SIZE).map(T::get).collect())
            }
            fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<Vec<T>, E> {
                self.visit_bytes(&bytes)
            }
        }
        // Not `deserialize_bytes`: ciborium gives those only up to its scratch buffer's size.
        d.deserialize_byte_buf(Values(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let message = crate::table::tests::message(6, true);
        crate::table::scan([(0, message.as_slice())], |m| format!("message {m}")).expect("scans")
    }

    #[test]
    fn a_table_comes_back_from_its_bytes_as_it_was() {
        let t = table();
        let back = Table::from_bytes(&t.to_bytes()).expect("reads back");
        assert_eq!(format!("{back:?}"), format!("{t:?}"));
    }

    #[test]
    fn another_format_or_cut_bytes_are_refused() {
        let bytes = table().to_bytes();
        let mut other = bytes.clone();
        other[4] ^= 0xff;
        assert!(Table::from_bytes(&other).unwrap_err().message.contains("format"));
        for cut in [0, 3, 8, bytes.len() - 1] {
            assert!(Table::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn an_inconsistent_table_is_refused() {
        let mut t = table();
        t.shape[0] = 7;
        assert!(Table::from_bytes(&t.to_bytes()).unwrap_err().message.contains("shapes 7"));
        let mut t = table();
        t.frame_end.pop();
        assert!(Table::from_bytes(&t.to_bytes()).unwrap_err().message.contains("frame_end"));
        let mut t = table();
        t.own.code[0] = 99;
        assert!(Table::from_bytes(&t.to_bytes()).unwrap_err().message.contains("column own"));
        let mut t = table();
        t.n_messages = 0;
        assert!(Table::from_bytes(&t.to_bytes()).is_err());
    }
}
