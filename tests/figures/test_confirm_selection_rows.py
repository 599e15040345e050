"""Issue 36's confirmation rows: decided by the seeds × items bootstrap, "late-learned" from
measured learning times, and the late-learner arm paired across runs.

Every expected verdict is worked out by hand from the numbers given here.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from figures.report import seed000 as S
from figures.report import verdicts as V
from figures.report.sources import late_vs_default


def _items(lo, hi, mean=None):
    return {"mean": (lo + hi) / 2 if mean is None else mean, "t_interval": [lo - 1, hi + 1],
            "bootstrap_interval": [lo, hi], "n_seeds": 10, "n_items": 1800}  # fmt: skip


@pytest.mark.parametrize(
    ("lo", "hi", "verdict", "smaller"),
    [
        (0.1, 0.9, V.REPRODUCED, True),  # above 0, but wholly below the paper's +1.2
        (0.4, 2.0, V.REPRODUCED, False),  # above 0, the paper's size inside
        (-0.2, 1.1, V.SMALLER, True),  # contains 0, wholly below +1.2
        (-0.2, 1.3, V.NOT_SHOWN, False),  # contains 0 and +1.2
        (-1.5, -0.3, V.CONTRADICTED, True),  # below 0
    ],
)
def test_the_item_bootstrap_interval_decides(lo, hi, verdict, smaller):
    v, ours, rule, e = S._decided_by_items(_items(lo, hi), "OURS", "rule: paired t X", 1.2)
    assert v == verdict
    assert ours.startswith("smaller than the paper's effect") == smaller
    assert f"[{S.sg(lo)}, {S.sg(hi)}] (decides)" in ours and ours.endswith("OURS")
    assert "10 seeds × 1800 items" in ours and e["n"] == 10 and "1800 items" in e["test"]
    assert f"±{S.g((hi - lo) / 2, 2)} points" in rule and rule.endswith("paired t X")


def test_a_beyond_row_reads_verified_and_refuted():
    assert S._decided_by_items(_items(0.4, 2.0), "", "", 1.2, paper=False)[0] == V.VERIFIED
    assert S._decided_by_items(_items(-2.0, -0.4), "", "", 1.2, paper=False)[0] == V.REFUTED


def _check(auc, p):
    return {"auc": auc, "mannwhitney_p": p, "spearman_share_vs_time": 0.1,
            "median_time_selected": 5.0, "median_time_rest": 4.0, "spearman_p": 0.5}  # fmt: skip


def _late_numbers(checks, clean=0.9):
    per = {str(i): c for i, c in enumerate(checks)}
    comp = {k: {"corrupted_in_hard": 1 - clean, "hard_fraction": 0.4, "drop_hard_clean": 1.0,
                "drop_easy": 0.5} for k in per}  # fmt: skip
    return {"llm_confirm": {
        "hard_composition": comp, "recordings_before_median_half_drop": 4,
        "selection_check": {"per_seed": per, "median_learning_time_selected": 5.0,
                            "median_learning_time_rest": 4.0}}}  # fmt: skip


def test_late_learned_is_read_from_the_measured_learning_times():
    later, earlier, neither = _check(0.7, 0.001), _check(0.3, 0.001), _check(0.52, 0.4)
    v, ours, rule, e = S._confirm_late(_late_numbers([later] * 3))
    assert v == V.VERIFIED
    assert "later than the rest in 3, earlier in 0 and neither in 0 of 3" in ours
    assert "does pick late learners" in ours and e["n"] == 3
    # the loss drops (hard 1.0 > easy 0.5 above) no longer decide: AUC ½ is not shown
    v, ours, _, _ = S._confirm_late(_late_numbers([neither] * 3))
    assert v == V.NOT_SHOWN and "does not pick the late learners" in ours
    assert S._confirm_late(_late_numbers([earlier] * 3))[0] == V.REFUTED
    # one seed not significant: not every seed, not verified; a mixed run is not refuted either
    assert S._confirm_late(_late_numbers([later, later, neither]))[0] == V.NOT_SHOWN
    assert S._confirm_late(_late_numbers([earlier, earlier, later]))[0] == V.NOT_SHOWN
    # later in every seed but a noisy hard cluster (75 % clean): not verified
    assert S._confirm_late(_late_numbers([later] * 3, clean=0.75))[0] == V.NOT_SHOWN
    # a significant AUC below ½ is "earlier", one above is "later" (the sign is not swapped)
    assert S._late_class(_check(0.45, 0.01)) == -1 and S._late_class(_check(0.55, 0.01)) == 1
    assert S._late_class(_check(0.9, 0.05)) == 0  # p at the level is not significant


def _run(variants, acc):
    """A run of 2 seeds x 4 items (2 formats): item verdicts per variant."""
    ic = np.array([acc[v] for v in variants], dtype=np.int8)  # (variant, seed, item)
    ds = xr.Dataset(
        {"item_correct": (("variant", "seed", "item"), ic),
         "accuracy": (("variant", "seed"), ic.mean(-1) * 100.0)},
        coords={"variant": variants, "seed": [0, 1],
                "item_benchmark": ("item", ["gsm8k", "gsm8k", "math", "math"])},
    )  # fmt: skip
    return ds


def test_the_late_arm_is_paired_with_the_default_run_by_seed_and_item():
    ft = [[1, 0, 0, 0], [0, 1, 0, 0]]
    default = _run(["ft", "ft_matched", "ft_up"],
                   {"ft": ft, "ft_matched": [[1, 1, 0, 0], [0, 1, 0, 0]],
                    "ft_up": [[1, 0, 0, 0], [0, 1, 1, 0]]})  # fmt: skip
    late = _run(["ft", "ft_up_late"], {"ft": ft, "ft_up_late": [[1, 1, 1, 0], [1, 1, 0, 0]]})
    out = late_vs_default(late, default)
    assert out["seeds"] == [0, 1] and out["ft_rerun_max_diff"] == 0
    # per seed, the mean over formats of (late - matched): seed 0 (0 + 0.5)/2, seed 1 (0.5 + 0)/2
    assert out["ft_up_late-ft_matched"]["mean"] == pytest.approx(25.0)
    # against ft: seed 0 (0.5 + 0.5)/2 = 0.5, seed 1 (0.5 + 0)/2 = 0.25 -> 37.5 points
    assert out["ft_up_late-ft"]["mean"] == pytest.approx(37.5)
    assert out["ft_up_late-ft_up"]["n_items"] == 4
    # a rerun of FT that differs is reported, not hidden
    other = _run(["ft", "ft_up_late"], {"ft": [[1, 1, 0, 0], [0, 1, 0, 0]],
                                        "ft_up_late": [[1, 1, 1, 0], [1, 1, 0, 0]]})  # fmt: skip
    assert late_vs_default(other, default)["ft_rerun_max_diff"] == 25.0
    with pytest.raises(ValueError, match="share no seed"):
        late_vs_default(late.assign_coords(seed=[5, 6]), default)


def test_the_late_arm_row_follows_the_default_runs_metric():
    """FT under 20 % accuracy: the loss decides (paired t per seed), the accuracy stands beside;
    off the floor the seeds x items bootstrap decides."""
    items = _items(-1.2, 0.6, mean=-0.3)
    late = {"vs_default": {"seeds": [0, 1, 2], "ft_rerun_max_diff": 0.0,
                           "ft_up_late-ft_matched": items,
                           "mean_loss_ft_up_late-ft_matched": [-0.02, -0.021, -0.019]}}  # fmt: skip
    n = {"llm_confirm": {"accuracy_mean": {"ft": 10.0}}, "llm_confirm_late": late}
    v, ours, rule, e = S._confirm_late_arm(n)
    assert v == V.VERIFIED and ours.startswith("held-out loss, not the paper's accuracy")
    assert "[-1.2, +0.6]" in ours and e["n"] == 3
    late["vs_default"]["mean_loss_ft_up_late-ft_matched"] = [0.02, 0.021, 0.019]
    assert S._confirm_late_arm(n)[0] == V.REFUTED
    n["llm_confirm"]["accuracy_mean"]["ft"] = 30.0  # off the floor: the items decide
    v, ours, _, e = S._confirm_late_arm(n)
    assert v == V.SMALLER and "(decides)" in ours and e["n"] == 10
