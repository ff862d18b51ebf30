"""Where indexes live: beside their data file (``<file>.tgmidx``) or in this user's cache
directory, named by a hash of the data's absolute path."""

from __future__ import annotations

import hashlib
import os
import re

from tgm_xarray.source.handles import absolute
from tgm_xarray.source.remote import is_url

#: What an index beside its data file is called: ``<file name><SUFFIX>``.
SUFFIX = ".tgmidx"
CACHE_DIR_ENV = "TGM_XARRAY_CACHE_DIR"


def beside(path: str) -> str | None:
    """The index beside ``path`` (a file or a URL): ``forecast.tgm`` -> ``forecast.tgm.tgmidx``;
    ``None`` beside a URL with a query string or a fragment (a presigned URL, an S3 version):
    the suffix would land in the query or the fragment and name the data object itself, and
    the index's own query (its signature) cannot be made from the data's."""
    if is_url(path) and ("?" in path or "#" in path):
        return None
    return beside_file(path)


def beside_file(path: str) -> str:
    """The index beside the local file ``path`` (:func:`beside`, which is never ``None`` there)."""
    return path + SUFFIX


def cache_dir() -> str:
    """``$TGM_XARRAY_CACHE_DIR``, else ``$XDG_CACHE_HOME/tgm-xarray``, else ``~/.cache/tgm-xarray``."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return os.path.expanduser(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tgm-xarray")


def cached(path: str) -> str:
    """The index of ``path`` (a file or a URL) in the cache directory: named by a hash of the
    absolute path, so any number of files share the directory without clashes."""
    digest = hashlib.sha256(absolute(path).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(cache_dir(), digest + SUFFIX)


#: The names :func:`cached` gives: the only files in the cache directory that eviction removes.
CACHED_NAME = re.compile(r"[0-9a-f]{32}" + re.escape(SUFFIX))


def written_at(path: str, to_beside: bool) -> str:
    """Where :func:`save` writes the index of ``path``: beside the local file, or in the cache."""
    return beside_file(path) if to_beside else cached(path)
