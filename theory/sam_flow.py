"""SAM vs GD flows under the ansatz: Theorem 4.2, Lemma 4.1, eqs. (6)-(10), App. B.2, C.2, C.3.

Main paper: Section 4.1 (SAM, first-order expansion (7)-(8)), Lemma 4.1 / App. B.2, Theorem 4.2
(eqs. 9-10) with its proof in App. C.2 (first feature) and C.3 (the (m+1)-th feature), and the
remark after Def. B.1 (layer-wise SAM on the active head = global SAM).

Notation: under the ansatz ``k_i = q_i = v e_i`` the GD flow of the active head is
``τv̇ = g(v) := λ²v² - λ a v⁵`` along the direction ``d_i = [1, e_i, e_i]`` (eq. C.2).

Examples:
    >>> import sympy as sp
    >>> lam, a, v, rho = sp.symbols("lam a v rho", positive=True)
    >>> sp.expand(sam_flow_eq9(lam, v, rho) - gd_flow_eq10(lam, v))
    -2*sqrt(3)*lam**2*rho*v/3
"""

from __future__ import annotations

import functools

import mpmath as mp
import sympy as sp

from .fixed_points import (
    N_SYM,
    T_SYM,
    AnsatzModel,
    ansatz_model,
    coordinate_gradient,
    reduce_learned,
)
from .verify import CheckResult, claim, exhaustive, is_zero, printed_form, statement
from .wishart import wishart_eigenvalue

__all__ = [
    "gd_flow_full",
    "sam_flow_full",
    "sam_flow_eq9",
    "gd_flow_eq10",
    "direction",
    "sam_flow_first_order",
    "sam_flow_exact",
    "check_flow_against_model",
    "check_truncation",
    "grad_norm_from_gradient",
]

SQRT3 = sp.sqrt(3)


@statement
def gd_flow_full(lam, a, v):
    """C.2: ``τv̇ = λ²v² - λ a v⁵`` (GD under the ansatz)."""
    return lam**2 * v**2 - lam * a * v**5


@statement
def sam_flow_full(lam, a, v, rho):
    """C.2 (printed): ``τv̇ = λ²v² - λav⁵ + (ρ/√3)(5λav⁴ - 2λ²v)`` (first-order SAM)."""
    return gd_flow_full(lam, a, v) + rho / SQRT3 * (5 * lam * a * v**4 - 2 * lam**2 * v)


@statement
def sam_flow_eq9(lam, v, rho):
    """Eq. (9): ``τv̇ = λ²v² - (2ρ/√3) λ² v``."""
    return lam**2 * v**2 - 2 * rho / SQRT3 * lam**2 * v


@statement
def gd_flow_eq10(lam, v):
    """Eq. (10): ``τv̇ = λ²v²``."""
    return lam**2 * v**2


def direction(m: AnsatzModel, i: int) -> sp.Matrix:
    """``d_i = [1, e_i, e_i]`` placed in head ``i`` (zeros elsewhere), in ``m.params`` order."""
    vec = sp.zeros(len(m.params), 1)
    blk = sp.Matrix.vstack(sp.Matrix([1]), m.e(i), m.e(i))
    vec[m.head_slice(i), 0] = blk
    return vec


def _zero(expr) -> CheckResult:
    """Expand first (cheap exact zero test for polynomial identities), else :func:`is_zero`."""
    ex = sp.expand(expr)
    entries = list(ex) if isinstance(ex, sp.MatrixBase) else [ex]
    if all(x == 0 for x in entries):
        return CheckResult(True, sp.Integer(0), method="symbolic")
    if all(sp.cancel(sp.together(x)) == 0 for x in entries):  # rational-function identity
        return CheckResult(True, sp.Integer(0), method="symbolic")
    return is_zero(ex)


def _norm(vec: sp.Matrix) -> sp.Expr:
    return sp.sqrt(sum(x**2 for x in vec))


def grad_norm_from_gradient(g: sp.Matrix, positive: sp.Expr) -> sp.Expr:
    """``‖g‖₂`` computed from the gradient, as ``c·positive`` where ``positive`` > 0.

    ``positive`` states the regime (e.g. ``g(v) > 0``). ``‖g‖² / positive²`` must simplify to a
    positive constant ``c²``; otherwise (the gradient is not proportional to ``positive`` in
    norm) a ``ValueError`` is raised. So a wrong coefficient in
    the gradient changes ``c`` or fails here, instead of being hidden by a typed-in norm.

    Raises:
        ValueError: if ``‖g‖²/positive²`` is not a positive constant.
    """
    ratio = sp.cancel(sp.together(sp.expand(sum(x**2 for x in g)) / sp.expand(positive) ** 2))
    if ratio.free_symbols or not ratio.is_positive:
        raise ValueError(f"‖g‖²/positive² = {ratio} is not a positive constant.")
    return sp.sqrt(ratio) * positive


