"""The report CLI: table, Markdown + JSON with provenance, --claim, --list, exit codes, --out."""

from __future__ import annotations

import json

import pytest
import sympy as sp

from theory import __main__ as cli
from theory import report
from theory.verify import CLAIMS, CheckResult, claim

ERRATUM = "printed statement refuted; corrected form verified"


def test_single_claim_writes_markdown_and_json(tmp_path, capsys):
    rc = cli.main(["--claim", "thm44_I1_I2_closed_forms", "--claim", "lemma_b5_as_printed",
                   "--claim", "lemma_b5_corrected", "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "thm44_I1_I2_closed_forms" in out and "refuted" in out
    md = (tmp_path / "report.md").read_text()
    assert "## Errata" in md and "lemma_b5_corrected" in md
    assert "**Residual as printed:**" in md
    data = json.loads((tmp_path / "report.json").read_text())
    # lemma_b5_as_printed is a typo (the square belongs to s(t)): an erratum, not a refutation
    assert data["summary"] == {"verified": 1, "erratum (typo in the printed formula)": 1,
                               ERRATUM: 1}
    assert "### Typos in printed formulas" in md and "generality" in out
    assert all(c["generality"] for c in data["claims"])
    assert data["meta"]["status"] == "success" and "packages" in data["meta"]
    names = [c["name"] for c in data["claims"]]
    assert names == ["thm44_I1_I2_closed_forms", "lemma_b5_as_printed", "lemma_b5_corrected"]
    corrected = data["claims"][2]
    # the printed form's residual is a number ≠ 0, the corrected one is 0
    assert corrected["residual"] == "0" and abs(float(corrected["printed_residual"])) > 1e-3
    assert corrected["sizes"]


@pytest.fixture
def fake_claims():
    """Three registered claims in the old and new styles; removed afterwards."""

    @claim("_tmp_old_erratum", "ref A", "old-style erratum check", erratum=True)
    def _a() -> CheckResult:  # legacy convention: residual = printed form's residual
        return CheckResult(True, sp.Integer(14), "cond", "symbolic", "single sum drops terms")

    @claim("_tmp_new_erratum", "ref B", "new-style erratum", erratum=True, sizes="d = 2")
    def _b() -> CheckResult:
        return CheckResult(True, 0, "cond", "symbolic", "detail", printed_residual=sp.Integer(3))

    @claim("_tmp_caveat", "ref C", "an approximation", approximation=True)
    def _c() -> CheckResult:
        return CheckResult(True, sp.Rational(1, 3), "cond", "symbolic", "detail",
                           sizes="all d", caveat="the dropped term is as large as a kept one")

    yield ["_tmp_old_erratum", "_tmp_new_erratum", "_tmp_caveat"]
    for n in ("_tmp_old_erratum", "_tmp_new_erratum", "_tmp_caveat"):
        CLAIMS.pop(n, None)


def test_errata_and_caveats_are_visible(fake_claims):
    rows = report.run_claims(fake_claims)
    old, new, cav = rows
    assert old.verdict == new.verdict == ERRATUM
    assert (old.printed_residual, old.residual) == ("14", "0")  # legacy: read as printed
    assert (new.printed_residual, new.residual) == ("3", "0")
    assert old.sizes == "" and new.sizes == "d = 2" and cav.sizes == "all d"
    assert cav.verdict.startswith("verified under an approximation whose dropped term")
    text = report.format_table(rows)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["claim", "paper", "reference"]
    assert "sizes" in lines[0] and "method" in lines[0]
    old_line = next(x for x in lines if x.startswith("_tmp_old_erratum"))
    assert "printed 14;" in old_line and "—" in old_line  # no sizes given: rendered as —
    # the wrapped verdict cell keeps every word
    assert "printed statement refuted;" in text and "corrected form verified" in text
    md = report.to_markdown(rows)
    assert "## Approximations whose dropped term is not small" in md
    assert "**Residual as printed:** 3; **corrected:** 0" in md
    payload = report.to_payload(rows)
    assert payload["summary"][ERRATUM] == 2
    assert payload["claims"][2]["caveat"].startswith("the dropped term")


def test_list_and_unknown(capsys):
    assert cli.main(["--list"]) == 0
    assert "lemma41_as_printed" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        cli.main(["--claim", "lemma41_as_printd", "--no-write"])
    assert exc.value.code == 2 and "Did you mean" in capsys.readouterr().err


def test_help_exits_cleanly(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0


@pytest.mark.parametrize("kind", ["proc", "existing_file", "under_a_file"])
def test_bad_out_fails_before_any_check(tmp_path, capsys, monkeypatch, kind):
    def boom(*a, **k):
        raise AssertionError("checks ran before --out was validated")

    monkeypatch.setattr(cli, "run_claims", boom)
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = {"proc": "/proc/x", "existing_file": str(afile), "under_a_file": str(afile / "sub")}
    with pytest.raises(SystemExit) as exc:
        cli.main(["--claim", "thm44_step1_monotone", "--out", out[kind]])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert len(err) == 1 and err[0].startswith("python -m theory: error: `--out`")


def test_crashing_check_gives_nonzero_exit(tmp_path, capsys):
    @claim("_tmp_crashing_check", "test", "raises on purpose")
    def _boom() -> CheckResult:
        raise RuntimeError("boom")

    try:
        rc = cli.main(["--claim", "_tmp_crashing_check", "--out", str(tmp_path)])
        assert rc == 1
        rows = report.run_claims(["_tmp_crashing_check"])
        assert rows[0].verdict == report.ERROR and "boom" in rows[0].error
        data = json.loads((tmp_path / "report.json").read_text())
        assert data["meta"]["status"] == "failed"
    finally:
        CLAIMS.pop("_tmp_crashing_check", None)
    capsys.readouterr()


def test_table_values_for_a_real_claim():
    rows = report.run_claims(["thm44_step1_monotone", "thm_b3_gamma_statement_as_printed"])
    assert rows[0].verdict == "verified" and rows[0].residual == "0"
    # the table rounds to 3 significant digits: 1.887 -> "1.89", within half a unit (0.005)
    assert rows[1].verdict == "refuted"
    assert abs(float(rows[1].residual) - (17**0.5 - 5**0.5)) <= 0.005
    assert rows[1].sizes == "counterexample at d = 2"
    text = report.format_table(rows)
    assert "counterexample at d = 2" in text and "1.89" in text


def test_any_residual_type_renders():
    # regression: a dict residual (a trace-algebra normal form) crashed the whole table
    @claim("_tmp_dict_residual", "ref", "stmt")
    def _d() -> CheckResult:
        return CheckResult(False, {"key": 1}, "cond", "symbolic")

    try:
        row = report.run_claims(["_tmp_dict_residual"])[0]
        assert row.verdict == "refuted" and row.residual == "{key: 1}"  # sympify'd dict
        expr = sum(sp.Symbol(f"x{i}") ** i for i in range(1, 12))  # prints as ~60 characters
        long = report._fmt_residual(expr, width=20)
        assert len(str(expr)) > 20 and len(long) == 20 and long.endswith("...")
    finally:
        CLAIMS.pop("_tmp_dict_residual", None)


def test_progress_goes_to_stderr_claim_by_claim(capsys):
    rc = cli.main(["--claim", "thm44_step1_monotone", "--claim", "thm44_I1_I2_closed_forms",
                   "--no-write"])  # fmt: skip
    captured = capsys.readouterr()
    assert rc == 0 and "theory:" not in captured.out
    err = captured.err
    assert "theory:" in err and "/2 [" in err  # a bar over the 2 claims, refreshed per claim
    assert "thm44_step1_monotone" in err and "thm44_I1_I2_closed_forms" in err
    assert cli.main(["--claim", "thm44_step1_monotone", "--no-write", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("mate_verdict", ["not checkable", report.ERROR, "refuted",
                                          "verified under an approximation"])
def test_a_typo_row_is_refuted_unless_its_companion_verifies_the_correction(mate_verdict):
    """A typo stays an erratum only while its corrected companion is verified (or an erratum)."""
    def row(name, verdict, corrected_by=""):
        return report.Row(name, "ref", "stmt", verdict, "0", 0.0, "m", "", "", erratum=False,
                          approximation=False, module="x", corrected_by=corrected_by,
                          why="a typo")

    typo = "erratum (typo in the printed formula)"
    for ok in ("verified", ERRATUM):
        out = report._check_companions([row("t", typo, "c"), row("c", ok)])
        assert out[0].verdict == typo
    out = report._check_companions([row("t", typo, "c"), row("c", mate_verdict)])
    assert out[0].verdict == "refuted" and f"c is '{mate_verdict}'" in out[0].why
    assert out[1].verdict == mate_verdict
    # a companion that was not run leaves the typo as it is
    assert report._check_companions([row("t", typo, "c")])[0].verdict == typo


def test_a_claim_run_never_replaces_the_full_report(tmp_path, monkeypatch, capsys):
    """``--claim X`` without --out writes results/theory/claims/X/, not over report.md."""
    monkeypatch.chdir(tmp_path)
    full = tmp_path / "results" / "theory"
    full.mkdir(parents=True)
    (full / "report.md").write_text("the full report\n")
    assert cli.main(["--claim", "thm44_I1_I2_closed_forms", "--no-progress"]) == 0
    assert (full / "report.md").read_text() == "the full report\n"
    one = full / "claims" / "thm44_I1_I2_closed_forms"
    assert json.loads((one / "report.json").read_text())["claims"][0]["name"] == (
        "thm44_I1_I2_closed_forms")
    assert f"wrote {one.relative_to(tmp_path) / 'report.md'}" in capsys.readouterr().out
    assert cli.default_out(None) == "results/theory"  # the full run keeps its folder
