"""ATTN_S / ATTN_M: prediction, population loss, gradients (16)-(21), Hessian blocks (App. C.1).

Main paper: Section 3 (Lemma 3.1), Appendix A.1 (equivalences, eq. 12) and Appendix C.1.

Conventions (checked below): ``β = (1/N) Σ_n y_n x_n = Σ̂ w``, ``M = Σ_i v_i k_i q_iᵀ``,
``ŷ_q = βᵀ M x_q``, ``z = vec(β x_qᵀ)`` with **column-wise** ``vec``. The population loss is::

    L = E[(y_q - ŷ_q)²] = tr Σ - 2 tr(Σ M Σ) + tr(M Σ Mᵀ E[Σ̂²]),

which this module derives by taking Gaussian expectations of the squared error (x_q, then w, then
Σ̂ through the Wishart moments of :mod:`theory.wishart`) and then differentiates.

Examples:
    >>> import sympy as sp
    >>> lam = sp.symbols("l1:3", positive=True)
    >>> heads = make_heads(2, 1)
    >>> L = population_loss(sp.diag(*lam), sp.Symbol("N", positive=True), heads)
    >>> sp.simplify(L.subs({s: 0 for s in L.free_symbols if s.name.startswith(("v", "k", "q"))}))
    l1 + l2
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

from .trace_algebra import Algebra, MatExpr
from .verify import CheckResult, claim, exhaustive, is_zero, record, stated, statement
from .wishart import symmetric_matrix, wishart_pair_moment, wishart_second_moment_closed_form

__all__ = [
    "Head",
    "make_heads",
    "kv_matrix",
    "colvec",
    "attn_s_prediction_from_matrices",
    "cnn_prediction",
    "population_loss",
    "derive_population_loss",
    "head_params",
    "gradient_printed",
    "gradient_corrected",
    "hessian_blocks_printed",
    "hessian_blocks_derived",
    "algebra_model",
    "monte_carlo_expectation_forms",
]


@dataclass(frozen=True)
class Head:
    """One rank-one head: value ``v`` (scalar), key ``k`` and query ``q`` (``d x 1`` matrices)."""

    v: sp.Expr
    k: sp.Matrix
    q: sp.Matrix


def make_heads(d: int, H: int, prefix: str = "") -> list[Head]:
    """``H`` heads of free real symbols ``v_i, k_i_a, q_i_a`` in dimension ``d``.

    Raises:
        ValueError: if ``d`` or ``H`` is not a positive int.
    """
    for name, val in (("d", d), ("H", H)):
        if not isinstance(val, int) or isinstance(val, bool) or val < 1:
            raise ValueError(f"`{name}` must be a positive int; got {val!r}.")
    heads = []
    for i in range(1, H + 1):
        v = sp.Symbol(f"{prefix}v{i}", real=True)
        k = sp.Matrix([sp.Symbol(f"{prefix}k{i}_{a}", real=True) for a in range(1, d + 1)])
        q = sp.Matrix([sp.Symbol(f"{prefix}q{i}_{a}", real=True) for a in range(1, d + 1)])
        heads.append(Head(v, k, q))
    return heads


def head_params(head: Head) -> list[sp.Symbol]:
    """The flat parameter list ``[v, k_1..k_d, q_1..q_d]`` of a head (App. C.1 ordering)."""
    return [head.v, *list(head.k), *list(head.q)]


def kv_matrix(heads: Sequence[Head]) -> sp.Matrix:
    """``M = Σ_i v_i k_i q_iᵀ`` (the end-to-end matrix of App. A.2 condition (1))."""
    if not heads:
        raise ValueError("`heads` must be a non-empty sequence of Head.")
    return sum((h.v * h.k * h.q.T for h in heads), sp.zeros(heads[0].k.shape[0]))


def colvec(A: sp.Matrix) -> sp.Matrix:
    """Column-wise ``vec`` (stack the columns), the convention of eq. (12)."""
    return sp.Matrix.vstack(*[A[:, j] for j in range(A.shape[1])])


def attn_s_prediction_from_matrices(d: int, N: int, H: int) -> tuple[sp.Expr, dict]:
    """Bottom-right entry of ``ATTN_S(X) = X + Σ_i (1/N) W_i^V X Xᵀ W_i^Kᵀ W_i^Q X`` (Sec. 3).

    Builds ``X`` of eq. (1) with ``y_n = w·x_n`` and the zero pattern of footnote 1 (entries marked
    ``*`` are free symbols ``star...``), and multiplies the matrices out.

    Returns:
        ``(ŷ_q, symbols)`` where ``symbols`` holds ``xs`` (list of d x 1), ``xq``, ``w``, ``heads``.
    """
    for name, val in (("d", d), ("N", N), ("H", H)):
        if not isinstance(val, int) or val < 1:
            raise ValueError(f"`{name}` must be a positive int; got {val!r}.")
    w = sp.Matrix(sp.symbols(f"w1:{d + 1}", real=True))
    xs = [sp.Matrix(sp.symbols(f"x{n}_1:{d + 1}", real=True)) for n in range(1, N + 1)]
    xq = sp.Matrix(sp.symbols(f"xq1:{d + 1}", real=True))
    cols = [sp.Matrix.vstack(x, sp.Matrix([(w.T * x)[0]])) for x in xs]
    cols.append(sp.Matrix.vstack(xq, sp.Matrix([0])))
    X = sp.Matrix.hstack(*cols)
    heads = make_heads(d, H)
    out = sp.Matrix(X)
    for i, h in enumerate(heads, 1):
        star = sp.Matrix(d, d + 1, lambda a, b, i=i: sp.Symbol(f"starV{i}_{a}{b}", real=True))
        WV = sp.Matrix.vstack(star, sp.Matrix([[*([0] * d), h.v]]))
        WK = sp.Matrix([[*list(h.k), 0]])
        WQ = sp.Matrix([[*list(h.q), sp.Symbol(f"starQ{i}", real=True)]])
        out += WV * X * X.T * WK.T * WQ * X / N
    return sp.expand(out[d, N]), {"xs": xs, "xq": xq, "w": w, "heads": heads}


def cnn_prediction(heads: Sequence[Head], beta: sp.Matrix, xq: sp.Matrix,
                   vec=colvec) -> sp.Expr:  # fmt: skip
    """Three-layer CNN form ``Σ_i v_i q_iᵀ K_i z`` with ``K_i = I_d ⊗ k_iᵀ``, ``z = vec(β x_qᵀ)``.

    Lemma 3.1 / eq. (12). ``vec`` is the flattening used for ``z`` (column-wise by default).
    """
    z = vec(beta * xq.T)
    d = beta.shape[0]
    return sp.expand(sum((h.v * h.q.T * sp.kronecker_product(sp.eye(d), h.k.T) * z)[0]
                         for h in heads))  # fmt: skip


@statement
def population_loss(Sigma: sp.Matrix, N: sp.Expr, heads: Sequence[Head],
                    E2: sp.Matrix | None = None) -> sp.Expr:  # fmt: skip
    """Closed-form population loss ``tr Σ - 2 tr(Σ M Σ) + tr(M Σ Mᵀ E[Σ̂²])``.

    Args:
        Sigma: input covariance.
        N: context length.
        heads: the heads defining ``M``.
        E2: ``E[Σ̂²]``; defaults to the closed form of :mod:`theory.wishart`.
    """
    if E2 is None:
        E2 = wishart_second_moment_closed_form(Sigma, N)
    M = kv_matrix(heads)
    return (Sigma.trace() - 2 * (Sigma * M * Sigma).trace() + (M * Sigma * M.T * E2).trace())


def _expect_quadratic(expr: sp.Expr, vars_: Sequence[sp.Symbol], second) -> sp.Expr:
    """Replace monomials of degree <= 2 in zero-mean ``vars_``: x_a x_b -> second(a, b)."""
    poly = sp.Poly(sp.expand(expr), *vars_)
    out = sp.Integer(0)
    for monom, coeff in poly.terms():
        deg = sum(monom)
        if deg == 0:
            out += coeff
        elif deg == 2:
            idx = [i for i, m in enumerate(monom) for _ in range(m)]
            out += coeff * second(idx[0], idx[1])
        elif deg > 2:
            raise ValueError("`expr` has degree > 2 in the Gaussian variables.")
    return out


def derive_population_loss(Sigma: sp.Matrix, N: sp.Expr, heads: Sequence[Head]) -> sp.Expr:
    """Derive ``E[(y_q - ŷ_q)²]`` with ``ŷ_q = wᵀ Σ̂ M x_q`` by Gaussian/Wishart expectations.

    Expectation over ``x_q ~ N(0, Σ)``, then ``w ~ N(0, I)``, then over ``Σ̂`` (first moment Σ,
    second moments from :func:`theory.wishart.wishart_pair_moment`).
    """
    d = Sigma.shape[0]
    w = sp.Matrix(sp.symbols(f"ew1:{d + 1}", real=True))
    xq = sp.Matrix(sp.symbols(f"exq1:{d + 1}", real=True))
    S = symmetric_matrix(d, "eS")
    M = kv_matrix(heads)
    err = (w.T * xq)[0] - (w.T * S * M * xq)[0]
    e1 = _expect_quadratic(err**2, list(xq), lambda a, b: Sigma[a, b])
    e2 = _expect_quadratic(e1, list(w), lambda a, b: sp.Integer(int(a == b)))
    s_syms = sorted({S[i, j] for i in range(d) for j in range(d)}, key=lambda s: s.name)
    pos = {s: next((i, j) for i in range(d) for j in range(d) if S[i, j] == s) for s in s_syms}
    poly = sp.Poly(sp.expand(e2), *s_syms)
    out = sp.Integer(0)
    for monom, coeff in poly.terms():
        deg = sum(monom)
        idx = [s_syms[i] for i, m in enumerate(monom) for _ in range(m)]
        if deg == 0:
            out += coeff
        elif deg == 1:
            out += coeff * Sigma[pos[idx[0]]]
        else:
            (a, b), (c, e) = pos[idx[0]], pos[idx[1]]
            out += coeff * wishart_pair_moment(Sigma, N, a, b, c, e)
    return out


# ---------------------------------------------------------------------------------------------
# Gradients (19)-(21) and Hessian blocks (App. C.1)
# ---------------------------------------------------------------------------------------------


def gradient_printed(Sigma, E2, heads, i: int) -> dict[str, sp.Matrix]:
    """Gradients (19)-(21) of head ``i`` exactly as printed (eq. 21 uses ``Σ M E[Σ̂²]``)."""
    h, M = heads[i], kv_matrix(heads)
    G = Sigma**2 - E2 * M * Sigma
    return {"v": -2 * h.k.T * G * h.q, "k": -2 * h.v * G * h.q,
            "q": -2 * h.v * (Sigma**2 - Sigma * M * E2) * h.k}  # fmt: skip


@statement
def gradient_corrected(Sigma, E2, heads, i: int) -> dict[str, sp.Matrix]:
    """Gradients (19)-(21) with eq. (21) corrected to ``Σ Mᵀ E[Σ̂²]`` (``q_i' k_i'ᵀ``)."""
    out = gradient_printed(Sigma, E2, heads, i)
    h, M = heads[i], kv_matrix(heads)
    out["q"] = -2 * h.v * (Sigma**2 - Sigma * M.T * E2) * h.k
    return out


def hessian_blocks_printed(Sigma, E2, heads, i: int, corrected: bool = False) -> dict:
    """Hessian blocks of head ``i`` as printed in App. C.1 (``corrected`` fixes ``H_qq``).

    Keys ``vv, kv, kk, kq, qq, qv``; ``kv``/``qv`` are ``d x 1`` columns (``∂/∂k (∇_v L)``),
    ``kq = ∂/∂qᵀ (∇_k L)`` is ``d x d`` with rows indexed by ``k``.
    """
    h, M = heads[i], kv_matrix(heads)
    v, k, q = h.v, h.k, h.q
    qSq = (q.T * Sigma * q)[0]
    kEk = (k.T * E2 * k)[0]
    blocks = {
        "vv": sp.Matrix([2 * kEk * qSq]),
        "kv": -2 * Sigma**2 * q + 2 * E2 * M * Sigma * q + 2 * v * qSq * E2 * k,
        "kk": 2 * v**2 * qSq * E2,
        "kq": -2 * v * Sigma**2 + 2 * v * E2 * M * Sigma + 2 * v**2 * E2 * k * q.T * Sigma,
        "qq": 2 * v**2 * Sigma * k * k.T * E2,
        "qv": -2 * Sigma**2 * k + 2 * Sigma * M.T * E2 * k + 2 * v * kEk * Sigma * q,
    }
    if corrected:
        blocks["qq"] = 2 * v**2 * kEk * Sigma
    return blocks


def hessian_blocks_derived(L: sp.Expr, head: Head) -> dict:
    """Hessian blocks of ``L`` w.r.t. one head, by symbolic differentiation (same layout)."""
    v, k, q = head.v, list(head.k), list(head.q)
    g_v = sp.diff(L, v)
    g_k = sp.Matrix([sp.diff(L, s) for s in k])
    return {
        "vv": sp.Matrix([sp.diff(g_v, v)]),
        "kv": sp.Matrix([sp.diff(g_v, s) for s in k]),
        "kk": g_k.jacobian(k),
        "kq": g_k.jacobian(q),
        "qq": sp.Matrix([sp.diff(L, s) for s in q]).jacobian(q),
        "qv": sp.Matrix([sp.diff(g_v, s) for s in q]),
    }


# ---------------------------------------------------------------------------------------------
# Symbolic dimension: the same quantities in the trace algebra (theory.trace_algebra)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlgebraModel:
    """ATTN_S in the trace algebra: letters for Σ, Σ̂, M, w, x_q, one head (v, k, q) and the rest R.

    ``M = R + v k qᵀ`` covers any number of heads (``R`` is the sum over the other heads, an
    arbitrary d x d matrix); ``E`` is an abstract symmetric stand-in for ``E[Σ̂²]`` (the gradient
    and Hessian formulas hold for any symmetric ``E``), ``E2`` its closed form.
    """

    alg: Algebra
    S: MatExpr
    Sh: MatExpr
    M: MatExpr
    w: MatExpr
    xq: MatExpr
    E: MatExpr
    E2: MatExpr
    R: MatExpr
    k: MatExpr
    q: MatExpr
    dk: MatExpr
    dk2: MatExpr
    dq: MatExpr
    dq2: MatExpr
    v: sp.Symbol
    N: sp.Symbol

    def loss(self, E: MatExpr) -> MatExpr:
        """``tr Σ - 2 tr(Σ M Σ) + tr(M Σ Mᵀ E)`` (M the letter; substitute ``head_M``)."""
        S, M = self.S, self.M
        return S.trace() - 2 * (S * M * S).trace() + (M * S * M.T * E).trace()

    @property
    def head_M(self) -> MatExpr:
        """``R + v k qᵀ``."""
        return self.R + self.k * self.q.T * self.v

    def head_loss(self) -> MatExpr:
        """The loss with ``M = R + v k qᵀ`` and the abstract symmetric ``E``."""
        return self.loss(self.E).subs({"M": self.head_M})

    def expect(self, expr: MatExpr) -> MatExpr:
        """``E`` over x_q ~ N(0, Σ), w ~ N(0, I) and Σ̂ (Wishart), in this order."""
        return (expr.expect_gaussian("xq", self.S).expect_gaussian("w", self.alg.eye("d"))
                .expect_sample_cov("Sh", "x", self.S, self.N))  # fmt: skip


@functools.lru_cache(maxsize=1)
def algebra_model() -> AlgebraModel:
    """The cached :class:`AlgebraModel`."""
    alg = Algebra()
    N = sp.Symbol("N", positive=True)
    S = alg.letter("S", "d", "d", symmetric=True)
    E2 = S * S + (S + S.trace() * alg.eye("d")) * S * (1 / N)
    return AlgebraModel(
        alg=alg, S=S, Sh=alg.letter("Sh", "d", "d", symmetric=True),
        M=alg.letter("M", "d", "d"), w=alg.letter("w", "d", "1"), xq=alg.letter("xq", "d", "1"),
        E=alg.letter("E", "d", "d", symmetric=True), E2=E2, R=alg.letter("R", "d", "d"),
        k=alg.letter("k", "d", "1"), q=alg.letter("q", "d", "1"),
        dk=alg.letter("dk", "d", "1"), dk2=alg.letter("dk2", "d", "1"),
        dq=alg.letter("dq", "d", "1"), dq2=alg.letter("dq2", "d", "1"),
        v=sp.Symbol("v", real=True), N=N,
    )  # fmt: skip


def _alg_gradients(am: AlgebraModel, corrected: bool = True) -> dict[str, MatExpr]:
    """Eqs. (19)-(21) with the abstract symmetric ``E`` (``corrected``: Mᵀ in (21))."""
    S, E, M, k, q, v = am.S, am.E, am.head_M, am.k, am.q, am.v
    G = S * S - E * M * S
    Mq = M.T if corrected else M
    return {"v": -2 * (k.T * G * q), "k": -2 * v * G * q,
            "q": -2 * v * (S * S - S * Mq * E) * k}  # fmt: skip


def _alg_hessian_blocks(am: AlgebraModel, corrected: bool = True) -> dict[str, MatExpr]:
    """App. C.1 Hessian blocks with ``M = R + v k qᵀ`` (``corrected`` fixes H_qq)."""
    S, E, M, k, q, v = am.S, am.E, am.head_M, am.k, am.q, am.v
    qSq, kEk = q.T * S * q, k.T * E * k
    return {
        "vv": 2 * kEk * qSq,
        "kv": -2 * S * S * q + 2 * E * M * S * q + 2 * v * qSq * E * k,
        "kk": 2 * v**2 * qSq * E,
        "kq": -2 * v * S * S + 2 * v * E * M * S + 2 * v**2 * E * k * q.T * S,
        "qq": 2 * v**2 * kEk * S if corrected else 2 * v**2 * S * k * k.T * E,
        "qv": -2 * S * S * k + 2 * S * M.T * E * k + 2 * v * kEk * S * q,
    }


def _alg_derivatives(am: AlgebraModel) -> dict[str, MatExpr]:
    """First and second directional derivatives of the loss, as scalar networks."""
    L = am.head_loss()
    v = am.v
    Lk, Lq = L.diff("k", am.dk), L.diff("q", am.dq)
    return {"v": L.diff_coeff(v), "k": Lk, "q": Lq, "vv": L.diff_coeff(v).diff_coeff(v),
            "kv": Lk.diff_coeff(v), "kk": Lk.diff("k", am.dk2), "kq": Lk.diff("q", am.dq),
            "qq": Lq.diff("q", am.dq2), "qv": Lq.diff_coeff(v)}  # fmt: skip


def _alg_check_gradients(corrected: bool) -> dict[str, bool]:
    am = algebra_model()
    g, D = _alg_gradients(am, corrected), _alg_derivatives(am)
    return {"v": am.alg.equal(D["v"], g["v"]), "k": am.alg.equal(D["k"], am.dk.T * g["k"]),
            "q": am.alg.equal(D["q"], am.dq.T * g["q"], expect=corrected)}  # fmt: skip


def _alg_check_hessians(corrected: bool) -> dict[str, bool]:
    am = algebra_model()
    H, D = _alg_hessian_blocks(am, corrected), _alg_derivatives(am)
    eq = am.alg.equal
    return {"vv": eq(D["vv"], H["vv"]), "kv": eq(D["kv"], am.dk.T * H["kv"]),
            "kk": eq(D["kk"], am.dk.T * H["kk"] * am.dk2),
            "kq": eq(D["kq"], am.dk.T * H["kq"] * am.dq),
            "qq": eq(D["qq"], am.dq.T * H["qq"] * am.dq2, expect=corrected),
            "qv": eq(D["qv"], am.dq.T * H["qv"])}  # fmt: skip


def monte_carlo_expectation_forms(Sigma: np.ndarray, M: np.ndarray, N: int, n: int = 200_000,
                                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Monte Carlo ``E[β (y_q - ŷ_q) x_qᵀ]`` (eqs. 16-17) and its entrywise standard error.

    ``β = (1/N) Σ_n y_n x_n``, ``y_n = wᵀx_n``, ``ŷ_q = βᵀ M x_q``; ``x ~ N(0, Σ)``,
    ``w ~ N(0, I)``.

    Raises:
        ValueError: on inconsistent shapes or non-positive ``N``/``n``.
    """
    Sigma, M = np.asarray(Sigma, float), np.asarray(M, float)
    d = Sigma.shape[0]
    if Sigma.shape != (d, d) or M.shape != (d, d):
        raise ValueError(f"`Sigma` and `M` must be square of equal size; got {Sigma.shape=}, "
                         f"{M.shape=}.")  # fmt: skip
    if not isinstance(N, int) or N < 1 or not isinstance(n, int) or n < 2:
        raise ValueError(f"`N` and `n` must be positive ints (n >= 2); got {N=!r}, {n=!r}.")
    rng = np.random.default_rng(seed)
    L = np.linalg.cholesky(Sigma)
    x = rng.standard_normal((n, N, d)) @ L.T  # (n, N, d)
    xq = rng.standard_normal((n, d)) @ L.T  # (n, d)
    w = rng.standard_normal((n, d))  # (n, d)
    y = np.einsum("nkd,nd->nk", x, w)  # (n, N)
    beta = np.einsum("nk,nkd->nd", y, x) / N  # (n, d)
    err = np.einsum("nd,nd->n", w, xq) - np.einsum("nd,de,ne->n", beta, M, xq)  # (n,)
    F = np.einsum("nd,n,ne->nde", beta, err, xq)  # (n, d, d)
    return F.mean(0), F.std(0, ddof=1) / np.sqrt(n)


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------

