r"""Head-coupling tensor dynamics of seed 004 (Section 3, App. D, Proposition 1, Theorems 1-2).

The regression model ``y = sum_k V_k X s_k`` with ``s_k = softmax(q_k)`` under isotropic data
(Assumption 1) has population loss ``L = 1/2 ||G - P||_F^2`` (+ noise), a tensor factorisation
with ``P = sum_k V_k (x) s_k`` and ``G = sum_a m_a V_a^* (x) s_a^*`` (Proposition 1). Its gradient
flow (exact in q-space) is

.. math::

    \dot V_i = (G - P) s_i, \qquad \dot q_i = \Pi(s_i)\,V_i^T (G - P), \qquad
    \Pi(s) = \mathrm{diag}(s) - s s^T.

Three integrators of it are here:

* :func:`full_rhs`: the ``d x d`` form (any ``V(0)``).
* :func:`reduced_rhs`: exact reduced coordinates ``V_i = sum_a C_{ia} V_a^*`` (``C in R^{H x h}``,
  ``Q in R^{H x T}``), valid whenever ``V(0)`` lies in ``span{V_a^*}`` (e.g. the paper's
  ``V(0) = 0``); ``d`` drops out. Compiled with numba when available.
* :func:`symmetric_rhs`: the competitive system of Theorem 1 (all heads equal, one head with the
  factor ``H``).

:func:`solve_flow` integrates the reduced flow with a stiff solver (LSODA) on a log time grid and
returns an ``xarray.Dataset`` (``C``, ``S``, ``loss``, ``loss_split``); :func:`stage_times`,
:func:`count_stages`, :func:`coupling_time` and :func:`discrete_flow` (GD / SAM steps on the same
loss, the beyond-the-paper comparison) analyse it.

Examples:
    >>> cfg = FlowConfig(T=10, t_max=200.0, n_eval=50)
    >>> res = solve_flow(cfg)
    >>> bool(res.success), res.ds["C"].dims
    (True, ('time', 'head', 'feature'))
"""

from __future__ import annotations

import dataclasses
import math
import time as _time
from collections.abc import Sequence

import numpy as np
from scipy.integrate import solve_ivp

try:
    import numba

    _HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    _HAVE_NUMBA = False

__all__ = [
    "FlowConfig",
    "FlowResult",
    "target_scales",
    "target_positions",
    "init_state",
    "reduced_rhs",
    "reduced_loss",
    "loss_split",
    "full_rhs",
    "full_loss",
    "symmetric_rhs",
    "lyapunov_phi",
    "softmax",
    "solve_flow",
    "solve_symmetric",
    "stage_times",
    "plateau_levels",
    "count_stages",
    "coupling_time",
    "coupling_times",
    "antisymmetric_jacobian",
    "discrete_flow",
    "METHODS",
]


