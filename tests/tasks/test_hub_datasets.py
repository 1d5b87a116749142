"""Hugging Face data set names as --train/--dev/--data, read offline from the `datasets` cache.

The cache is built by `datasets` itself as `load_dataset("org/name")` builds it from a hub
repository of JSON files: its packaged JSON builder, configured as the hub loader configures it (one
"default" config holding the data files, the snake-cased name, the repository's commit as the
hash), prepared into CACHE/org___name/default/0.0.0/<commit>/. The real `load_dataset` then finds
it offline, and bertkit must read the same rows; nothing may touch the network."""

import json
import os
import warnings

import pytest

from bertkit.commands.cli import main
from bertkit.errors import DataError
from bertkit.tasks import DataConfig, load_examples, read_prediction_input
from bertkit.tasks.formats import read_choices, read_text_dataset
from bertkit.tasks.hub_datasets import datasets_cache_dir, snake_case

from .helpers import make_tiny_model

datasets = pytest.importorskip("datasets")

COMMIT = "0123456789abcdef0123456789abcdef01234567"
NAMES = ["business", "sport"]


def rows(split, n):
    return [{"text": f"{split} {'shares fell' if i % 2 == 0 else 'the match ended'} {i}", "label": i % 2}
            for i in range(n)]


SPLITS = {"train": rows("train", 8), "validation": rows("validation", 4), "test": rows("test", 6)}


def build_cached(cache, repo_id, splits, config="default", features=None):
    """Prepare `splits` into `cache` as load_dataset(repo_id) prepares a hub repository of JSON files."""
    from datasets.data_files import DataFilesDict
    from datasets.load import configure_builder_class
    from datasets.packaged_modules.json.json import Json, JsonConfig

    source = os.path.join(cache, "_source", repo_id, config)
    os.makedirs(source)
    for split, records in splits.items():
        with open(os.path.join(source, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))
    files = DataFilesDict.from_patterns({s: [f"{s}.jsonl"] for s in splits}, base_path=source)
    name = snake_case(repo_id.split("/")[-1])
    builder_class = configure_builder_class(Json, [JsonConfig(name=config, data_files=files)], config, name)
    features = features or datasets.Features({"text": datasets.Value("string"),
                                              "label": datasets.ClassLabel(names=NAMES)})
    staging = os.path.join(cache, "_staging")
    builder_class(cache_dir=staging, dataset_name=name, config_name=config, hash=COMMIT,
                  info=datasets.DatasetInfo(features=features)).download_and_prepare()
    # The hub loader passes repo_id, which puts the namespace in front: CACHE/org___name/...
    *namespace, _ = repo_id.split("/")
    target = os.path.join(cache, "___".join(namespace + [name]), config)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(os.path.join(staging, name, config), target)


