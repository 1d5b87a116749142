"""`--device` on every command that runs a model: one helper, checked against this build of torch,
a one-line error (no traceback) for a device the build or machine lacks, before any model loads."""

import numpy as np
import pytest
import torch

from bertkit.commands import cli
from bertkit.runtime.devices import copy_without_wait, resolve_device
from bertkit.errors import ConfigError

NO_MPS = not torch.backends.mps.is_available()
NO_CUDA = not torch.cuda.is_available()


def test_names_resolve_on_this_machine():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    if NO_CUDA:
        assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ConfigError, match=r"unknown device 'banana'; use auto, cpu, cuda, cuda:N or mps"):
        resolve_device("banana")
    with pytest.raises(ConfigError, match="not one bertkit runs on"):
        resolve_device("meta")


@pytest.mark.skipif(not NO_MPS, reason="this build has MPS")
def test_mps_without_mps_names_the_build():
    why = "has no MPS support" if not torch.backends.mps.is_built() else "not available on this machine"
    with pytest.raises(ConfigError, match=why):
        resolve_device("mps")


@pytest.mark.skipif(not NO_CUDA, reason="CUDA is available")
def test_cuda_without_cuda_names_the_build():
    why = "has no CUDA support" if not torch.backends.cuda.is_built() else "no CUDA GPU is visible"
    with pytest.raises(ConfigError, match=why):
        resolve_device("cuda:0")


def test_every_command_that_runs_a_model_takes_device():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name in set(cli.THREADED) - set(cli.CPU_ONLY):
        options = {o for action in commands[name]._actions for o in action.option_strings}
        assert "--device" in options, name
    sweep = commands["scale"]._subparsers._group_actions[0].choices["sweep"]
    assert "--device" in {o for action in sweep._actions for o in action.option_strings}


def command_lines(tmp_path, minilm_dir):
    """Each model-running command with valid arguments; --device is appended."""
    text = tmp_path / "texts.txt"
    text.write_text("a first line\na second line\n")
    out = str(tmp_path / "out")
    return {
        "embed": ["--model", minilm_dir, "--input", str(text), "--output", str(tmp_path / "e.npy")],
        "nearest": ["--model", minilm_dir, "--corpus", str(text), "a query"],
        "predict": ["--model", minilm_dir, "--input", str(text), "--output", str(tmp_path / "p.jsonl")],
        "evaluate": ["--model", minilm_dir, "--data", "bbc"],
        "fill-mask": ["--model", minilm_dir, "a [MASK] line"],
        "attention": ["--model", minilm_dir, "a line"],
        "probe": ["--model", minilm_dir, "--task", "wordnet-supersense", "--out", out],
        "finetune": ["--task", "classification", "--model", minilm_dir, "--train", "bbc", "--out", out],
        "distill": ["--teacher", minilm_dir, "--train", "bbc", "--out", out],
        "pretrain": ["--config", "configs/pretrain-tiny.toml", "--out", out],
        "quickstart": ["--out", out],
    }


@pytest.mark.parametrize("device", ["mps", "cuda", "banana"])
def test_an_unavailable_device_is_one_line_before_any_work(device, tmp_path, minilm_dir, capsys):
    if (device == "mps" and not NO_MPS) or (device == "cuda" and not NO_CUDA):
        pytest.skip(f"{device} is available here")
    lines = command_lines(tmp_path, minilm_dir)
    assert set(lines) == set(cli.THREADED) - set(cli.CPU_ONLY)
    for command, argv in lines.items():
        assert cli.main([command, *argv, "--device", device]) == 2, command
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"bertkit {command}: error: ") and device in err[0], (command, err)
        assert "Traceback" not in captured.err and not captured.out, command
    assert not (tmp_path / "out").exists()  # nothing was written: the check came first


def test_cpu_device_gives_the_default_results(tmp_path, minilm_dir, capsys):
    lines = command_lines(tmp_path, minilm_dir)
    assert cli.main(["embed", *lines["embed"]]) == 0
    default = np.load(tmp_path / "e.npy")
    assert cli.main(["embed", *lines["embed"], "--device", "cpu"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), default, atol=1e-6)
    capsys.readouterr()
    summaries = []
    for device in ([], ["--device", "cpu"]):
        assert cli.main(["attention", *lines["attention"], *device]) == 0
        summaries.append(capsys.readouterr().out)
    assert summaries[0] == summaries[1] and "[CLS]" in summaries[0]


def test_copy_without_wait_is_a_plain_copy_off_the_gpu():
    """On the CPU nothing is pinned (pinning needs CUDA); the values arrive. tests/gpu times the
    CUDA route behind a busy GPU."""
    source = torch.arange(6, dtype=torch.float64)
    moved = copy_without_wait(source, torch.device("cpu"))
    assert moved.device.type == "cpu" and moved.tolist() == source.tolist()
