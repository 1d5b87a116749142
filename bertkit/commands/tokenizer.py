"""`bertkit tokenizer train --files F [F ...] --vocab-size N --out DIR`: train a tokenizer.

Text files are read as they are; a .csv, .tsv or .jsonl file gives the texts of its text column
(`--text-field`, default "text"), one document per row, as `pretrain` reads `data.corpus`: a
fine-tuning file's header and labels are not text to learn words from. A folder gives the files
`prepare` and `pretrain` read in it (.txt and tables at any depth, hidden ones skipped): a shell
glob such as `my_texts/*.txt` misses its subfolders, and the shards would then hold text the
tokenizer never saw (walk V).
"""

from __future__ import annotations

import os
from pathlib import Path

from bertkit.commands.options import at_least
from bertkit.data.corpus import TABLE_SUFFIXES, check_text_file
from bertkit.data.documents import CorpusDocuments
from bertkit.errors import ConfigError
from bertkit.io import make_output_dir
from bertkit.models.checkpoint import WEIGHT_FILES
from bertkit.peft.io import ADAPTER_WEIGHTS
from bertkit.runtime.progress import on_terminal
from bertkit.tokenizer import Tokenizer
from bertkit.tokenizer.training import check_training_file, small_vocabulary

VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "merges.txt")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="tokenizer_command", metavar="ACTION", required=True)
    train = sub.add_parser("train", help="train a tokenizer and save it in Hugging Face layout",
                           description="Train a WordPiece (BERT; lowercased unless --cased) or byte-level BPE "
                                       "(RoBERTa) tokenizer on UTF-8 text files and save it in Hugging Face "
                                       "layout (tokenizer.json, vocab.txt or vocab.json + merges.txt) in --out. "
                                       "The same files give the same vocabulary every run.")
    train.add_argument("--files", nargs="+", required=True,
                       help="UTF-8 text files; .csv/.tsv/.jsonl: the texts of their --text-field column; a "
                            "folder: its .txt and table files at any depth, as prepare and pretrain read it")
    train.add_argument("--text-field", default="text", help="the column or JSONL field holding the text of a table")
    train.add_argument("--vocab-size", type=at_least(1), required=True,
                       help="tokens in the vocabulary, specials included")
    train.add_argument("--out", required=True, help="output directory (tokenizer.json, vocab.txt, ...)")
    train.add_argument("--overwrite", action="store_true", help="replace a tokenizer already in --out")
    train.add_argument("--kind", choices=("wordpiece", "bpe"), default="wordpiece",
                       help="wordpiece (BERT) or bpe (byte-level, RoBERTa)")
    train.add_argument("--min-frequency", type=at_least(0), default=2,
                       help="merges of pairs seen fewer times are not made")
    train.add_argument("--cased", action="store_true", help="keep case (WordPiece only; byte-level BPE always does)")


def run(args) -> int:
    _check_options(args)
    bar = on_terminal()  # the tokenizers library's own bar: only on a terminal, as bertkit's
    source = _training_text(args.files, args.text_field)
    made = not os.path.exists(args.out)
    make_output_dir(args.out)  # a file in the way, or a folder that cannot be made: said before the training
    try:
        if args.kind == "wordpiece":
            tok = Tokenizer.train_wordpiece(**source, vocab_size=args.vocab_size, min_frequency=args.min_frequency,
                                            lowercase=not args.cased, show_progress=bar)
        else:
            tok = Tokenizer.train_bpe(**source, vocab_size=args.vocab_size, min_frequency=args.min_frequency,
                                      show_progress=bar)
    except BaseException:
        if made and not os.listdir(args.out):  # a failed training leaves no empty --out behind
            os.rmdir(args.out)
        raise
    tok.save_pretrained(args.out)
    print(f"saved a {args.kind} tokenizer with {tok.vocab_size} tokens to {args.out}")
    if tok.vocab_size > args.vocab_size:  # every character of the text, and the specials, is a token
        print(f"note: above --vocab-size {args.vocab_size}: the alphabet (every character; every byte for "
              f"BPE) and the special tokens alone are {tok.vocab_size} tokens")
    small = small_vocabulary(tok.vocab_size, args.vocab_size, args.min_frequency, "--min-frequency")
    if small:
        print(f"note: {small}")
    return 0


MODEL_WEIGHTS = WEIGHT_FILES + (ADAPTER_WEIGHTS,)  # a model's (or an adapter's) weights: they read its ids


def _check_options(args) -> None:
    for path in args.files:  # a gzip or binary file, by its first bytes, before any training (not "re-encode it")
        if os.path.isdir(path):
            continue  # a folder: its .txt and table files, as prepare reads it (_training_text)
        check_training_file(Path(path))  # missing or without text
        if os.path.splitext(path)[1].lower() not in TABLE_SUFFIXES:
            check_text_file(path)
    if args.cased and args.kind == "bpe":
        raise ConfigError("--cased is for --kind wordpiece: byte-level BPE keeps case always; drop --cased")
    weights = [name for name in MODEL_WEIGHTS if os.path.isfile(os.path.join(args.out, name))]
    if weights:  # its embedding rows are its own tokenizer's ids: a new vocabulary would misread them, silently
        raise ConfigError(f"--out {args.out} holds a model ({weights[0]}), whose weights need the tokenizer they "
                          "were trained with; save the new tokenizer in another directory (even with --overwrite)")
    held = [name for name in VOCABULARY_FILES if os.path.isfile(os.path.join(args.out, name))]
    if held and not args.overwrite:
        raise ConfigError(f"--out {args.out} already holds a tokenizer ({', '.join(held)}); choose a new --out "
                          "directory, or pass --overwrite to replace it")


def _training_text(files: list[str], text_field: str) -> dict:
    """Tokenizer training's source: the files as they are, or (any table or folder among them) the
    lines of every file's documents as `pretrain` reads them."""
    if not any(os.path.isdir(f) or os.path.splitext(f)[1].lower() in TABLE_SUFFIXES for f in files):
        return {"files": files}
    return {"texts": CorpusDocuments(files, text_field=text_field).lines()}
