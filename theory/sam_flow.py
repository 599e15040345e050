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

from .fixed_points import AnsatzModel, ansatz_model
from .verify import CheckResult, claim, is_zero

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
]

SQRT3 = sp.sqrt(3)


def gd_flow_full(lam, a, v):
    """C.2: ``τv̇ = λ²v² - λ a v⁵`` (GD under the ansatz)."""
    return lam**2 * v**2 - lam * a * v**5


def sam_flow_full(lam, a, v, rho):
    """C.2 (printed): ``τv̇ = λ²v² - λav⁵ + (ρ/√3)(5λav⁴ - 2λ²v)`` (first-order SAM)."""
    return gd_flow_full(lam, a, v) + rho / SQRT3 * (5 * lam * a * v**4 - 2 * lam**2 * v)


def sam_flow_eq9(lam, v, rho):
    """Eq. (9): ``τv̇ = λ²v² - (2ρ/√3) λ² v``."""
    return lam**2 * v**2 - 2 * rho / SQRT3 * lam**2 * v


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
                       "d = 3, H = 2 (head 2 inactive), Σ = diag(λ), k₁ = q₁ = v e₁, g(v) > 0",
                       r.method)  # fmt: skip


@functools.lru_cache(maxsize=2)
def _model_flow(which: str) -> sp.Matrix:
    """Model-side flow at the C.2 ansatz point (cached: the perturbed-input tests reuse it)."""
    m, v, rho = _c2()
    sub = m.ansatz([], active=1, v_active=v)
    if which == "gd":
        return -m.grad_at(sub) / 2
    # small-v regime: g(v) > 0, so ‖∇L‖ = 2√3 g(v) (claim c2_grad_norm_corrected)
    g = gd_flow_full(m.lam[0], m.a[0], v)
    return sam_flow_first_order(m, sub, rho, grad_norm=2 * SQRT3 * g)


def check_truncation(full, truncated, var, kept_order: int) -> CheckResult:
    """Check ``truncated`` equals the Taylor polynomial of ``full`` in ``var`` up to ``kept_order``.

    Returns the order of the first dropped term in ``detail``.
    """
    if not isinstance(kept_order, int) or kept_order < 0:
        raise ValueError(f"`kept_order` must be a non-negative int; got {kept_order!r}.")
    poly = sp.Poly(sp.expand(full), var)
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
)
def check_grad_norm_printed() -> CheckResult:
    """The printed middle expression (unsquared norms) against 2√3|g|."""
    m, v, _ = _c2()
    g = m.grad_at(m.ansatz([], active=1, v_active=v))
    s1 = m.head_slice(1)
    blk = g[s1, 0]
    nv, nk, nq = _norm(blk[0:1, 0]), _norm(blk[1:4, 0]), _norm(blk[4:7, 0])
    claimed = 2 * SQRT3 * gd_flow_full(m.lam[0], m.a[0], v)
    r = is_zero(sp.sqrt(nv + nk + nq) - claimed, domain=_SMALL_V)
    return CheckResult(r.holds, r.residual, "small v (g > 0); d = 3", r.method,
                       "with unsquared norms the expression is sqrt(6|g|), equal to 2√3|g| only "
                       "at |g| = 1/2")  # fmt: skip


@claim(
    "c2_grad_norm_corrected",
    "main, App. C.2",
    "‖∇L‖₂ = sqrt(‖∇_v L‖² + ‖∇_k L‖² + ‖∇_q L‖²) = 2√3|λ₁²v₁² - λ₁a₁v₁⁵| (global norm: the "
    "inactive heads have zero gradient).",
    erratum=True,
)
def check_grad_norm_corrected() -> CheckResult:
    """Squared-norm version against 2√3|g|, using the full (all-head) gradient."""
    m, v, _ = _c2()
    g = m.grad_at(m.ansatz([], active=1, v_active=v))
    claimed = 2 * SQRT3 * sp.Abs(gd_flow_full(m.lam[0], m.a[0], v))
    r = is_zero(_norm(g) - claimed)
    printed = check_grad_norm_printed()
    return CheckResult(r.holds, r.residual, "d = 3, H = 2, any v > 0", r.method,
                       "printed sqrt(‖∇_v L‖₂ + ‖∇_k L‖₂ + ‖∇_q L‖₂) must read "
                       "sqrt(‖∇_v L‖₂² + ‖∇_k L‖₂² + ‖∇_q L‖₂²); printed form residual "
                       f"{float(sp.N(printed.residual)):.3g} at a random point ({printed.detail})")


