"""Why SAM learns the features of ATTN_S more uniformly: measurements against the theory.

The theory is :mod:`theory.sam_saddle` (its numbers are :mod:`sims.ansatz`): SAM's perturbation
is normalized by the *global* gradient norm, so the heads share one radius in proportion to their
gradient and the head that dominates the gradient absorbs the slow-down. This module measures it
in the full model:

* :func:`predict_from_gd` — the reduced model of :mod:`sims.ansatz` calibrated on each
  simulated GD run (each feature's effective start ``ε_i`` is the one whose ansatz GD time
  equals the run's GD learning time; the coefficients ``σ_i, κ_i`` are the run's own training
  moments), then run under exact / first-order / head-wise SAM. No free parameter.
* :func:`head_assignment` — which head carries each feature at the end (random initializations
  can give different heads to a feature under GD and SAM, which the one-head-per-feature
  reduced model cannot describe).
* :func:`escape_experiment` — the escape of one head from the saddle ``M_m`` (``m`` learned
  heads at their fixed points, the escaping head at ``ε`` on ``e_{m+1}``) while a background
  head on ``e_d`` supplies a plateau gradient ``b`` of controlled size, under GD and SAM for
  several ``ρ``; against the reduced map (exact here) and the frozen-background first-order delay.
* :func:`analyze` — everything for the mechanism figure and the report, from a
  :func:`sims.linear_attention.experiment.run_figure1` result that ran
  ``("gd", "sam", "sam_flow", "sam_headwise")``.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import xarray as xr

from sims.ansatz import ansatz_gd_time, calibrate_start, reduced_map, time_entropy

from .data import make_covariance
from .models import AttnSParams, ansatz_params
from .stats import (
    a_coefficients,
    ansatz_coefficients,
    eigh_desc,
    fixed_point_components,
    population_moments,
)
from .train import train_runs

__all__ = [
    "MECHANISM_METHODS",
    "EscapeConfig",
    "predict_from_gd",
    "head_assignment",
    "escape_experiment",
    "background_delay",
    "analyze",
]

#: Methods of the Figure 1 experiment the mechanism analysis needs.
MECHANISM_METHODS = ("gd", "sam", "sam_flow", "sam_headwise")
#: Reduced-model variant of each SAM method: (form, normalization).
VARIANTS = {
    "sam": ("exact", "global"),
    "sam_flow": ("first_order", "global"),
    "sam_headwise": ("exact", "headwise"),
}


def _coefficients(ds: xr.Dataset, moments) -> tuple[np.ndarray, np.ndarray]:
    """Per-run ``σ, κ`` of the ansatz ODE from the runs' training moments, ``(R, d)`` each."""
    sig, kap = [], []
    for r in range(ds.run.size):
        mom = type(moments)(*(np.asarray(x)[r] for x in moments))
        s, k = ansatz_coefficients(mom, ds.eigvecs.values[r])
        sig.append(s)
        kap.append(k)
    return np.array(sig), np.array(kap)


