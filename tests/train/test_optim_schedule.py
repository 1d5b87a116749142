import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM, BertForSequenceClassification
from bertkit.settings.config_io import apply_overrides, parse_value
from bertkit.train.optim import build_optimizer, layer_index, param_groups
from bertkit.recipes.pretrain import parse_config
from bertkit.train.schedule import WarmupDecay, build_scheduler
from bertkit.train.config import TrainConfig


def small(layers=3):
    return BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=32)


def test_no_weight_decay_on_biases_and_layernorm():
    model = BertForMaskedLM(small())
    groups = param_groups(model, lr=1e-3, weight_decay=0.1)
    decay = {n for g in groups if g["weight_decay"] > 0 for n in g["names"]}
    no_decay = {n for g in groups if g["weight_decay"] == 0 for n in g["names"]}
    assert "bert.embeddings.LayerNorm.weight" in no_decay
    assert "bert.encoder.layer.0.attention.output.LayerNorm.weight" in no_decay
    assert "cls.predictions.transform.LayerNorm.weight" in no_decay
    assert "cls.predictions.bias" in no_decay and "bert.encoder.layer.2.output.dense.bias" in no_decay
    assert "bert.encoder.layer.1.attention.self.query.weight" in decay
    assert "bert.embeddings.word_embeddings.weight" in decay
    assert not any(n.endswith("bias") or "LayerNorm" in n for n in decay)
    # every trainable parameter exactly once (the tied decoder is the embedding matrix)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_llrd_learning_rates_per_layer():
    model = BertForSequenceClassification(small(layers=3))
    opt = build_optimizer(model, lr=1.0, weight_decay=0.01, llrd=0.5)
    lr_of = {n: g["lr"] for g in opt.param_groups for n in g["names"]}
    assert lr_of["bert.embeddings.word_embeddings.weight"] == pytest.approx(0.5 ** 3)
    assert lr_of["bert.embeddings.LayerNorm.weight"] == pytest.approx(0.5 ** 3)
    assert lr_of["bert.encoder.layer.0.attention.self.query.weight"] == pytest.approx(0.5 ** 2)
    assert lr_of["bert.encoder.layer.1.output.dense.bias"] == pytest.approx(0.5)
    assert lr_of["bert.encoder.layer.2.intermediate.dense.weight"] == pytest.approx(1.0)
    assert lr_of["classifier.weight"] == pytest.approx(1.0)
    assert lr_of["bert.pooler.dense.weight"] == pytest.approx(1.0)
    assert layer_index("encoder.layer.11.output.dense.weight", 12) == 12
    with pytest.raises(ConfigError):
        param_groups(model, 1.0, llrd=1.5)


def test_llrd_decays_the_modern_encoders_layers_too():
    # walk V: BERT's layer names alone were matched, so under train.llrd every modern layer trained
    # at the full lr and only the embeddings decayed
    from bertkit.models.modern import ModernBertConfig, ModernBertForSequenceClassification
    config = ModernBertConfig.preset("tiny", vocab_size=100, num_labels=3, num_hidden_layers=3)
    opt = build_optimizer(ModernBertForSequenceClassification(config), lr=1.0, weight_decay=0.01, llrd=0.5)
    lr_of = {n: g["lr"] for g in opt.param_groups for n in g["names"]}
    assert lr_of["model.embeddings.tok_embeddings.weight"] == pytest.approx(0.5 ** 3)
    assert lr_of["model.layers.0.attn.Wqkv.weight"] == pytest.approx(0.5 ** 2)
    assert lr_of["model.layers.1.mlp.Wo.weight"] == pytest.approx(0.5)
    assert lr_of["model.layers.2.mlp_norm.weight"] == pytest.approx(1.0)
    assert lr_of["model.final_norm.weight"] == lr_of["classifier.weight"] == pytest.approx(1.0)
    assert layer_index("model.layers.10.attn.Wo.weight", 12) == 11


