"""Issue 37, "both directions": every rule on the findings page can reject in the direction
its claim predicts and against it, or its text says why it cannot.

The rules are enumerated by judging every registered claim: on the committed summaries, and
the GPU claims on a made-up published campaign (each stage ``ok``), so that no rule is left out
because its numbers are missing.
"""

from __future__ import annotations

import pytest

from figures.report import claims as C
from figures.report import verdicts as V
from figures.report.directions import ONE_SIDED_WHY, has_against_branch
from figures.report.summaries import load_numbers

#: A published campaign with every GPU stage the page reads (values are placeholders: only the
#: rules' texts are read here).
GPU = {
    "gpu_confirm_smollm2": {"name": "confirm_smollm2", "status": "ok", "device": "cuda",
                            "figures": {"paired_differences": {
                                "ft_up-ft_matched": {"accuracy_points": [0.5, -0.5, 1.5]}}}},
    "gpu_markov_fig2_3": {"name": "markov_fig2_3", "status": "ok", "device": "cuda",
                          "figures": {"n_stages": 3, "order_ok": True,
                                      "group_times": [100, 400, 1500]}},
    "gpu_throughput": {"name": "throughput", "status": "ok", "device": "cuda", "targets": [
        {"name": "generation", "value": 60.0, "op": ">=", "target": 50.0, "unit": "/s",
         "met": True}]},
}  # fmt: skip


@pytest.fixture(scope="module")
def judged():
    """Every row judged: committed numbers plus the GPU placeholders."""
    numbers = {**load_numbers(), **GPU}
    return {r.claim.id: r for r in C.all_rows(numbers)}


def _empirical(judged):
    return {
        cid: r
        for cid, r in judged.items()
        if not cid.startswith("theory-") and r.finding.verdict not in (V.NEEDS_GPU, V.NO_RESULT)
    }


def test_every_rule_rejects_both_ways_or_says_why_not(judged):
    rows = _empirical(judged)
    assert len(rows) >= 70  # every empirical claim with numbers (81 registered)
    missing = [
        cid
        for cid, r in rows.items()
        if not (has_against_branch(r.finding.rule) or V.ONE_SIDED in r.finding.rule)
    ]
    assert not missing, f"rules with no reject-against branch and no stated reason: {missing}"


def test_every_stated_reason_belongs_to_a_one_sided_rule(judged):
    """No stale entry: a listed claim exists and its rule has no against branch of its own."""
    for cid, why in ONE_SIDED_WHY.items():
        assert cid in judged, f"{cid!r} is listed in ONE_SIDED_WHY but is not a claim"
        r = judged[cid].finding
        if r.verdict in (V.NEEDS_GPU, V.NO_RESULT):
            continue
        assert why in r.rule, cid
        core = r.rule.replace(f" ({V.ONE_SIDED}{why})", "")
        assert not has_against_branch(core), f"{cid}: has its own against branch; unlist it"


def test_unjudged_rows_are_only_the_gpu_rows_without_a_stage(judged):
    left = [cid for cid, r in judged.items() if not cid.startswith("theory-")
            and r.finding.verdict in (V.NEEDS_GPU, V.NO_RESULT)]  # fmt: skip
    # stages the placeholder campaign does not publish (or publishes without the value a row
    # reads), and the LoRA τ run (a CPU result not committed); each says what is missing
    for cid in left:
        assert judged[cid].finding.ours, cid
    assert len(left) <= 8


def test_the_generic_rules_carry_a_reason_only_without_an_against_verdict():
    assert V.ONE_SIDED in V.threshold_rule(0.5, above=0.8)[1]
    assert V.ONE_SIDED not in V.threshold_rule(0.5, above=0.8, against=V.CONTRADICTED)[1]
    assert V.ONE_SIDED in V.all_rule([True, False])[1]
    assert V.ONE_SIDED not in V.all_rule([True, False], against=V.REFUTED)[1]
    assert V.ONE_SIDED in V.count_rule(1, 3, at_least=0.5)[1]
    for rule in (V.paired_t_rule([1.0, 2.0, 3.0], expect="positive")[1],
                 V.tost_rule([0.1, -0.1, 0.0], margin=1.0)[1],
                 V.sign_test_rule(0.9, 20, expect="positive")[1],
                 V.law_rule(0.5, 1.5, claimed=2, rival=1)[1]):  # fmt: skip
        assert has_against_branch(rule), rule
