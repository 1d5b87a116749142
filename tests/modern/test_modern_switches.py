"""The modern encoder's ablation switches, position_embedding_type and norm_placement: each
against the formula written out by hand from the same weights, the defaults unchanged, what
"none" means (permutations), the save warning and transformers' wrong outputs it warns of,
bad values refused."""

import math
import os
from pathlib import Path
import warnings

import pytest
import torch
import torch.nn.functional as F

from bertkit import ConfigError
from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM, ModernBertModel
from bertkit.models.variants.sinusoidal import sinusoidal_table

# 2 layers (global, sliding) with a window wider than the sequence: the sliding layer differs
# from the global one only by its RoPE base. Norm biases on, so they are checked too.
CONFIG = dict(vocab_size=89, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
              local_attention=64, global_attn_every_n_layers=2, norm_bias=True, max_position_embeddings=16,
              global_rope_theta=500.0, local_rope_theta=50.0, pad_token_id=0, cls_token_id=1, sep_token_id=2,
              bos_token_id=1, eos_token_id=2)
SWITCHES = {
    "default": {},
    "post-ln": dict(norm_placement="post"),
    "absolute": dict(position_embedding_type="absolute"),
    "sinusoidal": dict(position_embedding_type="sinusoidal"),
    "none": dict(position_embedding_type="none"),
    "bert-like": dict(norm_placement="post", position_embedding_type="absolute"),
}


def model_with(switches: dict, **changes) -> ModernBertModel:
    torch.manual_seed(0)
    model = ModernBertModel(ModernBertConfig(**{**CONFIG, **changes}, **switches)).eval()
    with torch.no_grad():  # norms away from (1, 0), so a norm in the wrong place shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
            if "Wqkv" in name:  # at init (std 0.02) attention is near uniform: positions barely show
                p.mul_(20.0)
    return model


def batch(seq_len=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, CONFIG["vocab_size"], (3, seq_len), generator=g)
    mask = torch.ones(3, seq_len, dtype=torch.long)
    mask[1, 8:] = 0
    mask[2, 5:] = 0
    return ids.masked_fill(mask == 0, 0), mask


# ---------------------------------------------------------------------------- by hand
def norm(x, module):
    """LayerNorm written out: (x - mean) / sqrt(var + eps) * w + b."""
    if isinstance(module, torch.nn.Identity):
        return x
    y = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + module.eps)
    return y * module.weight + (0 if module.bias is None else module.bias)


