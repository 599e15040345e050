"""SAM near the saddles of ATTN_S: the heads share one radius (beyond the paper).

Main paper: eqs. (6)-(10), App. C.2 (eq. 22: ``P = ρ H₁ / ‖∇_{w₁}L‖``), Theorem 4.4. The paper
reduces SAM to one scalar ODE per feature by giving the active head the whole radius ``ρ``
(the norm in eq. 22 is that head's own gradient norm). But Theorem 4.4 integrates every feature
from a *common* start, i.e. all heads grow at once — and SAM's perturbation
``ε = ρ ∇L/‖∇L‖`` (eq. 6) is normalized by the **global** gradient norm. On the multi-head
ansatz (head ``i`` at ``k_i = q_i = v_i e_i``, population loss) the global SAM step reduces
exactly (claim ``sam_multihead_ansatz_reduction``) to::

    exact SAM:        v_i ← v_i + 2η G_i(v_i − c s_i)
    first-order SAM:  v_i ← v_i + 2η [G_i(v_i) − c s_i G_i'(v_i)]       (eq. 8, Euler step)
    c = ρ/√3,  s_i = G_i(v_i) / ‖G(v)‖₂,  G_i(v) = σ_i v² − κ_i v⁵

(``σ_i = s λ_i²``, ``κ_i = s² λ_i a_i`` with the output scale ``s``; one step of size ``η`` is
``2η`` time units of ``τ Ẇ = −½∇L`` with ``τ = 1``). The **share** ``s_i ∈ [−1, 1]`` is the
head's part of the gradient: the head that dominates the gradient absorbs nearly all of SAM's
slow-down, the others almost none. With head-wise normalization (the paper's reduction, or
Def. B.1's layer-wise SAM with heads as layers) ``s_i = sign G_i``, and every feature started at
the same ``ε`` is slowed by the same factor ``≈ ε/(ε − c)`` (claim
``sam_headwise_uniform_slowdown``), so the entropy hardly moves.

Consequences (claim ``sam_shared_radius_fig1``, and the simulations in
:mod:`sims.linear_attention.mechanism`):

* the first feature dominates the gradient from the start and is slowed almost fully;
* the later features grow in the background with a small share, so they are hardly slowed; when
  they dominate the gradient they are already large compared with ``c``;
* hence phase 1 is longer and the later *phases* (``t_i − t_{i−1}``) are shorter than GD's,
  although no feature is learned faster (in the reduced model); the entropy of the learning
  times rises by ~250× Theorem 4.4's first-order amount at Figure 1's setting.

A plateau gradient from elsewhere (another head, or a learned head that SAM keeps bouncing
around its fixed point) shrinks an escaping head's share, hence its delay: with a constant
background ``b`` the first-order delay is ``(ĉ/2b)[asinh(b/(σε²)) − asinh(b/(σu²))]``
(``ĉ = 2ρ/√3``), which falls like ``log(b)/b`` once ``b ≫ σε²`` and like ``ĉ ln(u/ε)/b`` once
``b ≫ σu²`` (claim ``sam_shared_radius_background_delay``).
The "kick" that exact SAM gives at the saddle (the gradient is taken at ``v − c < 0``, on the far
side, where it is larger) exists only for ``v < c s/2`` (claim ``sam_exact_kick_region``) and
not at all in first-order SAM, which shows the same phase pattern: it is not the mechanism.

The numbers live in :mod:`sims.ansatz` (:func:`~sims.ansatz.ansatz_rate`,
:func:`~sims.ansatz.ansatz_gd_time`, :func:`~sims.ansatz.reduced_rate`,
:func:`~sims.ansatz.reduced_map`, ...); the claims here pin them to the symbolic forms (claim
``sam_reduced_rate_and_map_numerics``) and to quadrature (``ansatz_gd_time_closed_form``).
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from sims.ansatz import (
    NORMALIZATIONS,
    ansatz_gd_time,
    ansatz_rate,
    figure1_ansatz,
    figure1_coefficients,
    reduced_map,
    reduced_rate,
    time_entropy,
)

from .verify import CheckResult, claim, record, stated

__all__ = [
    "check_multihead_reduction",
    "check_rate_and_map_numerics",
    "check_headwise_uniform",
    "check_kick_region",
    "check_background_delay",
    "check_gd_time_closed_form",
    "check_fig1",
    "check_bounce",
]


def _figure1_thresholds(n_context: int = 31, scale: float = 31.0, fraction: float = 0.5):
    return figure1_coefficients(n_context, scale, fraction)[3]


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


def _two_head_setup():
    from .fixed_points import ansatz_model

    m = ansatz_model(3, 2)
    v1, v2 = sp.symbols("v1 v2", positive=True)
    sub = m.point({1: (v1, v1 * m.e(1), v1 * m.e(1)), 2: (v2, v2 * m.e(2), v2 * m.e(2))})
    return m, v1, v2, sub


def _d(m, i):
    from .sam_flow import direction

    return direction(m, i)


@claim(
    "sam_multihead_ansatz_reduction",
    "beyond the paper (eqs. 6, 8; App. C.2 with several active heads)",
    "With heads on distinct eigen-directions (k_i = q_i = v_i e_i, population loss) the gradient "
    "is −2Σ_i G_i(v_i) d_i and H d_i = −2G_i'(v_i) d_i, so global SAM keeps the ansatz and moves "
    "head i by G_i(v_i − c G_i/‖G‖) (exact) or G_i − c G_i G_i'/‖G‖ (first order), c = ρ/√3, "
    "‖G‖² = Σ_j G_j²: the heads share the radius in proportion to their gradient.",
    sizes="d = 3, H = 2 (both heads active); the identities are per head",
)
def check_multihead_reduction() -> CheckResult:
    """Symbolic gradient and Hessian-vector products of the 2-active-head model (d = 3, H = 2)."""
    from .sam_flow import gd_flow_full

    m, v1, v2, sub = _two_head_setup()
    g = m.grad_at(sub)
    G1 = gd_flow_full(m.lam[0], m.a[0], v1)
    G2 = gd_flow_full(m.lam[1], m.a[1], v2)
    d1, d2 = _d(m, 1), _d(m, 2)
    r_grad = sp.expand(g + 2 * G1 * d1 + 2 * G2 * d2)
    ok_grad = all(x == 0 for x in r_grad)
    bad = []
    for v, G, d in ((v1, G1, d1), (v2, G2, d2)):
        hd = m.hvp(sub, d)
        res = sp.expand(hd + 2 * sp.diff(G, v) * d)
        bad += [x for x in res if x != 0]
    # the perturbed point of global SAM is again a 2-head ansatz point with v_i - c G_i/‖G‖:
    # ε = ρ g/‖g‖ with ‖g‖ = 2√3 ‖G‖ and g = -2 Σ G_i d_i, so ε = -(ρ/√3) Σ (G_i/‖G‖) d_i.
    norm_g = sp.sqrt(sum(x**2 for x in g))
    r_norm = sp.simplify(norm_g**2 - 12 * (G1**2 + G2**2))
    ok = ok_grad and not bad and r_norm == 0
    return CheckResult(ok, 0 if ok else (r_grad if not ok_grad else (bad or [r_norm])[0]),
                       "d = 3, H = 2, both heads active on e₁, e₂ (any v₁, v₂ > 0); population "
                       "loss", "symbolic",
                       "∇L = −2(G₁d₁ + G₂d₂), ‖∇L‖² = 12(G₁² + G₂²), H d_i = −2G_i' d_i with no "
                       "cross-head term: the perturbed point is the ansatz point "
                       "v_i − (ρ/√3)G_i/‖G‖ and, by the same identities there, the SAM gradient "
                       "of head i is −2G_i(v_i − (ρ/√3)G_i/‖G‖) d_i; the first-order term "
                       "ρH ĝ adds (2ρ/√3)G_iG_i'/‖G‖ d_i")  # fmt: skip


def _symbolic_rates(n_heads: int = 3):
    """SymPy rates of the multi-head reduction: GD, and SAM in each (form, normalization)."""
    from .sam_flow import gd_flow_full

    v = sp.symbols(f"v1:{n_heads + 1}", real=True)
    lam = sp.symbols(f"lam1:{n_heads + 1}", positive=True)
    a = sp.symbols(f"a1:{n_heads + 1}", positive=True)
    s, c = sp.symbols("s c", positive=True)
    # the output scale s: G = s·(λ²v² − λ(s a)v⁵) = σv² − κv⁵ with σ = sλ², κ = s²λa
    G = [sp.expand(s * gd_flow_full(lam[i], s * a[i], v[i])) for i in range(n_heads)]
    norm = sp.sqrt(sum(g**2 for g in G))
    out = {"gd": G}
    for normalization in NORMALIZATIONS:
        share = [g / norm if normalization == "global" else sp.sign(g) for g in G]
        out[f"exact/{normalization}"] = [G[i].subs(v[i], v[i] - c * share[i])
                                         for i in range(n_heads)]  # fmt: skip
        out[f"first_order/{normalization}"] = [G[i] - c * share[i] * sp.diff(G[i], v[i])
                                               for i in range(n_heads)]  # fmt: skip
    return v, lam, a, s, c, out


@claim(
    "sam_reduced_rate_and_map_numerics",
    "beyond the paper (the numerics of sam_multihead_ansatz_reduction in sims.ansatz)",
    "sims.ansatz.ansatz_rate is App. C.2's GD flow sλ²v² − s²λav⁵ (σ = sλ², κ = s²λa); "
    "reduced_rate equals G_i(v_i − c s_i) (exact) and G_i − c s_i G_i' (first order) with "
    "c = ρ/√3 and s_i = G_i/‖G‖ (global) or sign G_i (head-wise); one step of reduced_map is "
    "v + 2η·reduced_rate(v).",
    sizes="3 heads, 12 seeded points (ρ > 0, heads on both sides of their fixed points)",
)
def check_rate_and_map_numerics() -> CheckResult:
    """Evaluate the SymPy rates at seeded points; run reduced_map one step against them."""
    v, lam, a, s, c, rates = _symbolic_rates(3)
    sig_expr = [s * lam[i] ** 2 for i in range(3)]
    kap_expr = [s**2 * lam[i] * a[i] for i in range(3)]
    r_gd = [sp.expand(rates["gd"][i] - (sig_expr[i] * v[i] ** 2 - kap_expr[i] * v[i] ** 5))
            for i in range(3)]  # fmt: skip
    import mpmath

    args = [*v, *lam, *a, s, c]
    evaluate = {k: sp.lambdify(args, e, "mpmath") for k, e in rates.items()}
    rng = np.random.default_rng(7)
    worst, worst_step = 0.0, 0.0
    for k in range(12):
        lam_v = rng.uniform(0.1, 0.5, 3)
        a_v = lam_v**2 * (1 + (1 + 1 / lam_v) / 31)
        s_v = float(rng.choice([1.0, 31.0]))
        sig, kap = s_v * lam_v**2, s_v**2 * lam_v * a_v
        vstar = np.cbrt(sig / kap)
        v_v = vstar * rng.uniform(0.05, 1.3, 3)  # some heads past the fixed point: G < 0
        rho = float(rng.uniform(0.2, 1.0)) * 1e-2 * (1 + 9 * (k % 2))
        point = [*v_v, *lam_v, *a_v, s_v, rho / math.sqrt(3)]
        for key in rates:
            with mpmath.workdps(30):
                want = np.array([float(x) for x in evaluate[key](*map(mpmath.mpf, point))])
            if key == "gd":
                got = ansatz_rate(v_v, sig, kap)
            else:
                form, norm = key.split("/")
                got = reduced_rate(v_v, sig, kap, rho, form=form, normalization=norm)
            worst = max(worst, float(np.max(np.abs(got - want) / np.max(np.abs(want)))))
            if key == "gd":
                continue
            # one step of the map: the head is at threshold v + 2η·rate ± 1e-9 relative
            eta = 0.02
            nxt = v_v + 2 * eta * want
            above = reduced_map(v_v[None], sig, kap, nxt * (1 - 1e-9), rho=rho, eta=eta,
                                n_steps=2, form=form, normalization=norm)[0]  # fmt: skip
            below = reduced_map(v_v[None], sig, kap, nxt * (1 + 1e-9), rho=rho, eta=eta,
                                n_steps=2, form=form, normalization=norm)[0]  # fmt: skip
            grew = nxt > v_v  # heads that move up reach the threshold exactly at step 1
            bad = np.sum(grew & ~(above == 1)) + np.sum(grew & (below == 1))
            worst_step = max(worst_step, float(bad))
    ok = all(r == 0 for r in r_gd) and worst < 1e-12 and worst_step == 0
    return CheckResult(ok, next((r for r in r_gd if r != 0), worst if worst >= 1e-12 else
                                worst_step),
                       "3 heads, σ = sλ², κ = s²λa with a_i of App. C.1 (N = 31), s ∈ {1, 31}, "
                       "ρ ∈ [2e-3, 1e-1], v_i/v_i* ∈ [0.05, 1.3]", "numeric",
                       f"max relative gap of sims.ansatz to the SymPy rates (30 digits) over 12 "
                       f"points × 4 SAM variants + GD: {worst:.1e}; one-step threshold "
                       f"brackets missed: {int(worst_step)}")  # fmt: skip


@claim(
    "sam_headwise_uniform_slowdown",
    "main, Thm 4.4 / eq. (22) (per-head radius), truncated exact SAM",
    "If every head gets the whole radius (share 1, the paper's reduction), the truncated exact "
    "SAM time from ε to u is (1/λ²)(1/(ε−c) − 1/(u−c)), i.e. GD's time times εu/((ε−c)(u−c)): "
    "the same factor ε/(ε−c) for every feature up to O(c/u).",
    approximation=True,
    sizes="all λ, ε, c, u (symbolic); numbers at Figure 1's 4 thresholds",
)
def check_headwise_uniform() -> CheckResult:
    """Integrate 1/(λ²(v−c)²) symbolically; ratio to GD; its spread across u."""
    lam, eps, u, c = sp.symbols("lam eps u c", positive=True)
    # antiderivatives checked by differentiation (∫_ε^u, so they vanish at u = ε)
    t_sam = (1 / (eps - c) - 1 / (u - c)) / lam**2
    t_gd = (1 / eps - 1 / u) / lam**2
    r_int = [sp.simplify(sp.diff(t_sam, u) - 1 / (lam**2 * (u - c) ** 2)), t_sam.subs(u, eps),
             sp.simplify(sp.diff(t_gd, u) - 1 / (lam**2 * u**2)), t_gd.subs(u, eps)]
    target = stated(eps * u / ((eps - c) * (u - c)), "t_SAM/t_GD = εu/((ε − c)(u − c))")
    r = sp.simplify(t_sam / t_gd - target)
    r = r if all(x == 0 for x in r_int) else next(x for x in r_int if x != 0)
    # at Figure 1's setting (ε = 0.002, c = 1e-3/√3, u_i = 0.5^(1/3) v_i*): spread of the ratio
    u_vals = _figure1_thresholds()
    num = [float(target.subs({eps: 2e-3, c: 1e-3 / math.sqrt(3), u: x})) for x in u_vals]
    ok = r == 0
    return CheckResult(ok, r, "0 < c < ε < u (the SAM target is reachable)", "symbolic",
                       f"ratios at Figure 1's thresholds u = {np.round(u_vals, 4).tolist()}: "
                       f"{np.round(num, 5).tolist()} (spread "
                       f"{max(num) - min(num):.1e}): a uniform slow-down, so the normalized "
                       "times, hence the entropy, barely change")  # fmt: skip


def _sign_is(expr, sign: str) -> bool:
    f = sp.factor(sp.simplify(expr))
    return bool(f.is_positive) if sign == "+" else bool(f.is_negative)


@claim(
    "sam_exact_kick_region",
    "beyond the paper (exact SAM at the saddle v = 0)",
    "At a small head (truncated rate λ²v²) exact SAM with shift c s moves faster than GD iff "
    "v < c s/2, and first-order SAM (λ²v² − 2c s λ² v) is never faster than GD there.",
    sizes="all λ, v, c, s > 0 (symbolic)",
)
def check_kick_region(exact_rate=None, first_order_rate=None) -> CheckResult:
    """Exact SAM is faster than GD iff v < cs/2; first-order SAM never is (both sides checked).

    ``exact_rate(lam, v, c, s)`` and ``first_order_rate(...)`` default to the truncated rates
    λ²(v − cs)² and λ²v² − 2csλ²v (the statement; tests pass planted ones). The gain over GD
    (λ²v²) must have its root at v = cs/2, be > 0 at every v = cs/(2 + w) and < 0 at every
    v = cs/2 + w (w > 0 symbolic: both sides of the threshold), and the first-order gain must be
    < 0 at every v > 0.
    """
    lam, v, c, s, w = sp.symbols("lam v c s w", positive=True)
    exact = (exact_rate or (lambda lam, v, c, s: lam**2 * (v - c * s) ** 2))(lam, v, c, s)
    first = (first_order_rate or (lambda lam, v, c, s: lam**2 * v**2 - 2 * c * s * lam**2 * v))(
        lam, v, c, s)
    gd = lam**2 * v**2
    exact_gain = sp.factor(stated(exact, "exact SAM rate λ²(v − cs)²") - gd)
    fo_gain = sp.factor(stated(first, "first-order rate λ²v² − 2csλ²v") - gd)
    crit = sp.solve(sp.Eq(exact_gain, 0), v)
    ok = record("exact gain's only root is v = cs/2", crit == [c * s / 2])
    ok &= record("exact SAM faster below cs/2 (v = cs/(2+w))",
                 _sign_is(exact_gain.subs(v, c * s / (2 + w)), "+"))
    ok &= record("exact SAM slower above cs/2 (v = cs/2 + w)",
                 _sign_is(exact_gain.subs(v, c * s / 2 + w), "-"))
    ok &= record("first-order SAM slower at every v > 0", _sign_is(fo_gain, "-"))
    return CheckResult(ok, sp.Integer(0) if ok else exact_gain,
                       "truncated rates, share s ∈ (0, 1], v > 0", "symbolic",
                       f"exact − GD = {exact_gain}: > 0 at every v = cs/(2+w) and < 0 at every "
                       f"v = cs/2 + w (w > 0), root v = cs/2; first-order − GD = {fo_gain} < 0 "
                       "for every v > 0. At Figure 1's ρ = 1e-3, cs/2 ≤ 2.9e-4, below the "
                       "heads' effective starts (~1.6e-3 to 2.1e-3 calibrated from GD runs)",
                       generality="symbolic in λ, v, c, s > 0, both sides of the threshold")


@claim(
    "sam_shared_radius_background_delay",
    "beyond the paper (first-order SAM, truncated, constant background gradient b)",
    "With the escaping head's share s = σv²/√(σ²v⁴ + b²) (a constant gradient b elsewhere), "
    "first-order SAM delays its escape from ε to u by (ĉ/2b)[asinh(b/(σε²)) − asinh(b/(σu²))] "
    "(to first order in ĉ = 2ρ/√3), which tends to (ĉ/2σ)(1/ε² − 1/u²) as b → 0 and decays "
    "like ĉ ln(u/ε)/b for b ≫ σu².",
    approximation=True,
    sizes="all σ, b, ε, u, ĉ > 0 (symbolic)",
)
def check_background_delay() -> CheckResult:
    """d/dv of the antiderivative equals ĉ s/(σ v³); the b → 0 limit; the large-b decay."""
    sig, b, v, eps, u, ch = sp.symbols("sigma b v epsilon u chat", positive=True)
    share = sig * v**2 / sp.sqrt(sig**2 * v**4 + b**2)
    integrand = ch * share / (sig * v**3)  # 1/(σv²(1 − ĉ s/v)) − 1/(σv²) to first order in ĉ
    anti = stated(-ch / (2 * b) * sp.asinh(b / (sig * v**2)), "delay (ĉ/2b) asinh(b/(σv²))")
    r1 = sp.simplify(sp.diff(anti, v) - integrand)
    delay = anti.subs(v, u) - anti.subs(v, eps)
    lim0 = sp.limit(delay, b, 0)
    r2 = sp.simplify(lim0 - ch / (2 * sig) * (1 / eps**2 - 1 / u**2))
    big = sp.limit(delay * b, b, sp.oo)
    r3 = sp.simplify(sp.expand_log(big - ch * sp.log(u / eps), force=True))
    ok = r1 == 0 and r2 == 0 and r3 == 0
    ratio_at = [float((delay / lim0).subs({sig: 0.16 * 31, eps: 2e-3, u: 0.42, ch: 2e-3 / 3**0.5,
                                           b: bb})) for bb in (1e-6, 1e-5, 1e-4, 1e-3)]
    return CheckResult(ok, r1 if r1 != 0 else (r2 if r2 != 0 else r3),
                       "first order in ĉ, truncated rate σv², b "
                       "constant", "symbolic",
                       f"delay(b)/delay(0) at σ = 31·0.16, ε = 0.002, u = 0.42: "
                       f"{np.round(ratio_at, 4).tolist()} for b = 1e-6..1e-3; "
                       f"lim_(b→∞) delay·b = {big}")  # fmt: skip


@claim(
    "ansatz_gd_time_closed_form",
    "main, App. C.2 full GD ODE (τv̇ = σv² − κv⁵), closed-form learning time",
    "∫ dz/(z²(1 − z³)) = −1/z − ln(1 − z)/3 + ln(z² + z + 1)/6 − atan((2z + 1)/√3)/√3, so the "
    "GD time from v0 to v1 is (κ/σ)^{1/3}/σ [F(z1) − F(z0)] with z = (κ/σ)^{1/3} v.",
    sizes="all 0 < z < 1 (symbolic); 4 numeric cases vs quadrature",
)
def check_gd_time_closed_form() -> CheckResult:
    """Differentiate F symbolically; compare the vectorized closed form with quadrature."""
    from scipy.integrate import quad

    z = sp.Symbol("z", positive=True)
    F = stated(-1 / z - sp.log(1 - z) / 3 + sp.log(z**2 + z + 1) / 6
               - sp.atan((2 * z + 1) / sp.sqrt(3)) / sp.sqrt(3), "F(z) of the GD time")  # fmt: skip
    r = sp.simplify(sp.diff(F, z) - 1 / (z**2 * (1 - z**3)))
    worst = 0.0
    for sigma, kappa, v0, v1 in ((4.96, 190.0, 2e-3, 0.25), (0.31, 3.3, 1e-3, 0.4),
                                 (1.0, 0.0, 0.1, 2.0), (2.0, 1e-6, 1e-3, 0.02)):  # fmt: skip
        ref = quad(lambda x, s=sigma, k=kappa: 1 / (s * x * x - k * x**5), v0, v1,
                   epsabs=0, epsrel=1e-12, limit=200)[0]  # fmt: skip
        got = float(ansatz_gd_time(sigma, kappa, v0, v1))
        worst = max(worst, abs(got / ref - 1))
    ok = r == 0 and worst < 1e-9  # quad at rtol 1e-12; the closed form loses ~1e-12 to cancellation
    return CheckResult(ok, r if r != 0 else worst, "0 < z < 1 (below the fixed point)",
                       "symbolic", f"max relative gap to scipy quad over 4 cases: {worst:.2e}")


@claim(
    "sam_shared_radius_fig1",
    "beyond the paper (Figure 1 setting, reduced model of sam_multihead_ansatz_reduction)",
    "At Figure 1's setting (λ ∝ 4:3:2:1, N = 31, anchor scale, η = 0.02, ρ = 1e-3, heads "
    "started at ε = 0.002) global SAM slows feature 1 by > 1.3×, shortens phase 2 (< 0.85×), "
    "leaves phases 3-4 within 1.05×, and raises the entropy of the learning times by > 0.04 "
    "nats, while head-wise SAM slows all features by the same factor (spread < 0.01) with "
    "|ΔH| < 1e-3.",
    approximation=True,
    sizes="d = 4, λ ∝ 4:3:2:1, N = 31, 4 heads (numeric map)",
)
def check_fig1() -> CheckResult:
    """Run the reduced map (exact and first-order, global and head-wise normalization)."""
    f = figure1_ansatz()
    gd = f["gd"]
    h_gd = float(time_entropy(gd))
    lines, ok = [], True
    for key in ("exact/global", "first_order/global", "exact/headwise", "first_order/headwise"):
        t = f[key]
        ratio = t / gd
        phase = np.diff(t, prepend=0.0) / np.diff(gd, prepend=0.0)
        dh = stated(float(time_entropy(t)) - h_gd, "entropy change ΔH")
        lines.append(f"{key}: time ratios {np.round(ratio, 3).tolist()}, phase ratios "
                     f"{np.round(phase, 3).tolist()}, ΔH = {dh:+.4f}")  # fmt: skip
        if key.endswith("global"):
            ok &= ratio[0] > 1.3 and np.all(phase[2:] < 1.05) and phase[1] < 0.85 and dh > 0.04
        else:
            ok &= (ratio.max() - ratio.min()) < 0.01 and abs(dh) < 1e-3
    detail = (f"GD learning steps {gd.astype(int).tolist()}; " + "; ".join(lines)
              + ". Theorem 4.4's first-order eq. 9 gives ×1.49 for every feature and ΔH ≈ "
              "+1.9e-4 (issue 13); the global normalization multiplies the gain by ~250")
    return CheckResult(bool(ok), 0 if ok else detail, "reduced discrete map (exact reduction "
                       "of the full model on the multi-head ansatz), 4 heads, population loss",
                       "numeric", detail)


@claim(
    "sam_learned_head_bounce",
    "beyond the paper (discrete SAM at a learned head on a plateau)",
    "Near a learned head's fixed point (G(v*) = 0, G'(v*) < 0) while another head's gradient "
    "G_e dominates, both SAM forms map x = v − v* to μx with μ = 1 + 2ηG'(v*)(1 − cG'(v*)/|G_e|)"
    "; the fixed point is unstable (the head bounces) iff η|G'|(1 + c|G'|/|G_e|) > 1 — at "
    "Figure 1's setting whenever |G_e| < 5e-4, i.e. on every plateau.",
    sizes="all η, c, G_e > 0, G' < 0 (symbolic); numbers at λ₁ = 0.4, N = 31",
)
def check_bounce() -> CheckResult:
    """Series of the exact and first-order reduced maps in x; the threshold at Figure 1."""
    x, eta, c, ge = sp.symbols("x eta c G_e", positive=True)
    gp = sp.Symbol("gp", negative=True)  # G'(v*)
    gpp = sp.Symbol("gpp", real=True)  # G''(v*)
    G = gp * x + gpp * x**2 / 2  # G(v* + x) to second order
    share = G / sp.sqrt(G**2 + ge**2)
    exact = x + 2 * eta * G.subs(x, x - c * share)
    first = x + 2 * eta * (G - c * share * sp.diff(G, x))
    mu = stated(1 + 2 * eta * gp * (1 - c * gp / ge), "multiplier μ = 1 + 2ηG'(1 − cG'/G_e)")
    r = [sp.simplify(sp.series(m, x, 0, 2).removeO().coeff(x, 1) - mu) for m in (exact, first)]
    zero = [sp.simplify(sp.series(m, x, 0, 2).removeO().coeff(x, 0)) for m in (exact, first)]
    crit = sp.simplify((mu + 1).subs(gp, -sp.Symbol("h", positive=True)))
    lam, n_ctx, s = 0.4, 31, 31.0
    a = lam**2 * (1 + (1 + 1.0 / lam) / n_ctx)
    sig, kap = s * lam**2, s**2 * lam * a
    vs = (sig / kap) ** (1 / 3)
    g1 = 2 * sig * vs - 5 * kap * vs**4
    h, et, cc = abs(g1), 0.02, 1e-3 / math.sqrt(3)
    threshold = cc * h * et * h / (1 - et * h)
    ok = all(x_ == 0 for x_ in r) and all(z == 0 for z in zero) and et * h < 1
    return CheckResult(ok, next((x_ for x_ in r if x_ != 0), 0),
                       "learned head at G(v*) = 0 with G'(v*) < 0; |G_learned| ≪ |G_e| so "
                       "‖G‖ ≈ |G_e|; η|G'| < 1 (GD itself stable)", "symbolic",
                       f"μ + 1 = {crit}; at λ₁ = 0.4, N = 31, anchor scale: G'(v*) = {g1:.3f}, "
                       f"η|G'| = {et * h:.3f} (GD stable) and SAM unstable once |G_e| < "
                       f"{threshold:.2e}; a plateau's escaping head has G_e = σv² ≈ 1e-5. The "
                       "bounce's own gradient then joins ‖G‖ and shrinks the escaping head's "
                       "share further (the escape experiment's SAM escapes faster than the "
                       "noise-free reduced map)")  # fmt: skip
