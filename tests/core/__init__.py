"""Tests of the Rust core as the extension module `tgm_xarray._core` shows it (codec-rs, core-rs):
dtypes, errors, limits, panics, the memory pool, the metadata table, szip, hostile and fuzzed
payloads, threads."""