_N = sp.Symbol("N", positive=True)


@functools.lru_cache(maxsize=2)
def _generic_setup(d: int = 2):
    """General symmetric Σ in dimension d, H = 2 generic heads (k ≠ q), closed-form loss."""
    Sigma = symmetric_matrix(d, "s")
    heads = make_heads(d, 2)
    E2 = wishart_second_moment_closed_form(Sigma, _N)
    L = sp.expand(population_loss(Sigma, _N, heads, E2))
    return Sigma, E2, heads, L


def _explicit_dims() -> tuple[int, ...]:
    return (2, 3) if exhaustive() else (2,)


def _lemma_3_1_at(d: int, N: int) -> tuple[bool, bool]:
    yhat, s = attn_s_prediction_from_matrices(d, N, 2)
    xs, xq, w, heads = s["xs"], s["xq"], s["w"], s["heads"]
    beta = sum(((w.T * x)[0] * x for x in xs), sp.zeros(d, 1)) / N
    bilinear = stated((beta.T * kv_matrix(heads) * xq)[0], "eq. (12): βᵀ Σ_i v_i k_i q_iᵀ x_q")
    S_hat = sum((x * x.T for x in xs), sp.zeros(d)) / N
    r1 = sp.expand(yhat - bilinear) == 0
    r2 = sp.expand(yhat - cnn_prediction(heads, beta, xq)) == 0
    r3 = sp.expand(beta - S_hat * w) == sp.zeros(d, 1)
    row = cnn_prediction(heads, beta, xq, vec=lambda A: colvec(A.T))
    return r1 and r2 and r3, sp.expand(yhat - row) == 0


