//! Bytes that do not start as a Tensogram message does: the one error for them, which names the
//! format they do start as, where it is one users meet beside Tensogram, and what opens it.

use tensogram::wire::MAGIC;

use crate::errors::CoreError;

/// The formats found in `.tgm` files by mistake: a leading signature, what it is, what to do.
const SIGNATURES: &[(&[u8], &str, &str)] = &[
    (
        b"GRIB",
        "GRIB",
        "open it with engine=\"cfgrib\" or convert it with `tgm-xarray convert`; earthkit-data's \
         to_target(\"file\", ...) writes GRIB fields as GRIB whatever the file's name: write .tgm with \
         to_target(\"tgm\", ...)",
    ),
    (b"\x89HDF\r\n\x1a\n", "HDF5 (NetCDF-4)", "open it with engine=\"h5netcdf\" or \"netcdf4\""),
    (b"CDF\x01", "NetCDF-3", "open it with engine=\"scipy\" or \"netcdf4\""),
    (b"CDF\x02", "NetCDF-3 (64-bit offsets)", "open it with engine=\"scipy\" or \"netcdf4\""),
    (b"CDF\x05", "NetCDF-3 (64-bit data)", "open it with engine=\"netcdf4\""),
    (b"\x1f\x8b", "gzip-compressed", "decompress it first"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it first"),
];

/// Whether `bytes` start as a Tensogram message does.
pub fn starts_as_tensogram(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The format error for a `what` ("file", "message") whose bytes start with `start` instead of
/// Tensogram's magic bytes.
pub fn not_tensogram(what: &str, start: &[u8]) -> CoreError {
    let known = SIGNATURES.iter().find(|(signature, ..)| start.starts_with(signature));
    CoreError::format(match known {
        Some((_, format, hint)) => format!("not a Tensogram {what}: it is {format} ({hint})"),
        None => format!("not a Tensogram {what} (it does not start with the magic bytes TENSOGRM)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_formats_are_named_with_what_opens_them() {
        let grib = not_tensogram("file", b"GRIB\x00\x00\x00\x02").message;
        assert!(grib.starts_with("not a Tensogram file: it is GRIB (open it with engine=\"cfgrib\""), "{grib}");
        assert!(grib.contains("to_target(\"tgm\", ...)"), "{grib}");
        assert!(not_tensogram("file", b"\x89HDF\r\n\x1a\n...").message.contains("HDF5 (NetCDF-4)"));
        assert!(not_tensogram("message", b"CDF\x01").message.starts_with("not a Tensogram message: it is NetCDF-3"));
        // A signature cut short is not that format.
        assert!(not_tensogram("file", b"GRI").message.ends_with("(it does not start with the magic bytes TENSOGRM)"));
        assert!(not_tensogram("file", b"").message.contains("magic bytes"));
        assert!(starts_as_tensogram(MAGIC) && !starts_as_tensogram(b"GRIB"));
    }
}
