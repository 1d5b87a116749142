"""File helpers: atomic writes (a reader, or a crash, never sees a half-written file) and a
validating JSON-lines reader.

Each writer writes to a temporary file in the same directory, flushes it to disk and then
renames it over the target; rename within one filesystem is atomic on POSIX and Windows.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from typing import IO, Any, Iterator


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary sibling of `path` for writing; on success it replaces `path`."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=directory)
    # mkstemp makes the file private (0600); give it the permissions open() would have.
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, prefix: str = ".tmp-dir-") -> Iterator[str]:
    """Yield a temporary sibling directory of `path` to fill; on success it replaces `path`.

    A reader sees the old directory or the complete new one, never a mix: the old one is
    renamed aside, the new one renamed in, then the old one removed. On failure the
    temporary directory goes and `path` is untouched.
    """
    path = os.fspath(path)
    parent = os.path.dirname(path) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private (0700); give it mkdir's mode
    try:
        yield tmp
        if os.path.exists(path):
            old = tmp + "-old"
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)


def atomic_write_json(path: str | os.PathLike, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Yield (line_number, object) from a JSON-lines file, streamed; blank lines are skipped.

    A line that is not JSON, or not a JSON object, raises DataError naming the file and line.
    """
    from bertkit.errors import DataError

    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}: line {line_number} is not valid JSON ({err.msg}); "
                                "fix or remove the line") from None
            if not isinstance(record, dict):
                raise DataError(f"{path}: line {line_number} must be a JSON object, "
                                f"got {type(record).__name__}")
            yield line_number, record
