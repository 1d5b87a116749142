"""transformers' habits on bertkit's models, tokenizer and config, checked against transformers:
its Trainer trains and saves a bertkit classifier; num_parameters, checkpointing, resizing,
from_pretrained(dtype=, attn_implementation=); tokenizer keyword arguments and attribute access;
BertConfig(**hf_config.to_dict()) and LABEL_i names."""

import warnings

import pytest
import torch

import bertkit
from bertkit.errors import ConfigError

transformers = pytest.importorskip("transformers")

TEXTS = ["Who wrote the letter?", "Where is the bank of the river?"]
PAIRS = ["The letter was written by a clerk in the town hall in 1920.", "On the left, past the mill."]


def tiny(**overrides) -> bertkit.BertConfig:
    values = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    return bertkit.BertConfig(**{**values, **overrides})


def _hf(cls, directory, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(transformers, cls).from_pretrained(directory, **kwargs).eval()


# ---------------------------------------------------------------------------- tokenizer
def test_tokenizer_takes_transformers_arguments(minilm_dir):
    ours = bertkit.Tokenizer.from_pretrained(minilm_dir)
    theirs = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    kwargs = dict(text_pair=PAIRS, return_offsets_mapping=True, padding="max_length",
                  truncation="only_second", max_length=16, return_tensors="pt")
    got, expected = ours(TEXTS, **kwargs), theirs(TEXTS, **kwargs)
    for key in ("input_ids", "token_type_ids", "attention_mask", "offset_mapping"):
        assert torch.equal(got[key], expected[key]), key
    assert got.input_ids is got["input_ids"] and got.offset_mapping.shape == (2, 16, 2)
    with pytest.raises(AttributeError, match="no key or attribute 'pixel_values'"):
        got.pixel_values
    assert ours.tokenize("Unbelievably, tokenizers split words.") == \
        theirs.tokenize("Unbelievably, tokenizers split words.")
    lists = ours(TEXTS[0], text_pair=PAIRS[0], truncation="do_not_truncate", return_tensors=None)
    assert lists["input_ids"][0] == theirs(TEXTS[0], text_pair=PAIRS[0])["input_ids"]
    with pytest.raises(ConfigError, match="truncation='only_third'"):
        ours(TEXTS, truncation="only_third")
    with pytest.raises(ConfigError, match="pairs or text_pair"):
        ours(TEXTS, PAIRS, text_pair=PAIRS)

    model = bertkit.BertModel.from_pretrained(minilm_dir)
    enc = ours(TEXTS, text_pair=PAIRS)  # attribute access does not get in the way of **enc
    with torch.no_grad():
        assert model(**enc).last_hidden_state.shape[:2] == enc.input_ids.shape


# ---------------------------------------------------------------------------- config
def test_config_takes_a_transformers_config_dict():
    hf = transformers.BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=64, num_labels=3)
    config = bertkit.BertConfig(**hf.to_dict())
    assert config.hidden_size == 32 and config.num_labels == 3
    assert config.id2label == hf.id2label and config.label2id == hf.label2id
    assert config.extra["transformers_version"] == hf.to_dict()["transformers_version"]
    assert bertkit.BertConfig(**hf.to_dict()).to_dict()["transformers_version"]  # kept on save
    plain = bertkit.BertConfig(num_labels=2)
    assert plain.id2label == transformers.BertConfig(num_labels=2).id2label == {0: "LABEL_0", 1: "LABEL_1"}
    assert plain.replace(num_labels=4).id2label == transformers.BertConfig(num_labels=4).id2label
    named = bertkit.BertConfig(id2label={0: "neg", 1: "pos"})
    assert named.num_labels == 2 and named.label2id == {"neg": 0, "pos": 1}


# ---------------------------------------------------------------------------- models
def test_num_parameters_as_transformers(tmp_path):
    model = bertkit.BertForSequenceClassification(tiny(num_labels=3))
    model.save_pretrained(tmp_path)
    hf = _hf("BertForSequenceClassification", tmp_path)
    for kwargs in ({}, {"exclude_embeddings": True}):
        assert model.num_parameters(**kwargs) == hf.num_parameters(**kwargs)
    for m in (model, hf):
        for p in m.bert.parameters():
            p.requires_grad_(False)
    assert model.num_parameters(only_trainable=True) == hf.num_parameters(only_trainable=True) == 32 * 3 + 3


