"""The modern encoder against transformers' real ModernBert classes, same weights, both directions:
saved by bertkit and loaded by transformers, and saved by transformers and loaded by bertkit.

Shapes cover a sliding window shorter than the sequence (local_attention=4: +-2 tokens, at
length 16), a window wider than the sequence, right- and left-padded rows, and the unpadded
path (SDPA) as well as the explicit one (output_attentions). States at padding positions carry
no meaning in either library, so only real positions are compared.
"""

import os
import warnings

import pytest
import torch

import bertkit
from bertkit.models.modern import (ModernBertConfig, ModernBertForMaskedLM, ModernBertForMultipleChoice,
                            ModernBertForQuestionAnswering, ModernBertForSequenceClassification,
                            ModernBertForTokenClassification, ModernBertModel)

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
transformers = pytest.importorskip("transformers")

TOL = 1e-5
IDS = dict(pad_token_id=0, cls_token_id=1, sep_token_id=2, bos_token_id=1, eos_token_id=2)
SHAPES = {
    # 3 layers: global, sliding, global; window +-2 at length 16
    "window4": dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                    num_attention_heads=2, local_attention=4, global_attn_every_n_layers=2),
    # window wider than the sequence, 4 heads, biases on, mean pooling
    "wide": dict(vocab_size=61, hidden_size=48, intermediate_size=40, num_hidden_layers=4,
                 num_attention_heads=4, local_attention=64, attention_bias=True, mlp_bias=True,
                 norm_bias=True, classifier_bias=True, classifier_pooling="mean",
                 global_rope_theta=5000.0, local_rope_theta=300.0),
}
HEADS = [ModernBertModel, ModernBertForMaskedLM, ModernBertForSequenceClassification,
         ModernBertForTokenClassification, ModernBertForQuestionAnswering, ModernBertForMultipleChoice]


