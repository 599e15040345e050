"""Second moment of the sample covariance, ``E[Σ̂²]`` (main paper, Appendix C.1).

With ``x_n ~ N(0, Σ)`` i.i.d. and ``Σ̂ = (1/N) Σ_n x_n x_nᵀ`` the paper uses (Zhang et al. 2025,
Eqs. 30-31)::

    E[Σ̂²] = Σ² + (Σ + tr(Σ) I) Σ / N = Σ_i a_i e_i e_iᵀ,
    a_i = (1 + 1/N) λ_i² + tr(Σ) λ_i / N.

Here the fourth Gaussian moments are derived from the moment generating function
``exp(tᵀΣt/2)`` (no Isserlis formula is assumed), the moment is assembled for a general symmetric
``Σ`` in small dimension, and a Monte Carlo estimate confirms it.

Examples:
    >>> import sympy as sp
    >>> S = sp.diag(2, 3)
    >>> wishart_second_moment(S, sp.Integer(4)) == wishart_second_moment_closed_form(S, 4)
    True
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np
import sympy as sp

from .trace_algebra import Algebra, isserlis_from_mgf
from .verify import CheckResult, claim, exhaustive, is_zero, statement

__all__ = [
    "gaussian_fourth_moment",
    "wishart_pair_moment",
    "wishart_second_moment",
    "wishart_second_moment_closed_form",
    "wishart_eigenvalue",
    "symmetric_matrix",
    "monte_carlo_second_moment",
    "wishart_second_moment_all_d",
]


def symmetric_matrix(d: int, name: str = "s") -> sp.Matrix:
    """A general symmetric ``d x d`` matrix of real symbols ``s_ij`` (i <= j).

    Raises:
        ValueError: if ``d`` is not a positive int.
    """
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        raise ValueError(f"`d` must be a positive int; got {d!r} ({type(d).__name__}).")
    return sp.Matrix(d, d, lambda i, j: sp.Symbol(f"{name}{min(i, j) + 1}{max(i, j) + 1}",
                                                  real=True))  # fmt: skip


def _check_cov(Sigma: sp.Matrix) -> sp.Matrix:
    if not isinstance(Sigma, sp.MatrixBase):
        raise TypeError(f"`Sigma` must be a SymPy Matrix; got {type(Sigma).__name__}.")
    if Sigma.shape[0] != Sigma.shape[1] or Sigma.shape[0] == 0:
        raise ValueError(f"`Sigma` must be square and non-empty; got {Sigma.shape=}.")
    if sp.simplify(Sigma - Sigma.T) != sp.zeros(*Sigma.shape):
        raise ValueError("`Sigma` must be symmetric.")
    return sp.Matrix(Sigma)


@functools.lru_cache(maxsize=32)
def _mgf_fourth(d: int):
    t = sp.symbols(f"t1:{d + 1}", real=True)
    S = symmetric_matrix(d, "g")
    mgf = sp.exp((sp.Matrix(t).T * S * sp.Matrix(t))[0, 0] / 2)
    out = {}
    for idx in itertools.combinations_with_replacement(range(d), 4):
        expr = mgf
        for i in idx:
            expr = sp.diff(expr, t[i])
        out[idx] = sp.expand(expr.subs({ti: 0 for ti in t}))
    return S, out


def gaussian_fourth_moment(Sigma: sp.Matrix, a: int, b: int, c: int, e: int) -> sp.Expr:
    """``E[x_a x_b x_c x_e]`` for ``x ~ N(0, Sigma)``, from the 4th derivative of the MGF at 0.

    Args:
        Sigma: symmetric covariance (SymPy Matrix).
        a: first 0-based coordinate index.
        b: second index.
        c: third index.
        e: fourth index.
    """
    Sigma = _check_cov(Sigma)
    d = Sigma.shape[0]
    idx = []
    for name, val in (("a", a), ("b", b), ("c", c), ("e", e)):
        if not isinstance(val, (int, sp.Integer)) or not 0 <= int(val) < d:
            raise ValueError(f"`{name}` must be an int index in [0, {d}); got {val!r}.")
        idx.append(int(val))
    G, table = _mgf_fourth(d)
    expr = table[tuple(sorted(idx))]
    return expr.subs({G[i, j]: Sigma[i, j] for i in range(d) for j in range(i, d)},
                     simultaneous=True)  # fmt: skip


def wishart_pair_moment(Sigma: sp.Matrix, N: sp.Expr, a: int, b: int, c: int, e: int) -> sp.Expr:
    """``E[Σ̂_ab Σ̂_ce]`` for ``Σ̂ = (1/N) Σ_n x_n x_nᵀ`` with i.i.d. ``x_n ~ N(0, Σ)``.

    The ``N`` diagonal terms (n = m) give the fourth moment, the ``N(N-1)`` others factorize:
    ``E[Σ̂_ab Σ̂_ce] = E[x_a x_b x_c x_e]/N + (N-1)/N Σ_ab Σ_ce``.
    """
    Sigma = _check_cov(Sigma)
    N = sp.sympify(N)
    return gaussian_fourth_moment(Sigma, a, b, c, e) / N + (N - 1) / N * Sigma[a, b] * Sigma[c, e]


def wishart_second_moment(Sigma: sp.Matrix, N: sp.Expr) -> sp.Matrix:
    """``E[Σ̂²]`` assembled entrywise from :func:`wishart_pair_moment` (a derivation, not a formula).

    Args:
        Sigma: symmetric ``d x d`` covariance.
        N: number of context examples (symbol or positive number).

    Returns:
        The ``d x d`` matrix ``E[Σ̂²]_ae = Σ_b E[Σ̂_ab Σ̂_be]``, expanded.
    """
    Sigma = _check_cov(Sigma)
    d = Sigma.shape[0]
    return sp.Matrix(d, d, lambda a, e: sp.expand(sum(wishart_pair_moment(Sigma, N, a, b, b, e)
                                                      for b in range(d))))  # fmt: skip


@statement
def wishart_second_moment_closed_form(Sigma: sp.Matrix, N: sp.Expr) -> sp.Matrix:
    """Closed form ``Σ² + (Σ + tr(Σ) I) Σ / N`` (main, App. C.1; Zhang et al. 2025 Eq. 30)."""
    Sigma = _check_cov(Sigma)
    d = Sigma.shape[0]
    return Sigma**2 + (Sigma + Sigma.trace() * sp.eye(d)) * Sigma / sp.sympify(N)


@statement
def wishart_eigenvalue(lam: sp.Expr, trace: sp.Expr, N: sp.Expr) -> sp.Expr:
    """``a_i = (1 + 1/N) λ_i² + tr(Σ) λ_i / N`` (main, App. C.1, Zhang et al. Eq. 31)."""
    return (1 + 1 / sp.sympify(N)) * lam**2 + trace * lam / N


def monte_carlo_second_moment(Sigma: np.ndarray, N: int, n_samples: int = 200_000,
                              seed: int = 0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Monte Carlo estimate of ``E[Σ̂²]`` and its entrywise standard error.

    Args:
        Sigma: positive definite covariance (numpy array).
        N: context length (positive int).
        n_samples: number of independent ``Σ̂`` draws.
        seed: seed of the numpy generator.

    Raises:
        ValueError: on a non-square/non-PD ``Sigma`` or non-positive ``N``/``n_samples``.
    """
    Sigma = np.asarray(Sigma, dtype=float)
    if Sigma.ndim != 2 or Sigma.shape[0] != Sigma.shape[1]:
        raise ValueError(f"`Sigma` must be a square matrix; got {Sigma.shape=}.")
    if not isinstance(N, int) or N < 1:
        raise ValueError(f"`N` must be a positive int; got {N!r}.")
    if not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"`n_samples` must be an int >= 2; got {n_samples!r}.")
    L = np.linalg.cholesky(Sigma)  # raises LinAlgError if not PD
    rng = np.random.default_rng(seed)
    d = Sigma.shape[0]
    x = rng.standard_normal((n_samples, N, d)) @ L.T  # (S, N, d)
    S_hat = np.einsum("snd,sne->sde", x, x) / N  # (S, d, d)
    S2 = S_hat @ S_hat  # (S, d, d)
    return S2.mean(axis=0), S2.std(axis=0, ddof=1) / np.sqrt(n_samples)


