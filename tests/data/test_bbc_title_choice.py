"""scripts/bbc_title_choice.py: an article's first words and four headlines of its topic, its own among them,
split by article (walk AD, multiple choice on one's own file)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from bertkit.tasks.formats import read_choices

PATH = Path(__file__).resolve().parents[2] / "scripts" / "bbc_title_choice.py"
_spec = importlib.util.spec_from_file_location("bbc_title_choice", PATH)
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)


def build(tmp_path, monkeypatch, name: str, seed: int = 0) -> dict:
    monkeypatch.setattr(sys, "argv", ["bbc_title_choice.py", str(tmp_path / name), "--seed", str(seed)])
    script.main()
    return {split: (tmp_path / name / f"{split}.jsonl").read_text(encoding="utf-8") for split in script.SIZES}


def test_the_choices_are_headlines_of_one_topic_and_no_article_or_headline_is_in_two_splits(tmp_path, monkeypatch):
    files = build(tmp_path, monkeypatch, "a")
    topic_of = {article["title"]: article["topic"] for article in script.articles()}
    body_of = {article["title"]: article["body"] for article in script.articles()}
    titles = {}
    for split, size in script.SIZES.items():
        examples = read_choices(str(tmp_path / "a" / f"{split}.jsonl"))  # what finetune reads
        assert len(examples) == size and all(len(e.choices) == 4 == len(set(e.choices)) for e in examples)
        for e in examples:
            own = e.choices[e.label]
            assert body_of[own].startswith(e.context) and len(e.context.split()) <= 100
            assert {topic_of[c] for c in e.choices} == {topic_of[own]}  # the topic does not tell the answer
        titles[split] = {c for e in examples for c in e.choices}
    for first, second in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not titles[first] & titles[second]
    positions = [json.loads(line)["label"] for line in files["train"].splitlines()]
    assert min(positions.count(p) for p in range(4)) > 200  # the answer's position is spread: chance is 1/4
    assert build(tmp_path, monkeypatch, "b") == files and build(tmp_path, monkeypatch, "c", seed=1) != files