@claim(
    "c2_hessian_direction_and_Q",
    "main, App. C.2 (H·[1, e₁, e₁] and Q)",
    "H₁[1, e₁, e₁] = (10λ₁a₁v₁⁴ - 4λ₁²v₁)[1, e₁, e₁], hence Q = (ρ/√3)(5λ₁a₁v₁⁴ - 2λ₁²v₁)[1, "
    "e₁, e₁] "
    "for g > 0.",
)
def check_hessian_direction() -> CheckResult:
    """Exact Hessian-vector product of the full model along d₁, and Q = ρ H(g d₁)/(2√3 g)."""
    m, v, rho = _c2()
    sub = m.ansatz([], active=1, v_active=v)
    d1 = direction(m, 1)
    lam, a = m.lam[0], m.a[0]
    Hd = m.hvp(sub, d1)
    r1 = _zero(Hd - (10 * lam * a * v**4 - 4 * lam**2 * v) * d1)
    g = gd_flow_full(lam, a, v)
    Q = rho / (2 * SQRT3 * g) * (g * Hd)  # P(τẆ_GD) = ρ H (g d₁)/‖∇L‖, H linear
    r2 = _zero(sp.together(Q - rho / SQRT3 * (5 * lam * a * v**4 - 2 * lam**2 * v) * d1))
    # Cross-head blocks ∂²L/∂θ₂∂θ₁ between the zero head and the active head vanish entirely.
    # ∂/∂θ₁ commutes with setting θ₂ = 0, so keep head 1 symbolic and head 2 at zero:
    partial = {**sub, **{p: p for p in m.params[m.head_slice(1)]}}
    cross = sp.expand(m.grad_at(partial)[m.head_slice(2), 0].jacobian(m.params[m.head_slice(1)]))
    r3 = cross == sp.zeros(*cross.shape)
    ok = r1.holds and r2.holds and r3
    return CheckResult(ok, r1.residual if not r1.holds else r2.residual,
                       "d = 3, H = 2 (global Hessian incl. the inactive head), g > 0", "symbolic"
                       if r1.method == r2.method == "symbolic" else "numeric",
                       "components on the inactive head are 0; the 7x7 cross-head Hessian block "
                       f"(zero head x active head) vanishes: {r3}")  # fmt: skip


@claim(
    "thm42_sam_flow_full",
    "main, App. C.2 (full first-order SAM flow)",
    "First-order SAM (8) under the ansatz: τv̇₁ = λ₁²v₁² - λ₁a₁v₁⁵ + (ρ/√3)(5λ₁a₁v₁⁴ - 2λ₁²v₁), "
    "same scalar for k̇₁, q̇₁ along e₁.",
)
def check_sam_flow_full() -> CheckResult:
    """(I + ρH/‖∇L‖)(-½∇L) of the full model against the printed full SAM flow."""
    return check_flow_against_model(sam_flow_full, which="sam")


@claim(
    "thm42_small_v_truncation",
    "main, Thm 4.2 eqs. (9)-(10), App. C.2",
    "For small v the full flows reduce to τv̇ = λ²v² - (2ρ/√3)λ²v (SAM, eq. 9) and τv̇ = λ²v² "
    "(GD, eq. 10): the kept terms are the lowest orders in v.",
    approximation=True,
)
def check_small_v() -> CheckResult:
    """Eq. (9) = Taylor polynomial of the full SAM flow to O(v²) (next O(v⁴)); (10) to O(v⁴)."""
    lam, a, v, rho = sp.symbols("lam a v rho", positive=True)
    r_sam = check_truncation(sam_flow_full(lam, a, v, rho), sam_flow_eq9(lam, v, rho), v, 3)
    r_gd = check_truncation(gd_flow_full(lam, a, v), gd_flow_eq10(lam, v), v, 4)
    ok = r_sam.holds and r_gd.holds
    return CheckResult(ok, r_sam.residual if not r_sam.holds else r_gd.residual,
                       "v -> 0 at fixed ρ, λ, a; drops O(ρv⁴) and O(v⁵)", "symbolic",
                       f"SAM: {r_sam.detail}; GD: {r_gd.detail}. The truncation is the right "
                       "leading order of the first-order-in-ρ flow; see sam_exact_flow_ansatz for "
                       "the O(ρ²) term it cannot see")  # fmt: skip


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
                       "generic rational point, d = 2, H = 2, λ = (3/2, 1/2), N = 5; exact "
                       "polynomial in ρ, for any value of 1/‖∇L‖", "symbolic",
                       f"ρ² coefficient nonzero (max |coef| = {worst:.3g}): the error is exactly "
                       "second order")  # fmt: skip