def predict_from_gd(gd_times, sigma, kappa, thresholds, *, rho: float, eta: float,
                    n_steps: int) -> dict[str, np.ndarray]:  # fmt: skip
    """Reduced-model learning steps for GD and each SAM variant, calibrated on GD times.

    Args:
        gd_times: ``(R, M)`` simulated GD learning steps.
        sigma: ``(R, M)`` (or ``(M,)``) ansatz signal ``σ_i``.
        kappa: ``(R, M)`` (or ``(M,)``) ansatz coefficient ``κ_i``.
        thresholds: ``(M,)`` values ``v`` at which a feature counts as learned
            (``v³ = fraction × c_i*``).
        rho: SAM radius of the simulation.
        eta: learning rate of the simulation.
        n_steps: horizon of the reduced map.

    Returns:
        ``{"eps": (R, M), "gd": ..., "sam": ..., "sam_flow": ..., "sam_headwise": ...}``.
    """
    t = np.asarray(gd_times, dtype=float)
    sigma = np.broadcast_to(sigma, t.shape)
    kappa = np.broadcast_to(kappa, t.shape)
    thr = np.broadcast_to(thresholds, t.shape)
    eps = calibrate_start(t * 2.0 * eta, sigma, kappa, thr)  # step -> time 2η per step
    ok = np.all(np.isfinite(eps), axis=1)
    out = {"eps": eps}
    keys = ["gd", *VARIANTS]
    n_runs = t.shape[0]
    forms = np.repeat(["exact"] + [VARIANTS[k][0] for k in VARIANTS], n_runs)
    norms = np.repeat(["global"] + [VARIANTS[k][1] for k in VARIANTS], n_runs)
    rhos = np.repeat([0.0] + [rho] * len(VARIANTS), n_runs)
    v0 = np.tile(np.where(ok[:, None], eps, 1.0), (len(keys), 1))
    hits = reduced_map(v0, np.tile(sigma, (len(keys), 1)), np.tile(kappa, (len(keys), 1)),
                       np.tile(thr, (len(keys), 1)), rho=rhos, eta=eta, n_steps=n_steps,
                       form=forms, normalization=norms)  # fmt: skip
    for i, k in enumerate(keys):
        h = hits[i * n_runs:(i + 1) * n_runs]
        out[k] = np.where(ok[:, None], h, np.nan)
    return out


def head_assignment(final_v, final_k, final_q, eigvecs) -> np.ndarray:
    """Head carrying each feature at the end: ``argmax_h |v_h (k_h·e_a)(q_h·e_a)|``.

    Args:
        final_v: ``(..., H)`` values.
        final_k: ``(..., H, 1, d)`` keys.
        final_q: ``(..., H, 1, d)`` queries.
        eigvecs: ``(..., d, d)`` eigenvectors (columns).

    Returns:
        ``(..., d)`` head indices.
    """
    k = np.einsum("...hri,...ia->...ha", np.asarray(final_k), np.asarray(eigvecs))
    q = np.einsum("...hri,...ia->...ha", np.asarray(final_q), np.asarray(eigvecs))
    comp = np.asarray(final_v)[..., :, None] * k * q  # (..., H, d)
    return np.argmax(np.abs(comp), axis=-2)


@dataclasses.dataclass(frozen=True)
class EscapeConfig:
    """Escape from the saddle ``M_m`` with a background head (see :func:`escape_experiment`).

    Attributes:
        saddles: numbers ``m`` of learned heads (the escaping head learns ``e_{m+1}``).
        eps: start of the escaping head (``v = ε``, ``k = q = ε e_{m+1}``).
        backgrounds: sizes ``δ`` of the background head on ``e_d`` (0 = none).
        rhos: SAM radii (GD is always run).
        d, n_context, scale, learning_rate, fraction: the Figure 1 setting.
        num_steps: steps per run.
    """

    saddles: tuple[int, ...] = (0, 1, 2)
    eps: float = 2e-3
    backgrounds: tuple[float, ...] = (0.0, 2e-3, 4e-3, 8e-3, 1.6e-2, 3.2e-2)
    rhos: tuple[float, ...] = (2.5e-4, 5e-4, 1e-3, 2e-3)
    d: int = 4
    n_context: int = 31
    scale: float = 31.0
    learning_rate: float = 0.02
    fraction: float = 0.5
    num_steps: int = 12_001

    def __post_init__(self):
        if any(not 0 <= m < self.d - 1 for m in self.saddles):
            raise ValueError(
                f"`saddles` must lie in [0, d - 2] = [0, {self.d - 2}] (the background head "
                f"uses e_d); got {self.saddles!r}."
            )
        if not self.eps > 0:
            raise ValueError(f"`eps` must be > 0; got {self.eps!r}.")
        if any((not math.isfinite(x)) or x < 0 for x in (*self.backgrounds, *self.rhos)):
            raise ValueError("`backgrounds` and `rhos` must be finite and >= 0.")


