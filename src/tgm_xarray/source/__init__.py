"""Where a Dataset's bytes come from: one ``Source`` interface over a local file, a URL and a
list of files, and everything between what an open is given and the core's reads.

- :mod:`.protocol`: ``Source`` (its metadata table, fingerprints, version, ``read``,
  ``read_async``, ``locate``), what the engine, the planner, the CLI and earthkit use;
- :mod:`.inputs`: paths, ``file://`` URLs, bytes and file objects as paths the core opens;
- :mod:`.opening`: ``open_source``, their ``Source``;
- :mod:`.file`: ``TgmFile`` (``open_file``), one file or URL, over a handle of
  :mod:`.handles` (the per-process cache of the core's mapped files and of
  ``remote.RemoteHandle``);
- :mod:`.fileset`: ``FileSet``, several files read as one;
- :mod:`.remote`: ``RemoteHandle``, a URL read by byte range, its requests made by
  :mod:`.fetcher`, the one guarded fetcher (checks, retries, deadline, size caps);
- :mod:`.refs`: ``FileRef``/``FileSetRef``, references that survive closing and pickling.

A source's plans, and the sidecar index that keeps them, are a layer above: :mod:`tgm_xarray.plans`.
"""

from tgm_xarray.source.file import TgmFile, open_file, table_of
from tgm_xarray.source.fileset import FileSet
from tgm_xarray.source.inputs import MAGIC, is_tgm, local_path, path_of, paths_of
from tgm_xarray.source.opening import open_source
from tgm_xarray.source.protocol import Source
from tgm_xarray.source.refs import FileRef, FileSetRef, SourceRef, reference

__all__ = ["MAGIC", "FileRef", "FileSet", "FileSetRef", "Source", "SourceRef", "TgmFile", "is_tgm",
           "local_path", "open_file", "open_source", "path_of", "paths_of", "reference", "table_of"]
