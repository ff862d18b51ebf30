"""Every ```python block of README.md and docs/*.md runs as written (docs/testing.md, "Docs as tests").

Each block is a test, its id ``page:line``. The blocks of one page share a namespace and run in
order, like a notebook's cells: a block's test first runs the page's earlier blocks that have not
run yet, so ``-k`` can pick any block. Blocks run in a working directory of their page's own
where the file names the page uses stand for real files: the shared fixtures (linked) or files
written here with our writer; URLs go to servers on loopback (``PAGES``). Blocks of ``>>>``
lines run as doctests, so the output they show is checked. A block right after an HTML comment
``<!-- skip: reason -->`` is skipped with that reason.
"""

from __future__ import annotations

import contextlib
import doctest
import functools
import importlib.util
import re
import shutil
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.shared import (
    FIXTURES,
    GOLDEN,
    NETCDF,
    REAL,
    REMOTE_PARITY,
    REPO,
    require_entry_point,
    require_shared,
)

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^(?P<indent>\s*)```python\s*$")
_SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>.+?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # the line of the block's first line of code (1-based)
    source: str
    skip: str | None

    @property
    def id(self) -> str:
        name = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page.name
        return f"{name}:{self.line}"

    @property
    def doctest(self) -> bool:
        return self.source.lstrip().startswith(">>>")


def blocks(page: Path) -> list[Block]:
    """The ```python blocks of ``page``, dedented to their fence's indentation."""
    lines = page.read_text().splitlines()
    found = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = lines.index(fence["indent"] + "```", i + 1)
        before = next((text for text in reversed(lines[:i]) if text.strip()), "")
        skip = _SKIP.match(before)
        source = textwrap.dedent("\n".join(lines[i + 1:end])) + "\n"
        found.append(Block(page, i + 2, source, skip["reason"] if skip else None))
        i = end + 1
    return found


BLOCKS = [block for page in DOCS for block in blocks(page)]


# --------------------------------------------------------------------------------------------
# What stands for the names the pages use
# --------------------------------------------------------------------------------------------


