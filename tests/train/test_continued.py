"""Continued (domain-adaptive) pre-training from MiniLM: init, head, keyword masking, general mixing."""

import json
import os
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertkit.models.checkpoint import read_state_dict
from bertkit.errors import CheckpointError, ConfigError
from bertkit.data.keywords import read_keywords
from bertkit.objectives.mlm import masking_options
from bertkit.recipes.continued import general_count, mix_examples
from bertkit.recipes import continued
from bertkit.recipes.pretrain import DataSection, build_model, load_config, parse_config, run_pretraining

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYWORDS = ["market", "shares", "profits", "economy", "bank", "prices", "sales", "growth"]


def test_init_loads_the_encoder_and_ties_a_new_identity_head(minilm_dir):
    cfg = parse_config({"model": {"init": minilm_dir}, "data": {"max_length": 64}})
    model = build_model(cfg, 30522, 0)
    saved = read_state_dict(minilm_dir)  # a BertModel: keys without the "bert." prefix
    for key in ("encoder.layer.0.attention.self.query.weight", "embeddings.word_embeddings.weight",
                "encoder.layer.5.output.LayerNorm.bias"):
        assert torch.equal(model.bert.state_dict()[key], saved[key])
    head = model.cls.predictions
    assert torch.equal(head.transform.dense.weight, torch.eye(384))
    assert not head.transform.dense.bias.any() and not head.bias.any()
    assert head.word_embeddings.weight is model.bert.embeddings.word_embeddings.weight  # tied
    assert sorted(model.init_info["new_head_weights"])[0] == "cls.predictions.bias"
    # MiniLM's pooler is carried (frozen) so that fine-tuning after adaptation starts from it
    assert model.init_info["unused_weights"] == []
    assert torch.equal(model.bert.pooler.dense.weight, saved["pooler.dense.weight"])
    assert not any(p.requires_grad for p in model.bert.pooler.parameters())

    normal = build_model(parse_config({"model": {"init": minilm_dir, "head_init": "normal",
                                                 "freeze_encoder": True}}), 30522, 0)
    w = normal.cls.predictions.transform.dense.weight
    assert abs(float(w.detach().std()) - 0.02) < 0.002 and abs(float(w.detach().mean())) < 0.001
    trainable = {n for n, p in normal.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith("cls.") for n in trainable)


def test_bad_init_settings_are_refused(minilm_dir, tmp_path):
    with pytest.raises(ConfigError, match="model.init"):
        parse_config({"model": {"head_init": "identity"}})
    with pytest.raises(ConfigError, match="not a model directory"):
        parse_config({"model": {"init": str(tmp_path)}})
    (tmp_path / "best").mkdir()  # a run folder (early stopping kept best/): the model is named
    (tmp_path / "best" / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"is a run folder: the model is {tmp_path / 'best'}"):
        parse_config({"model": {"init": str(tmp_path)}})
    with pytest.raises(ConfigError, match="head_init"):
        parse_config({"model": {"init": minilm_dir, "head_init": "zeros"}})
    with pytest.raises(ConfigError, match=r"data.objective = \"electra\" builds and trains a new electra model; it "
                                          "does not continue a checkpoint"):  # it had named model.model_type
        parse_config({"model": {"init": minilm_dir}, "data": {"objective": "electra"}})
    with pytest.raises(ConfigError, match="exceeds the 512 positions"):
        build_model(parse_config({"model": {"init": minilm_dir}, "data": {"max_length": 600}}), 30522, 0)
    with pytest.raises(CheckpointError, match="weight shapes"):
        build_model(parse_config({"model": {"init": minilm_dir, "intermediate_size": 64}}), 30522, 0)
    with pytest.raises(ConfigError, match="general_corpus"):
        DataSection(general_fraction=0.2)
    with pytest.raises(ConfigError, match="keyword"):
        DataSection(keywords=["market"])
    with pytest.raises(ConfigError, match="needs data.keywords"):
        DataSection(masking="keyword")
    with pytest.raises(ConfigError, match="single words"):
        read_keywords(["stock market"])


