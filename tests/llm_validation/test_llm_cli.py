"""The CLI contract of ``python -m llm_validation``: per-command help, the command table,
exit statuses (2 for bad input, 130 for Ctrl-C, one line each), nothing left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from llm_validation.__main__ import MODULE_COMMANDS, STEPS, command_names, load_command, main

ERROR = "python -m llm_validation: error: "
REPO = Path(__file__).resolve().parents[2]

#: A flag that belongs to exactly one command (or a family): it must not leak into other helps.
OWN_FLAGS = {
    "--n-train": {"corpus"},
    "--noise-rate": {"corpus"},
    "--scale": {"confirm"},
    "--variants": {"confirm"},
    "--settings": {"finetune"},
    "--size": {"demo"},
    "--config": {"data", "proxy", "select", "synthesize", "finetune", "evaluate", "report",
                 "run-all", "show-config", "convert"},
    "--run-dir": {"data", "proxy", "select", "synthesize", "finetune", "evaluate", "report",
                  "run-all", "show-config"},
}  # fmt: skip


KNOWN = {*STEPS, "show-config", "models", "convert", "corpus", "confirm", "demo"}


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("name", command_names())
def test_each_command_help_shows_its_own_flags(name, capsys):
    assert main([name, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: python -m llm_validation {name}")
    assert load_command(name).HELP.split(";")[0][:40] in " ".join(text.split())
    if name not in KNOWN:  # a command another module contributes: its flags are its own
        return
    for flag, owners in OWN_FLAGS.items():
        assert (flag in text) == (name in owners), (name, flag)


def test_top_level_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for name in command_names():
        assert f"\n    {name}" in text
    assert "--n-train" not in text and "--settings" not in text


def test_a_module_registers_a_command_with_one_line(tmp_path, monkeypatch, capsys):
    """A module with HELP, add_arguments and run is a command once named in MODULE_COMMANDS;
    it is imported only when it runs or the top-level help lists it."""
    (tmp_path / "sbt_fake_cmd.py").write_text(textwrap.dedent('''
        HELP = "a fake command for the test"

        def add_arguments(parser):
            parser.add_argument("--times", type=int, default=1, help="how often")

        def run(args):
            print("ran " * args.times)
            return 7
    '''))  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(MODULE_COMMANDS, "fake", "sbt_fake_cmd")
    monkeypatch.setitem(MODULE_COMMANDS, "broken", "sbt_no_such_module_xyz")
    assert main(["finetune", "--help"]) == 0
    assert "sbt_fake_cmd" not in sys.modules  # another command's help does not import it
    capsys.readouterr()
    assert main(["fake", "--times", "2"]) == 7
    assert capsys.readouterr().out.strip() == "ran ran"
    assert main(["fake", "--times", "x"]) == 2
    assert "argument --times: invalid int value" in _one_line(capsys.readouterr().err)
    assert main(["--help"]) == 0
    listing = capsys.readouterr().out
    assert "a fake command for the test" in listing and "(unavailable:" in listing


def test_help_imports_no_heavy_module():
    code = ("import sys; from llm_validation.__main__ import main; main(['--help']); "
            "main(['finetune', '--help']); print(sorted(m for m in "
            "('torch', 'transformers', 'peft') if m in sys.modules))")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["finetun"], "invalid choice: 'finetun'"),
        (["corpus", "--out", "x", "--config", "y"], "unrecognized arguments: --config y"),
        (["convert"], "`convert` needs a MODEL"),
        (["convert", "/no/such/model.gguf"], "does not exist"),
        (["show-config", "--set", "proxy.lr"], "`--set` expects KEY=VALUE"),
        (["show-config", "--set", "proxy.lrr=1"], r"did you mean 'lr'"),
        (["confirm", "--seeds", "1,a", "--dry-run"], "--seeds: a seed must be a non-negative"),
        (["confirm", "--reuse", "/no/such/run", "--dry-run"], "`--reuse`=.* is not the folder"),
        (["confirm", "--epochs", "0", "--dry-run"], "`--epochs` must be > 0"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, match, capsys):
    import re

    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("python -m llm_validation") and re.search(match, line), line


def test_huge_corpus_is_refused_with_the_estimate(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["corpus", "--out", str(out), "--n-train", "10000000000"]) == 2
    line = _one_line(capsys.readouterr().err)
    gb = float(line.split("needs about ")[1].split(" GB")[0].replace(",", ""))
    # ~2 kB per problem in memory (a generated record, its JSON line, the dedup sets)
    assert 5_000 < gb < 100_000, line
    assert "GB available" in line and not out.exists()


@pytest.mark.parametrize(
    ("var", "value", "match"),
    [
        ("SBT_WORKERS", "0", "SBT_WORKERS='0' must be a positive integer"),
        ("SBT_WORKERS", "two", "SBT_WORKERS='two'"),
        ("SBT_MODEL_CACHE", "", "SBT_MODEL_CACHE='' must name a folder"),
        ("RANK", "-1", "RANK='-1' must be a non-negative integer"),
        ("WORLD_SIZE", "0", "need 0 <= RANK < WORLD_SIZE"),
    ],
)
def test_bad_environment_is_one_line_exit_2(var, value, match, monkeypatch, capsys):
    monkeypatch.setenv(var, value)
    assert main(["models"]) == 2
    assert match in _one_line(capsys.readouterr().err)


def test_model_cache_that_is_a_file(tmp_path, monkeypatch, capsys):
    f = tmp_path / "cache"
    f.write_text("x")
    monkeypatch.setenv("SBT_MODEL_CACHE", str(f))
    assert main(["models"]) == 2
    assert "must name a folder" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("command", [["corpus", "--out"], ["demo", "--out"],
                                     ["confirm", "--out"], ["data", "--run-dir"]])  # fmt: skip
def test_existing_file_as_output_folder_is_refused(command, tmp_path, capsys, data_files):
    target = tmp_path / "taken"
    target.write_text("precious")
    argv = [*command, str(target)]
    if command[0] == "data":
        argv += ["--set", f"data.train_file={data_files[0]}"]
    assert main(argv) == 2
    assert "is an existing file; give a folder" in _one_line(capsys.readouterr().err)
    assert target.read_text() == "precious"


def test_ctrl_c_in_a_step_is_exit_130_and_one_line(tmp_path, monkeypatch, capsys, data_files):
    from llm_validation.experiments import pipeline

    def interrupted(cfg, *, quiet=False):
        (Path(cfg.run_dir) / "data" / "sub").mkdir(parents=True)  # an empty folder to clean
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "run_data", interrupted)
    run_dir = tmp_path / "deep" / "run"
    argv = ["data", "--run-dir", str(run_dir), "--set", f"data.train_file={data_files[0]}"]
    assert main(argv) == 130
    line = _one_line(capsys.readouterr().err)
    assert (
        line == ERROR + "interrupted; finished stages and the last checkpoint (every "
        "`save_steps` steps) are kept: rerun the same command to resume"
    )
    assert not (tmp_path / "deep").exists()  # the empty folders it made are gone


def test_sigint_mid_finetune_is_130_one_line_and_keeps_the_checkpoint(
    tmp_path, tiny_model_dir, data_files, monkeypatch, capsys
):
    """A real SIGINT (sent to this process's main thread after optimizer step 7) in `finetune`.

    Sent to the main thread and waited for, so the KeyboardInterrupt is raised right there
    (a process-wide signal may be taken by another thread and land a few frames later). Python
    leaves SIGINT ignored when started in the background (``cmd &``), as a terminal would not
    send it there; the test installs the foreground handler.
    """
    import threading
    import time

    from transformers import TrainerCallback

    from llm_validation.train import trainer as training
    from tests.llm_validation.test_finetune import finetune_config

    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 7:
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                time.sleep(60)  # interrupted at once by the KeyboardInterrupt

    build = training.build_trainer
    monkeypatch.setattr(training, "build_trainer", lambda *a, callbacks=(), **k: build(
        *a, callbacks=[*callbacks, Interrupt()], **k))  # fmt: skip
    cfg = finetune_config(tmp_path, tiny_model_dir, data_files[0], epochs=1, save_steps=3)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main(["finetune", "--config", str(cfg), "--quiet"]) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    assert _one_line(capsys.readouterr().err).startswith(ERROR + "interrupted; finished stages")
    trainer = tmp_path / "run" / "finetune" / "ft" / "trainer"
    assert sorted(p.name for p in trainer.iterdir()) == ["checkpoint-6"]  # 3 pruned


def test_long_corpus_warns_with_its_estimate(monkeypatch, capsys):
    """A corpus that fits in memory but takes minutes is written after a one-line estimate."""
    import argparse

    from llm_validation import __main__ as cli

    monkeypatch.setattr(cli, "_corpus_cost", lambda sample: (2e3, 1e-3))  # 2 kB, 1 ms each
    monkeypatch.setattr(cli, "available_memory", lambda: 64e9)
    args = argparse.Namespace(n_train=500_000, n_pretrain=0, n_heldout=0, n_test=500)
    cli._check_corpus_size(args)
    line = _one_line(capsys.readouterr().err)
    assert line == ("corpus: 503,000 problems take about 8 min and 1.0 GB of memory (estimated); "
                    "the files are written at the end.")  # fmt: skip
    monkeypatch.setattr(cli, "available_memory", lambda: 1e9)  # 1.0 GB > 0.8 GB usable
    with pytest.raises(cli.UsageError, match=r"needs about 1.0 GB .* has 1.0 GB available"):
        cli._check_corpus_size(args)


def test_finetune_checks_every_settings_inputs_before_training(
    tmp_path, tiny_model_dir, data_files, monkeypatch, capsys
):
    """``--settings ft,ft_up`` in a fresh run folder trained ``ft`` ~80 s, then failed (row 7)."""
    from llm_validation.experiments import pipeline

    monkeypatch.setattr(pipeline, "run_finetune", lambda *a, **k: pytest.fail("trained"))
    base = ["finetune", "--run-dir", str(tmp_path / "run"), "--set",
            f"data.train_file={data_files[0]}", "--set", f"finetune.model={tiny_model_dir}"]
    assert main([*base, "--settings", "ft,ft_up"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "setting 'ft_up' needs the selection" in line and "`proxy` and `select`" in line
    assert main([*base, "--settings", "synth"]) == 2
    assert "'synth' needs the selection" in _one_line(capsys.readouterr().err)
    assert main([*base, "--settings", ""]) == 2  # "" meant every setting
    assert "--settings: an empty value" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("value", "expected"), [("ft", ["ft"]), ("ft,ft_up", ["ft", "ft_up"]),
                                                 ('["ft_up"]', ["ft_up"])])  # fmt: skip
def test_set_settings_is_a_list_of_names_not_letters(value, expected, capsys):
    """``--set finetune.settings=ft`` was read letter by letter: "must be one of ...; got 'f'"."""
    import json

    assert main(["show-config", "--set", f"finetune.settings={value}"]) == 0
    assert json.loads(capsys.readouterr().out)["finetune"]["settings"] == expected
    assert main(["show-config", "--set", "finetune.settings=ft,nope"]) == 2
    assert "'nope'" in _one_line(capsys.readouterr().err)


def test_negative_or_repeated_confirm_seeds_are_refused(monkeypatch, capsys):
    """``confirm --seeds ""`` became 0,1,2; -1 and 1,1 were accepted (row 10)."""
    from llm_validation.experiments import confirm

    monkeypatch.setattr(confirm, "run_confirmation", lambda *a, **k: pytest.fail("ran"))
    for value, why in (("", "an empty value"), ("-1", "non-negative"), ("1,1", "given twice"),
                       ("0,,1", "expected seeds")):  # fmt: skip
        assert main(["confirm", "--seeds", value, "--dry-run"]) == 2
        assert why in _one_line(capsys.readouterr().err), value
    assert main(["confirm", "--seeds", "3,1", "--dry-run"]) == 0
    assert "seeds: 3, 1" in capsys.readouterr().out
