"""File helpers: atomic writes (a reader, or a crash, never sees a half-written file) and the
checked readers every data file goes through.

Reading: `check_regular_file` refuses FIFOs, sockets and devices before anything is read (a FIFO
blocks forever, /dev/zero never ends); `iter_text_lines` streams UTF-8 lines with a bounded
length and names the file and line of a byte that is not UTF-8; `read_text` does the same for a
whole file; `loads_json` refuses a key given twice in one object instead of keeping the last.
A UTF-8 byte-order mark at the start of a file is dropped (Excel and Notepad write one).

Each writer writes to a temporary file in the same directory, flushes it to disk and then
renames it over the target; rename within one filesystem is atomic on POSIX and Windows. A write
that fails (no space, no permission, a read-only file system) removes the temporary file, leaves
the target as it was and raises `WriteError`, one line naming the path and what to do
(`write_error`; the CLI prints any other OSError the same way).
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import difflib
import errno
import itertools
import json
import os
import shlex
import shutil
import stat
import tempfile
import warnings
from typing import IO, Any, Iterator

from bertkit.errors import BertkitError, DataError, EncodingError, WriteError

# The longest line a streaming read accepts. One line is one record (a text, a JSON object);
# a whole novel is about 1 MB, so 16 MiB is no real text's limit, and it bounds the memory a
# file without newlines (or a mistaken binary file) can take.
MAX_LINE_BYTES = 16 * 2**20


# errno -> (what happened, what to do): the ways a write fails that a user can do something about.
WRITE_FAILURES = {
    errno.ENOSPC: ("no space left on the device", "free some space or write to another disk"),
    errno.EDQUOT: ("the disk quota is used up", "free some space or write to another disk"),
    errno.EFBIG: ("the file is larger than this file system allows", "write to another file system"),
    errno.EACCES: ("no permission to write there", "write to a directory you may write to, or change its "
                   "permissions"),
    errno.EPERM: ("the operation is not permitted there", "write to a directory you own"),
    errno.EROFS: ("the file system is read-only", "write to a writable place"),
}


def write_error(path: str | os.PathLike, err: OSError) -> WriteError:
    """`err`, raised while writing `path`, as one line: the path, what happened, what to do."""
    meaning, fix = WRITE_FAILURES.get(err.errno, (err.strerror or str(err), "check the path and the disk"))
    code = errno.errorcode.get(err.errno, "") if err.errno else ""
    return WriteError(f"cannot write {os.fspath(path)}: {meaning}{f' ({code})' if code else ''}; {fix}",
                      err.errno, os.fspath(path), meaning)


def describe_os_error(err: OSError) -> str:
    """Any OSError as one line naming its path. Only a write fails with no space or a read-only
    file system: those say what to do (write_error); a denied permission may be a read too."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS) and err.filename is not None:
        return str(write_error(os.fsdecode(err.filename), err))
    where = f"{os.fsdecode(err.filename)}: " if err.filename is not None else ""
    fix = "; check its permissions, or choose another path" if err.errno in (errno.EACCES, errno.EPERM) else ""
    return f"{where}{err.strerror or err}{fix}"


def _concerns(err: OSError, place: str) -> bool:
    """Whether `err` is about writing at `place` (a directory): raised on an open file (no name),
    or naming `place`, something inside it, or a parent being made. An error naming another
    file (one the caller reads while writing) is the caller's."""
    if isinstance(err, WriteError):
        return True
    if err.filename is None:
        return True
    name, where = os.path.abspath(os.fsdecode(err.filename)), os.path.abspath(place)
    return name == where or name.startswith(where + os.sep) or where.startswith(name + os.sep)


@contextlib.contextmanager
def _writing(path: str, place: str, around_caller: bool = False) -> Iterator[None]:
    """An OSError about writing at `place` becomes a WriteError naming `path`; others pass.
    `around_caller`: the block runs the caller's code too, so only the failures of a write
    (WRITE_FAILURES) are taken, not, say, a missing file it reads."""
    try:
        yield
    except OSError as err:
        if not _concerns(err, place) or (around_caller and err.errno not in WRITE_FAILURES
                                          and not isinstance(err, WriteError)):
            raise
        raise write_error(path, err) from err


