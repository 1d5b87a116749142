"""scripts/corpus_sample.py: a seeded, token-matched sample of a corpus (the control text of the
DAPT result in docs/dapt.md)."""

import importlib.util
import json
from pathlib import Path

from tokenizers import Tokenizer

from bertkit.data.assets import minilm_dir

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "corpus_sample.py"
_spec = importlib.util.spec_from_file_location("corpus_sample", SCRIPT)
corpus_sample = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus_sample)


def test_sample_counts_whole_documents_and_is_seeded(tmp_path):
    # MiniLM's tokenizer.json pads and truncates to 128: a count through it would give every
    # document 128 tokens (the first version of the script did: 2,524 dictionary entries for 323k
    # "tokens" that were 81k words). Documents here are short and one is longer than 128 tokens.
    texts = [f"document {i} says something short." for i in range(40)] + [("a long one " * 100).strip()]
    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out, again = tmp_path / "sample.jsonl", tmp_path / "again.jsonl"
    assert corpus_sample.main([str(source), str(out), "--tokens", "300", "--seed", "1"]) == 0
    corpus_sample.main([str(source), str(out.with_name("again.jsonl")), "--tokens", "300", "--seed", "1"])
    chosen = [json.loads(line)["text"] for line in out.read_text().splitlines()]
    assert chosen == [json.loads(line)["text"] for line in again.read_text().splitlines()]  # seeded
    tokenizer = Tokenizer.from_file(str(Path(minilm_dir()) / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    counts = [len(tokenizer.encode(t, add_special_tokens=False).ids) for t in chosen]
    assert sum(counts) >= 300 and sum(counts) - counts[-1] < 300  # stops at the first document past the target
    assert set(chosen) <= set(texts) and len(set(chosen)) == len(chosen)  # whole documents, each once
    assert chosen != texts[:len(chosen)]  # shuffled, not the corpus's first documents