def softmax(q: np.ndarray) -> np.ndarray:
    """Softmax over the last axis."""
    z = np.exp(q - q.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


@dataclasses.dataclass(frozen=True)
class FlowConfig:
    """The ODE experiment of App. C.6 / Fig. 10 (digest §4.8 and A13).

    Attributes:
        H: number of heads.
        h: number of true features (singleton positions ``p_a = a-1``, ``|I(k)| = 1``).
        T: sequence length (Fig. 10: 40).
        m: hierarchy ratio; ``m_a = m^{h-a} b0``.
        b0: base scale (unstated for the ODE; default 1, digest A13).
        init_std: standard deviation of the perturbation ``s_i(0) = 1/T + eps_i``; the paper's
            literal "eps I covariance, eps = 1e-6" is std 1e-3. Default 1e-6 (clean stages).
        seed: seed of the perturbation.
        t_max: integration horizon.
        n_eval: number of log-spaced output times in ``[t_min, t_max]``.
        t_min: first output time after 0.
        rtol: solver relative tolerance.
        atol: solver absolute tolerance.
        method: ``scipy.integrate.solve_ivp`` method (stiff: ``"LSODA"``, ``"Radau"``, ``"BDF"``).
    """

    H: int = 3
    h: int = 3
    T: int = 40
    m: float = 1.7
    b0: float = 1.0
    init_std: float = 1e-6
    seed: int = 0
    t_max: float = 1e4
    n_eval: int = 400
    t_min: float = 1e-2
    rtol: float = 1e-8
    atol: float = 1e-11
    method: str = "LSODA"

    def __post_init__(self) -> None:
        for name in ("H", "h", "T", "n_eval"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"`{name}` must be a positive int; got {v!r}.")
        if self.h > self.T:
            raise ValueError(
                f"`h`={self.h} features need distinct positions: `T` >= h; got T={self.T}."
            )
        for name in ("m", "b0", "t_min", "t_max", "rtol", "atol"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"`{name}` must be a finite number > 0; got {v!r}.")
        if not (isinstance(self.init_std, (int, float)) and math.isfinite(self.init_std)
                and self.init_std >= 0):  # fmt: skip
            raise ValueError(f"`init_std` must be a finite number >= 0; got {self.init_std!r}.")
        if not self.t_min < self.t_max:
            raise ValueError(f"need 0 < `t_min` < `t_max`; got {self.t_min!r}, {self.t_max!r}.")
        if self.method not in {"LSODA", "Radau", "BDF", "RK45", "DOP853"}:
            raise ValueError(
                f"`method`={self.method!r} unknown; use 'LSODA', 'Radau', 'BDF', 'RK45' or "
                "'DOP853'."
            )

    @property
    def scales(self) -> np.ndarray:
        """``(m_1, ..., m_h)``."""
        return target_scales(self.h, self.m, self.b0)


def target_scales(h: int, m: float, b0: float) -> np.ndarray:
    """``m_a = m^{h-a} b0`` (Table 1)."""
    return np.array([m ** (h - 1 - a) * b0 for a in range(h)], dtype=float)


def target_positions(h: int, T: int) -> np.ndarray:
    """``S^*``: ``(h, T)`` rows ``s_a^* = e_{p_a}`` with ``p_a = a-1`` (digest A13)."""
    S = np.zeros((h, T))
    S[np.arange(h), np.arange(h)] = 1.0
    return S


def init_state(cfg: FlowConfig) -> tuple[np.ndarray, np.ndarray]:
    """App. C.6 init: ``C = 0`` (``V_i = 0``) and ``s_i = 1/T + eps_i`` projected on the simplex.

    Returns ``(C0 (H, h), Q0 (H, T))`` with ``Q0 = log s_i(0)`` centred.
    """
    rng = np.random.default_rng(cfg.seed)
    s = 1.0 / cfg.T + cfg.init_std * rng.standard_normal((cfg.H, cfg.T))
    s = np.clip(s, 1e-12, None)
    s /= s.sum(1, keepdims=True)
    q = np.log(s)
    q -= q.mean(1, keepdims=True)
    return np.zeros((cfg.H, cfg.h)), q


# ---------------------------------------------------------------------------- reduced flow
def _reduced_rhs_np(y, mstar, Sstar, H, h, T):
    C = y[: H * h].reshape(H, h)
    Q = y[H * h :].reshape(H, T)
    S = softmax(Q)
    SS = S @ S.T  # (H, H) <s_i, s_j>
    dC = (S @ Sstar.T) * mstar[None, :] - SS @ C  # (H, h)
    g = (C * mstar[None, :]) @ Sstar - (C @ C.T) @ S  # (H, T)
    dQ = S * g - S * (S * g).sum(1, keepdims=True)  # Pi(s_i) g_i
    return np.concatenate([dC.ravel(), dQ.ravel()])


def _reduced_rhs_loops(y, mstar, Sstar, H, h, T):  # pragma: no cover - compiled by numba
    out = np.empty(H * h + H * T)
    S = np.empty((H, T))
    for i in range(H):
        mx = y[H * h + i * T]
        for p in range(T):
            mx = max(mx, y[H * h + i * T + p])
        tot = 0.0
        for p in range(T):
            S[i, p] = math.exp(y[H * h + i * T + p] - mx)
            tot += S[i, p]
        for p in range(T):
            S[i, p] /= tot
    SS = S @ S.T
    C = y[: H * h].copy().reshape(H, h)
    CC = C @ C.T
    SSt = S @ Sstar.T  # (H, h)
    for i in range(H):
        for a in range(h):
            acc = mstar[a] * SSt[i, a]
            for j in range(H):
                acc -= SS[i, j] * C[j, a]
            out[i * h + a] = acc
    g = np.zeros(T)
    for i in range(H):
        for p in range(T):
            acc = 0.0
            for a in range(h):
                acc += mstar[a] * C[i, a] * Sstar[a, p]
            for j in range(H):
                acc -= CC[i, j] * S[j, p]
            g[p] = acc
        sg = 0.0
        for p in range(T):
            sg += S[i, p] * g[p]
        for p in range(T):
            out[H * h + i * T + p] = S[i, p] * (g[p] - sg)
    return out


if _HAVE_NUMBA:
    _reduced_rhs_nb = numba.njit(cache=True)(_reduced_rhs_loops)


def reduced_rhs(
    t: float, y: np.ndarray, mstar: np.ndarray, Sstar: np.ndarray, H: int
) -> np.ndarray:
    """Gradient flow of Proposition 1 in reduced coordinates (digest §4.4).

    ``dC_{ia} = m_a <s_a^*, s_i> - sum_j <s_i, s_j> C_{ja}``,
    ``dq_i = Pi(s_i) (sum_a m_a C_{ia} s_a^* - sum_j (C C^T)_{ij} s_j)``.

    Args:
        t: time (unused; autonomous).
        y: state ``[C.ravel(), Q.ravel()]`` with ``C (H, h)``, ``Q (H, T)``.
        mstar: ``(h,)`` scales ``m_a^*`` (Frobenius norms of ``A_a^*``).
        Sstar: ``(h, T)`` target attention patterns ``s_a^*``.
        H: number of heads.

    Returns:
        ``dy/dt`` (same layout).
    """
    h, T = Sstar.shape
    f = _reduced_rhs_nb if _HAVE_NUMBA else _reduced_rhs_np
    return f(np.ascontiguousarray(y, dtype=float), mstar, Sstar, H, h, T)


def loss_split(C: np.ndarray, S: np.ndarray, mstar: np.ndarray, Sstar: np.ndarray) -> np.ndarray:
    """Loss per (feature a, position p): ``1/2 (m_a s_a^*[p] - sum_i C_{ia} S_{ip})^2``.

    ``C (..., H, h)``, ``S (..., H, T)`` -> ``(..., h, T)``; sums to :func:`reduced_loss`.
    """
    R = mstar[:, None] * Sstar - np.einsum("...ia,...ip->...ap", C, S)  # (..., h, T)
    return 0.5 * R**2


def reduced_loss(C: np.ndarray, S: np.ndarray, mstar: np.ndarray, Sstar: np.ndarray) -> np.ndarray:
    """``1/2 ||G - P||_F^2`` in reduced coordinates (orthonormal ``V_a^*``)."""
    return loss_split(C, S, mstar, Sstar).sum((-1, -2))


# ---------------------------------------------------------------------------- full d x d flow
def full_loss(V: np.ndarray, S: np.ndarray, Vstar: np.ndarray, mstar: np.ndarray,
              Sstar: np.ndarray) -> float:  # fmt: skip
    """``1/2 ||G - P||_F^2`` with the bilinear tensor inner product (App. D, digest §4.2).

    ``V (H, d, d)``, ``S (H, T)``, ``Vstar (h, d, d)``, ``mstar (h,)``, ``Sstar (h, T)``.
    """
    G = np.einsum("a,aij,ap->ijp", mstar, Vstar, Sstar)  # (d, d, T)
    P = np.einsum("kij,kp->ijp", V, S)  # (d, d, T)
    return 0.5 * float(((G - P) ** 2).sum())


def full_rhs(t: float, y: np.ndarray, Vstar: np.ndarray, mstar: np.ndarray, Sstar: np.ndarray,
             H: int) -> np.ndarray:  # fmt: skip
    """Proposition 1 gradient flow in full ``d x d`` form.

    ``dV_i = (G - P) s_i = sum_a m_a <s_a^*, s_i> V_a^* - sum_j <s_j, s_i> V_j``,
    ``dq_i = Pi(s_i) (sum_a m_a <V_i, V_a^*> s_a^* - sum_j <V_i, V_j> s_j)``.
    State ``[V.ravel() (H, d, d), Q.ravel() (H, T)]``.
    """
    h, d, _ = Vstar.shape
    T = Sstar.shape[1]
    V = y[: H * d * d].reshape(H, d, d)
    Q = y[H * d * d :].reshape(H, T)
    S = softmax(Q)
    dV = np.einsum("a,ia,axy->ixy", mstar, S @ Sstar.T, Vstar) - np.einsum(
        "ij,jxy->ixy", S @ S.T, V
    )
    VV = np.einsum("ixy,jxy->ij", V, V)  # (H, H)
    VVs = np.einsum("ixy,axy->ia", V, Vstar)  # (H, h)
    g = (VVs * mstar) @ Sstar - VV @ S  # (H, T)
    dQ = S * g - S * (S * g).sum(1, keepdims=True)
    return np.concatenate([dV.ravel(), dQ.ravel()])


# ---------------------------------------------------------------------------- symmetric system
def symmetric_rhs(
    t: float, y: np.ndarray, mstar: np.ndarray, Sstar: np.ndarray, H: int
) -> np.ndarray:
    """Competitive (symmetric) system of Theorem 1 in reduced form, one head with factor ``H``.

    ``dc_a = m_a <s, s_a^*> - H ||s||^2 c_a``, ``dq = Pi(s)(sum_a m_a c_a s_a^* - H ||c||^2 s)``.
    State ``[c (h,), q (T,)]``.
    """
    h, T = Sstar.shape
    c, q = y[:h], y[h:]
    s = softmax(q)
    dc = mstar * (Sstar @ s) - H * (s @ s) * c
    g = (mstar * c) @ Sstar - H * (c @ c) * s
    dq = s * g - s * (s @ g)
    return np.concatenate([dc, dq])


def lyapunov_phi(c: np.ndarray, s: np.ndarray, mstar: np.ndarray, Sstar: np.ndarray, H: int):
    """Lyapunov function of Eq. (9), ``phi = <V, G s> - (H/2) ||V||^2 ||s||^2`` (reduced form).

    Broadcasts over leading axes: ``c (..., h)``, ``s (..., T)``.
    """
    Gs = mstar * np.einsum("ap,...p->...a", Sstar, s)  # (..., h)
    return (c * Gs).sum(-1) - 0.5 * H * (c**2).sum(-1) * (s**2).sum(-1)


# ---------------------------------------------------------------------------- solver + result
@dataclasses.dataclass
class FlowResult:
    """Outcome of :func:`solve_flow` (shaped like ``scipy``'s ``OdeResult``).

    Attributes:
        ds: ``xarray.Dataset`` with ``C (time, head, feature)``, ``S (time, head, position)``,
            ``loss (time)``, ``loss_split (time, feature, position)`` and the config in attrs.
        success: solver success flag.
        status: solver status (0 = reached ``t_max``).
        message: solver message.
        nfev: number of right-hand-side evaluations.
        seconds: wall time.
    """

    ds: object
    success: bool
    status: int
    message: str
    nfev: int
    seconds: float


def _to_dataset(t, C, S, mstar, Sstar, cfg_dict, extra_attrs=None):
    import xarray as xr

    ls = loss_split(C, S, mstar, Sstar)
    ds = xr.Dataset(
        {
            "C": (("time", "head", "feature"), C),
            "S": (("time", "head", "position"), S),
            "loss": (("time",), ls.sum((-1, -2))),
            "loss_split": (("time", "feature", "position"), ls),
        },
        coords={
            "time": t,
            "head": np.arange(C.shape[1]),
            "feature": np.arange(C.shape[2]),
            "position": np.arange(S.shape[2]),
        },
        attrs={"config": cfg_dict, "m_star": mstar.tolist(), **(extra_attrs or {})},
    )
    return ds


def solve_flow(
    cfg: FlowConfig,
    *,
    C0: np.ndarray | None = None,
    Q0: np.ndarray | None = None,
) -> FlowResult:
    """Integrate the reduced gradient flow (Proposition 1) with a stiff solver (Fig. 10).

    Args:
        cfg: the :class:`FlowConfig`.
        C0: optional initial ``(H, h)`` coefficients (default 0, i.e. ``V_i(0) = 0``).
        Q0: optional initial ``(H, T)`` attention logits (default :func:`init_state`).

    Returns:
        :class:`FlowResult`; ``ds.time`` starts at 0 followed by a log grid up to ``t_max``.
    """
    if not isinstance(cfg, FlowConfig):
        raise TypeError(f"`cfg` must be a FlowConfig; got {type(cfg).__name__}.")
    c0, q0 = init_state(cfg)
    C0 = c0 if C0 is None else np.asarray(C0, float)
    Q0 = q0 if Q0 is None else np.asarray(Q0, float)
    if C0.shape != (cfg.H, cfg.h) or Q0.shape != (cfg.H, cfg.T):
        raise ValueError(
            f"`C0`/`Q0` must have shapes {(cfg.H, cfg.h)}/{(cfg.H, cfg.T)}; "
            f"got {C0.shape=}, {Q0.shape=}."
        )
    mstar, Sstar = cfg.scales, target_positions(cfg.h, cfg.T)
    t_eval = np.concatenate([[0.0], np.geomspace(cfg.t_min, cfg.t_max, cfg.n_eval)])
    y0 = np.concatenate([C0.ravel(), Q0.ravel()])
    t0 = _time.perf_counter()
    sol = solve_ivp(
        reduced_rhs, (0.0, cfg.t_max), y0, method=cfg.method, t_eval=t_eval,
        args=(mstar, Sstar, cfg.H), rtol=cfg.rtol, atol=cfg.atol,
    )  # fmt: skip
    secs = _time.perf_counter() - t0
    n = sol.y.shape[1]
    C = sol.y[: cfg.H * cfg.h].T.reshape(n, cfg.H, cfg.h)
    S = softmax(sol.y[cfg.H * cfg.h :].T.reshape(n, cfg.H, cfg.T))
    ds = _to_dataset(sol.t, C, S, mstar, Sstar, dataclasses.asdict(cfg),
                     {"nfev": int(sol.nfev), "seconds": secs})  # fmt: skip
    return FlowResult(ds, bool(sol.success), int(sol.status), str(sol.message), int(sol.nfev), secs)


def solve_symmetric(cfg: FlowConfig, s0: np.ndarray | None = None, c0: np.ndarray | None = None):
    """Integrate the symmetric system (Theorem 1); returns ``(t, c (n, h), s (n, T), phi (n,))``."""
    mstar, Sstar = cfg.scales, target_positions(cfg.h, cfg.T)
    if s0 is None:
        s0 = np.full(cfg.T, 1.0 / cfg.T)
    q0 = np.log(np.clip(np.asarray(s0, float), 1e-300, None))
    c0 = np.zeros(cfg.h) if c0 is None else np.asarray(c0, float)
    t_eval = np.concatenate([[0.0], np.geomspace(cfg.t_min, cfg.t_max, cfg.n_eval)])
    sol = solve_ivp(symmetric_rhs, (0.0, cfg.t_max), np.concatenate([c0, q0 - q0.mean()]),
                    method=cfg.method, t_eval=t_eval, args=(mstar, Sstar, cfg.H),
                    rtol=cfg.rtol, atol=cfg.atol)  # fmt: skip
    c = sol.y[: cfg.h].T
    s = softmax(sol.y[cfg.h :].T)
    return sol.t, c, s, lyapunov_phi(c, s, mstar, Sstar, cfg.H)


# ---------------------------------------------------------------------------- analysis
def plateau_levels(mstar: Sequence[float]) -> np.ndarray:
    """Loss plateaus ``lambda_k = 1/2 sum_{a > k} m_(a)^2``, ``k = 0..h`` (scales sorted down).

    ``lambda_1`` is the Theorem 1 plateau ``1/2 sum_{a >= 2} (m_a^*)^2``.
    """
    m2 = np.sort(np.asarray(mstar, float))[::-1] ** 2
    return np.array([0.5 * m2[k:].sum() for k in range(len(m2) + 1)])


def stage_times(ds, kind: str = "loss", frac: float = 0.5) -> np.ndarray:
    """Stage times ``(h,)`` of a flow result (``inf`` where never reached).

    Args:
        ds: a :func:`solve_flow` / :func:`discrete_flow` dataset.
        kind: ``"loss"``: first time the loss crosses the midpoint between consecutive plateau
            levels (:func:`plateau_levels`, digest §4.8); ``"feature"``: first time the own loss
            ``l_{a, p_a}`` falls below ``frac`` of its initial value ``m_a^2/2``.
        frac: threshold of ``kind="feature"``.
    """
    t = ds["time"].values
    if kind == "loss":
        lv = plateau_levels(ds.attrs["m_star"])
        loss = ds["loss"].values
        out = np.full(len(lv) - 1, np.inf)
        for k in range(1, len(lv)):
            hit = np.nonzero(loss <= 0.5 * (lv[k - 1] + lv[k]))[0]
            if hit.size:
                out[k - 1] = t[hit[0]]
        return out
    if kind != "feature":
        raise ValueError(f"`kind`={kind!r} unknown; use 'loss' or 'feature'.")
    ls = ds["loss_split"].values  # (time, h, T)
    out = np.full(ls.shape[1], np.inf)
    for a in range(ls.shape[1]):
        own = ls[:, a, a]
        hit = np.nonzero(own <= frac * own[0])[0]
        if hit.size:
            out[a] = t[hit[0]]
    return out


def count_stages(times: Sequence[float], ratio: float = 1.3) -> int:
    """Number of distinct stages: learned times merged when consecutive ones differ < ``ratio``x.

    Infinite times (features never learned) are not stages.
    """
    t = np.sort(np.asarray([x for x in times if np.isfinite(x)], float))
    if t.size == 0:
        return 0
    n = 1
    for a, b in zip(t[:-1], t[1:], strict=True):
        if b > ratio * a:
            n += 1
    return n


def coupling_time(ds, delta: float = 0.1) -> float:
    """First time the heads decouple: ``max_k ||s_k - mean_j s_j||_2 > delta`` (Theorem 2)."""
    S = ds["S"].values  # (time, H, T)
    dev = np.linalg.norm(S - S.mean(1, keepdims=True), axis=-1).max(-1)
    hit = np.nonzero(dev > delta)[0]
    return float(ds["time"].values[hit[0]]) if hit.size else math.inf


def antisymmetric_jacobian(c: np.ndarray, q: np.ndarray, mstar: np.ndarray, Sstar: np.ndarray,
                           H: int, step: float = 1e-6) -> np.ndarray:  # fmt: skip
    """Jacobian of the reduced flow at a symmetric state, restricted to head-asymmetric modes.

    At a symmetric state (every head ``(c, q)``) the linearised flow splits by the permutation
    symmetry of the heads into the symmetric sector and ``H - 1`` copies of one "asymmetric"
    block, acting on perturbations ``delta_k = u_k (gamma, eta)`` with ``sum_k u_k = 0``. This
    returns that ``(h + T) x (h + T)`` block (central finite differences of :func:`reduced_rhs`
    along ``u = (1, -1, 0, ...)``), whose eigenvalues are the growth rates of head differences.
    """
    if H < 2:
        raise ValueError(f"`H` must be >= 2 for head-asymmetric modes; got {H!r}.")
    h, T = Sstar.shape
    u = np.zeros(H)
    u[:2] = 1.0, -1.0
    y0 = np.concatenate([np.tile(c, H), np.tile(q, H)])
    n = h + T
    J = np.empty((n, n))
    for k in range(n):
        e = np.zeros(n)
        e[k] = step
        dy = np.concatenate([np.outer(u, e[:h]).ravel(), np.outer(u, e[h:]).ravel()])
        diff = (reduced_rhs(0, y0 + dy, mstar, Sstar, H) - reduced_rhs(0, y0 - dy, mstar, Sstar,
                                                                          H)) / (2 * step)
        J[:h, k] = diff[:h]  # head 0 (u_0 = 1)
        J[h:, k] = diff[H * h : H * h + T]
    return J


def coupling_times(cfg: FlowConfig, init_stds: Sequence[float], delta: float = 0.1) -> np.ndarray:
    """:func:`coupling_time` of :func:`solve_flow` for each perturbation std (same seed)."""
    out = []
    for std in init_stds:
        res = solve_flow(dataclasses.replace(cfg, init_std=float(std)))
        if not res.success:
            raise RuntimeError(f"solve_flow failed at init_std={std:g}: {res.message}")
        out.append(coupling_time(res.ds, delta))
    return np.array(out)


# ---------------------------------------------------------------------------- discrete GD / SAM
def _grad(C, Q, mstar, Sstar):
    """Gradient of the reduced loss: ``-(dC, dQ)`` of :func:`reduced_rhs`."""
    H = C.shape[0]
    f = _reduced_rhs_nb if _HAVE_NUMBA else _reduced_rhs_np
    dy = f(np.concatenate([C.ravel(), Q.ravel()]), mstar, Sstar, H, *Sstar.shape)
    return -dy[: C.size].reshape(C.shape), -dy[C.size :].reshape(Q.shape)


def _step_gd(C, Q, lr, rho, mstar, Sstar):
    gC, gQ = _grad(C, Q, mstar, Sstar)
    return C - lr * gC, Q - lr * gQ


def _step_sam(C, Q, lr, rho, mstar, Sstar):
    gC, gQ = _grad(C, Q, mstar, Sstar)
    norm = math.sqrt(float((gC**2).sum() + (gQ**2).sum())) + 1e-30
    gC, gQ = _grad(C + rho * gC / norm, Q + rho * gQ / norm, mstar, Sstar)
    return C - lr * gC, Q - lr * gQ


#: Discrete methods on the tensor loss, by name (style rule 4).
METHODS = {"gd": _step_gd, "sam": _step_sam}


def discrete_flow(cfg: FlowConfig, method: str = "gd", *, lr: float = 0.05, rho: float = 0.0,
                  steps: int = 20000, record_every: int = 20):  # fmt: skip
    """GD or SAM steps on the tensor loss from the App. C.6 init (beyond the paper).

    One SAM step is one update (the gradient at ``theta + rho g/||g||``), so step counts compare
    1:1 with GD. Time is reported as ``step * lr`` to compare with the flow.

    Returns:
        ``xarray.Dataset`` shaped like :attr:`FlowResult.ds` (``time = step * lr``).
    """
    if method not in METHODS:
        raise ValueError(f"`method`={method!r} unknown; choose one of {sorted(METHODS)}.")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"`lr` must be a finite number > 0; got {lr!r}.")
    if not (math.isfinite(rho) and rho >= 0):
        raise ValueError(f"`rho` must be a finite number >= 0; got {rho!r}.")
    if not (isinstance(steps, int) and steps >= 0 and isinstance(record_every, int)
            and record_every >= 1):  # fmt: skip
        raise ValueError(
            f"`steps` must be an int >= 0 and `record_every` an int >= 1; got {steps!r}, "
            f"{record_every!r}."
        )
    mstar, Sstar = cfg.scales, target_positions(cfg.h, cfg.T)
    C, Q = init_state(cfg)
    step = METHODS[method]
    ts, Cs, Ss = [], [], []
    for k in range(steps + 1):
        if k % record_every == 0:
            ts.append(k * lr)
            Cs.append(C.copy())
            Ss.append(softmax(Q))
        if k < steps:
            C, Q = step(C, Q, lr, rho, mstar, Sstar)
    return _to_dataset(np.array(ts), np.array(Cs), np.array(Ss), mstar, Sstar,
                       dataclasses.asdict(cfg), {"method": method, "lr": lr,
                                                 "rho": rho})  # fmt: skip
