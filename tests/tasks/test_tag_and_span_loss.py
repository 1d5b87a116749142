"""The dev loss of token classification (bertkit/tasks/tagging.py `word_loss`, alignment.py
`word_logits`: the mean cross-entropy of each word's gold tag at its first sub-word) and of QA (qa.py
`window_loss`: the mean over windows of the start and end cross-entropies). Each is the model's own
training loss on the same dev examples (checked against torch), it breaks the F1 ties of a small dev
set (`finetune.tie_metric`), and the word-lookup tagging baseline gets one from its counts. Multiple
choice's is the cross-entropy of the right choice."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertkit.models.config import BertConfig
from bertkit.models.heads import BertForQuestionAnswering, BertForTokenClassification, span_loss
from bertkit.recipes.finetune import tie_metric
from bertkit.tasks import get_task
from bertkit.tasks.alignment import IGNORE_INDEX, word_classes, word_logits
from bertkit.tasks.common import DataConfig, TaskSpec
from bertkit.tasks import multiple_choice
from bertkit.tasks.formats import ChoiceExample, QAExample, TokenExample
from bertkit.tasks.qa import encode_qa
from bertkit.tasks.baseline import trivial_scores
from bertkit.tasks.inference import baseline_metrics
from bertkit.tasks.tagging import TagPrediction, baseline, encode_words, metrics, word_loss, words_read
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model, train_tokenizer, word_salad

TAGS = ["O", "B-X", "I-X"]
WORDS = "the striker scored a late goal and the bank cut its rates again".split()


def test_word_loss_is_the_mean_gold_cross_entropy_over_the_words_read():
    probs = np.array([[0.5, 0.25, 0.25], [np.nan] * 3, [0.1, 0.8, 0.1]])  # the second word was cut off
    examples = [TokenExample(["a", "b", "c"], ["O", "O", "B-X"])]
    assert word_loss(examples, [TagPrediction(["O", "O", "B-X"], probs, TAGS)]) == pytest.approx(
        -(math.log(0.5) + math.log(0.8)) / 2)
    unknown = [TokenExample(["a"], ["B-Y"])]  # a tag the model has no column for: p = 0
    assert word_loss(unknown, [TagPrediction(["O"], probs[:1], TAGS)]) == math.inf
    assert math.isnan(word_loss([], []))


def test_metrics_carry_a_loss_only_when_every_prediction_has_probabilities():
    example = TokenExample(["a"], ["O"])
    assert "loss" not in metrics([example], [TagPrediction(["O"])])
    assert metrics([example], [TagPrediction(["O"], np.array([[0.9, 0.05, 0.05]]), TAGS)])["loss"] == pytest.approx(
        -math.log(0.9))


def test_word_logits_take_the_first_subword_and_leave_unread_words_nan():
    logits = np.arange(12, dtype=np.float64).reshape(4, 3)  # 4 tokens: [CLS] w0 w0-piece [SEP]
    chosen = word_logits([2], [{"word_ids": [None, 0, 0, None]}], [logits])[0]
    np.testing.assert_array_equal(chosen[0], logits[1])
    assert np.isnan(chosen[1]).all()  # word 1 is in no feature
    assert word_classes(chosen).tolist() == [2, IGNORE_INDEX]


def test_the_lookup_baseline_reads_its_counts_as_smoothed_probabilities():
    train = [TokenExample(["Paris", "is"], ["B-X", "O"]), TokenExample(["Paris", "was"], ["O", "O"])]
    # training tag frequencies add-one smoothed over the tags of training and test (B-Y: test only)
    prior = {"B-X": (1 + 1) / (4 + 3), "B-Y": (0 + 1) / (4 + 3), "O": (3 + 1) / (4 + 3)}
    p_paris_bx = (1 + prior["B-X"]) / (2 + 1)  # (n(word, tag) + prior(tag)) / (n(word) + 1)
    p_rome_o = prior["O"]  # a word never seen: the prior
    p_is_by = (0 + prior["B-Y"]) / (1 + 1)  # a tag training never showed: unlikely, not impossible
    scores = baseline(train, [TokenExample(["Paris", "Rome", "is"], ["B-X", "O", "B-Y"])])
    assert scores["loss"] == pytest.approx(-(math.log(p_paris_bx) + math.log(p_rome_o) + math.log(p_is_by)) / 3)


@pytest.mark.parametrize("name", ["token-classification", "qa"])
def test_token_classification_and_qa_break_f1_ties_by_the_dev_loss(name):
    task = get_task(name)
    assert tie_metric(task, "f1") == "loss" and "loss" in task.lower_is_better
    assert tie_metric(task, "loss") is None


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return train_tokenizer(tmp_path_factory.mktemp("corpus"), word_salad(WORDS, lines=100, per_line=10), 60)


def tiny_config(tokenizer, **head) -> BertConfig:
    torch.manual_seed(0)
    return BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=64, **head)


def test_the_tagging_dev_loss_equals_the_models_training_loss_on_the_same_sentences(tokenizer):
    model = BertForTokenClassification(tiny_config(tokenizer, id2label=dict(enumerate(TAGS)))).eval()
    rng = random.Random(1)
    examples = [TokenExample(words, [rng.choice(TAGS) for _ in words])
                for words in ([rng.choice(WORDS) for _ in range(rng.randint(1, 12))] for _ in range(20))]
    task = get_task("token-classification")
    ours = task.metrics(examples, task.decode(model, tokenizer, examples, TaskSpec(task, DataConfig(max_length=64))))
    features = encode_words(tokenizer, examples, 64, {t: i for i, t in enumerate(TAGS)})
    with torch.no_grad():
        logits = torch.cat([model(input_ids=torch.from_numpy(f["input_ids"])[None]).logits[0] for f in features])
    labels = torch.cat([torch.as_tensor(f["labels"]) for f in features])
    assert (labels != IGNORE_INDEX).sum() == sum(len(e.tokens) for e in examples)  # one labelled token per word
    assert ours["loss"] == pytest.approx(F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX).item(), rel=1e-5)


def test_the_qa_dev_loss_equals_the_models_training_loss_over_every_window(tokenizer):
    model = BertForQuestionAnswering(tiny_config(tokenizer, num_labels=2)).eval()
    rng = random.Random(2)
    examples = []
    for i in range(12):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 40))]
        k = rng.randrange(len(words))
        context = " ".join(words)
        start = len(" ".join(words[:k])) + (k > 0)
        examples.append(QAExample(str(i), "who scored the goal", context,
                                  [{"text": words[k], "answer_start": start}]))
    task, data = get_task("qa"), DataConfig(max_length=24, doc_stride=6)
    ours = task.metrics(examples, task.decode(model, tokenizer, examples, TaskSpec(task, data)))
    features = encode_qa(tokenizer, examples, 24, 6, with_positions=True)
    assert len(features) > len(examples)  # long contexts make several windows, most without the answer
    losses = []
    with torch.no_grad():
        for f in features:
            out = model(input_ids=torch.from_numpy(f["input_ids"])[None],
                        token_type_ids=torch.from_numpy(f["token_type_ids"])[None])
            losses.append(span_loss(out.start_logits, out.end_logits, torch.tensor([int(f["start_positions"])]),
                                    torch.tensor([int(f["end_positions"])])).item())
    assert ours["loss"] == pytest.approx(np.mean(losses), rel=1e-5)


def test_the_multiple_choice_loss_is_the_cross_entropy_of_the_right_choice():
    examples = [ChoiceExample("a", "ctx", ["x", "y", "z"], 1), ChoiceExample("b", "ctx", ["x", "y", "z"], 0)]
    scores = torch.tensor([[0.1, 2.0, -1.0], [0.3, 0.2, 0.1]])
    ours = multiple_choice.metrics(examples, [p.numpy() for p in torch.softmax(scores.double(), -1)])
    assert ours["loss"] == pytest.approx(F.cross_entropy(scores, torch.tensor([1, 0])).item(), rel=1e-6)
    # the baseline's: the training positions' frequencies, add-one smoothed over the 3 positions
    train = [ChoiceExample(str(i), "ctx", ["x", "y", "z"], label) for i, label in enumerate([1, 1, 2])]
    prior = [(0 + 1) / 6, (2 + 1) / 6, (1 + 1) / 6]
    scores = multiple_choice.baseline(train, examples)  # "x", "y", "z": no word for TF-IDF (two letters or more)
    assert scores["method"] == multiple_choice.POSITION
    assert {k: scores[k] for k in ("accuracy", "loss")} == pytest.approx(
        {"accuracy": 0.5, "loss": -(math.log(prior[1]) + math.log(prior[0])) / 2})
    assert tie_metric(get_task("multiple-choice"), "accuracy") == "loss"


def test_a_confident_mistake_gives_a_finite_tagging_loss(tokenizer):
    """A gold tag 120 logits below the chosen one has p = e^-120 (a float32 holds none below ~1e-45):
    the dev loss is the finite 120 of the model's training loss, not inf for every checkpoint alike."""
    model = BertForTokenClassification(tiny_config(tokenizer, id2label=dict(enumerate(TAGS)))).eval()
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 120.0, 0.0]))  # every word: B-X by 120
    task = get_task("token-classification")
    examples = [TokenExample(["the", "striker"], ["O", "B-X"])]
    loss = task.metrics(examples, task.decode(model, tokenizer, examples, TaskSpec(task, DataConfig(max_length=16))))
    assert loss["loss"] == pytest.approx((120 + 2 * math.exp(-120)) / 2, rel=1e-6)


