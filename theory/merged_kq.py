"""Merged key-query ATTN_M (two-layer linear net): Appendix B of the main paper.

B.1 gradients and Hessians, Def. B.1 / B.3 (layer-wise vs global SAM), Theorem B.2 (ODE from the
conservation law and its implicit solution), Lemma B.4 / B.5, the ρ = 0 logistic reduction,
Theorem B.3 (escape times, ``Δt`` series) and the value of ``γ = ‖E[y_q z]‖₂``.

Notation: ``L = E[(y_q - w₂ᵀW₁z)²]``, ``b = E[y_q z]``, ``C = E[zzᵀ]``, ``s = w₂ᵀw₂``,
``u = √s``, ``r± = (ρ ± Δ)/2``, ``Δ = sqrt(ρ² + 4γ/α)``.

Examples:
    >>> import sympy as sp
    >>> s, g, a, r, tau = sp.symbols("s gamma alpha rho tau", positive=True)
    >>> sp.simplify(sp.diff(implicit_time_b2(s, 1, g, a, r), s) * sam_ode_rhs(s, g, a, r))
    1
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp

from .attention_model import _expect_quadratic, colvec
from .verify import CheckResult, claim, is_zero
from .wishart import symmetric_matrix, wishart_pair_moment, wishart_second_moment_closed_form

__all__ = [
    "sam_ode_rhs",
    "gd_ode_rhs",
    "implicit_time_b2",
    "logistic_solution",
    "lemma_b5_u",
    "escape_times",
    "check_implicit_solution",
    "derive_z_moments",
]

_s, _s0, _g, _a, _r, _t, _tau = sp.symbols("s s0 gamma alpha rho t tau", positive=True)


def sam_ode_rhs(s, gamma, alpha, rho):
    """Thm B.2 / Lemma B.4: ``τṡ = 2s(γ - αs) + 2ραs^{3/2}``."""
    return 2 * s * (gamma - alpha * s) + 2 * rho * alpha * s ** sp.Rational(3, 2)


def gd_ode_rhs(s, gamma, alpha):
    """GD (Zhang et al. 2025): ``τṡ = 2s(γ - αs)``."""
    return 2 * s * (gamma - alpha * s)


def implicit_time_b2(s, s0, gamma, alpha, rho):
    """Thm B.2 / Lemma B.4: ``t/τ`` as a function of ``s(t)`` (implicit closed form)."""
    Delta = sp.sqrt(rho**2 + 4 * gamma / alpha)
    rp, rm = (rho + Delta) / 2, (rho - Delta) / 2
    u, u0 = sp.sqrt(s), sp.sqrt(s0)
    return (sp.log(s / s0) / (2 * gamma)
            + (sp.log((u - rm) / (u0 - rm)) / rm - sp.log((u - rp) / (u0 - rp)) / rp)
            / (alpha * Delta))  # fmt: skip


def logistic_solution(t, s0, gamma, alpha, tau):
    """ρ = 0 (App. B.3): ``s(t) = (γ/α)s₀e^{2γt/τ} / (γ/α + s₀(e^{2γt/τ} - 1))``."""
    E = sp.exp(2 * gamma * t / tau)
    return (gamma / alpha) * s0 * E / (gamma / alpha + s0 * (E - 1))


def lemma_b5_u(t, u0, gamma, alpha, rho, tau):
    """Lemma B.5 (corrected): ``u(t) = γu₀e^{γt/τ} / (γ + ραu₀(1 - e^{γt/τ}))``, ``s = u²``."""
    E = sp.exp(gamma * t / tau)
    return gamma * u0 * E / (gamma + rho * alpha * u0 * (1 - E))


def escape_times(s_star, s0, gamma, alpha, rho, tau):
    """Thm B.3 (proof): ``(t_GD, t_SAM, Δt)`` for the small-s ODEs, in terms of γ."""
    u, u0 = sp.sqrt(s_star), sp.sqrt(s0)
    t_gd = tau / gamma * sp.log(sp.sqrt(s_star / s0))
    t_sam = tau / gamma * sp.log(u * (gamma + rho * alpha * u0) / (u0 * (gamma + rho * alpha * u)))
    return t_gd, t_sam, tau / gamma * sp.log((gamma + rho * alpha * u) / (gamma + rho * alpha * u0))


def check_implicit_solution(F, rhs, var=_s, var0=_s0) -> CheckResult:
    """``F(var) = t/τ`` solves ``τ var' = rhs`` iff ``F'(var)·rhs = 1`` and ``F(var0) = 0``.

    Args:
        F: candidate implicit solution (SymPy expression in ``var`` and ``var0``).
        rhs: right-hand side of ``τ dvar/dt = rhs``.
        var: the unknown (default ``s``).
        var0: its initial value symbol (default ``s0``).
    """
    if not isinstance(F, sp.Expr) or not isinstance(rhs, sp.Expr):
        raise TypeError("`F` and `rhs` must be SymPy expressions.")
    r1 = is_zero(sp.diff(F, var) * rhs - 1, domain={var: (0.01, 0.2), var0: (0.01, 0.2)})
    r2 = is_zero(F.subs(var, var0))
    ok = r1.holds and r2.holds
    return CheckResult(ok, r1.residual if not r1.holds else r2.residual,
                       "0 < s, s0 < γ/α (numeric fallback: s, s0 in (0.01, 0.2), γ, α, ρ in "
                       "(0.1, 2))", "symbolic" if r1.method == r2.method == "symbolic"
                       else "numeric")  # fmt: skip


def derive_z_moments(Sigma: sp.Matrix, N: sp.Expr) -> tuple[sp.Matrix, sp.Matrix]:
    """``E[y_q z]`` and ``E[zzᵀ]`` with ``z = vec(β x_qᵀ)`` (column-wise), ``β = Σ̂w``.

    Gaussian expectations over ``x_q``, ``w`` and Wishart moments of ``Σ̂`` (App. B.3).
    """
    d = Sigma.shape[0]
    w = sp.Matrix(sp.symbols(f"mw1:{d + 1}", real=True))
    xq = sp.Matrix(sp.symbols(f"mxq1:{d + 1}", real=True))
    S = symmetric_matrix(d, "mS")
    z = colvec(S * w * xq.T)
    yq = (w.T * xq)[0]

    def expect(expr):
        e1 = _expect_quadratic(expr, list(xq), lambda a, b: Sigma[a, b])
        e2 = _expect_quadratic(e1, list(w), lambda a, b: sp.Integer(int(a == b)))
        syms = sorted({S[i, j] for i in range(d) for j in range(d)}, key=lambda s: s.name)
        pos = {s: next((i, j) for i in range(d) for j in range(d) if S[i, j] == s) for s in syms}
        poly = sp.Poly(sp.expand(e2), *syms)
        out = sp.Integer(0)
        for monom, coeff in poly.terms():
            idx = [syms[i] for i, m in enumerate(monom) for _ in range(m)]
            if len(idx) == 0:
                out += coeff
            elif len(idx) == 1:
                out += coeff * Sigma[pos[idx[0]]]
            else:
                (a, b), (c, e) = pos[idx[0]], pos[idx[1]]
                out += coeff * wishart_pair_moment(Sigma, N, a, b, c, e)
        return sp.expand(out)

    Eyz = sp.Matrix([expect(yq * zi) for zi in z])
    Ezz = sp.Matrix(d * d, d * d, lambda i, j: expect(z[i] * z[j]))
    return Eyz, Ezz


# ---------------------------------------------------------------------------------------------
# B.1: gradients and Hessians of the two-layer net
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _two_layer(H: int = 2, D: int = 2):
    w2 = sp.Matrix(sp.symbols(f"w2_1:{H + 1}", real=True))
    W1 = sp.Matrix(H, D, lambda i, j: sp.Symbol(f"W1_{i}{j}", real=True))
    b = sp.Matrix(sp.symbols(f"b1:{D + 1}", real=True))
    C = symmetric_matrix(D, "c")
    Ey2 = sp.Symbol("Ey2", positive=True)
    L = Ey2 - 2 * (w2.T * W1 * b)[0] + (w2.T * W1 * C * W1.T * w2)[0]
    return w2, W1, b, C, L


def _vec_grad_printed(w2, W1, b, C, sign: int = -1):
    """Printed ∇_{w₁}L = -2vec(w₂E[y zᵀ]) - 2(E[zzᵀ] ⊗ w₂w₂ᵀ)w₁ (``sign=+1``: corrected)."""
    return -2 * colvec(w2 * b.T) + sign * 2 * sp.kronecker_product(C, w2 * w2.T) * colvec(W1)


@claim(
    "b1_merged_gradients_hessians",
    "main, App. B.1",
    "∇_{w₂}L = -2W₁(E[y zᵀ] - w₂ᵀW₁E[zzᵀ])ᵀ, H(w₂) = 2W₁E[zzᵀ]W₁ᵀ, "
    "∇_{W₁}L = -2w₂(E[y zᵀ] - w₂ᵀW₁E[zzᵀ]), H(vec W₁) = 2(E[zzᵀ] ⊗ w₂w₂ᵀ).",
)
def check_b1() -> CheckResult:
    """Symbolic differentiation of L = E[y²] - 2w₂ᵀW₁b + w₂ᵀW₁CW₁ᵀw₂ (H = 2 heads, dim z = 2)."""
    w2, W1, b, C, L = _two_layer()
    w1 = list(colvec(W1))
    g2 = sp.Matrix([sp.diff(L, x) for x in w2])
    gW1 = sp.Matrix(W1.shape[0], W1.shape[1], lambda i, j: sp.diff(L, W1[i, j]))
    res = [
        g2 - (-2 * W1 * (b.T - w2.T * W1 * C).T),
        g2.jacobian(list(w2)) - 2 * W1 * C * W1.T,
        gW1 - (-2 * w2 * (b.T - w2.T * W1 * C)),
        sp.Matrix([sp.diff(L, x) for x in w1]).jacobian(w1)
        - 2 * sp.kronecker_product(C, w2 * w2.T),
    ]
    bad = [sp.expand(x) for x in res if sp.expand(x) != sp.zeros(*x.shape)]
    return CheckResult(not bad, bad[0] if bad else 0, "H = 2, dim z = 2, generic b and SPD C",
                       "symbolic", "w₁ = vec(W₁) is column-wise and lives in R^{H·d²} (printed "
                       "R^{d²})")  # fmt: skip


def _vec_gradient_residual(sign: int) -> sp.Matrix:
    """Differentiated ∇_{w₁}L minus the Kronecker form with ``sign`` on its second term (B.1)."""
    w2, W1, b, C, L = _two_layer()
    g1 = sp.Matrix([sp.diff(L, x) for x in colvec(W1)])
    return sp.expand(g1 - _vec_grad_printed(w2, W1, b, C, sign=sign))


@claim(
    "b1_vec_gradient_as_printed",
    "main, App. B.1",
    "∇_{w₁}L = -2vec(w₂E[y zᵀ]) - vec(w₂w₂ᵀW₁E[zzᵀ]) = -2vec(w₂E[y zᵀ]) - 2(E[zzᵀ]⊗w₂w₂ᵀ)w₁.",
)
def check_vec_gradient_printed() -> CheckResult:
    """The printed Kronecker form of ∇_{w₁}L (sign of the second term) against differentiation."""
    diff = _vec_gradient_residual(sign=-1)
    nz = [x for x in diff if x != 0]
    return CheckResult(not nz, sp.factor(nz[0]) if nz else 0, "H = 2, dim z = 2", "symbolic")


@claim(
    "b1_vec_gradient_corrected",
    "main, App. B.1",
    "∇_{w₁}L = -2vec(w₂E[y zᵀ]) + 2vec(w₂w₂ᵀW₁E[zzᵀ]) = -2vec(w₂E[y zᵀ]) + 2(E[zzᵀ]⊗w₂w₂ᵀ)w₁.",
    erratum=True,
)
def check_vec_gradient_corrected() -> CheckResult:
    """Corrected sign (+), consistent with ∇_{W₁}L and with H = +2(E[zzᵀ]⊗w₂w₂ᵀ)."""
    diff = _vec_gradient_residual(sign=+1)
    p = check_vec_gradient_printed()
    return CheckResult(
        diff == sp.zeros(*diff.shape),
        0,
        "H = 2, dim z = 2",
        "symbolic",
        "printed '-vec(w₂w₂ᵀW₁E[zzᵀ])' / '-2(E[zzᵀ]⊗w₂w₂ᵀ)w₁' must be "
        f"'+2vec(...)' / '+2(...)w₁'; printed minus derived, first entry: "
        f"{p.residual}",
    )


@claim(
    "a2_attn_m_manifolds",
    "main, App. A.2 (ATTN_M)",
    "M₀ = {w₂ = 0, W₁ = 0} and M_* = {w₂ᵀW₁ = E[y zᵀ]E[zzᵀ]⁻¹} consist of fixed points of GD.",
)
def check_attn_m_manifolds() -> CheckResult:
    """Gradients vanish at 0 and at generic points of M_* (W₁ = w₂bᵀC⁻¹/‖w₂‖² + (I - Π)R)."""
    w2, W1, b, C, L = _two_layer()
    H, D = W1.shape
    grads = sp.Matrix([sp.diff(L, x) for x in [*w2, *W1]])
    at0 = grads.subs({x: 0 for x in [*w2, *W1]})
    R = sp.Matrix(H, D, lambda i, j: sp.Symbol(f"R{i}{j}", real=True))
    Cn = sp.Matrix([[2, sp.Rational(1, 2)], [sp.Rational(1, 2), 1]])
    w2v = sp.Matrix([sp.Rational(3, 2), -1])
    Pi = w2v * w2v.T / (w2v.T * w2v)[0]
    W1v = w2v * (Cn.inv() * b).T / (w2v.T * w2v)[0] + (sp.eye(H) - Pi) * R
    sub = {**dict(zip(w2, w2v, strict=True)), **dict(zip(list(W1), list(W1v), strict=True)),
           **{C[i, j]: Cn[i, j] for i in range(D) for j in range(D)}}  # fmt: skip
    on = sp.expand(grads.subs(sub, simultaneous=True))
    ok = at0 == sp.zeros(*at0.shape) and on == sp.zeros(*on.shape)
    return CheckResult(
        ok,
        0 if ok else on,
        "H = 2, dim z = 2; generic b, R (free symbols)",
        "symbolic",
        "M_* contains a whole affine family (free R) of fixed points",
    )


# ---------------------------------------------------------------------------------------------
# B.3: moments of z, γ and α; conservation-law reduction; SAM perturbation
# ---------------------------------------------------------------------------------------------

_N = sp.Symbol("N", positive=True)


@functools.lru_cache(maxsize=1)
def _z_moments_general():
    Sigma = symmetric_matrix(2, "s")
    return Sigma, *derive_z_moments(Sigma, _N)


@claim(
    "b3_z_moments",
    "main, App. A.2 / B.3 (E[y_q z], E[zzᵀ])",
    "With z = vec(β x_qᵀ), β = Σ̂w: E[y_q z] = vec(Σ²) and E[zzᵀ] = Σ ⊗ E[Σ̂²]; hence E[zzᵀ] = αI "
    "only for Σ ∝ I, with α = 1 + (1 + d)/N and γ = ‖E[y_q z]‖₂ = √d for Σ = I.",
)
def check_z_moments() -> CheckResult:
    """Derive both moments (general symmetric Σ, d = 2), plus Monte Carlo for a non-white Σ."""
    Sigma, Eyz, Ezz = _z_moments_general()
    E2 = wishart_second_moment_closed_form(Sigma, _N)
    r1 = is_zero(Eyz - colvec(Sigma**2))
    r2 = is_zero(sp.expand(Ezz - sp.kronecker_product(Sigma, E2)))
    d = 3
    white = sp.kronecker_product(sp.eye(d), wishart_second_moment_closed_form(sp.eye(d), _N))
    r3 = is_zero(white - (1 + (1 + d) / _N) * sp.eye(d * d))
    # Monte Carlo, Σ = [[1, .4], [.4, .5]], N = 4
    rng = np.random.default_rng(3)
    Sn = np.array([[1.0, 0.4], [0.4, 0.5]])
    n, N = 200_000, 4
    Lc = np.linalg.cholesky(Sn)
    x = rng.standard_normal((n, N, 2)) @ Lc.T  # (n, N, d)
    xq = rng.standard_normal((n, 2)) @ Lc.T  # (n, d)
    w = rng.standard_normal((n, 2))  # (n, d)
    y = np.einsum("nkd,nd->nk", x, w)  # (n, N)
    beta = np.einsum("nk,nkd->nd", y, x) / N  # (n, d)
    yq = np.einsum("nd,nd->n", xq, w)
    z = np.einsum("ni,nj->nji", beta, xq).reshape(n, 4)  # column-wise vec: z[j*d+i] = β_i xq_j
    mc = (yq[:, None] * z).mean(0)
    se = (yq[:, None] * z).std(0) / np.sqrt(n)
    exact = (Sn @ Sn).flatten(order="F")
    zmax = float(np.max(np.abs(mc - exact) / se))
    ok = r1.holds and r2.holds and r3.holds and zmax < 5
    return CheckResult(
        ok,
        max(float(np.max(np.abs(mc - exact))), 0.0),
        "symbolic: d = 2 general Σ; white case d = 3; MC: 200k draws, N = 4",
        "symbolic+monte-carlo",
        f"MC of E[y_q z] within {zmax:.2f} s.e.; so γ = ‖E[y_q z]‖ = ‖Σ²‖_F",
    )


@claim(
    "thm_b3_gamma_statement_as_printed",
    "main, Thm B.3 (statement: τ/‖Σ‖_F, Δt ∝ 1/‖Σ‖_F²)",
    "γ = ‖E[y_q z]‖₂ equals ‖Σ‖_F for a general input covariance Σ.",
)
def check_gamma_statement() -> CheckResult:
    """Counterexample Σ = diag(2, 1): γ = ‖Σ²‖_F = √17, ‖Σ‖_F = √5."""
    lam = sp.symbols("lambda1:3", positive=True)
    Sigma = sp.diag(*lam)
    gamma = sp.sqrt(sum(x**2 for x in colvec(Sigma**2)))
    resid = sp.simplify(gamma - sp.sqrt((Sigma**2).trace()))
    val = resid.subs({lam[0]: 2, lam[1]: 1})
    return CheckResult(
        bool(resid == 0),
        val,
        "Σ = diag(λ₁, λ₂); numbers at Σ = diag(2, 1)",
        "symbolic",
        f"γ - ‖Σ‖_F = {resid}; equality iff Σλ⁴ = Σλ² (e.g. Σ = I)",
    )


@claim(
    "thm_b3_gamma_proof_as_printed",
    "main, Thm B.3 proof (last line) and the remark after it",
    "γ = ‖Σ‖_F² (Zhang et al. 2025 Eq. 53).",
)
def check_gamma_proof() -> CheckResult:
    """Counterexample already at Σ = I_d: γ = √d while ‖Σ‖_F² = d (the proof itself says γ = √d)."""
    d = sp.Symbol("d", positive=True, integer=True)
    resid = sp.sqrt(d) - d
    return CheckResult(False, resid.subs(d, 4), "Σ = I_d (d = 4 for the number)", "symbolic",
                       f"γ - ‖Σ‖_F² = {resid} ≠ 0 for d > 1")  # fmt: skip


@claim(
    "thm_b3_gamma_corrected",
    "main, Thm B.2/B.3 (γ)",
    "γ = ‖E[y_q z]‖₂ = ‖Σ²‖_F = (Σ_i λ_i⁴)^{1/2}; Thm B.3 reads t_GD = (τ/γ) ln√(s*/s₀), "
    "Δt ≈ τρα(√s* − √s₀)/γ², which matches the printed ‖Σ‖_F only when ‖Σ²‖_F = ‖Σ‖_F (e.g. Σ "
    "= I).",
    erratum=True,
)
def check_gamma_corrected() -> CheckResult:
    """γ from the derived E[y_q z] (general symmetric Σ, d = 2) equals ‖Σ²‖_F."""
    Sigma, Eyz, _ = _z_moments_general()
    r = is_zero(sp.expand(sum(x**2 for x in Eyz) - (Sigma**4).trace()))
    return CheckResult(r.holds, r.residual, "d = 2, general symmetric Σ", r.method,
                       "statement uses ‖Σ‖_F (Σ=diag(2,1): √5 vs γ = √17), the proof's last line "
                       "‖Σ‖_F² (Σ = I: d vs γ = √d); both should be ‖Σ²‖_F. For non-white Σ, "
                       "E[zzᵀ] = Σ⊗E[Σ̂²] ≠ αI, so α must also be read as mᵀE[zzᵀ]m, "
                       "m = vec(Σ²)/‖Σ²‖_F")  # fmt: skip


@claim(
    "thm_b2_conservation_reduction",
    "main, App. B.3 (eq. 13 and the SAM perturbation P)",
    "With W₁ = w₂mᵀ (m = E[y z]/γ) and E[zzᵀ] = αI: w₂w₂ᵀ = W₁W₁ᵀ, τẇ₂ = -½∇_{w₂}L = w₂(γ - αs), "
    "P = ραw₂w₂ᵀ/(‖w₂‖|γ - αs|) and τṡ = 2s(γ - αs) + 2 sign(γ - αs) ραs^{3/2}.",
)
def check_conservation_reduction() -> CheckResult:
    """H = 2 heads, dim z = 2, symbolic w₂ and unit m; γ - αs written as δ > 0 (and δ < 0)."""
    H = 2
    w2 = sp.Matrix(sp.symbols(f"w2_1:{H + 1}", real=True))
    th, gam, al, rho = sp.symbols("theta gamma alpha rho", positive=True)
    mvec = sp.Matrix([sp.cos(th), sp.sin(th)])
    b = gam * mvec
    W1 = w2 * mvec.T
    s = (w2.T * w2)[0]
    C = al * sp.eye(2)
    gw2 = -2 * W1 * (b.T - w2.T * W1 * C).T
    r1 = is_zero(sp.simplify(-gw2 / 2 - w2 * (gam - al * s)))
    r0 = is_zero(w2 * w2.T - W1 * W1.T)
    Hw2 = 2 * W1 * C * W1.T
    res = []
    for sign in (1, -1):
        delta = sp.Symbol("delta", positive=True)
        # γ - αs = sign·δ
        subs_g = {gam: al * s + sign * delta}
        g = sp.simplify(gw2.subs(subs_g))
        nrm = 2 * sp.sqrt(s) * delta  # ‖∇_{w₂}L‖ = 2‖w₂‖|γ - αs|
        r_norm = is_zero(sp.simplify(sum(x**2 for x in g) - nrm**2))
        P = rho * Hw2 / nrm
        P_claim = rho * al * w2 * w2.T / (sp.sqrt(s) * delta)
        sdot = sp.simplify((2 * w2.T * (sp.eye(H) + P) * (-g / 2))[0])
        target = 2 * s * sign * delta + 2 * sign * rho * al * s ** sp.Rational(3, 2)
        res += [r_norm, is_zero(sp.simplify(P - P_claim)), is_zero(sp.simplify(sdot - target))]
    allr = [r0, r1, *res]
    ok = all(r.holds for r in allr)
    return CheckResult(ok, next((r.residual for r in allr if not r.holds), 0),
                       "H = 2, dim z = 2, E[zzᵀ] = αI, both signs of γ - αs", "symbolic"
                       if all(r.method == "symbolic" for r in allr) else "numeric")  # fmt: skip


@claim(
    "def_b1_layerwise_vs_global_attn_m",
    "main, Def. B.1 and App. B.3",
    "Global SAM's w₂-perturbation equals layer-wise SAM's with ρ̂ = ρ/√(C+1), C = ‖∇_{W₁}L‖²/"
    "‖∇_{w₂}L‖²; on the conservation manifold C = 1; layer-wise SAM on w₂ is exactly (I + P)∇L "
    "(L is quadratic in w₂).",
)
def check_layerwise_vs_global() -> CheckResult:
    """Norm identity, C = 1 under W₁ = w₂mᵀ, and exactness of the expansion in w₂."""
    w2, W1, b, Cz, L = _two_layer()
    g2 = sp.Matrix([sp.diff(L, x) for x in w2])
    g1 = sp.Matrix([sp.diff(L, x) for x in colvec(W1)])
    n1, n2 = sp.Symbol("n1", positive=True), sp.Symbol("n2", positive=True)
    rho = sp.Symbol("rho", positive=True)
    r_id = is_zero(rho / sp.sqrt(n1**2 + n2**2) - rho / sp.sqrt(n1**2 / n2**2 + 1) / n2)
    th, gam, al = sp.symbols("theta gamma alpha", positive=True)
    mvec = sp.Matrix([sp.cos(th), sp.sin(th)])
    sub = {**{b[i]: gam * mvec[i] for i in range(2)},
           **{W1[i, j]: w2[i] * mvec[j] for i in range(2) for j in range(2)},
           Cz[0, 0]: al, Cz[1, 1]: al, Cz[0, 1]: 0}  # fmt: skip
    C_val = sp.simplify(sum(x**2 for x in g1.subs(sub)) / sum(x**2 for x in g2.subs(sub)))
    eps = sp.Matrix(sp.symbols("e1:3", real=True))
    shifted = g2.subs({w2[i]: w2[i] + eps[i] for i in range(2)}, simultaneous=True)
    r_exact = is_zero(sp.expand(shifted - g2 - g2.jacobian(list(w2)) * eps))
    ok = r_id.holds and C_val == 1 and r_exact.holds
    return CheckResult(ok, 0 if ok else C_val, "H = 2, dim z = 2; E[zzᵀ] = αI for C", "symbolic",
                       f"C = {C_val} on the conservation manifold, so ρ̂ = ρ/√2. (The printed "
                       "formula has a stray factor w₂ inside ∇L(w₂ + ρ̂∇L/‖∇L‖ w₂).)")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Theorem B.2, Lemmas B.4-B.5, Theorem B.3
# ---------------------------------------------------------------------------------------------


@claim(
    "thm_b2_implicit_solution",
    "main, Thm B.2 and Lemma B.4",
    "(1/2γ)ln(s/s₀) + (1/(αΔ))[(1/r₋)ln((√s−r₋)/(√s₀−r₋)) − (1/r₊)ln((√s−r₊)/(√s₀−r₊))] = t/τ "
    "solves τṡ = 2s(γ − αs) + 2ραs^{3/2} (γ − αs > 0).",
)
def check_thm_b2() -> CheckResult:
    """Differentiate the implicit solution: F'(s)·rhs = 1 and F(s₀) = 0."""
    return check_implicit_solution(implicit_time_b2(_s, _s0, _g, _a, _r),
                                   sam_ode_rhs(_s, _g, _a, _r))  # fmt: skip