def sam_flow_first_order(m: AnsatzModel, sub: dict, rho: sp.Expr,
                         grad_norm: sp.Expr | None = None) -> sp.Matrix:  # fmt: skip
    """Eq. (8): ``τẆ = (I + P)(-½∇L)`` with ``P = ρ H / ‖∇L‖`` (global Hessian and norm).

    ``P(-½∇L)`` is computed as an exact Hessian-vector product. ``grad_norm`` overrides
    ``‖∇L‖`` (e.g. the closed form ``2√3 g`` when the sign of ``g`` is known).
    """
    g = m.grad_at(sub)
    nrm = _norm(g) if grad_norm is None else grad_norm
    return sp.expand(-g / 2 + rho / nrm * m.hvp(sub, -g / 2))


def sam_flow_exact(m: AnsatzModel, sub: dict, rho: sp.Expr,
                   grad_norm: sp.Expr | None = None) -> sp.Matrix:  # fmt: skip
    """Eq. (6)/(8) without expansion: ``τẆ = -½∇L(w + ρ∇L/‖∇L‖)`` (perturbation detached)."""
    g = m.grad_at(sub)
    nrm = _norm(g) if grad_norm is None else grad_norm
    unit = [sp.cancel(sp.together(x / nrm)) for x in g]
    shifted = {p: sub[p] + rho * unit[n] for n, p in enumerate(m.params)}
    return sp.expand(-m.grad_at(shifted) / 2)


def check_flow_against_model(flow_expr, *, which: str = "sam") -> CheckResult:
    """Check a candidate scalar flow ``flow_expr(lam, a, v, rho)`` against the model (C.2).

    Args:
        flow_expr: callable returning the candidate ``τv̇`` of the active head.
        which: ``"sam"`` (compares with the first-order SAM flow (8) of the full model) or
            ``"gd"`` (compares with ``-½∇L``).

    Raises:
        ValueError: if ``which`` is not ``"sam"`` or ``"gd"``.
    """
    if which not in {"sam", "gd"}:
        raise ValueError(f"`which` must be 'sam' or 'gd'; got {which!r}.")
    if not callable(flow_expr):
        raise TypeError(f"`flow_expr` must be callable; got {type(flow_expr).__name__}.")
    m, v, rho = _c2()
    lam, a = m.lam[0], m.a[0]
    model = _model_flow(which)
    cand = flow_expr(lam, a, v, rho) * direction(m, 1)
    r = _zero(model - cand)
    return CheckResult(r.holds, r.residual,
                       "H = 2 (head 2 inactive), Σ = diag(λ), k₁ = q₁ = v e₁, g(v) > 0; ‖∇L‖ "
                       "computed from the gradient", r.method,
                       sizes="d = 3, H = 2 (all d, H, m: thm42_part2_later_feature)")


@functools.lru_cache(maxsize=2)
def _model_flow(which: str) -> sp.Matrix:
    """Model-side flow at the C.2 ansatz point (cached: the perturbed-input tests reuse it)."""
    m, v, rho = _c2()
    sub = m.ansatz([], active=1, v_active=v)
    if which == "gd":
        return -m.grad_at(sub) / 2
    # small-v regime g(v) > 0: ‖∇L‖ computed from the gradient (it comes out as 2√3 g(v))
    nrm = grad_norm_from_gradient(m.grad_at(sub), gd_flow_full(m.lam[0], m.a[0], v))
    return sam_flow_first_order(m, sub, rho, grad_norm=nrm)


def check_truncation(full, truncated, var, kept_order: int) -> CheckResult:
    """Check ``truncated`` equals the Taylor polynomial of ``full`` in ``var`` up to ``kept_order``.

    Returns the order of the first dropped term in ``detail``.
    """
    if not isinstance(kept_order, int) or kept_order < 0:
        raise ValueError(f"`kept_order` must be a non-negative int; got {kept_order!r}.")
    poly = sp.Poly(sp.expand(sp.cancel(sp.together(full))), var)  # rational -> polynomial
    coeffs = dict((mon[0], c) for mon, c in poly.terms())
    taylor = sum(c * var**k for k, c in coeffs.items() if k <= kept_order)
    r = _zero(taylor - truncated)
    dropped = sorted(k for k in coeffs if k > kept_order)
    return CheckResult(r.holds, r.residual, f"Taylor polynomial in {var} up to order {kept_order}",
                       r.method, f"first dropped order: {var}^{dropped[0] if dropped else None}")


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _c2():
    return ansatz_model(3, 2), sp.Symbol("v", positive=True), sp.Symbol("rho", positive=True)


_SMALL_V = {sp.Symbol("v", positive=True): (0.02, 0.3)}


@claim(
    "thm42_gd_flow_ansatz",
    "main, Thm 4.2 / App. C.2 (from eqs. 16-18)",
    "Under the ansatz k₁ = q₁ = v₁e₁ (other heads 0): τv̇₁ = λ₁²v₁² - λ₁a₁v₁⁵, "
    "τk̇₁ = τq̇₁ = (λ₁²v₁² - λ₁a₁v₁⁵)e₁, and the other heads do not move.",
)
def check_gd_flow() -> CheckResult:
    """-½∇L of the full two-head model at the ansatz point equals g(v) d₁."""
    return check_flow_against_model(lambda lam, a, v, rho: gd_flow_full(lam, a, v), which="gd")


