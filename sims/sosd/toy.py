"""Section 4 toy model of seed 002: one-layer softmax attention, fixed readout, full-batch GD.

The model (seed 002, Sec. 4.1): for one input sequence ``X ∈ R^{n×d}`` with labels ``y ∈ {1..C}^n``

    Q = X W_Q,  K = X W_K,  V = X W_V,  M = Q K^T / √d,  A = softmax_row(M),  H = A V,
    Z = H W_C  (W_C ∈ R^{d×C} fixed),  P = softmax_row(Z),  L = −(1/n) Σ_i log P_{i, y_i}   (Eq. 2)

trained by full-batch GD ``θ ← θ − η ∇L`` from a small Gaussian init ``W ~ N(0, σ²)``, in
float64. Gradients are exact (App. B Eqs. 40–44, App. C Eqs. 102–107) and checked against finite
differences in the tests.

:func:`train` runs a batch of independent runs (seeds × learning rates × init scales) in one
vectorised loop and records, **at every step**, the loss, the Frobenius and nuclear norms of
``W_Q, W_K, W_V``, their SD variation ΔΣ_t = ||Σ̂_{t+1} − Σ̂_t|| (the paper's consecutive-step
definition), the Lemma A.4 bound, gradient norms, condition numbers (Assumption 4.3) and the
margins of Assumption 4.7 (``γ_min``, ``ω_min``). :func:`summarize` turns one run into the numbers
of the paper's claims (norm growth at every step, V-before-QK ordering, ΔΣ collapse, the slope of
log ΔL against log ΔΣ, onset times, margins).

``python -m sims.sosd_toy`` runs the default configuration, prints the summary and writes a NetCDF
result.

Examples:
    >>> cfg = ToyConfig(n=4, d=6, classes=3, steps=5, seeds=(0,))
    >>> ds = train(cfg)
    >>> bool((ds.a4_ratio.isel(step=slice(0, -1)) <= 1).all()), ds.loss.shape
    (True, (1, 6))
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "ToyConfig",
    "MATRICES",
    "make_problem",
    "forward",
    "loss_and_grads",
    "gap",
    "margins",
    "train",
    "summarize",
    "onset_sweep",
    "theorem45_hitting_times",
    "theorem45_constants",
    "theorem45_prediction",
    "main",
]

#: Trainable matrices, in the order of the ``matrix`` dimension.
MATRICES = ("Q", "K", "V")


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    """Configuration of the Section 4 toy model (seed 002) and its GD run.

    Attributes:
        n: sequence length. ``n ≤ d`` keeps ``X X^T`` full rank, as App. B (48) needs.
        d: feature dimension (all three matrices are ``d × d``).
        classes: number of classes ``C``.
        sigma: init std of ``W_Q, W_K, W_V`` (small-init regime, ``σ ≪ 1``); one value or a tuple
            (one run per value).
        eta: GD learning rate; one value or a tuple (one run per value).
        steps: GD steps.
        seeds: data/init seeds (one run per seed; the grid is seeds × eta × sigma).
        readout_scale: ``W_C ~ N(0, readout_scale² / d)``.
        labels: ``"random"`` (i.i.d. uniform) or ``"balanced"`` (each class ``n/C`` times,
            shuffled).
        keep_spectra: number of log-spaced steps at which full singular-value vectors are kept.
    """

    n: int = 16
    d: int = 32
    classes: int = 8
    sigma: float | tuple[float, ...] = 0.01
    eta: float | tuple[float, ...] = 0.5
    steps: int = 20_000
    seeds: tuple[int, ...] = (0,)
    readout_scale: float = 1.0
    labels: str = "random"
    keep_spectra: int = 40

    def __post_init__(self):
        for name in ("n", "d", "classes", "steps", "keep_spectra"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"`{name}` must be a positive integer; got {v!r}.")
        if self.classes < 2:
            raise ValueError(f"`classes` must be >= 2; got {self.classes}.")
        for name in ("sigma", "eta"):
            vals = _as_tuple(getattr(self, name))
            if not vals or any(not (math.isfinite(v) and v > 0) for v in vals):
                raise ValueError(
                    f"`{name}` must be positive and finite; got {getattr(self, name)!r}."
                )
            object.__setattr__(self, name, vals if len(vals) > 1 else vals[0])
        seeds = tuple(int(s) for s in _as_tuple(self.seeds))
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"`seeds` must be non-empty and distinct; got {self.seeds!r}.")
        object.__setattr__(self, "seeds", seeds)
        if not (math.isfinite(self.readout_scale) and self.readout_scale > 0):
            raise ValueError(f"`readout_scale` must be positive; got {self.readout_scale!r}.")
        if self.labels not in ("random", "balanced"):
            raise ValueError(f"`labels` must be 'random' or 'balanced'; got {self.labels!r}.")
        if self.labels == "balanced" and self.n % self.classes:
            raise ValueError(
                f"`labels='balanced'` needs `n` divisible by `classes`; got n={self.n}, "
                f"classes={self.classes}."
            )

    def grid(self) -> list[tuple[int, float, float]]:
        """The runs ``(seed, eta, sigma)``, seeds outermost."""
        return [(s, e, g) for s in self.seeds for e in _as_tuple(self.eta)
                for g in _as_tuple(self.sigma)]  # fmt: skip


def _as_tuple(x) -> tuple[float, ...]:
    if isinstance(x, (list, tuple, np.ndarray)):
        return tuple(float(v) for v in x)
    return (float(x),)


def make_problem(cfg: ToyConfig, seed: int, sigma: float):
    """Data, fixed readout and initial weights of one run.

    Returns:
        ``X (n, d)``, one-hot ``Y (n, C)``, ``W_C (d, C)``, ``W0 (3, d, d)`` (Q, K, V), all float64.
        The data and readout depend only on ``seed``; the init is ``σ`` times a seed-fixed
        Gaussian, so runs that differ only in ``σ`` start from proportional weights.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((cfg.n, cfg.d))
    if cfg.labels == "random":
        y = rng.integers(0, cfg.classes, size=cfg.n)
    else:
        y = rng.permutation(np.repeat(np.arange(cfg.classes), cfg.n // cfg.classes))
    Y = np.eye(cfg.classes)[y]
    WC = rng.standard_normal((cfg.d, cfg.classes)) * cfg.readout_scale / math.sqrt(cfg.d)
    W0 = sigma * rng.standard_normal((3, cfg.d, cfg.d))
    return X, Y, WC, W0


def _softmax(u: np.ndarray) -> np.ndarray:
    u = u - u.max(axis=-1, keepdims=True)
    e = np.exp(u)
    return e / e.sum(axis=-1, keepdims=True)


def forward(W: np.ndarray, X: np.ndarray, WC: np.ndarray) -> dict[str, np.ndarray]:
    """Forward pass (Sec. 4.1), batched over leading dims.

    Args:
        W: ``(..., 3, d, d)`` stacked ``W_Q, W_K, W_V``.
        X: ``(..., n, d)``.
        WC: ``(..., d, C)``.

    Returns:
        ``Q, K, V (..., n, d)``, ``M, A (..., n, n)``, ``H (..., n, d)``, ``Z, P (..., n, C)``.
    """
    d = X.shape[-1]
    Q = X @ W[..., 0, :, :]  # (..., n, d)
    K = X @ W[..., 1, :, :]
    V = X @ W[..., 2, :, :]
    M = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d)  # (..., n, n)
    A = _softmax(M)
    H = A @ V  # (..., n, d)
    Z = H @ WC  # (..., n, C)
    return {"Q": Q, "K": K, "V": V, "M": M, "A": A, "H": H, "Z": Z, "P": _softmax(Z)}


def loss_and_grads(W: np.ndarray, X: np.ndarray, Y: np.ndarray, WC: np.ndarray):
    """Loss (Eq. 2) and exact gradients w.r.t. ``W_Q, W_K, W_V`` (App. B–C, Eqs. 40–44, 102–107).

    ``G_Z = (P − Y)/n``, ``G_H = G_Z W_C^T``, ``G^V = X^T A^T G_H``, ``G_A = G_H V^T``,
    ``G_M = A ⊙ (G_A − rowsum(A ⊙ G_A))`` (row-wise ``J(a_i) G_{A,i}``, ``J = diag(a) − aa^T``),
    ``G^Q = X^T G_M K / √d``, ``G^K = X^T G_M^T Q / √d``.

    Returns:
        ``(loss (...,), grads (..., 3, d, d), cache)`` where ``cache`` is the forward dict plus
        ``G_H``.
    """
    f = forward(W, X, WC)
    n, d = X.shape[-2], X.shape[-1]
    logp = np.log(np.maximum(np.sum(f["P"] * Y, axis=-1), 1e-300))
    loss = -np.mean(logp, axis=-1)
    GZ = (f["P"] - Y) / n  # (..., n, C)
    GH = GZ @ np.swapaxes(WC, -1, -2)  # (..., n, d)
    Xt = np.swapaxes(X, -1, -2)
    GV = Xt @ np.swapaxes(f["A"], -1, -2) @ GH  # (..., d, d)
    GA = GH @ np.swapaxes(f["V"], -1, -2)  # (..., n, n)
    GM = f["A"] * (GA - np.sum(f["A"] * GA, axis=-1, keepdims=True))
    GQ = Xt @ GM @ f["K"] / math.sqrt(d)
    GK = Xt @ np.swapaxes(GM, -1, -2) @ f["Q"] / math.sqrt(d)
    f["G_H"] = GH
    return loss, np.stack([GQ, GK, GV], axis=-3), f


def gap(u: np.ndarray) -> np.ndarray:
    """Definition 4.6: ``gap(u) = u_{j*} − max_{j≠j*} u_j`` along the last axis."""
    s = np.sort(u, axis=-1)
    return s[..., -1] - s[..., -2]


def margins(cache: dict, Y: np.ndarray, nuclear: np.ndarray, d: int) -> dict[str, np.ndarray]:
    """Assumption 4.7 margins from a forward cache and the nuclear norms ``(..., 3)``.

    Returns:
        ``gamma_min`` (``min_i gap(M̄_i)`` with Assumption 4.7's ``M̄ = M / (τ^Q τ^K)``),
        ``gamma_min_proof`` (App. C (119)'s ``M̄ = √d M / (τ^Q τ^K)``; = √d ``gamma_min``), and
        ``omega_min`` (``min_i Z̄_{i,y_i} − max_{c≠y_i} Z̄_{i,c}``, ``Z̄ = Z / τ^V``; signed, > 0 iff
        every position is classified correctly).
    """
    tq, tk, tv = nuclear[..., 0], nuclear[..., 1], nuclear[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.min(gap(cache["M"]), axis=-1) / (tq * tk)
        Z = cache["Z"]
        zy = np.sum(Z * Y, axis=-1)
        zother = np.max(np.where(Y > 0, -np.inf, Z), axis=-1)
        om = np.min(zy - zother, axis=-1) / tv
    return {"gamma_min": g, "gamma_min_proof": g * math.sqrt(d), "omega_min": om}


def _svals(W: np.ndarray) -> np.ndarray:
    return np.linalg.svd(W, compute_uv=False)  # (..., d)


def train(cfg: ToyConfig, *, progress: bool = False):
    """Full-batch GD on every run of ``cfg.grid()`` at once; every-step metrics as a Dataset.

    Args:
        cfg: the configuration.
        progress: show a tqdm bar.

    Returns:
        ``xarray.Dataset`` with dims ``run`` (coords ``seed``, ``eta``, ``sigma``), ``step``
        (``0..steps``), ``matrix`` (Q, K, V); per-step variables ``loss``, ``frobenius``,
        ``nuclear``, ``sigma_max``, ``sigma_min``, ``grad_norm``; per-transition variables (index
        ``t`` = step t → t+1, NaN at the last step) ``delta_sigma``, ``a4_bound``, ``a4_ratio``,
        ``delta_loss``; margins ``gamma_min``, ``gamma_min_proof``, ``omega_min``; and the full
        spectra ``spectrum`` at ``keep_spectra`` log-spaced steps. ``status``/``message`` attrs
        say whether every run stayed finite.
    """
    import xarray as xr

    runs = cfg.grid()
    R, T, d = len(runs), cfg.steps, cfg.d
    probs = {}
    Xs, Ys, WCs, Ws = [], [], [], []
    for seed, _eta, sig in runs:
        if seed not in probs:
            probs[seed] = make_problem(cfg, seed, 1.0)
        X, Y, WC, W1 = probs[seed]
        Xs.append(X), Ys.append(Y), WCs.append(WC), Ws.append(sig * W1)
    X, Y, WC, W = map(np.stack, (Xs, Ys, WCs, Ws))  # (R, ...)
    eta = np.array([e for _, e, _ in runs])[:, None, None, None]

    loss = np.full((R, T + 1), np.nan)
    fro = np.full((R, T + 1, 3), np.nan)
    nuc, smax, smin, gnorm = (np.full((R, T + 1, 3), np.nan) for _ in range(4))
    dsig, bound = np.full((R, T + 1, 3), np.nan), np.full((R, T + 1, 3), np.nan)
    marg = {k: np.full((R, T + 1), np.nan) for k in ("gamma_min", "gamma_min_proof", "omega_min")}
    keep = np.unique(np.round(np.geomspace(1, T, cfg.keep_spectra)).astype(int))
    keep = np.unique(np.concatenate([[0], keep, [T]]))
    spectra = np.full((R, keep.size, 3, d), np.nan)
    keep_idx = {int(s): i for i, s in enumerate(keep)}

    sqrt_r = math.sqrt(d)
    it = range(T + 1)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc="sosd toy GD", unit="step")
    s_prev = p_prev = None
    W_prev = None
    status, message = "success", "all runs finite"
    for t in it:
        L, G, cache = loss_and_grads(W, X, Y, WC)
        s = _svals(W)  # (R, 3, d)
        tau = s.sum(-1)
        loss[:, t] = L
        fro[:, t] = np.sqrt((s**2).sum(-1))
        nuc[:, t] = tau
        smax[:, t], smin[:, t] = s[..., 0], s[..., -1]
        gnorm[:, t] = np.sqrt((G**2).sum((-1, -2)))
        for k, v in margins(cache, Y, tau, d).items():
            marg[k][:, t] = v
        if t in keep_idx:
            spectra[:, keep_idx[t]] = s
        p = s / tau[..., None]
        if s_prev is not None:
            dsig[:, t - 1] = np.sqrt(((p - p_prev) ** 2).sum(-1))
            dW = np.sqrt(((W - W_prev) ** 2).sum((-1, -2)))
            bound[:, t - 1] = (1 + sqrt_r) * dW / np.minimum(tau, nuc[:, t - 1])
        if not (np.all(np.isfinite(L)) and np.all(np.isfinite(s))):
            status, message = "failed", (f"non-finite loss or weights at step {t} (diverged; "
                                         "lower `eta`)")  # fmt: skip
            break
        if t == T:
            break
        s_prev, p_prev, W_prev = s, p, W
        W = W - eta * G
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = dsig / bound
    dloss = np.full((R, T + 1), np.nan)
    dloss[:, :-1] = loss[:, :-1] - loss[:, 1:]
    seeds = [r[0] for r in runs]
    ds = xr.Dataset(
        {
            "loss": (("run", "step"), loss),
            "delta_loss": (("run", "step"), dloss),
            "frobenius": (("run", "step", "matrix"), fro),
            "nuclear": (("run", "step", "matrix"), nuc),
            "sigma_max": (("run", "step", "matrix"), smax),
            "sigma_min": (("run", "step", "matrix"), smin),
            "grad_norm": (("run", "step", "matrix"), gnorm),
            "delta_sigma": (("run", "step", "matrix"), dsig),
            "a4_bound": (("run", "step", "matrix"), bound),
            "a4_ratio": (("run", "step", "matrix"), ratio),
            **{k: (("run", "step"), v) for k, v in marg.items()},
            "spectrum": (("run", "spectrum_step", "matrix", "k"), spectra),
        },
        coords={
            "run": np.arange(R),
            "seed": (("run",), np.array(seeds)),
            "eta": (("run",), np.array([r[1] for r in runs])),
            "sigma": (("run",), np.array([r[2] for r in runs])),
            "step": np.arange(T + 1),
            "matrix": list(MATRICES),
            "spectrum_step": keep,
        },
        attrs={
            "status": status,
            "message": message,
            "model": "seed 002 Sec. 4.1: 1-layer 1-head softmax attention, fixed W_C, full-batch "
                     "GD, float64",
            "transition_convention": "delta_sigma, a4_bound, a4_ratio, delta_loss at step t "
                                     "refer to the GD step t -> t+1",
            **{k: v for k, v in dataclasses.asdict(cfg).items()
               if k not in ("sigma", "eta", "seeds")},
        },
    )  # fmt: skip
    return ds


# ---------------------------------------------------------------------------------------------
# Measurements of the paper's claims on one run
# ---------------------------------------------------------------------------------------------


def _first_below_forever(x: np.ndarray, eps: float) -> float:
    """First index from which ``x < eps`` holds to the end (NaN entries at the end ignored)."""
    fin = np.isfinite(x)
    if not fin.any():
        return math.nan
    last = np.nonzero(fin)[0][-1]
    above = np.nonzero(fin[: last + 1] & (x[: last + 1] >= eps))[0]
    if above.size and above[-1] == last:
        return math.nan
    return float(above[-1] + 1) if above.size else 0.0


def _slope(x: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 3:
        return math.nan, int(ok.sum())
    return float(np.polyfit(np.log10(x[ok]), np.log10(y[ok]), 1)[0]), int(ok.sum())


def summarize(ds, run: int = 0, *, eps: float = 1e-4,
              windows: Sequence[tuple[int, int]] = ((300, 3000), (1000, 10000), (3000, 20000)),
              ) -> dict:  # fmt: skip
    """Numbers behind the paper's Section 4 claims for one run of :func:`train`.

    Args:
        ds: the result of :func:`train`.
        run: which run.
        eps: ε of the theory's ``T_ε`` (first step from which ΔΣ < ε for good).
        windows: step windows for the slope of ``log ΔL`` against ``log ΔΣ``.

    Returns:
        A JSON-ready dict: ``norm_violations`` (steps where a Frobenius / nuclear norm did not
        grow, per matrix; Assumption 4.1), ``first_violation``, ``peak_step`` and ``T_eps`` per
        matrix (V-before-QK ordering), ``delta_sigma_at`` (ΔΣ at log-spaced steps),
        ``slopes`` (log ΔL vs log ΔΣ_QKV, and vs log(η / min τ)), ``a4_ratio_max``,
        ``condition_max`` (Assumption 4.3), ``grad_max`` (the G of Assumption 4.3),
        margins at the end and the first step from which ``omega_min > 0`` for good.
    """
    r = ds.isel(run=run)
    T = int(r.step.values[-1])
    out: dict = {"seed": int(r.seed), "eta": float(r.eta), "sigma": float(r.sigma), "steps": T,
                 "status": ds.attrs.get("status", "")}  # fmt: skip
    fro = r.frobenius.values  # (T+1, 3)
    nuc = r.nuclear.values
    dfro, dnuc = np.diff(fro, axis=0), np.diff(nuc, axis=0)
    out["norm_violations"] = {
        m: {"frobenius": int(np.sum(dfro[:, j] <= 0)), "nuclear": int(np.sum(dnuc[:, j] <= 0))}
        for j, m in enumerate(MATRICES)
    }
    out["first_violation"] = {
        m: (int(np.argmax(dfro[:, j] <= 0)) if np.any(dfro[:, j] <= 0) else None)
        for j, m in enumerate(MATRICES)
    }
    dsg = r.delta_sigma.values  # (T+1, 3)
    out["peak_step"] = {m: int(np.nanargmax(dsg[:, j])) for j, m in enumerate(MATRICES)}
    out["T_eps"] = {m: _first_below_forever(dsg[:, j], eps) for j, m in enumerate(MATRICES)}
    out["eps"] = eps
    tv, tq, tk = out["T_eps"]["V"], out["T_eps"]["Q"], out["T_eps"]["K"]
    out["v_before_qk"] = bool(tv < min(tq, tk)) if all(map(math.isfinite, (tv, tq, tk))) else None
    at = [s for s in (1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 20000, 50000) if s < T]
    out["delta_sigma_at"] = {str(s): {m: float(dsg[s, j]) for j, m in enumerate(MATRICES)}
                             for s in at}  # fmt: skip
    comb = np.sqrt(np.nansum(dsg**2, axis=1))
    comb[np.all(np.isnan(dsg), axis=1)] = np.nan
    dl = r.delta_loss.values
    eps_t = float(r.eta) / np.min(nuc, axis=1)
    slopes = {}
    for a, b in windows:
        if b > T:
            continue
        s1, n1 = _slope(comb[a:b], dl[a:b])
        s2, _ = _slope(eps_t[a:b], dl[a:b])
        slopes[f"{a}-{b}"] = {"dL_vs_dSigma": s1, "dL_vs_eta_over_tau": s2, "n": n1,
                              "dL_positive_share": float(np.mean(dl[a:b] > 0))}  # fmt: skip
    out["slopes"] = slopes
    out["a4_ratio_max"] = float(np.nanmax(r.a4_ratio.values))
    out["condition_max"] = {m: float(np.nanmax(r.sigma_max.values[:, j] / r.sigma_min.values[:, j]))
                            for j, m in enumerate(MATRICES)}  # fmt: skip
    out["grad_max"] = {m: float(np.nanmax(r.grad_norm.values[:, j]))
                       for j, m in enumerate(MATRICES)}  # fmt: skip
    om = r.omega_min.values
    out["omega_min_final"] = float(om[-1])
    out["gamma_min_final"] = float(r.gamma_min.values[-1])
    out["gamma_min_proof_final"] = float(r.gamma_min_proof.values[-1])
    neg = np.nonzero(~(om > 0))[0]
    out["omega_positive_from"] = (None if neg.size and neg[-1] == T
                                  else int(neg[-1] + 1) if neg.size else 0)  # fmt: skip
    # What shrinks ΔΣ after the onset: log ΔΣ ≈ log η + log ||G|| − log τ + log(A.4 ratio), so the
    # decades lost by ΔΣ split into a gradient part and a norm-growth part (Theorem 4.5 credits
    # norm growth alone).
    t_on = [v for v in out["T_eps"].values() if math.isfinite(v)]
    t1 = int(max(t_on)) if len(t_on) == 3 else None
    mech = {}
    if t1 is not None and t1 < T - 10:
        g, tau = r.grad_norm.values, nuc
        for j, m in enumerate(MATRICES):
            mech[m] = {
                "from_step": t1,
                "decades_delta_sigma": float(np.log10(dsg[T - 1, j] / dsg[t1, j])),
                "decades_grad_norm": float(np.log10(g[T - 1, j] / g[t1, j])),
                "decades_nuclear_norm": float(np.log10(tau[T - 1, j] / tau[t1, j])),
            }
    out["collapse_decomposition"] = mech
    out["loss"] = {"initial": float(r.loss.values[0]), "final": float(r.loss.values[-1])}
    out["norms"] = {m: {"frobenius_0": float(fro[0, j]), "frobenius_T": float(fro[-1, j])}
                    for j, m in enumerate(MATRICES)}  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------
# Onset sweep over η and σ (Theorem 4.5's scaling)
# ---------------------------------------------------------------------------------------------


def theorem45_hitting_times(c: float, *, q0: float, v0: float, c_m: float, c_v: float):
    """Corrected Theorem 4.5 hitting times (flow time ``τ = ηt``) of a Frobenius threshold ``c``.

    ``T_V = (c − v(0))/C_V`` from ``v ≥ v(0) + C_V τ`` (App. B (55)) and ``T_QK`` the positive
    root of ``½ C_M C_V τ² + C_M v(0) τ = ln(c/q(0))`` (App. B (76)); zero when the threshold is
    already met. Sufficient thresholds: ``c = (1+√d)ηG/ε`` (always) or ``κ(1+√d)ηG/(√d ε)``
    (condition number κ); the paper's ``(1+√d)ηG/(√d ε)`` is not sufficient (``theory.sosd``).
    """
    tv = max((c - v0) / c_v, 0.0)
    if c <= q0:
        return tv, 0.0
    a = c_m * v0
    return tv, (-a + math.sqrt(a * a + 2 * c_m * c_v * math.log(c / q0))) / (c_m * c_v)


def theorem45_constants(cfg: ToyConfig, seed: int, sigma: float) -> dict[str, float]:
    """App. B's constants at initialization: ``C_V`` (52), ``C_Q``, ``C_K`` (69, 72), norms, κ.

    ``λ_min(X)`` is the smallest singular value of ``X`` (n ≤ d); ``κ_•`` the condition numbers at
    init (the most favourable reading of Assumption 4.3's bound); ``C_M = min(C_Q, C_K)``.
    """
    X, Y, WC, W0 = make_problem(cfg, seed, sigma)
    _, _, cache = loss_and_grads(W0, X, Y, WC)
    n, d = cfg.n, cfg.d
    lam = float(np.linalg.svd(X, compute_uv=False)[-1])
    gh = float(np.linalg.norm(cache["G_H"]))
    s = np.linalg.svd(W0, compute_uv=False)  # (3, d)
    kq, kk, kv = (float(x) for x in s[:, 0] / s[:, -1])
    base = (math.sqrt(n) - 1) * lam**3 * gh / (n**1.5 * d**2.5)
    c_q, c_k = base / (kk * kv), base / (kq * kv)
    fro = np.sqrt((s**2).sum(-1))
    return {"C_V": lam * gh / math.sqrt(n), "C_Q": c_q, "C_K": c_k, "C_M": min(c_q, c_k),
            "q0": float(min(fro[0], fro[1])), "v0": float(fro[2]), "lambda_min_X": lam,
            "G_H0": gh, "kappa_Q": kq, "kappa_K": kk, "kappa_V": kv}  # fmt: skip


def theorem45_prediction(cfg: ToyConfig, seed: int, sigma: float, eta: float, eps: float,
                         grad_max: float) -> dict[str, float]:  # fmt: skip
    """Theorem 4.5's onset (in GD steps) from its own constants, corrected and as printed.

    Corrected: threshold ``c = (1+√d)ηG/ε`` with ``G = grad_max`` (Assumption 4.3(3)), hitting
    times of :func:`theorem45_hitting_times` divided by η. Printed: App. B (59) and (79) verbatim
    (NaN where the printed root is imaginary).
    """
    k = theorem45_constants(cfg, seed, sigma)
    d = cfg.d
    c = (1 + math.sqrt(d)) * eta * grad_max / eps
    tv, tqk = theorem45_hitting_times(c, q0=k["q0"], v0=k["v0"], c_m=k["C_M"], c_v=k["C_V"])
    lam = math.log(1 + math.sqrt(d)) - math.log(eps * k["q0"] * math.sqrt(d))
    ptv = ((1 + math.sqrt(d)) * eta * grad_max - eps * k["v0"]) / (eps * k["C_V"] * math.sqrt(d))
    a = k["C_M"] * k["v0"]
    disc = a * a + 2 * a * lam
    ptq = (-a + math.sqrt(disc)) / (k["C_M"] * k["C_V"]) if disc >= 0 else math.nan
    return {**k, "threshold": c, "T_V": tv / eta, "T_QK": tqk / eta,
            "T_V_printed": ptv / eta, "T_QK_printed": ptq / eta}  # fmt: skip


def _qk_growth_coefficient(q: np.ndarray, tau: np.ndarray, upto: int) -> float:
    """Fit ``ln(q/q0) = a τ² + b τ`` on ``[0, upto]``; return ``a`` (= ½ C_M C_V in Eq. 76)."""
    if upto < 5:
        return math.nan
    y = np.log(q[: upto + 1] / q[0])
    x = tau[: upto + 1]
    coef, *_ = np.linalg.lstsq(np.stack([x**2, x], axis=1), y, rcond=None)
    return float(coef[0])


def onset_sweep(ds, *, eps: float = 1e-4, eps_per_eta: float = 2e-4):
    """Onset times of every run of a :func:`train` grid, and Theorem 4.5's scaling tests.

    For each run and matrix: ``T_eps`` (the theory's ``T_ε`` at fixed ``eps``), ``T_eps_scaled``
    (at ``ε = eps_per_eta · η``, i.e. the same bound in flow time ``ηt``), the ΔΣ peak step, and the
    Eq. (76) growth coefficient ``a = ½ C_M C_V`` fitted to ``ln q`` (Q's Frobenius norm) against
    flow time up to Q's ΔΣ peak. For each run, Theorem 4.5's own prediction at ``eps``
    (:func:`theorem45_prediction`: constants of App. B at init, ``G`` = the run's largest gradient
    norm), corrected (``theorem_T_V``, ``theorem_T_QK``, GD steps) and as printed.

    The corrected Theorem 4.5 (App. B, Eqs. 74–79 with the fixes of ``theory/sosd.py``) predicts,
    in flow time ``τ = ηt`` and for small ``v(0)``: ``τ_QK² ≈ ln(c/q0) / a``, so at fixed ``c``
    (ε ∝ η) ``η T_QK`` does not depend on η, and ``(η T_QK)²`` is linear in ``ln(1/σ)`` with slope
    ``1/a``.

    Returns:
        ``(onsets, fits)``: an ``xarray.Dataset`` (dims ``run``, ``matrix``) and a dict with, per
        (seed, σ), the exponent of ``T ∝ η^b`` at fixed and scaled ε, and per (seed, η) the slope
        and R² of ``(ηT_Q)²`` against ``ln(1/σ)`` (Eq. 76 predicts a straight line).
    """
    import xarray as xr

    R = ds.sizes["run"]
    cfg = ToyConfig(**{k: ds.attrs[k] for k in ("n", "d", "classes", "steps", "readout_scale",
                                                "labels")})  # fmt: skip
    pred = {k: np.full(R, np.nan) for k in ("T_V", "T_QK", "T_V_printed", "T_QK_printed",
                                             "C_V", "C_M")}  # fmt: skip
    Tf = np.full((R, 3), np.nan)
    Ts = np.full((R, 3), np.nan)
    pk = np.full((R, 3), np.nan)
    a_fit = np.full(R, np.nan)
    for i in range(R):
        r = ds.isel(run=i)
        dsg = r.delta_sigma.values
        eta = float(r.eta)
        for j in range(3):
            Tf[i, j] = _first_below_forever(dsg[:, j], eps)
            Ts[i, j] = _first_below_forever(dsg[:, j], eps_per_eta * eta)
            pk[i, j] = float(np.nanargmax(dsg[:, j]))
        tau = eta * r.step.values.astype(float)
        a_fit[i] = _qk_growth_coefficient(r.frobenius.values[:, 0], tau, int(pk[i, 0]))
        p = theorem45_prediction(cfg, int(r.seed), float(r.sigma), eta, eps,
                                 float(np.nanmax(r.grad_norm.values)))  # fmt: skip
        for k in pred:
            pred[k][i] = p[k]
    out = xr.Dataset(
        {
            "T_eps": (("run", "matrix"), Tf),
            "T_eps_scaled": (("run", "matrix"), Ts),
            "peak_step": (("run", "matrix"), pk),
            "qk_growth_a": (("run",), a_fit),
            **{f"theorem_{k}": (("run",), v) for k, v in pred.items()},
        },
        coords={"run": ds.run.values, "seed": ("run", ds.seed.values),
                "eta": ("run", ds.eta.values), "sigma": ("run", ds.sigma.values),
                "matrix": list(MATRICES)},  # fmt: skip
        attrs={"eps": eps, "eps_per_eta": eps_per_eta},
    )
    fits: dict = {"eta_exponent": [], "sigma_law": []}
    seeds, etas, sigmas = (np.unique(ds[c].values) for c in ("seed", "eta", "sigma"))
    for s in seeds:
        for g in sigmas:
            sel = (ds.seed.values == s) & (ds.sigma.values == g)
            e = ds.eta.values[sel]
            row = {"seed": int(s), "sigma": float(g)}
            for name, arr in (("fixed", Tf), ("scaled", Ts)):
                t = arr[sel, 0]
                ok = np.isfinite(t) & (t > 0)
                row[f"exponent_{name}"] = (float(np.polyfit(np.log(e[ok]), np.log(t[ok]), 1)[0])
                                           if ok.sum() >= 3 else math.nan)  # fmt: skip
            fits["eta_exponent"].append(row)
        for e_ in etas:
            sel = (ds.seed.values == s) & (ds.eta.values == e_)
            t = Ts[sel, 0] * e_
            x = np.log(1.0 / ds.sigma.values[sel])
            ok = np.isfinite(t)
            row = {"seed": int(s), "eta": float(e_), "n": int(ok.sum())}
            if ok.sum() >= 3:
                coef = np.polyfit(x[ok], t[ok] ** 2, 1)
                pred = np.polyval(coef, x[ok])
                ss = float(np.sum((t[ok] ** 2 - np.mean(t[ok] ** 2)) ** 2))
                row.update(slope=float(coef[0]),
                           r2=float(1 - np.sum((t[ok] ** 2 - pred) ** 2) / ss) if ss else math.nan)
            fits["sigma_law"].append(row)
    return out, fits


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 0.1,0.2; got {text!r}") from None


PROG = "python -m sims.sosd_toy"


def build_parser():
    """The ``python -m sims.sosd_toy`` argument parser."""
    from sims.runtime.cli import ArgumentParser, seed_list

    p = ArgumentParser(
        prog=PROG,
        description="Seed 002 Section 4 toy model (1-layer softmax attention, fixed readout, "
                    "full-batch GD, float64): SD variation every step, Lemma A.4 bound, norm "
                    "growth, margins, onset times. Memory and time are estimated first: a run "
                    "that does not fit in memory is refused.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )  # fmt: skip
    d = ToyConfig()
    p.add_argument("--n", type=int, default=d.n,
                   help="sequence length, at most --d (X X^T full rank, App. B eq. 48)")
    p.add_argument("--d", type=int, default=d.d, help="feature dimension")
    p.add_argument("--classes", type=int, default=d.classes, help="number of classes C")
    p.add_argument("--sigma", type=_floats, default=(d.sigma,), help="init std(s), e.g. 0.01,0.1")
    p.add_argument("--eta", type=_floats, default=(d.eta,), help="learning rate(s), e.g. 0.25,0.5")
    p.add_argument("--steps", type=int, default=d.steps, help="GD steps")
    p.add_argument("--seeds", type=seed_list, default=(0,),
                   help="distinct non-negative seeds, comma-separated")
    p.add_argument("--eps", type=float, default=1e-4, help="ε of the onset T_ε")
    p.add_argument("--out", type=Path, default=Path("results/sosd_toy/cli"),
                   help="output folder (toy.nc, summary.json)")
    return p  # fmt: skip


#: Costs behind :func:`estimate`: seconds per step and run, fixed (Python and small products:
#: the default d = 32 run took 13 s for 20,000 steps on 2 idle cores, 0.65 ms per step) and per
#: d³ (three SVDs of d × d per step: single-threaded CPU seconds at d = 32 and 128 give
#: 0.53 ms + 2e-9 d³); floats kept per step and run (loss, norms, ΔΣ, bounds, margins: 30
#: arrays, measured 244 B per step with the summary), doubled. The old 4e-7 d³ + 1 ms (4.7 min
#: announced for a 13-s default run) was 20x too high.
_SECONDS_PER_D3, _SECONDS_PER_STEP, _FLOATS_PER_STEP = 2e-9, 6.5e-4, 60


def estimate(cfg: ToyConfig):
    """Memory and time of :func:`train` for ``cfg``: runs × (steps × records + d² weights)."""
    from sims.runtime.cli import Estimate

    runs, d, n, T = len(cfg.grid()), cfg.d, cfg.n, cfg.steps
    floats = runs * (T * _FLOATS_PER_STEP + 20 * d * d + cfg.keep_spectra * 3 * d + n * d + n * n)
    return Estimate(
        memory=100e6 + 8.0 * floats,
        seconds=runs * T * (_SECONDS_PER_D3 * d**3 + _SECONDS_PER_STEP),
        what=f"--d {d} --n {n} --steps {T} ({runs} run{'s' * (runs > 1)})",
        fix="lower --d, --steps or the number of runs",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the toy model, print the per-run summary and write the results.

    Bad input exits with status 2 and one line before anything is computed or written; Ctrl-C
    exits with status 130 and one line.
    """
    from sims.runtime.cli import run_cli

    return run_cli(_main, argv, prog=PROG)


def _main(argv: Sequence[str] | None) -> int:
    import json

    from sims.runtime.cli import UsageError, check_resources
    from sims.runtime.io import ensure_writable, provenance, to_jsonable, write_json, write_netcdf

    args = build_parser().parse_args(argv)
    try:
        cfg = ToyConfig(n=args.n, d=args.d, classes=args.classes, sigma=args.sigma,
                        eta=args.eta, steps=args.steps, seeds=args.seeds)  # fmt: skip
        if cfg.n > cfg.d:
            raise ValueError(
                f"`--n` {cfg.n} exceeds `--d` {cfg.d}: the toy model needs n <= d (X X^T full "
                "rank, App. B eq. 48); lower --n or raise --d."
            )
        if not (math.isfinite(args.eps) and args.eps > 0):
            raise ValueError(f"`--eps` must be positive; got {args.eps!r}.")
        ensure_writable(args.out, kind="dir", arg="--out")
    except ValueError as err:
        raise UsageError(str(err)) from None
    check_resources(estimate(cfg), prog=PROG)
    t0 = time.perf_counter()
    try:
        ds = train(cfg, progress=True)
    except KeyboardInterrupt:
        raise KeyboardInterrupt("interrupted before any result was written") from None
    meta = provenance(cfg, seed=cfg.seeds[0], status=ds.attrs["status"],
                      extra={"seconds": time.perf_counter() - t0})  # fmt: skip
    write_netcdf(args.out / "toy.nc", ds, meta=meta)
    summaries = [summarize(ds, i, eps=args.eps) for i in range(ds.sizes["run"])]
    write_json(args.out / "summary.json", {"runs": summaries}, meta=meta)
    for s in summaries:
        viol = {m: v["frobenius"] for m, v in s["norm_violations"].items()}
        print(f"seed {s['seed']} eta {s['eta']:g} sigma {s['sigma']:g}: loss "
              f"{s['loss']['initial']:.3f} -> {s['loss']['final']:.3g}; T_eps {s['T_eps']}; "
              f"peak {s['peak_step']}; Assumption 4.1 violations {viol}; "
              f"max A.4 ratio {s['a4_ratio_max']:.3f}")  # fmt: skip
    print(json.dumps(to_jsonable({"status": ds.attrs["status"], "message": ds.attrs["message"]})))
    print(f"wrote {args.out / 'toy.nc'} and {args.out / 'summary.json'}")
    return 0 if ds.attrs["status"] == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
