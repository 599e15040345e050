"""Fixed-point manifolds of ATTN_S (App. A.2), the ansatz (3)-(5) and the saddle loss levels.

Main paper: Section 3 ("Global Dynamics ⟺ Last-Layer v Dynamics", eqs. 3-5) and Appendix A.2.
Σ is taken diagonal, ``Σ = diag(λ_1, ..., λ_d)`` — no loss of generality, since the loss is
invariant under ``k_i -> R k_i, q_i -> R q_i, Σ -> R Σ Rᵀ`` — so ``e_j`` is the j-th unit vector.

Examples:
    >>> import sympy as sp
    >>> lam, N = sp.Symbol("lam", positive=True), sp.Symbol("N", positive=True)
    >>> sp.simplify(learned_value(lam, 3 * lam, N) ** 3 * (lam + 4 * lam / N))
    1
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import sympy as sp

from .attention_model import (
    Head,
    _alg_derivatives,
    algebra_model,
    gradient_corrected,
    head_params,
    make_heads,
    population_loss,
)
from .verify import CheckResult, claim, exhaustive, is_zero, stated, statement
from .wishart import wishart_eigenvalue, wishart_second_moment_closed_form

__all__ = [
    "learned_value",
    "ansatz_heads",
    "AnsatzModel",
    "ansatz_model",
    "saddle_loss",
    "saddle_loss_paper_form",
    "coordinate_gradient",
    "coordinate_loss",
    "learned_relation",
    "reduce_learned",
    "T_SYM",
]

N_SYM = sp.Symbol("N", positive=True)


@statement
def learned_value(lam: sp.Expr, trace: sp.Expr, N: sp.Expr) -> sp.Expr:
    """Eq. (3): ``v_i = (λ_i + (λ_i + tr Σ)/N)^{-1/3}``."""
    return (lam + (lam + trace) / N) ** sp.Rational(-1, 3)


class AnsatzModel:
    """Symbolic ATTN_S with ``H`` heads in dimension ``d``, ``Σ = diag(λ)``, and its loss.

    Attributes:
        lam: eigenvalue symbols ``λ_1..λ_d``; ``Sigma``, ``E2`` (diag ``a_i``), ``a``.
        heads: generic symbolic heads; ``params``: all parameters (head-major, App. C.1 order).
        L: closed-form population loss; ``grad``: its gradient (column).
    """

    def __init__(self, d: int, H: int):
        if not isinstance(d, int) or not isinstance(H, int) or d < 1 or H < 1:
            raise ValueError(f"`d` and `H` must be positive ints; got {d=!r}, {H=!r}.")
        self.d, self.H = d, H
        self.lam = sp.symbols(f"lambda1:{d + 1}", positive=True)
        self.Sigma = sp.diag(*self.lam)
        self.N = N_SYM
        self.E2 = wishart_second_moment_closed_form(self.Sigma, self.N)
        self.trace = sum(self.lam)
        self.a = [wishart_eigenvalue(lmb, self.trace, self.N) for lmb in self.lam]
        self.heads = make_heads(d, H)
        self.params = [p for h in self.heads for p in head_params(h)]

    def loss_at(self, sub: dict) -> sp.Expr:
        """Closed-form population loss at the point ``sub`` (see :mod:`theory.attention_model`)."""
        return population_loss(self.Sigma, self.N, ansatz_heads(self, sub), self.E2)

    def grad_at(self, sub: dict) -> sp.Matrix:
        """Full gradient (all heads, ``params`` order) at ``sub``.

        Uses eqs. (19)-(21) with (21) corrected, which ``gradients_16_21_corrected`` verifies
        against symbolic differentiation of the loss (substituting first keeps this fast).
        """
        heads = ansatz_heads(self, sub)
        rows = []
        for i in range(self.H):
            g = gradient_corrected(self.Sigma, self.E2, heads, i)
            rows += [g["v"], g["k"], g["q"]]
        return sp.expand(sp.Matrix.vstack(*rows))

    @property
    def grad(self) -> sp.Matrix:
        """Gradient at the generic symbolic point."""
        return self.grad_at({p: p for p in self.params})

    def e(self, j: int) -> sp.Matrix:
        """Unit eigenvector ``e_j`` (1-based)."""
        return sp.eye(self.d)[:, j - 1]

    def point(self, assignment: dict[int, tuple[sp.Expr, sp.Expr, sp.Expr]]) -> dict:
        """Substitution putting head ``i`` at ``(v, k, q)``; unlisted heads are set to zero."""
        sub = {}
        for i, h in enumerate(self.heads, 1):
            v, k, q = assignment.get(i, (0, sp.zeros(self.d, 1), sp.zeros(self.d, 1)))
            sub[h.v] = v
            sub.update(dict(zip(h.k, k, strict=True)))
            sub.update(dict(zip(h.q, q, strict=True)))
        return sub

    def u(self, j: int) -> sp.Symbol:
        """Symbol ``u_j`` standing for the learned value v_j of eq. (3) (see :meth:`reduce`)."""
        return sp.Symbol(f"u{j}", positive=True)

    def relation(self, j: int) -> sp.Expr:
        """Polynomial form of eq. (3): ``u_j³ (N λ_j + λ_j + tr Σ) - N = 0``."""
        lj = self.lam[j - 1]
        return self.u(j) ** 3 * (self.N * lj + lj + self.trace) - self.N

    def reduce(self, expr: sp.Expr, learned: Iterable[int]) -> sp.Expr:
        """Exact remainder of ``numerator(expr)`` modulo the eq.-(3) relations of ``learned``.

        Zero iff ``expr`` vanishes when every ``u_j`` equals its learned value (the relation is
        irreducible of degree 3 in ``u_j`` with a single positive root).
        """
        num = sp.numer(sp.together(sp.expand(expr)))
        for j in learned:
            num = sp.rem(sp.expand(num), sp.expand(self.relation(j)), self.u(j))
        return sp.expand(num)

    def ansatz(self, learned: Iterable[int], active: int | None = None,
               v_active: sp.Expr | None = None, symbolic_values: bool = False) -> dict:  # fmt: skip
        """Eqs. (3)-(5): learned heads at eq. (3), one active head, the rest zero.

        Head ``j`` for ``j in learned`` sits at ``k=q=v_j e_j`` with v_j of eq. (3); head
        ``active`` at ``k = q = v_active e_active``; the rest are zero (head i learns e_i).

        With ``symbolic_values`` the learned values are the symbols ``u_j`` (use :meth:`reduce`).
        """
        assignment = {}
        for j in learned:
            vj = (self.u(j) if symbolic_values
                  else learned_value(self.lam[j - 1], self.trace, self.N))  # fmt: skip
            assignment[j] = (vj, vj * self.e(j), vj * self.e(j))
        if active is not None:
            assignment[active] = (v_active, v_active * self.e(active), v_active * self.e(active))
        return self.point(assignment)

    def head_slice(self, i: int) -> slice:
        """Rows of head ``i`` (1-based) in ``params``."""
        n = 2 * self.d + 1
        return slice((i - 1) * n, i * n)

    def hvp(self, sub: dict, vec: sp.Matrix) -> sp.Matrix:
        """Exact Hessian-vector product ``H(w) vec`` at the point ``sub``: d/dt ∇L(w + t vec)."""
        nonzero = [x for x in vec if x != 0]
        if not nonzero:
            return sp.zeros(len(self.params), 1)
        # Linearity: H(c·u) = c·H(u); factoring out a common scalar keeps the expansion small.
        scale = nonzero[0]
        unit = vec.applyfunc(lambda x: sp.cancel(x / scale))
        t = sp.Symbol("t_hvp")
        shifted = {p: sub[p] + t * unit[n] for n, p in enumerate(self.params)}
        return sp.expand(scale * sp.diff(self.grad_at(shifted), t).subs(t, 0))


@functools.lru_cache(maxsize=8)
def ansatz_model(d: int, H: int) -> AnsatzModel:
    """Cached :class:`AnsatzModel` (building the loss and gradient is the slow part)."""
    return AnsatzModel(d, H)


def ansatz_heads(model: AnsatzModel, sub: dict) -> list[Head]:
    """The heads of ``model`` evaluated at the substitution ``sub``."""
    return [Head(h.v.subs(sub), h.k.subs(sub), h.q.subs(sub)) for h in model.heads]


def saddle_loss(model: AnsatzModel, learned: Sequence[int]) -> sp.Expr:
    """Loss at the ansatz point of ``M(S)`` with ``S = learned`` (derived from the loss)."""
    return model.loss_at(model.ansatz(learned))


@statement
def saddle_loss_paper_form(lam: Sequence[sp.Expr], learned: Sequence[int], N: sp.Expr) -> sp.Expr:
    """``L(M_S) = tr Σ - Σ_{j∈S} λ_j / (1 + (1 + tr Σ/λ_j)/N)`` (Zhang et al. 2025 saddles)."""
    tr = sum(lam)
    return tr - sum(lam[j - 1] / (1 + (1 + tr / lam[j - 1]) / N) for j in learned)


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Eigen-coordinate reduction: the ansatz computations for every d, H and m
# ---------------------------------------------------------------------------------------------

#: ``tr Σ`` as an independent symbol: the only way other coordinates enter a coordinate's block.
T_SYM = sp.Symbol("T", positive=True)


def coordinate_gradient(lam, v, k, q, trace=T_SYM, N=N_SYM) -> sp.Matrix:
    """``(∂L/∂v, e_jᵀ∂L/∂k, e_jᵀ∂L/∂q)`` of a head ``(v, k e_j, q e_j)`` alone on coordinate j.

    Reduction (all d, H): at points where Σ, E[Σ̂²] and M are diagonal in Σ's eigenbasis and each
    head lies on one eigen-coordinate, eqs. (19)-(21) (proved for every d in
    ``gradients_16_21_corrected``) are products of diagonal matrices and coordinate vectors, so
    they act coordinate by coordinate: coordinate j sees the 1 x 1 blocks ``Σ = [λ_j]``,
    ``E[Σ̂²] = [a_j]``, ``M = [M_jj]`` and nothing else (the other coordinates enter ``a_j`` only
    through ``T = tr Σ``), and every off-coordinate component is 0. The gradient is therefore
    that of a d = 1 model, computed here with the same ``gradient_corrected``.
    """
    a = wishart_eigenvalue(lam, trace, N)
    g = gradient_corrected(sp.Matrix([[lam]]), sp.Matrix([[a]]),
                           [Head(v, sp.Matrix([k]), sp.Matrix([q]))], 0)  # fmt: skip
    return sp.Matrix([g["v"][0], g["k"][0], g["q"][0]])


def coordinate_loss(lam, mu, trace=T_SYM, N=N_SYM) -> sp.Expr:
    """Coordinate j's share ``λ − 2λ²μ + a λ μ²`` of the loss (``M_jj = μ``); they sum to L."""
    a = wishart_eigenvalue(lam, trace, N)
    return population_loss(sp.Matrix([[lam]]), N, [Head(mu, sp.Matrix([1]), sp.Matrix([1]))],
                           sp.Matrix([[a]]))  # fmt: skip


