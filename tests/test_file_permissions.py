"""Saved files are readable as transformers writes them: files 0644 and directories 0755 under
the usual umask 022 (not mkstemp's 0600 / mkdtemp's 0700), so others can read a shared model."""

import os
import stat

import pytest
import torch

import bertkit
from bertkit.recipes.finetune import BestKeeper


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(root) -> dict[str, int]:
    """Permission bits of every file and directory under root (root included)."""
    found = {".": stat.S_IMODE(os.stat(root).st_mode)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = stat.S_IMODE(os.stat(path).st_mode)
    return found


def test_saved_model_tokenizer_and_best_checkpoint_are_world_readable(minilm_dir, tmp_path, umask_022):
    tokenizer = bertkit.Tokenizer.from_pretrained(minilm_dir)
    config = bertkit.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=64, num_labels=2)
    model = bertkit.BertForSequenceClassification(config)
    model.save_pretrained(tmp_path / "model", tokenizer=tokenizer)
    keeper = BestKeeper(str(tmp_path / "run"), "accuracy", 0, tokenizer)
    os.makedirs(keeper.out_dir)
    keeper.update(model, 1, {"accuracy": 0.5})  # saves into a temporary dir, renamed to .best
    keeper.update(model, 2, {"accuracy": 0.7})  # and swaps a better one in
    for root in (tmp_path / "model", tmp_path / "run" / ".best"):
        found = modes(root)
        assert {"tokenizer.json", "vocab.txt", "tokenizer_config.json", "config.json",
                "model.safetensors"} <= set(found)
        wrong = {name: oct(mode) for name, mode in found.items()
                 if mode != (0o755 if os.path.isdir(os.path.join(root, name)) else 0o644)}
        assert not wrong, wrong


def test_trainer_checkpoint_directory_is_world_readable(tmp_path, umask_022):
    from bertkit.train import Trainer, TrainConfig

    torch.manual_seed(0)
    model = bertkit.BertForSequenceClassification(bertkit.BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
    batches = [{"input_ids": torch.randint(5, 50, (2, 8)), "labels": torch.tensor([0, 1])}] * 2
    trainer = Trainer(model, batches, TrainConfig(max_steps=1, lr=1e-3, save_every=1, log_every=1,
                                                  device="cpu"), out_dir=str(tmp_path / "run"), progress=False)
    trainer.train()
    checkpoints = [d for d in os.listdir(tmp_path / "run") if d.startswith("checkpoint-")]
    assert checkpoints
    found = modes(tmp_path / "run" / checkpoints[0])
    assert found["."] == 0o755 and all(mode == 0o644 for name, mode in found.items() if name != ".")