@claim(
    "lemma_3_1_prediction",
    "main, Lemma 3.1, App. A.1, eq. (12)",
    "ATTN_S(X)_{d+1,N+1} = (1/N) Σ_n y_n x_nᵀ Σ_i v_i k_i q_iᵀ x_q = Σ_i v_i q_iᵀ K_i z, "
    "z = vec((1/N) Σ_n y_n x_n x_qᵀ), K_i = I ⊗ k_iᵀ.",
)
def check_lemma_3_1() -> CheckResult:
    """Multiply out ATTN_S with the footnote-1 zero pattern (polynomial identity, expanded)."""
    sizes = [(2, 2), (3, 3)] if exhaustive() else [(2, 2), (3, 2)]
    rows = {}
    for d, N in sizes:
        ok, row_ok = _lemma_3_1_at(d, N)
        rows[(d, N)] = row_ok
        if not ok:
            return CheckResult(False, "nonzero polynomial", f"d = {d}, N = {N}", "symbolic",
                               sizes=f"d = {d}, N = {N}, H = 2")  # fmt: skip
    return CheckResult(True, 0, "symbolic data and weights; '*' entries free symbols",
                       "symbolic",
                       "the entries marked * and the residual X drop out; β = Σ̂ w; vec must be "
                       f"column-wise (row-wise vec reproduces ŷ: {any(rows.values())}). Fixed "
                       "sizes only: the trace algebra (theory.trace_algebra) has no vec or "
                       "Kronecker nodes (K_i = I ⊗ k_iᵀ) and no (d+1)×(d+1) block matrices with "
                       "zero blocks, so it cannot state this identity for symbolic d.",
                       sizes="; ".join(f"d = {d}, N = {N}, H = 2" for d, N in sizes))