@claim(
    "lemma_b4_partial_fractions",
    "main, Lemma B.4 (proof)",
    "γ + ραu − αu² = −α(u − r₊)(u − r₋); 1/(u(γ+ραu−αu²)) = A/u + B/(u−r₊) + C/(u−r₋) with "
    "A = 1/γ, B = −1/(αr₊(r₊−r₋)), C = 1/(αr₋(r₊−r₋)), r₊ − r₋ = Δ; τu̇ = u(γ + ραu − αu²).",
)
def check_lemma_b4() -> CheckResult:
    """Partial fractions and the u = √s substitution, symbolically."""
    u, tau = sp.Symbol("u", positive=True), _tau
    Delta = sp.sqrt(_r**2 + 4 * _g / _a)
    rp, rm = (_r + Delta) / 2, (_r - Delta) / 2
    quad = _g + _r * _a * u - _a * u**2
    A, B, C = 1 / _g, -1 / (_a * rp * (rp - rm)), 1 / (_a * rm * (rp - rm))
    res = [
        sp.expand(quad + _a * (u - rp) * (u - rm)),
        sp.simplify(1 / (u * quad) - (A / u + B / (u - rp) + C / (u - rm))),
        sp.simplify(rp - rm - Delta),
        # substitution: s = u², τṡ = rhs(s)  <=>  τu̇ = rhs/(2u)
        sp.simplify(sam_ode_rhs(u**2, _g, _a, _r) / (2 * u) - u * quad),
    ]
    r = is_zero(sp.Matrix(res))
    return CheckResult(r.holds, r.residual, "u > 0, γ, α, ρ > 0", r.method,
                       f"τ enters only as t/τ ({tau} is a time scale)")  # fmt: skip


