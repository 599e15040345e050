"""Every command line of the package keeps one contract (issue 24, item 4); none can skip it.

:data:`CLIS` registers each ``python -m ...`` entry point (each subcommand of a CLI with
subcommands) with the flags that exercise it; :func:`test_every_entry_point_is_registered` finds
every module with a ``__main__`` guard or a top-level ``main`` in the package and fails for one
that is missing. Each registered CLI is driven in-process through ``main(argv)`` (the function
doing the work is replaced, so nothing real runs) for every case that applies:

* ``--help`` exits 0 and shows no absolute path of this checkout;
* an unknown flag, an invalid value, a bad ``$SBT_WORKERS``, an existing regular file as
  ``--out``, a size that does not fit in memory, a corrupt saved file: exit 2 and one line on
  stderr (no traceback), the work never starts and nothing is written (no empty folder);
* Ctrl-C during the work: exit 130 and one line, nothing left behind but saved results.

A few subprocess tests deliver a real SIGINT to a running child (the only way to see a crash at
interpreter exit) and check exit 130, one error line and no traceback or core dump.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("sims", "theory", "figures", "llm_validation")
LLM_STEPS = ("data", "proxy", "select", "synthesize", "evaluate", "report")


@dataclasses.dataclass(frozen=True)
class Cli:
    """One command line and the flags that exercise it.

    Attributes:
        id: how a user types it after ``python -m``.
        module: the module whose ``main(argv)`` runs it.
        prefix: leading arguments (the subcommand).
        out: ``(flag, kind)`` of its output: kind ``"dir"``, ``"nc"`` (a NetCDF file) or
            ``None`` when it writes nothing.
        args: further arguments of a small valid run.
        bad: arguments with an invalid value.
        huge: arguments whose run cannot fit in memory (``None``: no size flag).
        work: ``"module:attribute"`` of the function that does the work (patched in the tests).
        extra: the extra it needs (skipped when not installed).
        corrupt: how to plant a corrupt saved file it reads: ``(flag or None, relative path)``,
            the file created under the results folder (flag ``None``) or given to ``flag``.
        stubs: ``"module:attribute"`` of input checks that need real inputs (a training file,
            an installed model), replaced by no-ops in the cases that need the work to start
            (Ctrl-C, an existing file as the output folder). Those checks have their own tests
            (tests/llm_validation/test_llm_cli.py).
        seed: its flag taking one seed (``--seed``); ``seeds``: a comma-separated list of them.
        executor: whether it takes ``--executor``.
    """

    id: str
    module: str
    prefix: tuple[str, ...] = ()
    out: tuple[str, str] | None = ("--out", "dir")
    args: tuple[str, ...] = ()
    bad: tuple[str, ...] = ()
    huge: tuple[str, ...] | None = None
    work: str | None = None
    extra: tuple[str, ...] = ()
    corrupt: tuple[str | None, str] | None = None
    stubs: tuple[str, ...] = ()
    seed: str | None = None
    seeds: str | None = None
    executor: bool = False


#: reads the training file and the models
LLM_INPUTS = ("llm_validation.experiments.pipeline:check_inputs",)
CLIS = [
    Cli("sims.sam_entropy", "sims.sam_entropy", args=("--no-plot",), bad=("--dim", "1"),
        huge=("--dim", "1000000000"), work="sims.sam_entropy:check_theorem"),
    Cli("sims.sosd_toy", "sims.sosd.toy", args=("--steps", "3"), bad=("--n", "20", "--d", "4"),
        huge=("--d", "1000000"), work="sims.sosd.toy:train", seeds="--seeds"),
    Cli("theory", "theory.__main__", args=("--claim", "thm44_step1_monotone"),
        bad=("--claim", "no_such_claim"), work="theory.report:CLAIMS"),
    Cli("sims.linear_attention", "sims.linear_attention.__main__", out=("--out", "nc"),
        args=("--runs", "2", "--no-progress"), bad=("--runs", "0"), huge=("--P", "10**12"),
        work="sims.linear_attention.experiment:run_figure1", extra=("jax",), seed="--seed"),
    Cli("sims.linear_attention figure1", "sims.linear_attention.__main__", ("figure1",),
        args=("--quick",), bad=("--results", "{file}/sub"),
        work="sims.linear_attention.products:render_figure1", extra=("jax",),
        corrupt=(None, "linear_attention/figure1_quick.nc")),
    Cli("sims.linear_attention mechanism", "sims.linear_attention.__main__", ("mechanism",),
        args=("--quick",), bad=("--results", "{file}/sub"),
        work="sims.linear_attention.products:render_mechanism", extra=("jax",)),
    Cli("sims.linear_attention upsampling", "sims.linear_attention.__main__", ("upsampling",),
        args=("--quick",), bad=("--results", "{file}/sub"),
        work="sims.linear_attention.products:render_upsampling", extra=("jax",)),
    Cli("sims.markov ode", "sims.markov.__main__", ("ode",), out=("--out", "nc"),
        args=("--T", "8"), bad=("--m", "-2"), huge=("--T", "10**11"),
        work="sims.markov.tensor_dynamics:solve_flow", seed="--seed"),
    Cli("sims.markov train", "sims.markov.__main__", ("train",), out=("--out", "nc"),
        args=("--scale", "quick", "--no-progress"), bad=("--threads", "0"),
        huge=("--scale", "quick", "--n-train", "10**11", "--batch-size", "3000"),
        work="sims.markov.train:train", extra=("torch",), corrupt=("--checkpoint", "ckpt.pt"),
        seed="--seed"),
    Cli("figures", "figures.__main__", args=("--only", "sam_entropy", "--quick"),
        bad=("--only", "no_such_figure"), work="figures.fig_sam_entropy:make",
        corrupt=(None, "sam_entropy/sam_entropy_quick.nc"), executor=True),
    Cli("figures report", "figures.__main__", ("report",), args=("--no-figures",),
        work="figures.report:build_report"),
    Cli("figures summaries", "figures.__main__", ("summaries",), bad=("--only", "no_such_source"),
        work="figures.report.summaries:write_summaries"),
    Cli("figures.report.reruns", "figures.report.reruns", out=("--results", "dir"),
        args=("--figs", "fig1", "--seeds", "1"), bad=("--figs", "fig9"),
        work="figures.report.reruns:run", extra=("torch",), seeds="--seeds"),
    Cli("figures.fig_sam_entropy", "figures.fig_sam_entropy", args=("--quick",),
        bad=("--results", "{file}/sub"), work="figures.fig_sam_entropy:make",
        corrupt=(None, "sam_entropy/sam_entropy_quick.nc"), executor=True),
    *[Cli(f"llm_validation {step}", "llm_validation.__main__", (step,), ("--run-dir", "dir"),
          bad=("--set", "no_such_key=1"),
          work="llm_validation.experiments.pipeline:stage_functions", extra=("llm",),
          stubs=LLM_INPUTS) for step in LLM_STEPS],
    Cli("llm_validation finetune", "llm_validation.__main__", ("finetune",), ("--run-dir", "dir"),
        bad=("--set", "no_such_key=1"), work="llm_validation.experiments.pipeline:run_finetune",
        extra=("llm",), stubs=LLM_INPUTS),
    Cli("llm_validation run-all", "llm_validation.__main__", ("run-all",), ("--run-dir", "dir"),
        bad=("--set", "no_such_key=1"), work="llm_validation.experiments.pipeline:run_all",
        extra=("llm",), stubs=LLM_INPUTS),
    Cli("llm_validation show-config", "llm_validation.__main__", ("show-config",), None,
        bad=("--set", "no_such_key=1"), extra=("llm",)),
    Cli("llm_validation models", "llm_validation.__main__", ("models",), None, extra=("llm",)),
    Cli("llm_validation convert", "llm_validation.__main__", ("convert",), None,
        args=("smollm2",),
        work="llm_validation.models.registry:resolve_model", extra=("llm",),
        stubs=("llm_validation.models.registry:check_model_spec",)),
    Cli("llm_validation corpus", "llm_validation.__main__", ("corpus",),
        args=("--n-train", "20", "--n-test", "2"), bad=("--n-train", "-1"),
        huge=("--n-train", "10000000000"), work="llm_validation.data.corpus:write_corpus",
        extra=("llm",), seed="--seed"),
    Cli("llm_validation confirm", "llm_validation.__main__", ("confirm",),
        bad=("--seeds", "x"), work="llm_validation.experiments.confirm:run_confirmation",
        extra=("llm",), seeds="--seeds", executor=True),
    Cli("llm_validation upsample", "llm_validation.__main__", ("upsample",),
        args=("--data", "d.json", "--proxy", "scratch", "--quiet"), bad=("--factor", "0"),
        work="llm_validation.experiments.upsample:run_upsample", extra=("llm",),
        stubs=("llm_validation.experiments.upsample:check_inputs",), seed="--seed"),
    Cli("llm_validation demo", "llm_validation.__main__", ("demo",), args=("--size", "tiny"),
        bad=("--size", "huge"), work="llm_validation.experiments.demo:run_demo", extra=("llm",)),
    *[Cli(name, module, prefix, args=("--size", "mini", "--stage", "preflight", "--no-emulate"),
          bad=("--deadline", "-1"), work="llm_validation.campaign.runner:run_campaign",
          extra=("llm",))
      for name, module, prefix in (
          ("llm_validation campaign", "llm_validation.__main__", ("campaign",)),
          ("llm_validation.campaign", "llm_validation.campaign.__main__", ()))],
]  # fmt: skip
BY_ID = {c.id: c for c in CLIS}


def _cases(case: str):
    """``pytest.param`` per CLI to which ``case`` applies."""
    applies = {
        "help": lambda c: True,
        "unknown_flag": lambda c: True,
        "bad_value": lambda c: bool(c.bad),
        "bad_env": lambda c: True,
        "out_is_a_file": lambda c: c.out is not None,
        "too_big": lambda c: c.huge is not None,
        "ctrl_c": lambda c: c.work is not None,
        "corrupt": lambda c: c.corrupt is not None,
        "seed": lambda c: c.seed is not None or c.seeds is not None,
        "empty": lambda c: True,
        "executor": lambda c: c.executor,
        "concurrent": lambda c: c.out is not None and c.work is not None,
        "relative": lambda c: c.out is not None and c.work is not None,
    }[case]
    return [pytest.param(c, id=c.id) for c in CLIS if applies(c)]


# --------------------------------------------------------------------------- helpers


def _main(cli: Cli):
    for extra in cli.extra:
        from sims.runtime.extras import is_available

        if not is_available(extra):
            pytest.skip(f"needs the `{extra}` extra")
    return importlib.import_module(cli.module).main


def _run(cli: Cli, argv, capsys) -> tuple[int, str, str]:
    """``main(argv)`` in-process: ``(exit status, stdout, stderr)``."""
    main = _main(cli)
    capsys.readouterr()
    try:
        code = main([*cli.prefix, *argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def _expand(args, tmp_path: Path) -> list[str]:
    afile = tmp_path / "afile"
    afile.write_text("not a result\n")
    out = []
    for a in args:
        if a.startswith("10**"):
            a = str(10 ** int(a[4:]))
        out.append(a.replace("{file}", str(afile)))
    return out


def _out_args(cli: Cli, target: Path) -> list[str]:
    if cli.out is None:
        return []
    flag, kind = cli.out
    return [flag, str(target.with_suffix(".nc") if kind == "nc" else target)]


def _isolate(cli: Cli, tmp_path: Path, monkeypatch) -> list[str]:
    """Results and outputs under ``tmp_path``; the common arguments of every case."""
    monkeypatch.chdir(tmp_path)
    args = []
    if cli.prefix == ("report",):  # the findings page reads the committed summaries only
        return args
    if cli.module.startswith("figures") or ("linear_attention" in cli.id and cli.prefix):
        args = ["--results", str(tmp_path / "results")]
        if cli.prefix == ("summaries",):  # it reduces existing results: an empty folder here
            (tmp_path / "results").mkdir(exist_ok=True)
            (tmp_path / "results" / "notes.txt").write_text("no result yet\n")
    return args


def _patch_work(cli: Cli, monkeypatch, action) -> None:
    """Replace the CLI's work function by ``action`` (a callable raising or failing)."""
    for stub in cli.stubs:
        module, _, attr = stub.partition(":")
        monkeypatch.setattr(importlib.import_module(module), attr, lambda *a, **k: None)
    module, _, attr = cli.work.partition(":")
    mod = importlib.import_module(module)
    if attr == "CLAIMS":  # theory: every claim's check
        from theory import load_all

        load_all()
        for name, c in list(mod.CLAIMS.items()):
            monkeypatch.setitem(mod.CLAIMS, name, dataclasses.replace(c, func=action))
        return
    if attr == "stage_functions":  # llm_validation pipeline steps: every stage
        monkeypatch.setattr(mod, attr, lambda: {s: action for s in (*LLM_STEPS, "finetune")})
        return
    monkeypatch.setattr(mod, attr, action)


