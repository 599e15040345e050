"""The shared CLI contract: one-line errors with exit 2, Ctrl-C with exit 130."""

import pytest

from sims.cli import ArgumentParser, UsageError, run_cli
from sims.extras import MissingExtraError
from sims.parallel import SweepInterrupted


def test_parser_errors_are_one_line(capsys):
    p = ArgumentParser(prog="demo")
    p.add_argument("--n", type=int, help="a count")
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--n", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == "demo: error: argument --n: invalid int value: 'x' (see --help)\n"


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (UsageError("MARKOV_SCALE='bogus' must be one of quick, cpu, paper"), 2,
         "demo: error: MARKOV_SCALE='bogus' must be one of quick, cpu, paper"),
        (MissingExtraError("x needs the `torch` extra"), 2,
         "demo: error: x needs the `torch` extra"),
        (SweepInterrupted("interrupted: 3 of 8 jobs finished"), 130,
         "demo: error: interrupted: 3 of 8 jobs finished"),
        (KeyboardInterrupt(), 130, "demo: error: interrupted"),
    ],
)  # fmt: skip
def test_run_cli_turns_user_errors_and_ctrl_c_into_one_line(error, code, line, capsys):
    def main(argv):
        raise error

    with pytest.raises(SystemExit) as exc:
        run_cli(main, prog="demo")
    assert exc.value.code == code
    assert capsys.readouterr().err == line + "\n"


def test_run_cli_lets_bugs_through():
    def main(argv):
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        run_cli(main, prog="demo")
    assert run_cli(lambda argv: 0, prog="demo") == 0