@claim(
    "thm_b2_rho0_logistic",
    "main, App. B.3 (ρ = 0 reduction)",
    "At ρ = 0 (r₊ = √(γ/α), r₋ = −r₊, Δ = 2r₊) the implicit solution becomes "
    "(1/2γ)ln(s(s₀−γ/α)/(s₀(s−γ/α))) = t/τ, i.e. s(t) = (γ/α)s₀e^{2γt/τ}/(γ/α + s₀(e^{2γt/τ}−1)) "
    "= γe^{2γt/τ}/(α(e^{2γt/τ}−1) + γ/s₀), the GD solution.",
)
def check_rho0() -> CheckResult:
    """Substitute ρ = 0, compare with the logistic implicit form; check the explicit solution."""
    F0 = implicit_time_b2(_s, _s0, _g, _a, 0)
    target = sp.log(_s * (_s0 - _g / _a) / (_s0 * (_s - _g / _a))) / (2 * _g)
    # equal derivatives in s and equal at s = s₀ (avoids log-branch bookkeeping)
    r1 = is_zero(sp.Matrix([sp.diff(F0 - target, _s), (F0 - target).subs(_s, _s0)]))
    sol = logistic_solution(_t, _s0, _g, _a, _tau)
    r2 = is_zero(_tau * sp.diff(sol, _t) - gd_ode_rhs(sol, _g, _a))
    r3 = is_zero(sol.subs(_t, 0) - _s0)
    E = sp.exp(2 * _g * _t / _tau)
    r4 = is_zero(sol - _g * E / (_a * (E - 1) + _g / _s0))
    r5 = is_zero(sp.Matrix([sp.diff(target.subs(_s, sol), _t) - 1 / _tau,
                            target.subs(_s, sol).subs(_t, 0)]))  # fmt: skip
    rs = [r1, r2, r3, r4, r5]
    ok = all(r.holds for r in rs)
    return CheckResult(ok, next((r.residual for r in rs if not r.holds), 0),
                       "0 < s, s₀ < γ/α", "symbolic" if all(r.method == "symbolic" for r in rs)
                       else "numeric")  # fmt: skip