def learned_relation(u, lam, trace=T_SYM, N=N_SYM) -> sp.Expr:
    """Eq. (3) as a polynomial: ``u³(Nλ + λ + T) − N`` (zero at the learned value u)."""
    return u**3 * (N * lam + lam + trace) - N


def reduce_learned(expr, u, lam, trace=T_SYM, N=N_SYM) -> sp.Expr:
    """Remainder of ``numerator(expr)`` modulo :func:`learned_relation` (0 ⟺ expr vanishes)."""
    num = sp.numer(sp.together(sp.expand(expr)))
    return sp.expand(sp.rem(sp.expand(num), sp.expand(learned_relation(u, lam, trace, N)), u))


_LAM, _U, _V = (sp.Symbol(n, positive=True) for n in ("lambda", "u", "v"))


def _explicit_sizes():
    """Explicit cross-checks of the reduction: (d, H) pairs."""
    return [(3, 3), (4, 4)] if exhaustive() else [(3, 3)]


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


@claim(
    "ansatz_learned_value_eq3",
    "main, Sec. 3, eq. (3)",
    "A head with k_i = q_i = v_i e_i is at rest under GD iff v_i = (λ_i + (λ_i + tr Σ)/N)^{-1/3}.",
)
def check_learned_value() -> CheckResult:
    """All d: the coordinate reduction; explicit d = 3, H = 1: solve ∇L = 0 on the ray."""
    g = coordinate_gradient(_LAM, _V, _V, _V)
    roots_red = sp.solve(sp.factor(g[0]) / _V**2, _V)
    exp_red = learned_value(_LAM, T_SYM, N_SYM)
    ok_red = (len(roots_red) == 1 and is_zero(roots_red[0] ** 3 - exp_red**3).holds
              and all(reduce_learned(x, _V, _LAM) == 0 for x in g))  # fmt: skip
    m = ansatz_model(3, 1)
    v = sp.Symbol("v", positive=True)
    gm = m.grad_at(m.point({1: (v, v * m.e(1), v * m.e(1))}))
    roots = sp.solve(sp.factor(gm[0]) / v**2, v)
    expected = learned_value(m.lam[0], m.trace, m.N)
    ok_root = len(roots) == 1 and is_zero(roots[0] ** 3 - expected**3).holds
    r = is_zero(gm.subs(v, expected))
    return CheckResult(ok_red and ok_root and r.holds, r.residual, "Σ = diag(λ) (w.l.o.g.)",
                       "symbolic (all d) + explicit",
                       f"reduced: the only positive root of ∂L/∂v on the ray has v³ = λ/a = "
                       f"{sp.factor(roots_red[0] ** 3) if roots_red else '—'}; explicit d = 3: "
                       f"{roots}", sizes="all d, H (eigen-coordinate reduction); explicit d = 3, "
                       "H = 1")  # fmt: skip