def make_output_dir(directory: str | os.PathLike) -> str:
    """Create `directory` (and its parents) for a save_pretrained; a file already at that path is
    a WriteError saying so, where os.makedirs raised a bare FileExistsError."""
    directory = os.fspath(directory)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise WriteError(f"cannot save into {directory}: it is a file, not a directory; save_pretrained writes "
                         "several files into a directory: pass a new or existing directory path",
                         errno.EEXIST, directory, "a file is in the way")
    with _writing(directory, directory):
        os.makedirs(directory, exist_ok=True)
    return directory


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary sibling of `path` for writing; on success it replaces `path`. A failed
    write (no space, no permission, read-only) leaves `path` as it was and raises WriteError."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    with _writing(path, directory):
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=directory)
    try:
        with _writing(path, directory):
            # mkstemp makes the file private (0600); give it the permissions open() would have.
            os.chmod(tmp, 0o666 & ~_umask())
        with _writing(path, directory, around_caller=True), os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        with _writing(path, directory):
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
    with _writing(path, parent):
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        with _writing(path, parent):
            os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private (0700); give it mkdir's mode
        with _writing(path, tmp, around_caller=True):  # a file written inside: named by the directory it is for
            yield tmp
        with _writing(path, parent):
            if os.path.exists(path):
                old = tmp + "-old"
                os.replace(path, old)
                try:
                    os.replace(tmp, path)
                except BaseException:
                    os.replace(old, path)  # the earlier result goes back where it was
                    raise
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


def append_text(path: str | os.PathLike, text: str) -> None:
    """Append `text` to a log (metrics rows): not atomic, as rewriting a log per row would cost
    O(rows^2); a crash cuts at most the last line. A failed write raises WriteError."""
    path = os.fspath(path)
    with _writing(path, os.path.dirname(path) or "."), open(path, "a", encoding="utf-8") as f:
        f.write(text)


def check_regular_file(path: str | os.PathLike) -> str:
    """`path` as a str if it names a regular file (after following symlinks), else DataError.

    Checked before opening: opening a FIFO for reading blocks until a writer appears, and a
    device such as /dev/zero never reaches end of file.
    """
    path = os.fspath(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise missing_file(path) from None
    except OSError as err:
        raise DataError(f"{path}: cannot read it ({err.strerror})") from None
    if stat.S_ISDIR(mode):
        raise DataError(f"{path} is a directory; give a file")
    if not stat.S_ISREG(mode):
        raise DataError(f"{path} is not a regular file (a FIFO, socket or device); give a regular file")
    return path


def nearest_sibling(path: str | os.PathLike) -> str | None:
    """The path of the name in `path`'s folder closest to its own when one is close (data/trian.csv,
    train.cvs, Train.csv -> data/train.csv; runs/mien -> runs/mine), else None."""
    folder, name = os.path.split(os.fspath(path).rstrip(os.sep))
    try:
        names = os.listdir(folder or ".")
    except OSError:  # the folder is missing too (or unreadable): nothing to suggest
        names = []
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return os.path.join(folder, close[0]) if close else None


def missing_file(path: str | os.PathLike) -> DataError:
    """The error for a file that is not there: "PATH: no such file", with the nearest name in its
    folder when one is close ("did you mean data/train.csv?")."""
    near = nearest_sibling(path)
    return DataError(f"{path}: no such file" + (f"; did you mean {near}?" if near else ""))


def _decode(raw: bytes, path: str, first_line: int) -> str:
    """UTF-8 bytes (starting at line `first_line` of `path`) as text, else EncodingError naming
    the line and byte."""
    if first_line == 1 and raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise EncodingError(f"{path} is UTF-16 (it starts with UTF-16's byte-order mark); re-encode it as UTF-8: "
                            "iconv -f utf-16 -t utf-8")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = first_line + raw.count(b"\n", 0, err.start)
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise EncodingError(
            f"{path}: line {line} is not UTF-8 (byte {raw[err.start:err.start + 1]!r} at byte {column} "
            "of the line); re-encode the file as UTF-8, e.g. iconv -f cp1252 -t utf-8 (a Windows or Excel "
            "file; -f latin1 for ISO-8859-1)") from None
    if "\x00" in text:  # valid UTF-8, but no text holds NUL: UTF-16 without its byte-order mark
        line = first_line + text.count("\n", 0, text.index("\x00"))
        raise EncodingError(f"{path}: line {line} holds NUL bytes: the file is probably UTF-16 (Windows "
                            "\"Unicode\"); re-encode it as UTF-8: iconv -f utf-16le -t utf-8")
    return text


def iter_text_lines(path: str | os.PathLike, keepends: bool = False,
                    max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, str]]:
    """Yield (line_number, line) of a UTF-8 text file, streamed, lines split at "\\n".

    Without `keepends` the line ending ("\\n" or "\\r\\n") is removed. A line longer than
    `max_line_bytes` raises DataError instead of being read without bound.
    """
    path = check_regular_file(path)
    with open(path, "rb") as handle:
        line_number = 0
        while raw := handle.readline(max_line_bytes + 1):
            line_number += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise DataError(f"{path}: line {line_number} is longer than {max_line_bytes:,} bytes; "
                                "put one record per line (is this a text file?)")
            if line_number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            line = _decode(raw, path, line_number)
            yield line_number, line if keepends else line.rstrip("\r\n")


