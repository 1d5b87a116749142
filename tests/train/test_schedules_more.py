"""Noam (inverse square root) and polynomial-decay schedules: their formulas and transformers'."""

import pytest
import torch
from helpers import tiny_config

from bertkit.errors import ConfigError
from bertkit.models.heads import BertForSequenceClassification
from bertkit.train.schedule import WarmupDecay, build_scheduler
from bertkit.train.config import TrainConfig
from bertkit.train.trainer import Trainer


def sgd(lr=1.0):
    return torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)


def test_noam_is_vaswani_normalised_to_peak_at_lr():
    for warmup in (1, 4, 400):
        f = WarmupDecay(warmup, 10_000, "noam")
        assert f(0) == 0.0
        for s in (1, 2, max(1, warmup - 1), warmup, warmup + 1, 3 * warmup, 9_999, 20_000):
            vaswani = min(s ** -0.5, s * warmup ** -1.5) * warmup ** 0.5
            assert f(s) == pytest.approx(vaswani, rel=1e-12), (warmup, s)
        assert f(warmup) == pytest.approx(1.0)  # the peak is the configured lr
        assert max(f(s) for s in range(1, 3 * warmup + 2)) == pytest.approx(1.0)
    assert WarmupDecay(100, 1000, "noam")(400) == pytest.approx(0.5)  # 4x the warmup: half the lr


def test_noam_matches_transformers_inverse_sqrt():
    from transformers import get_inverse_sqrt_schedule

    ours = build_scheduler(sgd(3e-4), 50, 1000, "noam")
    theirs = get_inverse_sqrt_schedule(sgd(3e-4), num_warmup_steps=50, timescale=50)
    for _ in range(400):
        assert ours.get_last_lr()[0] == pytest.approx(theirs.get_last_lr()[0], rel=1e-12, abs=1e-18)
        ours.optimizer.step(), theirs.optimizer.step()
        ours.step(), theirs.step()


def test_polynomial_follows_its_formula():
    warmup, total, power, end = 10, 110, 2.0, 0.1
    f = WarmupDecay(warmup, total, "polynomial", power, end)
    assert f(5) == 0.5 and f(10) == 1.0
    for s in (10, 35, 60, 109, 110):
        assert f(s) == pytest.approx((1 - end) * ((total - s) / (total - warmup)) ** power + end)
    assert f(60) == pytest.approx(0.9 * 0.25 + 0.1)
    assert f(110) == pytest.approx(end) and f(500) == pytest.approx(end)  # stays at lr_end
    linear = WarmupDecay(10, 110, "linear")
    plain = WarmupDecay(10, 110, "polynomial", 1.0, 0.0)
    assert all(plain(s) == pytest.approx(linear(s)) for s in range(0, 130))  # p=1, e=0: linear


@pytest.mark.parametrize("power,lr_end,warmup", [(1.0, 1e-7, 10), (2.0, 1e-5, 0), (0.5, 0.0, 7)])
def test_polynomial_matches_transformers_step_by_step(power, lr_end, warmup):
    from transformers import get_polynomial_decay_schedule_with_warmup

    lr, total = 1e-3, 60

    def optimizer():  # two groups with their own lrs, as under LLRD
        a, b = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
        return torch.optim.AdamW([{"params": [a]}, {"params": [b], "lr": lr * 0.3}], lr=lr)

    ours = build_scheduler(optimizer(), warmup, total, "polynomial", power, lr_end / lr)
    theirs = get_polynomial_decay_schedule_with_warmup(optimizer(), warmup, total, lr_end=lr_end, power=power)
    for _ in range(total + 15):  # past the end too
        for x, y in zip(ours.get_last_lr(), theirs.get_last_lr(), strict=True):
            assert x == pytest.approx(y, rel=1e-9, abs=1e-15)
        ours.optimizer.step(), theirs.optimizer.step()
        ours.step(), theirs.step()
    assert theirs.get_last_lr()[0] == pytest.approx(lr_end)


def test_bad_schedule_settings_are_refused():
    with pytest.raises(ConfigError, match="warmup"):
        WarmupDecay(0, 100, "noam")
    with pytest.raises(ConfigError, match="lr_end"):
        TrainConfig(schedule="polynomial", lr=1e-4, lr_end=1e-3)
    with pytest.raises(ConfigError, match="schedule_power"):
        TrainConfig(schedule="polynomial", schedule_power=0)
    with pytest.raises(ConfigError, match="noam"):
        TrainConfig(schedule="nome")  # the message lists the valid names


@pytest.mark.parametrize("schedule", ["noam", "polynomial"])
def test_trainer_uses_the_schedule_from_its_config(schedule, tmp_path):
    # The `train.schedule` key selects them like linear/cosine: the logged lr of each update is
    # base * multiplier(step - 1).
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_config(50, dropout=0.0).replace(num_labels=2))
    batch = {"input_ids": torch.randint(5, 50, (4, 8)), "labels": torch.tensor([0, 1, 0, 1])}
    config = TrainConfig.from_dict({"max_steps": 12, "lr": 1e-3, "warmup_steps": 3, "schedule": schedule,
                                    "lr_end": 1e-4, "schedule_power": 2.0, "log_every": 1,
                                    "save_every": -1, "batch_size": 4, "device": "cpu"})
    trainer = Trainer(model, [batch], config, str(tmp_path), progress=False)
    trainer.train()
    expected = WarmupDecay(3, 12, schedule, 2.0, 0.1)
    logged = [row["lr"] for row in trainer.history if row["split"] == "train"]
    assert logged == pytest.approx([1e-3 * expected(s) for s in range(12)], rel=1e-9)