@claim(
    "lemma_b5_as_printed",
    "main, Lemma B.5 (last line of the proof)",
    "u(t) = (γu(0)e^{γt/τ}/(γ + ραu(0)(1 − e^{γt/τ})))² solves τu̇ = u(γ + ραu).",
)
def check_lemma_b5_printed() -> CheckResult:
    """Plug the printed u(t) (squared) into the u-ODE."""
    u0 = sp.Symbol("u0", positive=True)
    u = lemma_b5_u(_t, u0, _g, _a, _r, _tau) ** 2
    r = is_zero(_tau * sp.diff(u, _t) - u * (_g + _r * _a * u),
                domain={_t: (0.0, 0.2), u0: (0.01, 0.2)})  # fmt: skip
    r0 = is_zero(u.subs(_t, 0) - u0, domain={u0: (0.01, 0.2)})
    return CheckResult(
        r.holds and r0.holds,
        r.residual if not r.holds else r0.residual,
        "t small enough that the denominator stays positive",
        r.method,
        "the printed u(t) is u(0)² at t = 0: the square belongs to s(t)",
    )


@claim(
    "lemma_b5_corrected",
    "main, Lemma B.5 and Thm B.3 (s_SAM(t))",
    "u(t) = γu₀e^{γt/τ}/(γ + ραu₀(1 − e^{γt/τ})) and s(t) = u(t)² solve τu̇ = u(γ + ραu), "
    "τṡ = 2γs + 2ραs^{3/2} (the proof's final 'u(t) = (…)²' should read s(t) = (…)²).",
    erratum=True,
)
def check_lemma_b5_corrected() -> CheckResult:
    """Differentiate u(t) and s(t) = u(t)², and check the initial values."""
    u0 = sp.Symbol("u0", positive=True)
    u = lemma_b5_u(_t, u0, _g, _a, _r, _tau)
    s = u**2
    rs = [is_zero(_tau * sp.diff(u, _t) - u * (_g + _r * _a * u)),
          is_zero(_tau * sp.diff(s, _t) - (2 * _g * s + 2 * _r * _a * u**3)),
          is_zero(u.subs(_t, 0) - u0)]  # fmt: skip
    ok = all(r.holds for r in rs)
    p = check_lemma_b5_printed()
    return CheckResult(ok, next((r.residual for r in rs if not r.holds), 0),
                       "s^{3/2} = u³ for u > 0; before the blow-up time", "symbolic"
                       if all(r.method == "symbolic" for r in rs) else "numeric",
                       f"printed u(t) = (…)² fails τu̇ = u(γ+ραu): residual {sp.N(p.residual, 4)} "
                       "at a random point")  # fmt: skip