def text_file_lines(path: str | os.PathLike) -> list[tuple[int, str]]:
    """(line number, line) of a text file of one input per line, blank lines too. A carriage
    return inside a line (old Mac line ends, CR only) would make the whole file one input."""
    lines = list(iter_text_lines(path))
    for number, line in lines:
        if "\r" in line:
            raise DataError(f"{path}: line {number} holds a carriage return (\\r) inside it: the file ends its lines "
                            f"with CR alone (old Mac); convert it: tr '\\r' '\\n' < {shlex.quote(os.fspath(path))} "
                            "> fixed.txt")
    return lines


def read_text(path: str | os.PathLike) -> str:
    """A whole UTF-8 text file (a leading byte-order mark dropped), else DataError naming the line."""
    path = check_regular_file(path)
    with open(path, "rb") as handle:
        raw = handle.read()
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    return _decode(raw, path, 1)


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """json object hook: a key given twice is an error (json keeps the last one silently)."""
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return record


def loads_json(text: str, path: str, line: int | None = None) -> Any:
    """json.loads refusing duplicate keys; errors are DataErrors naming `path` and the line
    (`line` for one JSON-lines record, else the line of the syntax error in the whole file)."""
    where = f"line {line}" if line is not None else "an object"
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as err:
        raise DataError(f"{path}: {where} gives the key {err.args[0]!r} twice; keep one") from None
    except json.JSONDecodeError as err:
        if line is None:
            raise DataError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
        raise DataError(f"{path}: line {line} is not valid JSON ({err.msg}); fix or remove the line") from None
    except RecursionError:
        raise DataError(f"{path}: {'line %d: ' % line if line else ''}JSON nested too deeply") from None