@claim(
    "a1_zero_blocks_stay_zero",
    "main, App. A.1 (Zhang et al. 2024b App. F.1)",
    "With W^V bottom row [v_vecᵀ, v] and W^K = [kᵀ, κ], the gradients w.r.t. κ and v_vec vanish "
    "at κ = 0, v_vec = 0, so they stay at a zero initialization.",
)
def check_a1_zero_blocks() -> CheckResult:
    """The loss derivative w.r.t. κ, v_vec at 0 is odd under w -> -w, so its expectation is 0."""
    sizes = [(2, 2), (3, 2)] if exhaustive() else [(2, 2)]
    for d, N in sizes:
        w = sp.Matrix(sp.symbols(f"w1:{d + 1}", real=True))
        xs = [sp.Matrix(sp.symbols(f"x{n}_1:{d + 1}", real=True)) for n in range(1, N + 1)]
        xq = sp.Matrix(sp.symbols(f"xq1:{d + 1}", real=True))
        cols = [sp.Matrix.vstack(x, sp.Matrix([(w.T * x)[0]])) for x in xs]
        X = sp.Matrix.hstack(*cols, sp.Matrix.vstack(xq, sp.Matrix([0])))
        v, kap, qs = sp.symbols("v kappa q_star", real=True)
        vv = sp.Matrix(sp.symbols(f"vv1:{d + 1}", real=True))
        k = sp.Matrix(sp.symbols(f"k1:{d + 1}", real=True))
        q = sp.Matrix(sp.symbols(f"q1:{d + 1}", real=True))
        star = sp.Matrix(d, d + 1, lambda a, b: sp.Symbol(f"st{a}{b}", real=True))
        WV = sp.Matrix.vstack(star, sp.Matrix([[*list(vv), v]]))
        WK = sp.Matrix([[*list(k), kap]])
        WQ = sp.Matrix([[*list(q), qs]])
        yhat = (X + WV * X * X.T * WK.T * WQ * X / N)[d, N]
        sq = ((w.T * xq)[0] - yhat) ** 2
        at0 = {kap: 0, **{s: 0 for s in vv}}
        grads = [sp.diff(sq, p).subs(at0) for p in [kap, *list(vv)]]
        flip = {s: -s for s in w}
        odd = [sp.expand(g + g.subs(flip, simultaneous=True)) for g in grads]
        bad = [x for x in odd if x != 0]
        if bad:
            return CheckResult(False, bad[0], "x_n, x_q, w symmetric in law", "symbolic",
                               sizes=f"d = {d}, N = {N}")  # fmt: skip
    return CheckResult(True, 0, "x_n, x_q, w symmetric in law", "symbolic",
                       "integrand of ∂L/∂κ and ∂L/∂v_vec is odd in w -> expectation 0",
                       sizes="; ".join(f"d = {d}, N = {N}" for d, N in sizes))