def _never(*args, **kwargs):
    pytest.fail("the work started although the input is invalid")


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


_BAR = re.compile(r"\d+%\||\d+/\d+ \[")  # a tqdm progress-bar fragment


def _one_error_line(err: str) -> str:
    """The single line on stderr besides progress bars (which may precede it)."""
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip()]
    lines = [ln for ln in lines if not _BAR.search(ln) or "error:" in ln]
    assert "Traceback" not in err, err
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    return lines[0]


def _nothing_written(tmp_path: Path, before: set[Path]) -> None:
    new = sorted(p for p in tmp_path.rglob("*") if p not in before)
    assert not new, f"a refused run wrote {[str(p.relative_to(tmp_path)) for p in new]}"


def _snapshot(tmp_path: Path) -> set[Path]:
    return set(tmp_path.rglob("*"))


# --------------------------------------------------------------------------- discovery


@functools.cache
def _entry_points() -> frozenset[str]:
    """Modules of the package with a ``__main__`` guard or a top-level ``def main``."""
    found = set()
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text())
            has_main = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
            guard = any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)
                        for n in tree.body)  # fmt: skip
            if has_main or guard:
                rel = path.relative_to(REPO).with_suffix("")
                name = ".".join(rel.parts)
                # a package's `main` runs as `python -m pkg`, through its __main__.py
                found.add(name[: -len(".__init__")] + ".__main__"
                          if name.endswith(".__init__") else name)  # fmt: skip
    return frozenset(found)


