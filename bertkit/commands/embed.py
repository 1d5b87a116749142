"""`bertkit embed --model DIR --input FILE --output FILE.npy`: sentence embeddings, one per line
(or, for a CSV, TSV or JSONL table, one per row of its text column: `--text-column`).

The pooling the model directory names (a sentence-transformers layout: cls, mean, max, ...,
with or without normalisation); a plain model directory gets mean pooling over real tokens and
L2 normalisation, so a dot product of two rows is their cosine similarity.

A folder of .txt files is embedded one file a row, in sorted path order, and the files' paths
(relative to the folder) are written beside the vectors, `vectors.npy` -> `vectors.files.txt`,
line i + 1 naming row i; both files are renamed into place together.

Row i of the output is line i + 1 of the input, always: a blank or whitespace-only line has
no tokens to pool, so its row is all zeros (cosine 0 with everything; a note says how many)
rather than being dropped, which would shift every later row. Lines are split at "\\n" only.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import numpy as np

from bertkit.errors import ConfigError
from bertkit.inference.encode import SentenceEncoder
from bertkit.io import atomic_open
from bertkit.tasks.formats import read_text_inputs
from bertkit.tokenizer.coverage import warn_about_unknown_texts
from bertkit.commands.options import (add_device, add_int8, add_precision, add_progress, at_least, check_output_files,
                                      device_of, precision_of, replacing_note, resolve_models)


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="model directory (weights + tokenizer)")
    parser.add_argument("--input", required=True, help="UTF-8 text file, one text per line; a .csv, .tsv or "
                                                       ".jsonl table: one text per row of --text-column; or a "
                                                       "folder of .txt files, one text each (their names: "
                                                       "OUTPUT.files.txt)")
    parser.add_argument("--text-column", default="text", help="the column a table's texts are in (default: text)")
    parser.add_argument("--output", required=True, help="where to write the (n, hidden) float32 .npy")
    parser.add_argument("--batch-size", type=at_least(1), default=32)
    parser.add_argument("--max-length", type=at_least(3), default=None,  # [CLS], [SEP] and one token
                        help="truncation length (default: the model's max_seq_length, else 256)")
    parser.add_argument("--no-normalize", action="store_true", help="keep the raw pooled vectors")
    add_int8(parser)
    add_device(parser)
    add_precision(parser)
    add_progress(parser)


NAMES_SUFFIX = ".files.txt"  # beside vectors.npy: the file of each row, for a folder of texts


def names_file(output: str) -> str:
    """Where the file names of a folder's vectors go: vectors.npy -> vectors.files.txt."""
    return os.path.splitext(output)[0] + NAMES_SUFFIX


def check_names_file(source: str, output: str) -> None:
    """A folder's vectors are not written inside it (their file names, a .txt, would be a text of the
    next run); an earlier folder's names beside vectors of a file would name rows they are not."""
    names = names_file(output)
    if os.path.isdir(source) and os.path.realpath(names).startswith(os.path.realpath(source) + os.sep):
        raise ConfigError(f"--output {output} is inside --input {source}: the names of its rows ({names}) would be "
                          "read as a text next time; write the vectors outside the folder")
    if not os.path.isdir(source) and os.path.exists(names):
        warnings.warn(f"{names} names the rows of an earlier folder's vectors, not these (one row per text of "
                      f"{source}): remove it", stacklevel=2)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    check_output_files(args)  # before any work: a folder, or a file the command reads
    replaced = replacing_note(args.output)
    check_names_file(args.input, args.output)
    inputs = read_text_inputs(args.input, args.text_column)  # before loading the model: bad input fails fast
    texts, files = [e.text for e in inputs], [e.file for e in inputs if e.file]
    device = device_of(args)
    encoder = SentenceEncoder.from_pretrained(args.model, quantize="int8" if args.int8 else None, device=device,
                                              precision=args.precision)
    precision_of(args, device)  # checked for the device and said, before the model runs
    warn_about_unknown_texts(texts, encoder.tokenizer, args.model, f"texts of {args.input}")
    kept = [i for i, text in enumerate(texts) if text.strip()]
    found = encoder.encode([texts[i] for i in kept], batch_size=args.batch_size, max_length=args.max_length,
                           normalize=False if args.no_normalize else None,  # None: as the model says
                           show_progress=False if args.no_progress else None)
    vectors = np.zeros((len(texts), found.shape[1]), dtype=found.dtype)
    vectors[kept] = found
    if len(kept) < len(texts):
        blank = "empty file(s) got all-zero rows" if files else "blank line(s) got all-zero rows (row i is still line i + 1)"
        warnings.warn(f"{args.input}: {len(texts) - len(kept)} {blank}")
    names = names_file(args.output) if files else None
    with contextlib.ExitStack() as stack:  # the vectors and their file names renamed into place together
        np.save(stack.enter_context(atomic_open(args.output, "wb")), vectors.astype(np.float32))
        if names:
            stack.enter_context(atomic_open(names, "w", encoding="utf-8")).writelines(f + "\n" for f in files)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {os.path.abspath(args.output)}{replaced}")
    if names:
        print(f"row i is the file on line i + 1 of {os.path.abspath(names)}")
    return 0