@claim(
    "a2_attn_s_fixed_point_manifolds",
    "main, App. A.2 (ATTN_S manifolds M(S_m))",
    "For every subset S of the d eigen-directions (2^d manifolds), points satisfying conditions "
    "(1)-(3) are fixed points of the GD flow; the ansatz (3)-(5) satisfies (1)-(3).",
)
def check_attn_s_manifolds() -> CheckResult:
    """All d, S: reduction; explicit d = 3 (4): all subsets, plus off-ansatz points."""
    # reduction: a learned coordinate is at rest and has M_jj as in (1); a zero head is at rest
    g_learned = [reduce_learned(x, _U, _LAM) for x in coordinate_gradient(_LAM, _U, _U, _U)]
    cond1 = reduce_learned(_U**3 - 1 / (_LAM + (_LAM + T_SYM) / N_SYM), _U, _LAM)
    g_zero = coordinate_gradient(_LAM, 0, 0, 0)
    ok_red = all(x == 0 for x in [*g_learned, cond1, *g_zero])
    checked = 0
    for d, H in _explicit_sizes():
        m = ansatz_model(d, H)
        for size in range(d + 1):
            for S in itertools.combinations(range(1, d + 1), size):
                sub = m.ansatz(S, symbolic_values=True)
                rem = [m.reduce(g, S) for g in m.grad_at(sub)]
                if any(x != 0 for x in rem):
                    return CheckResult(False, next(x for x in rem if x != 0), f"subset {S}",
                                       sizes=f"d = {d}, H = {H}")  # fmt: skip
                heads = ansatz_heads(m, sub)
                M = sum((h.v * h.k * h.q.T for h in heads), sp.zeros(d))
                target = sum((m.e(j) * m.e(j).T * m.N / (m.N * m.lam[j - 1] + m.lam[j - 1]
                                                          + m.trace) for j in S), sp.zeros(d))
                rem1 = [m.reduce(x, S) for x in M - target]
                if any(x != 0 for x in rem1):
                    return CheckResult(False, next(x for x in rem1 if x != 0),
                                       f"condition (1), {S}", sizes=f"d = {d}, H = {H}")
                checked += 1
    m = ansatz_model(3, 3)
    # Off-ansatz points: rescaled k/q (condition (2)) and a zero-value head with k in span (3).
    al, be, c1, c2, q1, q2, q3 = sp.symbols("alpha beta c1 c2 r1 r2 r3", positive=True)
    u1 = m.u(1)
    sub = m.point({1: (u1**3 / (al * be), al * m.e(1), be * m.e(1)),
                   2: (0, c1 * m.e(1), sp.Matrix([q1, q2, q3]))})  # fmt: skip
    rem2 = [m.reduce(g, [1]) for g in m.grad_at(sub)]
    bad = m.point({1: (u1**3 / (al * be), al * m.e(1), be * m.e(1)),
                   2: (0, c2 * m.e(2), sp.Matrix([q1, q2, q3]))})  # fmt: skip
    not_rest = any(m.reduce(g, [1]) != 0 for g in m.grad_at(bad))
    ok = ok_red and all(x == 0 for x in rem2) and not_rest
    return CheckResult(ok, 0 if ok else next((x for x in rem2 if x != 0), "reduction"),
                       "Σ = diag(λ); head i learns e_i; exact remainders modulo the eq.-(3) "
                       "relation u³(Nλ+λ+trΣ) = N", "symbolic (all d) + explicit",
                       f"reduction: learned coordinates at rest with M_jj as in (1), zero heads at "
                       f"rest, for every S ⊆ {{1..d}}: {ok_red}; explicitly {checked} ansatz "
                       "points "
                       "at rest and satisfying (1); off-ansatz points (k=αe₁, q=βe₁, v=c/(αβ); v=0 "
                       "head with k ∈ span) at rest; a v = 0 head with k ∉ span and generic q is "
                       f"not at rest: {not_rest} (but see a2_attn_s_fixed_points_complete_*: (3) "
                       "is "
                       "not necessary)",
                       sizes="all d, H, S (eigen-coordinate reduction); explicit "
                             + "; ".join(f"d = {d}, H = {H}, all {2**d} S" for d, H in
                                         _explicit_sizes()))  # fmt: skip