def _figure_modules() -> list[str]:
    return sorted(m for m in _entry_points() if m.startswith("figures.fig"))


def test_every_entry_point_is_registered():
    """A new CLI must join :data:`CLIS` (figure modules are checked one by one below)."""
    registered = {c.module for c in CLIS} | {c.id for c in CLIS}  # id: a command kept by name
    missing = sorted(m for m in _entry_points() if m not in registered and m.startswith(
        tuple(f"{p}." for p in PACKAGES)) and not m.startswith("figures.fig"))  # fmt: skip
    assert not missing, f"register these CLIs in tests/test_cli_contract_all.py: {missing}"
    assert {"sims.sam_entropy", "theory.__main__", "figures.__main__"} <= _entry_points()
    assert len(_figure_modules()) >= 20


@pytest.mark.parametrize("module", _figure_modules())
def test_every_figure_module_keeps_the_contract(module, tmp_path, capsys):
    """Each figure's ``main`` refuses a regular file as ``--out`` in one line (figure_main)."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    mod = importlib.import_module(module)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        mod.main(["--out", str(afile), "--results", str(tmp_path / "r")])
    assert exc.value.code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"python -m {module}: error:")
    assert afile.read_text() == "x" and not (tmp_path / "r").exists()
    with pytest.raises(SystemExit) as exc:  # every figure takes --executor, checked at parsing
        mod.main(["--out", str(tmp_path / "o"), "--results", str(tmp_path / "r"),
                  "--executor", "dask-locale:2"])  # fmt: skip
    assert exc.value.code == 2
    assert "is not an executor" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "r").exists() and not (tmp_path / "o").exists()


def test_help_names_methods_as_the_flag_accepts_them(capsys):
    """``linear_attention --help`` named methods (sam_flow) in a spelling --optimizer rejected."""
    main = _main(BY_ID["sims.linear_attention"])
    from sims.linear_attention.__main__ import _train_parser
    from sims.linear_attention.experiment import METHOD_NAMES

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    named = text.split("Methods (--optimizer): ")[1].split(".")[0].split(", ")
    assert len(named) == len(METHOD_NAMES)
    for name in (*named, *METHOD_NAMES):  # the help's spelling and the library's
        assert _train_parser().parse_args(["--optimizer", name]).optimizer in named


# --------------------------------------------------------------------------- in-process cases


@pytest.mark.parametrize("cli", _cases("help"))
def test_help(cli, capsys):
    code, out, err = _run(cli, ["--help"], capsys)
    assert code == 0 and out.strip(), err
    flat = "".join(out.split())  # argparse wraps long paths at hyphens
    assert "".join(str(REPO).split()) not in flat, "help shows an absolute path of this checkout"


@pytest.mark.parametrize("cli", _cases("unknown_flag"))
def test_unknown_flag(cli, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = [*_expand(cli.args, tmp_path), *_out_args(cli, tmp_path / "out"), "--no-such-flag"]
    code, _, err = _run(cli, argv, capsys)
    assert code == 2
    assert "--no-such-flag" in _one_error_line(err)


@pytest.mark.parametrize("cli", _cases("bad_value"))
def test_bad_value(cli, tmp_path, monkeypatch, capsys):
    common = _isolate(cli, tmp_path, monkeypatch)
    argv = [*common, *_expand(cli.args, tmp_path), *_expand(cli.bad, tmp_path)]
    before = _snapshot(tmp_path)
    code, _, err = _run(cli, [*argv, *_out_args(cli, tmp_path / "out")], capsys)
    assert code == 2
    _one_error_line(err)
    _nothing_written(tmp_path, before)


@pytest.mark.parametrize("cli", _cases("bad_env"))
@pytest.mark.parametrize("value", ["0", "two"])
def test_bad_environment_variable(cli, value, tmp_path, monkeypatch, capsys):
    common = _isolate(cli, tmp_path, monkeypatch)
    if cli.work:
        _patch_work(cli, monkeypatch, _never)
    monkeypatch.setenv("SBT_WORKERS", value)
    argv = [*common, *_expand(cli.args, tmp_path), *_out_args(cli, tmp_path / "out")]
    before = _snapshot(tmp_path)
    code, _, err = _run(cli, argv, capsys)
    assert code == 2
    assert f"SBT_WORKERS={value!r}" in _one_error_line(err)
    _nothing_written(tmp_path, before)


@pytest.mark.parametrize("cli", _cases("out_is_a_file"))
def test_existing_file_as_out_is_refused(cli, tmp_path, monkeypatch, capsys):
    common = _isolate(cli, tmp_path, monkeypatch)
    if cli.work:
        _patch_work(cli, monkeypatch, _never)
    flag, kind = cli.out
    target = tmp_path / ("notes.nc" if kind == "nc" else "notes")
    target.write_text("my notes\n")
    argv = [*common, *_expand(cli.args, tmp_path), flag, str(target)]
    before = _snapshot(tmp_path)
    code, _, err = _run(cli, argv, capsys)
    assert code == 2
    assert flag in _one_error_line(err)
    assert target.read_text() == "my notes\n"
    _nothing_written(tmp_path, before)


@pytest.mark.parametrize("cli", _cases("too_big"))
def test_too_big_is_refused_before_allocating(cli, tmp_path, monkeypatch, capsys):
    common = _isolate(cli, tmp_path, monkeypatch)
    _patch_work(cli, monkeypatch, _never)
    argv = [*common, *_expand(cli.args, tmp_path), *_expand(cli.huge, tmp_path)]
    before = _snapshot(tmp_path)
    t0 = time.perf_counter()
    code, _, err = _run(cli, [*argv, *_out_args(cli, tmp_path / "out")], capsys)
    assert code == 2
    line = _one_error_line(err)
    assert "memory" in line and "this machine has" in line, line
    assert time.perf_counter() - t0 < 10  # refused from the sizes, nothing allocated
    _nothing_written(tmp_path, before)


@pytest.mark.parametrize("cli", _cases("ctrl_c"))
def test_ctrl_c_is_one_line_and_exit_130(cli, tmp_path, monkeypatch, capsys):
    common = _isolate(cli, tmp_path, monkeypatch)
    _patch_work(cli, monkeypatch, _interrupt)
    argv = [*common, *_expand(cli.args, tmp_path), *_out_args(cli, tmp_path / "out")]
    code, _, err = _run(cli, argv, capsys)
    assert code == 130
    assert "interrupted" in _one_error_line(err)
    empty = [p for p in tmp_path.rglob("*") if p.is_dir() and not any(p.iterdir())]
    assert not empty, f"Ctrl-C left empty folders {empty}"


@pytest.mark.parametrize("cli", _cases("corrupt"))
def test_corrupt_saved_file_is_named(cli, tmp_path, monkeypatch, capsys):
    common = _isolate(cli, tmp_path, monkeypatch)
    flag, rel = cli.corrupt
    path = (tmp_path / "results" / rel) if flag is None else tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89HDF\r\n\x1a\n truncated")
    if flag is None:  # the reader must see the file: do not replace the work function
        argv = [*common, *_expand(cli.args, tmp_path)]
    else:
        _patch_work(cli, monkeypatch, _never)
        argv = [*common, *_expand(cli.args, tmp_path), flag, str(path)]
    code, _, err = _run(cli, [*argv, *_out_args(cli, tmp_path / "out")], capsys)
    assert code == 2
    line = _one_error_line(err)
    assert str(path) in line and ("delete it" in line), line


# --------------------------------------------------------------------------- issue 31's classes


def _refused(cli: Cli, argv, tmp_path, capsys, *, work=True) -> str:
    """``main(argv)`` exits 2 with one line, nothing written: that line."""
    before = _snapshot(tmp_path)
    code, _, err = _run(cli, argv, capsys)
    assert code == 2, err
    line = _one_error_line(err)
    _nothing_written(tmp_path, before)
    return line


@pytest.mark.parametrize("cli", _cases("seed"))
def test_negative_repeated_or_empty_seeds_are_refused(cli, tmp_path, monkeypatch, capsys):
    """numpy refuses negative seeds (a traceback after the work started, issue 31 row 2)."""
    common = _isolate(cli, tmp_path, monkeypatch)
    if cli.work:
        _patch_work(cli, monkeypatch, _never)
    base = [*common, *_expand(cli.args, tmp_path), *_out_args(cli, tmp_path / "out")]
    cases = [(cli.seed, "-1", "non-negative"), (cli.seed, "", "empty")] if cli.seed else []
    if cli.seeds:
        cases += [(cli.seeds, v, why) for v, why in (("-1", "non-negative"), ("0,-2", "non-neg"),
                                                     ("1,1", "twice"), ("", "empty"),
                                                     (",", "expected seeds"))]  # fmt: skip
    for flag, value, why in cases:
        line = _refused(cli, [*base, flag, value], tmp_path, capsys)
        assert flag in line and why in line, (value, line)


def _empty_flag(cli: Cli) -> str:
    return cli.out[0] if cli.out else ("--config" if "llm_validation" in cli.id else "--only")


@pytest.mark.parametrize("cli", _cases("empty"))
def test_an_empty_value_is_refused(cli, tmp_path, monkeypatch, capsys):
    """``--out ""`` wrote into the current folder (issue 31 row 8); "" meant "all" elsewhere."""
    common = _isolate(cli, tmp_path, monkeypatch)
    if cli.work:
        _patch_work(cli, monkeypatch, _never)
    flag = _empty_flag(cli)
    for form in ([flag, ""], [f"{flag}="]):
        argv = [*common, *_expand(cli.args, tmp_path), *form]
        if cli.id == "llm_validation models":
            argv = ["--no-such", ""]  # models takes no value: any empty one is refused first
        line = _refused(cli, argv, tmp_path, capsys)
        assert "an empty value" in line, line


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_slurm(tmp_path, monkeypatch):
    """A PATH without SLURM's commands (this machine has none anyway)."""
    empty = tmp_path.parent / f"{tmp_path.name}-nobin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))
    for var in [v for v in os.environ if v.startswith("SBT_SLURM_")]:
        monkeypatch.delenv(var)