def escape_experiment(cfg: EscapeConfig = EscapeConfig()) -> xr.Dataset:
    """Escape steps of head ``m+1`` from ``M_m`` vs ``ρ`` and the background gradient.

    Runs the full model (population loss, ``H = d`` heads, exact SAM of eq. 6) from ansatz
    points: heads ``1..m`` at eq. (3), head ``m+1`` at ``ε``, head ``d`` at ``δ`` on ``e_d``.
    The initial plateau gradient from the background is ``b = G_d(δ) = σ_d δ² − κ_d δ⁵``.

    Returns:
        Dataset with ``escape_step (saddle, background, rho)`` (``rho = 0`` is GD),
        ``reduced_step`` (the reduced map, exact on this configuration), ``b`` and ``g_escape``
        (the escaping head's initial rate), ``delay_first_order`` (frozen-background first-order
        prediction of the SAM delay, in steps).
    """
    cov = make_covariance("linear", cfg.d, rotate=False)
    lam, e = eigh_desc(cov)
    pop = population_moments(cov, cfg.n_context, scale=cfg.scale)
    fp = fixed_point_components(cov, cfg.n_context, scale=cfg.scale)
    a = a_coefficients(cov, cfg.n_context)
    sigma, kappa = cfg.scale * lam**2, cfg.scale**2 * lam * a
    vstar = np.cbrt(fp)
    thr = np.cbrt(cfg.fraction * fp)
    rhos = np.array((0.0, *cfg.rhos))
    combos = [(m, b, r) for m in cfg.saddles for b in cfg.backgrounds for r in rhos]
    vals, ps = [], []
    for m, bg, _ in combos:
        vals_m = np.zeros(cfg.d)
        vals_m[:m] = vstar[:m]
        vals_m[m] = cfg.eps
        vals_m[cfg.d - 1] = bg
        vals.append(vals_m)
        p = ansatz_params(e, vals_m, n_heads=cfg.d)
        ps.append(p)
    p0 = AttnSParams(*(jnp.stack(x) for x in zip(*ps, strict=True)))
    res = train_runs(
        p0, pop, cfg.num_steps, optimizer="sam", learning_rate=cfg.learning_rate,
        rho=np.array([c[2] for c in combos]), eigvecs=e, record_every=cfg.num_steps,
        log_every=cfg.num_steps, component_targets=cfg.fraction * fp, raise_on_failure=False,
    )  # fmt: skip
    first = res.ds.first_component_step.values  # (runs, d)
    esc = np.array([first[i, m] for i, (m, _, _) in enumerate(combos)])
    # round-off seeds SAM's bouncing of a learned head in the full model (theory claim
    # sam_learned_head_bounce); the reduced map starts the learned heads 1e-12 off v* instead.
    v_red = np.array(vals) * np.where(np.arange(cfg.d) < np.array([c[0] for c in combos])[:, None],
                                      1 + 1e-12, 1.0)
    red = reduced_map(v_red, sigma, kappa, np.where(np.arange(cfg.d) < cfg.d - 1, thr,
                                                             np.inf),
                      rho=np.array([c[2] for c in combos]), eta=cfg.learning_rate,
                      n_steps=cfg.num_steps)  # fmt: skip
    red_esc = np.array([red[i, m] for i, (m, _, _) in enumerate(combos)])
    shape = (len(cfg.saddles), len(cfg.backgrounds), rhos.size)
    b_grad = np.array([[sigma[-1] * x**2 - kappa[-1] * x**5 for x in cfg.backgrounds]] *
                      len(cfg.saddles))  # fmt: skip
    g_esc = np.array([[sigma[m] * cfg.eps**2 - kappa[m] * cfg.eps**5] * len(cfg.backgrounds)
                      for m in cfg.saddles])  # fmt: skip
    delay = np.zeros(shape)
    for i, m in enumerate(cfg.saddles):
        for j, bb in enumerate(b_grad[i]):
            delay[i, j] = [background_delay(sigma[m], cfg.eps, thr[m], bb, r) / (2 *
                           cfg.learning_rate) for r in rhos]  # fmt: skip
    return xr.Dataset(
        {
            "escape_step": (("saddle", "background", "rho"), esc.reshape(shape)),
            "reduced_step": (("saddle", "background", "rho"), red_esc.reshape(shape)),
            "delay_first_order": (("saddle", "background", "rho"), delay),
            "b": (("saddle", "background"), b_grad),
            "g_escape": (("saddle", "background"), g_esc),
        },
        coords={"saddle": list(cfg.saddles), "background": list(cfg.backgrounds), "rho": rhos},
        attrs={"config": dataclasses.asdict(cfg)},
    )


