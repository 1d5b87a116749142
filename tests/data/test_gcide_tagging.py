"""scripts/gcide_tagging.py: braced spans become TAXON / XREF tags, and splits keep a headword together."""

import importlib.util
from pathlib import Path

from bertkit.tasks.formats import TokenExample

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gcide_tagging.py"
SPEC = importlib.util.spec_from_file_location("gcide_tagging", SCRIPT)
tagging = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(tagging)

RAW = """Indian \\In"di*an\\, a. [From India.]
   1. Of or pertaining to India proper. See {Hindu}.
      [1913 Webster]

   {Indian cress} (Bot.), nasturtium. See {Nasturtium}, 2.

   2. A common American palm ({Copernicia australis} or {Copernicia cerifera}) of the genus
      {Copernicia}, also called {wax palm}. --Milton.
      [1913 Webster]

   3. A white crystalline compound, {(CH2)}, of no use.
      [1913 Webster]

   (d`mw`zl"), n. See {Damsel}.
"""


def tagged(raw):
    return [e for e in map(tagging.tag_paragraph, tagging.marked_paragraphs(raw)) if e is not None]


def test_braced_spans_are_tagged_as_the_dictionary_marked_them():
    first, palm = tagged(RAW)  # the sub-entry head, the formula's sentence and a pronunciation's are left out
    assert list(zip(first.tokens, first.tags))[-3:] == [("See", "O"), ("Hindu", "B-XREF"), (".", "O")]
    pairs = dict(zip(palm.tokens, palm.tags))
    assert [t for w, t in zip(palm.tokens, palm.tags) if w in ("australis", "cerifera")] == ["I-TAXON"] * 2
    assert palm.tags[palm.tokens.index("Copernicia")] == "B-TAXON"  # opens the parenthesis
    assert palm.tags[palm.tokens.index("or") + 1] == "B-TAXON"  # listed after a TAXON
    assert palm.tags[len(palm.tokens) - 1 - palm.tokens[::-1].index("Copernicia")] == "B-TAXON"  # genus {..}
    wax = palm.tokens.index("wax")
    assert palm.tags[wax:wax + 2] == ["B-XREF", "I-XREF"] and pairs["called"] == "O"  # a cross-reference
    assert "Milton" not in palm.tokens  # a quotation's author is dropped with the markup


def test_splits_keep_a_headword_in_one_split_and_are_the_same_for_a_seed():
    marked = TokenExample(["See", "Hindu", "."], ["O", "B-XREF", "O"])
    by_headword = {f"w{i}": [TokenExample(["See", f"w{i}", str(k)], ["O", "B-XREF", "O"]) for k in range(2)]
                   for i in range(2000)}
    by_headword["dup"] = [marked]
    splits = tagging.split_by_headword(by_headword, seed=0)
    assert {name: len(part) for name, part in splits.items()} == tagging.SIZES
    owners = {name: {e.tokens[1] for e in part} for name, part in splits.items()}
    assert not (owners["train"] & owners["dev"] or owners["train"] & owners["test"] or owners["dev"] & owners["test"])
    assert tagging.split_by_headword(by_headword, seed=0) == splits != tagging.split_by_headword(by_headword, seed=1)