@pytest.mark.parametrize("cli", _cases("executor"))
def test_unusable_executors_are_refused_before_any_work(cli, tmp_path, monkeypatch, capsys,
                                                        no_slurm):  # fmt: skip
    """SLURM missing; no Dask scheduler at the address (issue 31 rows 4-5): checked at parsing."""
    pytest.importorskip("distributed", reason="needs the `cluster` extra")
    from sims.runtime import executors

    common = _isolate(cli, tmp_path, monkeypatch)
    _patch_work(cli, monkeypatch, _never)
    monkeypatch.setattr(executors, "DASK_TIMEOUT", 0.5)
    base = [*common, *_expand(cli.args, tmp_path), *_out_args(cli, tmp_path / "out")]
    line = _refused(cli, [*base, "--executor", "slurm"], tmp_path, capsys)
    assert "sbatch" in line and "SBT_SLURM_CLUSTER=local" in line, line
    address = f"127.0.0.1:{_free_port()}"
    line = _refused(cli, [*base, "--executor", f"dask://{address}"], tmp_path, capsys)
    assert f"dask://{address}: no Dask scheduler answered within 0.5 s" in line, line


@pytest.mark.parametrize("cli", _cases("bad_env"))
def test_an_unusable_executor_in_the_environment_is_refused(cli, tmp_path, monkeypatch, capsys,
                                                            no_slurm):  # fmt: skip
    """``SBT_EXECUTOR=slurm`` without SLURM: every CLI checks it (the variable is registered)."""
    pytest.importorskip("submitit", reason="needs the `cluster` extra")
    common = _isolate(cli, tmp_path, monkeypatch)
    if cli.work:
        _patch_work(cli, monkeypatch, _never)
    monkeypatch.setenv("SBT_EXECUTOR", "slurm")
    argv = [*common, *_expand(cli.args, tmp_path), *_out_args(cli, tmp_path / "out")]
    line = _refused(cli, argv, tmp_path, capsys)
    assert "sbatch" in line, line