@claim(
    "a1_attn_m_two_layer",
    "main, App. A.1",
    "ATTN_M(X)_{d+1,N+1} = w₂ᵀ W₁ z with w₂ = (v_i), W₁ rows vec(U_i)ᵀ (u_i = 0, v_vec = 0); "
    "read with W^V X Xᵀ W^KQ X (the printed extra factor W^Q is a typo).",
    erratum=True,
)
def check_attn_m_two_layer() -> CheckResult:
    """Multiply out ATTN_M with merged W^KQ (d = 2, N = 2, H = 2) and compare with w₂ᵀW₁z."""
    d, N, H = 2, 2, 2
    w = sp.Matrix(sp.symbols(f"w1:{d + 1}", real=True))
    xs = [sp.Matrix(sp.symbols(f"x{n}_1:{d + 1}", real=True)) for n in range(1, N + 1)]
    xq = sp.Matrix(sp.symbols(f"xq1:{d + 1}", real=True))
    cols = [sp.Matrix.vstack(x, sp.Matrix([(w.T * x)[0]])) for x in xs]
    X = sp.Matrix.hstack(*cols, sp.Matrix.vstack(xq, sp.Matrix([0])))
    out = sp.Matrix(X)
    w2, rows = [], []
    for i in range(1, H + 1):
        v = sp.Symbol(f"v{i}", real=True)
        U = sp.Matrix(d, d, lambda a, b, i=i: sp.Symbol(f"U{i}_{a}{b}", real=True))
        star = sp.Matrix(d, d + 1, lambda a, b, i=i: sp.Symbol(f"sv{i}_{a}{b}", real=True))
        WV = sp.Matrix.vstack(star, sp.Matrix([[*([0] * d), v]]))
        col = sp.Matrix(d + 1, 1, lambda a, b, i=i: sp.Symbol(f"sk{i}_{a}", real=True))
        WKQ = sp.Matrix.hstack(sp.Matrix.vstack(U, sp.zeros(1, d)), col)
        out += WV * X * X.T * WKQ * X / N
        w2.append(v)
        rows.append(colvec(U).T)
    beta = sum(((w.T * x)[0] * x for x in xs), sp.zeros(d, 1)) / N
    z = colvec(beta * xq.T)
    two_layer = stated((sp.Matrix(w2).T * sp.Matrix.vstack(*rows) * z)[0], "w₂ᵀ W₁ z")
    r = is_zero(out[d, N] - two_layer)
    # As printed, W^V X Xᵀ W^KQ W^Q X multiplies (d+1)x(d+1) by r x (d+1): defined only if r = d+1.
    try:
        _ = sp.ones(d + 1, d + 1) * sp.ones(1, d + 1)
        printed = "defined"
    except sp.ShapeError:
        printed = "undefined (shape error for rank-1 W^Q)"
    return CheckResult(r.holds, r.residual, "u_i = 0, v_vec = 0", r.method,
                       "as printed, 'W^V X Xᵀ W^KQ W^Q X' is not defined for rank-r W^Q "
                       f"(r = 1: {printed}); corrected: W^V X Xᵀ W^KQ X, which gives w₂ᵀW₁z with "
                       "column-wise vec(U_i)", sizes="d = 2, N = 2, H = 2",
                       printed_residual=printed)  # fmt: skip