def test_resize_token_embeddings_keeps_the_tie(tmp_path):
    torch.manual_seed(0)
    model = bertkit.BertForMaskedLM(tiny()).eval()
    ids = torch.randint(5, 120, (2, 9))
    with torch.no_grad():
        before = model(ids, full_logits=True).logits
    embedding = model.resize_token_embeddings(125, pad_to_multiple_of=8)  # -> 128
    assert embedding.num_embeddings == model.config.vocab_size == 128
    assert model.cls.predictions.word_embeddings.weight is model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.bias.shape == (128,)
    with torch.no_grad():
        after = model(ids, full_logits=True).logits
        assert torch.allclose(after[..., :120], before, atol=1e-6)  # old tokens unchanged
        model.bert.embeddings.word_embeddings.weight[127] += 1.0  # the decoder moves with the table
        assert not torch.allclose(model(ids, full_logits=True).logits[..., 127], after[..., 127])
    model.save_pretrained(tmp_path)
    hf = _hf("BertForMaskedLM", tmp_path)
    with torch.no_grad():
        assert (hf(ids).logits - model(ids, full_logits=True).logits).abs().max() < 1e-5


def test_from_pretrained_dtype_and_attn_implementation(tmp_path):
    bertkit.BertModel(tiny()).save_pretrained(tmp_path)
    for kwargs in ({"dtype": torch.float64}, {"torch_dtype": "float64"}, {"dtype": "torch.float64"}):
        assert next(bertkit.BertModel.from_pretrained(tmp_path, **kwargs).parameters()).dtype == torch.float64
    assert next(bertkit.BertModel.from_pretrained(tmp_path, dtype="auto").parameters()).dtype == torch.float32
    bertkit.BertModel.from_pretrained(tmp_path, attn_implementation="eager")
    with pytest.raises(ConfigError, match="flash_attention_2"):
        bertkit.BertModel.from_pretrained(tmp_path, attn_implementation="flash_attention_2")
    with pytest.raises(ConfigError, match="not both"):
        bertkit.BertModel.from_pretrained(tmp_path, dtype="float32", torch_dtype="float32")


def test_dtype_reaches_a_model_of_the_other_family(tmp_path):
    """BertModel.from_pretrained on a modern checkpoint builds the modern class: dtype and
    attn_implementation go with it (they had been dropped silently)."""
    from bertkit.models.modern import ModernBertConfig, ModernBertModel

    config = ModernBertConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                              cls_token_id=1, sep_token_id=2)
    ModernBertModel(config).save_pretrained(tmp_path)
    model = bertkit.BertModel.from_pretrained(tmp_path, dtype=torch.float64)
    assert type(model) is ModernBertModel and next(model.parameters()).dtype == torch.float64
    with pytest.raises(ConfigError, match="flash_attention_2"):
        bertkit.BertModel.from_pretrained(tmp_path, attn_implementation="flash_attention_2")


def test_gradient_checkpointing_switch_gives_the_same_gradients():
    torch.manual_seed(0)
    model = bertkit.BertForSequenceClassification(tiny(num_labels=2)).train()
    ids, labels = torch.randint(5, 120, (3, 10)), torch.tensor([0, 1, 1])

    def grads():
        model.zero_grad()
        model(ids, labels=labels).loss.backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    plain = grads()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert model.is_gradient_checkpointing and model.bert.encoder.gradient_checkpointing
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads(), plain))
    model.gradient_checkpointing_disable()
    assert not model.is_gradient_checkpointing
    with pytest.raises(ConfigError, match="offload"):
        model.gradient_checkpointing_enable(offload=True)


