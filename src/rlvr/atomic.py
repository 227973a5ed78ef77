"""Files written so that a reader never sees half of one: a temporary file beside the
target, renamed onto it once complete (a rename within a folder is atomic)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class NotWritten(OSError):
    """A write that failed (a full disk, a file size limit) and left its target as it was."""


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (its folder made) to write in the block; renamed onto
    ``path`` when the block ends, removed when it raises. An ``OSError`` that names no file,
    or the temporary one (a full disk: ``[Errno 28] No space left on device``), is raised
    again as :class:`NotWritten`, naming ``path`` (and the targets of the blocks around it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except NotWritten as err:  # a write nested in the block failed: nor is this one made
        raise NotWritten(err.errno, f"{err.strerror} nor to {path}") from err
    except OSError as err:
        if err.filename not in (None, str(tmp), tmp) or err.errno is None:
            raise
        raise NotWritten(err.errno, f"{err.strerror}: nothing written to {path}") from err
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, flushed to disk before the rename."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically (values JSON lacks, such as
    paths, as their ``str``)."""
    write_text(path, json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n")


def why_not_creatable(folder: Path) -> str | None:
    """Why the directory ``folder`` could not be made (or written into), else ``None``;
    checked on the nearest existing part of the path, without creating anything."""
    existing = next(p for p in (folder, *folder.absolute().parents) if p.exists())
    if not existing.is_dir():
        return f"{existing} is a file, not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None
