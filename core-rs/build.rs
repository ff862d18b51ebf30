//! Sets `TGM_TENSOGRAM_VERSION` (read by `tgm_core::TENSOGRAM_VERSION`) to the version of the
//! `tensogram` crate Cargo resolved, from the workspace's Cargo.lock: the crate exports no
//! version of its own.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("Cargo sets CARGO_MANIFEST_DIR"));
    let lock = manifest
        .ancestors()
        .map(|dir| dir.join("Cargo.lock"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("no Cargo.lock in {} or above: tgm-core builds in its workspace", manifest.display()));
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_else(|e| panic!("{}: {e}", lock.display()));
    let version = locked_version(&text, "tensogram")
        .unwrap_or_else(|| panic!("{}: no [[package]] named tensogram", lock.display()));
    println!("cargo:rustc-env=TGM_TENSOGRAM_VERSION={version}");
}

/// The `version` of the `[[package]]` entry named `name` in Cargo.lock's text.
fn locked_version<'a>(lock: &'a str, name: &str) -> Option<&'a str> {
    let quoted = |line: &'a str, key: &str| {
        let value = line.strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
        value.strip_prefix('"')?.strip_suffix('"')
    };
    lock.split("[[package]]").find_map(|entry| {
        let mut lines = entry.lines().map(str::trim);
        lines.clone().any(|line| quoted(line, "name") == Some(name)).then(|| lines.find_map(|line| quoted(line, "version")))?
    })
}
