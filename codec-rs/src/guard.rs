//! Every call Python makes into the binding runs here: a panic (a bug of ours or of a library
//! below) becomes a `TgmError` naming the call, never PyO3's `PanicException`, a
//! `BaseException` that `except Exception` (and so dask, the CLI, a user's retry loop) misses.
//! Unwinding leaves nothing half-done that Python can see: the core's caches are `OnceLock`s
//! (filled whole or not at all) and reads write only into the caller's array, whose values are
//! then undefined, as after any failed read.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use pyo3::prelude::*;
use tgm_core::errors::{CoreError, Kind};

use crate::exceptions::Raised;

/// `TGM_XARRAY_PANIC_IN`, read once at import: names of calls (`FileHandle.read,encode_message`)
/// that panic on entry, so that the tests can show each call's guard at work.
static PANIC_IN: OnceLock<Option<String>> = OnceLock::new();

/// Reads `TGM_XARRAY_PANIC_IN` (at import, before any call).
pub fn init() {
    PANIC_IN.get_or_init(|| std::env::var("TGM_XARRAY_PANIC_IN").ok());
}

/// Runs the body of Python call `call`, a panic in it raised as a `TgmError`.
pub fn guarded<T>(call: &'static str, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(|| {
        if PANIC_IN.get().is_some_and(|names| names.as_deref().is_some_and(|n| n.split(',').any(|n| n == call))) {
            panic!("TGM_XARRAY_PANIC_IN={call}");
        }
        body()
    }))
    .unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        Err(CoreError::new(
            Kind::Internal,
            format!("internal error in tgm_xarray._core.{call}: {what} (a bug: please report it with the file)"),
        )
        .raised())
    })
}