@claim(
    "population_loss_closed_form",
    "main, Sec. 3 / App. C.1 (loss behind eqs. 16-21)",
    "L = E[(y_q - ŷ_q)²] = tr Σ - 2 tr(Σ M Σ) + tr(M Σ Mᵀ E[Σ̂²]), M = Σ_i v_i k_i q_iᵀ.",
)
def check_population_loss() -> CheckResult:
    """All d: expectation in the trace algebra; d = 2: entrywise with general symmetric Σ."""
    am = algebra_model()
    err = am.w.T * am.xq - am.w.T * am.Sh * am.M * am.xq
    derived = am.expect(err * err)
    res_all = am.alg.residual(derived, am.loss(am.E2))
    Sigma = symmetric_matrix(2, "s")
    heads = make_heads(2, 2)
    r = is_zero(sp.expand(derive_population_loss(Sigma, _N, heads)
                          - population_loss(Sigma, _N, heads)))  # fmt: skip
    ok = r.holds and not res_all
    return CheckResult(ok, r.residual if not res_all else str(res_all),
                       "x_q ~ N(0, Σ), w ~ N(0, I), x_n ~ N(0, Σ) i.i.d.; M arbitrary (any H)",
                       "symbolic (all d) + entrywise",
                       "all d: (wᵀx_q − wᵀΣ̂Mx_q)² averaged over x_q, w and Σ̂ in the trace algebra "
                       "(Σ̂ moments derived, not typed)",
                       sizes="all d, all H (trace algebra); entrywise d = 2, H = 2")  # fmt: skip


_C1_REF = "main, App. C.1, eqs. (16)-(18) (expectation forms)"


@claim(
    "c1_expectation_forms_16_18",
    _C1_REF,
    "τv̇_i = k_iᵀE[β(y_q−ŷ_q)x_qᵀ]q_i, τk̇_i = v_iE[β(y_q−ŷ_q)x_qᵀ]q_i, τq̇_i = "
    "v_iE[x_q(y_q−ŷ_q)βᵀ]k_i with E[β(y_q−ŷ_q)x_qᵀ] = Σ² − E[Σ̂²]MΣ (16) and its transpose "
    "E[x_q(y_q−ŷ_q)βᵀ] = Σ² − ΣMᵀE[Σ̂²] in (18) (printed: ΣME[Σ̂²], see "
    "c1_eq18_matrix_form_as_printed), and these equal −½ of (19)-(21).",
    erratum=True,
)
def check_expectation_forms() -> CheckResult:
    """All d: the expectations in the trace algebra, and −½∇L; d = 3: Monte Carlo, 200k draws."""
    am = algebra_model()
    a = am.alg
    beta = am.Sh * am.w
    err = am.w.T * am.xq - am.w.T * am.Sh * am.M * am.xq
    F = am.expect(beta * err * am.xq.T)
    Fq = am.expect(am.xq * err * beta.T)
    r16 = a.equal(F, stated(am.S * am.S - am.E2 * am.M * am.S, "(16) matrix form"))
    r18 = a.equal(Fq, stated(am.S * am.S - am.S * am.M.T * am.E2, "(18) transposed form"))
    r18_printed = a.equal(Fq, am.S * am.S - am.S * am.M * am.E2, expect=False)
    # τẆ = −½∇L: with M = R + v k qᵀ and E = E[Σ̂²] (closed form)
    Fh, Fqh = F.subs({"M": am.head_M}), Fq.subs({"M": am.head_M})
    L = am.loss(am.E2).subs({"M": am.head_M})
    half = [a.equal(am.k.T * Fh * am.q, L.diff_coeff(am.v) * sp.Rational(-1, 2)),
            a.equal(am.dk.T * Fh * am.q * am.v, L.diff("k", am.dk) * sp.Rational(-1, 2)),
            a.equal(am.dq.T * Fqh * am.k * am.v, L.diff("q", am.dq) * sp.Rational(-1, 2))]
    Sigma = np.array([[1.0, 0.3, -0.2], [0.3, 0.7, 0.1], [-0.2, 0.1, 0.4]])
    Mn = np.array([[0.4, -0.3, 0.1], [0.2, 0.5, -0.4], [0.0, 0.3, 0.6]])  # not symmetric
    N = 4
    mean, se = monte_carlo_expectation_forms(Sigma, Mn, N, seed=2)
    E2n = np.array(wishart_second_moment_closed_form(sp.Matrix(Sigma), N), dtype=float)
    exact = stated(Sigma @ Sigma - E2n @ Mn @ Sigma, "(16) at d = 3")
    z = float(np.max(np.abs(mean - exact) / se))
    ok = r16 and r18 and not r18_printed and all(half) and record("Monte Carlo within 5 s.e.",
                                                                   z < 5)
    return CheckResult(ok, float(np.max(np.abs(mean - exact))),
                       "x_q, w, x_n independent Gaussians; M arbitrary (any H)",
                       "symbolic (all d) + monte-carlo",
                       f"E[x_q(y_q−ŷ_q)βᵀ] = Σ² − ΣMᵀE[Σ̂²] (the transpose of (16)); the printed "
                       f"matrix form Σ² − ΣME[Σ̂²] of (18) is matched by the algebra: "
                       f"{r18_printed} (its own row: c1_eq18_matrix_form_as_printed); "
                       f"(16)-(18) = −½(19)-(21): {all(half)}; Monte Carlo of "
                       f"E[β(y_q−ŷ_q)x_qᵀ] within {z:.2f} s.e. (non-diagonal Σ, non-symmetric M)",
                       sizes="all d, all H (trace algebra); MC d = 3, N = 4, 200k draws (seed 2)",
                       printed_residual="Σ² − ΣME[Σ̂²] ≠ E[x_q(y_q−ŷ_q)βᵀ] (trace algebra)")


