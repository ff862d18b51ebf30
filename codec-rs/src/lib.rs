//! The Rust core of tgm-xarray: mapped `.tgm` files, hyperslab reads and message encoding,
//! all running with the interpreter detached so that Python threads read in parallel.

use pyo3::prelude::*;

mod arrays;
mod buffers;
mod cbor;
mod codec;
mod exceptions;
mod file;
mod frames;
mod guard;
mod index;
mod read_into;
mod remote;
mod table;

use tgm_core::read::object::{BYTES_PER_PIECE, RELEASE_MIN_BYTES};
use tgm_core::{counters, wire::dtypes};

/// Big blocks are recycled (`buffers.rs`): fresh ones cost the kernel's page faults.
#[global_allocator]
static ALLOCATOR: buffers::Recycling = buffers::Recycling;

/// Elements produced by the decoders in this process so far.
#[pyfunction]
fn decoded_elements() -> PyResult<u64> {
    guard::guarded("decoded_elements", || Ok(counters::decoded()))
}

/// The most reads that have run at once since the last call, which resets the count (the first
/// call starts the counting and returns 0).
#[pyfunction]
fn take_max_concurrent_reads() -> PyResult<usize> {
    guard::guarded("take_max_concurrent_reads", || Ok(counters::take_max_in_flight()))
}

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    guard::init();
    exceptions::add_to(m)?;
    m.add_class::<file::FileHandle>()?;
    m.add_class::<table::PyTable>()?;
    m.add_class::<buffers::PooledBuffer>()?;
    remote::register(m)?;
    buffers::init(m.py())?;
    arrays::init(m.py());
    for f in [
        wrap_pyfunction!(buffers::py_empty, m)?,
        wrap_pyfunction!(buffers::buffer_pool, m)?,
        wrap_pyfunction!(codec::encode_message, m)?,
        wrap_pyfunction!(codec::decode_message_into, m)?,
        wrap_pyfunction!(codec::writable_szip_flags, m)?,
        wrap_pyfunction!(frames::parse_message, m)?,
        wrap_pyfunction!(frames::read_frame, m)?,
        wrap_pyfunction!(frames::frame_fingerprint, m)?,
        wrap_pyfunction!(frames::check_frame_hash, m)?,
        wrap_pyfunction!(table::table_of_files, m)?,
        wrap_pyfunction!(arrays::py_numpy_dtype, m)?,
        wrap_pyfunction!(arrays::decoded_bytes, m)?,
        wrap_pyfunction!(arrays::read_dtype, m)?,
        wrap_pyfunction!(index::outer_key, m)?,
        wrap_pyfunction!(table::table_of_bytes, m)?,
        wrap_pyfunction!(decoded_elements, m)?,
        wrap_pyfunction!(take_max_concurrent_reads, m)?,
    ] {
        m.add_function(f)?;
    }
    m.add("MAGIC", pyo3::types::PyBytes::new(m.py(), tensogram::wire::MAGIC))?;
    // The metadata keys the core's table treats apart, and the params that are the pipeline's.
    m.add("RESERVED_KEY", tgm_core::table::RESERVED_KEY)?;
    m.add("DIM_NAMES_KEY", tgm_core::table::DIM_NAMES_KEY)?;
    m.add("COORDINATE_ATTRS_KEY", tgm_core::table::COORDINATE_ATTRS_KEY)?;
    m.add("VALUES_DTYPE_KEY", tgm_core::table::VALUES_DTYPE_KEY)?;
    m.add("CODEC_PARAM_PREFIXES", pyo3::types::PyTuple::new(m.py(), tgm_core::table::CODEC_PARAM_PREFIXES)?)?;
    m.add("TENSOGRAM_VERSION", tgm_core::TENSOGRAM_VERSION)?;
    m.add("DTYPES", pyo3::types::PyTuple::new(m.py(), dtypes::names())?)?;
    // Raw reads below this much work keep the interpreter (`read::object::worth_releasing`).
    m.add("RELEASE_MIN_BYTES", RELEASE_MIN_BYTES)?;
    m.add("BYTES_PER_PIECE", BYTES_PER_PIECE)?;
    Ok(())
}
