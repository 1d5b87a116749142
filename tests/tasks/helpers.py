"""Shared pieces for the task tests (and the DDP/FSDP fine-tuning and job tests that reuse them)."""

from __future__ import annotations

import csv
import json
import os
import random

import numpy as np

from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.tokenizer import Tokenizer


def train_tokenizer(directory, texts, vocab_size: int) -> Tokenizer:
    """A WordPiece tokenizer of up to `vocab_size` pieces trained on `texts` (one per line of
    directory/corpus.txt, which stays there)."""
    os.makedirs(str(directory), exist_ok=True)
    corpus = os.path.join(str(directory), "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    return Tokenizer.train_wordpiece([corpus], vocab_size=vocab_size, min_frequency=1, show_progress=False)


def word_salad(words, lines: int, per_line: int, seed: int = 0) -> list[str]:
    """`lines` texts of `per_line` words drawn from `words` (seeded): a corpus for a tiny tokenizer."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(per_line)) for _ in range(lines)]


def make_tiny_model(directory, corpus_texts) -> str:
    """A 1-layer, hidden-32 random BERT with a 600-piece WordPiece vocabulary trained on
    `corpus_texts`: the cheapest model for pipeline and error tests (no learning asserted)."""
    directory = str(directory)
    tokenizer = train_tokenizer(directory, corpus_texts, 600)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(directory, tokenizer=tokenizer)
    os.remove(os.path.join(directory, "corpus.txt"))
    return directory


TOPIC_WORDS = "market film vote match chip bank actor party goal phone".split()


def topic_files(root, count: int, length: int, endings: tuple[str, str], train: int) -> str:
    """`count` texts of `length` seeded random TOPIC_WORDS, labelled "sport" and "business" in turn, each
    ending in its label's `endings` word(s), which alone decide it: root/train.jsonl (the first `train`)
    and root/dev.jsonl. Returns a tiny model (`make_tiny_model`) whose tokenizer was trained on them."""
    rng = np.random.default_rng(0)
    rows = [{"text": " ".join(rng.choice(TOPIC_WORDS, length)) + " " + endings[i % 2],
             "label": ("sport", "business")[i % 2]} for i in range(count)]
    for name, part in (("train", rows[:train]), ("dev", rows[train:])):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    return make_tiny_model(root / "tiny", [r["text"] for r in rows])


def write_csv(path, examples, label=lambda e: e.label) -> str:
    """`examples` as a text,label CSV file (the label as `label` gives it); returns its path."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows([e.text, label(e)] for e in examples)
    return str(path)
