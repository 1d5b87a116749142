"""scripts/gcide_subject_fields.py: the labels come from the field markers, and no marker is left in the text."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gcide_subject_fields.py"
SPEC = importlib.util.spec_from_file_location("gcide_subject_fields", SCRIPT)
fields = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fields)

RAW = """Pike \\Pike\\, n. [AS. p[=i]c.] (Zo["o]l.)
   A large fresh-water fish of the genus Esox, with a long snout.
   [1913 Webster]

   2. (Mil.) A long wooden shaft with a pointed steel head, once carried by foot soldiers.
      [1913 Webster]

   3. (Anat. & Scots Law) A turnpike or toll gate on a road (Naut.) and (Cookery) as, a pike road.
      [1913 Webster]
"""


def test_an_entry_gives_its_fields_as_labels_and_a_text_without_any_marker():
    text, labels = fields.entry_row(RAW)
    assert labels == ["Anat", "Law", "Mil", "Naut", "Zool"]  # Zoöl is Zool; Scots Law is Law; Cookery not kept
    assert "(" not in text and "Zo" not in text and "Mil" not in text and "Cookery" not in text
    assert text.startswith("A large fresh-water fish of the genus Esox") and "pointed steel head" in text
    assert "pike" not in text.split()[0].lower()  # the headword line is not read


def test_the_labels_come_from_the_blocks_read_only():
    long_first = RAW.replace("with a long snout.", "with a long snout. " + "word " * fields.MAX_WORDS)
    text, labels = fields.entry_row(long_first)
    assert labels == ["Zool"] and len(text.split()) == fields.MAX_WORDS  # the cut text shows no other field


def test_splits_keep_a_headword_in_one_split():
    rows = [(f"w{i // 2}", f"text {i}", ["Zool", "Bot"] if i % 3 else ["Bot"]) for i in range(12000)]
    splits = fields.split_by_headword(rows, seed=0)
    assert {name: len(part) for name, part in splits.items()} == {"train": 2000, "dev": 500, "test": 1000}
    owners = {name: {row[0] for row in part} for name, part in splits.items()}
    assert not (owners["train"] & owners["dev"] or owners["train"] & owners["test"] or owners["dev"] & owners["test"])