@pytest.fixture(scope="module")
def other_process():
    """A live process of this machine that is not this one (the holder of a planted lock)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


def _plant_lock(target: Path, pid: int) -> Path:
    import json
    import platform

    from sims.runtime.io import lock_path, process_start

    lock = lock_path(target)
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": pid, "host": platform.node(), "start": process_start(pid),
                                "since": "2026-01-01T00:00:00+00:00",
                                "command": "python -m the-first-run"}))  # fmt: skip
    return lock


@pytest.mark.parametrize("cli", _cases("concurrent"))
def test_a_second_run_into_the_same_output_is_refused(cli, tmp_path, monkeypatch, capsys,
                                                      other_process):  # fmt: skip
    """A live lock: one line naming its PID, exit 2, nothing done; a dead one is taken over."""
    monkeypatch.setenv("SBT_LOCK_DIR", str(tmp_path.parent / f"{tmp_path.name}-locks"))
    common = _isolate(cli, tmp_path, monkeypatch)
    out = _out_args(cli, tmp_path / "out")
    lock = _plant_lock(Path(out[1]), other_process.pid)
    _patch_work(cli, monkeypatch, _never)
    argv = [*common, *_expand(cli.args, tmp_path), *out]
    line = _refused(cli, argv, tmp_path, capsys)
    assert f"being written by another run (PID {other_process.pid}" in line, line
    assert "python -m the-first-run" in line and lock.exists()  # the first run's lock is kept
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    _plant_lock(Path(out[1]), int(dead.stdout))  # its process is gone: a stale lock
    _patch_work(cli, monkeypatch, _interrupt)
    code, _, err = _run(cli, argv, capsys)
    assert code == 130, err  # got past the lock to the work
    assert not lock.exists()  # released when the command ended


@pytest.mark.parametrize("cli", _cases("relative"))
def test_relative_outputs_are_taken_from_the_current_folder(cli, tmp_path, monkeypatch, capsys):
    """A relative --out resolves once, from the current folder (the demo joined it twice)."""
    from sims.runtime.io import held_locks

    monkeypatch.setenv("SBT_LOCK_DIR", str(tmp_path.parent / f"{tmp_path.name}-locks"))
    common = _isolate(cli, tmp_path, monkeypatch)
    flag, kind = cli.out
    rel = "rel_out.nc" if kind == "nc" else "rel_out"
    seen: list = []

    def record(*args, **kwargs):
        seen.append(held_locks())
        seen.extend(_strings([args, kwargs]))
        raise KeyboardInterrupt

    _patch_work(cli, monkeypatch, record)
    code, _, err = _run(cli, [*common, *_expand(cli.args, tmp_path), flag, rel], capsys)
    assert code == 130, err
    assert (tmp_path / rel).resolve() in seen[0]  # the lock: the folder the user meant
    for text in seen[1:]:
        if "rel_out" in text:
            path = (tmp_path / text).resolve()
            assert str(path).count("rel_out") == 1 and path.is_relative_to(tmp_path), text


def _strings(obj, depth: int = 0) -> list[str]:
    """Every ``str``/``Path`` inside ``obj`` (containers and dataclasses, a few levels deep)."""
    if depth > 4:
        return []
    if isinstance(obj, str | os.PathLike):
        return [str(obj)]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v, depth + 1)]
    if isinstance(obj, list | tuple | set):
        return [s for v in obj for s in _strings(v, depth + 1)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
        return [s for v in fields for s in _strings(v, depth + 1)]
    return []


# --------------------------------------------------------------------------- benchmark scripts


def _benchmarks() -> list[Path]:
    return sorted((REPO / "benchmarks").glob("*.py"))


def _benchmark_flags(path: Path) -> list[tuple[str, str]]:
    """``(flag, type name)`` of each ``add_argument`` with a ``type=`` in the script."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            kinds = [k.value for k in node.keywords if k.arg == "type"]
            if node.args and isinstance(node.args[0], ast.Constant) and kinds:
                found.append((node.args[0].value, ast.unparse(kinds[0])))
    return found


