"""Hugging Face names resolve to the local Hugging Face cache, offline: a cache laid out as
huggingface_hub lays it out (refs/main, snapshots/<rev>/ symlinks into blobs/), built from the
built-in MiniLM files; the same directory huggingface_hub itself finds; a name not in the cache is a
clear error, and nothing touches the network."""

import hashlib
import os
import shutil

import numpy as np
import pytest

from bertkit.commands import cli
from bertkit.inference.encode import SentenceEncoder
from bertkit.errors import CheckpointError
from bertkit.models.hub_cache import hub_cache_dir, resolve_model_dir
from bertkit.models.encoder import BertModel
from bertkit.tokenizer import Tokenizer

NAME = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"


def build_cache(cache: str, source: str, name: str = NAME, revision: str = REVISION) -> str:
    """huggingface_hub's layout: blobs named by content hash, snapshot entries symlinked to them."""
    repo = os.path.join(cache, "models--" + name.replace("/", "--"))
    snapshot = os.path.join(repo, "snapshots", revision)
    os.makedirs(os.path.join(repo, "blobs"))
    os.makedirs(snapshot)
    os.makedirs(os.path.join(repo, "refs"))
    for file in sorted(os.listdir(source)):
        path = os.path.join(source, file)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        shutil.copyfile(path, os.path.join(repo, "blobs", digest))
        os.symlink(os.path.join("..", "..", "blobs", digest), os.path.join(snapshot, file))
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(revision)
    return snapshot


@pytest.fixture()
def hf_home(tmp_path, monkeypatch, minilm_dir, no_network):
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    return build_cache(str(tmp_path / "hf" / "hub"), minilm_dir)


def test_a_cached_name_is_its_snapshot_as_huggingface_hub_finds_it(hf_home, tmp_path):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    assert hub_cache_dir() == str(tmp_path / "hf" / "hub")
    assert resolve_model_dir(NAME) == hf_home
    found = huggingface_hub.snapshot_download(NAME, cache_dir=hub_cache_dir(), local_files_only=True)
    assert os.path.samefile(found, resolve_model_dir(NAME))


def test_hf_hub_cache_wins_over_hf_home(hf_home, tmp_path, monkeypatch, minilm_dir):
    other = build_cache(str(tmp_path / "elsewhere"), minilm_dir, revision="0" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    assert resolve_model_dir(NAME) == other


def test_loaders_and_commands_take_the_name(hf_home, tmp_path, minilm_dir):
    model = BertModel.from_pretrained(NAME)
    reference = BertModel.from_pretrained(minilm_dir)
    for (key, ours), theirs in zip(model.state_dict().items(), reference.state_dict().values()):
        assert ours.equal(theirs), key
    assert Tokenizer.from_pretrained(NAME).encode("a man is eating") == \
        Tokenizer.from_pretrained(minilm_dir).encode("a man is eating")
    texts = ["A man is eating food.", "A man is eating a piece of bread."]
    vectors = SentenceEncoder.from_pretrained(NAME).encode(texts)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.755, abs=1e-3)  # the reference cosine
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts) + "\n")
    assert cli.main(["embed", "--model", NAME, "--input", str(source), "--output", str(tmp_path / "e.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), vectors, atol=1e-6)


def test_a_name_not_in_the_cache_says_so_without_network(hf_home, tmp_path, capsys):
    with pytest.raises(CheckpointError, match=r"org/absent is not a local directory, and not in the local "
                                              r"Hugging Face cache \(.*hf/hub\); bertkit does not download"):
        BertModel.from_pretrained("org/absent")
    source = tmp_path / "texts.txt"
    source.write_text("a text\n")
    assert cli.main(["embed", "--model", "org/absent", "--input", str(source), "--output", str(tmp_path / "e.npy")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bertkit embed: error: org/absent is not a local directory, and not in the local Hugging "
                          "Face cache") and err.count("\n") == 1


def test_a_local_directory_wins_and_paths_are_not_names(hf_home, tmp_path, monkeypatch, minilm_dir):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(minilm_dir, tmp_path / "sentence-transformers" / "all-MiniLM-L6-v2")
    assert resolve_model_dir(NAME) == NAME  # the directory under the working directory
    assert resolve_model_dir("/no/such/dir") == "/no/such/dir"  # left to the loader's own error
    assert resolve_model_dir("./org/name") == "./org/name"


def test_a_misspelt_local_folder_names_the_one_beside_it(hf_home, tmp_path, monkeypatch):
    """`runs/mien` beside `runs/mine` is a typo, not a hub name to look up: one line naming the
    folder meant. A name in a local folder is one not made yet (it had been sent to `hf download
    runs/bbc`); a name whose first part is no local folder is still looked up in the cache."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "mine").mkdir(parents=True)
    with pytest.raises(CheckpointError, match=r"^runs/mien does not exist; did you mean runs/mine\?$"):
        resolve_model_dir("runs/mien")
    with pytest.raises(CheckpointError, match=r"^runs/zzzzzz-other does not exist \(runs/ holds mine\); make it"):
        resolve_model_dir("runs/zzzzzz-other")
    with pytest.raises(CheckpointError, match="not in the local Hugging Face cache"):
        resolve_model_dir("some-org/zzzzzz-other")


def test_a_checkpoint_the_run_never_wrote_names_the_ones_it_did(tmp_path, monkeypatch, capsys):
    """`--model runs/A/checkpoint-999` (three parts: no hub name) failed after the data were read,
    as "tokenizer path runs/A/checkpoint-999 does not exist" (walk T); now one line before any
    work, listing the run's checkpoints in step order; a path under no folder names the option."""
    monkeypatch.chdir(tmp_path)
    for step in (50, 100, 200):
        (tmp_path / "runs" / "A" / f"checkpoint-{step}").mkdir(parents=True)
    (tmp_path / "runs" / "A" / "metrics.jsonl").write_text("")
    (tmp_path / "train.csv").write_text("text,label\na,x\nb,y\n")
    base = ["finetune", "--task", "classification", "--train", "train.csv", "--dev", "train.csv", "--out", "runs/F"]
    for model, expected in (
            ("runs/A/checkpoint-999", "runs/A/checkpoint-999 does not exist (runs/A/ holds checkpoint-50, "
                                      "checkpoint-100, checkpoint-200); make it first"),
            ("runs/B/checkpoint-20", "runs/B/checkpoint-20 does not exist; pass --model a model directory")):
        assert cli.main(base + ["--model", model]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"bertkit finetune: error: {expected}") and err.count("\n") == 1, err
    assert not (tmp_path / "runs" / "F").exists()
