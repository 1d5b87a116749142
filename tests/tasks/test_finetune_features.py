"""Fine-tuning features without training: QA windows and answer positions, word alignment,
padding, label maps and class weights, best-model keeping. Real data, MiniLM's tokenizer."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError, DataError
from bertkit.models.heads import BertForTokenClassification
from bertkit.tasks.alignment import IGNORE_INDEX
from bertkit.recipes.finetune import BestKeeper, WeightedLoss, balanced_weights, build_recipe, prepare_labels
from bertkit.tasks import Collator, eval_order, get_task, subsample
from bertkit.tasks.builtin import _contiguous_split
from bertkit.tasks.qa import encode_qa
from bertkit.tasks.sequence import class_ids, encode_texts
from bertkit.tasks.tagging import encode_words
from bertkit.tasks.formats import QAExample, TextExample, TokenExample
from bertkit.tasks.realdata import wordnet_qa
from bertkit.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return Tokenizer.from_pretrained(minilm_dir)


def test_qa_positions_point_at_the_answer_in_every_window(tokenizer):
    examples = wordnet_qa(limit=60, seed=3)
    # a short window forces several overlapping windows per context
    features = encode_qa(tokenizer, examples, max_length=48, doc_stride=12, with_positions=True)
    assert len(features) > len(examples)
    found = set()
    for f in features:
        example = examples[f["example_index"]]
        start, end = int(f["start_positions"]), int(f["end_positions"])
        answer = example.answers[0]
        a0, a1 = answer["answer_start"], answer["answer_start"] + len(answer["text"])
        ctx_tokens = np.flatnonzero(f["context_mask"])
        window = (f["offsets"][ctx_tokens[0], 0], f["offsets"][ctx_tokens[-1], 1])
        if window[0] <= a0 and a1 <= window[1]:
            assert 0 < start <= end
            assert f["context_mask"][start] and f["context_mask"][end]
            # the token span covers exactly the answer's characters
            assert example.context[f["offsets"][start, 0]:f["offsets"][end, 1]] == answer["text"]
            found.add(f["example_index"])
        else:
            assert (start, end) == (0, 0)
        assert not f["context_mask"][0]  # [CLS] is never part of the context
    # An answer fits some window whenever it is no longer than the overlap of two windows.
    for index in set(range(len(examples))) - found:
        assert len(tokenizer.encode(examples[index].answers[0]["text"], add_special_tokens=False)) > 12
    assert len(found) >= 0.8 * len(examples)


def test_qa_impossible_questions_point_at_cls(tokenizer):
    example = QAExample("q", "What is the definition of zorb?", "cat: a small feline. dog: a canine.", [], True)
    (feature,) = encode_qa(tokenizer, [example], 64, 16, with_positions=True)
    assert (int(feature["start_positions"]), int(feature["end_positions"])) == (0, 0)


def test_qa_stride_must_fit_the_window(tokenizer):
    with pytest.raises(ConfigError, match="doc_stride"):
        encode_qa(tokenizer, wordnet_qa(limit=2), 64, 40)


def test_words_keep_their_own_boundaries_and_first_subword_labels(tokenizer):
    example = TokenExample(["The", "U.S.", "embassy", "reopened"], ["O", "B-LOC", "O", "O"])
    label2id = {"O": 0, "B-LOC": 1, "I-LOC": 2}
    (f,) = encode_words(tokenizer, [example], 32, label2id)
    tokens = tokenizer.convert_ids_to_tokens(f["input_ids"].tolist())
    # "U.S." is four word pieces but one word
    pieces = [t for t, w in zip(tokens, f["word_ids"]) if w == 1]
    assert "".join(pieces).replace("##", "") == "u.s."
    assert f["word_ids"][0] == -1 and f["word_ids"][-1] == -1
    first = int(np.flatnonzero(f["word_ids"] == 1)[0])
    assert f["labels"][first] == 1
    assert (f["labels"][f["word_ids"] == 1][1:] == IGNORE_INDEX).all()
    (g,) = encode_words(tokenizer, [example], 32, label2id, label_all_subwords=True)
    assert (g["labels"][g["word_ids"] == 1][1:] == 2).all()  # continuation pieces become I-LOC


def test_a_text_of_exactly_max_length_tokens_is_not_counted_as_cut(tokenizer, recwarn):
    text = TextExample("a short one")
    length = len(tokenizer([text.text])["input_ids"][0])
    (feature,) = encode_texts(tokenizer, [text], length)  # it fits: nothing was cut
    assert len(feature["input_ids"]) == length and not [w for w in recwarn if "were cut" in str(w.message)]
    (pair,) = encode_texts(tokenizer, [TextExample("word " * 20, "another " * 20)], 16)  # a pair still cut to 16
    assert len(pair["input_ids"]) == len(pair["token_type_ids"]) == 16
    assert any(str(w.message).startswith("data: 1 of 1 texts were cut to data.max_length=16") for w in recwarn)


def test_many_cut_texts_get_a_way_forward_in_the_warning(tokenizer):
    long, short = TextExample("word " * 40), TextExample("a short one")
    with pytest.warns(UserWarning) as caught:
        encode_texts(tokenizer, [long, short], 16)  # half the texts cut: say what to do
    (message,) = [str(w.message) for w in caught]
    assert message.startswith("data: 1 of 2 texts were cut to data.max_length=16 tokens; if their ends matter")
    assert "data.long_text to head_tail or chunks" in message
    with pytest.warns(UserWarning) as caught:
        encode_texts(tokenizer, [long] + [short] * 19, 16)  # one in twenty: the count alone
    assert [str(w.message) for w in caught] == ["data: 1 of 20 texts were cut to data.max_length=16 tokens"]


def test_pairs_get_segment_ids_and_empty_texts_are_refused(tokenizer):
    examples = [TextExample("a cat sat", "on the mat", "x"), TextExample("dogs bark", "loudly", "y")]
    features = encode_texts(tokenizer, examples, 32, class_ids, {"x": 0, "y": 1})
    assert all(f["token_type_ids"].max() == 1 for f in features)
    with pytest.raises(DataError, match="example 2 has an empty text"):
        encode_texts(tokenizer, [TextExample("fine", label="x"), TextExample("  ", label="x")], 32)
    with pytest.raises(DataError, match="example 2 has no second text"):
        encode_texts(tokenizer, [examples[0], TextExample("alone", None, "x")], 32)


def test_collator_pads_dynamically_and_masks_token_labels():
    features = [
        {"input_ids": np.array([2, 5, 3]), "token_type_ids": np.zeros(3, int), "word_ids": np.array([-1, 0, -1]),
         "labels": np.array([-100, 1, -100])},
        {"input_ids": np.array([2, 5, 6, 7, 3]), "token_type_ids": np.zeros(5, int),
         "word_ids": np.array([-1, 0, 1, 2, -1]), "labels": np.array([-100, 0, 1, 0, -100])},
    ]
    batch = Collator(pad_token_id=0)(features)
    assert batch["input_ids"].shape == (2, 5)  # the longest row, not a fixed max_length
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch["labels"][0].tolist() == [-100, 1, -100, -100, -100]
    assert "word_ids" not in batch
    order = list(eval_order(features * 3, batch_size=4))
    assert sorted(np.concatenate(order).tolist()) == list(range(6))
    assert len(features[order[0][0] % 2]["input_ids"]) == 5  # longest first


def test_subsample_is_seeded_and_keeps_order():
    items = list(range(100))
    a, b = subsample(items, 10, seed=1), subsample(items, 10, seed=1)
    assert a == b == sorted(a) and len(set(a)) == 10
    assert subsample(items, 0, seed=1) == items


def test_unseen_dev_labels_are_listed():
    train = [TextExample("a", label="sport"), TextExample("b", label="tech")]
    dev = [TextExample("c", label="sport"), TextExample("d", label="weather")]
    with pytest.raises(DataError, match="'weather'"):
        prepare_labels(get_task("classification"), "train.csv", train, dev)
    tags = [TokenExample(["x", "z"], ["B-PER", "O"])]
    with pytest.raises(DataError, match="'B-ORG'"):
        prepare_labels(get_task("token-classification"), "t.conll", tags, [TokenExample(["y"], ["B-ORG"])])


def test_recipe_rejects_unknown_keys_with_a_suggestion():
    with pytest.raises(ConfigError, match="did you mean train.epochs"):
        build_recipe({"train": {"epoch": 3}})
    recipe = build_recipe({"train": {"epochs": 2, "llrd": 0.8}, "data": {"max_length": 96}})
    assert recipe.options.epochs == 2 and recipe.train.llrd == 0.8 and recipe.data.max_length == 96
    assert recipe.train.lr == 5e-5 and not recipe.explicit_max_steps


def test_contiguous_split_keeps_groups_together():
    items = [(g, i) for g in range(20) for i in range(3)]
    splits = _contiguous_split(items, key=lambda x: x[0])
    groups = [{g for g, _ in splits[name]} for name in ("train", "dev", "test")]
    assert not (groups[0] & groups[1] or groups[0] & groups[2] or groups[1] & groups[2])
    assert sum(len(v) for v in splits.values()) == len(items)


def test_balanced_weights_and_weighted_loss():
    features = [{"labels": np.int64(0)}] * 6 + [{"labels": np.int64(1)}] * 2
    weights = balanced_weights(features, 3)
    assert torch.allclose(weights, torch.tensor([8 / (3 * 6), 8 / (3 * 2), 8 / 3]))
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, num_labels=3, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertForTokenClassification(config)
    ids = torch.randint(5, 50, (2, 6))
    labels = torch.tensor([[-100, 0, 1, 2, 0, -100], [-100, 1, 1, 0, 2, -100]])
    plain = model(ids, labels=labels).loss
    same = WeightedLoss(model, torch.ones(3))(input_ids=ids, labels=labels).loss
    assert torch.allclose(plain, same)
    weighted = WeightedLoss(model, torch.tensor([1.0, 0.0, 0.0]))(input_ids=ids, labels=labels).loss
    logits = model(ids).logits
    only0 = torch.nn.functional.cross_entropy(logits[labels == 0], labels[labels == 0])
    assert torch.allclose(weighted, only0)


def test_best_keeper_saves_improvements_and_stops_after_patience(tmp_path):
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, num_labels=2)
    model = BertForTokenClassification(config)
    keeper = BestKeeper(str(tmp_path), "f1", patience=2, tokenizer=None)
    decisions = []
    for step, f1 in enumerate([0.5, 0.6, float("nan"), 0.55, 0.7], start=1):
        with torch.no_grad():
            model.classifier.bias.fill_(step)  # marks which step's weights were saved
        decisions.append(keeper.update(model, step, {"f1": f1}))
        if decisions[-1]:
            break
    assert decisions == [False, False, False, True]  # nan and 0.55 are two evals without gain
    assert keeper.best_step == 2 and keeper.best_metrics == {"f1": 0.6}
    saved = BertForTokenClassification.from_pretrained(keeper.best_dir)
    assert saved.classifier.bias.tolist() == [2.0, 2.0]
    assert [n for n in os.listdir(tmp_path) if n.startswith(".tmp")] == []
    with pytest.raises(ConfigError, match="select_metric"):
        keeper.update(model, 9, {"accuracy": 1.0})


def test_lower_is_better_for_mse_and_unknown_metrics_fail_before_training(tmp_path):
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, num_labels=2)
    model = BertForTokenClassification(config)
    keeper = BestKeeper(str(tmp_path), "mse", patience=1, tokenizer=None, lower_is_better=True)
    assert not keeper.update(model, 1, {"mse": 2.0})
    assert not keeper.update(model, 2, {"mse": 1.0})  # lower mse is better
    assert keeper.update(model, 3, {"mse": 1.5})
    assert keeper.best_step == 2

    from bertkit.recipes.finetune import finetune

    train = tmp_path / "t.csv"
    train.write_text("text,label\na,x\nb,y\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="select_metric='f1' is not a dev metric of classification"):
        (tmp_path / "model").mkdir()  # there (a missing model is refused first), though refused before it loads
        finetune("classification", str(tmp_path / "model"), str(train), str(train), str(tmp_path / "o"),
                 {"train": {"select_metric": "f1"}}, progress=False)


def test_head_lr_and_frozen_encoder():
    from bertkit.models.heads import BertForSequenceClassification
    from bertkit.train.optim import param_groups

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, num_labels=3)
    model = BertForSequenceClassification(config)
    groups = param_groups(model, lr=1e-4, head_lr=1e-2, llrd=0.5)
    for group in groups:
        in_head = all(not n.startswith("bert.") for n in group["names"])
        assert in_head or all(n.startswith("bert.") for n in group["names"])  # no group mixes them
        assert group["lr"] == (1e-2 if in_head else 1e-4 * 0.5 ** (2 - group["layer"]))
    assert {n for g in groups if g["lr"] == 1e-2 for n in g["names"]} == {"classifier.weight", "classifier.bias"}
    with pytest.raises(ConfigError, match="head_lr"):
        param_groups(torch.nn.Linear(2, 2), lr=1e-4, head_lr=1e-2)
    recipe = build_recipe({"model": {"freeze_encoder": True}, "train": {"head_lr": 1e-3}})
    assert recipe.freeze_encoder and recipe.model == {} and recipe.train.head_lr == 1e-3
    with pytest.raises(ConfigError, match="freeze_encoder"):
        build_recipe({"model": {"freeze_encoder": "yes"}})


def test_head_lr_on_an_encoder_decoder_trains_what_the_warm_start_adds():
    from bertkit.models.encoder_decoder import EncoderDecoderConfig, EncoderDecoderModel
    from bertkit.train.optim import param_groups

    bert = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    model = EncoderDecoderModel(EncoderDecoderConfig(bert, bert.replace(is_decoder=True, add_cross_attention=True),
                                                     decoder_start_token_id=1, pad_token_id=0, eos_token_id=2))
    groups = param_groups(model, lr=1e-4, head_lr=1e-2)
    fast = {n for g in groups if g["lr"] == 1e-2 for n in g["names"]}
    slow = {n for g in groups if g["lr"] == 1e-4 for n in g["names"]}
    assert fast | slow == {n for n, _ in model.named_parameters()} and not fast & slow
    # every cross-attention weight, the LM transform and bias; not the decoder's tied word embeddings
    assert fast == {n for n, _ in model.named_parameters() if ".crossattention." in n or n.startswith("decoder.cls.")}
    assert len([n for n in fast if ".crossattention." in n]) == 2 * 10  # q, k, v, output: weight, bias; LayerNorm
    assert {"decoder.cls.predictions.transform.dense.weight", "decoder.cls.predictions.bias"} <= fast
    assert "decoder.bert.embeddings.word_embeddings.weight" in slow
    assert "decoder.bert.encoder.layer.0.attention.self.query.weight" in slow


def test_a_question_leaving_no_more_context_than_the_overlap_is_said_in_the_data_settings(tokenizer):
    """walk U: a 101-token question at data.max_length=128 and data.doc_stride=32 made the tokenizer
    panic; its refusal named a pair and a stride, the QA user's settings are data.max_length and data.doc_stride."""
    examples = wordnet_qa(limit=3, seed=3)
    long_question = QAExample("q-long", " ".join(["which"] * 101), examples[0].context * 6, examples[0].answers)
    with pytest.raises(DataError, match=r"train: .*stride=32.*question N, max_length is data.max_length=128 and "
                                        r"the stride data.doc_stride=32"):
        encode_qa(tokenizer, [*examples, long_question], max_length=128, doc_stride=32, name="train")
