//! The table's columns by name: [`Table::columns`], generated with the struct from one list
//! (`columns!`), so that a column is added in one place and every form of the table (the
//! binding's views, the stored bytes, their check) follows.

use tensogram::DataObjectDescriptor;

use super::{Column, KeyColumns};

/// What a column has one entry of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// One per object (the table's rows).
    Objects,
    /// One per message.
    Messages,
    /// One per distinct value, which other columns point into.
    Kinds,
}

/// One column, borrowed from its table.
#[derive(Debug, Clone, Copy)]
pub enum Field<'a> {
    I64(&'a [i64]),
    I32(&'a [i32]),
    U64(&'a [u64]),
    Bool(&'a [bool]),
    Shapes(&'a [Vec<u64>]),
    Descriptors(&'a [DataObjectDescriptor]),
    Codes(&'a Column),
    Keys(&'a KeyColumns),
}

impl Field<'_> {
    /// How many entries it has: the rows a `Codes` column covers, none for `Keys` (whose
    /// entries are only the rows that have a key).
    pub fn entries(&self) -> Option<usize> {
        match self {
            Field::I64(v) => Some(v.len()),
            Field::I32(v) => Some(v.len()),
            Field::U64(v) => Some(v.len()),
            Field::Bool(v) => Some(v.len()),
            Field::Shapes(v) => Some(v.len()),
            Field::Descriptors(v) => Some(v.len()),
            Field::Codes(c) => Some(c.codes.len()),
            Field::Keys(_) => None,
        }
    }
}

/// A column's type, as a [`Field`].
pub trait AsField {
    fn as_field(&self) -> Field<'_>;
}

macro_rules! as_field {
    ($($ty:ty => $variant:ident),* $(,)?) => {
        $(impl AsField for $ty {
            fn as_field(&self) -> Field<'_> {
                Field::$variant(self)
            }
        })*
    };
}

as_field!(Vec<i64> => I64, Vec<i32> => I32, Vec<u64> => U64, Vec<bool> => Bool, Vec<Vec<u64>> => Shapes,
          Vec<DataObjectDescriptor> => Descriptors, Column => Codes, KeyColumns => Keys);

/// The `Table` struct (`n_messages` and the columns listed) and `Table::columns`, in the
/// order listed.
macro_rules! columns {
    ($(#[$doc:meta])* pub struct $table:ident {
        $( $(#[$field_doc:meta])* $name:ident: $ty:ty, $rows:ident; )*
    }) => {
        $(#[$doc])*
        #[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
        pub struct $table {
            pub n_messages: usize,
            $( $(#[$field_doc])* pub $name: $ty, )*
        }

        impl $table {
            /// Every column: its name, what it has one entry of, and its values.
            pub fn columns(&self) -> Vec<(&'static str, $crate::table::Rows, $crate::table::Field<'_>)> {
                use $crate::table::columns::AsField;
                vec![$( (stringify!($name), $crate::table::Rows::$rows, self.$name.as_field()), )*]
            }
        }
    };
}