# ----------------------------------------------------------------------------------------------
# Claims
# ----------------------------------------------------------------------------------------------

_N = sp.Symbol("N", positive=True)


def wishart_second_moment_all_d(N: sp.Expr | None = None):
    """``E[Σ̂²]`` for a symbolic dimension ``d``, derived in the trace algebra.

    ``Σ̂ = (1/N) Σ_n x_n x_nᵀ`` is expanded into its ``n = m`` and ``n ≠ m`` parts and the
    Gaussian expectations are taken by pairings (Isserlis, see
    :func:`theory.trace_algebra.isserlis_from_mgf`).

    Returns:
        ``(alg, derived, closed_form)``: the algebra and the two ``d x d`` expressions.
    """
    N = _N if N is None else sp.sympify(N)
    alg = Algebra()
    S = alg.letter("S", "d", "d", symmetric=True)
    Sh = alg.letter("Sh", "d", "d", symmetric=True)
    derived = (Sh * Sh).expect_sample_cov("Sh", "x", S, N)
    closed = S * S + (S + S.trace() * alg.eye("d")) * S * (1 / N)
    return alg, derived, closed


@claim(
    "wishart_moment_symbolic",
    "main, App. C.1 (Zhang et al. 2025 Eq. 30)",
    "E[Σ̂²] = Σ² + (Σ + tr(Σ) I) Σ / N for x_n ~ N(0, Σ) i.i.d.",
)
def check_wishart_moment_symbolic() -> CheckResult:
    """Every d: trace algebra from Isserlis (derived from the MGF); d = 2, 3 entrywise from the MGF.

    The entrywise route differentiates ``exp(tᵀΣt/2)`` four times for a general symmetric Σ; the
    symbolic-d route derives the order-4 Gaussian moment from the MGF with dimension-free rules
    and contracts it in the trace algebra.
    """
    derived4, pairings = isserlis_from_mgf(4)
    r_iss = sp.expand(derived4 - pairings) == 0
    alg, derived, closed = wishart_second_moment_all_d()
    res_all = alg.residual(derived, closed)
    sizes = (2, 3, 4) if exhaustive() else (2, 3)
    worst = None
    for d in sizes:
        S = symmetric_matrix(d)
        r = is_zero(wishart_second_moment(S, _N) - wishart_second_moment_closed_form(S, _N))
        if not r.holds:
            return dataclasses.replace(r, sizes=f"d = {d}", conditions="general symmetric Σ")
        worst = r
    ok = r_iss and not res_all
    return CheckResult(ok, worst.residual if ok else (str(res_all) if res_all else "Isserlis"),
                       "general symmetric Σ, symbolic N", "symbolic (all d) + entrywise",
                       "all d: E[x_a x_b x_c x_e] derived from the MGF with the rules ∂_i e^φ = "
                       "(Σt)_i e^φ, ∂_i(Σt)_a = Σ_ai (valid in every dimension), then Σ̂ split into "
                       "n = m / n ≠ m parts and contracted in the trace algebra; entrywise: 4th "
                       "moments from d⁴/dt⁴ exp(tᵀΣt/2) at t = 0",
                       sizes="all d (trace algebra); entrywise d = "
                             + ", ".join(map(str, sizes)))  # fmt: skip