def test_benchmark_counts_are_typed():
    """A bare ``type=int``/``float`` took ``--repeats -1`` and ``--batch-size 0`` (row 9)."""
    ok = {"positive_int", "non_negative_int", "positive_float", "Path", "str"}
    bare = [(p.name, flag, t) for p in _benchmarks() for flag, t in _benchmark_flags(p)
            if t not in ok]  # fmt: skip
    assert not bare, f"use sims.runtime.cli's positive_int / non_negative_int / positive_float: " \
        f"{bare}"
    for p in _benchmarks():
        assert "ArgumentParser(" in p.read_text() and "argparse.ArgumentParser(" not in (
            p.read_text()), f"{p.name}: parse with sims.runtime.cli.ArgumentParser"


def _load_benchmark(path: Path):
    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError as exc:  # an extra of the benchmarked module is missing
        pytest.skip(f"{path.name}: {exc}")
    return mod


@pytest.mark.parametrize("path", _benchmarks(), ids=lambda p: p.stem)
def test_every_benchmark_refuses_bad_counts_and_empty_values(path, tmp_path, monkeypatch,
                                                             capsys):  # fmt: skip
    """Each typed flag gets 0 / -1 (counts) or "" and exits 2 with one line, nothing run."""
    monkeypatch.chdir(tmp_path)
    main = _load_benchmark(path).main
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip()
    flags = _benchmark_flags(path)
    assert flags or path.stem == "compare_davda54_sam"
    for flag, kind in flags:
        values = {"positive_int": ("0", "-1", "two"), "non_negative_int": ("-1",),
                  "positive_float": ("0", "-1", "nan")}.get(kind, ())  # fmt: skip
        for value in (*values, ""):
            with pytest.raises(SystemExit) as exc:
                main([flag, value])
            assert exc.value.code == 2, (flag, value)
            line = _one_error_line(capsys.readouterr().err)
            assert flag in line, line
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------- size estimates


def _sam_entropy_estimate(argv):
    import sims.sam_entropy as se

    return se.estimate(se.build_parser().parse_args(argv)).memory


def _sosd_toy_estimate(argv):
    import sims.sosd.toy as st

    a = st.build_parser().parse_args(argv)
    return st.estimate(st.ToyConfig(n=a.n, d=a.d, steps=a.steps)).memory


def _markov_ode_estimate(argv):
    import sims.markov.__main__ as mk
    from sims.markov.tensor_dynamics import FlowConfig

    a = mk.build_parser().parse_args(argv)
    return mk.ode_estimate(FlowConfig(T=a.T, t_max=a.t_max)).memory


