"""Simulated learning times vs the Theorem 4.2 ODE predictions (Sections 4.2–4.3).

Setting of Theorem 4.2 / 4.4: ATTN_S on the population loss, the active head on the ansatz
``k_i = q_i = v_i e_i`` starting at ``v_i = ε``. GD (eq. 2) and both SAM forms (eq. 6, and the
first-order flow of eq. 8) preserve the ansatz exactly, and with orthogonal eigen-directions the
features evolve independently, so each feature is simulated as its own single-head run (``vmap``
over features × ρ). Time mapping: ``τ Ẇ = -½ ∇L`` with ``τ = 1`` means one step of size ``η``
advances ``t`` by ``2η``.

The simulated time for feature ``i`` is the first step at which ``v_i`` reaches
``fraction × v_i*`` (``v_i* = (λ_i + (λ_i + tr Σ)/N)^{-1/3}``, eq. 3); the prediction is the
learning time of the scalar ODE from :mod:`sims.scalar_odes` (full ODE of App. C.2 and the
leading-order eqs. 9–10) between the same endpoints.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import xarray as xr

from sims.entropy import shannon_entropy
from sims.scalar_odes import attn_s_ode, learning_time

from .data import make_covariance
from .models import AttnSParams
from .stats import a_coefficients, eigh_desc, fixed_point_values, population_moments
from .train import train_runs

__all__ = ["TheoryConfig", "theory_vs_sim"]


@dataclasses.dataclass(frozen=True)
class TheoryConfig:
    """Configuration of the theory-vs-simulation comparison.

    Attributes:
        d: dimension (eigenvalues ∝ 1..d, trace 1).
        n_context: ``N``.
        eps: common initial value ``ε`` of every active head.
        fraction: ``c``: learned when ``v_i >= c v_i*``.
        rhos: SAM radii (Theorem 4.4 needs ``ρ < (√3/2) ε``).
        learning_rate: ``η`` (time per step ``2η``).
        num_steps: steps per run.
    """

    d: int = 4
    n_context: int = 31
    eps: float = 0.05
    fraction: float = 0.5
    rhos: tuple[float, ...] = (0.0, 0.005, 0.01, 0.02, 0.03, 0.04)
    learning_rate: float = 0.1
    num_steps: int = 30_000

    def __post_init__(self):
        if not 0 < self.eps:
            raise ValueError(f"`eps` must be > 0; got {self.eps!r}.")
        if any((not np.isfinite(r)) or r < 0 for r in self.rhos):
            raise ValueError(f"`rhos` must be finite and >= 0; got {self.rhos!r}.")
        if not 0 < self.fraction <= 1:
            raise ValueError(f"`fraction` must be in (0, 1]; got {self.fraction!r}.")


def theory_vs_sim(cfg: TheoryConfig = TheoryConfig()) -> xr.Dataset:
    """Learning times and entropies: discrete GD/SAM, first-order SAM, and the ODEs.

    Returns:
        Dataset with ``time (source, rho, feature)`` for sources ``sim_sam`` (eq. 6; ρ = 0 is
        GD), ``sim_sam_flow`` (eq. 8), ``ode_full`` and ``ode_truncated``, and
        ``entropy (source, rho)``.
    """
    cov = make_covariance("linear", cfg.d, rotate=False)
    lam, e = eigh_desc(cov)
    vstar = fixed_point_values(cov, cfg.n_context)
    a = a_coefficients(cov, cfg.n_context)
    pop = population_moments(cov, cfg.n_context)
    rhos = np.asarray(cfg.rhos, dtype=float)
    nr, d = rhos.size, cfg.d
    # runs = (rho, feature): one head on e_i at ε
    feat = np.tile(np.arange(d), nr)
    rho_run = np.repeat(rhos, d)
    dirs = e[:, feat].T  # (R, d)
    p0 = AttnSParams(
        jnp.full((nr * d, 1), cfg.eps),
        jnp.asarray(cfg.eps * dirs)[:, None, None, :],
        jnp.asarray(cfg.eps * dirs)[:, None, None, :],
    )
    target = (cfg.fraction * vstar) ** 3  # component threshold: v³ = e_iᵀ M e_i
    times = {}
    for name, opt in (("sim_sam", "sam"), ("sim_sam_flow", "sam_flow")):
        res = train_runs(
            p0, pop, cfg.num_steps, optimizer=opt, learning_rate=cfg.learning_rate, rho=rho_run,
            eigvecs=e, record_every=cfg.num_steps, raise_on_failure=False,
        )  # fmt: skip
        comp = res.ds.component.values  # (R, T, d)
        own = np.stack([comp[r, :, feat[r]] for r in range(nr * d)])  # (R, T)
        hit = own >= target[feat][:, None]
        steps = np.where(hit.any(1), np.argmax(hit, axis=1), np.nan)
        t = steps * 2 * cfg.learning_rate
        times[name] = t.reshape(nr, d)
    for name, dyn in (("ode_full", "full"), ("ode_truncated", "truncated")):
        out = np.empty((nr, d))
        for i, r in enumerate(rhos):
            for j in range(d):
                ode = attn_s_ode(lam[j], rho=r, dynamics=dyn, a=a[j])
                out[i, j] = learning_time(ode, cfg.eps, cfg.fraction * vstar[j]).time
        times[name] = out
    sources = list(times)
    tarr = np.stack([times[s] for s in sources])
    ent = np.full(tarr.shape[:2], np.nan)
    for i in range(tarr.shape[0]):
        for j in range(nr):
            if np.all(np.isfinite(tarr[i, j])):
                ent[i, j] = shannon_entropy(tarr[i, j])
    return xr.Dataset(
        {
            "time": (("source", "rho", "feature"), tarr),
            "entropy": (("source", "rho"), ent),
            "eigenvalue": (("feature",), lam),
            "v_star": (("feature",), vstar),
        },
        coords={"source": sources, "rho": rhos, "feature": np.arange(d)},
        attrs={"config": dataclasses.asdict(cfg)},
    )
