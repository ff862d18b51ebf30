"""An index file: its messages encoded and signed (:func:`encode`, :func:`write`), and read back
and checked (:class:`Index`)."""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray.atomic import atomic_write_bytes
from tgm_xarray.hypercube import HypercubePlan
from tgm_xarray.plans.index.identity import Identity
from tgm_xarray.plans.index.recorded import Recorded, ref_prints
from tgm_xarray.plans.index.stored import Packer, pack_plan, pack_table, unpack, unpack_plan, unpack_table
from tgm_xarray.plans.index.trust import digest, signature
from tgm_xarray.source.handles import FileVersion
from tgm_xarray.table import MetadataTable

FORMAT = "tgm-xarray-index"
#: Raised whenever the plans it keeps would differ (4: cfgrib's ``heightAboveGround``), so that
#: no index keeps a plan this version would not make, or their keys would (5: ``PlanOptions``,
#: ``dim_names`` as a tuple; 6: the writer's records of stacked dimensions and CF packing, and
#: groups named after cfgrib's levels; 7: the table in the core's stored form, and GRIB facts as
#: cfgrib's ``GRIB_<key>`` attributes).
VERSION = 8
#: The metadata key (in ``_extra_``) that holds an index message's contents.
KEY = "tgm_xarray_index"
#: The most bytes an index's header may have: a file with a larger first message is not read.
HEADER_LIMIT = 16 * 2**20


class Untrusted(ValueError):
    """An index that does not carry this user's signature."""


class OtherVersion(ValueError):
    """An index in another version of the format (another tgm-xarray wrote it): replaced
    without a word, as any cache after an upgrade."""


class Index:
    """One index file, opened: its recorded identity, its table (read on first use) and the
    plans it holds, keyed by :func:`plan_key` (each a dict of group name -> plan).

    Everything comes from one read of one version of the file (a writer may rename another into
    place meanwhile): the header's signature is checked with ``key``, and every other message
    against the digest the header holds when it is used."""

    def __init__(self, path: str, key: bytes):
        self.path = path
        with open(path, "rb") as f:
            spans = _spans(path, f)
            offset, length = spans[0]
            if offset != 0 or length > HEADER_LIMIT:
                raise ValueError(f"a first message of {length} bytes at {offset}")
            f.seek(0)
            header = _contents(f.read(length), 0)
            if header.get("format") != FORMAT:
                raise ValueError(f"not a tgm-xarray index (format {header.get('format')!r})")
            if header.get("version") != VERSION:
                raise OtherVersion(f"index format version {header.get('version')!r}, this tgm-xarray reads {VERSION}")
            signed, mac = header.get("signed"), header.get("mac")
            if not (isinstance(signed, str) and isinstance(mac, str) and hmac.compare_digest(signature(key, signed), mac)):
                raise Untrusted("it was not written by this user: not trusted")
            body = json.loads(signed)
            self.source: dict = body["source"]
            self.keys: dict[str, int] = dict(body["plans"])
            self._digests: list[str] = body["digests"]
            if len(spans) < 2 or len(spans) != 1 + len(self._digests) or sorted(self.keys.values()) != list(range(2, len(spans))):
                raise ValueError(f"{len(spans)} messages for {len(self.keys)} plans")
            if any(a + n != b for (a, n), (b, _) in zip(spans, spans[1:])) or sum(n for _, n in spans) != \
                    os.fstat(f.fileno()).st_size:
                raise ValueError("bytes between or after its messages")
            self._spans = spans
            self._data = f.read()  # the rest: a file this user wrote, of the size its header implies

    def _message(self, msg: int) -> tuple[dict, Callable[[int], np.ndarray]]:
        """Message ``msg``'s contents and a reader of its objects, if it is the message the header signed."""
        offset, length = self._spans[msg]
        start = offset - self._spans[1][0]
        data = self._data[start:start + length]
        if not hmac.compare_digest(digest(data), self._digests[msg - 1]):
            raise ValueError(f"message {msg} is not the one its header signed")
        contents = _contents(data, msg)
        frames = _core.parse_message(data)[1]

        def read(obj: int) -> np.ndarray:
            _, at, size = frames[obj]
            return _core.read_frame(data[at:at + size], context=f"{self.path}: message {msg}, object {obj}")
        return contents, read

    def table(self) -> tuple[MetadataTable, np.ndarray]:
        """The table and its objects' fingerprints (``TgmFile.fingerprints``)."""
        contents, read = self._message(1)
        prints = unpack(contents["prints"], read)
        table = unpack_table(contents["table"], read)
        if prints.shape != (len(table),):
            raise ValueError(f"{len(table)} objects, {len(prints)} fingerprints")
        return table, prints

    def plans(self, key: str, source: str, version: FileVersion | None
              ) -> tuple[dict[str, HypercubePlan], dict[str, dict], dict[str, dict[str, Recorded]]] | None:
        """The plans stored for ``key`` (for the file at ``source``, found at ``version``), per
        plan the values of its dimension coordinates (see :func:`encode`) and what the index
        recorded of its objects; ``None`` if there are none."""
        msg = self.keys.get(key)
        if msg is None:
            return None
        contents, read = self._message(msg)
        plans, recorded = {}, {}
        for name, p in contents["plans"].items():
            plans[name], recorded[name] = unpack_plan(p, read, source, version)
        return plans, unpack(contents["values"], read), recorded

    def plan_messages(self) -> dict[str, bytes]:
        """Each stored plan message's bytes, by key (kept when the index is rewritten): those
        the header signed (a damaged one is dropped: its plan is made again)."""
        out = {}
        for key, msg in self.keys.items():
            offset, length = self._spans[msg]
            start = offset - self._spans[1][0]
            data = self._data[start:start + length]
            if hmac.compare_digest(digest(data), self._digests[msg - 1]):
                out[key] = data
        return out