def batch(config, seq_len=16, seed=0, left_pad=True):
    """Row 0 full, row 1 right-padded, row 2 left-padded (transformers numbers positions by
    column either way) or, with left_pad=False, right-padded."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, config.vocab_size, (3, seq_len), generator=g)
    mask = torch.ones(3, seq_len, dtype=torch.long)
    mask[1, seq_len * 5 // 8:] = 0
    mask[2, :seq_len // 4] = 0
    ids[1, 0] = ids[2, seq_len // 4] = 1  # [CLS] at the first real position
    ids[0, 0] = 1
    if not left_pad:
        ids[2], mask[2] = ids[2].roll(-(seq_len // 4)), mask[2].roll(-(seq_len // 4))
    return ids.masked_fill(mask == 0, 0), mask


def model_inputs(cls, ids, mask):
    if cls is ModernBertForMultipleChoice:  # 3 rows -> 1 example with 3 choices
        return ids[None], mask[None]
    return ids, mask


def num_labels(cls):
    return 2 if cls is ModernBertForQuestionAnswering else 3  # transformers' QA splits num_labels into start/end


def hf_class(cls):
    return getattr(transformers, cls.__name__)


def compare(ours, theirs, cls, ids, mask, output_attentions):
    """Assert every output agrees at real positions: main outputs, hidden states, attentions."""
    kwargs = dict(output_hidden_states=True, output_attentions=output_attentions)
    x, m = model_inputs(cls, ids, mask)
    with torch.no_grad():
        a = ours(x, attention_mask=m, **kwargs)
        b = theirs(x, attention_mask=m, **kwargs)
    real = mask.bool()
    if cls is ModernBertModel:
        pairs = [(a.last_hidden_state[real], b.last_hidden_state[real])]
    elif cls in (ModernBertForMaskedLM, ModernBertForTokenClassification):
        pairs = [(a.logits[real], b.logits[real])]
    elif cls is ModernBertForQuestionAnswering:
        pairs = [(a.start_logits[real], b.start_logits[real]), (a.end_logits[real], b.end_logits[real])]
    elif cls is ModernBertForSequenceClassification and ours.config.classifier_pooling == "cls":
        # transformers reads column 0 even where it is padding (row 2); bertkit the first real token
        pairs = [(a.logits[mask[:, 0].bool()], b.logits[mask[:, 0].bool()])]
    else:
        pairs = [(a.logits, b.logits)]
    pairs += [(h1[real], h2[real]) for h1, h2 in zip(a.hidden_states, b.hidden_states, strict=True)]
    if output_attentions:  # rows of real queries; transformers' eager probabilities
        pairs += [(p1.transpose(1, 2)[real], p2.transpose(1, 2)[real])
                  for p1, p2 in zip(a.attentions, b.attentions, strict=True)]
    else:
        assert a.attentions is None
    for mine, ref in pairs:
        assert mine.shape == ref.shape
        assert (mine - ref).abs().max().item() < TOL


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("cls", HEADS, ids=lambda c: c.__name__)
def test_saved_by_bertkit_loads_in_transformers(tmp_path, cls, shape):
    config = ModernBertConfig(**SHAPES[shape], **IDS, num_labels=num_labels(cls))
    ours = cls(config).eval()
    ours.save_pretrained(tmp_path)
    theirs, info = hf_class(cls).from_pretrained(tmp_path, attn_implementation="eager",
                                                 output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids, mask = batch(config)
    for output_attentions in (False, True):  # the unpadded SDPA path, then the explicit one
        compare(ours, theirs.eval(), cls, ids, mask, output_attentions)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("cls", HEADS, ids=lambda c: c.__name__)
def test_saved_by_transformers_loads_in_bertkit(tmp_path, cls, shape):
    hf_config = transformers.ModernBertConfig(**SHAPES[shape], **IDS, num_labels=num_labels(cls),
                                              attn_implementation="eager")
    torch.manual_seed(1)
    theirs = hf_class(cls)(hf_config).eval()
    with torch.no_grad():  # transformers inits norms to 1 / 0: perturb them so they are tested too
        for name, p in theirs.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    theirs.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing missing, nothing unused
        ours = cls.from_pretrained(tmp_path)
    ids, mask = batch(ours.config)
    for output_attentions in (False, True):
        compare(ours, theirs, cls, ids, mask, output_attentions)


def test_losses_match_transformers(tmp_path):
    config = ModernBertConfig(**SHAPES["window4"], **IDS, num_labels=3)
    ids, mask = batch(config, left_pad=False)  # transformers' cls pooling reads column 0
    g = torch.Generator().manual_seed(3)
    mlm_labels = torch.where((torch.rand(ids.shape, generator=g) < 0.3) & mask.bool(), ids, -100)
    cases = [
        (ModernBertForMaskedLM, config, dict(labels=mlm_labels)),
        (ModernBertForSequenceClassification, config, dict(labels=torch.tensor([0, 2, 1]))),
        (ModernBertForSequenceClassification, config.replace(num_labels=1),  # regression
         dict(labels=torch.tensor([0.5, -1.0, 2.0]))),
        (ModernBertForTokenClassification, config,
         dict(labels=torch.randint(0, 3, ids.shape, generator=g).masked_fill(mask == 0, -100))),
        (ModernBertForQuestionAnswering, config.replace(num_labels=2),
         dict(start_positions=torch.tensor([1, 3, 5]), end_positions=torch.tensor([4, 6, 9]))),
        (ModernBertForMultipleChoice, config, dict(labels=torch.tensor([2]))),
    ]
    for i, (cls, cfg, labels) in enumerate(cases):
        ours = cls(cfg).eval()
        ours.save_pretrained(tmp_path / str(i))
        theirs = hf_class(cls).from_pretrained(tmp_path / str(i), attn_implementation="eager").eval()
        x, m = model_inputs(cls, ids, mask)
        if cls is ModernBertForQuestionAnswering:  # the span softmax runs over padding states too,
            m = torch.ones_like(m)                 # which mean nothing in either library
        with torch.no_grad():
            a = ours(x, attention_mask=m, **labels)
            b = theirs(x, attention_mask=m, **labels)
        assert abs(a.loss.item() - b.loss.item()) < TOL, cls.__name__
        if cls is ModernBertForMaskedLM:  # logits only at the labelled positions, in row-major order
            selected = mlm_labels != -100
            assert a.logits.shape == (int(selected.sum()), cfg.vocab_size)
            assert (a.logits - b.logits[selected]).abs().max() < TOL


def test_config_round_trips_through_autoconfig(tmp_path):
    ours = ModernBertConfig(**dict(SHAPES["wide"], num_hidden_layers=5), **IDS, global_attn_every_n_layers=2)
    ours.save_pretrained(tmp_path)
    theirs = transformers.AutoConfig.from_pretrained(tmp_path)
    assert type(theirs).__name__ == "ModernBertConfig"
    assert theirs.layer_types == ours.layer_types == ["full_attention", "sliding_attention"] * 2 + ["full_attention"]
    assert theirs.rope_parameters["full_attention"]["rope_theta"] == 5000.0
    assert theirs.rope_parameters["sliding_attention"]["rope_theta"] == 300.0
    assert theirs.sliding_window == 32 and theirs.classifier_pooling == "mean"
    theirs.save_pretrained(tmp_path / "back")
    again = ModernBertConfig.from_pretrained(tmp_path / "back")
    for name in ("layer_types", "global_rope_theta", "local_rope_theta", "local_attention", "hidden_size",
                 "intermediate_size", "norm_bias", "attention_bias", "classifier_pooling", "pad_token_id"):
        assert getattr(again, name) == getattr(ours, name), name


def test_legacy_config_fields_are_read():
    old = ModernBertConfig.from_dict(dict(SHAPES["window4"], **IDS, model_type="modernbert", global_rope_theta=1e4,
                                          local_rope_theta=500.0, global_attn_every_n_layers=3,
                                          reference_compile=True))
    assert old.layer_types == ["full_attention", "sliding_attention", "sliding_attention"]
    assert (old.global_rope_theta, old.local_rope_theta) == (1e4, 500.0)
    assert old.to_dict()["reference_compile"] is True  # unknown fields are kept


def test_bert_class_dispatches_on_model_type(tmp_path):
    config = ModernBertConfig(**SHAPES["window4"], **IDS)
    ModernBertForMaskedLM(config).save_pretrained(tmp_path)
    model = bertkit.BertForMaskedLM.from_pretrained(tmp_path)
    assert type(model) is ModernBertForMaskedLM
    with pytest.warns(UserWarning, match="not used"):  # the MLM head's weights
        assert type(bertkit.BertModel.from_pretrained(tmp_path)) is ModernBertModel
    with pytest.raises(bertkit.CheckpointError, match="no BertForPreTraining counterpart"):
        bertkit.BertForPreTraining.from_pretrained(tmp_path)