@claim(
    "c2_grad_norm_as_printed",
    "main, App. C.2",
    "‖∇_{w₁}L‖₂ = sqrt(‖∇_v L‖₂ + ‖∇_k L‖₂ + ‖∇_q L‖₂) = 2√3|λ₁²v₁² - λ₁a₁v₁⁵| (norms not "
    "squared).",
       failure="typo",
       why="norms not squared under the root; the printed final value 2√3|g| is the squared-norm "
           "one.",
       corrected_by="c2_grad_norm_corrected")
def check_grad_norm_printed() -> CheckResult:
    """The printed middle expression (unsquared norms, from the computed gradient) vs 2√3|g|."""
    m, v, _ = _c2()
    g = m.grad_at(m.ansatz([], active=1, v_active=v))
    s1 = m.head_slice(1)
    blk = g[s1, 0]
    nv, nk, nq = _norm(blk[0:1, 0]), _norm(blk[1:4, 0]), _norm(blk[4:7, 0])
    claimed = 2 * SQRT3 * gd_flow_full(m.lam[0], m.a[0], v)
    r = is_zero(sp.sqrt(nv + nk + nq) - claimed, domain=_SMALL_V)
    return CheckResult(r.holds, r.residual, "small v (g > 0)", r.method,
                       "with unsquared norms the expression is sqrt(6|g|), equal to 2√3|g| only "
                       "at |g| = 1/2", sizes="counterexample at d = 3, H = 2")  # fmt: skip


@claim(
    "c2_grad_norm_corrected",
    "main, App. C.2",
    "‖∇L‖₂ = sqrt(‖∇_v L‖² + ‖∇_k L‖² + ‖∇_q L‖²) = 2√3|λ₁²v₁² - λ₁a₁v₁⁵| (global norm: the "
    "inactive heads have zero gradient).",
    erratum=True,
)
def check_grad_norm_corrected() -> CheckResult:
    """All d, H, m: reduced gradient; explicit d = 3, H = 2: the full (all-head) gradient."""
    lam, v = sp.Symbol("lambda", positive=True), sp.Symbol("v", positive=True)
    g_red = coordinate_gradient(lam, v, v, v)
    a_expr = wishart_eigenvalue(lam, T_SYM, N_SYM)
    ok_red = sp.expand(sum(x**2 for x in g_red)
                       - 12 * gd_flow_full(lam, a_expr, v) ** 2) == 0  # fmt: skip
    m, v3, _ = _c2()
    g = m.grad_at(m.ansatz([], active=1, v_active=v3))
    claimed = 2 * SQRT3 * sp.Abs(gd_flow_full(m.lam[0], m.a[0], v3))
    r = is_zero(_norm(g) - claimed)
    with printed_form("unsquared norms as printed") as pf:
        printed = check_grad_norm_printed()
    return CheckResult(r.holds and ok_red and pf.fails, r.residual, "any v > 0", r.method,
                       "printed sqrt(‖∇_v L‖₂ + ‖∇_k L‖₂ + ‖∇_q L‖₂) must read "
                       "sqrt(‖∇_v L‖₂² + ‖∇_k L‖₂² + ‖∇_q L‖₂²); all d: the active head's reduced "
                       f"gradient has ‖·‖² = 12 g²: {ok_red}, the other heads' gradients vanish "
                       f"(thm42_part2_later_feature). Printed form residual "
                       f"{float(sp.N(printed.residual)):.3g} at a random point ({printed.detail})",
                       sizes="all d, H, m (reduction); explicit d = 3, H = 2",
                       printed_residual=printed.residual)  # fmt: skip


@claim(
    "c2_hessian_direction_and_Q",
    "main, App. C.2 (H·[1, e₁, e₁] and Q)",
    "H₁[1, e₁, e₁] = (10λ₁a₁v₁⁴ - 4λ₁²v₁)[1, e₁, e₁], hence Q = (ρ/√3)(5λ₁a₁v₁⁴ - 2λ₁²v₁)[1, "
    "e₁, e₁] "
    "for g > 0.",
)
def check_hessian_direction() -> CheckResult:
    """Exact Hessian-vector product along d₁ and Q = ρH(−½∇L)/‖∇L‖ with ‖∇L‖ from the gradient."""
    m, v, rho = _c2()
    sub = m.ansatz([], active=1, v_active=v)
    d1 = direction(m, 1)
    lam, a = m.lam[0], m.a[0]
    Hd = m.hvp(sub, d1)
    r1 = _zero(Hd - (10 * lam * a * v**4 - 4 * lam**2 * v) * d1)
    grad = m.grad_at(sub)
    nrm = grad_norm_from_gradient(grad, gd_flow_full(lam, a, v))  # regime g > 0
    Q = rho / nrm * m.hvp(sub, -grad / 2)
    r2 = _zero(sp.together(Q - rho / SQRT3 * (5 * lam * a * v**4 - 2 * lam**2 * v) * d1))
    # Cross-head blocks ∂²L/∂θ₂∂θ₁ between the zero head and the active head vanish entirely.
    # ∂/∂θ₁ commutes with setting θ₂ = 0, so keep head 1 symbolic and head 2 at zero:
    partial = {**sub, **{p: p for p in m.params[m.head_slice(1)]}}
    cross = sp.expand(m.grad_at(partial)[m.head_slice(2), 0].jacobian(m.params[m.head_slice(1)]))
    r3 = cross == sp.zeros(*cross.shape)
    ok = r1.holds and r2.holds and r3
    return CheckResult(ok, r1.residual if not r1.holds else r2.residual,
                       "global Hessian incl. the inactive head, g > 0", "symbolic"
                       if r1.method == r2.method == "symbolic" else "numeric",
                       "‖∇L‖ computed from the gradient = "
                       f"{sp.factor(nrm / gd_flow_full(lam, a, v))}·g; components on the "
                       "inactive head are 0; the 7x7 cross-head Hessian "
                       f"block (zero head x active head) vanishes: {r3}",
                       sizes="d = 3, H = 2 (all d, H, m: thm42_part2_later_feature)")


