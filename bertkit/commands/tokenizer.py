"""`bertkit tokenizer train --files F [F ...] --vocab-size N --out DIR`: train a tokenizer."""

from __future__ import annotations

from bertkit.runtime.progress import on_terminal
from bertkit.tokenizer import Tokenizer


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="tokenizer_command", metavar="ACTION", required=True)
    train = sub.add_parser("train", help="train a tokenizer and save it in Hugging Face layout",
                           description="Train a WordPiece (BERT; lowercased unless --cased) or byte-level BPE "
                                       "(RoBERTa) tokenizer on UTF-8 text files and save it in Hugging Face "
                                       "layout (tokenizer.json, vocab.txt or vocab.json + merges.txt) in --out. "
                                       "The same files give the same vocabulary every run.")
    train.add_argument("--files", nargs="+", required=True, help="UTF-8 text files")
    train.add_argument("--vocab-size", type=int, required=True, help="tokens in the vocabulary, specials included")
    train.add_argument("--out", required=True, help="output directory (tokenizer.json, vocab.txt, ...)")
    train.add_argument("--kind", choices=("wordpiece", "bpe"), default="wordpiece",
                       help="wordpiece (BERT) or bpe (byte-level, RoBERTa)")
    train.add_argument("--min-frequency", type=int, default=2, help="merges of pairs seen fewer times are not made")
    train.add_argument("--cased", action="store_true", help="keep case (WordPiece only; default lowercases)")


def run(args) -> int:
    bar = on_terminal()  # the tokenizers library's own bar: only on a terminal, as bertkit's
    if args.kind == "wordpiece":
        tok = Tokenizer.train_wordpiece(args.files, vocab_size=args.vocab_size, min_frequency=args.min_frequency,
                                        lowercase=not args.cased, show_progress=bar)
    else:
        tok = Tokenizer.train_bpe(args.files, vocab_size=args.vocab_size, min_frequency=args.min_frequency,
                                  show_progress=bar)
    tok.save_pretrained(args.out)
    print(f"saved a {args.kind} tokenizer with {tok.vocab_size} tokens to {args.out}")
    return 0
