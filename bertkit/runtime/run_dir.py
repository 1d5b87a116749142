"""A run's output directory, for every command that writes one: who owns it, what it holds,
what may be continued, and how a finished run is put in place.

- **The lock**: `with run_lock(out_dir): ...` refuses a second run on it (below).
- **Checkpoints**: `list_checkpoints` / `latest_checkpoint` find the complete `checkpoint-<step>`
  directories (the Trainer writes each one whole and renames it into place, its state file last);
  `final_model` is the model a run ended with (best/ or the newest checkpoint), and
  `refuse_run_folder` tells a user who names the run folder where a model goes which one to pass
  (transformers' Trainer leaves the same layout and `from_pretrained` on it fails; bertkit does
  not silently pick a checkpoint either: the newest is not always the one wanted). Light enough
  (no torch) for every command to import.
- **Before any work**: `check_apart` refuses an --out that is, or holds, a model the run reads;
  `refuse_unresumed` refuses to start afresh on a checkpoint without --resume; `check_saved_options`
  refuses a --resume whose options differ from the run's saved ones (runtime/resume_check.py).
- **While it runs**: `remove_leftovers` clears what a killed run left (half-written temporaries;
  with a fresh start, its checkpoints and best model too); `replacing` gives an --overwrite run a
  new sibling directory that takes OUT's place only once the run succeeded.
- **At the end**: `publish_best` moves the best model's files into OUT and drops the checkpoints.

The lock. Two runs on one `--out` would interleave metrics.jsonl, overwrite each other's
checkpoints and leave one run's weights beside the other's summary. The lock is `OUT/.bertkit-run.lock`, held
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
import glob
import json
import os
import re
import shlex
import shutil
import socket
import time
import warnings
from typing import Iterator

from bertkit.errors import BertkitError, CheckpointError, RunInterrupted
from bertkit.io import atomic_directory, loads_json, nearest_sibling, read_text
from bertkit.runtime.resume_check import check_resume_options

LOCK_FILE = ".bertkit-run.lock"
BEST = "best"  # early stopping's copy of the best model (train/early_stopping.py)
STATE_FILE = "trainer_state.pt"  # in a checkpoint: written last, so its presence marks it complete
CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


# ---------------------------------------------------------------------------- the lock
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
        os.pwrite(fd, json.dumps(record, ensure_ascii=False).encode("utf-8"), 0)
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


# ---------------------------------------------------------------------------- checkpoints
def list_checkpoints(out_dir: str) -> list[tuple[int, str]]:
    """(step, path) of the complete checkpoints in `out_dir`, oldest first."""
    if not os.path.isdir(out_dir):
        return []
    found = []
    for name in os.listdir(out_dir):
        match = CHECKPOINT_RE.match(name)
        path = os.path.join(out_dir, name)
        # The state file is written last and the directory renamed into place after it, so a
        # directory with it is complete; the check also skips stray user-made directories.
        if match and os.path.isfile(os.path.join(path, STATE_FILE)):
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(out_dir: str) -> str | None:
    found = list_checkpoints(out_dir)
    return found[-1][1] if found else None


def final_model(run_dir: str) -> str | None:
    """The model a run ended with: run_dir/best when early stopping kept one, else the newest complete
    checkpoint; None when `run_dir` holds neither."""
    best = os.path.join(run_dir, BEST)
    if os.path.isfile(os.path.join(best, "config.json")):
        return best
    return latest_checkpoint(run_dir)


def _model_inside(path: str) -> str | None:
    """The model of a run folder (no config.json of its own, but best/ or checkpoint-N/ inside:
    `final_model`); None for a model directory or any other path."""
    if not os.path.isdir(path) or os.path.isfile(os.path.join(path, "config.json")):
        return None
    return final_model(path)


def refuse_run_folder(path: str, option: str) -> None:
    """A one-line CheckpointError when `path`, given to `--OPTION`, is a run folder rather than a model."""
    model = _model_inside(path)
    if model is not None:
        raise CheckpointError(f"{path} is a run folder; the model is {model}: pass --{option} {model}")


# An adapter directory's config file: PEFT's (LoRA), bertkit's own (bottleneck adapters, prefixes).
ADAPTER_CONFIG, OWN_ADAPTER_CONFIG = "adapter_config.json", "bertkit_adapter_config.json"


def not_a_model(directory: str | os.PathLike) -> str:
    """What a folder bertkit writes that holds no usable model of its own is, for the end of a
    loader's "no config / weights / tokenizer files" error: a PEFT adapter (how to load it), an ONNX
    export, an ELECTRA checkpoint (its two models) or a run folder (the model inside); "" for any other folder."""
    directory = os.path.normpath(directory)
    if any(os.path.isfile(os.path.join(directory, name)) for name in (ADAPTER_CONFIG, OWN_ADAPTER_CONFIG)):
        return (f"; {directory} is a PEFT adapter, not a whole model: load it with "
                f"bertkit.peft.PeftModel.from_pretrained, or fold it into one with `bertkit peft merge --model "
                f"{directory} --out DIR`")
    if os.path.isfile(os.path.join(directory, "model.onnx")):  # what `bertkit export` writes
        return (f"; {directory} is an ONNX export (`bertkit export`): run its model.onnx with ONNX Runtime "
                "(docs/inference.md), or give bertkit the model directory it was exported from")
    pair = [os.path.join(directory, part) for part in ("discriminator", "generator")]
    if all(os.path.isfile(os.path.join(part, "config.json")) for part in pair):
        return (f"; {directory} is an ELECTRA pre-training checkpoint (the pair, for --resume): fine-tune "
                f"{pair[0]}; {pair[1]} is its small masked LM (fill-mask)")
    model = _model_inside(directory)
    return f"; {directory} is a run folder: the model is {model}" if model else ""


# ---------------------------------------------------------------------------- before any work
def check_apart(source: str | os.PathLike, out_dir: str | os.PathLike, option: str = "--model",
                inside_only: bool = False) -> None:
    """Refuse an --out that is `source` (a model or a corpus folder the run reads), lies inside it,
    or (unless `inside_only`: a run that never replaces --out whole) contains it: filling or
    replacing --out would then change or delete what is being read."""
    src, out = os.path.realpath(source), os.path.realpath(out_dir)
    contains = src.startswith(out + os.sep) and not inside_only
    if src == out or out.startswith(src + os.sep) or contains:
        relation = "is" if src == out else "lies inside" if out.startswith(src + os.sep) else "contains"
        fix = (f"choose another --out, or move {source} out of it" if os.path.isfile(source)
               else f"choose an --out outside {source}")
        raise BertkitError(f"--out {out_dir} {relation} {option} {source}: the run would write into (or replace) "
                           f"what it reads; {fix}")


def refuse_nothing_to_resume(out_dir: str, resume: bool) -> None:
    """--resume on an --out that does not exist or is empty (a typo of the run's folder) would
    start a new run from scratch beside the one meant, silently."""
    if resume and (not os.path.isdir(out_dir) or not os.listdir(out_dir)):
        near = nearest_sibling(out_dir)
        raise BertkitError(f"--resume: {out_dir} holds no run to continue{f' (did you mean {near}?)' if near else ''}; "
                           "drop --resume to start one there")


def warn_resuming_from_scratch(out_dir: str, reused: str = "") -> None:
    """--resume on a run killed (kill -9, a crash) before its first checkpoint trains from step 0:
    said, where it had started over saying only that it took over the dead run's lock."""
    warnings.warn(f"--resume: {out_dir} holds no checkpoint yet (the run stopped before its first save): "
                  f"training from step 0{f' ({reused})' if reused else ''}", stacklevel=3)


def refuse_unresumed(out_dir: str, existing: str | None, resume: bool) -> None:
    """Refuse a new run on `out_dir`'s newest checkpoint `existing` (`latest_checkpoint`) without
    `resume`: it would mix its checkpoints and metrics into the old run's."""
    if existing and not resume:
        raise BertkitError(f"{out_dir} already holds {os.path.basename(existing)}; pass --resume to continue it, "
                           "choose a new --out directory, or delete it to train again (rm -r "
                           f"{shlex.quote(out_dir)})")


def check_saved_options(out_dir: str, record_file: str, current: dict, defaults: dict | None = None,
                        required: bool = False) -> None:
    """Refuse a resume whose options (`current`) differ from those the run saved in
    OUT/`record_file` (see resume_check.py). A run without that file passes, unless `required`
    (the command has always written it: its absence means another version started the run)."""
    path = os.path.join(out_dir, record_file)
    if not os.path.isfile(path):
        if required:
            raise BertkitError(f"{out_dir} has checkpoints but no {record_file} to check the options against; "
                               "resume it with the bertkit version that started it, or use a new --out")
        return
    check_resume_options(loads_json(read_text(path), path), current, out_dir, defaults=defaults)


# ---------------------------------------------------------------------------- while it runs
def remove_leftovers(out_dir: str, keep_run: bool = True) -> None:
    """What a killed run left in `out_dir`: checkpoints and best models half written or half
    deleted (`.tmp-checkpoint-*`, `.tmp-best-*`), the temporary files of atomic writes
    (`.tmp-*-curves.png`, ...); unless `keep_run`, also its checkpoints and best model (.best)."""
    kept = () if keep_run else (".best", "checkpoint-")
    for name in os.listdir(out_dir):
        path = os.path.join(out_dir, name)
        if name.startswith((".tmp-checkpoint-", ".tmp-best-", *kept)):
            shutil.rmtree(path, ignore_errors=True)
        elif name.startswith(".tmp-") and os.path.isfile(path):
            os.remove(path)


@contextlib.contextmanager
def replacing(out_dir: str, replace: bool) -> Iterator[str]:
    """The directory the run writes: OUT itself, or when replacing a model a new sibling that
    takes OUT's place (`atomic_directory`) only once the run succeeded, so a failed or
    interrupted run leaves the old model as it was. Sibling leftovers of a killed run go first
    (the caller holds OUT's lock: no other run is using them)."""
    if not replace or not is_main_process():  # the other ranks of a distributed run write nothing
        yield out_dir
        return
    prefix = f".{os.path.basename(os.path.abspath(out_dir))}.new-"
    parent = os.path.dirname(os.path.abspath(out_dir))
    for leftover in glob.glob(os.path.join(glob.escape(parent), glob.escape(prefix) + "*")):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        with atomic_directory(out_dir, prefix=prefix) as tmp:
            yield tmp
    except RunInterrupted as e:
        raise RunInterrupted(f"interrupted; {out_dir} is unchanged: --overwrite replaces it only when the new run "
                             "completes, so the new run was discarded (run it again to replace the model)",
                             e.exit_code - 128) from None


# ---------------------------------------------------------------------------- at the end
def publish_best(out_dir: str, best_dir: str) -> None:
    """Drop the trainer's checkpoints (with optimizer state) and move the best model's files
    from `best_dir` into OUT (each rename is atomic)."""
    for name in os.listdir(out_dir):
        if name.startswith("checkpoint-"):
            shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
    for name in os.listdir(best_dir):
        os.replace(os.path.join(best_dir, name), os.path.join(out_dir, name))
    shutil.rmtree(best_dir, ignore_errors=True)
