"""Write a seeded random sample of a corpus's documents (a named corpus, or a file or folder) as JSONL (one {"text": ...} per
line), stopping once the sample holds as many WordPiece tokens as asked: a size-matched
non-domain corpus for the control of a continued pre-training run (docs/dapt.md, the control of
the BBC DAPT result on GCIDE text). Documents are drawn whole, in a seeded shuffle of the corpus
(so not only the "a" words of a dictionary); a document's sentences are joined with newlines.

    python scripts/corpus_sample.py gcide runs/dapt/gcide-sample.jsonl --tokens 323047 [--seed 0] [--tokenizer DIR]

--tokenizer defaults to all-MiniLM-L6-v2's; tokens are counted without [CLS]/[SEP], as
`bertkit pretrain` prints them ("tokenizing: ... tokens=N").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tokenizers import Tokenizer  # noqa: E402

from bertkit.data.assets import minilm_dir  # noqa: E402
from bertkit.data.corpus import NAMED_CORPORA, open_corpus  # noqa: E402
from bertkit.io import atomic_write_text  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", help=f"a named corpus ({', '.join(NAMED_CORPORA)}) or a corpus file or folder")
    p.add_argument("out", help="the JSONL file to write")
    p.add_argument("--tokens", type=int, required=True, help="stop once the sample holds this many tokens")
    p.add_argument("--seed", type=int, default=0, help="seeds the shuffle of the documents")
    p.add_argument("--tokenizer", default="", help="a tokenizer directory (default: all-MiniLM-L6-v2's)")
    args = p.parse_args(argv)
    tokenizer = Tokenizer.from_file(os.path.join(args.tokenizer or str(minilm_dir()), "tokenizer.json"))
    tokenizer.no_padding()  # MiniLM's tokenizer.json pads and truncates to 128: count whole documents
    tokenizer.no_truncation()
    documents = ["\n".join(sentences) for sentences in open_corpus(args.corpus)]
    order = list(range(len(documents)))
    random.Random(args.seed).shuffle(order)
    chosen, tokens = [], 0
    for i in order:
        if tokens >= args.tokens:
            break
        chosen.append(i)
        tokens += len(tokenizer.encode(documents[i], add_special_tokens=False).ids)
    atomic_write_text(args.out, "".join(json.dumps({"text": documents[i]}) + "\n" for i in chosen))
    words = sum(len(documents[i].split()) for i in chosen)
    print(f"{args.out}: {len(chosen):,} of {len(documents):,} {args.corpus} documents, {tokens:,} tokens, {words:,} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