@claim(
    "thm42_sam_flow_full",
    "main, App. C.2 (full first-order SAM flow)",
    "First-order SAM (8) under the ansatz: τv̇₁ = λ₁²v₁² - λ₁a₁v₁⁵ + (ρ/√3)(5λ₁a₁v₁⁴ - 2λ₁²v₁), "
    "same scalar for k̇₁, q̇₁ along e₁.",
)
def check_sam_flow_full() -> CheckResult:
    """(I + ρH/‖∇L‖)(-½∇L) of the full model (norm from the gradient) vs the printed flow."""
    return check_flow_against_model(sam_flow_full, which="sam")


def _dropped_by_eq9():
    """Exact small-v SAM flow (τv̇ = g(v − ρ/√3)) minus eq. (9): the O(ρ²) term eq. (9) drops."""
    lam, a, v, rho = sp.symbols("lam a v rho", positive=True)
    exact = sp.expand(gd_flow_full(lam, a, v - rho / SQRT3))
    small_v_exact = sum(exact.coeff(v, k) * v**k for k in range(3))  # orders v⁰..v²
    dropped = sp.expand(small_v_exact - sam_flow_eq9(lam, v, rho))
    lead = sp.expand(dropped.subs(a, 0))  # the a-terms are O(ρ³..ρ⁵): higher order in ρ
    return lam, v, rho, lead, dropped


@claim(
    "thm42_small_v_truncation",
    "main, Thm 4.2 eqs. (9)-(10), App. C.2",
    "For small v the full flows reduce to τv̇ = λ²v² - (2ρ/√3)λ²v (SAM, eq. 9) and τv̇ = λ²v² "
    "(GD, eq. 10): the kept terms are the lowest orders in v.",
    approximation=True,
)
def check_small_v() -> CheckResult:
    """Eq. (9) = Taylor polynomial of the first-order SAM flow to O(v²); vs exact SAM (ρ² term)."""
    # the flows are computed from the model (first-order SAM with ‖∇L‖ from the gradient), not
    # typed: v-component of the active head at the C.2 ansatz point (d = 3, H = 2)
    m, v, rho = _c2()
    lam = m.lam[0]
    r_sam = check_truncation(_model_flow("sam")[0], sam_flow_eq9(lam, v, rho), v, 3)
    r_gd = check_truncation(_model_flow("gd")[0], gd_flow_eq10(lam, v), v, 4)
    ok = r_sam.holds and r_gd.holds
    # The first-order expansion (8) itself drops O(ρ²): compare with exact SAM on the ansatz.
    lam_, v_, rho_, lead, _ = _dropped_by_eq9()
    kept_lin = -2 * rho_ / SQRT3 * lam_**2 * v_
    ratio = sp.simplify(sp.Abs(lead / kept_lin))  # ρ/(2√3 v)
    at_thm44 = sp.simplify(ratio.subs(v_, 2 * rho_ / SQRT3))  # v ≥ ε > 2ρ/√3 (Thm 4.4)
    v_equal = sp.solve(sp.Eq(ratio, 1), v_)
    caveat = (f"eq. (9) also drops the O(ρ²) term {lead} of exact SAM (first-order expansion 8); "
              f"relative to the kept −2ρλ²v/√3 it is {ratio}: up to {at_thm44} in Thm 4.4's "
              f"regime v ≥ ε > 2ρ/√3, and ≥ 1 for v ≤ {v_equal[0] if v_equal else '?'}; with it "
              "the small-v flow is λ²(v − ρ/√3)² ≥ 0, which has no decay region below 2ρ/√3")
    return CheckResult(ok, lead, "v -> 0 at fixed ρ, λ, a", "symbolic",
                       f"SAM: {r_sam.detail}; GD: {r_gd.detail}. Relative to the first-order flow "
                       "the truncation drops only O(ρv⁴) and O(v⁵) (residual of that truncation: "
                       f"{r_sam.residual}); the residual shown is the exact-SAM term it drops",
                       sizes="model flow at d = 3, H = 2 (all d, H, m: thm42_part2_later_feature); "
                             "exact-SAM comparison for any λ, a, ρ", caveat=caveat)