@claim(
    "saddle_loss_levels",
    "main, App. A.2 / Sec. 3 (loss plateaus L(M_m); Zhang et al. 2025)",
    "L(M(S)) = tr Σ - Σ_{j∈S} λ_j / (1 + (1 + tr Σ/λ_j)/N); each learned direction lowers the loss "
    "by an amount increasing in λ_j (so the top eigenvector gives the largest drop).",
)
def check_saddle_losses() -> CheckResult:
    """All d: sum of coordinate losses; explicit d = 3: every ansatz fixed point."""
    drop_red = reduce_learned(coordinate_loss(_LAM, _U**3) - _LAM
                              + _LAM / (1 + (1 + T_SYM / _LAM) / N_SYM), _U, _LAM)  # fmt: skip
    ok_red = drop_red == 0 and sp.simplify(coordinate_loss(_LAM, 0) - _LAM) == 0
    m = ansatz_model(3, 3)
    res = []
    for size in range(4):
        for S in itertools.combinations(range(1, 4), size):
            at = m.loss_at(m.ansatz(S, symbolic_values=True))
            res.append(m.reduce(at - saddle_loss_paper_form(m.lam, S, m.N), S))
    bad = [x for x in res if x != 0]
    lam, T = sp.Symbol("lam", positive=True), sp.Symbol("T_rest", positive=True)
    drop = lam / (1 + (1 + (lam + T) / lam) / m.N)
    mono = sp.simplify(sp.diff(drop, lam)).is_positive
    return CheckResult(bool(not bad and ok_red and mono), bad[0] if bad else drop_red,
                       "monotonicity for tr Σ = λ + T_rest with T_rest > 0",
                       "symbolic (all d) + explicit",
                       f"L = Σ_j (λ_j − 2λ_j²M_jj + a_jλ_jM_jj²) for diagonal M; each learned "
                       f"coordinate lowers it by λ_j/(1 + (1 + T/λ_j)/N): {ok_red}; d(drop)/dλ > 0 "
                       f"proven by SymPy: {mono}",
                       sizes="all d, all S (eigen-coordinate reduction); explicit d = 3, all 8 S")


def _complete_solve_d2():
    """All critical points of ATTN_S with d = 2, H = 1, λ = (2, 1), N = 5 (v ≠ 0 branch)."""
    m = ansatz_model(2, 1)
    vals = {m.lam[0]: 2, m.lam[1]: 1, m.N: 5}
    g = m.grad.subs(vals)
    v, k1, k2, q1, q2 = m.params
    sols = sp.solve([sp.expand(x / v) for x in list(g[1:5])], [k1, k2, q1, q2], dict=True)
    mu = [sp.Rational(1, 3), sp.Rational(5, 9)]  # λ_j/a_j: the learned M_jj
    ok = True
    for sol in sols:
        kk = sp.Matrix([sol.get(k1, k1), sol.get(k2, k2)])
        qq = sp.Matrix([sol.get(q1, q1), sol.get(q2, q2)])
        M = sp.simplify(v * kk * qq.T)
        S = [j for j in range(2) if M[j, j] != 0]
        diag_ok = all(M[i, j] == 0 for i in range(2) for j in range(2) if i != j)
        learned_ok = all(sp.simplify(M[j, j] - mu[j]) == 0 for j in S)
        span_ok = all(kk[j] == 0 and qq[j] == 0 for j in range(2) if j not in S)
        ok = ok and diag_ok and learned_ok and span_ok
    return ok, len(sols)