@claim(
    "sam_exact_flow_ansatz",
    "main, Sec. 4.1 eq. (6)/(8), App. C.2 (exact vs first-order SAM)",
    "Under the ansatz the exact SAM flow is τv̇ = g(v - ρ/√3) (g(v) = λ²v² - λav⁵, g(v) > 0); its "
    "first-order expansion in ρ is the printed full SAM flow of C.2.",
    approximation=True,
)
def check_exact_sam_ansatz() -> CheckResult:
    """Exact SAM at the ansatz (perturbation stays on the ansatz ray) and its ρ-expansion."""
    m, v, rho = _c2()
    sub = m.ansatz([], active=1, v_active=v)
    lam, a = m.lam[0], m.a[0]
    g = gd_flow_full(lam, a, v)
    exact = sam_flow_exact(m, sub, rho, grad_norm=2 * SQRT3 * g)
    target = gd_flow_full(lam, a, v - rho / SQRT3) * direction(m, 1)
    r1 = _zero(exact - target)
    series1 = sp.expand(gd_flow_full(lam, a, v - rho / SQRT3))
    first = series1.coeff(rho, 0) + rho * series1.coeff(rho, 1)
    r2 = _zero(first - sam_flow_full(lam, a, v, rho))
    lead_rho2 = sp.expand(series1.coeff(rho, 2)).coeff(v, 0)
    ok = r1.holds and r2.holds
    return CheckResult(ok, r1.residual if not r1.holds else r2.residual,
                       "d = 3, H = 2, g(v) > 0", "symbolic",
                       f"O(ρ²) term at v -> 0: {lead_rho2}·ρ² (= λ²ρ²/3). Eq. (9) drops it, "
                       f"but it is "
                       "comparable to the kept -2ρλ²v/√3 when v = O(ρ) (ratio ρ/(2√3 v)): the "
                       "exact "
                       "small-v flow λ²(v - ρ/√3)² ≥ 0 has no decay region below 2ρ/√3")


@claim(
    "thm42_part2_later_feature",
    "main, Thm 4.2 part 2, App. C.3",
    "With m features learned (eq. 3) and head m+1 active, τv̇_{m+1} = λ²v² - λav⁵ and the SAM "
    "correction Q is the C.2 one with index m+1 (λ_{m+1}, a_{m+1}).",
)
def check_later_feature() -> CheckResult:
    """D = 3, H = 3, head 1 learned (exact modulo eq. 3), head 2 active, head 3 zero."""
    m = ansatz_model(3, 3)
    v = sp.Symbol("v", positive=True)
    sub = m.ansatz([1], active=2, v_active=v, symbolic_values=True)
    lam, a = m.lam[1], m.a[1]
    d2 = direction(m, 2)
    g = m.grad_at(sub)
    rem_gd = [m.reduce(x, [1]) for x in (-g / 2 - gd_flow_full(lam, a, v) * d2)]
    Hd = m.hvp(sub, d2)
    rem_h = [m.reduce(x, [1]) for x in (Hd - (10 * lam * a * v**4 - 4 * lam**2 * v) * d2)]
    bad = [x for x in rem_gd + rem_h if x != 0]
    # The block H_{kq} of the active head itself differs from the m = 0 case ...
    from .attention_model import hessian_blocks_printed
    from .fixed_points import ansatz_heads

    blocks = hessian_blocks_printed(m.Sigma, m.E2, ansatz_heads(m, sub), 1, corrected=True)
    extra = blocks["kq"] - (-2 * v * m.Sigma**2 + 4 * m.lam[1] * a * v**4 * m.e(2) * m.e(2).T)
    extra11 = sp.factor(sp.expand(m.reduce(extra[0, 0], [1])))
    return CheckResult(not bad, bad[0] if bad else 0,
                       "d = 3, H = 3; exact remainders modulo u₁³(Nλ₁+λ₁+trΣ) = N", "symbolic",
                       "the active head's H_kq block differs from the m = 0 block by 2v Σ_{j≤m} "
                       f"λ_j² e_j e_jᵀ (numerator of (1,1) entry: {extra11}), which annihilates "
                       "e_{m+1}, so H·[1, e, e] and Q are unchanged")  # fmt: skip


@claim(
    "def_b1_global_equals_layerwise_attn_s",
    "main, App. B (remark after Def. B.1)",
    "Under the ansatz only the active head has a gradient, so global SAM equals SAM on the active "
    "head (same norm; H·∇L has no component on other heads).",
)
def check_global_vs_layerwise() -> CheckResult:
    """Gradient and H·∇L vanish outside the active head (m = 1 learned head, one zero head)."""
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
    return CheckResult(not bad, bad[0] if bad else 0, "d = 3, H = 3, m = 1, active head 2",
                       "symbolic",
                       f"∂²L/∂k₁∂q₂ ≠ 0 (nonzero entries: {sum(1 for x in cross if x != 0)}) but "
                       "it maps e₂ to 0")  # fmt: skip


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
)
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
                       "d = 2, H = 1, λ = (1, 1/2), N = 10, ρ = 0.05; ansatz k = q = v e₁",
                       "numeric",
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
    return CheckResult(ok, float(s_at), "d = 2, H = 1, λ = (1, 1/2), N = 10, ρ = 0.05; 41 grid "
                       "points", "numeric",
                       "printed σ_min(I − P) > 0 must read σ_min(I + P) > 0 (as in B.2 and eq. 8). "
                       f"σ_min(I+P)(v*) = {mp.nstr(s_at, 3)}; on the grid min σ_min(I+P) = "
                       f"{mp.nstr(grid_min, 4)}, min ‖(I+P)∇L‖ = {mp.nstr(flow_min, 4)}. Note P is "
                       "undefined where ∇L = 0 (P∇L -> ρHĝ), so 'GD fixed point ⟹ SAM fixed "
                       "point' needs the convention P∇L := 0 there")  # fmt: skip