def test_keyword_masking_masks_keywords_at_the_higher_rate(minilm_dir, bbc_dir, tmp_path):
    from bertkit.data.collate import MLMCollator
    from bertkit.tokenizer import Tokenizer

    words = tmp_path / "keywords.txt"
    words.write_text("# business words\n" + "\n".join(KEYWORDS) + "\n")
    data = DataSection(masking="keyword", keywords=str(words), keyword_probability=0.6)
    assert read_keywords(data.keywords) == KEYWORDS
    tok = Tokenizer.from_pretrained(minilm_dir)
    collate = MLMCollator(tok, strategy=data.masking, seed=0, mask_replace_prob=1.0,
                          random_replace_prob=0.0, **masking_options(data))
    folder = os.path.join(bbc_dir, "business")
    texts = [open(os.path.join(folder, f), encoding="utf-8", errors="replace").read()
             for f in sorted(os.listdir(folder))[:60]]
    rows = [ids[:126] for ids in tok.encode_batch(texts)]
    examples = [{"input_ids": np.array([tok.cls_token_id, *r, tok.sep_token_id])} for r in rows]
    keyword_ids = set(tok.convert_tokens_to_ids(KEYWORDS))
    hits = {True: [0, 0], False: [0, 0]}  # is keyword -> [masked, seen]
    for _ in range(5):
        batch = collate(examples)
        masked = batch["labels"] != -100
        original = torch.where(masked, batch["labels"], batch["input_ids"])
        specials = torch.tensor([tok.cls_token_id, tok.sep_token_id])
        candidates = batch["attention_mask"].bool() & ~torch.isin(original, specials)
        is_kw = torch.isin(original, torch.tensor(sorted(keyword_ids)))
        for flag, where in ((True, is_kw & candidates), (False, ~is_kw & candidates)):
            hits[flag][0] += int((masked & where).sum())
            hits[flag][1] += int(where.sum())
    kw_rate = hits[True][0] / hits[True][1]
    other_rate = hits[False][0] / hits[False][1]
    assert hits[True][1] > 200  # the keywords do occur in business news
    assert kw_rate > 0.55 and other_rate < 0.15 and kw_rate > 4 * other_rate


def test_continued_pretraining_evaluates_the_start_model_unless_told_not_to(minilm_dir):
    """Step 0's held-out loss is the number a domain-adapted model's later losses are read against."""
    assert parse_config({}).train.eval_at_start is False  # from scratch: a random model's loss says nothing
    assert parse_config({"model": {"init": minilm_dir}}).train.eval_at_start is True
    assert parse_config({"model": {"init": minilm_dir}}, ["train.eval_at_start=false"]).train.eval_at_start is False
    # a run started before this default resumes: the step-0 evaluation is read at step 0 only
    from bertkit.runtime.resume_check import check_resume_options

    now = parse_config({"model": {"init": minilm_dir}}).to_dict()
    before = {**now, "train": {**now["train"], "eval_at_start": False}}
    check_resume_options(before, now, "runs/tapt")


def test_general_mixing_ratio():
    domain = [{"input_ids": np.array([1, i, 2])} for i in range(300)]
    general = [{"input_ids": np.array([1, 10_000 + i, 2])} for i in range(50)]
    for fraction in (0.1, 0.25, 0.5):
        mixed = mix_examples(domain, general, fraction, seed=0)
        share = sum(int(ex["input_ids"][1]) >= 10_000 for ex in mixed) / len(mixed)
        assert abs(share - fraction) <= 1 / len(mixed)
        assert len(mixed) - len(domain) == general_count(len(domain), fraction)
    # fraction 0.5 needs 300 general examples from 50: six whole copies
    ids = [int(ex["input_ids"][1]) for ex in mix_examples(domain, general, 0.5, seed=0)[300:]]
    assert sorted(set(ids)) == list(range(10_000, 10_050)) and all(ids.count(i) == 6 for i in set(ids))
    assert mix_examples(domain, general, 0.0, seed=0) == domain