@claim(
    "thm_b3_small_s_odes",
    "main, Thm B.3 proof (dropping the least dominant term)",
    "For small s: τṡ = 2γs (GD) and τṡ = 2γs + 2ραs^{3/2} (SAM), i.e. the −2αs² term is dropped.",
    approximation=True,
)
def check_small_s() -> CheckResult:
    """In u = √s the dropped term is O(u⁴) while the kept ones are O(u²), O(u³)."""
    u = sp.Symbol("u", positive=True)
    full = sp.expand(sam_ode_rhs(u**2, _g, _a, _r))
    kept = 2 * _g * u**2 + 2 * _r * _a * u**3
    dropped = sp.expand(full - kept)
    ok = (
        sp.Poly(dropped, u).monoms() == [(4,)]
        and sp.expand(gd_ode_rhs(u**2, _g, _a) - 2 * _g * u**2) == -2 * _a * u**4
    )
    return CheckResult(bool(ok), 0 if ok else dropped, "s -> 0 (u = √s)", "symbolic",
                       f"dropped term: {dropped}")  # fmt: skip


@claim(
    "thm_b3_escape_times",
    "main, Thm B.3 (proof, in terms of γ)",
    "t_GD = (τ/γ)ln√(s*/s₀), t_SAM = (τ/γ)ln(√s*(γ+ρα√s₀)/(√s₀(γ+ρα√s*))), "
    "Δt = (τ/γ)ln((γ+ρα√s*)/(γ+ρα√s₀)) > 0 for s* > s₀.",
)
def check_escape_times() -> CheckResult:
    """Plug the times into s_GD(t) = s₀e^{2γt/τ} and s_SAM(t) = u(t)²; Δt > 0 by monotonicity."""
    ss = sp.Symbol("s_star", positive=True)
    t_gd, t_sam, dt = escape_times(ss, _s0, _g, _a, _r, _tau)
    dom = {ss: (0.05, 0.2), _s0: (0.001, 0.04)}
    r1 = is_zero(_s0 * sp.exp(2 * _g * t_gd / _tau) - ss, domain=dom)
    r2 = is_zero(lemma_b5_u(t_sam, sp.sqrt(_s0), _g, _a, _r, _tau) ** 2 - ss, domain=dom)
    r3 = is_zero(t_gd - t_sam - dt, domain=dom)
    x = sp.Symbol("x", positive=True)  # √s* = √s₀ + x
    pos = sp.simplify((_g + _r * _a * (sp.sqrt(_s0) + x)) / (_g + _r * _a * sp.sqrt(_s0)) - 1)
    rs = [r1, r2, r3]
    ok = all(r.holds for r in rs) and bool(pos.is_positive)
    return CheckResult(ok, next((r.residual for r in rs if not r.holds), 0),
                       "s* > s₀ > 0 (numeric domain s₀ < 0.04 < 0.05 < s*)", "symbolic"
                       if all(r.method == "symbolic" for r in rs) else "numeric",
                       f"ratio inside Δt's log minus 1 = {pos} > 0")  # fmt: skip


