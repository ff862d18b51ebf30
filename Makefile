# make setup | demo | test | bench
#   setup: system packages, .venv and a release build of the extension (scripts/setup.sh)
#   test:  Rust unit tests, cargo-deny's offline checks (deny.toml), pytest on CPython 3.11, then
#          pytest on a free-threaded CPython
#          (scripts/free-threaded-python.sh: ~15 min the first time on a machine, it builds 3.13t)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := $(CURDIR)/.venv/bin:$(HOME)/.cargo/bin:$(PATH)
PY := $(CURDIR)/.venv/bin/python
# The pytest-run-parallel pass runs the files of this list that exist.
PARALLEL_TESTS := tests/test_read.py tests/test_threads.py

.PHONY: setup demo test test-rust test-deny test-py test-ft bench

setup:
	bash scripts/setup.sh

demo: setup
	$(PY) examples/demo.py

test: test-rust test-deny test-py test-ft

# tgm-core needs no Python. Without maturin, pyo3 links the binding's test binary against
# libpython: point the loader at it.
test-rust: setup
	cargo test --release -p tgm-core
	LD_LIBRARY_PATH="$$($(PY) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}" \
	PYO3_PYTHON=$(PY) cargo test --release -p tgm-codec --lib

# deny.toml's licenses, bans and sources, from Cargo.lock and cargo's local registry (--frozen:
# no network). Advisories need the RustSec database from the network: not run here.
test-deny: setup
	cargo deny --frozen check --hide-inclusion-graph licenses bans sources
	@echo "cargo deny: advisories not checked: they need the RustSec database from the network" \
	  "(run 'cargo deny check advisories' where it is reachable; docs/testing.md)"

# pyproject's testpaths: tests/ and the package's docstring examples (--doctest-modules).
test-py: setup
	$(PY) -m pytest -q

# No PYTHON_GIL=0: the suite must pass with the GIL as our imports leave it (off, tested).
# Modules needing packages without free-threaded wheels (virtual.py: virtualizarr) cannot be
# imported there: their docstring examples are skipped (their tests skip too).
test-ft: setup
	FT=$$(bash scripts/free-threaded-python.sh | tail -n 1); \
	echo "free-threaded python: $$FT"; \
	$$FT -m pytest -q --doctest-ignore-import-errors; \
	files=$$(ls $(PARALLEL_TESTS) 2>/dev/null || true); \
	if [ -z "$$files" ]; then echo "no $(PARALLEL_TESTS): pytest-run-parallel pass skipped"; \
	else $$FT -m pytest -q -p run-parallel --parallel-threads=4 -m "not thread_unsafe" $$files; fi

bench: setup
	$(PY) benchmarks/run.py