@claim(
    "sam_first_order_series",
    "main, Sec. 4.1 eqs. (7)-(8)",
    "∇L(w + ρ∇L/‖∇L‖) = (I + P)∇L + O(ρ²) with P = ρH/‖∇L‖.",
    approximation=True,
)
def check_first_order_series() -> CheckResult:
    """At a generic rational point (d = 2, H = 2): ρ⁰, ρ¹ coefficients match, ρ² does not vanish."""
    m = ansatz_model(2, 2)
    rho = sp.Symbol("rho", positive=True)
    inv = sp.Symbol("inv_norm", positive=True)  # stands for 1/‖∇L‖: identities must hold for all
    vals = [sp.Rational(p, 7) for p in (3, 2, -1, 1, 2, -3, 1, 4, -2, 3)]
    lam_vals = {m.lam[0]: sp.Rational(3, 2), m.lam[1]: sp.Rational(1, 2), m.N: 5}
    sub = {p: x for p, x in zip(m.params, vals, strict=True)}
    g = m.grad_at(sub).subs(lam_vals)
    shifted = {p: sub[p] + rho * inv * g[n] for n, p in enumerate(m.params)}
    exact = m.grad_at(shifted).subs(lam_vals)
    first = g + rho * inv * m.hvp(sub, g).subs(lam_vals)
    diff = sp.expand(exact - first)
    c01 = [sp.expand(x).coeff(rho, k) for x in diff for k in (0, 1)]
    c2 = [sp.expand(x).coeff(rho, 2).subs(inv, 1 / sp.sqrt(sum(y**2 for y in g))) for x in diff]
    worst = max(abs(float(sp.N(c))) for c in c2)
    ok = all(c == 0 for c in c01) and worst > 0
    return CheckResult(ok, 0 if ok else next(c for c in c01 if c != 0),
                       "generic rational point, λ = (3/2, 1/2), N = 5; exact polynomial in ρ, for "
                       "any value of 1/‖∇L‖", "symbolic",
                       f"ρ² coefficient nonzero (max |coef| = {worst:.3g}): the error is exactly "
                       "second order (Taylor's theorem: the same holds at every size)",
                       sizes="d = 2, H = 2, one generic point")  # fmt: skip


@claim(
    "sam_exact_flow_ansatz",
    "main, Sec. 4.1 eq. (6)/(8), App. C.2 (exact vs first-order SAM)",
    "Under the ansatz the exact SAM flow is τv̇ = g(v - ρ/√3) (g(v) = λ²v² - λav⁵, g(v) > 0); its "
    "first-order expansion in ρ is the printed full SAM flow of C.2.",
    approximation=True,
)
def check_exact_sam_ansatz() -> CheckResult:
    """Exact SAM at the ansatz (perturbation stays on the ray; norm from the gradient)."""
    m, v, rho = _c2()
    sub = m.ansatz([], active=1, v_active=v)
    lam, a = m.lam[0], m.a[0]
    nrm = grad_norm_from_gradient(m.grad_at(sub), gd_flow_full(lam, a, v))  # regime g > 0
    exact = sam_flow_exact(m, sub, rho, grad_norm=nrm)
    target = gd_flow_full(lam, a, v - rho / SQRT3) * direction(m, 1)
    r1 = _zero(exact - target)
    series1 = sp.expand(gd_flow_full(lam, a, v - rho / SQRT3))
    first = series1.coeff(rho, 0) + rho * series1.coeff(rho, 1)
    r2 = _zero(first - sam_flow_full(lam, a, v, rho))
    lead_rho2 = sp.expand(series1.coeff(rho, 2)).coeff(v, 0)
    ok = r1.holds and r2.holds
    return CheckResult(ok, r1.residual if not r1.holds else r2.residual,
                       "g(v) > 0; ‖∇L‖ computed from the gradient", "symbolic",
                       f"O(ρ²) term at v -> 0: {lead_rho2}·ρ² (= λ²ρ²/3). Eq. (9) drops it, "
                       "but it is comparable to the kept -2ρλ²v/√3 when v = O(ρ) (ratio "
                       "ρ/(2√3 v)): the exact small-v flow λ²(v - ρ/√3)² ≥ 0 has no decay region "
                       "below 2ρ/√3", sizes="d = 3, H = 2 (ray invariance holds at any size: the "
                       "perturbation is along the ray)")  # fmt: skip


def _later_feature_explicit(d: int, H: int, learned: list[int], active: int) -> list:
    m = ansatz_model(d, H)
    v = sp.Symbol("v", positive=True)
    sub = m.ansatz(learned, active=active, v_active=v, symbolic_values=True)
    lam, a = m.lam[active - 1], m.a[active - 1]
    dd = direction(m, active)
    g = m.grad_at(sub)
    rem_gd = [m.reduce(x, learned) for x in (-g / 2 - gd_flow_full(lam, a, v) * dd)]
    Hd = m.hvp(sub, dd)
    rem_h = [m.reduce(x, learned) for x in (Hd - (10 * lam * a * v**4 - 4 * lam**2 * v) * dd)]
    return [x for x in rem_gd + rem_h if x != 0]