@claim(
    "a2_attn_s_fixed_points_complete_as_printed",
    "main, App. A.2 (the 2^d manifolds, conditions (1)-(3))",
    "The fixed points of GD on ATTN_S are the 2^d manifolds M(S_m) given by conditions (1)-(3).",
       failure="substantive",
       why="the list of fixed points is incomplete: an explicit gradient-zero point lies outside "
           "all 2^d manifolds.")
def check_fixed_points_complete_printed() -> CheckResult:
    """Counterexample: a v = 0 head with k = e₂, q = e₃ is at rest but violates (3)."""
    m = ansatz_model(3, 2)
    sub = m.point({2: (0, m.e(2), m.e(3))})  # head 1 zero; M = 0, so (1) forces S = ∅
    g = m.grad_at(sub)
    at_rest = all(sp.expand(x) == 0 for x in g)
    # condition (3) for S = ∅: k = 0 or q = 0 -- violated; and M = 0 rules out every other S
    # residual: how far the point violates (3), min(‖k₂‖, ‖q₂‖) (0 would satisfy it)
    violation = min(m.e(2).norm(), m.e(3).norm())
    return CheckResult(not at_rest, violation if at_rest else g, "Σ = diag(λ), N symbolic",
                       "symbolic",
                       "residual = min(‖k₂‖, ‖q₂‖), which (3) requires to be 0; "
                       "at v₂ = 0, k₂ = e₂, q₂ = e₃ (head 1 zero) the gradient is exactly 0 "
                       f"({at_rest}); M = 0 forces S = ∅ in (1), and (3) then needs k₂ = 0 or "
                       "q₂ = 0: a fixed point outside all 2^d manifolds",
                       sizes="counterexample at d = 3, H = 2 (any d ≥ 2)")  # fmt: skip


@claim(
    "a2_attn_s_fixed_points_complete_corrected",
    "main, App. A.2 (conditions (1)-(3))",
    "The fixed points are the union over S of the points satisfying (1), (2) and (3'): v_i = 0 ⟹ "
    "k_iᵀΣ²P_{S^c}q_i = 0 (P_{S^c}: projector on the unlearned eigenvectors); (3') is implied by "
    "(3) and equals it on the balanced set v_i² = ‖k_i‖² = ‖q_i‖² that GD keeps from a vanishing "
    "initialization.",
    erratum=True,
)
def check_fixed_points_complete_corrected() -> CheckResult:
    """All d: at (1), G = Σ² − E[Σ̂²]MΣ = Σ²P_{S^c}; complete solve at d = 2, H = 1 (v ≠ 0)."""
    # G's diagonal at a learned coordinate vanishes (mod eq. 3); at an unlearned one it is λ².
    a = wishart_eigenvalue(_LAM, T_SYM, N_SYM)
    G_learned = reduce_learned(_LAM**2 - a * _U**3 * _LAM, _U, _LAM)
    # a v = 0 head: ∂L/∂v = −2kᵀGq, ∂L/∂k = ∂L/∂q = 0 (eqs. 19-21, all d, trace algebra)
    am = algebra_model()
    D = _alg_derivatives(am)
    zero_v_k = am.alg.normal_form(D["k"].subs_coeff({am.v: 0}))
    zero_v_q = am.alg.normal_form(D["q"].subs_coeff({am.v: 0}))
    ok_all_d = G_learned == 0 and not zero_v_k and not zero_v_q
    ok_solve, n_sol = _complete_solve_d2()
    printed = check_fixed_points_complete_printed()
    ok = ok_all_d and ok_solve
    return CheckResult(ok, 0 if ok else G_learned, "Σ = diag(λ) with distinct eigenvalues",
                       "symbolic (all d) + complete solve",
                       "a v = 0 head has ∇_k L = ∇_q L = 0 for every k, q (all d), and ∇_v L = "
                       "−2kᵀΣ²P_{S^c}q on the manifold, so its condition is (3'), strictly weaker "
                       f"than (3); complete solve of ∇L = 0, v ≠ 0, at d = 2, H = 1, λ = (2, 1), "
                       f"N = 5: {n_sol} solution families, all satisfy (1)-(2): {ok_solve}. GD "
                       "conserves v² − ‖k‖² and ‖k‖² − ‖q‖² (attn_s_conservation_law), so from "
                       "vanishing initializations v = 0 ⟹ k = q = 0 and (3) holds",
                       sizes="all d, H (reduction + trace algebra); complete solve d = 2, H = 1",
                       printed_residual="fixed point v=0, k=e₂, q=e₃ outside all M(S)"
                       if not printed.holds else 0)  # fmt: skip