def same_path(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file or folder (links and ".." resolved)."""
    return os.path.realpath(a) == os.path.realpath(b)


# The name of each JSON value's kind, for "must hold a JSON object, not ...".
_JSON_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true/false",
               type(None): "null"}


def read_json_object(path: str | os.PathLike, fix: str, error: type[BertkitError] = DataError) -> dict:
    """A JSON file that must hold one object (config.json, tokenizer files, a shard index, a
    shard directory's meta.json): the object, else `error` naming the path, what is wrong and
    `fix`, what to do. Refused like every checked read: a FIFO or device, a byte that is not
    UTF-8, invalid JSON, a key given twice, and valid JSON that is not an object."""
    path = os.fspath(path)
    try:
        data = loads_json(read_text(path), path)
    except DataError as err:
        raise error(f"{err}; {fix}") from None
    except OSError as err:  # no permission to read it, an I/O error
        raise error(f"cannot read {path} ({err.strerror or err}); {fix}") from None
    if not isinstance(data, dict):
        raise error(f"{path} must hold a JSON object ({{...}}), not {_JSON_KINDS.get(type(data), 'that')}; {fix}")
    return data


def iter_jsonl(path: str | os.PathLike, blanks: bool = False) -> Iterator[tuple[int, dict | None]]:
    """Yield (line_number, object) from a JSON-lines file, streamed; blank lines are skipped, or
    with `blanks` (predict's inputs: one row per line) yielded as (line_number, None).

    A line that is not JSON, not a JSON object, or gives a key twice raises DataError naming
    the file and line.
    """
    path = os.fspath(path)
    for line_number, line in iter_text_lines(path):
        if not line.strip():
            if blanks:
                yield line_number, None
            continue
        if line.lstrip().startswith("["):  # a record is an object: this is a JSON array
            raise DataError(f"{path}: line {line_number} opens a JSON array; each line must be one JSON object. "
                            + json_lines_fix(path))
        if line.strip() == "{":  # the first line of an object pretty-printed over many lines
            raise DataError(f"{path}: line {line_number} is '{{' alone: the file holds JSON written over several "
                            f"lines. {json_lines_fix(path)}")
        record = loads_json(line, path, line_number)
        if not isinstance(record, dict):
            raise DataError(f"{path}: line {line_number} must be a JSON object, "
                            f"got {type(record).__name__}")
        yield line_number, record


def json_lines_fix(path: str) -> str:
    """How to turn a JSON array (or pretty-printed objects) into JSON lines, one object per line."""
    out = shlex.quote(os.path.splitext(path)[0] + "-lines.jsonl")
    return (f"JSON lines hold one whole object per line: convert the file with  jq -c '.[]' {shlex.quote(path)} > {out}  "
            f"(an array) or  jq -c . {shlex.quote(path)} > {out}  (objects)")


def is_json_array(path: str) -> bool:
    """Whether a file's first non-blank character opens a JSON array."""
    try:
        with open(path, "rb") as f:
            return f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"["
    except OSError:
        return False


def _fields(text: str, delimiter: str) -> int:
    return len(next(csv.reader([text], delimiter=delimiter)))


def _rows_inside(value: str, column: int, width: int, delimiter: str) -> list[str]:
    """The lines of a multi-line field in `column` (0-based) that look like what a quote left
    open swallows: the first line holds the rest of its own row (width - column fields), and
    later lines parse as whole rows of the header's width. Empty for a text that merely runs
    over lines."""
    first, *inner = value.split("\n")
    if _fields(first, delimiter) != width - column:
        return []
    return [text for text in inner if text.strip() and _fields(text, delimiter) == width]


class _OpenQuotes:
    """Records that began on one line and hold lines that look like rows of their own (`_rows_inside`).
    Unclosed to the end of the file (fields missing): an error at once. Closed by a later quote: one
    warning at the end of the file, and only when such a line's other fields are values that column
    holds in the file (a label), since a real multi-line text may hold the delimiter on every line:
    an article whose headline and a paragraph each hold one comma is not a stray quote."""

    SHORT = 100  # longer values (texts) are never a swallowed row's label: not kept
    FIX = 'close the quote, and write a quote inside a quoted field as two ("")'

    def __init__(self, path: str, width: int, delimiter: str):
        self.path, self.width, self.delimiter = path, width, delimiter
        self.seen: list[set[str]] = [set() for _ in range(width)]
        self.suspects: list[tuple[int, int, list[str]]] = []  # (first line, column, swallowed lines)

    def see(self, values: list[str]) -> None:
        for column, value in enumerate(values[:self.width]):
            if len(value) <= self.SHORT:
                self.seen[column].add(value.strip())

    def check(self, row: dict, first_line: int) -> None:
        unclosed = any(value is None for value in row.values())  # the file ended inside the quote
        for column, value in enumerate(row.values()):
            if not (isinstance(value, str) and "\n" in value):
                continue
            swallowed = _rows_inside(value, column, self.width, self.delimiter)
            if swallowed and unclosed:
                raise DataError(f"{self.path}: the quote opened on line {first_line} is never closed, so the "
                                f"{len(swallowed)} rows after it (e.g. {swallowed[0][:60]!r}) were read as one text; "
                                f"{self.FIX}")
            if swallowed and len(self.suspects) < 100:
                self.suspects.append((first_line, column, swallowed))

    def _looks_like_rows(self, column: int, swallowed: list[str]) -> list[str]:
        rows = []
        for text in swallowed:
            fields = next(csv.reader([text], delimiter=self.delimiter))
            if any(fields[other].strip() and fields[other].strip() in self.seen[other]
                   for other in range(self.width) if other != column):
                rows.append(text)
        return rows

    def warn(self) -> None:
        """The first record whose swallowed lines look like the file's rows, once per file."""
        for first_line, column, swallowed in self.suspects:
            rows = self._looks_like_rows(column, swallowed)
            if rows:
                what = "a line that looks like a row" if len(rows) == 1 else f"{len(rows)} lines that look like rows"
                warnings.warn(f"{self.path}: the quoted text that starts on line {first_line} runs over several lines "
                              f"and holds {what} (e.g. {rows[0][:60]!r}); if the quote should have closed on line "
                              f"{first_line}, {self.FIX}", stacklevel=4)
                return


def _unquoted(field: str) -> str:
    """A TSV field written with CSV quoting (Excel, pandas and Python's csv wrap a field that holds
    a quote in quotes and double the quote inside) as its text; any other field as it is (TSV is
    read without quoting, so a lone quote inside a text is text)."""
    inner = field[1:-1]
    if len(field) >= 2 and field[0] == field[-1] == '"' and '"' not in inner.replace('""', ""):
        return inner.replace('""', '"')
    return field


def _as_row(values: list[str], fieldnames: list[str]) -> dict:
    """A record as csv.DictReader gives it: the header's names; the fields a short row lacks as
    None, the extra fields of a long one as a list under None."""
    row: dict = dict(zip(fieldnames, values))
    if len(values) > len(fieldnames):
        row[None] = values[len(fieldnames):]
    row.update({name: None for name in fieldnames[len(values):]})
    return row


def _tsv_quote_advice(delimiter: str, values: list[str]) -> str | None:
    """TSV is read without quoting (a quote is text): a field that a CSV writer quoted because it
    holds a tab or a line break cannot be read back; said when a field starts with a quote."""
    if delimiter == "\t" and any(value.startswith('"') for value in values):
        return ("bertkit reads TSV without quoting, so a field cannot hold a tab or a line break, even in quotes: "
                "remove them from the texts, or save the file as .csv")
    return None


def csv_delimiter(header: str, delimiter: str) -> str:
    """The delimiter a CSV/TSV file is read with, from its header line and the one its extension
    names: a ".csv" whose header holds ';' and no ',' is a spreadsheet's in a European locale (Excel
    writes ';' there), one whose header holds tabs and no ',' a TSV saved under .csv. A tab means
    TSV's reading: no quoting (`iter_csv_rows`)."""
    if delimiter == "," and ";" in header and "," not in header:
        return ";"
    if delimiter == "," and "\t" in header and "," not in header:
        return "\t"
    return delimiter


def iter_csv_rows(path: str | os.PathLike, delimiter: str, blanks: bool = False
                  ) -> Iterator[tuple[int, dict | None, list]]:
    """Yield (line_number, row_dict, fieldnames) from a CSV/TSV file with a header row, the line
    where each row starts; an empty line is skipped, or with `blanks` (predict's inputs: one row per
    line) yielded as (line_number, None, fieldnames). A ".csv" whose header holds ';' and no ',' is
    read with ';' (a spreadsheet in a European locale), one whose header holds tabs and no ',' as
    TSV; a TSV field in CSV quoting is unquoted (`_unquoted`)."""
    path = os.fspath(path)
    # csv's default field limit (131,072 characters) is below a long article; a field may be
    # as long as the longest line we stream. Raised, never lowered: the limit is process-wide.
    csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_BYTES))
    lines = (line for _, line in iter_text_lines(path, keepends=True))
    header = next(lines, "")
    delimiter = csv_delimiter(header, delimiter)
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    reader = csv.reader(itertools.chain([header], lines), delimiter=delimiter, quoting=quoting)
    try:
        fieldnames = next(reader, [])
        if not fieldnames:
            raise DataError(f"{path}: file is empty; expected a header row naming the columns")
        repeated = sorted({name for name in fieldnames if fieldnames.count(name) > 1})
        if repeated:
            raise DataError(f"{path}: line 1 names the column {repeated[0]!r} twice; rename or remove one")
        first_line, quotes = reader.line_num + 1, _OpenQuotes(path, len(fieldnames), delimiter)
        for values in reader:
            line, first_line = first_line, reader.line_num + 1  # this row's first line; the next row's
            if not values or (len(fieldnames) > 1 and values == [values[0]] and not values[0].strip()):  # a blank line
                if blanks:
                    yield line, None, fieldnames
                continue
            row = _as_row(values, fieldnames)
            quotes.see(values)
            if reader.line_num > line:  # a quoted field ran over several lines: legitimate, or a quote left open
                quotes.check(row, line)
            if None in row:
                advice = _tsv_quote_advice(delimiter, values) or "quote fields that contain the delimiter"
                raise DataError(f"{path}: line {line} has {len(values)} fields but the header has {len(fieldnames)}; "
                                + advice)
            if any(value is None for value in row.values()):
                advice = _tsv_quote_advice(delimiter, values)
                raise DataError(f"{path}: line {line} has fewer fields than the {len(fieldnames)} in the header"
                                + (f"; {advice}" if advice else ""))
            if quoting == csv.QUOTE_NONE:
                row = {name: _unquoted(value) for name, value in row.items()}
            yield line, row, fieldnames
        quotes.warn()
    except csv.Error as err:
        if "new-line character" in str(err):  # a bare CR (old Mac line end) inside a line; csv's advice is Python's
            raise DataError(f"{path}: line {max(reader.line_num, 1)} "
                            "holds a carriage return (\\r) alone: the file ends lines with CR (old Mac) or has one "
                            "inside a text; convert CR to line feeds (tr '\\r' '\\n') or remove them (tr -d '\\r')"
                            ) from None
        raise DataError(f"{path}: line {reader.line_num} is not valid {'TSV' if delimiter == chr(9) else 'CSV'} "
                        f"({err})") from None