class _Topics(torch.utils.data.Dataset):
    """32 random sequences, labelled by whether token 1 is in the upper half of the vocabulary."""

    def __len__(self):
        return 32

    def __getitem__(self, i):
        ids = torch.randint(5, 120, (12,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "attention_mask": torch.ones(12, dtype=torch.long),
                "labels": torch.tensor(int(ids[1] >= 62))}


def test_transformers_trainer_trains_and_saves_a_bertkit_model(tmp_path):
    torch.manual_seed(0)
    model = bertkit.BertForSequenceClassification(tiny(num_labels=2))
    start = {k: v.clone() for k, v in model.state_dict().items()}
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=4, per_device_train_batch_size=8, learning_rate=1e-3,
        logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, activation_checkpointing=True,
        dataloader_num_workers=0, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = transformers.Trainer(model=model, args=args, train_dataset=_Topics())
        result = trainer.train()
    assert result.global_step == 4 and model.is_gradient_checkpointing
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 4 and all(loss > 0 for loss in losses)
    assert any(not torch.equal(start[k], v) for k, v in model.state_dict().items())

    trainer.save_model(str(tmp_path / "saved"))  # a plain state dict: bertkit's keys are transformers'
    model.eval()
    ids = torch.randint(5, 120, (3, 12))
    with torch.no_grad():
        expected = model(ids).logits
        reloaded = bertkit.BertForSequenceClassification.from_pretrained(tmp_path / "saved", config=model.config)
        assert torch.allclose(reloaded(ids).logits, expected, atol=1e-6)
        model.save_pretrained(tmp_path / "full")
        hf = _hf("BertForSequenceClassification", tmp_path / "full")
        assert (hf(ids).logits - expected).abs().max() < 1e-5


def test_transformers_pipelines_run_on_bertkit_checkpoints(minilm_dir, tmp_path):
    """pipeline("text-classification") and pipeline("fill-mask") on directories bertkit saved
    give bertkit's own labels, scores and top tokens."""
    tokenizer = bertkit.Tokenizer.from_pretrained(minilm_dir)
    small = dict(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=64)
    torch.manual_seed(0)
    clf = bertkit.BertForSequenceClassification(bertkit.BertConfig(
        **small, id2label={0: "business", 1: "sport", 2: "tech"}, initializer_range=0.5)).eval()
    clf.save_pretrained(tmp_path / "clf", tokenizer=tokenizer)
    texts = ["Shares fell as the bank warned on profits.", "The striker scored twice in the final."]
    with torch.no_grad():
        probs = clf(**tokenizer(texts)).logits.softmax(-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        classify = transformers.pipeline("text-classification", model=str(tmp_path / "clf"), device="cpu")
    for row, result in zip(probs, classify(texts)):
        assert result["label"] == clf.config.id2label[int(row.argmax())]
        assert abs(result["score"] - float(row.max())) < 1e-5

    torch.manual_seed(1)
    mlm = bertkit.BertForMaskedLM(bertkit.BertConfig(**small)).eval()
    mlm.save_pretrained(tmp_path / "mlm", tokenizer=tokenizer)
    text = "The capital of France is [MASK]."
    enc = tokenizer(text)
    position = int((enc.input_ids[0] == tokenizer.mask_token_id).nonzero())
    with torch.no_grad():
        top = mlm(**enc, full_logits=True).logits[0, position].softmax(-1).topk(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fill = transformers.pipeline("fill-mask", model=str(tmp_path / "mlm"), device="cpu")
    results = fill(text, top_k=5)
    assert [r["token"] for r in results] == top.indices.tolist()
    assert max(abs(r["score"] - float(s)) for r, s in zip(results, top.values)) < 1e-5


# ---------------------------------------------------------------------------- a fine-tuned run directory
def test_a_fine_tuned_run_is_read_at_its_length_by_predict_bertkit_and_transformers(tmp_path, capsys):
    """walk N #6: a model fine-tuned at data.max_length=128 was read at 512 tokens by
    bertkit.Tokenizer and transformers' pipeline (tokenizer_config.json kept the checkpoint's
    model_max_length) and at 128 by predict: other predictions for the same long text."""
    import json

    from bertkit.commands.cli import main
    from tests.tasks.helpers import make_tiny_model

    texts = [f"shares fell {i} percent at the bank" for i in range(8)] + [f"the striker scored {i} goals" for i in
                                                                           range(8)]
    model = make_tiny_model(tmp_path / "tiny", texts)  # 64 positions; its tokenizer says 512
    rows = "".join(f'"{t}",{"business" if "bank" in t else "sport"}\n' for t in texts)
    (tmp_path / "train.csv").write_text("text,label\n" + rows, encoding="utf-8")
    run = str(tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", model, "--train", str(tmp_path / "train.csv"),
                     "--dev", str(tmp_path / "train.csv"), "--out", run, "--no-progress", "--no-baseline", "--set",
                     "data.max_length=12", "train.max_steps=20", "train.lr=3e-3", "train.batch_size=8"]) == 0
    config = json.loads((tmp_path / "run" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["model_max_length"] == 12

    long_text = "shares fell 5 percent at the bank as the striker scored 3 goals the striker scored 4 goals"
    (tmp_path / "long.txt").write_text(long_text + "\n", encoding="utf-8")
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["predict", "--model", run, "--input", str(tmp_path / "long.txt"), "--output", "-"]) == 0
    predicted = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["probabilities"]

    tok = bertkit.Tokenizer.from_pretrained(run)
    with pytest.warns(UserWarning, match="truncated to max_length=12 tokens"):
        batch = tok([long_text])
    assert batch["input_ids"].shape[1] == 12 < len(tok.encode(long_text))  # the text is longer than the window
    clf = bertkit.BertForSequenceClassification.from_pretrained(run)
    with torch.no_grad():
        probs = clf(**batch).logits.softmax(-1)[0]
    ours = {clf.config.id2label[i]: float(p) for i, p in enumerate(probs)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        classify = transformers.pipeline("text-classification", model=run, device="cpu")
        theirs = {r["label"]: r["score"] for r in classify(long_text, truncation=True, top_k=None)}
    assert len(transformers.AutoTokenizer.from_pretrained(run)(long_text, truncation=True)["input_ids"]) == 12
    for label, p in predicted.items():
        assert ours[label] == pytest.approx(p, abs=2e-6) and theirs[label] == pytest.approx(p, abs=2e-6)