@claim(
    "attn_s_conservation_law",
    "main, Sec. 3 ansatz (3)-(5) (|v_i| = ‖k_i‖ = ‖q_i‖); ATTN_S analogue of App. B.3",
    "Under the GD flow each head keeps v_i² − ‖k_i‖² and ‖k_i‖² − ‖q_i‖² constant, so a vanishing "
    "(balanced) initialization stays balanced, as the ansatz k_i = q_i = v_i e_i assumes.",
)
def check_attn_s_conservation() -> CheckResult:
    """All d, H: v ∂_vL = kᵀ∂_kL = qᵀ∂_qL in the trace algebra; exact SAM breaks it (numeric)."""
    am = algebra_model()
    D = _alg_derivatives(am)
    # directional derivative along the head's own direction: D_k L[k] = kᵀ∇_k L
    Lk_self = D["k"].subs({"dk": am.k})
    Lq_self = D["q"].subs({"dq": am.q})
    vLv = stated(D["v"] * am.v, "v ∂_v L (= kᵀ∂_kL = qᵀ∂_qL)")
    ok = am.alg.equal(vLv, Lk_self) and am.alg.equal(Lk_self, Lq_self)
    from .attn_numeric import AttnS

    model = AttnS(np.array([1.0, 0.5]), N=10, H=1)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(5) * 0.3
    vel = model.flow(w, rho=0.05)
    v, k, q = model.unpack(w)
    rate = 2 * v[0] * vel[0] - 2 * k[0] @ vel[1:3]  # d/dt (v² − ‖k‖²) under exact SAM
    vel_gd = model.flow(w)
    rate_gd = 2 * v[0] * vel_gd[0] - 2 * k[0] @ vel_gd[1:3]
    return CheckResult(ok and abs(rate_gd) < 1e-12, float(abs(rate_gd)),
                       "τẆ = −½∇L; M = R + v k qᵀ (any other heads)",
                       "symbolic (all d) + numeric",
                       f"v∂_vL = kᵀ∂_kL = qᵀ∂_qL proved for every d: {ok}; so d/dt(v² − ‖k‖²) = 0. "
                       f"Exact SAM (ρ = 0.05) at a generic point (d = 2, H = 1, seed 0): d/dt(v² − "
                       f"‖k‖²) = {rate:.3g} ≠ 0 (SAM does not conserve it; on the ansatz ray it "
                       "stays balanced because the ray is invariant)",
                       sizes="all d, H (trace algebra); SAM counterexample d = 2, H = 1")


