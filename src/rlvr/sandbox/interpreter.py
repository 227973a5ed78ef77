"""The interpreter that runs sandboxed programs, and the files it needs to read.

Bubblewrap binds, and Landlock allows reading, exactly the files of ``python -I -S`` that
:func:`describe` finds by asking the interpreter (its binary, ``sys.path``, mapped shared
objects) plus the system's library directories. When root runs programs as an unprivileged
user who cannot read the interpreter (a pyenv under ``/root``), :func:`readable_copy` builds
once, under ``RUNTIME_CACHE``, a root-owned world-readable copy of the interpreter and its
standard library (hard links where possible; ``libpython`` found through ``LD_LIBRARY_PATH``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

RUNTIME_CACHE = "/var/cache/rlvr-sandbox"
"""Where readable copies of an interpreter are built (as root)."""

SYSTEM_PATHS = (
    *(f"{usr}/{lib}" for usr in ("", "/usr") for lib in ("lib", "lib64", "lib32", "libx32")),
    "/etc/ld.so.cache",
)
"""Shared-library directories (and the loader's cache) every interpreter may read."""

# Parts of the standard library a program never needs (the test suite alone is half of it).
_SKIPPED = frozenset(
    {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"}
)
_DESCRIBE = """
import os, sys
mapped = set()
with open('/proc/self/maps') as f:
    for line in f:
        part = line.split(None, 5)
        if len(part) == 6 and '.so' in part[5]:
            mapped.add(part[5].strip())
print(repr((os.path.realpath(sys.executable), sys.prefix, sys.version_info[:2],
            [p for p in sys.path if p and os.path.exists(p)], sorted(mapped))))
"""


@dataclass(frozen=True)
class Runtime:
    """An interpreter for sandboxed programs and what of the filesystem it reads."""

    python: str
    """Path of the interpreter binary (symbolic links resolved)."""
    prefix: str
    """Its ``sys.prefix`` when started with ``-I -S``."""
    version: tuple[int, int]
    """``(major, minor)``."""
    read_paths: tuple[str, ...]
    """Files and directories it reads: itself, its ``sys.path``, its shared objects and
    :data:`SYSTEM_PATHS`; existing paths only, none inside another."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment it needs on top of the sandbox's (``LD_LIBRARY_PATH`` for a copy)."""
    mapped: tuple[str, ...] = ()
    """Shared objects it had loaded at start-up (``libpython``, ``libc``, ...)."""


def _outermost(paths: list[str]) -> tuple[str, ...]:
    """Existing paths, without those that lie inside another one of them."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths if os.path.lexists(p)}):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return tuple(kept)


@functools.cache
def describe(python: str, env_items: tuple[tuple[str, str], ...] = ()) -> Runtime:
    """Ask ``python`` (started as ``-I -S``) what it reads; raises ``OSError`` if it cannot run."""
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", **dict(env_items)}
    try:
        argv = [python, "-I", "-S", "-c", _DESCRIBE]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
        last = proc.stdout.strip().splitlines()[-1]
        executable, prefix, version, sys_path, mapped = ast.literal_eval(last)
    except (subprocess.SubprocessError, ValueError, SyntaxError, IndexError) as exc:  # not Python
        raise OSError(f"could not start {python}: {exc}") from exc
    paths = [executable, *sys_path, *mapped, *SYSTEM_PATHS]
    return Runtime(
        executable, prefix, tuple(version), _outermost(paths), dict(env_items), tuple(mapped)
    )


def readable_by_others(path: str) -> bool:
    """True when a user who is neither owner nor in the group can reach and read ``path``."""
    full = Path(os.path.realpath(path))
    try:
        if not all(parent.stat().st_mode & stat.S_IXOTH for parent in full.parents):
            return False
        mode = full.stat().st_mode
    except OSError:
        return False
    needed = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & needed == needed


def runtime_readable_by_others(runtime: Runtime) -> bool:
    """True when an unprivileged user can run ``runtime`` and import its standard library."""
    own = [p for p in runtime.read_paths if p not in SYSTEM_PATHS]
    return all(readable_by_others(p) for p in (*own, *runtime.mapped))


def _copy_tree(src: Path, dst: Path, top: bool) -> None:
    dst.mkdir(mode=0o755, exist_ok=True)
    os.chmod(dst, 0o755)
    for entry in os.scandir(src):
        if top and (entry.name in _SKIPPED or entry.name.startswith("config-")):
            continue
        target = dst / entry.name
        if entry.is_dir(follow_symlinks=False):
            _copy_tree(Path(entry.path), target, top=False)
        elif entry.is_file(follow_symlinks=False):
            _link_or_copy(Path(entry.path), target)


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link when ``src`` is world-readable on the same device, else a readable copy."""
    info = src.stat()
    if info.st_mode & stat.S_IROTH and info.st_dev == dst.parent.stat().st_dev:
        with contextlib.suppress(OSError):
            os.link(src, dst)
            return
    shutil.copy2(src, dst)
    os.chmod(dst, (info.st_mode | 0o444) & 0o755)


def _require_trusted(path: Path) -> None:
    """Raise ``OSError`` unless ``path`` is safe to run programs from: a directory owned by root
    and writable by nobody else."""
    info = path.lstat()
    others_write = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or others_write:
        raise OSError(f"{path} must be a directory owned by root and writable by root only")


def _build_copy(runtime: Runtime, root: Path) -> None:
    """Fill ``root`` with the interpreter, its ``libpython`` and its standard library."""
    prefix = Path(runtime.prefix)
    binary = Path(runtime.python)
    (root / "bin").mkdir(mode=0o755)
    (root / "lib").mkdir(mode=0o755)
    _link_or_copy(binary, root / "bin" / binary.name)
    for shared in runtime.mapped:
        if Path(shared).is_relative_to(prefix):
            _link_or_copy(Path(shared), root / "lib" / Path(shared).name)
    for entry in runtime.read_paths:
        path = Path(entry)
        if path.is_dir() and path.is_relative_to(prefix) and path != prefix:
            target = root / path.relative_to(prefix)
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            _copy_tree(path, target, top=True)
    (root / ".complete").touch(mode=0o644)


def readable_copy(runtime: Runtime, cache: str = RUNTIME_CACHE) -> Runtime:
    """A world-readable copy of ``runtime`` under ``cache``, built once (needs root); raises
    ``OSError`` when the copy cannot be built or does not run."""
    base = Path(cache)
    base.mkdir(mode=0o755, parents=True, exist_ok=True)
    _require_trusted(base)
    os.chmod(base, 0o755)
    digest = hashlib.sha256(f"{runtime.python}\0{runtime.prefix}".encode()).hexdigest()[:12]
    major, minor = runtime.version
    final = base / f"python{major}.{minor}-{digest}"
    if not (final / ".complete").exists():
        building = Path(tempfile.mkdtemp(prefix=".build-", dir=base))
        try:
            os.chmod(building, 0o755)
            _build_copy(runtime, building)
            with contextlib.suppress(OSError):  # another process may have finished first
                os.rename(building, final)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    _require_trusted(final)
    python = final / "bin" / Path(runtime.python).name
    env = (("LD_LIBRARY_PATH", str(final / "lib")),)
    return describe(str(python), env)
