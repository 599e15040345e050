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

import sympy as sp

from .attention_model import Head, gradient_corrected, head_params, make_heads, population_loss
from .verify import CheckResult, claim, is_zero
from .wishart import wishart_eigenvalue, wishart_second_moment_closed_form

__all__ = [
    "learned_value",
    "ansatz_heads",
    "AnsatzModel",
    "ansatz_model",
    "saddle_loss",
    "saddle_loss_paper_form",
]

N_SYM = sp.Symbol("N", positive=True)


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


def saddle_loss_paper_form(lam: Sequence[sp.Expr], learned: Sequence[int], N: sp.Expr) -> sp.Expr:
    """``L(M_S) = tr Σ - Σ_{j∈S} λ_j / (1 + (1 + tr Σ/λ_j)/N)`` (Zhang et al. 2025 saddles)."""
    tr = sum(lam)
    return tr - sum(lam[j - 1] / (1 + (1 + tr / lam[j - 1]) / N) for j in learned)


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


@claim(
    "ansatz_learned_value_eq3",
    "main, Sec. 3, eq. (3)",
    "A head with k_i = q_i = v_i e_i is at rest under GD iff v_i = (λ_i + (λ_i + tr Σ)/N)^{-1/3}.",
)
def check_learned_value() -> CheckResult:
    """Solve ``∇L = 0`` on the ray ``k=q=v e_1`` (d = 3, H = 1) and compare with eq. (3)."""
    m = ansatz_model(3, 1)
    v = sp.Symbol("v", positive=True)
    g = m.grad_at(m.point({1: (v, v * m.e(1), v * m.e(1))}))
    roots = sp.solve(sp.factor(g[0]) / v**2, v)
    expected = learned_value(m.lam[0], m.trace, m.N)
    ok_root = len(roots) == 1 and is_zero(roots[0] ** 3 - expected**3).holds
    r = is_zero(g.subs(v, expected))
    return CheckResult(ok_root and r.holds, r.residual, "d = 3, Σ = diag(λ), one head",
                       r.method, f"positive roots of ∂L/∂v on the ray: {roots}")  # fmt: skip


@claim(
    "a2_attn_s_fixed_point_manifolds",
    "main, App. A.2 (ATTN_S manifolds M(S_m))",
    "For every subset S of the d eigen-directions (2^d manifolds), points satisfying conditions "
    "(1)-(3) are fixed points of the GD flow; the ansatz (3)-(5) satisfies (1)-(3).",
)
def check_attn_s_manifolds() -> CheckResult:
    """D = 3, H = 3: all 8 subsets at the ansatz, plus off-ansatz points of the same manifolds."""
    m = ansatz_model(3, 3)
    checked = 0
    for size in range(4):
        for S in itertools.combinations(range(1, 4), size):
            sub = m.ansatz(S, symbolic_values=True)
            rem = [m.reduce(g, S) for g in m.grad_at(sub)]
            if any(x != 0 for x in rem):
                return CheckResult(False, next(x for x in rem if x != 0), f"subset {S}")
            heads = ansatz_heads(m, sub)
            M = sum((h.v * h.k * h.q.T for h in heads), sp.zeros(3))
            target = sum((m.e(j) * m.e(j).T * m.N / (m.N * m.lam[j - 1] + m.lam[j - 1] + m.trace)
                          for j in S), sp.zeros(3))  # fmt: skip
            rem1 = [m.reduce(x, S) for x in M - target]
            if any(x != 0 for x in rem1):
                return CheckResult(False, next(x for x in rem1 if x != 0), f"condition (1), {S}")
            checked += 1
    # Off-ansatz points: rescaled k/q (condition (2)) and a zero-value head with k in span (3).
    al, be, c1, c2, q1, q2, q3 = sp.symbols("alpha beta c1 c2 r1 r2 r3", positive=True)
    u1 = m.u(1)
    sub = m.point({1: (u1**3 / (al * be), al * m.e(1), be * m.e(1)),
                   2: (0, c1 * m.e(1), sp.Matrix([q1, q2, q3]))})  # fmt: skip
    rem2 = [m.reduce(g, [1]) for g in m.grad_at(sub)]
    # Condition (3) is needed: a zero-value head with k, q both outside the span is not at rest.
    bad = m.point({1: (u1**3 / (al * be), al * m.e(1), be * m.e(1)),
                   2: (0, c2 * m.e(2), sp.Matrix([q1, q2, q3]))})  # fmt: skip
    not_rest = any(m.reduce(g, [1]) != 0 for g in m.grad_at(bad))
    ok = all(x == 0 for x in rem2) and not_rest
    return CheckResult(ok, 0 if ok else next((x for x in rem2 if x != 0), "condition (3)"),
                       "d = 3, H = 3, Σ = diag(λ); all 2^3 subsets S; head i learns e_i; exact "
                       "remainders modulo the eq.-(3) relation u³(Nλ+λ+trΣ) = N",
                       "symbolic",
                       f"{checked} ansatz points at rest and satisfy (1); off-ansatz points "
                       "(k=αe₁, q=βe₁, v=c/(αβ); v=0 head with k ∈ span) at rest; violating (3) "
                       f"gives a nonzero gradient: {not_rest}")  # fmt: skip


@claim(
    "saddle_loss_levels",
    "main, App. A.2 / Sec. 3 (loss plateaus L(M_m); Zhang et al. 2025)",
    "L(M(S)) = tr Σ - Σ_{j∈S} λ_j / (1 + (1 + tr Σ/λ_j)/N); each learned direction lowers the loss "
    "by an amount increasing in λ_j (so the top eigenvector gives the largest drop).",
)
def check_saddle_losses() -> CheckResult:
    """Evaluate the loss at every ansatz fixed point (d = 3) and compare with the closed form."""
    m = ansatz_model(3, 3)
    res = []
    for size in range(4):
        for S in itertools.combinations(range(1, 4), size):
            at = m.loss_at(m.ansatz(S, symbolic_values=True))
            res.append(m.reduce(at - saddle_loss_paper_form(m.lam, S, m.N), S))
    bad = [x for x in res if x != 0]
    r = CheckResult(not bad, bad[0] if bad else 0, method="symbolic")
    lam, T = sp.Symbol("lam", positive=True), sp.Symbol("T_rest", positive=True)
    drop = lam / (1 + (1 + (lam + T) / lam) / m.N)
    mono = sp.simplify(sp.diff(drop, lam)).is_positive
    return CheckResult(bool(r.holds and mono), r.residual,
                       "d = 3, all subsets; monotonicity for tr Σ = λ + T_rest with T_rest > 0",
                       r.method, f"d(drop)/dλ > 0 proven by SymPy: {mono}")  # fmt: skip


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
                       "the ansatz is an exact invariant family of the GD and SAM flows (see the "
                       "thm42_* claims); whether generic small initializations approach it is an "
                       "empirical statement for sims/ (Figure 1), not a symbolic identity")
