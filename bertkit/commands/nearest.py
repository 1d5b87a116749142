"""`bertkit nearest --model DIR --corpus FILE "query" ...`: the corpus texts nearest each query.

Search with a sentence-embedding model (one fine-tuned with `finetune --task embedding`, any
sentence-transformers directory, or a plain encoder: mean pooling): the corpus (a .txt, one text
per line, a table's text column, or a folder of .txt files, one text each) and the queries are
embedded as `bertkit embed` embeds them, and each query's `--top` corpus texts by cosine are
printed, best first, with their line (or a table's row) number, or a folder's file. `--output FILE.jsonl`
also writes one JSON line per query: {"query", "matches": [{"rank", "index", ("file",) "score",
"text"}]}, row i for query i (a blank query line's row has no matches); an output named .csv or
.tsv is a table of one row per match (query_index, query, rank, index, (file,) score, text).
Blank corpus lines (and empty files) are never matched.

The corpus is embedded at every call (minutes for 50,000 texts on a CPU) unless
`--corpus-embeddings FILE.npy` gives its vectors, written once by `bertkit embed --model DIR --input
CORPUS --output FILE.npy`: one row per corpus line, checked against the corpus and the model (row
count, width, and 8 texts spread over the corpus embedded again) before they are used.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bertkit.errors import DataError
from bertkit.inference.encode import SentenceEncoder
from bertkit.io import atomic_open, check_regular_file
from bertkit.tasks.formats import TABLE_SUFFIXES, read_text_inputs, read_texts
from bertkit.table_output import rows_writer, table_delimiter
from bertkit.tasks.retrieval import top_matches
from bertkit.tasks.tables import is_table
from bertkit.tokenizer.coverage import warn_about_unknown_texts
from bertkit.commands.options import (add_device, add_precision, at_least, check_output_files, device_of, precision_of,
                                      resolve_models)

CHECKED_ROWS = 8  # corpus texts embedded again to check a --corpus-embeddings file


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="sentence-embedding model directory")
    parser.add_argument("--corpus", required=True, help="the texts to search: a .txt (one per line), a .csv, "
                                                        ".tsv or .jsonl table (its --text-column), or a folder of "
                                                        ".txt files (one text each)")
    parser.add_argument("queries", nargs="*", help="query texts (or --queries FILE)")
    parser.add_argument("--queries", dest="query_file", help="a file of queries, one per line (or a table)")
    parser.add_argument("--text-column", default="text", help="the column a table's texts are in (default: text)")
    parser.add_argument("--top", type=at_least(1), default=5, help="matches per query")
    parser.add_argument("--output", help="also write the matches: JSON lines, one per query; a .csv or .tsv "
                                         "name: one row per match")
    parser.add_argument("--corpus-embeddings", metavar="FILE.npy",
                        help="the corpus's vectors from `bertkit embed` with this model (not embedded again)")
    add_device(parser)
    add_precision(parser)


def read_queries(args) -> list[str]:
    """Every query, blank ones too (their rows have no matches: row i of --output is query i)."""
    queries = list(args.queries) + (read_texts(args.query_file, args.text_column) if args.query_file else [])
    if not any(q.strip() for q in queries):
        raise DataError("no query: give query texts after the options, or --queries FILE")
    return queries


def rewrite_advice(path: str, corpus_path: str) -> str:
    """How to write the corpus's vectors again: to a file named after the corpus, not over `path`
    unless it is that file (walk X: the advice named the .npy given, so a user who had passed
    docs.csv's vectors with texts.txt was told to write texts.txt's over them)."""
    own = os.path.splitext(os.path.normpath(corpus_path))[0] + ".npy"
    advice = f"write it again: bertkit embed --model MODEL --input {corpus_path} --output {own}"
    if os.path.abspath(own) == os.path.abspath(path):
        return advice
    return f"{advice}, then --corpus-embeddings {own} ({path} may be the vectors of another corpus: kept)"


def saved_vectors(path: str, corpus_path: str, corpus: list[str], kept: list[int], encoder,
                  lines: list[int | str | None] | None = None) -> np.ndarray:
    """The kept rows of `bertkit embed`'s .npy of the corpus, L2-normalised, after checking that it
    is a float array with a row per corpus line and the model's width, and that CHECKED_ROWS texts
    spread over the corpus (first and last included) embed again to their rows: the file was
    written from this corpus by this model (an edit elsewhere is not seen: embed again after one).
    `lines`: the line each corpus text starts on (or its file in a folder), to name a text that fails."""
    check_regular_file(path)  # a FIFO would block the read
    try:  # mapped: a header that claims more rows than the file holds is an error, not a huge allocation
        saved = np.load(path, allow_pickle=False, mmap_mode="r")  # never unpickle
    except (OSError, ValueError) as err:
        raise DataError(f"--corpus-embeddings {path}: not a .npy array that bertkit embed writes ({err})") from None
    fix = rewrite_advice(path, corpus_path)
    if saved.ndim != 2 or not np.issubdtype(saved.dtype, np.floating):
        raise DataError(f"--corpus-embeddings {path} is a {saved.dtype} array of shape {saved.shape}, not the "
                        f"(texts, width) float vectors bertkit embed writes; {fix}")
    if saved.shape[0] != len(corpus):
        raise DataError(f"--corpus-embeddings {path} holds {saved.shape[0]} rows, and {corpus_path} has "
                        f"{len(corpus)} texts; {fix}")
    picks = sorted({kept[int(i)] for i in np.linspace(0, len(kept) - 1, min(CHECKED_ROWS, len(kept)))})
    fresh = encoder.encode([corpus[i] for i in picks], normalize=True)
    if saved.shape[1] != fresh.shape[1]:
        raise DataError(f"--corpus-embeddings {path} has vectors of {saved.shape[1]} numbers, this model's have "
                        f"{fresh.shape[1]}: another model wrote it; {fix}")
    vectors = saved.astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    for row, vector in zip(picks, fresh):
        if float(vectors[row] @ vector) < 0.99:
            # row i is text i, which starts on its own line (a table's header and multi-line texts shift it)
            line = lines[row] if lines else None
            text = (f"{line} in {corpus_path}" if isinstance(line, str) else
                    f"the text on line {line} of {corpus_path}" if line else f"text {row + 1} of {corpus_path}")
            raise DataError(f"--corpus-embeddings {path}: its row {row + 1}, for {text}, is not this model's vector "
                            f"of that text (cosine {float(vectors[row] @ vector):.3f}): another model, corpus or "
                            f"--max-length wrote it; {fix}")
    return vectors[kept]


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    check_output_files(args)  # before any work: a folder, or a file the command reads
    queries, inputs = read_queries(args), read_text_inputs(args.corpus, args.text_column)  # before the model
    corpus, files = [e.text for e in inputs], [e.file for e in inputs]
    kept = [i for i, text in enumerate(corpus) if text.strip()]
    device = device_of(args)
    encoder = SentenceEncoder.from_pretrained(args.model, device=device, precision=args.precision)
    precision_of(args, device)
    warn_about_unknown_texts([corpus[i] for i in kept] + queries, encoder.tokenizer, args.model,
                             f"texts ({args.corpus} and the queries)")
    if args.corpus_embeddings:
        vectors = saved_vectors(args.corpus_embeddings, args.corpus, corpus, kept, encoder,
                                [e.file or e.line for e in inputs])
    else:
        vectors = encoder.encode([corpus[i] for i in kept], normalize=True)
    asked = [i for i, query in enumerate(queries) if query.strip()]
    order, scores = top_matches(encoder.encode([queries[i] for i in asked], normalize=True), vectors, args.top)
    found_for = dict(zip(asked, zip(order, scores)))
    rows = []
    for i, query in enumerate(queries):
        found, score = found_for.get(i, ((), ()))  # a blank query: a row without matches
        matches = [{"rank": rank, "index": kept[j], **({"file": files[kept[j]]} if files[kept[j]] else {}),
                    "score": round(float(s), 4), "text": corpus[kept[j]]}
                   for rank, (j, s) in enumerate(zip(found, score), 1)]
        rows.append({"query": query, "matches": matches})
        if i not in found_for:
            continue
        print(f"query: {query}")
        for match in matches:
            print(f"  {match['rank']}. {match['score']:.3f}  [{where_in(args.corpus, match)}] {match['text'][:100]}")
    if args.output:
        write_matches(args.output, rows)
    return 0


def where_in(corpus: str, match: dict) -> str:
    """Where a match is in the corpus, as printed: a folder's file, a table's data row ("row 12": not
    the table's own id column, which a bare number looked like, walk X) or a text file's "line 12"."""
    if match.get("file"):
        return match["file"]
    table = Path(corpus).suffix.lower() in TABLE_SUFFIXES or is_table(corpus)
    return f"{'row' if table else 'line'} {match['index'] + 1}"


def write_matches(path: str, rows: list[dict]) -> None:
    """One JSON line per query; in a .csv or .tsv, one row per match (a blank query: one row, no match)."""
    if table_delimiter(path):
        rows = [{"query_index": i, "query": row["query"], **match}
                for i, row in enumerate(rows) for match in (row["matches"] or [{}])]
    with atomic_open(path, "w", encoding="utf-8", newline="") as f:
        writer = rows_writer(f, path)
        writer.write(rows)
        writer.flush()