#: ``(CLI, argv with {n}, small n, large n, estimate(argv) -> bytes)``: runs of two sizes whose
#: measured memory difference the estimates must bound (and not overstate 20-fold).
SIZES = [
    ("sims.sam_entropy", ["--no-cross-check", "--no-write", "--json", "--dim", "{n}"], 50, 250,
     _sam_entropy_estimate),
    ("sims.sosd_toy", ["--d", "8", "--n", "4", "--steps", "{n}", "--out", "{tmp}"], 100, 1000,
     _sosd_toy_estimate),
    ("sims.markov ode", ["ode", "--t-max", "10", "--T", "{n}"], 20, 200, _markov_ode_estimate),
]  # fmt: skip


@pytest.mark.parametrize(("cli_id", "argv", "small", "large", "estimate"), SIZES,
                         ids=[s[0] for s in SIZES])  # fmt: skip
def test_memory_estimates_bound_the_measured_growth(cli_id, argv, small, large, estimate,
                                                    tmp_path, capsys):  # fmt: skip
    """Python/numpy memory (tracemalloc) grows by no more than the estimate between two sizes."""
    import tracemalloc

    main = _main(BY_ID[cli_id])

    def args(n):
        return [a.format(n=n, tmp=tmp_path / str(n)) for a in argv]

    def peak(n):
        tracemalloc.start()
        try:
            main(args(n))
        finally:
            top = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return top

    main(args(small))  # imports and caches first
    measured = peak(large) - peak(small)
    capsys.readouterr()
    estimated = estimate(args(large)) - estimate(args(small))
    assert measured > 0
    assert measured <= estimated <= 20 * measured, (measured, estimated)


# --------------------------------------------------------------------------- real signals


def _sigint_when(cmd: list[str], marker: str, tmp_path: Path, timeout: float = 90.0,
                 before_signal=None):  # fmt: skip
    """Start ``cmd``, send SIGINT once ``marker`` appears on its stderr; ``(code, stderr)``.

    ``before_signal()`` runs once the marker appeared, before the signal.
    """
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONFAULTHANDLER="1")
    env.pop("SBT_WORKERS", None)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(
        lambda: proc.stderr.read1(4096), b"")), daemon=True)  # fmt: skip
    reader.start()
    deadline = time.monotonic() + timeout
    while marker.encode() not in b"".join(chunks):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{marker!r} never appeared on stderr: {b''.join(chunks).decode()!r}")
        time.sleep(0.05)
    if before_signal is not None:
        before_signal()
    proc.send_signal(signal.SIGINT)
    proc.stdout.read()
    code = proc.wait(timeout=60)
    reader.join(timeout=10)
    return code, b"".join(chunks).decode(errors="replace")


def _check_interrupted(code: int, err: str, prog: str) -> str:
    assert code == 130, f"exit {code} (-11 is a segmentation fault):\n{err[-3000:]}"
    assert "Traceback" not in err and "Fatal Python error" not in err, err[-3000:]
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if "error" in ln]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: interrupted"), err[-3000:]
    assert err.rstrip().endswith(lines[0].rstrip())
    return lines[0]


def test_sigint_core_cli(tmp_path):
    """Also: the same command started again meanwhile is refused (issue 31 row 12)."""
    cmd = [sys.executable, "-m", "sims.sam_entropy", "--sweep", "--dim", "5000", "--out", "res"]
    second = []

    def again():
        env = dict(os.environ, PYTHONPATH=str(REPO))
        second.append(subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True,
                                     text=True, timeout=60))  # fmt: skip

    code, err = _sigint_when(cmd, "sweep:", tmp_path, before_signal=again)  # ~10 s sweep
    refused = second[0]
    assert refused.returncode == 2, refused.stderr
    line = _one_error_line(refused.stderr)
    assert "--out 'res' is being written by another run (PID" in line and "--sweep" in line
    line = _check_interrupted(code, err, "python -m sims.sam_entropy")
    assert "nothing" in line or "before any result" in line
    assert not (tmp_path / "res").exists()  # a refused or interrupted run leaves no folder


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "marker", "extra"),
    [
        # at "3/4" JAX compiles the training scan: an interrupt then crashed at exit (issue 24)
        (["sims.linear_attention", "--runs", "2", "--P", "200", "--steps", "3001",
          "--paper-steps", "1001", "--d", "3", "--heads", "3", "--out", "r.nc"], "3/4", "jax"),
        (["sims.markov", "train", "--scale", "quick", "--steps", "100000", "--checkpoint",
          "c.pt"], "train", "torch"),
    ],
)  # fmt: skip
def test_sigint_jax_and_torch_clis(argv, marker, extra, tmp_path):
    from sims.runtime.extras import is_available

    if not is_available(extra):
        pytest.skip(f"needs the `{extra}` extra")
    code, err = _sigint_when([sys.executable, "-m", *argv], marker, tmp_path)
    prog = "python -m " + argv[0]
    line = _check_interrupted(code, err, prog)
    if "--checkpoint" in argv:
        assert "c.pt" in line
    assert not list(tmp_path.glob("*.nc"))


# --------------------------------------------------------------------------- README vs --help