@dataclass
class StandIns:
    """A page's working directory, the URLs and paths its blocks name replaced by real ones,
    and environment variables its blocks run with."""

    workdir: Path
    stack: contextlib.ExitStack
    replace: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def link(self, source: Path, name: str | None = None) -> Path:
        """``source`` (a shared fixture) under ``name`` in the working directory."""
        target = self.workdir / (name or source.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(require_shared(source))
        return target

    def serve(self, files: dict[str, Path]) -> str:
        """The base URL of a range server on loopback serving copies of ``files`` (by name; it
        serves no link out of its root), stopped with the module."""
        from tests.helpers.range_server import RangeServer

        root = self.workdir / "served"
        root.mkdir()
        for name, source in files.items():
            shutil.copyfile(require_shared(source), root / name)
        server = RangeServer(root).start()
        self.stack.callback(server.stop)
        return server.url("")

    def s3_bucket(self, bucket: str, files: dict[str, Path]) -> None:
        """A public ``bucket`` holding ``files`` on a moto S3 server on loopback, which s3fs
        reaches through ``AWS_ENDPOINT_URL``; stopped with the module."""
        boto3 = pytest.importorskip("boto3")
        server = pytest.importorskip("moto.server").ThreadedMotoServer(ip_address="127.0.0.1", port=0)
        server.start()
        self.stack.callback(server.stop)
        host, port = server.get_host_and_port()
        self.env["AWS_ENDPOINT_URL"] = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=self.env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_bucket(Bucket=bucket)
        for name, source in files.items():
            client.upload_file(str(require_shared(source)), bucket, name, ExtraArgs={"ACL": "public-read"})


@functools.cache
def _write_tgm_example():
    examples = str(REPO / "examples")
    spec = importlib.util.spec_from_file_location("write_tgm", REPO / "examples" / "write_tgm.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, examples)  # as when it runs as a script: its helpers (_data) sit beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(examples)
    return module


def forecast(steps: list[int]):
    """The synthetic forecast of examples/write_tgm.py: ``2t`` and ``t`` at 850 and 500 hPa."""
    return _write_tgm_example().forecast(steps)


def write_steps(directory: Path, steps) -> None:
    """One file per forecast step, ``fc-step000.tgm``, ``fc-step006.tgm``, ..."""
    import tgm_xarray

    directory.mkdir(parents=True, exist_ok=True)
    for step in steps:
        tgm_xarray.to_tgm(forecast([step]), directory / f"fc-step{step:03d}.tgm")


def readme(s: StandIns) -> None:
    import tgm_xarray

    tgm_xarray.to_tgm(forecast([0, 6, 12]), s.workdir / "forecast.tgm")


def archives(s: StandIns) -> None:
    write_steps(s.workdir / "fc" / "20260404-00", range(0, 49, 6))


def earthkit(s: StandIns) -> None:
    pytest.importorskip("earthkit.data", reason="earthkit-data is not installed (the `earthkit` extra)")
    for group in ("sources", "targets", "encoders"):
        require_entry_point(f"earthkit.data.{group}", "tgm")
    s.link(REAL / "ifs-0p25-20260404.tgm")
    s.link(FIXTURES / "upstream" / "grib" / "t_600.grib2", "forecast.grib2")


def mapping(s: StandIns) -> None:
    s.link(REAL / "ifs-0p25-20260404.tgm")
    s.link(GOLDEN / "multi_message.tgm")


def remote(s: StandIns) -> None:
    pytest.importorskip("aiohttp")
    pytest.importorskip("s3fs")
    ifs = {"ifs.tgm": REAL / "ifs-0p25-20260404.tgm"}
    s.replace["https://example.org/forecasts/"] = s.serve(ifs)
    s.s3_bucket("bucket", ifs)


def tutorial(s: StandIns) -> None:
    pytest.importorskip("pooch")
    # The mirror docs/tutorial.md describes, on loopback, with the files the page fetches.
    files = {"thousand-msg.tgm": REMOTE_PARITY / "thousand-msg.tgm",
             "metadata_parity.tgm": REMOTE_PARITY / "metadata_parity.tgm",
             "ifs-0p25-20260404.tgm": REAL / "ifs-0p25-20260404.tgm"}
    s.env["TGM_XARRAY_TUTORIAL_URL"] = s.serve(files).rstrip("/")
    s.env["TGM_XARRAY_DATA_DIR"] = str(s.workdir / "cache")


def virtual(s: StandIns) -> None:
    pytest.importorskip("virtualizarr")
    pytest.importorskip("icechunk")
    pytest.importorskip("matplotlib")
    s.replace["/data/"] = f"{s.workdir}/"
    write_steps(s.workdir / "fc", range(0, 49, 6))
    s.env["MPLBACKEND"] = "Agg"


def writer(s: StandIns) -> None:
    # The samples are NetCDF4 (HDF5) files: netCDF4 or h5netcdf with h5py reads them (neither
    # has free-threaded wheels).
    if importlib.util.find_spec("netCDF4") is None and importlib.util.find_spec("h5py") is None:
        pytest.skip("reading the NetCDF4 samples needs netCDF4, or h5netcdf with h5py")
    s.link(NETCDF / "cf_temperature.nc")
    s.link(NETCDF / "unlimited_time.nc")


def zarr(s: StandIns) -> None:
    s.link(REAL / "ifs-0p25-20260404.tgm")


PAGES: dict[str, Callable[[StandIns], None]] = {
    "README.md": readme, "docs/archives.md": archives, "docs/earthkit.md": earthkit, "docs/mapping.md": mapping,
    "docs/remote.md": remote, "docs/tutorial.md": tutorial, "docs/virtual.md": virtual,
    "docs/writer.md": writer, "docs/zarr.md": zarr,
}


# --------------------------------------------------------------------------------------------
# Running a page's blocks in order
# --------------------------------------------------------------------------------------------


@dataclass
class Page:
    stand_ins: StandIns
    namespace: dict
    done: set[int] = field(default_factory=set)  # line numbers of the blocks run
    failed: str | None = None  # the id of a block that failed: the page's later blocks fail too

    def run(self, block: Block) -> None:
        if self.failed:
            pytest.fail(f"an earlier block of this page failed: {self.failed}")
        try:
            run_block(block, self.namespace, self.stand_ins.replace)
        except BaseException:
            self.failed = block.id
            raise
        finally:
            self.done.add(block.line)


def run_block(block: Block, namespace: dict, replace: dict[str, str]) -> None:
    source = block.source
    for name, stand_in in replace.items():
        source = source.replace(name, stand_in)
    if not block.doctest:
        # Line numbers in tracebacks are the page's.
        exec(compile("\n" * (block.line - 1) + source, str(block.page), "exec"), namespace)
        return
    test = doctest.DocTestParser().get_doctest(source, namespace, block.id, str(block.page), block.line - 1)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)  # a DocTest runs in a copy of the namespace it is given
    if runner.failures:
        pytest.fail("".join(report), pytrace=False)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Each page's stand-ins and namespace, made when its first block runs."""
    made: dict[Path, Page] = {}
    with contextlib.ExitStack() as stack:

        def get(path: Path) -> Page:
            if path not in made:
                name = str(path.relative_to(REPO))
                workdir = tmp_path_factory.mktemp(re.sub(r"\W", "-", name))
                stand_ins = StandIns(workdir, stack)
                setup = PAGES.get(name)
                if setup is not None:
                    setup(stand_ins)
                made[path] = Page(stand_ins, {"__name__": f"docs:{name}"})
            return made[path]

        yield get


@pytest.mark.thread_unsafe  # changes the working directory and the environment
@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_block(block: Block, pages, monkeypatch):
    if block.skip:
        pytest.skip(block.skip)
    page = pages(block.page)
    monkeypatch.chdir(page.stand_ins.workdir)
    for name, value in page.stand_ins.env.items():
        monkeypatch.setenv(name, value)
    for earlier in blocks_before(block):
        if earlier.line not in page.done:
            page.run(earlier)
    page.run(block)


def blocks_before(block: Block) -> list[Block]:
    return [b for b in BLOCKS if b.page == block.page and b.line < block.line and not b.skip]


def test_every_page_with_blocks_has_its_stand_ins():
    """A page whose blocks name files gets them here; a new page must be added to ``PAGES``."""
    with_blocks = {str(block.page.relative_to(REPO)) for block in BLOCKS}
    assert with_blocks <= set(PAGES), sorted(with_blocks - set(PAGES))
    assert len(BLOCKS) >= 16


def test_readme_pickle_size(ifs_file):
    """README.md: a Dataset pickles as references and layout, about 35 KB for the IFS file, half
    of it the latitude/longitude values."""
    import pickle

    import xarray as xr

    with xr.open_dataset(ifs_file, engine="tgm", chunks={}) as ds:
        size = len(pickle.dumps(ds))
        assert 17_000 < ds.latitude.nbytes + ds.longitude.nbytes < size < 40_000


def test_skip_comment_is_honoured(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n<!-- skip: needs an S3 bucket -->\n```python\nraise SystemExit\n```\n\n"
                    "Indented:\n\n  ```python\n  x = 1\n  ```\n")
    first, second = blocks(page)
    assert (first.skip, first.line, first.source) == ("needs an S3 bucket", 5, "raise SystemExit\n")
    assert (second.skip, second.line, second.source) == (None, 11, "x = 1\n")


def test_blocks_share_a_namespace_in_order(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n\n```python\n>>> y = x + 1\n>>> y\n2\n```\n\n"
                    "```python\nz = y + 1\n```\n")
    namespace: dict = {}
    for block in blocks(page):
        run_block(block, namespace, {})
    assert (namespace["x"], namespace["y"], namespace["z"]) == (1, 2, 3)
    wrong = Block(page, 6, ">>> x + 1\n3\n", None)
    with pytest.raises(pytest.fail.Exception, match="Expected:"):
        run_block(wrong, namespace, {})

