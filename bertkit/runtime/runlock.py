"""A run owns its output directory: `with run_lock(out_dir): ...` refuses a second run on it.

Two runs on one `--out` would interleave metrics.jsonl, overwrite each other's checkpoints and
leave one run's weights beside the other's summary. The lock is `OUT/.bertkit-run.lock`, held
with `flock` for the whole run and holding the owner's pid, host, start time and command:

- a second run finds the lock held and stops at once with a `BertkitError` naming the pid;
- the kernel drops an `flock` when its process dies, however it dies (SIGKILL included), so
  a lock file left by a killed run is *stale*: the next run takes it over with a warning
  naming the dead run's pid, with no waiting and no manual clean-up;
- on exit (also on an error or Ctrl-C) the lock file is removed, and so is `OUT` itself if
  the lock created it and nothing else was written there (a refused run leaves nothing).

Under torchrun only rank 0 takes the lock (`RANK` unset or "0"): the other processes are the
same run. POSIX `flock` (Linux, macOS); Linux NFS clients emulate it with byte-range locks
on the whole file (flock(2), since Linux 2.6.12), so it holds across machines sharing OUT there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import warnings
from typing import Iterator

from bertkit.errors import BertkitError

LOCK_FILE = ".bertkit-run.lock"


def _holder(fd: int) -> dict:
    """The owner record in the lock file (empty if it was never written or is unreadable)."""
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 4096)
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


def _describe(record: dict) -> str:
    pid = record.get("pid", "?")
    started = record.get("started")
    when = ""
    if isinstance(started, (int, float)):
        when = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(started))
    host = record.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    command = record.get("command")
    what = f" ({command})" if command else ""
    return f"pid {pid}{where}{when}{what}"


class RunLock:
    """The lock of one output directory; `acquire()` / `release()`, or use `run_lock`."""

    def __init__(self, out_dir: str | os.PathLike, what: str = ""):
        self.out_dir = os.fspath(out_dir)
        self.path = os.path.join(self.out_dir, LOCK_FILE)
        self.what = what  # what the run is, for the message another run gets
        self.fd: int | None = None
        self.created_dir = False

    def acquire(self) -> None:
        if os.path.exists(self.out_dir) and not os.path.isdir(self.out_dir):
            raise BertkitError(f"--out {self.out_dir} is a file, not a directory; choose a directory")
        self.created_dir = not os.path.exists(self.out_dir)
        try:
            os.makedirs(self.out_dir, exist_ok=True)
            while self.fd is None:
                self.fd = self._try_lock()
        except OSError as err:  # permission denied, a file on the path, a read-only file system ...
            self._remove_created_dir()
            reason = (err.strerror or str(err)).lower()
            raise BertkitError(f"cannot write to {self.out_dir} ({reason}); choose a directory you can write to"
                               ) from None
        except BaseException:
            self._remove_created_dir()
            raise

    def _try_lock(self) -> int | None:
        """The locked descriptor, None to try again (the file was replaced meanwhile)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise BertkitError(f"{self.out_dir} is in use by another bertkit run ({_describe(holder)}); wait for "
                               f"it to finish or stop it (kill {holder.get('pid', '<pid>')}), or choose another "
                               "--out") from None
        # The previous owner may have removed the file between our open and our lock: then we
        # hold a lock on a file no one else can find. Lock the file that is at the path.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            return None
        stale = _holder(fd)
        if stale:  # written by a run that ended without removing it: it was killed
            warnings.warn(f"taking over the lock of {self.out_dir} left by a run that no longer runs "
                          f"({_describe(stale)}); it was interrupted: check its output before trusting it",
                          stacklevel=4)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "command": self.what}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
        return fd

    def release(self) -> None:
        if self.fd is None:
            return
        # Remove the file only if it is still ours: an --overwrite run swaps OUT for a new
        # directory, where another run may already hold a lock of its own.
        with contextlib.suppress(FileNotFoundError):
            if os.path.samestat(os.fstat(self.fd), os.stat(self.path)):
                os.unlink(self.path)
        os.close(self.fd)  # closing drops the flock
        self.fd = None
        self._remove_created_dir()

    def _remove_created_dir(self) -> None:
        if self.created_dir:
            with contextlib.suppress(OSError):  # not empty: the run wrote something, keep it
                os.rmdir(self.out_dir)


def is_main_process() -> bool:
    """Rank 0 of a torchrun job, or a process outside one."""
    return os.environ.get("RANK", "0") == "0"


@contextlib.contextmanager
def run_lock(out_dir: str | os.PathLike, what: str = "") -> Iterator[RunLock | None]:
    """Hold the lock of `out_dir` (creating it) for the body; only rank 0 of a torchrun job."""
    if not is_main_process():
        yield None
        return
    lock = RunLock(out_dir, what)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


def check_apart(source: str | os.PathLike, out_dir: str | os.PathLike, option: str = "--model") -> None:
    """Refuse an --out that is `source` (a model the run reads), lies inside it, or contains it:
    replacing or filling --out would then change or delete the model being read."""
    src, out = os.path.realpath(source), os.path.realpath(out_dir)
    if src == out or out.startswith(src + os.sep) or src.startswith(out + os.sep):
        relation = "is" if src == out else "lies inside" if out.startswith(src + os.sep) else "contains"
        raise BertkitError(f"--out {out_dir} {relation} {option} {source}: the run would write into (or replace) "
                           f"the model it reads; choose an --out outside {source}")
