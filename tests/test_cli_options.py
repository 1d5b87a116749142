"""One option vocabulary across commands: defaults in every --help entry, no silent abbreviations,
"did you mean" for a misspelt option, --model everywhere, typed values that are not parsed again,
and a run folder named where a model goes."""

import argparse
import os

import pytest

from bertkit.commands.cli import _DefaultsFormatter, build_parser, main
from bertkit.commands.options import resolve_models, typed_settings
from bertkit.errors import CheckpointError, ConfigError
from bertkit.settings.config_io import apply_overrides


def parsers(parser, name="bertkit"):
    """(name, parser) of the top-level parser and every (sub-)command's, recursively."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


def test_every_option_help_shows_its_default():
    missing = []
    for name, parser in parsers(build_parser()):
        formatter = _DefaultsFormatter(name)
        for action in parser._actions:
            if not action.option_strings or action.required or action.nargs == 0:
                continue  # positionals, required options and flags have no default to show
            text = formatter._get_help_string(action) % {"default": action.default}
            if "default" not in text.lower() and "required" not in text.lower():
                missing.append(f"{name} {action.option_strings[-1]}")
    assert not missing, missing


def test_every_command_has_a_description():
    assert all(parser.description for name, parser in parsers(build_parser()) if name != "bertkit")


@pytest.mark.parametrize("argv,message", [
    (["finetune", "--trian", "x.csv"], "unrecognized arguments: --trian; did you mean --train?"),
    (["evaluate", "--model", "m", "--data", "d", "--limt", "3"], "--limt; did you mean --limit?"),
    (["embed", "--model", "m", "--input", "i", "--output", "o", "--thread", "2"],
     "--thread; did you mean --threads?"),  # an abbreviation is refused, not read as --threads
    (["finetune", "--task", "classification", "--set=train.lr=1", "--ovewrite"], "did you mean --overwrite?"),
])
def test_misspelt_or_abbreviated_option_is_refused_with_the_nearest(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_option_values_that_start_with_a_dash_are_not_options():
    args = build_parser().parse_args(["predict", "--model", "m", "--input", "i", "--output", "-"])
    assert args.output == "-"
    args = build_parser().parse_args(["scale", "formula", "--compute", "1e20", "--json"])
    assert args.compute == 1e20


def test_info_takes_model_like_every_command(minilm_dir, capsys):
    assert main(["info", "--model", minilm_dir, "--json"]) == 0
    by_option = capsys.readouterr().out
    assert main(["info", minilm_dir, "--json"]) == 0  # the positional DIR still works
    assert capsys.readouterr().out == by_option
    with pytest.raises(SystemExit):
        main(["info", minilm_dir, "--model", minilm_dir])


def test_probe_data_is_named_by_role():
    args = build_parser().parse_args(["probe", "--model", "m", "--data", "words.conll", "--out", "o"])
    assert args.data == "words.conll"
    args = build_parser().parse_args(["probe", "--model", "m", "--task", "words.conll", "--out", "o"])
    assert args.data == "words.conll"  # the old name still works


def test_typed_options_reach_the_settings_as_values():
    args = build_parser().parse_args(["finetune", "--task", "classification", "--model", "m", "--train", "t",
                                      "--out", "o", "--seed", "7", "--device", "cpu"])
    assert typed_settings(args) == [("train.seed", 7), ("train.device", "cpu")]
    sections = {"train": ["seed", "device", "lr"], "distil": ["layer_map"]}
    merged = apply_overrides({"train": {"seed": 1}}, ["train.lr=3e-4", ("train.seed", 7),
                                                      ("distil.layer_map", [1, 3])], sections)
    assert merged == {"train": {"seed": 7, "lr": 3e-4}, "distil": {"layer_map": [1, 3]}}
    # a typed string is taken as it is: text would have been parsed as TOML (and "1e3" become a number)
    assert apply_overrides({}, [("train.device", "1e3")], sections)["train"]["device"] == "1e3"
    assert apply_overrides({}, ["train.device=1e3"], sections)["train"]["device"] == 1000.0
    with pytest.raises(ConfigError, match="did you mean train.seed"):
        apply_overrides({}, [("train.sed", 7)], sections)


def test_a_flag_and_a_set_value_that_disagree_are_refused(minilm_dir, tmp_path, capsys):
    """The flag was applied after --set and won silently (--peft lora trained LoRA under
    --set peft.method=adapter)."""
    base = ["finetune", "--task", "classification", "--model", minilm_dir, "--train", str(tmp_path / "t.csv"),
            "--out", str(tmp_path / "o")]
    for extra, message in ((["--peft", "lora", "--set", "peft.method=adapter"], "--peft lora and --set peft.method"),
                           (["--seed", "1", "--set", "train.seed=2"], "--seed 1 and --set train.seed=2 disagree"),
                           (["--no-baseline", "--set", "train.baseline=true"], "--no-baseline and --set")):
        assert main(base + extra) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    args = build_parser().parse_args(base + ["--seed", "3", "--set", "train.seed=3"])  # agreeing: fine
    assert typed_settings(args) == [("train.seed", 3)]


def fake_checkpoint(directory):
    os.makedirs(directory)
    for name in ("config.json", "trainer_state.pt"):
        open(os.path.join(directory, name), "w").close()


def test_a_run_folder_names_the_model_inside(tmp_path):
    run = tmp_path / "runs" / "x"
    fake_checkpoint(run / "checkpoint-500")
    fake_checkpoint(run / "checkpoint-2500")
    os.makedirs(run / "tokenizer")
    args = argparse.Namespace(model=str(run))
    with pytest.raises(CheckpointError) as error:
        resolve_models(args)
    model = str(run / "checkpoint-2500")  # the newest complete checkpoint
    assert str(error.value) == f"{run} is a run folder; the model is {model}: pass --model {model}"
    fake_checkpoint(run / "best")  # early stopping's best model wins over the newest
    with pytest.raises(CheckpointError, match=f"the model is {run / 'best'}: pass --model"):
        resolve_models(argparse.Namespace(model=str(run)))
    args = argparse.Namespace(model=model, teacher=None)
    resolve_models(args)  # a model directory passes
    assert args.model == model


def test_a_run_folder_given_to_a_command_is_one_line(tmp_path, capsys):
    fake_checkpoint(tmp_path / "run" / "checkpoint-3")
    assert main(["fill-mask", "--model", str(tmp_path / "run"), "the [MASK] fell"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the model is {tmp_path / 'run' / 'checkpoint-3'}" in err


def test_single_document_corpus_says_how_to_give_several():
    from bertkit.data.documents import split_documents

    with pytest.raises(ConfigError, match=r"one document per line: --set data.mode=line; documents separated by "
                                          r"blank lines: --set data.mode=blank .*or use JSONL"):
        split_documents(1, 0.1, 0)


def test_a_misspelt_data_path_names_the_file_next_to_it(minilm_dir, tmp_path, capsys, monkeypatch):
    from tests.cli_checks import assert_refused

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.csv").write_text("text,label\na,x\nb,y\n")
    (tmp_path / "new.txt").write_text("a text\n")
    assert_refused(["finetune", "--task", "classification", "--model", minilm_dir, "--train", "trian.csv",
                    "--dev", "train.csv", "--out", "runs/x"], capsys, tmp_path,
                   "trian.csv: no such file; did you mean train.csv?")
    assert_refused(["embed", "--model", minilm_dir, "--input", "nwe.txt", "--output", "v.npy"], capsys, tmp_path,
                   "nwe.txt: no such file; did you mean new.txt?")
    assert_refused(["finetune", "--task", "classification", "--model", minilm_dir, "--train", "train.csv",
                    "--dev", "other.csv", "--out", "runs/x"], capsys, tmp_path,
                   "other.csv: no such file")  # nothing near: no guess, and no word of a datasets cache


def test_help_imports_only_the_command_it_shows():
    """`bertkit --help` lists the commands without importing their modules (each pulls in its recipe);
    `bertkit info --help` imports info's module, not the training loop (torch.distributed.fsdp)."""
    import subprocess
    import sys

    probe = ("import sys\nfrom bertkit.commands.cli import main\n"
             "for argv in (['--help'], ['info', '--help']):\n"
             "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
             "    print(sorted(m for m in sys.modules if m.startswith(('bertkit.commands.', 'bertkit.recipes', "
             "'bertkit.train.trainer'))))\n")
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # this checkout
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env).stdout
    top, info = [line for line in out.splitlines() if line.startswith("[")]
    assert top == "['bertkit.commands.cli']"
    assert info == "['bertkit.commands.cli', 'bertkit.commands.info', 'bertkit.commands.options']"


def test_the_readmes_config_paths_work_from_any_folder(tmp_path, monkeypatch, capsys):
    """`--config configs/NAME.toml` as the README writes it, run from the user's data folder:
    bertkit's own recipe is read and stderr says so; a name it does not ship is one error that
    says where bertkit's recipes are."""
    from bertkit.settings.config_io import BUILT_IN_CONFIGS, load_toml

    monkeypatch.chdir(tmp_path)
    assert load_toml("configs/pretrain-tiny.toml") == load_toml(os.path.join(BUILT_IN_CONFIGS, "pretrain-tiny.toml"))
    assert "reading bertkit's own" in capsys.readouterr().err
    (tmp_path / "configs").mkdir()  # the user's own file of that name comes first
    (tmp_path / "configs" / "pretrain-tiny.toml").write_text("[train]\nmax_steps = 7\n")
    assert load_toml("configs/pretrain-tiny.toml") == {"train": {"max_steps": 7}}
    with pytest.raises(ConfigError, match="does not exist.*bertkit's own are in .*configs"):
        load_toml("configs/no-such-recipe.toml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_toml("elsewhere/pretrain-tiny.toml")  # only the README's configs/ folder is looked up