@claim(
    "c1_eq18_matrix_form_as_printed",
    _C1_REF.replace("eqs. (16)-(18)", "eq. (18)"),
    "E[x_q(y_q−ŷ_q)βᵀ] = Σ² − ΣME[Σ̂²] (the matrix form printed in (18)).",
    sizes="all d, all H (trace algebra)", failure="typo",
    why="M for Mᵀ in the printed matrix form of (18): it must be the transpose of (16)'s "
        "Σ² − E[Σ̂²]MΣ, as the paper's own (16) and the expectation give.",
    corrected_by="c1_expectation_forms_16_18",
)
def check_eq18_printed() -> CheckResult:
    """The printed matrix form of (18) against the expectation, in the trace algebra (all d)."""
    am = algebra_model()
    beta = am.Sh * am.w
    err = am.w.T * am.xq - am.w.T * am.Sh * am.M * am.xq
    Fq = am.expect(am.xq * err * beta.T)
    res = am.alg.residual(Fq, stated(am.S * am.S - am.S * am.M * am.E2, "(18) as printed"))
    ok = record("(18) as printed equals the expectation", not res)
    return CheckResult(ok, sp.Integer(0) if ok else str(res),
                       "x_q, w, x_n independent Gaussians; M arbitrary (any H); trace algebra",
                       "symbolic (all d)",
                       "printed minus derived is nonzero for non-symmetric M (the two agree "
                       "when M = Mᵀ, e.g. under the ansatz k_i = q_i); the transposed form "
                       "Σ² − ΣMᵀE[Σ̂²] is verified in c1_expectation_forms_16_18",
                       sizes="all d, all H (trace algebra)")


def check_gradients(grad_fn=gradient_corrected, d: int = 2) -> CheckResult:
    """Compare ``grad_fn`` (eqs. 19-21 form) with ∂L/∂(v_i, k_i, q_i) of the closed-form loss."""
    Sigma, E2, heads, L = _generic_setup(d)
    res = []
    for i, (dv, dk, dq) in enumerate(_derived_grads(d)):
        g = grad_fn(Sigma, E2, heads, i)
        res += [dv - g["v"], dk - g["k"], dq - g["q"]]
    first = _first_nonzero(res)
    # Polynomial identity: expanded difference is exactly 0, or a nonzero polynomial (a proof).
    return CheckResult(first == 0, first, "general symmetric Σ, H = 2 heads with k_i ≠ q_i",
                       "symbolic", sizes=f"d = {d}, H = 2")  # fmt: skip


def _first_nonzero(mats) -> sp.Expr:
    for m in mats:
        for e in sp.expand(m):
            if e != 0:
                return sp.factor(e)
    return sp.Integer(0)


@claim(
    "gradients_16_21_as_printed",
    "main, App. C.1, eqs. (16)-(21)",
    "∇_v L = -2kᵀ(Σ² - E[Σ̂²]MΣ)q, ∇_k L = -2v(Σ² - E[Σ̂²]MΣ)q, "
    "∇_q L = -2v(Σ² - Σ M E[Σ̂²])k with M = Σ v k qᵀ (as printed in (18), (21)).",
       failure="typo",
       why="k and q swapped in eq. (21) (M for Mᵀ = Σ v q kᵀ); eqs. (19)-(20) and the proof's own"
           " index algebra give the correct form, and the two agree under the ansatz k = q.",
       corrected_by="gradients_16_21_corrected")
def check_gradients_printed() -> CheckResult:
    """Eqs. (19)-(21) as printed, against symbolic differentiation of L (generic k ≠ q)."""
    r = check_gradients(gradient_printed)
    return dataclasses.replace(r, detail="counterexample: printed minus derived is a nonzero "
                               "polynomial; eq. (21) (and (18)) needs Mᵀ = Σ v q kᵀ in place of M; "
                               "the two agree when M is symmetric, e.g. under the ansatz k_i = q_i",
                               sizes="counterexample at d = 2, H = 2")  # fmt: skip


