"""The kernel cache: where numbagrad keeps its generated kernels and Numba's compiled copies of them.

``info()`` says where the cache is and how big; ``clear()`` empties it (the next run compiles again). From a shell::

    python -m numbagrad.cache --info
    python -m numbagrad.cache --clear

The directory is ``NUMBAGRAD_CACHE_DIR``, else ``NUMBA_CACHE_DIR/numbagrad``, else ``~/.cache/numbagrad``. Damaged
entries repair themselves (they are removed and rebuilt, with one ``KernelCacheWarning``), and a directory that
cannot be written makes numbagrad compile in memory instead (``backend.codegen``). Importing this module does not
import Numba.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import sys

from .backend.codegen import PREFIX, KernelCacheWarning, cache_dir

__all__ = ["KernelCacheWarning", "cache_dir", "clear", "info", "main"]


def _numba_dir(directory: str) -> str:
    """Where Numba writes the index and data files of the modules in ``directory``: its ``__pycache__``, or
    Numba's own cache directory when ``NUMBA_CACHE_DIR`` is set (Numba's ``UserProvidedCacheLocator`` rule)."""
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if not numba_dir:
        return os.path.join(directory, "__pycache__")
    parent = os.path.basename(directory)
    return os.path.join(numba_dir, f"{parent}_{hashlib.sha1(directory.encode()).hexdigest()}")


def _files(directory: str) -> tuple[list[str], list[str]]:
    """(generated modules and their leftovers, Numba's index and data files) of the cache in ``directory``."""
    modules = glob.glob(os.path.join(glob.escape(directory), PREFIX + "*"))
    compiled = glob.glob(os.path.join(glob.escape(_numba_dir(directory)), PREFIX + "*"))
    return sorted(modules), sorted(compiled)


def _size(paths: list[str]) -> int:
    total = 0
    for path in paths:
        try:
            total += os.path.getsize(path)
        except OSError:  # removed meanwhile by another process
            pass
    return total


def info(directory: str | None = None) -> dict:
    """The cache's ``directory``, its number of generated ``modules``, Numba's ``numba_files`` (index and data),
    and ``bytes`` on disk in all."""
    directory = os.path.abspath(directory or cache_dir())
    modules, compiled = _files(directory)
    return {
        "directory": directory,
        "modules": sum(1 for p in modules if p.endswith(".py")),
        "numba_files": len(compiled),
        "bytes": _size(modules) + _size(compiled),
    }


def clear(directory: str | None = None) -> int:
    """Delete every generated module and Numba file of the cache (kernels loaded in this process keep working);
    the number of files removed."""
    directory = os.path.abspath(directory or cache_dir())
    removed = 0
    for path in [p for group in _files(directory) for p in group]:
        try:
            os.unlink(path)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    """``python -m numbagrad.cache --info | --clear``."""
    parser = argparse.ArgumentParser(prog="python -m numbagrad.cache", description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--info", action="store_true", help="print the cache directory and its size (the default)")
    group.add_argument("--clear", action="store_true", help="delete the cached kernels")
    parser.add_argument("--dir", help="another cache directory than NUMBAGRAD_CACHE_DIR's")
    args = parser.parse_args(argv)
    if args.clear:
        before = info(args.dir)
        removed = clear(args.dir)
        print(f"removed {removed} files ({_mib(before['bytes'])}) from {before['directory']}")
        return 0
    i = info(args.dir)
    print(f"directory:   {i['directory']}")
    print(f"modules:     {i['modules']}")
    print(f"numba files: {i['numba_files']}")
    print(f"size:        {_mib(i['bytes'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