@pytest.fixture()
def cache(tmp_path, monkeypatch, no_network):
    for variable in ("HF_DATASETS_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    directory = str(tmp_path / "hf" / "datasets")
    build_cached(directory, "org/My_Set", SPLITS)
    return directory


def offline_load_dataset(monkeypatch, cache_dir, *args, **kwargs):
    """The real library, offline (its flags are read at import, hence the patch)."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return datasets.load_dataset(*args, cache_dir=cache_dir, **kwargs)


def test_a_cached_name_reads_the_rows_load_dataset_finds_offline(cache, monkeypatch):
    assert datasets_cache_dir() == cache  # HF_HOME/datasets
    for split in SPLITS:
        reference = offline_load_dataset(monkeypatch, cache, "org/My_Set", split=split)
        expected = [(r["text"], reference.features["label"].int2str(r["label"])) for r in reference]
        read = read_text_dataset(f"org/My_Set:{split}")
        assert [(e.text, e.label) for e in read] == expected
        assert [e.line for e in read] == list(range(1, len(expected) + 1))
    # without a split each role reads its own: train, validation for dev, test
    for role, split in (("train", "train"), ("dev", "validation"), ("test", "test")):
        examples = load_examples("classification", "org/My_Set", role, DataConfig())
        assert [e.text for e in examples] == [r["text"] for r in SPLITS[split]]
    assert [e.text for e in read_prediction_input("classification", "org/My_Set", DataConfig()).examples] == \
        [r["text"] for r in SPLITS["test"]]


def test_hf_datasets_cache_wins_and_a_canonical_name_has_no_namespace(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds"))
    records = [{"id": str(i), "context": f"context {i}", "choices": ["a", "b", "c"], "label": i % 3} for i in range(5)]
    build_cached(str(tmp_path / "ds"), "TinyChoices", {"train": records},
                 features=datasets.Features({"id": datasets.Value("string"), "context": datasets.Value("string"),
                                             "choices": [datasets.Value("string")], "label": datasets.Value("int64")}))
    assert os.path.isdir(tmp_path / "ds" / "tiny_choices")  # datasets' snake case, no namespace
    reference = offline_load_dataset(monkeypatch, str(tmp_path / "ds"), "TinyChoices", split="train")
    examples = load_examples("multiple-choice", "TinyChoices", "train", DataConfig())
    assert [(e.context, e.choices, e.label) for e in examples] == \
        [(r["context"], r["choices"], r["label"]) for r in reference]
    assert read_choices("TinyChoices:train") == examples


def test_configurations_and_splits_are_named_when_ambiguous_or_missing(cache):
    build_cached(cache, "org/My_Set", {"train": rows("other", 3)}, config="small")
    with pytest.raises(DataError, match=r"org/My_Set: the cache holds the configurations default, small of "
                                        r"org/My_Set; name one as org/My_Set:CONFIG:SPLIT"):
        load_examples("classification", "org/My_Set", "train", DataConfig())
    assert [e.text for e in load_examples("classification", "org/My_Set:small:train", "dev", DataConfig())] == \
        [r["text"] for r in rows("other", 3)]
    with pytest.raises(DataError, match=r"has no split 'validation' in the cache; its splits: train; name one"):
        load_examples("classification", "org/My_Set:small:validation", "dev", DataConfig())
    with pytest.raises(DataError, match=r"configuration 'large' of org/My_Set is not in the cache .*cached: default, "
                                        r"small"):
        load_examples("classification", "org/My_Set:large:train", "train", DataConfig())


def test_built_in_names_then_local_paths_then_the_cache(cache, tmp_path, monkeypatch):
    build_cached(cache, "bbc", SPLITS)
    # a cached data set called bbc does not hide the built-in bbc (it is for classification only)
    with pytest.raises(DataError, match="built-in data bbc is for --task classification"):
        load_examples("token-classification", "bbc", "train", DataConfig())
    # a directory that exists wins over a cached name
    monkeypatch.chdir(tmp_path)
    os.makedirs("org")
    datasets.Dataset.from_list([{"text": "a local row", "label": "sport"}]).save_to_disk("org/My_Set")
    assert [e.text for e in load_examples("classification", "org/My_Set", "train", DataConfig())] == ["a local row"]


def test_a_name_not_in_the_cache_says_where_it_looked_and_what_to_do(cache):
    with pytest.raises(DataError) as error:
        load_examples("classification", "org/missing", "train", DataConfig())
    message = str(error.value)
    assert os.path.join(cache, "org___missing") in message
    assert "bertkit does not download: run datasets.load_dataset('org/missing') where there is network" in message
    assert "set HF_DATASETS_CACHE / HF_HOME to the cache that holds it, or pass a file" in message
    # a path that cannot be a hub name keeps the plain error; so does a missing file name
    with pytest.raises(DataError, match=r"^/no/such/file.csv: no such file$"):
        load_examples("classification", "/no/such/file.csv", "train", DataConfig())
    with pytest.raises(DataError, match=r"^no/such/file: no such file \(or built-in data name: bbc"):
        load_examples("classification", "no/such/file", "train", DataConfig())
    with pytest.raises(DataError, match="org/My_Set is a Hugging Face data set; --task qa reads files only"):
        load_examples("qa", "org/My_Set", "train", DataConfig())


def test_the_snake_case_is_datasets_own():
    from datasets.naming import camelcase_to_snakecase

    for name in ("imdb", "My_Set", "SQuADv2", "glue", "TinyChoices", "ag_news", "HTMLTables2", "a-b.C"):
        assert snake_case(name) == camelcase_to_snakecase(name)


def test_finetune_and_evaluate_take_a_cached_name(cache, tmp_path, capsys):
    model = make_tiny_model(tmp_path / "tiny", [r["text"] for split in SPLITS.values() for r in split])
    out = str(tmp_path / "out")
    test_file = tmp_path / "test.jsonl"
    test_file.write_text("".join(json.dumps({"text": r["text"], "label": NAMES[r["label"]]}) + "\n"
                                 for r in SPLITS["test"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", model, "--train", "org/My_Set",
                     "--out", out, "--no-progress", "--set", "train.max_steps=2", "data.max_length=16"]) == 0
        summary = json.load(open(f"{out}/finetune_summary.json"))
        assert (summary["train_examples"], summary["dev_examples"], summary["labels"]) == (8, 4, NAMES)
        capsys.readouterr()
        scores = []
        for data in ("org/My_Set", str(test_file)):
            assert main(["evaluate", "--model", out, "--data", data]) == 0
            scores.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert scores[0] == scores[1]