def test_dapt_from_minilm_lowers_held_out_domain_loss(minilm_dir, bbc_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("bertkit.train.trainer.Trainer.plot", lambda self: None)  # PNGs: not tested here
    out = str(tmp_path / "dapt")
    raw = {
        "model": {"init": minilm_dir},
        "data": {"corpus": os.path.join(bbc_dir, "business"), "max_documents": 30, "max_length": 48,
                 "eval_fraction": 0.2, "max_eval_examples": 16, "masking": "keyword",
                 "keywords": KEYWORDS, "general_corpus": "wordnet", "general_max_documents": 150,
                 "general_fraction": 0.2},
        "train": {"max_steps": 6, "batch_size": 8, "lr": 3e-4, "eval_every": 3, "log_every": 1,
                  "save_every": 0, "seed": 0},
    }
    metrics = run_pretraining(parse_config(raw), out, progress=False)
    # the general text is said, with its share and how to leave it out (walk O #2: mixed in unsaid)
    said = capsys.readouterr().out
    assert ("pretrain: mixing in data.general_corpus=wordnet (20% of the training sequences; --set "
            "'data.general_corpus=\"\"' to use only data.corpus): tokenizing it") in said
    counted = re.search(r"(\d+) train examples \((\d+) of them from data.general_corpus=wordnet\)", said)
    assert counted and round(int(counted[2]) / int(counted[1]), 1) == 0.2  # the count says what is not one's own
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    evals = {r["step"]: r for r in rows if r["split"] == "eval"}
    first_train = next(r["loss"] for r in rows if r["split"] == "train")
    assert first_train > 9.5  # a fresh head over 30,522 tokens starts near ln(30522) = 10.3
    assert evals[0]["mlm_loss"] > 9.5 and "general_mlm_loss" in evals[0]  # what the start model brings
    assert evals[3]["mlm_loss"] < min(first_train, evals[0]["mlm_loss"]) - 1.0
    assert evals[6]["mlm_loss"] < evals[3]["mlm_loss"] - 0.1
    assert "general_mlm_loss" in metrics and metrics["general_mlm_loss"] < first_train
    # the checkpoint is a complete MiniLM-vocabulary BertForMaskedLM, no tokenizer was trained
    final = os.path.join(out, "checkpoint-6")
    assert json.load(open(os.path.join(final, "config.json")))["architectures"] == ["BertForMaskedLM"]
    assert open(os.path.join(final, "vocab.txt")).read() == open(os.path.join(minilm_dir, "vocab.txt")).read()
    assert not os.path.exists(os.path.join(out, "tokenizer"))
    adapted, original = read_state_dict(final), read_state_dict(minilm_dir)
    assert torch.equal(adapted["bert.pooler.dense.weight"], original["pooler.dense.weight"])  # carried
    query = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(adapted["bert." + query], original[query])  # the encoder did adapt


def test_the_general_corpus_is_tokenized_with_the_runs_progress_bar(monkeypatch, tmp_path):
    """walk O #2: GCIDE took 45 s with no bar while the run's own shards had one."""
    seen = {}

    def shards(corpus, tokenizer, directory, **kwargs):
        seen.update(kwargs)
        return list(range(10))

    monkeypatch.setattr(continued, "shard_documents", shards)
    data = SimpleNamespace(general_corpus="wordnet", general_fraction=0.25, mode="file", general_max_documents=0,
                           eval_fraction=0.2)
    ctx = SimpleNamespace(is_main=True, barrier=lambda: None)
    continued.open_general(data, 0, None, str(tmp_path), ctx, progress=True)
    assert seen["progress"] is True


def test_a_recipe_for_another_family_is_refused_naming_the_recipe_to_continue_with(minilm_dir):
    """walk O #9: pretrain-tiny.toml (the modern encoder) with model.init = a BERT checkpoint said
    "remove model.model_type" (not removable from the command line), then, with --set
    model.model_type=bert, "replace: 'global_attn_every_n_layers' is not a BertConfig field"."""
    tiny = os.path.join(ROOT, "configs", "pretrain-tiny.toml")
    for extra, named in (([], "model.model_type = 'modernbert', "), (["model.model_type=bert"], "")):
        with pytest.raises(ConfigError) as refused:
            load_config(tiny, [f"model.init={minilm_dir}", *extra])
        said = str(refused.value)
        assert said.startswith(f"the recipe is for another model than model.init's (it sets {named}"
                               "model.global_attn_every_n_layers, model.local_attention): ")
        assert f"{minilm_dir} holds a 'bert' model (BERT family)" in said
        assert "continue it with configs/tapt-mini.toml" in said and "replace:" not in said
    with pytest.raises(ConfigError, match=r"^model.local_attention does not fit model.init: .* drop it from --set"):
        parse_config({"model": {"init": minilm_dir}}, ["model.local_attention=8"])
    assert load_config(os.path.join(ROOT, "configs", "tapt-mini.toml"), [f"model.init={minilm_dir}"]).model["init"]


def _tiny_modern_checkpoint(directory, with_head: bool) -> str:
    """A saved modern encoder (2 layers, hidden 32): the MLM model, or its encoder only."""
    from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM

    config = ModernBertConfig(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                              num_attention_heads=2, pad_token_id=0, cls_token_id=2, sep_token_id=3,
                              bos_token_id=2, eos_token_id=3)
    torch.manual_seed(0)
    model = ModernBertForMaskedLM(config)
    (model if with_head else model.model).save_pretrained(str(directory))
    return str(directory)


def test_init_continues_the_modern_encoder_with_its_head_or_a_new_one(tmp_path):
    full = _tiny_modern_checkpoint(tmp_path / "mlm", with_head=True)
    model = build_model(parse_config({"model": {"init": full, "model_type": "modernbert"}}), 120, 0)
    saved = read_state_dict(full)
    assert type(model).__name__ == "ModernBertForMaskedLM"
    for key, value in model.state_dict().items():  # encoder and head both from the checkpoint
        assert torch.equal(value, saved[key]), key
    assert model.init_info["new_head_weights"] == [] and model.init_info["unused_weights"] == []

    encoder_only = _tiny_modern_checkpoint(tmp_path / "encoder", with_head=False)
    model = build_model(parse_config({"model": {"init": encoder_only}}), 120, 0)
    assert sorted(model.init_info["new_head_weights"]) == ["decoder.bias", "head.dense.weight", "head.norm.weight"]
    assert torch.equal(model.head.dense.weight, torch.eye(32))  # head_init = "identity"
    assert torch.equal(model.model.embeddings.tok_embeddings.weight,
                       read_state_dict(encoder_only)["embeddings.tok_embeddings.weight"])

    frozen = build_model(parse_config({"model": {"init": encoder_only, "freeze_encoder": True}}), 120, 0)
    trainable = {n for n, p in frozen.named_parameters() if p.requires_grad}
    assert trainable == {"head.dense.weight", "head.norm.weight", "decoder.bias"}
    with pytest.raises(ConfigError, match="holds a 'modernbert' model"):
        build_model(parse_config({"model": {"init": full, "model_type": "bert"}}), 120, 0)


def test_the_bbc_corpus_script_says_a_misspelt_topic_in_one_line(tmp_path, capsys):
    """It printed a traceback ending in the ConfigError."""
    from bertkit.recipes.continued import main

    with pytest.raises(SystemExit) as stop:
        main(["bbc-corpus", "--topics", "business", "sport", "--out", str(tmp_path / "x.jsonl")])
    assert stop.value.code == 2
    assert "error: unknown BBC topic 'sport'; use some of business, entertainment, politics, sports, tech" in \
        capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()