@claim(
    "gradients_16_21_corrected",
    "main, App. C.1, eqs. (16)-(21)",
    "Eqs. (18)/(21) with Σ_i' v_i' q_i' k_i'ᵀ (= Mᵀ) in place of Σ_i' v_i' k_i' q_i'ᵀ; (16)-(17), "
    "(19)-(20) as printed; τẆ = -½∇L gives (16)-(18).",
    erratum=True,
)
def check_gradients_corrected() -> CheckResult:
    """All d and H in the trace algebra; entrywise d = 2 (d = 3 with ``--exhaustive``)."""
    per = _alg_check_gradients(corrected=True)
    per_printed = _alg_check_gradients(corrected=False)
    dims = _explicit_dims()
    rs = [check_gradients(stated(gradient_corrected, "(19)-(21), corrected"), d) for d in dims]
    printed = check_gradients(gradient_printed)
    ok = all(per.values()) and not per_printed["q"] and all(r.holds for r in rs)
    bad = next((r for r in rs if not r.holds), None)
    return CheckResult(ok, bad.residual if bad else (0 if ok else str(per)),
                       "any symmetric E[Σ̂²]; the other heads enter through an arbitrary matrix R",
                       "symbolic (all d) + entrywise",
                       "printed: ∇_q L = -2v(Σ² - Σ[Σ v k qᵀ]E[Σ̂²])k; corrected: "
                       "-2v(Σ² - Σ[Σ v q kᵀ]E[Σ̂²])k. Directional derivatives of L with M = R + "
                       f"v k qᵀ match (v, k, q): {per}; the printed (21) does not: "
                       f"{per_printed['q']}. Printed minus derived (d = 2, first entry) = "
                       f"{printed.residual} ≠ 0 for generic k ≠ q; equal when k_i = q_i",
                       sizes="all d, all H (trace algebra); entrywise d = "
                             + ", ".join(map(str, dims)) + ", H = 2",
                       printed_residual=printed.residual)  # fmt: skip


@functools.lru_cache(maxsize=2)
def _derived_blocks(d: int = 2):
    Sigma, E2, heads, L = _generic_setup(d)
    return hessian_blocks_derived(L, heads[0])


@functools.lru_cache(maxsize=2)
def _derived_grads(d: int = 2):
    Sigma, E2, heads, L = _generic_setup(d)
    return [(sp.Matrix([sp.diff(L, h.v)]), sp.Matrix([sp.diff(L, s) for s in h.k]),
             sp.Matrix([sp.diff(L, s) for s in h.q])) for h in heads]  # fmt: skip


def check_hessian_blocks(corrected: bool, blocks: Sequence[str] | None = None,
                         printed_fn=None, d: int = 2) -> CheckResult:  # fmt: skip
    """Compare each Hessian block of App. C.1 with symbolic second derivatives of L."""
    Sigma, E2, heads, L = _generic_setup(d)
    derived = _derived_blocks(d)
    printed = (printed_fn or hessian_blocks_printed)(Sigma, E2, heads, 0, corrected=corrected)
    bad, per = [], {}
    for key in blocks or derived:
        diff = sp.expand(derived[key] - printed[key])
        per[key] = diff == sp.zeros(*diff.shape)
        if not per[key]:
            bad.append((key, _first_nonzero([diff])))
    ok = not bad
    return CheckResult(ok, 0 if ok else bad[0][1],
                       "general symmetric Σ, head 1 of H = 2 generic heads", "symbolic",
                       "blocks: " + ", ".join(f"H_{k}:{'ok' if v else 'WRONG'}"
                                              for k, v in per.items()),
                       sizes=f"d = {d}, H = 2")  # fmt: skip


@claim(
    "hessian_blocks_c1_as_printed",
    "main, App. C.1 (Hessian blocks)",
    "H_vv = 2kᵀE[Σ̂²]k qᵀΣq, H_kv, H_kk = 2v²qᵀΣq E[Σ̂²], H_kq, H_qq = 2v² Σ k kᵀ E[Σ̂²], H_qv "
    "as printed.",
       failure="substantive",
       why="the printed H_qq = 2v²Σkkᵀ E[Σ̂²] has a different structure from the derived "
           "2v²(kᵀE[Σ̂²]k)Σ (not a transpose or factor; they differ even at the ansatz).")
def check_hessian_printed() -> CheckResult:
    """All six printed blocks against symbolic differentiation (H_qq is expected to fail)."""
    r = check_hessian_blocks(corrected=False)
    return dataclasses.replace(r, sizes="counterexample at d = 2, H = 2")


@claim(
    "hessian_blocks_c1_corrected",
    "main, App. C.1 (Hessian blocks)",
    "H_qq = ∂²L/∂q∂qᵀ = 2 v² (kᵀ E[Σ̂²] k) Σ (printed: 2 v² Σ k kᵀ E[Σ̂²]); other blocks as "
    "printed.",
    erratum=True,
)
def check_hessian_corrected() -> CheckResult:
    """All d and H: second directional derivatives in the trace algebra; entrywise d = 2 (3)."""
    per = _alg_check_hessians(corrected=True)
    per_printed = _alg_check_hessians(corrected=False)
    dims = _explicit_dims()
    rs = [check_hessian_blocks(corrected=True, d=d,
                               printed_fn=stated(hessian_blocks_printed, "C.1 blocks, corrected"))
          for d in dims]  # fmt: skip
    p = check_hessian_blocks(corrected=False, blocks=["qq"])
    ok = all(per.values()) and not per_printed["qq"] and all(r.holds for r in rs)
    bad = next((r for r in rs if not r.holds), None)
    return CheckResult(ok, bad.residual if bad else (0 if ok else str(per)),
                       "any symmetric E[Σ̂²]; other heads through an arbitrary R",
                       "symbolic (all d) + entrywise",
                       f"trace algebra, all d: {per}; printed H_qq matches: {per_printed['qq']}. "
                       f"{rs[0].detail}. Printed H_qq minus derived (d = 2), first entry: "
                       f"{p.residual}. At the ansatz k=q=v e₁ printed gives 2λ₁a₁v⁴e₁e₁ᵀ, correct "
                       "is 2a₁v⁴Σ; both map e₁ to 2λ₁a₁v⁴e₁, so Q in C.2 is unaffected",
                       sizes="all d, all H (trace algebra); entrywise d = "
                             + ", ".join(map(str, dims)) + ", H = 2",
                       printed_residual=p.residual)  # fmt: skip
