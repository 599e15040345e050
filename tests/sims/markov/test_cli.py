"""``python -m sims.markov``: values, bad input (exit 2, one line, before work), core install."""

import numpy as np
import pytest

from sims.markov.__main__ import build_parser, main
from sims.runtime.io import read_netcdf
from tests.core_only import run_core_only


def test_cli_ode_result_equals_the_library(tmp_path, capsys):
    from sims.markov.tensor_dynamics import FlowConfig, solve_flow, stage_times

    out = tmp_path / "ode.nc"
    assert main(["ode", "--T", "8", "--t-max", "500", "--m", "1.5", "--out", str(out)]) == 0
    ds = read_netcdf(out)
    ref = solve_flow(FlowConfig(T=8, t_max=500.0, m=1.5)).ds
    np.testing.assert_allclose(ds.C.values, ref.C.values, rtol=1e-10, atol=1e-12)
    st = stage_times(ref)
    text = capsys.readouterr().out
    assert f"stage times: {np.round(st, 2).tolist()}" in text
    assert ds.attrs["meta"]["config"]["m"] == 1.5


def test_cli_ode_output_needs_no_decoding(tmp_path, capsys):
    """No raw scipy status; without --out it says nothing was saved; --heads/--features name H
    and h (the clashing --H/--h are gone)."""
    from sims.markov.tensor_dynamics import FlowConfig, solve_flow

    assert main(["ode", "--T", "6", "--t-max", "50", "--heads", "2", "--features", "2"]) == 0
    text = capsys.readouterr().out
    assert "status=" not in text and "A termination event" not in text
    assert "integrated to t = 50" in text
    assert "nothing saved (give --out FILE.nc" in text
    out = tmp_path / "o.nc"
    assert main(["ode", "--T", "6", "--t-max", "50", "--heads", "2", "--features", "2",
                 "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    ref = solve_flow(FlowConfig(T=6, t_max=50.0, H=2, h=2)).ds
    np.testing.assert_allclose(read_netcdf(out).C.values, ref.C.values, rtol=1e-10, atol=1e-12)
    a = build_parser().parse_args(["ode", "--heads", "4", "--features", "2"])
    assert (a.H, a.h) == (4, 2)
    for old in ("--H", "--h"):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(["ode", old, "2"])
        assert exc.value.code == 2


def test_cli_train_quick_prints_and_saves_the_run(tmp_path, capsys):
    out = tmp_path / "r.nc"
    argv = ["train", "--scale", "quick", "--no-progress", "--steps", "3", "--lr", "0.05",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    ds = read_netcdf(out)
    assert ds.attrs["meta"]["config"]["train"]["lr"] == 0.05
    assert list(ds.step.values) == [0, 3]
    assert f"final excess loss {float(ds.excess_loss[-1]):.4f}" in text
    assert "status=success" in text and "floors of KL" in text


@pytest.mark.parametrize(
    "argv, match",
    [
        (["train", "--scale", "quick", "--u", "-1"], "init_scale"),
        (["train", "--scale", "quick", "--lr", "inf"], "`lr` must be a finite number > 0"),
        (["train", "--scale", "quick", "--lr", "nan"], "`lr`"),
        (["train", "--scale", "quick", "--weight-decay", "inf"], "weight_decay"),
        (["train", "--scale", "quick", "--device", "nonsense"], "not a torch device"),
        (["train", "--scale", "quick", "--out", "/proc/x/r.nc"], "not writable"),
        (["train", "--scale", "quick", "--checkpoint", "/proc/x/c.pt"], "--checkpoint"),
        (["ode", "--m", "-2"], "`m`"),
        (["ode", "--t-max", "inf"], "t_max"),
        (["ode", "--init-std", "nan"], "init_std"),
        (["ode", "--out", "/proc/x"], "not writable"),
        (["train", "--scale", "quick", "--sam-rho", "0.1"], "`--sam-rho` 0.1 is the SAM radius"),
        (["train", "--scale", "quick", "--optimizer", "sam", "--sam-rho", "nan"], "`sam_rho`"),
    ],
)
def test_cli_bad_values_exit_2_with_one_line(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_out_is_an_existing_folder(tmp_path, capsys, monkeypatch):
    import sims.markov.train as T

    monkeypatch.setattr(T, "train", lambda *a, **k: pytest.fail("trained before checking"))
    with pytest.raises(SystemExit) as exc:
        main(["train", "--scale", "quick", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "is a folder" in capsys.readouterr().err


def test_cli_cuda_on_a_cpu_torch(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA")
    with pytest.raises(SystemExit) as exc:
        main(["train", "--scale", "quick", "--device", "cuda"])
    assert exc.value.code == 2
    assert "no usable CUDA device" in capsys.readouterr().err


def test_cli_bad_markov_scale(monkeypatch, capsys):
    monkeypatch.setenv("MARKOV_SCALE", "bogus")
    with pytest.raises(SystemExit) as exc:
        main(["train"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "MARKOV_SCALE='bogus' unknown" in err and err.count("\n") == 1


def test_cli_diverged_run_reports_and_exits_1(tmp_path, capsys):
    out = tmp_path / "r.nc"
    argv = ["train", "--scale", "quick", "--no-progress", "--optimizer", "sgd", "--lr", "1e30",
            "--steps", "6", "--out", str(out)]  # fmt: skip
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "status=failed (diverged at step" in text
    assert read_netcdf(out).attrs["status"] == "failed"


def test_cli_usage_error_exits_2():
    with pytest.raises(SystemExit) as e:
        main(["nonsense"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["train", "--scheduler", "cosine"])
    assert e.value.code == 2


def test_every_flag_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    for name, p in sub.choices.items():
        for action in p._actions:
            assert action.help, f"{name} {action.option_strings} has no help"


def test_core_install_says_which_extra():
    r = run_core_only("sims.markov", "--help")
    assert r.returncode == 0 and "torch" in r.stdout
    r = run_core_only("sims.markov", "train", "--scale", "quick", "--no-progress")
    assert r.returncode == 2, r.stderr
    assert "`torch` extra" in r.stderr and "pip install" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    r = run_core_only("sims.markov", "ode", "--T", "6", "--t-max", "50")
    assert r.returncode == 0 and "stage times" in r.stdout  # the ODE needs only the core


def test_library_never_imports_figures_or_llm_validation():
    """One-way layers: sims.markov and theory.markov_* import no figures, no llm_validation."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    files = list((root / "sims" / "markov").glob("*.py")) + list(root.glob("theory/markov_*.py"))
    assert len(files) >= 10
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for n in names:
                assert n.split(".")[0] not in ("figures", "llm_validation"), f"{f.name}: {n}"


def test_checkpoints_are_checked_before_training(tmp_path, capsys):
    from sims.markov.experiments import minimal_exp
    from sims.markov.train import load_checkpoint, train
    from sims.runtime.io import UnreadableFileError

    ckpt = tmp_path / "c.pt"
    exp = minimal_exp("quick", steps=2)
    train(exp, checkpoint=ckpt)
    assert load_checkpoint(ckpt, exp)["step"] == 2
    with pytest.raises(UnreadableFileError, match="written by a different config"):
        load_checkpoint(ckpt, minimal_exp("quick", steps=3))
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[: len(data) // 2])  # a crash while copying it
    with pytest.raises(UnreadableFileError, match=rf"checkpoint '{ckpt}' cannot be read"):
        load_checkpoint(ckpt)
    ckpt.write_text("12\n")  # "invalid literal for int()" before, without the file's name
    with pytest.raises(SystemExit) as exc:
        main(["train", "--scale", "quick", "--steps", "2", "--checkpoint", str(ckpt)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(ckpt) in err and "delete it" in err
