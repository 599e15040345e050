"""Numerical population flows of ATTN_S and ATTN_M (numpy/scipy), for the checks that need a run.

Population gradients use the formulas proved for every dimension in
:mod:`theory.attention_model` (eqs. 19-21 with (21) corrected) and :mod:`theory.merged_kq` (B.1):
no sampling, so a run is deterministic given its initialization. Time is in units of τ
(``τẆ = −½∇L``). SAM is the exact (not expanded) flow ``τẆ = −½∇L(W + ρ∇L/‖∇L‖)`` with the
perturbation detached (eq. 6/8).

Examples:
    >>> import numpy as np
    >>> m = AttnS(np.array([1.0, 0.5]), N=10, H=1)
    >>> w = m.pack(np.array([0.1]), np.array([[0.1, 0.0]]), np.array([[0.1, 0.0]]))
    >>> float(round(m.flow(w)[0], 6))  # τv̇ = λ²v² − λav⁵ = 0.01 − 1.25e-5 (λ = 1, a = 1.25)
    0.009988
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.integrate import solve_ivp

__all__ = ["AttnS", "TwoLayer", "integrate"]


@dataclasses.dataclass
class AttnS:
    """ATTN_S population loss with ``H`` rank-one heads, ``Σ = diag(lam)`` or a full ``Sigma``.

    Parameters are packed head-major as ``[v_i, k_i (d), q_i (d)]`` (App. C.1 order).
    """

    lam: np.ndarray
    N: float
    H: int
    Sigma: np.ndarray | None = None

    def __post_init__(self):
        self.lam = np.asarray(self.lam, float)
        S = np.diag(self.lam) if self.Sigma is None else np.asarray(self.Sigma, float)
        if S.ndim != 2 or S.shape[0] != S.shape[1]:
            raise ValueError(f"`Sigma` must be square; got {S.shape=}.")
        if not (isinstance(self.H, int) and self.H >= 1) or not self.N > 0:
            raise ValueError(f"`H` must be a positive int and `N` > 0; got {self.H=}, {self.N=}.")
        self.S = S
        self.d = S.shape[0]
        self.E2 = S @ S + (S + np.trace(S) * np.eye(self.d)) @ S / self.N

    def pack(self, v, k, q) -> np.ndarray:
        """Flat parameter vector from ``v (H,)``, ``k (H, d)``, ``q (H, d)``."""
        return np.concatenate([np.concatenate([[v[i]], k[i], q[i]]) for i in range(self.H)])

    def unpack(self, w):
        """``(v (H,), k (H, d), q (H, d))``."""
        W = np.asarray(w).reshape(self.H, 2 * self.d + 1)
        return W[:, 0], W[:, 1:1 + self.d], W[:, 1 + self.d:]

    def M(self, w) -> np.ndarray:
        """``M = Σ_i v_i k_i q_iᵀ`` (d, d)."""
        v, k, q = self.unpack(w)
        return np.einsum("i,ia,ib->ab", v, k, q)

    def loss(self, w) -> float:
        """``tr Σ − 2 tr(ΣMΣ) + tr(MΣMᵀE[Σ̂²])``."""
        M = self.M(w)
        return float(np.trace(self.S) - 2 * np.trace(self.S @ M @ self.S)
                     + np.trace(M @ self.S @ M.T @ self.E2))  # fmt: skip

    def grad(self, w) -> np.ndarray:
        """∇L from eqs. (19)-(21) (corrected (21))."""
        v, k, q = self.unpack(w)
        G = self.S @ self.S - self.E2 @ self.M(w) @ self.S  # (d, d)
        gv = -2 * np.einsum("ia,ab,ib->i", k, G, q)
        gk = -2 * v[:, None] * (q @ G.T)  # row i: (G q_i)ᵀ
        gq = -2 * v[:, None] * (k @ G)  # row i: (Gᵀ k_i)ᵀ
        return np.concatenate([gv[:, None], gk, gq], axis=1).ravel()

    def flow(self, w, rho: float = 0.0) -> np.ndarray:
        """``τẇ``: GD (ρ = 0) or exact SAM with radius ``rho``."""
        g = self.grad(w)
        if rho == 0:
            return -g / 2
        n = np.linalg.norm(g)
        return -self.grad(w + rho * g / n) / 2 if n > 0 else -g / 2


@dataclasses.dataclass
class TwoLayer:
    """ATTN_M as the two-layer net ``L = E[y²] − 2w₂ᵀW₁b + w₂ᵀW₁CW₁ᵀw₂`` (App. B.1).

    Parameters are packed as ``[w₂ (H), vec(W₁) row-major (H·D)]``.
    """

    b: np.ndarray
    C: np.ndarray
    H: int

    def __post_init__(self):
        self.b, self.C = np.asarray(self.b, float), np.asarray(self.C, float)
        self.D = self.b.shape[0]
        if self.C.shape != (self.D, self.D):
            raise ValueError(f"`C` must be {self.D} x {self.D}; got {self.C.shape}.")

    def unpack(self, w):
        """``(w₂ (H,), W₁ (H, D))``."""
        w = np.asarray(w)
        return w[: self.H], w[self.H:].reshape(self.H, self.D)

    def pack(self, w2, W1) -> np.ndarray:
        """Flat parameter vector."""
        return np.concatenate([w2, np.ravel(W1)])

    def grad(self, w) -> np.ndarray:
        """B.1: ∇_{w₂}L = −2W₁r, ∇_{W₁}L = −2w₂rᵀ with r = b − C W₁ᵀw₂."""
        w2, W1 = self.unpack(w)
        r = self.b - self.C @ (W1.T @ w2)
        return self.pack(-2 * W1 @ r, -2 * np.outer(w2, r))

    def flow(self, w, rho: float = 0.0) -> np.ndarray:
        """``τẇ``: GD (ρ = 0) or exact global SAM with radius ``rho``."""
        g = self.grad(w)
        if rho == 0:
            return -g / 2
        n = np.linalg.norm(g)
        return -self.grad(w + rho * g / n) / 2 if n > 0 else -g / 2


def integrate(model, w0: np.ndarray, t_end: float, *, rho: float = 0.0, events=None,
              n_eval: int = 400, rtol: float = 1e-8, atol: float = 1e-11):  # fmt: skip
    """Integrate ``τẇ = model.flow(w, rho)`` on ``[0, t_end]`` (RK45); returns scipy's result.

    Raises:
        RuntimeError: when the integrator fails.
    """
    t_eval = np.linspace(0.0, t_end, n_eval)
    sol = solve_ivp(lambda t, w: model.flow(w, rho), (0.0, t_end), np.asarray(w0, float),
                    t_eval=t_eval, rtol=rtol, atol=atol, events=events)  # fmt: skip
    if sol.status < 0:
        raise RuntimeError(f"integration failed: {sol.message}")
    return sol