@claim(
    "wishart_moment_monte_carlo",
    "main, App. C.1",
    "Monte Carlo estimate of E[Σ̂²] agrees with Σ² + (Σ + tr(Σ) I) Σ / N.",
)
def check_wishart_moment_monte_carlo() -> CheckResult:
    """Compare the closed form to 200k Monte Carlo draws (d = 3, N = 5, non-diagonal Σ)."""
    Sigma = np.array([[1.0, 0.3, -0.2], [0.3, 0.7, 0.1], [-0.2, 0.1, 0.4]])
    N = 5
    mean, se = monte_carlo_second_moment(Sigma, N, n_samples=200_000, seed=1)
    exact = np.array(wishart_second_moment_closed_form(sp.Matrix(Sigma), N), dtype=float)
    z = np.abs(mean - exact) / se
    return CheckResult(bool(z.max() < 5.0), float(np.abs(mean - exact).max()),
                       "non-diagonal Σ; accept if every entry within 5 s.e.",
                       "monte-carlo", f"max |z| = {z.max():.2f}",
                       sizes="d = 3, N = 5, 200k draws (seed 1)")  # fmt: skip


@claim(
    "wishart_eigenvalues_a_i",
    "main, App. C.1",
    "E[Σ̂²] = Σ_i a_i e_i e_iᵀ with a_i = (1+1/N)λ_i² + tr(Σ)λ_i/N = λ_i²(1 + (1 + tr Σ/λ_i)/N).",
)
def check_wishart_eigenvalues() -> CheckResult:
    """All d: E[Σ̂²] is a polynomial in Σ with scalar coefficients; d = 3: rotated Σ explicitly."""
    alg, derived, _ = wishart_second_moment_all_d()
    nf = alg.normal_form(derived)
    # every term is a power of Σ times scalars (traces): then Σe = λe gives E[Σ̂²]e = p(λ)e.
    only_powers = all(key[0][0] == "path" and set(key[0][1]) == {"S"} for key in nf)
    lam_, T = sp.Symbol("lambda", positive=True), sp.Symbol("T", positive=True)
    p_lam = sum(c * lam_ ** len(key[0][1]) * T ** sum(1 for sc in key[1] if sc == ("trace",
                                                                                    ("S",)))
                for key, c in nf.items())  # fmt: skip
    all_scalars_are_trS = all(sc == ("trace", ("S",)) for key in nf for sc in key[1])
    r_all = sp.simplify(p_lam - wishart_eigenvalue(lam_, T, _N)) == 0
    lam = sp.symbols("lambda1:4", positive=True)
    th = sp.Symbol("theta", real=True)
    R = sp.Matrix([[sp.cos(th), -sp.sin(th), 0], [sp.sin(th), sp.cos(th), 0], [0, 0, 1]])
    Sigma = R * sp.diag(*lam) * R.T
    E2 = wishart_second_moment_closed_form(Sigma, _N)
    tr = sum(lam)
    res = []
    for i in range(3):
        e = R[:, i]
        a = wishart_eigenvalue(lam[i], tr, _N)
        res.append(sp.simplify(E2 * e - a * e))
        res.append(sp.Matrix([a - lam[i] ** 2 * (1 + (1 + tr / lam[i]) / _N)]))
    r = is_zero(sp.Matrix.vstack(*res))
    ok = r.holds and only_powers and all_scalars_are_trS and r_all
    return CheckResult(ok, r.residual, "Σ e_i = λ_i e_i; d = 3 case: Σ = R diag(λ) Rᵀ, rotation "
                       "R(θ)", "symbolic (all d) + explicit",
                       f"all d: E[Σ̂²] = p(Σ) with p(λ) = {sp.factor(p_lam)} (T = tr Σ), so it "
                       "shares Σ's eigenvectors with eigenvalues a_i = p(λ_i)",
                       sizes="all d (polynomial in Σ); explicit d = 3")  # fmt: skip