def _later_sizes():
    base = [(3, 3, [1], 2), (4, 4, [1, 2], 3)]
    return base + [(5, 4, [1, 2, 3], 4), (5, 5, [1, 2, 3], 4)] if exhaustive() else base


@claim(
    "thm42_part2_later_feature",
    "main, Thm 4.2 part 2, App. C.3",
    "With m features learned (eq. 3) and head m+1 active, τv̇_{m+1} = λ²v² - λav⁵ and the SAM "
    "correction Q is the C.2 one with index m+1 (λ_{m+1}, a_{m+1}).",
)
def check_later_feature() -> CheckResult:
    """All d, H, m: eigen-coordinate reduction; explicit cross-checks up to d = 4 (5)."""
    lam, v, u, t = (sp.Symbol(n, positive=True) for n in ("lambda", "v", "u", "t"))
    # active coordinate: GD flow and the Hessian along d = (1, 1, 1) (path v -> v + t)
    g_act = coordinate_gradient(lam, v, v, v)
    a_expr = wishart_eigenvalue(lam, T_SYM, N_SYM)  # a_{m+1}; T = tr Σ
    gd_ok = sp.expand(-g_act / 2 - gd_flow_full(lam, a_expr, v) * sp.ones(3, 1)) == sp.zeros(3, 1)
    Hd = sp.diff(coordinate_gradient(lam, v + t, v + t, v + t), t).subs(t, 0)
    hd_ok = sp.expand(Hd - (10 * lam * a_expr * v**4 - 4 * lam**2 * v) * sp.ones(3, 1)) \
        == sp.zeros(3, 1)  # fmt: skip
    # learned coordinates: at rest (mod eq. 3) and untouched by the active path; zero heads: 0
    rest = [reduce_learned(x, u, lam) for x in coordinate_gradient(lam, u, u, u)]
    zero = coordinate_gradient(lam, 0, 0, 0)
    red_ok = gd_ok and hd_ok and all(x == 0 for x in [*rest, *zero])
    bad = []
    for d, H, learned, active in _later_sizes():
        bad = _later_feature_explicit(d, H, learned, active)
        if bad:
            break
    # The block H_{kq} of the active head itself differs from the m = 0 case ...
    from .attention_model import hessian_blocks_printed
    from .fixed_points import ansatz_heads

    m = ansatz_model(3, 3)
    vv = sp.Symbol("v", positive=True)
    sub = m.ansatz([1], active=2, v_active=vv, symbolic_values=True)
    blocks = hessian_blocks_printed(m.Sigma, m.E2, ansatz_heads(m, sub), 1, corrected=True)
    extra = blocks["kq"] - (-2 * vv * m.Sigma**2 + 4 * m.lam[1] * m.a[1] * vv**4 * m.e(2)
                            * m.e(2).T)  # fmt: skip
    extra11 = sp.factor(sp.expand(m.reduce(extra[0, 0], [1])))
    sizes = "; ".join(f"d = {d}, H = {H}, m = {len(lr)}" for d, H, lr, _ in _later_sizes())
    return CheckResult(red_ok and not bad, bad[0] if bad else 0,
                       "exact remainders modulo u_j³(Nλ_j+λ_j+trΣ) = N", "symbolic (all d) + "
                       "explicit",
                       f"reduction: active coordinate GD flow {gd_ok}, H·[1, e, e] {hd_ok}; "
                       "learned "
                       "coordinates at rest and zero heads static, so the components outside the "
                       "active head vanish and Q is the m = 0 one with index m+1. The active "
                       "head's H_kq block differs from the m = 0 block by 2v Σ_{j≤m} λ_j² e_j e_jᵀ "
                       f"(numerator of (1,1) entry at d = 3: {extra11}), which annihilates "
                       "e_{m+1}",
                       sizes=f"all d, H, m (eigen-coordinate reduction); explicit {sizes}")


@claim(
    "def_b1_global_equals_layerwise_attn_s",
    "main, App. B (remark after Def. B.1)",
    "Under the ansatz only the active head has a gradient, so global SAM equals SAM on the active "
    "head (same norm; H·∇L has no component on other heads).",
)
def check_global_vs_layerwise() -> CheckResult:
    """Gradient and H·∇L vanish outside the active head: reduction (all d) + explicit d = 3."""
    m = ansatz_model(3, 3)
    v = sp.Symbol("v", positive=True)
    sub = m.ansatz([1], active=2, v_active=v, symbolic_values=True)
    g = m.grad_at(sub)
    # entries whose remainder modulo eq. (3) is 0 vanish at the learned value: drop them exactly
    g = g.applyfunc(lambda x: 0 if m.reduce(x, [1]) == 0 else x)
    Hg = m.hvp(sub, g)
    outside = [n for n in range(len(m.params)) if not (m.head_slice(2).start <= n
                                                     < m.head_slice(2).stop)]  # fmt: skip
    vals = [m.reduce(g[n], [1]) for n in outside] + [m.reduce(Hg[n], [1]) for n in outside]
    bad = [x for x in vals if x != 0]
    # cross-head Hessian blocks are not all zero (they annihilate the gradient direction)
    k1, q2 = list(m.heads[0].k), list(m.heads[1].q)
    partial = {**sub, **{x: x for x in k1 + q2}}  # only k₁, q₂ left symbolic
    cross = m.grad_at(partial)[1:4, 0].jacobian(q2).subs(sub)  # ∂²L/∂k₁∂q₂
    cross = cross.applyfunc(lambda x: m.reduce(x, [1]))
    return CheckResult(not bad, bad[0] if bad else 0, "m = 1, active head 2",
                       "symbolic (all d) + explicit",
                       f"∂²L/∂k₁∂q₂ ≠ 0 (nonzero entries: {sum(1 for x in cross if x != 0)}) but "
                       "it maps e₂ to 0. For every d, H, m the gradient is supported on the active "
                       "head and H·∇L too (thm42_part2_later_feature: the gradient direction is "
                       "[1, e, e] and its Hessian image stays on the active head)",
                       sizes="all d, H, m (reduction); explicit d = 3, H = 3, m = 1")


