"""Learning times from loss trajectories and the selection check (sims.selection, issue 36).

Expected values are hand-computed on piecewise-linear trajectories (where linear interpolation is
exact) or taken from scipy's independent Mann-Whitney and Spearman implementations.
"""

import numpy as np
import pytest
from scipy import stats

from sims.selection import (
    log_spaced_steps,
    loss_learning_times,
    recordings_before,
    selection_check,
)


def test_log_spaced_schedule_by_hand():
    assert log_spaced_steps(1000, 5).tolist() == [0, 1, 10, 100, 1000]
    assert log_spaced_steps(100, 3, first=10).tolist() == [0, 10, 100]
    # rounding collisions are pushed apart, and the count and the end are kept
    s = log_spaced_steps(12, 9)
    assert s.size == 9 and s[-1] == 12 and np.all(np.diff(s) > 0)
    # geomspace(1, 12, 8) rounds to 1, 1, 2, 3, 4, 6, 8, 12; the repeated 1 pushes the next ones
    assert s.tolist() == [0, 1, 2, 3, 4, 5, 6, 8, 12]


@pytest.mark.parametrize("total,n", [(50, 12), (3000, 20), (7, 8), (10_000, 6)])
def test_log_spaced_schedule_properties(total, n):
    s = log_spaced_steps(total, n)
    assert s.size == n and s[0] == 0 and s[1] == 1 and s[-1] == total
    assert np.all(np.diff(s) >= 1)
    # denser early: the first half of the recordings covers far less than half of the steps
    if total > 10 * n:
        assert s[n // 2] < total / 4


def test_log_spaced_schedule_rejects_bad_input():
    with pytest.raises(ValueError, match="n_records"):
        log_spaced_steps(10, 1)
    with pytest.raises(ValueError, match="first"):
        log_spaced_steps(10, 3, first=11)
    with pytest.raises(ValueError, match="record fewer"):
        log_spaced_steps(5, 8)
    with pytest.raises(TypeError, match="total_steps"):
        log_spaced_steps(10.0, 3)


def test_half_drop_on_piecewise_linear_trajectories():
    steps = np.array([0, 2, 4, 8, 16])
    losses = np.array([
        [4.0, 3.0, 2.0, 1.0, 0.0],  # level 2.0 reached exactly at step 4
        [4.0, 1.0, 0.0, 0.0, 0.0],  # level 2.0 between 0 and 2: 0 + 2*(4-2)/(4-1) = 4/3
        [2.0, 2.0, 2.0, 1.5, 0.0],  # level 1.0 between 8 and 16: 8 + 8*(1.5-1)/1.5 = 32/3
        [3.0, 1.0, 3.0, 3.0, 3.0],  # min in the middle: level 2 crossed at 1
        [1.0, 1.0, 1.2, 1.0, 1.0],  # never below its start: not learned
        [1.0, np.nan, 0.5, 0.4, 0.1],  # non-finite: no time
    ])
    t = loss_learning_times(steps, losses)
    np.testing.assert_allclose(t[:4], [4.0, 4.0 / 3.0, 32.0 / 3.0, 1.0], rtol=0, atol=1e-12)
    assert np.isnan(t[4]) and np.isnan(t[5])
    # fraction: 3/4 of the drop of row 0 (level 1.0) is at step 8
    assert loss_learning_times(steps, losses[:1], fraction=0.75)[0] == pytest.approx(8.0)


def test_half_drop_matches_a_per_row_reference_on_random_curves():
    rng = np.random.default_rng(3)
    steps = log_spaced_steps(500, 9)
    losses = np.cumsum(rng.normal(-0.1, 0.3, size=(200, steps.size)), axis=1) + 5

    def ref(c, f=0.5):  # the definition, one row at a time
        if c[0] <= c.min():
            return np.nan
        level = c[0] - f * (c[0] - c.min())
        for k in range(1, c.size):
            if c[k] <= level:
                return steps[k - 1] + (steps[k] - steps[k - 1]) * (c[k - 1] - level) / (
                    c[k - 1] - c[k])
        raise AssertionError

    expect = np.array([ref(c) for c in losses])
    np.testing.assert_allclose(loss_learning_times(steps, losses), expect, rtol=1e-12)


def test_learning_times_reject_bad_shapes():
    with pytest.raises(ValueError, match="losses"):
        loss_learning_times([0, 1, 2], np.ones((3, 2)))
    with pytest.raises(ValueError, match="increasing"):
        loss_learning_times([0, 2, 1], np.ones((3, 3)))
    with pytest.raises(ValueError, match="fraction"):
        loss_learning_times([0, 1], np.ones((1, 2)), fraction=0.0)


def test_recordings_before_by_hand():
    got = recordings_before([0, 1, 10, 100], [0.0, 0.5, 1.0, 10.0, 11.0, np.nan])
    assert got.tolist() == [0, 1, 1, 2, 3, -1]


def test_selection_check_auc_and_p_agree_with_scipy():
    rng = np.random.default_rng(0)
    t = np.round(rng.exponential(10, 60), 0)  # ties on purpose
    t[[3, 17, 40]] = np.nan  # unlearned: counted as the latest
    sel = rng.random(60) < 0.4
    chk = selection_check(t, sel)
    filled = np.where(np.isnan(t), 1e9, t)
    mw = stats.mannwhitneyu(filled[sel], filled[~sel], alternative="two-sided")
    assert chk.auc == pytest.approx(mw.statistic / (sel.sum() * (~sel).sum()), rel=1e-12)
    assert chk.mannwhitney_p == pytest.approx(mw.pvalue, rel=1e-9)
    assert chk.n_selected == sel.sum() and chk.n_rest == (~sel).sum()
    assert chk.n_unlearned_selected + chk.n_unlearned_rest == 3


def test_selection_check_hand_made_case():
    # selected = exactly the three latest examples: AUC 1; the reverse: AUC 0; medians by hand
    t = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    late = np.array([0, 0, 0, 1, 1, 1], bool)
    chk = selection_check(t, late)
    assert chk.auc == 1.0 and chk.median_time_selected == 5.0 and chk.median_time_rest == 2.0
    assert selection_check(t, ~late).auc == 0.0
    # one swap out of 9 pairs: 8/9
    assert selection_check(t, np.array([0, 0, 1, 0, 1, 1], bool)).auc == pytest.approx(8 / 9)


def test_selection_check_spearman_across_sources_agrees_with_scipy():
    # four sources with median times 1, 5, 9, 20 and selected shares 0, 1/4, 1/2, 1
    src = np.repeat(["a", "b", "c", "d"], 4)
    t = np.array([1, 1, 1, 1, 5, 5, 5, 5, 9, 9, 9, 9, 20, 20, 20, 20], float)
    sel = np.zeros(16, bool)
    sel[[7, 10, 11, 12, 13, 14, 15]] = True
    chk = selection_check(t, sel, src)
    assert [v["share_selected"] for v in chk.per_source.values()] == [0.0, 0.25, 0.5, 1.0]
    assert [v["median_time"] for v in chk.per_source.values()] == [1.0, 5.0, 9.0, 20.0]
    ref = stats.spearmanr([0.0, 0.25, 0.5, 1.0], [1.0, 5.0, 9.0, 20.0])
    assert chk.spearman_share_vs_time == pytest.approx(ref.statistic) == pytest.approx(1.0)
    # reverse the shares: rho -1
    chk2 = selection_check(t, np.isin(np.arange(16), [0, 1, 2, 3, 4, 5, 6, 8, 9]), src)
    assert chk2.spearman_share_vs_time == pytest.approx(-1.0)
    d = chk.to_dict()
    assert d["auc"] == chk.auc and set(d["per_source"]) == {"a", "b", "c", "d"}


def test_selection_check_rejects_one_group():
    with pytest.raises(ValueError, match="some but not all"):
        selection_check([1.0, 2.0], [True, True])
    with pytest.raises(ValueError, match="sources"):
        selection_check([1.0, 2.0], [True, False], ["a"])
