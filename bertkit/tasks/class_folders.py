"""Texts kept as files: a folder of class folders read as a labelled set (each .txt file one text,
its folder's name its label), or any folder of .txt files read as unlabelled texts.

    reviews/pos/0001.txt         text: the file's text (stripped), label: "pos"
    reviews/pos/more/0002.txt    a file deeper in a class folder is of that class too
    reviews/neg/0003.txt         label: "neg"

This is how BBC News ships here, and what scikit-learn's `load_files` and Keras'
`text_dataset_from_directory` read: one's own documents are often kept so. Files are read in
sorted order (class, then path), numbered from 1 as a file's lines would be. Hidden files and
folders are skipped; other files (not .txt, or directly in the top folder, with no class) are left
out with a warning naming a few. Every file must be UTF-8 and hold some text: the refusal names
each one that is not (up to a few), before any work starts. Folder names are class names even
when they are numbers ("0", "1", star ratings), never a regression target.

Read unlabelled (`predict`, `nearest`), every .txt file under the folder is a text, at any depth,
in sorted path order (a class folder's files in the order read labelled), named in each output row
by its path relative to the folder; an empty file is a blank text, with a blank row.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

from bertkit.errors import DataError, EncodingError
from bertkit.io import read_text
from bertkit.tasks.tables import is_saved_dataset

SUFFIX = ".txt"
SHOWN = 3  # files named in a refusal; the rest are counted
LISTED = 10  # files named in a warning of files left out (a Thumbs.db among a few .html files is named)


@dataclass
class ClassFile:
    number: int  # 1-based, in the sorted order
    path: str  # relative to the top folder, e.g. "pos/0001.txt"
    text: str
    label: str | None  # None: read unlabelled (read_text_files)


def is_class_folder(path: str) -> bool:
    """A directory that is not one saved by `datasets` (tables.py reads those)."""
    return os.path.isdir(path) and not is_saved_dataset(path)


def _visible(name: str) -> bool:
    return not name.startswith(".")


def _walk(folder: str, top: str) -> tuple[list[str], list[str]]:
    """(the .txt files, the other files) under `folder`, relative to `top`, sorted."""
    texts, others = [], []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if _visible(d))  # in place: os.walk then skips hidden folders, in order
        for name in sorted(filter(_visible, files)):
            relative = os.path.relpath(os.path.join(root, name), top)
            (texts if name.lower().endswith(SUFFIX) else others).append(relative)
    return sorted(texts), sorted(others)  # by path: a/x.txt before b.txt, which os.walk gives first


def _listed(paths: list[str], shown: int = SHOWN) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def one_class_error(top: str, label: str) -> DataError:
    """The refusal to train on (or split) a folder whose texts are in one class folder: most often the
    folder above the class folders was given, and its one folder holds them."""
    inner = sorted(name for name in os.listdir(os.path.join(top, label))
                   if _visible(name) and os.path.isdir(os.path.join(top, label, name)))
    hint = (f"; {os.path.join(top, label)} holds the folders {_listed(inner)}: if those are the classes, give "
            f"{os.path.join(top, label)}") if inner else ""
    return DataError(f"{top} holds texts in one class folder only, {label!r}: a classifier needs at least two "
                     f"classes{hint}")


def list_class_files(top: str) -> list[tuple[str, str]]:
    """(relative path, label) of every .txt file in `top`'s class folders, sorted; warns about
    what is left out, refuses a folder with no class folder or no .txt file in them."""
    entries = sorted(filter(_visible, os.listdir(top)))
    classes = [name for name in entries if os.path.isdir(os.path.join(top, name))]
    loose = [name for name in entries if name not in classes]
    if not classes:
        raise DataError(f"{top} is a directory with no class folders in it; for a labelled set put each class's "
                        f"{SUFFIX} files in a folder named by the class ({top}/CLASS/*{SUFFIX}), or give a .csv, "
                        ".tsv or .jsonl file")
    found, left_out, empty = [], list(loose), []
    for label in classes:
        texts, others = _walk(os.path.join(top, label), top)
        found += [(path, label) for path in texts]
        left_out += others
        if not texts:
            empty.append(label)
    if not found:
        raise DataError(f"{top}: its class folders ({_listed(classes)}) hold no {SUFFIX} file; each text is one "
                        f"{SUFFIX} file in its class's folder ({top}/CLASS/NAME{SUFFIX})")
    if left_out:
        warnings.warn(f"{top}: {len(left_out)} file(s) left out, not {SUFFIX} or in no class folder: "
                      f"{_listed(left_out, LISTED)}", stacklevel=3)
    if empty:
        warnings.warn(f"{top}: no class from the folder(s) {_listed(empty, LISTED)}: they hold no {SUFFIX} file",
                      stacklevel=3)
    return found


def list_text_files(top: str) -> list[str]:
    """Every .txt file under `top` at any depth (class folders or not), sorted; warns about the
    other files, refuses a folder with none."""
    found, others = _walk(top, top)
    if not found:
        raise DataError(f"{top} is a directory with no {SUFFIX} file in it; give the texts as a file (.txt: one text "
                        f"per line, .csv, .tsv, .jsonl) or as {SUFFIX} files in the folder, one text each")
    if others:
        warnings.warn(f"{top}: {len(others)} file(s) left out, not {SUFFIX}: {_listed(others, LISTED)}", stacklevel=3)
    return found


def read_class_folder(top: str) -> list[ClassFile]:
    """Every text of `top`'s class folders (module docstring), or one DataError naming the files
    that are not UTF-8 or hold no text."""
    return _read(top, list_class_files(top), blank_allowed=False)


def read_text_files(top: str) -> list[ClassFile]:
    """Every .txt file under `top` as an unlabelled text (label None), for predict and search: an
    empty file is a text too (its row says so), a file that is not UTF-8 is refused."""
    return _read(top, [(path, None) for path in list_text_files(top)], blank_allowed=True)


def _read(top: str, listed: list[tuple[str, str | None]], blank_allowed: bool) -> list[ClassFile]:
    read, not_utf8, blank = [], [], []  # not_utf8: (path, whether UTF-16)
    for number, (path, label) in enumerate(listed, 1):
        try:
            text = read_text(os.path.join(top, path)).replace("\r\n", "\n").strip()  # a Windows copy: the same text
        except EncodingError as err:  # UTF-16 (Notepad's "Unicode") needs another iconv than cp1252
            not_utf8.append((path, "UTF-16" in str(err)))
            continue
        if text or blank_allowed:
            read.append(ClassFile(number, path, text, label))
        else:
            blank.append(path)
    if not_utf8:
        source = "utf-16" if all(utf16 for _, utf16 in not_utf8) else "cp1252"
        named = [path + (" (UTF-16)" if utf16 else "") for path, utf16 in not_utf8]
        raise EncodingError(f"{top}: {len(named)} file(s) are not UTF-8: {_listed(named)}; re-encode each as "
                            f"UTF-8, e.g. iconv -f {source} -t utf-8 FILE > FILE.new && mv FILE.new FILE (-f utf-16 for "
                            "a UTF-16 file, -f cp1252 for a Windows one, -f latin1 for ISO-8859-1)")
    if blank:
        raise DataError(f"{top}: {len(blank)} file(s) hold no text: {_listed(blank)}; remove them or fill them in")
    return read