def _hessian_spectrum(H: int, S: Sequence[int], lam=(3.0, 2.0, 1.0), N=10.0) -> np.ndarray:
    """Eigenvalues of the Hessian at the ansatz point of M(S) (head r on the r-th element of S).

    Central differences of the exact population gradient (eqs. 19-21) with step 1e-5: the
    gradient is a polynomial, so the error is ~1e-10, far below the eigenvalues that matter.
    """
    from .attn_numeric import AttnS

    model = AttnS(np.asarray(lam, float), N=N, H=H)
    d = model.d
    v, k, q = np.zeros(H), np.zeros((H, d)), np.zeros((H, d))
    for r, j in enumerate(S):
        u = (model.lam[j - 1] / model.E2[j - 1, j - 1]) ** (1 / 3)  # eq. (3)
        v[r], k[r, j - 1], q[r, j - 1] = u, u, u
    w = model.pack(v, k, q)
    h, n = 1e-5, w.size
    Hn = np.empty((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = h
        Hn[:, i] = (model.grad(w + e) - model.grad(w - e)) / (2 * h)
    return np.linalg.eigvalsh((Hn + Hn.T) / 2)


@claim(
    "a2_fixed_point_character",
    "main, App. A.2 and Sec. 3 (saddle-to-saddle learning; M(S) with S ≠ {1..d} are saddles)",
    "The manifolds M(S) the model passes through are saddles (it escapes them to learn the next "
    "eigenvector); learning ends at the full set, a minimum.",
)
def check_fixed_point_character() -> CheckResult:
    """Descent path and minimum for all d (reduction); Hessian spectra at d = 3 (numeric)."""
    t = sp.Symbol("t", positive=True)
    # a free head entering an unlearned coordinate along v = k = q = t: coordinate loss change
    path = sp.expand(coordinate_loss(_LAM, t**3) - coordinate_loss(_LAM, 0))
    a = wishart_eigenvalue(_LAM, T_SYM, N_SYM)
    ok_path = sp.expand(path - (-2 * _LAM**2 * t**3 + a * _LAM * t**6)) == 0
    # full set: coordinate loss is convex in μ with minimizer λ/a = the learned M_jj of (1)
    mu = sp.Symbol("mu", real=True)
    cl = coordinate_loss(_LAM, mu)
    crit = sp.solve(sp.diff(cl, mu), mu)
    ok_min = (len(crit) == 1 and sp.simplify(crit[0] - _LAM / a) == 0
              and sp.simplify(sp.diff(cl, mu, 2)).is_positive)  # fmt: skip
    spectra = {S: float(min(_hessian_spectrum(3, S))) for r in range(4)
               for S in itertools.combinations((1, 2, 3), r)}  # fmt: skip
    top = {(), (1,), (1, 2), (1, 2, 3)}
    psd_top = all(spectra[S] > -1e-6 for S in top)
    strict_rest = all(spectra[S] < -1e-3 for S in spectra if S not in top)
    rank1 = {S: float(min(_hessian_spectrum(1, S))) for S in [(1,), (2,), (3,)]}
    ok = (ok_path and ok_min and psd_top and strict_rest and rank1[(1,)] > -1e-6
          and rank1[(2,)] < -1e-3 and rank1[(3,)] < -1e-3)  # fmt: skip
    fmt = ", ".join(f"{set(S) or '∅'}: {x:.3g}" for S, x in spectra.items())
    return CheckResult(ok, min(spectra[S] for S in top),
                       "Σ = diag(3, 2, 1), N = 10 for the spectra", "symbolic (all d) + numeric",
                       "all d: along v = k = q = t e_j for a free head the loss changes by "
                       "−2λ_j²t³ + a_jλ_jt⁶ < 0 for small t, so every M(S) with an unlearned "
                       "direction and a free head is a saddle, not a minimum; the full set attains "
                       "the minimum of the convex L(M) (coordinate minimizer λ_j/a_j). Hessian "
                       f"minimum eigenvalues (H = 3): {fmt}. The manifolds on the learning path "
                       "(S = top-m sets) have a positive semi-definite Hessian: degenerate, "
                       "third-order saddles (hence the 1/v₀ plateaus of eq. 10), while the others "
                       "are strict saddles. H = 1: S = {1} min eigenvalue "
                       f"{rank1[(1,)]:.2g} (the best rank-1 M), S = {{2}}: {rank1[(2,)]:.3g}, "
                       f"S = {{3}}: {rank1[(3,)]:.3g}",
                       sizes="all d (reduction); Hessian spectra d = 3, H ∈ {1, 3}, all S")


def _gd_runs(model, inits, events, t_end: float):
    from scipy.integrate import solve_ivp

    out = []
    for w0 in inits:
        sol = solve_ivp(lambda t, w: model.flow(w), (0.0, t_end), w0, events=events, rtol=1e-7,
                        atol=1e-10)  # fmt: skip
        out.append(sol)
    return out


def _balanced_init(rng, H: int, d: int, eps: float, sign=None) -> np.ndarray:
    v = eps * (rng.choice([-1.0, 1.0], H) if sign is None else sign * np.ones(H))
    k = rng.standard_normal((H, d))
    q = rng.standard_normal((H, d))
    k = eps * k / np.linalg.norm(k, axis=1, keepdims=True)
    q = eps * q / np.linalg.norm(q, axis=1, keepdims=True)
    return np.concatenate([np.concatenate([[v[i]], k[i], q[i]]) for i in range(H)])


@claim(
    "footnote4_negative_v",
    "main, Sec. 3, footnote 4",
    "If v_h > 0, k_h and q_h both grow along e_h; if v_h < 0 they grow in opposite directions "
    "(one along e_h, the other along −e_h).",
)
def check_footnote4() -> CheckResult:
    """Symmetry (v, k, q) -> (−v, k, −q) (all d) and GD runs from balanced inits (d = 3, H = 1)."""
    # (1) the map T keeps M = v k qᵀ, hence L, and is orthogonal: flows are T-equivariant. On the
    # ansatz with v = −c, k = c e, q = −c e, ċ obeys the same scalar ODE (reduction):
    c = sp.Symbol("c", positive=True)
    g_neg = -coordinate_gradient(_LAM, -c, c, -c) / 2  # τ(v̇, k̇, q̇)
    g_pos = -coordinate_gradient(_LAM, c, c, c) / 2
    ok_sym = sp.expand(g_neg - stated(sp.Matrix([-g_pos[0], g_pos[1], -g_pos[2]]),
                                      "T-image (v, k, q) → (−v, k, −q)")) == sp.zeros(3, 1)
    # (2) GD from balanced random inits: measure alignment when e₁ is half learned
    from .attn_numeric import AttnS

    model = AttnS(np.array([1.0, 0.55, 0.3]), N=20, H=1)
    mu1 = model.lam[0] / model.E2[0, 0]

    def half(t, w):  # feature e₁ (nearly) learned
        return model.M(w)[0, 0] / mu1 - 0.95

    half.terminal = True
    stats = {}
    n = 8
    for sign in (1.0, -1.0):
        rng = np.random.default_rng(4 if sign > 0 else 5)
        inits = [_balanced_init(rng, 1, 3, 0.1, sign) for _ in range(n)]
        cos_kq, cos_e = [], []
        for sol in _gd_runs(model, inits, [half], 2000.0):
            v, k, q = model.unpack(sol.y[:, -1])
            cos_kq.append(k[0] @ q[0] / np.linalg.norm(k[0]) / np.linalg.norm(q[0]))
            cos_e.append(min(abs(k[0, 0]) / np.linalg.norm(k[0]), abs(q[0, 0]) /
                             np.linalg.norm(q[0])))  # fmt: skip
        stats[sign] = (np.array(cos_kq), np.array(cos_e))
    pos_ok = int(np.sum(stats[1.0][0] > 0.99))
    neg_ok = int(np.sum(stats[-1.0][0] < -0.99))
    all_cos_e = np.concatenate([stats[1.0][1], stats[-1.0][1]])
    aligned = int(np.sum(all_cos_e > 0.9))
    ok = ok_sym and pos_ok == n and neg_ok == n and aligned == 2 * n
    return CheckResult(ok, float(1 + np.max(stats[-1.0][0])),
                       "Σ = diag(1, 0.55, 0.3), N = 20; balanced init |v| = ‖k‖ = ‖q‖ = 0.1, "
                       "random directions; measured when M₁₁ reaches 95% of its learned value",
                       "symbolic (all d) + numeric",
                       f"T-equivariance on the ansatz: {ok_sym}; v₀ > 0: cos(k, q) > 0.99 in "
                       f"{pos_ok}/{n} runs (median {np.median(stats[1.0][0]):.4f}); v₀ < 0: "
                       f"cos(k, q) < −0.99 in {neg_ok}/{n} (median "
                       f"{np.median(stats[-1.0][0]):.4f}); "
                       f"k and q within 26° of ±e₁ (|cos| > 0.9) in {aligned}/{2 * n} (smallest "
                       f"|cos| {all_cos_e.min():.3f})",
                       sizes="all d (symmetry + reduction); GD runs d = 3, H = 1, 8 seeds per sign")


@claim(
    "learning_order_largest_first",
    "main, Sec. 3 (simplicity bias) and App. A.2 (order of decreasing eigenvalues)",
    "ATTN_S learns the eigenvectors one at a time in order of decreasing eigenvalue, under GD and "
    "(by eq. 9) under SAM.",
)
def check_learning_order() -> CheckResult:
    """Escape times of eqs. (9)-(10) decrease in λ (symbolic); GD runs d = 3, H = 3 (numeric)."""
    lam, v0, rh = sp.symbols("lambda v_0 rho_hat", positive=True)
    t_gd = 1 / (lam**2 * v0)  # blow-up time of τv̇ = λ²v² (τ = 1)
    t_sam = sp.log(v0 / (v0 - rh)) / (lam**2 * rh)  # of τv̇ = λ²(v² − ρ̂v), v₀ > ρ̂
    ok_gd = sp.simplify(sp.diff(t_gd, lam)).is_negative
    x = sp.Symbol("x", positive=True)  # v₀ = ρ̂ + x
    # dt/dλ = −2t/λ and t > 0 because the log's argument exceeds 1 by ρ̂/(v₀ − ρ̂) > 0
    ok_sam = (sp.simplify(sp.diff(t_sam, lam) + 2 * t_sam / lam) == 0
              and sp.simplify((v0 / (v0 - rh) - 1).subs(v0, rh + x)).is_positive)  # fmt: skip
    from .attn_numeric import AttnS

    model = AttnS(np.array([1.0, 0.55, 0.3]), N=20, H=3)
    mu = model.lam / np.diag(model.E2)
    events = []
    for j in range(3):
        def ev(t, w, j=j):
            return model.M(w)[j, j] / mu[j] - 0.5

        events.append(ev)

    def done(t, w):
        return min(np.diag(model.M(w)) / mu) - 0.5

    done.terminal = True
    rng = np.random.default_rng(11)
    n = 8
    orders, gaps = [], []
    for sol in _gd_runs(model, [_balanced_init(rng, 3, 3, 0.1) for _ in range(n)],
                        [*events, done], 3000.0):  # fmt: skip
        times = [e[0] if len(e) else np.inf for e in sol.t_events[:3]]
        orders.append(tuple(int(i) + 1 for i in np.argsort(times)))
        gaps.append(times)
    claimed = stated((1, 2, 3), "learning order: largest λ first")
    in_order = sum(o == tuple(claimed) for o in orders)
    med = np.median(np.array(gaps), axis=0)
    ok = bool(ok_gd and ok_sam and in_order == n)
    return CheckResult(ok, n - in_order, "Σ = diag(1, 0.55, 0.3), N = 20; balanced init 0.1, "
                       "random signs and directions; feature j learned when M_jj reaches half its "
                       "learned value", "symbolic + numeric",
                       f"blow-up times τ/(λ²v₀) (GD) and τ ln(v₀/(v₀−ρ̂))/(λ²ρ̂) (SAM, eq. 9) "
                       f"decrease in λ: {ok_gd}, {ok_sam}; GD runs learned e₁, e₂, e₃ in this "
                       f"order in {in_order}/{n} seeds (median learning times {np.round(med, 1)})",
                       sizes="ODE level: any λ; GD runs d = 3, H = 3, 8 seeds (seed 11)")


@claim(
    "ansatz_approximates_generic_training",
    "main, Sec. 3 (eqs. 3-5 'approximately evolve'), Assumption 4.3, Fig. 1",
    "From small generic (Gaussian) initializations, GD and SAM trajectories stay close to the "
    "ansatz (3)-(5) (one active head, k = q along its eigenvector) during each plateau.",
)
def check_ansatz_approximation() -> CheckResult:
    """Not symbolically checkable: attraction of generic initializations is an empirical claim.

    What *is* checked elsewhere: the ansatz family is exactly invariant under both flows (the GD
    and first-order SAM velocities at ansatz points lie along [1, e_i, e_i]; claims
    ``thm42_gd_flow_ansatz``, ``thm42_sam_flow_full``, ``thm42_part2_later_feature``).
    """
    return CheckResult(False, "n/a", "needs simulation of the full model from random inits",
                       "not-checkable",
                       sizes="—; see footnote4_negative_v, learning_order_largest_first (GD runs)",
                       detail="the ansatz is an exact invariant family of the GD and SAM flows "
                       "(see the thm42_* claims); whether generic small initializations approach "
                       "it "
                       "is an empirical statement for sims/ (Figure 1), not a symbolic identity")
