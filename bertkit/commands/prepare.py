"""`bertkit prepare --corpus bbc|wordnet|PATH --tokenizer DIR --out DIR`: token shards.

Streams the corpus (never held whole in memory), tokenizes it, and writes memory-mapped shards
that keep document and sentence boundaries; `--resume` continues an interrupted run.
The recipe is bertkit/recipes/prepare.py.
"""

from __future__ import annotations

from bertkit.data.corpus import MODES
from bertkit.recipes.prepare import prepare
from bertkit.commands.options import add_progress, resolve_models


def add_arguments(parser) -> None:
    parser.add_argument("--corpus", default="bbc", help="bbc, wordnet, a file or a directory")
    parser.add_argument("--mode", choices=MODES, default="file",
                        help="file: one document per file; line: one per non-blank line; blank: documents separated "
                             "by blank lines")
    parser.add_argument("--text-field", default="text", help="the JSONL field holding the text")
    parser.add_argument("--tokenizer", required=True, help="tokenizer (or model) directory")
    parser.add_argument("--out", required=True, help="output directory for the shards")
    parser.add_argument("--shard-tokens", type=int, default=1 << 24, help="tokens per shard")
    parser.add_argument("--workers", type=int, default=0,
                        help="0: tokenize in this process with the tokenizer's threads; N: N processes")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    add_progress(parser)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    meta = prepare(args.corpus, args.tokenizer, args.out, mode=args.mode, text_field=args.text_field,
                   shard_tokens=args.shard_tokens, workers=args.workers, resume=args.resume,
                   progress=not args.no_progress)
    print(f"{meta['num_tokens']:,} tokens of {meta['num_documents']:,} documents in "
          f"{len(meta['shards'])} shard(s) ({meta['dtype']}) in {args.out}")
    return 0
