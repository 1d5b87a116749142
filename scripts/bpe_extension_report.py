"""What tokenizer.extend_vocab does to a byte-level BPE vocabulary (docs/dapt.md): a BPE of 8,000 pieces
trained on 1,500 BBC articles, grown by 2,000 words of 20,000 WordNet supersense glosses; the glosses'
tokens before and after, the new ids (a word of k pieces adds up to k - 1), and what the new merges
change on 300 held-out BBC articles (they also join those pieces wherever else they meet).

    PYTHONPATH=. python scripts/bpe_extension_report.py
"""

import time

from bertkit.data.bbc import bbc_texts
from bertkit.tasks import builtin_splits
from bertkit.tokenizer import Tokenizer
from bertkit.tokenizer.extend import extended, words_to_add


def main() -> None:
    news = list(bbc_texts())
    glosses = [e.text for e in builtin_splits("wordnet-supersense")["train"][:20000]]
    tokenizer = Tokenizer.train_bpe(texts=news[:1500], vocab_size=8000, min_frequency=2, show_progress=False)
    started = time.time()
    extension = words_to_add(tokenizer, glosses, 2000)
    grown = extended(tokenizer, extension.words)
    print(f"{len(extension.words)} words chosen and added in {time.time() - started:.1f} s: the glosses take "
          f"{extension.tokens_before:,} -> {extension.tokens_after:,} tokens "
          f"({1 - extension.tokens_after / extension.tokens_before:.1%} fewer); "
          f"ids {len(tokenizer):,} -> {len(grown):,}")
    held = news[1500:1800]
    before = [tokenizer.encode(text, add_special_tokens=False) for text in held]
    after = [grown.encode(text, add_special_tokens=False) for text in held]
    new = sum(i >= len(tokenizer) for ids in after for i in ids)
    print(f"300 held-out BBC articles: {sum(map(len, before)):,} -> {sum(map(len, after)):,} tokens, "
          f"{new / sum(map(len, after)):.1%} of them new ids, {sum(a != b for a, b in zip(after, before))} articles "
          f"split differently")
    print("the first words:", ", ".join(grown.decode(grown.convert_tokens_to_ids([w.word])).strip()
                                        for w in extension.words[:12]))


if __name__ == "__main__":
    main()