def test_schedule_values_match_transformers():
    from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup

    for kind, theirs in (("linear", get_linear_schedule_with_warmup), ("cosine", get_cosine_schedule_with_warmup)):
        f = WarmupDecay(10, 100, kind)
        ref = theirs(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0), 10, 100).lr_lambdas[0]
        for s in (0, 1, 5, 10, 11, 50, 99, 100):
            assert f(s) == pytest.approx(ref(s), abs=1e-12), (kind, s)
        assert f(120) == 0.0  # past the end we stay at 0 (transformers' cosine would rise again)
    lin = WarmupDecay(10, 110, "linear")
    assert lin(5) == 0.5 and lin(10) == 1.0 and lin(60) == 0.5 and lin(110) == 0.0
    cos = WarmupDecay(0, 100, "cosine")
    assert cos(50) == pytest.approx(0.5) and cos(100) == pytest.approx(0.0)


def test_scheduler_keeps_llrd_ratios():
    model = BertForSequenceClassification(small(layers=2))
    opt = build_optimizer(model, lr=1.0, llrd=0.5)
    sched = build_scheduler(opt, 2, 10)
    for _ in range(4):
        opt.step()
        sched.step()
    lrs = {g["layer"]: g["lr"] for g in opt.param_groups}
    assert lrs[2] == pytest.approx(1.0 * (10 - 4) / 8)
    assert lrs[0] == pytest.approx(0.25 * lrs[2])


def test_config_typos_get_suggestions():
    with pytest.raises(ConfigError, match=r"did you mean train\.max_steps\?"):
        parse_config({"train": {"max_step": 5}})
    with pytest.raises(ConfigError, match=r"did you mean data\.objective\?"):
        parse_config({"data": {"objectve": "mlm"}})
    with pytest.raises(ConfigError, match=r"did you mean \[?train"):
        parse_config({"trian": {}})
    with pytest.raises(ConfigError, match=r"did you mean model\.hidden_size\?"):
        parse_config({"model": {"hiden_size": 5}})
    with pytest.raises(ConfigError, match=r"did you mean train\.lr\?"):
        parse_config({}, ["train.lrr=3"])
    cfg = parse_config({"train": {"max_steps": 5}}, ["train.lr=3e-4", "data.corpus=wordnet",
                                                     'train.schedule="cosine"'])
    assert cfg.train.lr == 3e-4 and cfg.data.corpus == "wordnet" and cfg.train.schedule == "cosine"
    assert parse_value("[1, 2]") == [1, 2] and parse_value("true") is True
    with pytest.raises(ConfigError, match="needs data.builder"):
        parse_config({"data": {"objective": "mlm+nsp", "builder": "full_sentences"}})
    with pytest.raises(ConfigError, match="fp16 needs|precision"):
        TrainConfig(precision="fp8")
    with pytest.raises(ConfigError):
        apply_overrides({}, ["nodot=1"], {"train": ["lr"]})


def test_wsd_holds_the_peak_then_decays_as_one_minus_sqrt():
    f = WarmupDecay(10, 110, "wsd", decay_ratio=0.2)  # decay over the last 22 steps: from step 88
    assert f(5) == 0.5 and f(10) == 1.0 and f(87) == 1.0 and f(88) == 1.0
    for s in (90, 99, 105, 110):
        assert f(s) == pytest.approx(1.0 - ((s - 88) / 22) ** 0.5)
    assert f(110) == 0.0 and f(200) == 0.0
    # before the cool-down the lr does not depend on the run's length: a run can be extended
    longer = WarmupDecay(10, 1000, "wsd", decay_ratio=0.2)
    assert [longer(s) for s in range(88)] == [f(s) for s in range(88)]
    with pytest.raises(ConfigError, match="decay_ratio"):
        WarmupDecay(90, 100, "wsd", decay_ratio=0.2)  # 20 decay steps do not fit after 90 of warmup
    with pytest.raises(ConfigError, match="decay_ratio"):
        parse_config({"train": {"schedule": "wsd", "decay_ratio": 0}})