def _lemma41_setup(rho=None):
    """Numeric ATTN_S (d = 2, H = 1, λ = (1, 1/2), N = 10) on the ansatz ray, in mpmath."""
    rho = mp.mpf(1) / 20 if rho is None else rho
    m = ansatz_model(2, 1)
    vals = {m.lam[0]: sp.Integer(1), m.lam[1]: sp.Rational(1, 2), m.N: 10}
    grad = m.grad.subs(vals)
    hess = grad.jacobian(m.params)
    f_grad = sp.lambdify(m.params, grad, "mpmath")
    f_hess = sp.lambdify(m.params, hess, "mpmath")
    lam, a = sp.Integer(1), m.a[0].subs(vals)
    f_sam = sp.lambdify(sp.Symbol("v"), sam_flow_full(lam, a, sp.Symbol("v"), sp.Float(str(rho),
                                                                                       40)),
                        "mpmath")  # fmt: skip

    def at(v):
        pt = [v, v, 0, v, 0]
        g = mp.matrix(f_grad(*pt))
        Hm = mp.matrix(f_hess(*pt))
        P = rho * Hm / mp.norm(g)
        return g, P

    return f_sam, at


def _smin(A) -> mp.mpf:
    return min(mp.svd_r(A, compute_uv=False))


@claim(
    "lemma41_as_printed",
    "main, Lemma 4.1",
    "If σ_min(I − P) > 0 during the flow, GD and first-order SAM share the same fixed points.",
       failure="typo",
       why="σ_min(I − P) for σ_min(I + P): the paper's eq. (7) and its proof in App. B.2 use I + "
           "P.",
       corrected_by="lemma41_corrected")
def check_lemma41_printed() -> CheckResult:
    """Counterexample on the ansatz ray: SAM fixed point v* ≈ 2ρ/√3 with ∇L ≠ 0, I − P regular."""
    mp.mp.dps = 40
    rho = mp.mpf(1) / 20
    f_sam, at = _lemma41_setup(rho)
    vstar = mp.findroot(f_sam, 2 * rho / mp.sqrt(3))
    g, P = at(vstar)
    flow = (mp.eye(5) + P) * (-g / 2)
    s_minus, s_plus = _smin(mp.eye(5) - P), _smin(mp.eye(5) + P)
    holds = not (s_minus > mp.mpf("1e-3") and mp.norm(flow) < mp.mpf("1e-25")
                 and mp.norm(g) > mp.mpf("1e-6"))  # fmt: skip
    return CheckResult(holds, float(mp.norm(g)),
                       "λ = (1, 1/2), N = 10, ρ = 0.05; ansatz k = q = v e₁",
                       "numeric", sizes="counterexample at d = 2, H = 1 (40 digits)", detail=
                       f"at v* = {mp.nstr(vstar, 8)} (2ρ/√3 = {mp.nstr(2 * rho / mp.sqrt(3), 8)}): "
                       f"‖(I+P)∇L‖ = {mp.nstr(mp.norm(flow), 3)}, ‖∇L‖ = {mp.nstr(mp.norm(g), 5)}, "
                       f"σ_min(I−P) = {mp.nstr(s_minus, 5)} > 0, σ_min(I+P) = "
                       f"{mp.nstr(s_plus, 3)}: "
                       "a SAM fixed point that GD does not have although I − P is regular")