def test_the_lookup_baseline_loss_leaves_out_the_words_truncation_cut_as_the_models_does(tokenizer, tmp_path):
    """A sentence longer than data.max_length: the model's dev loss leaves its cut words out (no probability
    there) while its F1 counts them (tagged O unread). The lookup baseline's loss counted them, a mean over
    other words than the model's; it is now over the words the model reads, its F1 still over every word."""
    model = BertForTokenClassification(tiny_config(tokenizer, id2label=dict(enumerate(TAGS)))).eval()
    rng = random.Random(2)
    examples = [TokenExample(words, [rng.choice(TAGS) for _ in words])
                for words in ([rng.choice(WORDS) for _ in range(n)] for n in (30, 5, 12, 40))]
    task = get_task("token-classification")
    spec = TaskSpec(task, DataConfig(max_length=16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncation warning
        model_read = [~np.isnan(p.probs).any(axis=-1) for p in task.decode(model, tokenizer, examples, spec)]
        scores = baseline_metrics(spec, examples, examples, tokenizer)
    assert [m.tolist() for m in words_read(tokenizer, examples, spec.data)["read"]] == [m.tolist() for m in model_read]
    assert not all(m.all() for m in model_read)  # truncation cut words
    cut = [TokenExample(e.tokens[:m.sum()], e.tags[:m.sum()]) for e, m in zip(examples, model_read)]  # a prefix
    every_word = baseline(examples, examples)
    assert scores["loss"] == pytest.approx(baseline(examples, cut)["loss"]) != pytest.approx(every_word["loss"])
    assert (scores["f1"], scores["tag_accuracy"]) == (every_word["f1"], every_word["tag_accuracy"])
    # evaluate's refit reads the words the evaluated model's own tokenizer keeps
    directory = make_tiny_model(tmp_path / "tiny", word_salad(WORDS, lines=100, per_line=10))
    theirs = words_read(Tokenizer.from_pretrained(directory), examples, spec.data)
    assert not all(m.all() for m in theirs["read"])
    assert trivial_scores(directory, task.name, spec.data, examples, examples)["loss"] == \
        pytest.approx(baseline(examples, examples, **theirs)["loss"])
