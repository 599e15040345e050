"""The command line: help, one-line errors naming the flags, output checked before work."""

import time

import pytest

from sims.linear_attention.__main__ import main
from tests.core_only import run_core_only


def _exit(argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


def test_help_lists_subcommands_and_every_flag(capsys):
    assert _exit(["--help"]) == 0
    out = capsys.readouterr().out
    assert "figure1 | mechanism | upsampling" in out.splitlines()[0]
    for flag in ("--optimizer", "--runs", "--steps", "--paper-steps", "--features",
                 "--selection", "--log-every", "--out"):
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(flag))
        assert len(line.split()) > 2 or "default" in out  # every flag has help text
    assert _exit(["figure1", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--quick" in out and "--recompute" in out and "default" in out


@pytest.mark.parametrize("steps", ["1000", "60", "999983"])
def test_steps_alone_never_fails_on_a_flag_the_user_did_not_set(steps, capsys):
    """--paper-steps and --log-every defaults adapt to --steps; the run then gets as far as the
    output check (an unwritable --out stops it before any work)."""
    from sims.linear_attention.__main__ import _horizon_defaults, _train_parser
    from sims.linear_attention.experiment import Figure1Config

    assert _exit(["--steps", steps, "--out", "/proc/nope/x.nc"]) == 2
    err = capsys.readouterr().err
    assert "--paper-steps" not in err and "--log-every" not in err and "--out" in err, err
    a = _train_parser().parse_args(["--steps", steps])
    _horizon_defaults(a, Figure1Config())
    n = int(steps)
    assert a.paper_steps == min(10_001, n)
    assert (n - 1) % a.log_every == 0 and (a.paper_steps - 1) % a.log_every == 0
    assert a.log_every <= 50
    # the default horizon keeps the default stride
    b = _train_parser().parse_args([])
    _horizon_defaults(b, Figure1Config())
    assert (b.paper_steps, b.log_every) == (10_001, 50)


def test_huge_steps_are_refused_on_steps(capsys):
    assert _exit(["--steps", str(10**12)]) == 2
    err = capsys.readouterr().err
    assert "--steps 1000000000000" in err and "lower --steps" in err
    assert "--log-every" not in err.split("; ")[0] and "must divide" not in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["--runs", "0"], "`--runs` must be an int >= 1; got 0"),
     (["--steps", "0"], "`--steps` must be an int >= 1"),
     (["--paper-steps", "50", "--steps", "20", "--log-every", "1"], "`--paper-steps` (50)"),
     (["--anchor-preprocessing"], "`--anchor-preprocessing` needs explicit tokens")],
)  # fmt: skip
def test_usage_errors_name_the_flag(argv, flag, capsys):
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err


def test_unwritable_output_fails_before_any_work(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    t0 = time.perf_counter()
    assert _exit(["--runs", "2", "--out", "/proc/x/r.nc"]) == 2
    assert "`--out` '/proc/x/r.nc' is not writable" in capsys.readouterr().err
    assert _exit(["figure1", "--quick", "--out", str(blocker)]) == 2
    assert "is an existing file" in capsys.readouterr().err
    assert _exit(["figure1", "--quick", "--results", str(blocker / "sub")]) == 2
    assert time.perf_counter() - t0 < 20  # nothing was computed


@pytest.mark.slow
def test_tiny_run_prints_a_table_and_saves(tmp_path, capsys):
    out = tmp_path / "r.nc"
    args = ("--optimizer sam --runs 2 --steps 201 --paper-steps 101 --log-every 1 --P 200 --d 2 "
            "--heads 2 --proxy-steps 30 --no-progress")
    assert main([*args.split(), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "test loss median" in text and "runs with 0..d features" in text
    assert f"wrote {out}" in text and out.exists()
    from sims.runtime.io import read_netcdf

    ds = read_netcdf(out)
    assert list(ds.method.values) == ["gd", "sam"] and ds.attrs["meta"]["config"]["n_runs"] == 2


def test_core_install_says_which_extra():
    res = run_core_only("sims.linear_attention", "--help")
    assert res.returncode == 2
    assert "needs the `jax` extra" in res.stderr and 'pip install -e ".[jax]"' in res.stderr
    assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1


def test_library_never_imports_figures():
    import subprocess
    import sys

    code = ("import sys, sims.linear_attention.__main__, sims.linear_attention.products, "
            "sims.linear_attention.plotting, sims.linear_attention.mechanism, "
            "sims.linear_attention.study; "
            "print(any(m == 'figures' or m.startswith('figures.') for m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False"


def test_a_diverging_run_is_saved_and_reported(tmp_path, capsys):
    """``--lr 2`` diverges: the summary raised TypeError on a None and --out was never written.

    Now the result is written first (status failed, the trajectories up to the divergence), the
    table shows n/a where no run has a finite loss, and one error line says what diverged.
    """
    from sims.runtime.io import read_netcdf

    out = tmp_path / "r.nc"
    args = "--runs 2 --steps 201 --paper-steps 101 --P 200 --d 2 --heads 2 --lr 5 --no-progress"
    assert main([*args.split(), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    ds = read_netcdf(out)
    assert ds.attrs["status"] == "failed"
    assert "n/a" in captured.out and f"wrote {out}" in captured.out
    line = [ln for ln in captured.err.splitlines() if "error:" in ln]
    assert len(line) == 1 and "Traceback" not in captured.err
    assert "the run diverged (gd: training diverged in 2 of 2 run(s)" in line[0]
    assert f"the result is saved in {out} (status failed)" in line[0]


def test_a_proxy_diverging_into_nan_is_saved_and_reported_too(tmp_path, capsys):
    """Issue 31 row 3 as typed (``--lr 2``): GD's losses become NaN (``--lr 5``: inf).

    k-means then ran on NaN trajectories and numpy raised "Probabilities contain NaN" from the
    k-means++ seeding, a traceback with nothing saved. A run whose proxy diverged now selects
    nothing; the result is saved with status failed and one line reports the divergence.
    """
    from sims.runtime.io import read_netcdf

    out = tmp_path / "r.nc"
    args = "--runs 2 --steps 201 --paper-steps 101 --P 200 --d 2 --heads 2 --lr 2 --no-progress"
    assert main([*args.split(), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert read_netcdf(out).attrs["status"] == "failed"
    line = [ln for ln in captured.err.splitlines() if "error:" in ln]
    assert len(line) == 1 and "Traceback" not in captured.err
    assert "the run diverged (gd: training diverged in 2 of 2 run(s)" in line[0]
