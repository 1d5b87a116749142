"""`bertkit finetune` and `bertkit evaluate` under torchrun split the data across the ranks: two
gloo processes take half the optimizer steps of one process per epoch, and evaluate scores half the
examples each, giving the one-process metrics."""

import json
import warnings

import pytest

from bertkit.commands.cli import main
from tests.tasks.helpers import make_tiny_model
from tests.train.helpers import torchrun as run_torchrun

TEXTS = {"sport": ["the match ended {} nil", "the striker scored {} goals", "a win by {} points"],
         "business": ["shares fell {} percent", "profits rose by {} million", "the bank cut rates by {}"]}


def write_csv(path, n):
    rows = [(TEXTS[label][i % 3].format(i), label) for i in range(n) for label in TEXTS]
    path.write_text("text,label\n" + "".join(f"{t},{label}\n" for t, label in rows))
    return str(path)


SCRIPT = """
import warnings
warnings.simplefilter("ignore")
from bertkit.commands.cli import main
from bertkit.runtime.process_group import init_distributed, shutdown
# one launch for both commands: the group joined here stays joined through them (they leave only
# a group they joined themselves), which saves a second start of the processes
assert init_distributed("cpu").world_size == 2
for argv in {commands!r}:
    assert main(argv) == 0, argv
shutdown()
"""


def torchrun(root, *commands):
    """The bertkit commands one after the other in two gloo processes; their stdout (rank 0 prints)."""
    script = root / "commands.py"
    script.write_text(SCRIPT.format(commands=list(commands)))
    return run_torchrun(script)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp-finetune")
    model = make_tiny_model(root / "tiny", [t.format(i) for ts in TEXTS.values() for t in ts for i in range(3)])
    return root, model, write_csv(root / "train.csv", 16), write_csv(root / "dev.csv", 6)


def finetune_args(model, train, dev, out):
    return ["finetune", "--task", "classification", "--model", model, "--train", train, "--dev", dev, "--out", out,
            "--no-progress", "--device", "cpu", "--set", "train.epochs=1", "train.batch_size=4",
            "data.max_length=16", "train.eval_every=100"]


def test_embedding_trains_under_ddp_and_evaluate_ranks_against_the_whole_corpus(setup, capsys):
    """Each rank embeds half of the pairs; the ranking (a query against every positive) happens
    on the gathered vectors, so two processes give one process's metrics."""
    root, model, _, _ = setup
    pairs = root / "pairs.csv"
    rows = [(TEXTS[label][i % 3].format(i), TEXTS[label][(i + 1) % 3].format(i)) for i in range(6) for label in TEXTS]
    pairs.write_text("text,positive\n" + "".join(f"{t},{p}\n" for t, p in rows))
    args = ["finetune", "--task", "embedding", "--model", model, "--train", str(pairs), "--dev", str(pairs),
            "--no-progress", "--device", "cpu", "--set", "train.max_steps=2", "train.batch_size=4", "data.max_length=16"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([*args, "--out", str(root / "emb-single")]) == 0
        capsys.readouterr()
        assert main(["evaluate", "--model", str(root / "emb-single"), "--data", str(pairs)]) == 0
    alone = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    printed = torchrun(root, [*args, "--out", str(root / "emb-ddp")],
                       ["evaluate", "--model", str(root / "emb-single"), "--data", str(pairs)])
    assert json.load(open(root / "emb-ddp" / "finetune_summary.json"))["steps"] == 2
    split = json.loads(printed.strip().splitlines()[-1])
    scores = {k: v for k, v in alone.items() if k != "baselines"}
    assert {k: split[k] for k in scores} == pytest.approx(scores, abs=1e-6) and split["baselines"] == alone["baselines"]


@pytest.mark.slow
def test_two_processes_take_half_the_steps_and_evaluate_splits_the_examples(setup, capsys):
    root, model, train, dev = setup
    single = str(root / "single")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(finetune_args(model, train, dev, single)) == 0
        capsys.readouterr()
        assert main(["evaluate", "--model", single, "--data", dev]) == 0
    alone = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    printed = torchrun(root, finetune_args(model, train, dev, str(root / "ddp")),
                       ["evaluate", "--model", single, "--data", dev]).strip().splitlines()
    runs = {name: json.load(open(root / name / "finetune_summary.json")) for name in ("ddp", "single")}
    # 32 examples in batches of 4: 8 steps per epoch in one process, 4 per rank in two
    assert (runs["single"]["steps"], runs["single"]["steps_per_epoch"]) == (8, 8)
    assert (runs["ddp"]["steps"], runs["ddp"]["steps_per_epoch"]) == (4, 4)
    assert max(json.loads(line)["step"] for line in open(root / "ddp" / "metrics.jsonl")) == 4

    # evaluate: rank 0 alone prints, the metrics of all 12 dev examples as one process gives them
    # (then the trivial and TF-IDF baselines, a line each, the model's labelled line and its paired lead)
    assert printed[-6] == f"classification on {dev}: 12 examples"
    assert printed[-3].startswith(f"model on {dev}: accuracy=") and "over 12 examples" in printed[-3]
    assert printed[-2].startswith("model - TF-IDF accuracy: ") and "over 12 examples" in printed[-2]
    assert printed[-8] == f"model saved in {root / 'ddp'}"  # finetune's report, from rank 0 alone
    split = json.loads(printed[-1])
    assert split.keys() == alone.keys()
    assert split.pop("baselines") == alone.pop("baselines")  # fitted on rank 0 from the same training data
    for name in alone:
        assert split[name] == pytest.approx(alone[name], abs=1e-6), name


class TwoRanks:
    """Rank 0 of two, with rank 1's share computed in this process (what all_gather returns)."""

    rank, world_size, enabled = 0, 2, True

    def __init__(self, rank_one):
        self.rank_one = rank_one

    def gather(self, share):
        return [share, self.rank_one()]


def test_split_predictions_are_gathered_back_in_order(setup):
    import dataclasses

    import numpy as np

    from bertkit.models.heads import BertForSequenceClassification
    from bertkit.tasks import DataConfig, TaskSpec, get_task, inference
    from bertkit.tasks.formats import read_text_dataset
    from bertkit.tokenizer import Tokenizer

    root, model_dir, _, dev = setup
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the new head's weights: random on purpose
        model = BertForSequenceClassification.from_pretrained(model_dir, num_labels=2,
                                                              id2label={0: "business", 1: "sport"}).eval()
    tokenizer, examples = Tokenizer.from_pretrained(model_dir), read_text_dataset(dev)
    task, seen = get_task("classification"), []
    recording = dataclasses.replace(task, metrics=lambda examples, predictions: seen.append(predictions) or {})
    spec = TaskSpec(recording, DataConfig(max_length=16))
    inference.evaluate_examples(model, tokenizer, spec, examples)
    inference.evaluate_examples(model, tokenizer, spec, examples, ctx=TwoRanks(
        lambda: task.decode(model, tokenizer, examples[1::2], spec, "dev")))
    alone, split = seen
    assert len(split) == len(alone) == 12
    for (label_a, probs_a), (label_b, probs_b) in zip(alone, split):
        assert label_a == label_b
        assert list(probs_a) == list(probs_b) == ["business", "sport"]
        np.testing.assert_allclose(list(probs_a.values()), list(probs_b.values()), atol=1e-6)
    assert len({round(p["business"], 6) for _, p in alone}) > 6  # the predictions differ, so order shows