@claim(
    "thm_b3_delta_t_series",
    "main, Thm B.3 (Δt for ‖Σ‖_F ≫ ρα√s*)",
    "Δt = τρα(√s* − √s₀)/γ² + O(ρ²).",
    approximation=True,
)
def check_delta_t_series() -> CheckResult:
    """Series of the exact Δt in ρ: first-order coefficient matches, second order is nonzero."""
    ss = sp.Symbol("s_star", positive=True)
    _, _, dt = escape_times(ss, _s0, _g, _a, _r, _tau)
    ser = sp.series(dt, _r, 0, 3).removeO()
    c1 = sp.simplify(ser.coeff(_r, 1) - _tau * _a * (sp.sqrt(ss) - sp.sqrt(_s0)) / _g**2)
    c0 = sp.simplify(ser.coeff(_r, 0))
    c2 = sp.simplify(ser.coeff(_r, 2))
    ok = c0 == 0 and c1 == 0 and c2 != 0
    return CheckResult(ok, c1, "series in ρ at fixed s*, s₀, γ, α", "symbolic",
                       f"O(ρ²) coefficient: {sp.factor(c2)} (relative size ~ ρα√s*/γ)")  # fmt: skip


@claim(
    "thm_b2_equilibria",
    "main, Thm B.2 (equilibria of the SAM ODE)",
    "τṡ = 2s(γ − αs) + 2 sign(γ − αs) ραs^{3/2} has an unstable equilibrium at s = 0 and a stable "
    "one at s = γ/α (with sign(0) = 0).",
)
def check_b2_equilibria() -> CheckResult:
    """Signs around γ/α; the smooth ODE (without sign) would instead stop at √s = r₊ > √(γ/α)."""
    eps = sp.Symbol("eta", positive=True)

    def sgn_rhs(s):
        return 2 * s * (_g - _a * s) + 2 * sp.sign(_g - _a * s) * _r * _a * s ** sp.Rational(3, 2)

    below = sp.simplify(sgn_rhs(_g / _a - eps).subs(eps, _g / (10 * _a)))
    above_expr = sgn_rhs(_g / _a + eps)
    above = sp.simplify(above_expr)
    at = sp.simplify(sgn_rhs(_g / _a))
    Delta = sp.sqrt(_r**2 + 4 * _g / _a)
    rp = (_r + Delta) / 2
    smooth_at_rp = sp.simplify(sam_ode_rhs(rp**2, _g, _a, _r))
    gap = sp.simplify(rp**2 - _g / _a)  # = ρ r₊ > 0
    # finite time to reach γ/α from s₀ < γ/α: F(γ/α) is finite
    F_end = implicit_time_b2(_g / _a, _s0, _g, _a, _r)
    fin = F_end.subs({_g: 1, _a: 2, _r: sp.Rational(1, 10), _s0: sp.Rational(1, 100)})
    ok = (at == 0 and below.is_positive and above.is_negative and smooth_at_rp == 0
          and gap.is_positive and sp.N(fin).is_finite)  # fmt: skip
    return CheckResult(
        bool(ok),
        0 if ok else [at, below, above],
        "γ, α, ρ > 0; η > 0 (η = γ/(10α) below)",
        "symbolic",
        f"rhs(γ/α − γ/(10α)) = {below} > 0, rhs(γ/α + η) < 0: {above.is_negative}; "
        f"the smooth ODE vanishes at s = r₊² = γ/α + {sp.factor(gap)} instead; "
        f"γ/α is reached in finite time (t/τ = {sp.N(fin, 4)} for γ=1, α=2, ρ=0.1, "
        "s₀=0.01), so it is a Filippov-type (non-smooth) attracting point",
    )
