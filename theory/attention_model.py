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

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import sympy as sp

from .verify import CheckResult, claim, is_zero
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
# Claims
# ---------------------------------------------------------------------------------------------

_N = sp.Symbol("N", positive=True)


@functools.lru_cache(maxsize=1)
def _generic_setup():
    """D = 2, general symmetric Σ, H = 2 generic heads (k ≠ q), closed-form loss."""
    Sigma = symmetric_matrix(2, "s")
    heads = make_heads(2, 2)
    E2 = wishart_second_moment_closed_form(Sigma, _N)
    L = sp.expand(population_loss(Sigma, _N, heads, E2))
    return Sigma, E2, heads, L


@claim(
    "lemma_3_1_prediction",
    "main, Lemma 3.1, App. A.1, eq. (12)",
    "ATTN_S(X)_{d+1,N+1} = (1/N) Σ_n y_n x_nᵀ Σ_i v_i k_i q_iᵀ x_q = Σ_i v_i q_iᵀ K_i z, "
    "z = vec((1/N) Σ_n y_n x_n x_qᵀ), K_i = I ⊗ k_iᵀ.",
)
def check_lemma_3_1() -> CheckResult:
    """Multiply out ATTN_S with the footnote-1 zero pattern (d = 2, N = 2, H = 2)."""
    d, N = 2, 2
    yhat, s = attn_s_prediction_from_matrices(d, N, 2)
    xs, xq, w, heads = s["xs"], s["xq"], s["w"], s["heads"]
    beta = sum(((w.T * x)[0] * x for x in xs), sp.zeros(d, 1)) / N
    bilinear = (beta.T * kv_matrix(heads) * xq)[0]
    S_hat = sum((x * x.T for x in xs), sp.zeros(d)) / N
    r1 = is_zero(yhat - bilinear)
    r2 = is_zero(yhat - cnn_prediction(heads, beta, xq))
    r3 = is_zero(beta - S_hat * w)
    ok = r1.holds and r2.holds and r3.holds
    row = cnn_prediction(heads, beta, xq, vec=lambda A: colvec(A.T))
    r_row = is_zero(yhat - row, simplify=False)
    return CheckResult(ok, 0 if ok else [r1.residual, r2.residual, r3.residual],
                       "d = 2, N = 2, H = 2, symbolic data and weights; '*' entries free symbols",
                       "symbolic",
                       "the entries marked * and the residual X drop out; β = Σ̂ w; "
                       f"vec must be column-wise (row-wise vec fails: holds={r_row.holds})")


@claim(
    "a1_zero_blocks_stay_zero",
    "main, App. A.1 (Zhang et al. 2024b App. F.1)",
    "With W^V bottom row [v_vecᵀ, v] and W^K = [kᵀ, κ], the gradients w.r.t. κ and v_vec vanish "
    "at κ = 0, v_vec = 0, so they stay at a zero initialization.",
)
def check_a1_zero_blocks() -> CheckResult:
    """The loss derivative w.r.t. κ, v_vec at 0 is odd under w -> -w, so its expectation is 0."""
    d, N = 2, 2
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
    r = is_zero(sp.Matrix([sp.expand(g + g.subs(flip, simultaneous=True)) for g in grads]))
    return CheckResult(r.holds, r.residual, "d = 2, N = 2; x_n, x_q, w symmetric in law",
                       r.method, "integrand of ∂L/∂κ and ∂L/∂v_vec is odd in w -> expectation 0")


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
    two_layer = (sp.Matrix(w2).T * sp.Matrix.vstack(*rows) * z)[0]
    r = is_zero(out[d, N] - two_layer)
    # As printed, W^V X Xᵀ W^KQ W^Q X multiplies (d+1)x(d+1) by r x (d+1): defined only if r = d+1.
    try:
        _ = sp.ones(d + 1, d + 1) * sp.ones(1, d + 1)
        printed_ok = True
    except sp.ShapeError:
        printed_ok = False
    return CheckResult(r.holds, r.residual, "d = 2, N = 2, H = 2; u_i = 0, v_vec = 0", r.method,
                       "as printed, 'W^V X Xᵀ W^KQ W^Q X' is not defined for rank-r W^Q "
                       f"(r = 1: shape error = {not printed_ok}); corrected: W^V X Xᵀ W^KQ X, "
                       "which gives w₂ᵀW₁z with column-wise vec(U_i)")  # fmt: skip


@claim(
    "population_loss_closed_form",
    "main, Sec. 3 / App. C.1 (loss behind eqs. 16-21)",
    "L = E[(y_q - ŷ_q)²] = tr Σ - 2 tr(Σ M Σ) + tr(M Σ Mᵀ E[Σ̂²]), M = Σ_i v_i k_i q_iᵀ.",
)
def check_population_loss() -> CheckResult:
    """Derive the expectation (Gaussian x_q, w; Wishart Σ̂) and compare with the closed form."""
    Sigma = symmetric_matrix(2, "s")
    heads = make_heads(2, 2)
    derived = derive_population_loss(Sigma, _N, heads)
    r = is_zero(sp.expand(derived - population_loss(Sigma, _N, heads)))
    return CheckResult(r.holds, r.residual, "d = 2, general symmetric Σ, H = 2 generic heads",
                       r.method)  # fmt: skip


