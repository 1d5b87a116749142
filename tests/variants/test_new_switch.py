"""A new switch of the BERT family as one module in a temporary package (issue 27, done-when; the
module is docs/architecture.md's "Add a switch" block): it registers its field, its validation
and its effect through `register_switch`; BertConfig then takes and checks the field, every
BertModel built with it on carries the effect, it saves and reloads through config.json, and
`bertkit pretrain` trains with it set in [model], with no file of bertkit changed."""

import importlib
import json
import math
import os
import re
import sys

import pytest
import torch

from bertkit.commands import cli
from bertkit.errors import ConfigError
from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.models.heads import BertForMaskedLM
from bertkit.models.variants import switches

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CONFIG = os.path.join(ROOT, "configs", "pretrain-tiny-bert.toml")
DOC = os.path.join(ROOT, "docs", "architecture.md")


def doc_module() -> str:
    """The switch of docs/architecture.md's guide (its ```python block starting
    '# embedding_scale.py'): the whole switch, one module. It scales the embeddings' output by a
    constant (Vaswani et al. scale theirs by sqrt(d)); 1.0, the default, leaves it off."""
    blocks = re.findall(r"```python\n(.*?)```", open(DOC, encoding="utf-8").read(), flags=re.S)
    code = [b for b in blocks if b.startswith("# embedding_scale.py")]
    assert len(code) == 1, "docs/architecture.md must hold one ```python block starting '# embedding_scale.py'"
    return code[0]


@pytest.fixture
def embedding_scale(tmp_path, monkeypatch):
    package = tmp_path / "user_switches"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "embedding_scale.py").write_text(doc_module(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = list(switches.SWITCHES)
    yield importlib.import_module("user_switches.embedding_scale")
    switches.SWITCHES[:] = before
    for name in ("user_switches.embedding_scale", "user_switches"):
        sys.modules.pop(name, None)


def tiny(**fields) -> BertConfig:
    return BertConfig.preset("tiny", vocab_size=100, max_position_embeddings=32, **fields)


def test_the_new_field_is_validated_by_its_switch(embedding_scale):
    assert tiny(embedding_scale=2.0).extra["embedding_scale"] == 2.0
    with pytest.raises(ConfigError, match="embedding_scale must be a number > 0, got 0"):
        tiny(embedding_scale=0)
    with pytest.raises(ConfigError, match="already belongs to another switch"):
        switches.register_switch(switches.Switch("again", lambda config: None, fields={"embedding_scale": 3.0}))


def test_without_its_module_the_field_means_nothing():
    # no switch registered: the key is kept in extra (as any key transformers writes) and read by nothing
    with pytest.raises(ConfigError, match="not a field of any registered switch"):
        switches.switch_value(tiny(), "embedding_scale")


def test_the_switch_acts_on_every_encoder_built_and_survives_saving(embedding_scale, tmp_path):
    torch.manual_seed(0)
    plain = BertModel(tiny()).eval()
    scaled = BertModel(tiny(embedding_scale=2.0)).eval()
    scaled.load_state_dict(plain.state_dict())  # no new weights: the same keys, transformers' names
    ids = torch.randint(5, 100, (2, 7))
    with torch.no_grad():
        a = plain(ids, output_hidden_states=True).hidden_states
        b = scaled(ids, output_hidden_states=True).hidden_states
    torch.testing.assert_close(b[0], 2 * a[0])
    assert (b[-1] - a[-1]).abs().max() > 1e-3  # and the layers see the scaled input
    off = BertModel(tiny(embedding_scale=1.0)).eval()
    off.load_state_dict(plain.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(off(ids).last_hidden_state, plain(ids).last_hidden_state)

    mlm = BertForMaskedLM(tiny(embedding_scale=2.0)).eval()
    mlm.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["embedding_scale"] == 2.0
    again = BertForMaskedLM.from_pretrained(tmp_path / "saved")
    with torch.no_grad():
        torch.testing.assert_close(again(ids).logits, mlm(ids).logits)


@pytest.mark.slow
def test_pretrain_trains_with_the_new_switch_in_model(embedding_scale, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("bertkit.train.trainer.Trainer.plot", lambda self: None)
    out = tmp_path / "run"
    argv = ["pretrain", "--config", CONFIG, "--out", str(out), "--no-progress", "--seed", "0", "--set",
            "model.embedding_scale=2.0", "model.position_embedding_type=absolute", "data.max_documents=20",
            "tokenizer.vocab_size=600", "data.max_length=32", "model.max_position_embeddings=32",
            "model.hidden_size=32", "model.intermediate_size=64",
            "train.batch_size=8", "train.max_steps=4", "train.log_every=2", "train.eval_every=4",
            "train.save_every=4", "data.max_eval_examples=16"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert all(math.isfinite(r["loss"]) for r in rows if r["split"] == "train")
    assert json.load(open(out / "checkpoint-4" / "config.json"))["embedding_scale"] == 2.0
    refused = [("model.embedding_scale=-1" if a == "model.embedding_scale=2.0" else a) for a in argv]
    refused[refused.index(str(out))] = str(tmp_path / "refused")
    assert cli.main(refused) != 0
    assert "embedding_scale must be a number > 0, got -1" in capsys.readouterr().err
