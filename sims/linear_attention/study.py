"""Upsampling in the ATTN_S toy: what each selection picks, and theory vs simulation.

Beyond the paper (issue 13 item 4, issue 15 item 4). From the same paired runs as Figure 1
(data, initialization, GD proxy), several selections are built and GD is retrained on each
weighted dataset:

* ``hard`` — the paper's recipe (k-means on raw proxy loss trajectories, upsample the hard
  cluster);
* ``hard_log_ratio`` — the same on the scale-free trajectories ``log(L_k/L_1)``;
* ``random``, ``easy`` — compute-matched ablations (as many examples as the hard cluster);
* ``condition`` — as many examples with the most query energy on the last eigen-direction, a
  rule built to meet the entropy condition of :mod:`theory.upsampling`;
* ``gd_lr_matched`` — GD on the original data with the learning rate multiplied by the paper
  selection's mean signal boost (separates "upsampling helps" from "a bigger step helps").

For every selection the study records the selection report (target size, query energy per
eigen-direction, signal enrichment ``m_i``, boost ``r_i``), the learning times, the entropy of
the four learning times and the test loss at both horizons, and the theory's predictions: the
boost-only entropy change ``H(T/r) − H(T)`` and the learning times of the ansatz ODE with the
weighted moments, started from each feature's effective start calibrated on the run's GD times.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import xarray as xr

from sims.ansatz import (
    ansatz_gd_time,
    calibrate_start,
    condition_holds,
    entropy_change,
    time_entropy,
)

from .experiment import Figure1Config, _proxy_losses, _train_method, prepare_runs, select
from .measure import feature_counts
from .stats import ansatz_coefficients

__all__ = ["SELECTION_VARIANTS", "StudyConfig", "run_upsampling_study", "summarize_study"]

#: Tolerance of "r_i non-decreasing": sampling noise in the boosts of 80,000 examples is ~0.2%.
CONDITION_RTOL = 0.005

#: name -> (selection, cluster_features)
SELECTION_VARIANTS = {
    "hard": ("hard", "trajectory"),
    "hard_log_ratio": ("hard", "log_ratio"),
    "random": ("random", "trajectory"),
    "easy": ("easy", "trajectory"),
    "condition": ("condition", "trajectory"),
}


@dataclasses.dataclass(frozen=True)
class StudyConfig:
    """Configuration of the upsampling study.

    Attributes:
        base: the Figure 1 configuration (data, model, horizons, proxy, factor).
        selections: names from :data:`SELECTION_VARIANTS`.
        lr_control: also run GD with the learning rate × the paper selection's mean boost.
    """

    base: Figure1Config = Figure1Config(log_every=1000)
    selections: tuple[str, ...] = tuple(SELECTION_VARIANTS)
    lr_control: bool = True

    def __post_init__(self):
        bad = [s for s in self.selections if s not in SELECTION_VARIANTS]
        if bad or not self.selections:
            raise ValueError(
                f"`selections` must be a non-empty subset of {tuple(SELECTION_VARIANTS)}; got "
                f"{self.selections!r}."
            )
        if self.lr_control and "hard" not in self.selections:
            raise ValueError("`lr_control` needs the 'hard' selection (its boost sets the lr).")


def run_upsampling_study(cfg: StudyConfig = StudyConfig(), *, progress: bool = False
                         ) -> xr.Dataset:  # fmt: skip
    """Run every selection (GD on its weighted data) plus GD and the lr-matched control.

    Returns:
        Dataset with dims ``selection``, ``run_kind`` (``gd``, the selections,
        ``gd_lr_matched``), ``run``, ``feature``, ``horizon``.
    """
    from tqdm.auto import tqdm

    base = cfg.base
    t0 = time.perf_counter()
    kinds = ["gd", *cfg.selections] + (["gd_lr_matched"] if cfg.lr_control else [])
    bar = tqdm(total=base.n_runs + len(cfg.selections) + len(kinds), desc="upsampling study",
               disable=not progress, leave=False)  # fmt: skip
    prep = prepare_runs(base, progress=bar)
    results = {"gd": _train_method(prep, "gd", prep.moments)}  # its checkpoints are the proxy's
    losses = _proxy_losses(prep, results["gd"])
    sels = {}
    for name in cfg.selections:
        selection, feats = SELECTION_VARIANTS[name]
        sub = dataclasses.replace(base, selection=selection, cluster_features=feats)
        sels[name] = select(prep, sub, losses=losses)
        losses = sels[name]["losses"]
        bar.update(1)
    boost_mean = sels["hard"]["report"]["sigma_ratio"].mean(1) if "hard" in sels else None
    for k in kinds:  # GD itself ran above
        if k == "gd_lr_matched":
            results[k] = _train_method(prep, "gd", prep.moments, lr_factor=boost_mean)
        elif k != "gd":
            results[k] = _train_method(prep, "gd_upsample", sels[k]["moments"])
        bar.update(1)
    bar.close()
    horizons = np.array([base.paper_steps, base.num_steps])
    lt = np.stack([results[k].ds.first_component_step.values for k in kinds])
    steps = results["gd"].ds.step.values
    at = np.searchsorted(steps, horizons - 1)
    test_at = np.stack([results[k].ds.test_loss.values[:, at] for k in kinds])
    # theory: effective starts calibrated on GD, then the weighted ansatz ODE
    thr = np.cbrt(base.fraction * prep.fixed_point)
    eta = base.learning_rate
    sig = np.array([ansatz_coefficients(_row(prep.moments, r), prep.eigvecs[r])[0]
                    for r in range(base.n_runs)])  # fmt: skip
    kap = np.array([ansatz_coefficients(_row(prep.moments, r), prep.eigvecs[r])[1]
                    for r in range(base.n_runs)])  # fmt: skip
    eps = calibrate_start(lt[0] * 2 * eta, sig, kap, thr)
    rep_keys = ("fraction", "target_ratio", "xq_ratio", "xq_share", "xq_share_all", "enrichment",
                "boost", "sigma_ratio", "hard_fraction")
    data = {}
    for key in rep_keys:
        arr = np.stack([np.asarray(sels[s]["report"][key]) for s in cfg.selections])
        dims = ("selection", "run") if arr.ndim == 2 else ("selection", "run", "feature")
        data[key] = (dims, arr)
    pred_t, pred_dh, pred_dh_boost = [], [], []
    for s in cfg.selections:
        sw, kw = [], []
        for r in range(base.n_runs):
            c = ansatz_coefficients(_row(sels[s]["moments"], r), prep.eigvecs[r])
            sw.append(c[0])
            kw.append(c[1])
        sw, kw = np.array(sw), np.array(kw)
        with np.errstate(invalid="ignore", divide="ignore"):
            reach = thr < np.cbrt(sw / kw)
            t = np.full(sw.shape, np.nan)
            ok = reach & np.isfinite(eps)
            t[ok] = ansatz_gd_time(sw[ok], kw[ok], eps[ok], np.broadcast_to(thr, sw.shape)[ok])
        pred_t.append(t / (2 * eta))
        pred_dh.append(time_entropy(t) - time_entropy(lt[0]))
        pred_dh_boost.append(entropy_change(lt[0], sels[s]["report"]["sigma_ratio"]))
    data.update({
        "learning_time": (("run_kind", "run", "feature"), lt),
        "entropy": (("run_kind", "run"), time_entropy(lt)),
        "test_loss_at": (("run_kind", "run", "horizon"), test_at),
        "n_learned": (("run_kind", "run", "horizon"),
                      np.stack([feature_counts(lt, h) for h in horizons], axis=-1)),
        "predicted_time": (("selection", "run", "feature"), np.array(pred_t)),
        "predicted_entropy_change": (("selection", "run"), np.array(pred_dh)),
        "predicted_entropy_change_boost": (("selection", "run"), np.array(pred_dh_boost)),
        "condition_met": (("selection", "run"),
                          np.array([condition_holds(sels[s]["report"]["sigma_ratio"],
                                                    rtol=CONDITION_RTOL)
                                    for s in cfg.selections])),
        "eps": (("run", "feature"), eps),
        "lr_boost": (("run",), boost_mean if boost_mean is not None else np.ones(base.n_runs)),
        "horizon_step": (("horizon",), horizons),
    })  # fmt: skip
    ds = xr.Dataset(
        data,
        coords={"selection": list(cfg.selections), "run_kind": kinds,
                "run": np.arange(base.n_runs), "feature": np.arange(base.d),
                "horizon": ["paper", "long"]},
    )  # fmt: skip
    ds.attrs.update({
        "config": dataclasses.asdict(base), "selections": list(cfg.selections),
        "lr_control": cfg.lr_control, "seconds": time.perf_counter() - t0,
        "status": "success" if all(r.success for r in results.values()) else "failed",
    })  # fmt: skip
    return ds


def _row(moments, r):
    return type(moments)(*(np.asarray(x)[r] for x in moments))


def summarize_study(ds: xr.Dataset) -> dict:
    """Per selection: what it picks, the condition, measured and predicted entropy changes."""
    out: dict = {}
    h_gd = ds.entropy.sel(run_kind="gd").values
    for k in ds.run_kind.values:
        k = str(k)
        row = {
            "entropy_median": float(np.nanmedian(ds.entropy.sel(run_kind=k))),
            "entropy_minus_gd_median": float(np.nanmedian(ds.entropy.sel(run_kind=k) - h_gd)),
            "frac_runs_entropy_above_gd": float(np.mean(ds.entropy.sel(run_kind=k) > h_gd)),
            "runs_with_all_features": {
                str(h): int((ds.n_learned.sel(run_kind=k, horizon=h) == ds.feature.size).sum())
                for h in ds.horizon.values
            },
            "test_loss": {
                str(h): {"median": float(np.median(ds.test_loss_at.sel(run_kind=k, horizon=h))),
                         "mean": float(np.mean(ds.test_loss_at.sel(run_kind=k, horizon=h)))}
                for h in ds.horizon.values
            },
            "median_speedup_vs_gd": np.nanmedian(
                ds.learning_time.sel(run_kind="gd") / ds.learning_time.sel(run_kind=k), axis=0
            ).tolist(),
        }  # fmt: skip
        if k in ds.selection.values:
            sel = ds.sel(selection=k)
            row.update({
                "fraction_mean": float(sel.fraction.mean()),
                "target_ratio_median": float(sel.target_ratio.median()),
                "xq_ratio_median": np.median(sel.xq_ratio, 0).tolist(),
                "xq_share_median": np.median(sel.xq_share, 0).tolist(),
                "enrichment_median": np.median(sel.enrichment, 0).tolist(),
                "boost_median": np.median(sel.sigma_ratio, 0).tolist(),
                "condition_met_runs": int(condition_holds(sel.sigma_ratio.values,
                                                          rtol=CONDITION_RTOL).sum()),
                "predicted_entropy_change_median": float(np.nanmedian(
                    sel.predicted_entropy_change)),
                "predicted_entropy_change_boost_median": float(np.nanmedian(
                    sel.predicted_entropy_change_boost)),
                "predicted_speedup_median": np.nanmedian(
                    ds.learning_time.sel(run_kind="gd").values / sel.predicted_time.values, axis=0
                ).tolist(),
            })  # fmt: skip
        out[k] = row
    out["xq_share_all_median"] = np.median(ds.xq_share_all.isel(selection=0), 0).tolist()
    return out
