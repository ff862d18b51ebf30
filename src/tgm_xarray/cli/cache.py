"""``tgm-xarray cache list|prune``: the user cache directory of indexes
(:mod:`tgm_xarray.plans.index`), its size, and the least recently used indexes removed."""

from __future__ import annotations

import argparse

from tgm_xarray.cli.report import plural


def add_parser(commands: argparse._SubParsersAction) -> None:
    cache = commands.add_parser(
        "cache", help="list or prune the index cache",
        description="The user cache directory of indexes (docs/archives.md, \"The cache's size\"): "
                    "it keeps $TGM_XARRAY_CACHE_MB megabytes of them (default 256), the least "
                    "recently used removed first. Only index files are ever removed.")
    actions = cache.add_subparsers(required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="print the cache directory, its indexes' count and size")
    listing.set_defaults(run=list_indexes, parser=listing)
    prune = actions.add_parser("prune", help="remove the least recently used indexes down to a size")
    down_to = prune.add_mutually_exclusive_group()
    down_to.add_argument("--max-mb", type=_megabytes, metavar="N",
                         help="keep N megabytes of indexes at most (default: $TGM_XARRAY_CACHE_MB, else 256)")
    down_to.add_argument("--all", action="store_true", help="remove every index")
    prune.set_defaults(run=prune_indexes, parser=prune)


def _megabytes(text: str) -> int:
    from tgm_xarray.plans import index

    try:
        return index.megabytes(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of megabytes (0 or more)") from None


def list_indexes(args: argparse.Namespace) -> int:
    from tgm_xarray.plans import index

    directory = index.cache_dir()
    indexes = index.cached_indexes(directory)
    print(f"{directory}: {plural(len(indexes), 'index', 'indexes')}, {_size(sum(c.size for c in indexes))} "
          f"(limit {_size(index.cache_limit())}, {index.CACHE_MB_ENV})")
    return 0


def prune_indexes(args: argparse.Namespace) -> int:
    from tgm_xarray.plans import index

    directory = index.cache_dir()
    limit = 0 if args.all else args.max_mb if args.max_mb is not None else index.cache_limit()
    removed = index.prune_cache(directory, limit)
    left = index.cached_indexes(directory)
    print(f"{directory}: removed {plural(len(removed), 'index', 'indexes')} ({_size(sum(c.size for c in removed))}); "
          f"{plural(len(left), 'index', 'indexes')}, {_size(sum(c.size for c in left))} left")
    return 0


def _size(n: int) -> str:
    """
    >>> _size(0), _size(9216), _size(256 * 2**20)
    ('0 bytes', '9.0 KiB', '256.0 MiB')
    """
    if n < 1024:
        return plural(n, "byte")
    power = min((n.bit_length() - 1) // 10, 3)  # 1024 ** power <= n
    return f"{n / 1024 ** power:.1f} {('KiB', 'MiB', 'GiB')[power - 1]}"