def background_delay(sigma: float, eps: float, u: float, b: float, rho: float) -> float:
    """First-order SAM delay (time units) with a frozen background ``b`` (theory claim).

    ``(ĉ/2b)[asinh(b/(σε²)) − asinh(b/(σu²))]`` with ``ĉ = 2ρ/√3``; ``b = 0`` gives the limit
    ``(ĉ/2σ)(1/ε² − 1/u²)``.
    """
    ch = 2.0 * rho / math.sqrt(3.0)
    if b == 0:
        return ch / (2.0 * sigma) * (1.0 / eps**2 - 1.0 / u**2)
    return ch / (2.0 * b) * (math.asinh(b / (sigma * eps**2)) - math.asinh(b / (sigma * u**2)))


def analyze(ds: xr.Dataset, train_moments=None, *, n_steps: int | None = None) -> xr.Dataset:
    """Measured vs predicted SAM/GD ratios per run and feature, and head assignments.

    Args:
        ds: a :func:`run_figure1` result with (at least) the methods of
            :data:`MECHANISM_METHODS`.
        train_moments: the runs' stacked training moments (``Prepared.moments``); default: the
            ``ansatz_sigma``/``ansatz_kappa`` stored in ``ds``.
        n_steps: horizon of the reduced map (default: the experiment's ``num_steps``).

    Returns:
        Dataset with ``measured (method, run, feature)`` and ``predicted (method, run,
        feature)`` learning steps, ``eps (run, feature)``, ``assignment (method, run,
        feature)``, ``same_assignment (method, run)`` and entropies.
    """
    methods = [m for m in MECHANISM_METHODS if m in ds.method.values]
    if "gd" not in methods:
        raise ValueError("`ds` must contain the 'gd' method (the calibration reference).")
    cfg = ds.attrs["config"]
    if train_moments is None:
        sig, kap = ds.ansatz_sigma.values, ds.ansatz_kappa.values
    else:
        sig, kap = _coefficients(ds, train_moments)
    thr = np.cbrt(cfg["fraction"] * ds.fixed_point_component.values)
    gd_t = ds.learning_time.sel({"method": "gd"}).values
    pred = predict_from_gd(gd_t, sig, kap, thr, rho=cfg["rho"], eta=cfg["learning_rate"],
                           n_steps=n_steps or cfg["num_steps"])  # fmt: skip
    meas = np.stack([ds.learning_time.sel({"method": m}).values for m in methods])
    prd = np.stack([pred[m] for m in methods])
    assign = np.stack([
        head_assignment(ds.final_v.sel({"method": m}).values, ds.final_k.sel({"method": m}).values,
                        ds.final_q.sel({"method": m}).values, ds.eigvecs.values)
        for m in methods
    ])  # fmt: skip
    return xr.Dataset(
        {
            "measured": (("method", "run", "feature"), meas),
            "predicted": (("method", "run", "feature"), prd),
            "eps": (("run", "feature"), pred["eps"]),
            "assignment": (("method", "run", "feature"), assign),
            "same_assignment": (("method", "run"), np.all(assign == assign[0], axis=-1)),
            "entropy_measured": (("method", "run"), time_entropy(meas)),
            "entropy_predicted": (("method", "run"), time_entropy(prd)),
        },
        coords={"method": methods, "run": ds.run.values, "feature": ds.feature.values},
        attrs={"rho": cfg["rho"], "learning_rate": cfg["learning_rate"]},
    )


def gd_time_check(sigma, kappa, eps, thr, eta) -> np.ndarray:
    """Continuous-time GD learning steps of the ansatz ODE (``t / 2η``), for diagnostics."""
    return ansatz_gd_time(sigma, kappa, eps, thr) / (2.0 * eta)