def rope(x, theta):
    """x (B, h, T, d): rotate each pair (x_j, x_{j + d/2}) at position t by t / theta^(2j/d)."""
    d, length = x.shape[-1], x.shape[-2]
    angle = torch.arange(length, dtype=torch.float64)[:, None] / theta ** (torch.arange(d // 2) * 2 / d)
    cos, sin = angle.cos().float(), angle.sin().float()
    first, second = x[..., :d // 2], x[..., d // 2:]
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


def attention(layer, x, mask, config):
    b, t, hidden = x.shape
    heads, d = config.num_attention_heads, config.head_dim
    q, k, v = (t_.view(b, t, heads, d).transpose(1, 2) for t_ in (x @ layer.attn.Wqkv.weight.T).split(hidden, -1))
    if config.position_embedding_type == "rope":
        theta = config.global_rope_theta if layer.attn.layer_type == "full_attention" else config.local_rope_theta
        q, k = rope(q, theta), rope(k, theta)
    scores = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(mask[:, None, None, :] == 0, -math.inf)
    return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, hidden) @ layer.attn.Wo.weight.T


def mlp(layer, x):
    a, g = (x @ layer.mlp.Wi.weight.T).chunk(2, dim=-1)
    return (F.gelu(a) * g) @ layer.mlp.Wo.weight.T


def by_hand(model, ids, mask):
    """The module docstring's math, step by step, from the model's weights."""
    config, emb = model.config, model.embeddings
    x = emb.tok_embeddings.weight[ids]
    positions = torch.arange(ids.shape[1])
    if config.position_embedding_type == "absolute":
        x = x + emb.position_embeddings.weight[positions]
    elif config.position_embedding_type == "sinusoidal":
        x = x + sinusoidal_table(config.max_position_embeddings, config.hidden_size)[positions]
    x = norm(x, emb.norm)
    for layer in model.layers:
        if config.norm_placement == "post":
            x = norm(x + attention(layer, x, mask, config), layer.attn_norm)
            x = norm(x + mlp(layer, x), layer.mlp_norm)
        else:
            x = x + attention(layer, norm(x, layer.attn_norm), mask, config)
            x = x + mlp(layer, norm(x, layer.mlp_norm))
    return x if config.norm_placement == "post" else norm(x, model.final_norm)


@pytest.mark.parametrize("name", SWITCHES)
def test_each_switch_computes_its_formula(name):
    model = model_with(SWITCHES[name])
    ids, mask = batch()
    real = mask.bool()
    expected = by_hand(model, ids, mask)
    with torch.no_grad():
        unpadded = model(ids, attention_mask=mask).last_hidden_state
        ModernBertModel.unpad = False
        try:
            padded = model(ids, attention_mask=mask).last_hidden_state
        finally:
            ModernBertModel.unpad = True
    torch.testing.assert_close(unpadded[real], expected[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(padded[real], expected[real], atol=1e-5, rtol=1e-5)


def test_the_reference_tells_the_switches_apart():
    """by_hand is not blind to the switches: post-LN weights run as pre-LN give other numbers."""
    ids, mask = batch()
    post = model_with(SWITCHES["post-ln"])
    pre = model_with({})
    pre.load_state_dict({k: v for k, v in post.state_dict().items()}, strict=False)
    assert not torch.allclose(by_hand(pre, ids, mask), by_hand(post, ids, mask), atol=1e-3)


def test_parameters_each_switch_adds_or_removes():
    keys = lambda switches: set(model_with(switches).state_dict())  # noqa: E731
    default = keys({})
    assert keys(SWITCHES["post-ln"]) - default == {"layers.0.attn_norm.weight", "layers.0.attn_norm.bias"}
    assert default - keys(SWITCHES["post-ln"]) == {"final_norm.weight", "final_norm.bias"}
    assert keys(SWITCHES["absolute"]) - default == {"embeddings.position_embeddings.weight"}
    assert keys(SWITCHES["sinusoidal"]) == keys(SWITCHES["none"]) == default  # the table is a buffer
    table = model_with(SWITCHES["sinusoidal"]).embeddings.sinusoidal_positions
    torch.testing.assert_close(table, sinusoidal_table(16, 32))


def test_learned_positions_train():
    model = ModernBertForMaskedLM(ModernBertConfig(**CONFIG, position_embedding_type="absolute"))
    ids, mask = batch()
    labels = ids.masked_fill(mask == 0, -100)
    model(ids, attention_mask=mask, labels=labels).loss.backward()
    grad = model.model.embeddings.position_embeddings.weight.grad
    assert grad[:12].abs().sum(-1).gt(0).all() and grad[12:].abs().sum() == 0  # only positions seen


def permuted_outputs(switches: dict, **changes):
    model = model_with(switches, **changes)
    ids = batch(seq_len=12)[0]
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(ids[:, perm]).last_hidden_state, model(ids).last_hidden_state[:, perm]


def test_no_positions_reads_a_bag_of_words_unless_a_window_is_narrower():
    """With every layer global, permuting the tokens permutes the states: no order is seen.
    Positions of any kind, or a window narrower than the row, break that."""
    torch.testing.assert_close(*permuted_outputs(SWITCHES["none"], global_attn_every_n_layers=1), atol=1e-5,
                               rtol=1e-5)
    for switches in (SWITCHES["default"], SWITCHES["absolute"], SWITCHES["sinusoidal"]):
        assert not torch.allclose(*permuted_outputs(switches, global_attn_every_n_layers=1), atol=1e-3)
    # the recipe's alternative: sliding-window layers of +-2 tokens still see which tokens are near
    assert not torch.allclose(*permuted_outputs(SWITCHES["none"], local_attention=4), atol=1e-3)


# ---------------------------------------------------------------------------- files
def test_defaults_write_transformers_config_and_save_silently(tmp_path):
    config = ModernBertConfig(**CONFIG)
    assert "position_embedding_type" not in config.to_dict() and "norm_placement" not in config.to_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ModernBertForMaskedLM(config).save_pretrained(tmp_path)
    assert ModernBertConfig.from_pretrained(tmp_path).replace(architectures=None) == config


@pytest.mark.parametrize("name", ["post-ln", "absolute", "sinusoidal", "none"])
def test_non_default_switch_warns_on_save_and_round_trips(name, tmp_path):
    model = ModernBertForMaskedLM(ModernBertConfig(**CONFIG, **SWITCHES[name])).eval()
    (switch, value), = SWITCHES[name].items()
    with pytest.warns(UserWarning, match=f"{switch}='{value}' load in transformers 5's ModernBert with wrong"):
        model.save_pretrained(tmp_path)
    loaded = ModernBertForMaskedLM.from_pretrained(tmp_path).eval()
    assert getattr(loaded.config, switch) == value
    ids, mask = batch()
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits)


@pytest.mark.parametrize("name", ["post-ln", "absolute", "none"])
def test_transformers_runs_such_checkpoints_wrong(name, tmp_path):
    """What the warning says, against the real library: it loads, and computes something else."""
    transformers = pytest.importorskip("transformers")  # optional: a test-only dependency
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    model = model_with(SWITCHES[name])
    with pytest.warns(UserWarning, match="wrong outputs"):
        model.save_pretrained(tmp_path)
    theirs = transformers.AutoModel.from_pretrained(tmp_path).eval()
    ids, mask = batch()
    with torch.no_grad():
        ours, other = model(ids).last_hidden_state, theirs(input_ids=ids).last_hidden_state
    assert not torch.allclose(ours, other, atol=1e-2)


@pytest.mark.parametrize("change, message", [
    (dict(position_embedding_type="learned"), r"position_embedding_type 'learned' is not known; use one of "
                                              r"\('rope', 'absolute', 'sinusoidal', 'none'\)"),
    (dict(norm_placement="sandwich"), r"norm_placement 'sandwich' is not known; use one of \('pre', 'post'\)"),
])
def test_bad_switch_values_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        ModernBertConfig(**CONFIG, **change)
    with pytest.raises(ConfigError, match=message):
        ModernBertConfig.from_dict({**CONFIG, **change})


def test_odd_head_size_needs_rope_only():
    odd = dict(CONFIG, hidden_size=36, num_attention_heads=4)  # head size 9
    with pytest.raises(ConfigError, match="must be even"):
        ModernBertConfig(**odd)
    ModernBertConfig(**odd, position_embedding_type="absolute")


@pytest.mark.parametrize("model, key", [({"model_type": "modernbert", "num_experts": 4}, "num_experts"),
                                        ({"model_type": "deberta-v2", "local_attention": 32}, "local_attention")])
def test_a_recipe_key_of_the_other_family_is_refused_by_name(model, key):
    """The BERT-family switches on the modern recipe were "unknown" ("did you mean model.norm_eps?");
    the modern keys under model_type=deberta-v2 were kept in config.json and never read."""
    from bertkit.recipes.pretrain import parse_config

    with pytest.raises(ConfigError, match=f"model.{key} is a setting of the .* family .*remove model.{key}"):
        parse_config({"model": {"model_type": model["model_type"]}}, [(f"model.{key}", model[key])])  # --set
    # the key in the recipe, another model_type given: the user set no such key, the recipe is of the other family
    with pytest.raises(ConfigError, match=f"the recipe sets model.{key}, a setting of the .* family .*; model_type "
                                          f"'{model['model_type']}' is of the .* family: start from a recipe of"):
        parse_config({"model": {key: model[key]}}, [("model.model_type", model["model_type"])])


def test_saving_with_a_tokenizer_of_other_special_ids_warns(minilm_dir, tmp_path):
    """The presets carry bertkit's WordPiece ids ([CLS]=2); saved beside MiniLM's tokenizer
    ([CLS]=101) the config named other tokens, without a word."""
    from bertkit import Tokenizer

    tok = Tokenizer.from_pretrained(minilm_dir)
    small = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2)
    preset = ModernBertForMaskedLM(ModernBertConfig.preset("mini", vocab_size=tok.vocab_size, **small))
    with pytest.warns(UserWarning, match=r"cls_token_id=2 \(the tokenizer's is 101\)"):
        preset.save_pretrained(tmp_path / "a", tokenizer=tok)
    ids = dict(pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
               bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
    matched = ModernBertForMaskedLM(ModernBertConfig.preset("mini", vocab_size=tok.vocab_size, **small, **ids))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        matched.save_pretrained(tmp_path / "b", tokenizer=tok)


def test_the_recipe_gives_the_config_a_bpe_tokenizers_special_ids(tmp_path):
    """The default recipe with tokenizer.kind = "bpe" kept the preset's WordPiece ids ([CLS]=2,
    [SEP]=3) beside a tokenizer whose are 0 and 2."""
    from bertkit import Tokenizer
    from bertkit.recipes.pretrain import load_config, model_config, with_tokenizer_ids

    text = tmp_path / "text.txt"
    text.write_text("the film won an award.\nshares in the bank fell on monday.\n" * 20, encoding="utf-8")
    tok = Tokenizer.train_bpe([str(text)], vocab_size=300, show_progress=False)
    cfg = load_config(str(Path(__file__).parents[2] / "configs" / "pretrain-tiny.toml"), ["tokenizer.kind=bpe"])
    config = with_tokenizer_ids(model_config(cfg, tok.vocab_size, tok.pad_token_id), tok, cfg.model)
    assert (config.cls_token_id, config.sep_token_id, config.bos_token_id, config.eos_token_id) == \
        (tok.cls_token_id, tok.sep_token_id, tok.cls_token_id, tok.sep_token_id) != (2, 3, 2, 3)
