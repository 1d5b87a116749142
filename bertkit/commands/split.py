"""`bertkit split --input data.csv --out data/`: one labelled file into train, dev and test files for
`finetune --train --dev` and `evaluate --data`, in the input's format (bertkit/tasks/split.py); a
folder of class folders (CLASS/*.txt, one text per file) into CSV files, a Parquet file or a `datasets`
directory into JSONL files.

Stratified by the label column when each row has one class; rows whose text is the same go to
one split (`--group-column`: another column, such as a QA file's context), so no dev or test text
is a training text. The same file and seed give the same split.
"""

from __future__ import annotations

from bertkit.tasks.split import split_file
from bertkit.commands.options import add_seed, say


def add_arguments(parser) -> None:
    parser.add_argument("--input", required=True, help="the labelled .csv, .tsv, .jsonl or .parquet file, .conll file "
                                                       "of tagged sentences, SQuAD .json, folder of class folders "
                                                       "(CLASS/*.txt) or `datasets` directory, to split")
    parser.add_argument("--out", required=True, help="folder to write train, dev and test files into (the "
                                                     "input's format: train.csv, dev.csv, test.csv; CSV for a folder, "
                                                     "JSONL for Parquet or a `datasets` directory)")
    parser.add_argument("--dev", type=float, default=0.1, help="fraction of the rows for dev")
    parser.add_argument("--test", type=float, default=0.1, help="fraction of the rows for test (0: no test file)")
    add_seed(parser, "the same file and seed give the same split; default: 0")
    parser.add_argument("--label-column", default=None,
                        help="the column of labels to stratify by (default: label, and a random split "
                             "without one)")
    parser.add_argument("--group-column", default=None,
                        help="rows with the same value here (stripped) stay in one split (default: text; a "
                             "SQuAD file's or a multiple-choice .jsonl's context; e.g. context for a QA .jsonl's "
                             "questions that share a passage)")
    parser.add_argument("--overwrite", action="store_true", help="replace train, dev and test files in --out")


def run(args) -> int:
    split_file(args.input, args.out, dev=args.dev, test=args.test, seed=0 if args.seed is None else args.seed,
               label_column=args.label_column, group_column=args.group_column, overwrite=args.overwrite, log=say)
    return 0
