"""Sample ``.tgm`` files for examples, docs and tests, in the manner of ``xarray.tutorial``.

``fetch(name)`` downloads a file once through pooch, checks its sha256 and keeps it in a cache
directory; ``open_dataset(name)`` opens it with ``engine="tgm"``. The registry holds upstream
Tensogram's golden and remote-parity files and three files of real ECMWF open data; ``available()``
lists the names and ``REGISTRY`` describes each file. See docs/tutorial.md.

Configuration (environment):

- ``TGM_XARRAY_DATA_DIR``: the cache directory (default: ``pooch.os_cache("tgm-xarray")``).
- ``TGM_XARRAY_TUTORIAL_URL``: a base URL to fetch every file from, as ``<base>/<file>``.

pooch is an optional dependency (``pip install pooch``, or the ``tutorial`` extra of a clone:
``pip install ".[tutorial]"``), imported on first use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

from tgm_xarray.installation import install_hint

DATA_DIR_ENV = "TGM_XARRAY_DATA_DIR"
URL_ENV = "TGM_XARRAY_TUTORIAL_URL"

#: The upstream commit the default URLs point at: the one ``tensogram`` 0.24.0 was published
#: from (its crate's ``.cargo_vcs_info.json``). A commit, not a branch, so the bytes never move.
UPSTREAM_COMMIT = "3a734356b0223a755040e05d15b3d85707567a6e"
_RAW = f"https://raw.githubusercontent.com/ecmwf/tensogram/{UPSTREAM_COMMIT}"

_UPSTREAM = "ecmwf/tensogram"
_APACHE = "Apache-2.0"
_ECMWF_OPEN_DATA = "ECMWF open data, IFS 0.25° 2026-04-04 00z step 0, converted with tensogram 0.24"
_CC_BY = ("CC-BY-4.0: Copyright ECMWF. Contains modified ECMWF open data, licensed under "
          "CC BY 4.0.")


@dataclass(frozen=True)
class TutorialFile:
    """One registry entry: what the file is, where it comes from, and what its bytes must hash to."""

    name: str
    #: The file name in the cache directory and under ``TGM_XARRAY_TUTORIAL_URL``.
    file: str
    sha256: str
    size: int
    #: The default download URL, pinned to a commit; ``None`` when the file has no public copy
    #: (then ``TGM_XARRAY_TUTORIAL_URL`` or a copy in the cache directory is needed).
    url: str | None
    description: str
    source: str
    licence: str


def _upstream(name: str, path: str, sha256: str, size: int, description: str) -> TutorialFile:
    return TutorialFile(name, f"{name}.tgm", sha256, size, f"{_RAW}/{path}/{name}.tgm",
                        description, f"{_UPSTREAM} {path}/{name}.tgm", _APACHE)


def _real(name: str, sha256: str, size: int, description: str) -> TutorialFile:
    return TutorialFile(name, f"{name}.tgm", sha256, size, None, description, _ECMWF_OPEN_DATA, _CC_BY)


_GOLDEN = "rust/tensogram/tests/golden"
_PARITY = "tests/remote-parity/fixtures"
_ENTRIES = [
    # Real data (no public copy: fetched from TGM_XARRAY_TUTORIAL_URL or found in the cache).
    _real("ifs-0p25-20260404", "f4a4c8bbf180aaed61e5ffc3215dae9fd0cf0a8a110f7024509d2c07b6ae2643",
          7111632, "2t, lsm, q (150 hPa), t (600 hPa) on the 0.25° grid, one message per field, "
                   "simple packing 24 bit + szip, with latitude/longitude objects and MARS keys"),
    _real("2t-codecs", "6537ad4fa3c27019bb973281aff4718af6dd0aa1f62ec2d226c09e33e27f2909",
          25095552, "the 2 m temperature field once per codec (13 messages: none, simple packing, "
                    "szip, zstd, lz4, blosc2, shuffle, zfp, sz3), stacked along `codec`"),
    _real("lsm-seamask-nan", "ac1506b69464526f0ecd3523e48a7bc25059217d29c04f6af2a2592397a44cd2",
          569000, "the land-sea mask with open-sea points as NaN (a coastline-shaped NaN mask), "
                  "shuffle+szip and zstd"),
    # Upstream golden files: one small message each, big-endian payloads.
    _upstream("simple_f32", _GOLDEN, "0686b55d56d0e9d373b3b080b2fec7f0195ab40b3518facb87bd9a78e9a85c18",
              592, "one float32 [4] object"),
    _upstream("multi_object", _GOLDEN, "b23571b422f7fa3d4ee0baa6f4bcdb9dedae00a56a54dc60ff4d8b65435eba49",
              1120, "three objects: float32 [2], int64 [3], uint8 [5]"),
    _upstream("multi_object_xxh3", _GOLDEN,
              "7f11f6e16f07354d1607a8e05ba62ee281aad73ba6c647ccbaa60ae1027ef209",
              1120, "multi_object with xxh3 hashes"),
    _upstream("mars_metadata", _GOLDEN, "ee7f3525137430dd5780f79a38c7f458427d2be13cc30d5c625e3f7f64f6ecb6",
              624, "one float64 [2, 3] object with MARS keys"),
    _upstream("multi_message", _GOLDEN, "7157d77dc3491c5dbed3d65398e287bc259e997438798778fcdf8a563a9a1e3f",
              1168, "two messages of one float32 [2] object"),
    _upstream("hash_xxh3", _GOLDEN, "938426f3c9f7b435f064bdd9e25a23c55c7b6e257c985a83a047fee2e1a7851f",
              592, "one float32 [4] object with an xxh3 hash"),
    # Upstream remote-parity files: many tiny messages, header- or footer-indexed.
    _upstream("single-msg", _PARITY, "d104065c3570c36a1eca0cd8b527177bc47f9e410e62867f306702bb3a3db834",
              592, "1 message, header-indexed"),
    _upstream("two-msg", _PARITY, "9566710f7ac04fa1358843504789a1acd5343edc9225d1005d6fdfa507f7a0fb",
              1184, "2 messages, header-indexed"),
    _upstream("ten-msg", _PARITY, "93b8e0a858a326f5cb5fd3e54eed014c01a74ecd1de20f4f57727480988cfe35",
              5920, "10 messages, header-indexed"),
    _upstream("hundred-msg", _PARITY, "b55bd1a542307ed6996cf36ffed125d8e327de8d4fb87b655ed9e8cb58726a0b",
              59200, "100 messages, header-indexed"),
    _upstream("thousand-msg", _PARITY, "0adc58b0a3f3b45ae0e302ca863b6d0aedcf0f6ebdb04436bb10e54f3fe9ecb4",
              592000, "1000 messages, header-indexed"),
    _upstream("single-msg-footer", _PARITY,
              "afcd6180beeffba0dcc2876138d3f924ec3315efd6af3701ae35bd9ac2be1ae4",
              656, "1 message, footer-indexed (streaming encoder)"),
    _upstream("ten-msg-footer", _PARITY, "a2362b10a02653b8d5ce9bfc0786fa15c13bb66a18198863aad04984207fff95",
              6560, "10 messages, footer-indexed"),
    _upstream("hundred-msg-footer", _PARITY,
              "5e54a62f1d1ef5a8f2ec432f36843a6fce5da5d6af5a1e033cf3f0642f9e6227",
              66208, "100 messages, footer-indexed"),
    _upstream("thousand-msg-footer", _PARITY,
              "a672ab801d5034e265f24a9361cf34ea098819829abd10b37f3fe718d8383d62",
              663808, "1000 messages, footer-indexed"),
    _upstream("streaming-tail", _PARITY, "7e24d994a3d7becd87e7eed9d00fffdf30d7c31f645972dd50e39bb7470f59f4",
              5984, "10 messages, the last written in streaming mode (length 0 in its preamble)"),
    _upstream("metadata_parity", "tests/fixtures",
              "eb2a99ff18fad7cb886772ae0e29f7e846ee08021d00a8c2474aa16c70f5f128",
              1008, "two objects (2t, msl) whose metadata uses every CBOR value type"),
]

#: Every tutorial file by name (read-only).
REGISTRY = MappingProxyType({entry.name: entry for entry in _ENTRIES})


def available() -> list[str]:
    """The names ``fetch`` and ``open_dataset`` accept, sorted.

    >>> from tgm_xarray import tutorial
    >>> "ifs-0p25-20260404" in tutorial.available()
    True
    >>> tutorial.REGISTRY["thousand-msg"].size
    592000
    """
    return sorted(REGISTRY)


def fetch(name: str, *, cache_dir: str | os.PathLike | None = None) -> Path:
    """The local path of tutorial file ``name``, downloaded into the cache on first use.

    A file already in the cache with the right sha256 is returned without any network request,
    so a filled cache works offline. A download whose sha256 does not match is deleted and raises
    ``ValueError``. The cache directory is ``cache_dir``, else ``$TGM_XARRAY_DATA_DIR``, else
    ``pooch.os_cache("tgm-xarray")``; with ``$TGM_XARRAY_TUTORIAL_URL`` set, files come from
    ``<that URL>/<file>`` instead of their default URLs.

    >>> from tgm_xarray import tutorial
    >>> path = tutorial.fetch("multi_message")         # doctest: +SKIP
    >>> path.name                                      # doctest: +SKIP
    'multi_message.tgm'
    """
    entry = _entry(name)
    pooch = _import_pooch()
    directory = _cache_dir(cache_dir, pooch)
    url = _url(entry)
    if url is None:
        # No public copy: a verified file already in the cache is the only source.
        cached = directory / entry.file
        if cached.is_file() and pooch.file_hash(str(cached), alg="sha256") == entry.sha256:
            return cached
        state = ("is there but its sha256 does not match" if cached.exists() else "is not there")
        raise ValueError(
            f"tutorial file {name!r} has no public download URL and {cached} {state}: set "
            f"{URL_ENV} to a base URL serving {entry.file!r} (fetched as <base>/{entry.file}), or "
            f"copy your own {entry.file} (sha256 {entry.sha256}) into {directory}")
    try:
        path = pooch.retrieve(url, known_hash=f"sha256:{entry.sha256}", fname=entry.file,
                              path=directory, progressbar=False)
    except OSError as exc:  # requests' errors too: offline, refused, HTTP errors, cut short
        raise _download_error(exc, entry, url, directory) from exc
    except ValueError as exc:
        # With the URL's scheme checked, pooch's ValueError is its hash check (the download is
        # already deleted); say which registry entry and URL it was about.
        if "hash" not in str(exc):
            raise
        raise ValueError(f"tutorial file {name!r} downloaded from {url}: its sha256 did not match "
                         f"the registry (expected {entry.sha256}); the download was deleted") from exc
    return Path(path)


def _download_error(exc: OSError, entry: TutorialFile, url: str, directory: Path) -> OSError:
    """``exc``, of the same type, saying how to work without the network: local copies."""
    message = (f"tutorial file {entry.name!r} could not be downloaded from {url}: {exc}. "
               f"Offline, copy {entry.file} (sha256 {entry.sha256}) into {directory}, or set "
               f"{DATA_DIR_ENV} to a directory holding it; or set {URL_ENV} to a base URL "
               f"serving it (fetched as <base>/{entry.file})")
    # requests' exceptions keep their request and response; builtin ones take neither
    kept = {name: getattr(exc, name) for name in ("request", "response") if hasattr(exc, name)}
    try:
        return type(exc)(message, **kept)
    except TypeError:
        return OSError(message)


def open_dataset(name: str, *, cache_dir: str | os.PathLike | None = None, **kwargs):
    """Tutorial file ``name`` as an ``xarray.Dataset`` (``fetch``, then ``engine="tgm"``).

    ``kwargs`` go to ``xarray.open_dataset`` (for example ``chunks={}`` for dask arrays, or the
    engine's own options such as ``verify_hash=True``).

    >>> from tgm_xarray import tutorial
    >>> ds = tutorial.open_dataset("ifs-0p25-20260404", chunks={})   # doctest: +SKIP
    >>> ds.t.sel(isobaricInhPa=600).mean().compute()                 # doctest: +SKIP
    """
    import xarray as xr

    # The entry point class rather than the name "tensogram": upstream's own package may register
    # an engine of that name too, and this module must open files with this package's engine.
    from tgm_xarray.backend import TensogramBackendEntrypoint

    return xr.open_dataset(fetch(name, cache_dir=cache_dir), engine=TensogramBackendEntrypoint, **kwargs)


def _entry(name: str) -> TutorialFile:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"no tutorial file named {name!r}; available: {', '.join(available())}") from None


def _import_pooch():
    try:
        import pooch
    except ImportError as exc:
        raise ImportError("tgm_xarray.tutorial downloads files with pooch, which is not installed: "
                          + install_hint("pooch")) from exc
    return pooch


def _cache_dir(cache_dir, pooch) -> Path:
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV]).expanduser()
    return Path(pooch.os_cache("tgm-xarray"))


def _url(entry: TutorialFile) -> str | None:
    base = os.environ.get(URL_ENV)
    if not base:
        return entry.url
    if urlsplit(base).scheme not in ("http", "https", "ftp"):
        raise ValueError(f"{URL_ENV} must be an http(s) or ftp URL, got {base!r}; to use files on "
                         f"disk, copy them into the cache directory (see {DATA_DIR_ENV})")
    return f"{base.rstrip('/')}/{entry.file}"