def check_gradients(grad_fn=gradient_corrected) -> CheckResult:
    """Compare ``grad_fn`` (eqs. 19-21 form) with ∂L/∂(v_i, k_i, q_i) of the closed-form loss."""
    Sigma, E2, heads, L = _generic_setup()
    res = []
    for i, (dv, dk, dq) in enumerate(_derived_grads()):
        g = grad_fn(Sigma, E2, heads, i)
        res += [dv - g["v"], dk - g["k"], dq - g["q"]]
    first = _first_nonzero(res)
    # Polynomial identity: expanded difference is exactly 0, or a nonzero polynomial (a proof).
    return CheckResult(first == 0, first, "d = 2, general symmetric Σ, H = 2 heads with k_i ≠ q_i",
                       "symbolic")  # fmt: skip


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
)
def check_gradients_printed() -> CheckResult:
    """Eqs. (19)-(21) as printed, against symbolic differentiation of L (generic k ≠ q)."""
    r = check_gradients(gradient_printed)
    return CheckResult(r.holds, r.residual, r.conditions, r.method,
                       "eq. (21) (and (18)) needs Mᵀ = Σ v q kᵀ in place of M; the two agree when "
                       "M is symmetric, e.g. under the ansatz k_i = q_i")  # fmt: skip


@claim(
    "gradients_16_21_corrected",
    "main, App. C.1, eqs. (16)-(21)",
    "Eqs. (18)/(21) with Σ_i' v_i' q_i' k_i'ᵀ (= Mᵀ) in place of Σ_i' v_i' k_i' q_i'ᵀ; (16)-(17), "
    "(19)-(20) as printed; τẆ = -½∇L gives (16)-(18).",
    erratum=True,
)
def check_gradients_corrected() -> CheckResult:
    """Corrected (21) (and hence (18) = -½ (21)) against symbolic differentiation."""
    r = check_gradients(gradient_corrected)
    printed = check_gradients(gradient_printed)
    return CheckResult(r.holds, r.residual, r.conditions, r.method,
                       "printed: ∇_q L = -2v(Σ² - Σ[Σ v k qᵀ]E[Σ̂²])k; corrected: "
                       "-2v(Σ² - Σ[Σ v q kᵀ]E[Σ̂²])k. Evidence: printed minus derived = "
                       f"{printed.residual} ≠ 0 for generic k ≠ q; equal when k_i = q_i")


@functools.lru_cache(maxsize=1)
def _derived_blocks():
    Sigma, E2, heads, L = _generic_setup()
    return hessian_blocks_derived(L, heads[0])


@functools.lru_cache(maxsize=1)
def _derived_grads():
    Sigma, E2, heads, L = _generic_setup()
    return [(sp.Matrix([sp.diff(L, h.v)]), sp.Matrix([sp.diff(L, s) for s in h.k]),
             sp.Matrix([sp.diff(L, s) for s in h.q])) for h in heads]  # fmt: skip


def check_hessian_blocks(corrected: bool, blocks: Sequence[str] | None = None,
                         printed_fn=None) -> CheckResult:  # fmt: skip
    """Compare each Hessian block of App. C.1 with symbolic second derivatives of L."""
    Sigma, E2, heads, L = _generic_setup()
    derived = _derived_blocks()
    printed = (printed_fn or hessian_blocks_printed)(Sigma, E2, heads, 0, corrected=corrected)
    bad, per = [], {}
    for key in blocks or derived:
        diff = sp.expand(derived[key] - printed[key])
        per[key] = diff == sp.zeros(*diff.shape)
        if not per[key]:
            bad.append((key, _first_nonzero([diff])))
    ok = not bad
    return CheckResult(ok, 0 if ok else bad[0][1],
                       "d = 2, general symmetric Σ, head 1 of H = 2 generic heads", "symbolic",
                       "blocks: " + ", ".join(f"H_{k}:{'ok' if v else 'WRONG'}"
                                              for k, v in per.items()))  # fmt: skip


@claim(
    "hessian_blocks_c1_as_printed",
    "main, App. C.1 (Hessian blocks)",
    "H_vv = 2kᵀE[Σ̂²]k qᵀΣq, H_kv, H_kk = 2v²qᵀΣq E[Σ̂²], H_kq, H_qq = 2v² Σ k kᵀ E[Σ̂²], H_qv "
    "as printed.",
)
def check_hessian_printed() -> CheckResult:
    """All six printed blocks against symbolic differentiation (H_qq is expected to fail)."""
    return check_hessian_blocks(corrected=False)


@claim(
    "hessian_blocks_c1_corrected",
    "main, App. C.1 (Hessian blocks)",
    "H_qq = ∂²L/∂q∂qᵀ = 2 v² (kᵀ E[Σ̂²] k) Σ (printed: 2 v² Σ k kᵀ E[Σ̂²]); other blocks as "
    "printed.",
    erratum=True,
)
def check_hessian_corrected() -> CheckResult:
    """Corrected H_qq plus the five correct printed blocks, against symbolic differentiation."""
    r = check_hessian_blocks(corrected=True)
    p = check_hessian_blocks(corrected=False, blocks=["qq"])
    return CheckResult(r.holds, r.residual, r.conditions, r.method,
                       f"{r.detail}. Printed H_qq minus derived, first entry: {p.residual}. At the "
                       "ansatz k=q=v e₁ printed gives 2λ₁a₁v⁴e₁e₁ᵀ, correct is 2a₁v⁴Σ; both map e₁ "
                       "to 2λ₁a₁v⁴e₁, so Q in C.2 is unaffected")  # fmt: skip
