# make setup | demo | lint | test | bench
#   setup: system packages, .venv and a release build of the extension (scripts/setup.sh)
#   lint:  ruff, mypy, the layers' import rules, the stubs of the extension against it (mypy.stubtest), clippy; seconds when clean
#   test:  lint, Rust unit tests, cargo-deny's offline checks (deny.toml), pytest on CPython 3.11
#          (the oldest versions we support), on a free-threaded CPython
#          (scripts/free-threaded-python.sh: ~15 min the first time on a machine, it builds 3.13t),
#          then on CPython 3.13 with the newest release of every dependency
#          (scripts/newest-python.sh: 5-15 min the first time, it builds 3.13)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(CURDIR)/.venv/bin:$(HOME)/.cargo/bin:$(PATH)
PY := $(CURDIR)/.venv/bin/python
# The pytest-run-parallel pass runs the files of this list that exist.
PARALLEL_TESTS := tests/test_read.py tests/core/test_threads.py

.PHONY: setup demo lint test test-rust test-deny test-py test-ft test-newest bench
# Cargo target dirs of the free-threaded and newest lanes' extension builds (scripts/lanes.sh).
LANE_TARGET_DIR := $(CURDIR)/target/lanes

setup:
	bash scripts/setup.sh

demo: setup
	$(PY) examples/demo.py

# The other lanes' interpreters build in the background while lint, the Rust tests and the 3.11
# suite run (scripts/lanes.sh); their lanes wait for that build, then find what it built. Those
# two lanes then run side by side (each one's output shown whole when it ends): the suite passes
# with the cores loaded by something else, and many of its tests wait on children and servers.
test: setup
	LANE_TARGET_DIR=$(LANE_TARGET_DIR) bash scripts/lanes.sh start
	$(MAKE) lint test-rust test-deny test-py
	$(MAKE) -j2 --output-sync=target test-ft test-newest

# ruff and mypy come with the test extra (pyproject.toml, which configures both). mypy checks the
# whole package, the _core stubs included; stubtest checks the stubs against the built module.
# clippy: the release profile, as the builds and the Rust tests. tests/package/test_layers.py: the
# package's layers (docs/architecture.md), read from the sources with ast: no upward import, no
# cycle, no module over 600 lines.
lint: setup
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m mypy
	$(PY) -m pytest -q tests/package/test_layers.py
	$(PY) -m mypy.stubtest tgm_xarray._core
	cargo clippy --workspace --release -- -D warnings

# tgm-core needs no Python. Without maturin, pyo3 links the binding's test binary against
# libpython: point the loader at it.
test-rust: setup
	cargo test --release -p tgm-core
	LD_LIBRARY_PATH="$$($(PY) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}" \
	PYO3_PYTHON=$(PY) cargo test --release -p tgm-codec --lib

# deny.toml's licenses, bans and sources, from Cargo.lock and cargo's local registry (--frozen:
# no network). Advisories need the RustSec database from the network: not run here. cargo-deny
# is compiled once (3-8 minutes on 2 cores) into ~/.cargo/bin, here rather than in setup so that
# `make demo` does not wait for it; pinned: a new release may read deny.toml differently.
test-deny: setup
	command -v cargo-deny >/dev/null || cargo install cargo-deny --locked --version 0.20.2
	cargo deny --frozen check --hide-inclusion-graph licenses bans sources
	@echo "cargo deny: advisories not checked: they need the RustSec database from the network" \
	  "(run 'cargo deny check advisories' where it is reachable; docs/testing.md)"

# pyproject's testpaths: tests/ and the package's docstring examples (--doctest-modules).
test-py: setup
	$(PY) -m pytest -q

# No PYTHON_GIL=0: the suite must pass with the GIL as our imports leave it (off, tested).
# Modules needing packages without free-threaded wheels (virtual.py: virtualizarr; earthkit.py:
# earthkit-data, which needs eccodes) cannot be imported there: their docstring examples are
# skipped (their tests skip too).
test-ft: setup
	bash scripts/lanes.sh wait
	FT=$$(CARGO_TARGET_DIR=$(LANE_TARGET_DIR)/ft bash scripts/free-threaded-python.sh | tail -n 1); \
	echo "free-threaded python: $$FT"; \
	$$FT -m pytest -q --doctest-ignore-import-errors; \
	files=$$(ls $(PARALLEL_TESTS) 2>/dev/null || true); \
	if [ -z "$$files" ]; then echo "no $(PARALLEL_TESTS): pytest-run-parallel pass skipped"; \
	else $$FT -m pytest -q -p run-parallel --parallel-threads=4 -m "not thread_unsafe" $$files; fi

# Deprecation warnings our calls get (attributed to our package's modules or our tests', tests.*) fail
# this lane: the next release removes what they warn about. pyproject.toml sets no filterwarnings
# for -o to replace.
NEWEST_WARNINGS := $$'error::DeprecationWarning:(tgm_xarray|tests)\nerror::FutureWarning:(tgm_xarray|tests)'
# What this lane installs (every extra, scripts/newest-python.sh) and tests skip without
# (pytest.importorskip): here one that does not import fails the run (tests/conftest.py), so a
# failed install cannot pass as skipped tests.
NEWEST_MODULES := aiohttp boto3 cfgrib dask.array distributed earthkit.data eccodes fsspec icechunk ipykernel \
	matplotlib moto.server nbclient nbformat netCDF4 obstore pooch requests s3fs tensogram virtualizarr zarr
test-newest: setup
	bash scripts/lanes.sh wait
	PY=$$(CARGO_TARGET_DIR=$(LANE_TARGET_DIR)/newest bash scripts/newest-python.sh | tail -n 1); \
	echo "newest python: $$PY"; \
	TGM_REQUIRE_MODULES="$(NEWEST_MODULES)" $$PY -m pytest -q -o filterwarnings=$(NEWEST_WARNINGS)

bench: setup
	$(PY) benchmarks/run.py
