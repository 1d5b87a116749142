from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertkit.analysis.probing import (
    LinearProbe,
    collect_features,
    control_task_labels,
    plot_probe,
    probe_layers,
)
from bertkit.errors import ConfigError, DataError


def _separable(n=600, d=20, classes=3, seed=0, margin=1.0):
    """Labels = argmax of a random linear map, keeping only points at least `margin` from a boundary."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3 * n, d)).astype(np.float32)
    scores = X @ rng.normal(size=(d, classes))
    top2 = np.sort(scores, axis=1)[:, -2:]
    keep = (top2[:, 1] - top2[:, 0]) > margin
    return X[keep][:n], scores[keep][:n].argmax(1)


def test_probe_learns_a_linearly_separable_task():
    X, y = _separable()
    probe = LinearProbe(weight_decay=1e-4).fit(X[:400], y[:400])
    assert probe.score(X[400:], y[400:]) > 0.95


def test_probe_on_random_labels_stays_near_chance():
    X, _ = _separable(seed=1)
    y = np.random.default_rng(2).integers(0, 3, size=len(X))
    probe = LinearProbe().fit(X[:300], y[:300])
    # 300 test items: chance is 1/3 with a standard deviation of 0.027
    assert abs(probe.score(X[300:], y[300:]) - 1 / 3) < 0.1


def test_probe_keeps_label_values_and_is_deterministic():
    X, y = _separable(n=200)
    names = np.array(["noun", "verb", "adj"])[y]
    a = LinearProbe().fit(X, names)
    b = LinearProbe().fit(X, names)
    assert set(a.predict(X)) <= {"noun", "verb", "adj"}
    np.testing.assert_array_equal(a.predict(X), b.predict(X))  # convex + zero init
    with pytest.raises(ConfigError, match="fit"):
        LinearProbe().predict(X)


def test_control_labels_are_per_type_and_keep_the_distribution():
    rng = np.random.default_rng(3)
    n_types = 3000
    types = rng.integers(0, n_types, size=20000)
    true_of_type = rng.choice(3, size=n_types, p=[0.6, 0.3, 0.1])
    labels = true_of_type[types]
    control = control_task_labels(types, labels, seed=0)
    # every occurrence of a type carries the same control label
    first = {}
    for t, c in zip(types, control):
        assert first.setdefault(t, c) == c
    p_task = np.bincount(labels, minlength=3) / len(labels)
    p_ctrl = np.bincount(control, minlength=3) / len(control)
    assert 0.5 * np.abs(p_task - p_ctrl).sum() < 0.03  # total variation distance
    # independent of the true label: agreement is what chance predicts, sum_c p_c^2
    assert abs(np.mean(control == labels) - (p_task**2).sum()) < 0.03
    np.testing.assert_array_equal(control, control_task_labels(types, labels, seed=0))
    assert not np.array_equal(control, control_task_labels(types, labels, seed=1))
    words = np.array(["cat", "dog", "cat"])
    assert control_task_labels(words, ["N", "N", "N"], seed=5).tolist() == ["N", "N", "N"]
    with pytest.raises(DataError, match="one type per item"):
        control_task_labels(words, ["N"])


def test_selectivity_separates_encoding_from_memorisation():
    """Two "layers": one only identifies the word type (one-hot), one encodes the label only.

    Both solve the task, but only the one-hot layer lets a probe memorise random per-type
    control labels, so its selectivity must be far lower.
    """
    rng = np.random.default_rng(4)
    n_types, n = 40, 1200
    types = rng.integers(0, n_types, size=n)
    label_of_type = rng.integers(0, 4, size=n_types)
    labels = label_of_type[types]
    lexical = np.eye(n_types, dtype=np.float32)[types] + 0.05 * rng.normal(size=(n, n_types))
    linguistic = np.eye(4, dtype=np.float32)[labels] + 0.05 * rng.normal(size=(n, 4))
    noise = rng.normal(size=(n, 8)).astype(np.float32)
    control = control_task_labels(types, labels, seed=0)
    perm = rng.permutation(n)
    res = probe_layers([noise, lexical, linguistic], labels, perm[:800], perm[800:], control_labels=control)
    assert [r["layer"] for r in res] == [0, 1, 2]
    assert res[0]["accuracy"] < 0.5 and res[1]["accuracy"] > 0.95 and res[2]["accuracy"] > 0.95
    assert res[1]["control_accuracy"] > 0.9  # memorised
    assert res[2]["selectivity"] > 0.3 and res[1]["selectivity"] < 0.1
    assert res[2]["selectivity"] > res[1]["selectivity"]
    assert 0.2 < res[0]["majority"] < 0.5


def test_probe_layers_checks_its_inputs(tmp_path):
    X, y = _separable(n=50)
    with pytest.raises(ConfigError, match="overlap"):
        probe_layers([X], y, np.arange(30), np.arange(25, 50))
    with pytest.raises(DataError, match="layer 1"):
        probe_layers([X, X[:10]], y, np.arange(30), np.arange(30, 50))
    with pytest.raises(ConfigError, match="outside"):
        probe_layers([X], y, np.arange(30), [49, 50])
    res = probe_layers([X, X * 2], y, np.arange(30), np.arange(30, 50), control_labels=y[::-1])
    plot_probe(res, tmp_path / "probe.png")
    assert (tmp_path / "probe.png").read_bytes()[:4] == b"\x89PNG"


class FakeEncoder(torch.nn.Module):
    """Stands in for the model: hidden state l of token t is (l + 1) * embedding(input_id)."""

    def __init__(self, layers=2, hidden=4):
        super().__init__()
        self.emb = torch.nn.Embedding(50, hidden)
        self.layers = layers
        self.calls = []

    def forward(self, input_ids, attention_mask, token_type_ids=None, output_hidden_states=False):
        self.calls.append((self.training, output_hidden_states))
        e = self.emb(input_ids)
        return SimpleNamespace(hidden_states=tuple((l + 1) * e for l in range(self.layers + 1)))


def test_collect_sentence_features_use_real_tokens_only():
    model = FakeEncoder().train()
    ids = torch.tensor([[1, 5, 6, 2, 0, 0], [1, 7, 2, 0, 0, 0]])
    mask = (ids != 0).long()
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    feats = collect_features(model, [batch, batch])
    assert len(feats) == 3 and feats[0].shape == (4, 4) and feats[0].dtype == np.float32
    E = model.emb.weight.detach().numpy()
    np.testing.assert_allclose(feats[0][0], E[[1, 5, 6, 2]].mean(0), rtol=1e-5)
    np.testing.assert_allclose(feats[2][1], 3 * E[[1, 7, 2]].mean(0), rtol=1e-5)
    assert model.training and model.calls == [(False, True), (False, True)]  # eval inside, restored
    cls = collect_features(model, [batch], pooling="cls")
    np.testing.assert_allclose(cls[1], 2 * E[[1, 1]], rtol=1e-5)


def test_collect_token_features_take_the_first_subword():
    model = FakeEncoder()
    # [CLS] play ##ing well [SEP] [PAD]   |   [CLS] go [SEP] [PAD] [PAD] [PAD]
    ids = torch.tensor([[1, 10, 11, 12, 2, 0], [1, 13, 2, 0, 0, 0]])
    batch = {"input_ids": ids, "attention_mask": (ids != 0).long(),
             "word_ids": [[None, 0, 0, 1, None, None], torch.tensor([-1, 0, -1, -1, -1, -1])]}
    first = collect_features(model, [batch], level="token")
    E = model.emb.weight.detach().numpy()
    np.testing.assert_allclose(first[0], E[[10, 12, 13]], rtol=1e-6)
    mean = collect_features(model, [batch], level="token", pooling="mean")
    np.testing.assert_allclose(mean[1][0], 2 * E[[10, 11]].mean(0), rtol=1e-5)
    with pytest.raises(DataError, match="word_ids"):
        collect_features(model, [{k: v for k, v in batch.items() if k != "word_ids"}], level="token")
    with pytest.raises(ConfigError, match="pooling"):
        collect_features(model, [batch], level="token", pooling="cls")


def test_collect_features_needs_hidden_states():
    class NoHidden(torch.nn.Module):
        def forward(self, **kwargs):
            return SimpleNamespace(hidden_states=None)

    ids = torch.ones(1, 3, dtype=torch.long)
    with pytest.raises(ConfigError, match="hidden_states"):
        collect_features(NoHidden(), [{"input_ids": ids, "attention_mask": ids}])


def test_contract_with_the_real_model():
    """Sentence features of a padded batch equal those of each sentence run alone."""
    from bertkit.models.config import BertConfig
    from bertkit.models.encoder import BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig.preset("tiny", vocab_size=50))
    ids = torch.tensor([[1, 5, 6, 7, 2], [1, 8, 2, 0, 0]])
    mask = (ids != 0).long()
    feats = collect_features(model, [{"input_ids": ids, "attention_mask": mask}])
    alone = collect_features(model, [{"input_ids": ids[1:, :3], "attention_mask": mask[1:, :3]}])
    assert len(feats) == model.config.num_hidden_layers + 1
    for layer in range(len(feats)):
        np.testing.assert_allclose(feats[layer][1], alone[layer][0], atol=1e-5)