def _readme_commands() -> list[tuple[str, tuple[str, ...], str]]:
    """``(module, subcommand, row)`` for each command of the README's "What you can run" table.

    A row's first cell holds one or more commands (``python -m MOD [SUB] ...``, ``/``-separated;
    a bare ``SUB ...`` continues the previous module); ``{a,b}`` and ``[a|b]`` list subcommands;
    ``<step>`` stands for the subcommands named in the row's description.
    """
    text = (REPO / "README.md").read_text()
    table = text.split("## What you can run", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in table.splitlines() if r.startswith("| `python")]
    found = []
    for row in rows:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        module = None
        for cmd in re.findall(r"`([^`]+)`", cells[0]):
            words = cmd.replace("\\|", "|").split()
            if words[0] == "python" and words[1] == "-m":
                module, rest = words[2], words[3:]
            elif words[0] == "python":  # python benchmarks/<name>.py: the benchmark tests
                continue
            else:
                rest = words
            head = rest[0] if rest else ""
            if head.startswith(("{", "[")):
                subs = [(), *[(s,) for s in re.split(r"[,|]", head.strip("{}[]"))]]
            elif head == "<step>":
                named = {w.split()[0] for w in re.findall(r"`([^`]+)`", cells[2])}
                known = _subcommands().get(module, set())  # prose names other things too
                subs = [(s,) for s in sorted(named & known)]
            elif head and not head.startswith("-"):
                subs = [(head,)]
            else:
                subs = [()]
            found += [(module, sub, row) for sub in subs]
    return found


@functools.cache
def _subcommands() -> dict[str, set[str]]:
    """The subcommands each CLI has, from its own code: each must be in the README's table."""
    from sims.linear_attention.__main__ import COMMANDS as la
    from sims.markov.__main__ import build_parser

    markov = next(a for a in build_parser()._actions if a.choices and "ode" in a.choices)
    subs = {"sims.linear_attention": set(la), "sims.markov": set(markov.choices),
            "figures": {"report", "summaries"}}  # fmt: skip
    try:
        from llm_validation.__main__ import command_names

        subs["llm_validation"] = set(command_names())
    except ImportError:
        pass
    return subs


_MODULES = {"llm_validation": "llm_validation.__main__", "theory": "theory.__main__",
            "figures": "figures.__main__", "sims.markov": "sims.markov.__main__",
            "sims.linear_attention": "sims.linear_attention.__main__",
            "sims.sosd_toy": "sims.sosd.toy"}  # fmt: skip


def test_the_sosd_toy_command_kept_its_name():
    """``python -m sims.sosd_toy`` runs :mod:`sims.sosd.toy` (its module moved in issue 39)."""
    out = subprocess.run([sys.executable, "-m", "sims.sosd_toy", "--help"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m sims.sosd_toy") and "--steps" in out.stdout


def test_readme_lists_every_subcommand():
    """The README named ``sims.linear_attention {train,figure1}``: no ``train``, two missing."""
    listed = {(m, s[0]) for m, s, _ in _readme_commands() if s}
    for module, subs in _subcommands().items():
        missing = sorted(s for s in subs if (module, s) not in listed)
        assert not missing, f"README's command table lacks `python -m {module}` {missing}"


@pytest.mark.parametrize(("module", "sub", "row"),
                         [pytest.param(*c, id=" ".join([c[0], *c[1]])) for c in _readme_commands()])
def test_readme_command_agrees_with_its_help(module, sub, row, capsys):
    """Each README command runs its ``--help``; each flag its row names is in that help."""
    cli = Cli(module, _MODULES.get(module, module), sub,
              extra=("llm",) if module.startswith("llm") else ())  # fmt: skip
    if module == "sims.linear_attention":
        cli = dataclasses.replace(cli, extra=("jax",))
    known = _subcommands().get(module)
    if sub and known is not None:
        assert sub[0] in known, f"README: `python -m {module} {sub[0]}` is not a command"
    code, out, err = _run(cli, ["--help"], capsys)
    assert code == 0, err
    helps = out
    if module == "llm_validation" and not sub:
        return
    flags = set(re.findall(r"`[^`]*?(--[a-z][a-z0-9-]*)", row))
    # flags of the row's other commands, or of the whole package (documented elsewhere)
    siblings = [s for m, s, r in _readme_commands() if m == module and r == row and s != sub]
    for other in siblings:
        helps += _run(dataclasses.replace(cli, prefix=other), ["--help"], capsys)[1]
    missing = sorted(f for f in flags if f not in helps)
    assert not missing, f"README row of `python -m {module} {' '.join(sub)}` names {missing}, " \
        "which no --help of its commands shows"


def test_an_executor_without_effect_is_noted(tmp_path, monkeypatch, capsys):
    """``--executor`` on a figure that runs in one process was silently ignored (row 13)."""
    import concurrent.futures as cf

    import figures.fig_sam_entropy as fig
    from figures.__main__ import main
    from sims.runtime.parallel import pmap

    monkeypatch.chdir(tmp_path)
    argv = ["--only", "sam_entropy", "--quick", "--out", "o", "--results", "r",
            "--executor", "processes"]  # fmt: skip
    monkeypatch.setattr(fig, "make", lambda *a, **k: [])
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "[sam_entropy] note: --executor processes had no effect: figure sam_entropy ran in " \
        "this process" in err
    with cf.ThreadPoolExecutor(2) as pool:  # a figure whose sweep goes to the executor: no note
        monkeypatch.setattr(fig, "make", lambda *a, **k: pmap(abs, [-1, -2], executor=pool) and [])
        assert main(argv) == 0
    assert "no effect" not in capsys.readouterr().err
    monkeypatch.setattr(fig, "make", lambda *a, **k: [])
    assert main(argv[:-2]) == 0  # no --executor: no note either
    assert "no effect" not in capsys.readouterr().err
