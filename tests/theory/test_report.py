"""The report CLI: table, Markdown + JSON with provenance, --claim, --list, exit codes."""

from __future__ import annotations

import json

import pytest

from theory import __main__ as cli
from theory import report
from theory.verify import CLAIMS, CheckResult, claim


def test_single_claim_writes_markdown_and_json(tmp_path, capsys):
    rc = cli.main(["--claim", "thm44_I1_I2_closed_forms", "--claim", "lemma_b5_as_printed",
                   "--claim", "lemma_b5_corrected", "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "thm44_I1_I2_closed_forms" in out and "refuted" in out
    md = (tmp_path / "report.md").read_text()
    assert "## Errata" in md and "lemma_b5_corrected" in md
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["summary"] == {"verified": 1, "refuted": 1,
                               "printed statement refuted; corrected form verified": 1}
    assert data["meta"]["status"] == "success" and "packages" in data["meta"]
    names = [c["name"] for c in data["claims"]]
    assert names == ["thm44_I1_I2_closed_forms", "lemma_b5_as_printed", "lemma_b5_corrected"]


def test_list_and_unknown(capsys):
    assert cli.main(["--list"]) == 0
    assert "lemma41_as_printed" in capsys.readouterr().out
    assert cli.main(["--claim", "lemma41_as_printd", "--no-write"]) == 2
    assert "Did you mean" in capsys.readouterr().err


def test_help_exits_cleanly(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0


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


def test_table_format_has_all_columns():
    rows = report.run_claims(["thm44_step1_monotone"])
    text = report.format_table(rows)
    for col in ("claim", "paper reference", "verdict", "residual", "s"):
        assert col in text