@claim(
    "lemma41_corrected",
    "main, Lemma 4.1 / App. B.2",
    "If σ_min(I + P) > 0 (as in the proof, App. B.2), (I + P)∇L = 0 ⟺ ∇L = 0: no new fixed points; "
    "the only extra zero of the SAM flow on the ansatz ray sits where I + P is singular.",
    erratum=True,
)
def check_lemma41_corrected() -> CheckResult:
    """σ_min(I + P) vanishes at v*, and is > 0 with a nonzero SAM flow on v ∈ [1.05v*, 4v*]."""
    mp.mp.dps = 40
    rho = mp.mpf(1) / 20
    f_sam, at = _lemma41_setup(rho)
    vstar = mp.findroot(f_sam, 2 * rho / mp.sqrt(3))
    _, P = at(vstar)
    s_at = _smin(mp.eye(5) + P)
    grid_min, flow_min = mp.inf, mp.inf
    for k in range(41):
        v = vstar * (mp.mpf("1.05") + k * (4 - mp.mpf("1.05")) / 40)
        g, P = at(v)
        grid_min = min(grid_min, _smin(mp.eye(5) + P))
        flow_min = min(flow_min, mp.norm((mp.eye(5) + P) * g))
    ok = s_at < mp.mpf("1e-25") and grid_min > 0 and flow_min > 0
    printed = check_lemma41_printed()
    return CheckResult(ok, float(s_at), "λ = (1, 1/2), N = 10, ρ = 0.05; 41 grid points",
                       "numeric", sizes="d = 2, H = 1, on the ansatz ray (40 digits)",
                       printed_residual=printed.residual if not printed.holds else 0,
                       detail=
                       "printed σ_min(I − P) > 0 must read σ_min(I + P) > 0 (as in B.2 and eq. 8). "
                       f"σ_min(I+P)(v*) = {mp.nstr(s_at, 3)}; on the grid min σ_min(I+P) = "
                       f"{mp.nstr(grid_min, 4)}, min ‖(I+P)∇L‖ = {mp.nstr(flow_min, 4)}. Note P is "
                       "undefined where ∇L = 0 (P∇L -> ρHĝ), so 'GD fixed point ⟹ SAM fixed "
                       "point' needs the convention P∇L := 0 there")  # fmt: skip


@claim(
    "lemma41_exact_sam",
    "main, Lemma 4.1 applied to the SAM update (6) itself (exact, fixed ρ)",
    "Exact SAM (6)/(8) with the normalized perturbation has the same fixed points as GD: it "
    "introduces none on the ansatz ray.",
       failure="substantive",
       why="exact SAM with a fixed radius has a fixed point GD lacks (v* = ρ/√3 on the ansatz "
           "ray): the lemma does not carry over to the update the paper runs.")
def check_lemma41_exact() -> CheckResult:
    """On the ray the exact SAM flow is g(v − ρ/√3) ⬝ d: zero at v* = ρ/√3 where ∇L ≠ 0."""
    m, v, rho = _c2()
    sub = m.ansatz([], active=1, v_active=v)
    lam, a = m.lam[0], m.a[0]
    grad = m.grad_at(sub)
    nrm = grad_norm_from_gradient(grad, gd_flow_full(lam, a, v))  # regime g(v) > 0
    exact = sam_flow_exact(m, sub, rho, grad_norm=nrm)
    vstar = rho / SQRT3
    at_star = sp.expand(exact.subs(v, vstar))
    is_fixed = at_star == sp.zeros(*at_star.shape)
    g_star = sp.factor(gd_flow_full(lam, a, vstar))  # −½∂L/∂v at v*: λ²ρ²/3 − λa(ρ/√3)⁵
    x = sp.Symbol("x", positive=True)
    below = sp.factor(gd_flow_full(lam, a, -x))  # exact flow at v = v* − x: g(−x) > 0
    # v' = λ²(v − v*)² (small v) from v₀ < v*: v(t) = v* − 1/(λ²t + 1/(v* − v₀)) -> v*, never past
    t, v0 = sp.symbols("t v_0", positive=True)
    sol = vstar - 1 / (lam**2 * t + 1 / (vstar - v0))
    sol_ok = sp.simplify(sp.diff(sol, t) - lam**2 * (sol - vstar) ** 2) == 0
    ok_counter = is_fixed and bool(below.is_positive) and sol_ok
    numeric = g_star.subs({lam: 1, m.N: 10, rho: sp.Rational(1, 20),
                           **{lm: sp.Rational(1, 2) for lm in m.lam[1:]}})  # fmt: skip
    return CheckResult(not ok_counter, sp.N(2 * SQRT3 * numeric, 6),
                       "ansatz ray k = q = v e₁, ρ > 0, ‖∇L‖ from the gradient (g > 0)",
                       "symbolic",
                       f"the exact SAM velocity vanishes at v* = ρ/√3 (all components: {is_fixed}: "
                       "the perturbed point is the origin, where ∇L = 0) while −½∂L/∂v(v*) = "
                       f"{g_star} ≠ 0; below v* the flow g(v − v*) = {below} (x = v* − v) is "
                       "> 0, and the small-v solution v* − 1/(λ²t + 1/(v* − v₀)) (checked: "
                       f"{sol_ok}) creeps up to v* without crossing it: from v₀ < ρ/√3 exact SAM "
                       "never learns the feature (first-order SAM instead has its zero near "
                       "2ρ/√3, lemma41_as_printed). Residual: ‖∇L(v*)‖ at λ = (1, ½, ½), N = 10, "
                       "ρ = 0.05. Theorem 4.4 starts above 2ρ/√3, so its regime avoids v*",
                       sizes="d = 3, H = 2 (the ray and v* are the same at every size)")