def _spans(path: str, opened) -> list[tuple[int, int]]:
    """The messages' spans in the file ``opened`` (open, by ``path``): the core finds them by
    path, so the path must still name the file opened after (``opened`` keeps its inode, which
    no other file can then take; writers rename new files into place, never an old one back)."""
    for _ in range(3):
        handle = _core.FileHandle(path)
        spans = [handle.message_span(i) for i in range(len(handle))]
        del handle
        now, then = os.stat(path), os.fstat(opened.fileno())
        if (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino):
            if not spans:
                raise ValueError("no messages")
            return spans
    raise OSError(f"{path}: replaced while it was read")


def _contents(message: bytes, msg: int) -> dict:
    contents = (_core.parse_message(message)[0].get("_extra_") or {}).get(KEY)
    if not isinstance(contents, dict):
        raise ValueError(f"message {msg} is not an index message")
    return contents


def _message(contents: dict, packer: Packer) -> bytes:
    base: list[dict[str, Any]] = [{} for _ in packer.objects]
    return _core.encode_message({"base": base, "_extra_": {KEY: contents}}, packer.objects,
                                allow_nan=True, allow_inf=True)


def encode(key: bytes, identity: Identity, table: MetadataTable, prints: np.ndarray,
           plans: Mapping[str, Mapping[str, HypercubePlan]],
           values: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]],
           kept: Mapping[str, bytes] | None = None) -> bytes:
    """An index's bytes, signed with ``key``: the header, the table with its objects'
    fingerprints ``prints``, then one message per plan key, with ``values`` (per key, per plan:
    the values of its dimension coordinates, which xarray reads at every open to build indexes;
    kept so that a warm open reads nothing from the data file). ``kept``: already encoded plan
    messages, by key, that ``plans`` does not replace."""
    packer = Packer()
    messages = [_message({"table": pack_table(table, packer), "prints": packer.pack(prints)}, packer)]
    of_refs = ref_prints(table, prints)
    for plan_key_, group in plans.items():
        packer = Packer()
        messages.append(_message({"plan": plan_key_,
                                  "plans": {name: pack_plan(p, packer, of_refs) for name, p in group.items()},
                                  "values": packer.pack(values[plan_key_])}, packer))
    kept = {k: data for k, data in (kept or {}).items() if k not in plans}
    keys = [*plans, *kept]
    messages.extend(kept.values())
    signed = json.dumps({"source": identity.stored(), "plans": [[k, 2 + i] for i, k in enumerate(keys)],
                         "digests": [digest(m) for m in messages]}, sort_keys=True)
    header = {"format": FORMAT, "version": VERSION, "signed": signed, "mac": signature(key, signed)}
    return b"".join([_message(header, Packer()), *messages])


def write(path: str, data: bytes) -> None:
    """Writes ``path`` atomically (``atomic.atomic_write_bytes``: a reader or a concurrent writer
    sees the old index or the new one, never a mix), making its directory first."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    atomic_write_bytes(path, data)
