"""Seed 004, Section 3 and App. D: the head-coupling tensor factorisation, checked.

Claims registered here (``python -m theory`` lists them):

* Proposition 1: under isotropic data (``E[x_i x_j^T] = 1_{i=j} I``) the population loss of
  ``y = sum_k V_k X s_k`` is ``1/2 ||G - P||_F^2 + 1/2 E||xi||^2`` with the *bilinear* tensor
  inner product, checked symbolically (exact Gaussian second moments) and by Monte Carlo with
  Gaussian ``X``; the printed single-sum inner product is an erratum (checked to fail).
* Proposition 1 gradients ``dL/dV_i``, ``dL/dq_i`` (symbolic, numeric fallback).
* Lemma 1 (``(Pi(s) v)_1 >= (Pi(s) v)_j``): an exact sum-of-non-negative-terms identity plus
  random sampling.
* Eq. (9): ``dphi/dt = ||dV||^2 + ||Pi(s) grad_s phi||^2 >= 0`` along the symmetric flow
  (symbolic chain rule, and numerically along an integrated trajectory).
* Theorem 1: the fixed point ``V = (m_1/H) V_1^*, s = s_1^*`` is stationary (Eq. (10)) and
  attracts the symmetric flow from the Eq. (6) region.

All sizes are tiny (``d, T <= 3``) so each check runs in seconds.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from .verify import CheckResult, claim, is_zero, printed_form, record, stated, statement

__all__ = [
    "tensor_loss",
    "population_loss",
    "check_prop1_loss",
    "check_prop1_monte_carlo",
    "check_prop1_gradients",
    "check_single_sum_erratum",
    "check_lemma1",
    "check_phi_nondecreasing",
    "check_theorem1_fixed_point",
]

REF = "seed004"


# ----------------------------------------------------------------------------- builders
def _mats(prefix: str, n: int, d: int) -> list[sp.Matrix]:
    return [sp.Matrix(d, d, lambda i, j, k=k: sp.Symbol(f"{prefix}{k}_{i}{j}", real=True))
            for k in range(n)]  # fmt: skip


def _vecs(prefix: str, n: int, T: int) -> list[sp.Matrix]:
    return [sp.Matrix(T, 1, lambda i, j, k=k: sp.Symbol(f"{prefix}{k}_{i}", real=True))
            for k in range(n)]  # fmt: skip


def _fro(A: sp.Matrix, B: sp.Matrix) -> sp.Expr:
    return sum(A[i] * B[i] for i in range(len(A)))


@statement
def tensor_loss(V, s, Vs, m, ss, *, bilinear: bool = True) -> sp.Expr:
    """``1/2 ||G - P||^2`` with ``G = sum_a m_a Vs_a (x) ss_a``, ``P = sum_k V_k (x) s_k``.

    ``bilinear=False`` uses the single-sum inner product as printed in App. D.
    """
    B = list(V) + list(Vs)
    v = list(s) + list(ss)
    c = [1] * len(V) + [-mi for mi in m]
    if bilinear:
        tot = sum(c[k] * c[l] * _fro(B[k], B[l]) * (v[k].T * v[l])[0]
                  for k in range(len(B)) for l in range(len(B)))  # fmt: skip
    else:
        tot = sum(c[k] ** 2 * _fro(B[k], B[k]) * (v[k].T * v[k])[0] for k in range(len(B)))
    return sp.Rational(1, 2) * tot


def population_loss(V, s, Vs, m, ss, d: int, T: int) -> sp.Expr:
    """``E 1/2 ||sum_k V_k X s_k - sum_a m_a Vs_a X ss_a||^2`` for i.i.d. standard Gaussian ``X``.

    The expectation is exact: the loss is a quadratic form in the entries of ``X``, and
    ``E[X_{ip} X_{jq}] = 1_{i=j, p=q}`` (Assumption 1 as used in the proofs).
    """
    X = sp.Matrix(d, T, lambda i, j: sp.Symbol(f"x_{i}{j}", real=True))
    y = sp.zeros(d, 1)
    for Vk, sk in zip(V, s, strict=True):
        y += Vk * X * sk
    for Vk, mk, sk in zip(Vs, m, ss, strict=True):
        y -= mk * Vk * X * sk
    q = sp.expand(sp.Rational(1, 2) * (y.T * y)[0])
    poly = sp.Poly(q, *list(X))
    out = 0
    for monom, coeff in poly.terms():
        if sum(monom) == 2 and max(monom) == 2:
            out += coeff  # E[x^2] = 1; cross terms and odd terms vanish
        elif sum(monom) == 0:
            out += coeff
    return out


def _numeric_zero(exprs, n_points: int = 3, digits: int = 30, tol: float = 1e-20) -> CheckResult:
    """Evaluate many residual expressions at hash-free seeded random points with mpmath.

    A fast stand-in for :func:`is_zero`'s numeric fallback when there are hundreds of large
    residuals (lambdified once instead of ``subs`` per point).
    """
    import mpmath

    exprs = [sp.sympify(e) for e in exprs]
    syms = sorted(set().union(*(e.free_symbols for e in exprs)), key=lambda x: x.name)
    f = sp.lambdify(syms, exprs, "mpmath")
    rng = np.random.default_rng(12345)
    worst = 0.0
    with mpmath.workdps(digits):
        for _ in range(n_points):
            vals = [mpmath.mpf(float(v)) for v in rng.uniform(0.1, 2.0, len(syms))]
            worst = max(worst, max(float(abs(x)) for x in f(*vals)))
    return CheckResult(worst < tol, worst, method="numeric")


# ----------------------------------------------------------------------------- claims
@claim(
    "seed004_prop1_loss",
    f"{REF}, Proposition 1 (Eq. 8, App. D)",
    "Under Assumption 1, E 1/2||y_theta(X) - y*(X)||^2 = 1/2||G - P||_F^2 (+ 1/2 E||xi||^2), "
    "G = sum m_a V_a* (x) s_a*, P = sum V_k (x) s_k.",
)
def check_prop1_loss() -> CheckResult:
    """Exact Gaussian expectation vs the tensor loss, ``d = T = H = h = 2``, general features."""
    d, T, H, h = 2, 2, 2, 2
    V, Vs = _mats("V", H, d), _mats("W", h, d)
    s, ss = _vecs("s", H, T), _vecs("r", h, T)
    m = sp.symbols("m0:2", positive=True)
    res = is_zero(sp.expand(population_loss(V, s, Vs, m, ss, d, T) - tensor_loss(V, s, Vs, m, ss)),
                  simplify=False)  # fmt: skip
    return CheckResult(
        res.holds,
        res.residual,
        "arbitrary V, s, V*, s*, m (noise term separate: E xi = 0)",
        "symbolic" if res.residual == 0 else res.method,
        "Fixed sizes only: the trace algebra's Gaussian rule is for one vector x ~ N(0, C); "
        "the d×T input X with independent columns contracted with position vectors s ∈ R^T "
        "(E[X s s'ᵀ Xᵀ] = <s, s'> I) is not a node it has, so d and T stay fixed here.",
        sizes="d = T = H = h = 2",
    )


@claim(
    "seed004_prop1_monte_carlo",
    f"{REF}, Proposition 1",
    "Monte Carlo with Gaussian X and noise: the empirical loss matches "
    "1/2||G-P||^2 + 1/2 E||xi||^2.",
)
def check_prop1_monte_carlo(n: int = 200_000, seed: int = 0) -> CheckResult:
    """Sample ``X ~ N(0, I)``, ``xi ~ N(0, sigma^2 I)``; compare within 5 standard errors."""
    rng = np.random.default_rng(seed)
    d, T, H, h, sigma = 4, 5, 3, 3, 0.3
    Q, _ = np.linalg.qr(rng.standard_normal((d * d, h)))
    Vs = Q.T.reshape(h, d, d)
    ms = np.array([2.89, 1.7, 1.0])
    Ss = np.eye(T)[:h]
    V = rng.standard_normal((H, d, d))
    q = rng.standard_normal((H, T))
    S = np.exp(q) / np.exp(q).sum(1, keepdims=True)
    G = np.einsum("a,aij,ap->ijp", ms, Vs, Ss)
    P = np.einsum("kij,kp->ijp", V, S)
    exact = stated(0.5 * ((G - P) ** 2).sum() + 0.5 * d * sigma**2, "½||G − P||² + ½E||ξ||²")
    X = rng.standard_normal((n, d, T))
    W = np.einsum("kij,kp->ijp", V, S) - G  # (d, d, T): y_theta - y* = sum_p W[:, :, p] x_p
    r = np.einsum("ijp,njp->ni", W, X) - sigma * rng.standard_normal((n, d))
    vals = 0.5 * (r**2).sum(1)
    mc, se = float(vals.mean()), float(vals.std() / np.sqrt(n))
    z = abs(mc - exact) / se
    return CheckResult(bool(z < 5), abs(mc - exact), f"sigma={sigma}, Gaussian X", "monte-carlo",
                       f"MC {mc:.5f} +- {se:.5f} vs exact {exact:.5f} ({z:.2f} s.e.)",
                       sizes=f"d = {d}, T = {T}, H = {H}, h = {h}, n = {n}")  # fmt: skip


@claim(
    "seed004_prop1_single_sum_erratum",
    f"{REF}, App. D tensor notation",
    "App. D prints <M, N> = sum_k <B_k, B'_k><v_k, v'_k> (single sum); Proposition 1 needs the "
    "bilinear double sum sum_{k,l}.",
    erratum=True,
)
def check_single_sum_erratum() -> CheckResult:
    """The single-sum norm differs from the population loss; the double sum equals it."""
    d, T = 2, 2
    V, Vs = _mats("V", 2, d), _mats("W", 1, d)
    s, ss = _vecs("s", 2, T), _vecs("r", 1, T)
    m = (sp.Symbol("m0", positive=True),)
    pop = population_loss(V, s, Vs, m, ss, d, T)
    good = is_zero(sp.expand(pop - tensor_loss(V, s, Vs, m, ss)), simplify=False)
    with printed_form("single-sum norm as printed") as pf:
        bad = is_zero(sp.expand(pop - tensor_loss(V, s, Vs, m, ss, bilinear=False)),
                      simplify=False)
    return CheckResult(good.holds and pf.fails, good.residual, "arbitrary V, s, V*, s*, m",
                       "symbolic",
                       "Corrected: <M,N> = sum_{k,l} <B_k,B'_l><v_k,v'_l> (the single sum drops "
                       "cross terms between heads).", sizes="d = T = 2, H = 2, h = 1",
                       printed_residual=bad.residual)  # fmt: skip


@claim(
    "seed004_prop1_gradients",
    f"{REF}, Proposition 1 (gradients)",
    "dL/dV_i = sum_j V_j <s_i,s_j> - sum_j m_j <s_i,s_j*> V_j*; dL/dq_i = Pi(s_i)(sum_j <V_i,V_j> "
    "s_j - sum_j m_j <V_i,V_j*> s_j*), s = softmax(q), Pi(s) = diag(s) - s s^T.",
)
def check_prop1_gradients() -> CheckResult:
    """Differentiate the tensor loss symbolically (``d = T = H = h = 2``) and compare."""
    d, T, H, h = 2, 2, 2, 2
    V, Vs = _mats("V", H, d), _mats("W", h, d)
    qs = _vecs("q", H, T)
    ss = _vecs("r", h, T)
    m = sp.symbols("m0:2", positive=True)
    s = []
    for q in qs:
        e = q.applyfunc(sp.exp)
        s.append(e / sum(e))
    L = tensor_loss(V, s, Vs, m, ss)
    residuals = []
    for i in range(H):
        gV = stated(sum((V[j] * (s[i].T * s[j])[0] for j in range(H)), sp.zeros(d, d)) - sum(
            (m[j] * (s[i].T * ss[j])[0] * Vs[j] for j in range(h)), sp.zeros(d, d)
        ), "∇_V of Prop. 1")
        Pi = sp.diag(*s[i]) - s[i] * s[i].T
        gq = Pi * (
            sum((_fro(V[i], V[j]) * s[j] for j in range(H)), sp.zeros(T, 1))
            - sum((m[j] * _fro(V[i], Vs[j]) * ss[j] for j in range(h)), sp.zeros(T, 1))
        )
        residuals += [sp.diff(L, V[i][a]) - gV[a] for a in range(d * d)]
        residuals += [sp.diff(L, qs[i][p]) - gq[p] for p in range(T)]
    r = _numeric_zero(residuals)
    ok, worst, method = r.holds, r.residual, r.method
    return CheckResult(bool(ok), worst, "arbitrary V*, s*", method, sizes="d = T = H = h = 2")


@claim(
    "seed004_lemma1",
    f"{REF}, Lemma 1 (App. D)",
    "If s is in the simplex with s_1 >= s_j and v_1 >= v_j for all j, then (Pi(s) v)_1 >= "
    "(Pi(s) v)_j.",
)
def check_lemma1(n: int = 20_000, seed: int = 0) -> CheckResult:
    """Exact identity ``(Pi v)_1 - (Pi v)_j = (s_1 - s_j)(v_1 - <s,v>) + s_j (v_1 - v_j)``.

    Every factor is non-negative under the hypotheses (``v_1 = max v >= <s, v>``), so the identity
    proves the lemma; random sampling confirms it numerically.
    """
    T = 3
    s = sp.symbols("s0:3", nonnegative=True)
    v = sp.symbols("v0:3", real=True)
    sv = sum(a * b for a, b in zip(s, v, strict=True))
    Pv = [s[i] * (v[i] - sv) for i in range(T)]
    ident = is_zero(sp.expand(Pv[0] - Pv[1] - stated((s[0] - s[1]) * (v[0] - sv)
                                                     + s[1] * (v[0] - v[1]), "Lemma 1 identity")))
    rng = np.random.default_rng(seed)
    worst = np.inf
    for _ in range(n // 100):
        S = rng.dirichlet(np.ones(6) * rng.uniform(0.1, 3), size=100)
        i = S.argmax(1)
        S[np.arange(100), i], S[:, 0] = S[:, 0].copy(), S[np.arange(100), i].copy()
        Vv = rng.standard_normal((100, 6))
        k = Vv.argmax(1)
        Vv[np.arange(100), k], Vv[:, 0] = Vv[:, 0].copy(), Vv[np.arange(100), k].copy()
        Pi_v = S * (Vv - (S * Vv).sum(1, keepdims=True))
        worst = min(worst, float((Pi_v[:, :1] - Pi_v).min()))
    holds = ident.holds and worst >= -1e-12
    return CheckResult(
        holds,
        ident.residual,
        "s in simplex, argmax s = argmax v = 1",
        "symbolic",
        sizes="identity: T = 3 (it is entrywise, so any T); sampling: T = 6",
        detail=f"identity exact; min (Pi v)_1 - (Pi v)_j over {n} random cases = {worst:.3g}",
    )  # noqa: E501


@claim(
    "seed004_phi_nondecreasing",
    f"{REF}, Theorem 1 proof, Eq. (9)",
    "Along the symmetric flow, phi(V, s) = <V, G s> - (H/2)||V||^2||s||^2 satisfies dphi/dt = "
    "||dV/dt||^2 + ||Pi(s) grad_s phi||^2 >= 0.",
)
def check_phi_nondecreasing() -> CheckResult:
    """Symbolic chain rule in q-coordinates (``h = T = 2``), then a numerical trajectory."""
    H = sp.Symbol("H", positive=True)
    c = sp.symbols("c0:2", real=True)
    q = sp.symbols("q0:2", real=True)
    m = sp.symbols("m0:2", positive=True)
    e = [sp.exp(x) for x in q]
    s = [x / sum(e) for x in e]
    ss = sp.eye(2)  # s_a* = e_a
    Gs = [m[a] * sum(ss[a, p] * s[p] for p in range(2)) for a in range(2)]
    s2 = sum(x**2 for x in s)
    c2 = sum(x**2 for x in c)
    phi = sum(c[a] * Gs[a] for a in range(2)) - H / 2 * c2 * s2
    dc = [Gs[a] - H * s2 * c[a] for a in range(2)]  # = grad_V phi
    grad_s = [sum(m[a] * c[a] * ss[a, p] for a in range(2)) - H * c2 * s[p] for p in range(2)]
    sg = sum(s[p] * grad_s[p] for p in range(2))
    Pi_g = [s[p] * (grad_s[p] - sg) for p in range(2)]
    dq = Pi_g
    dphi = sum(sp.diff(phi, c[a]) * dc[a] for a in range(2)) + sum(
        sp.diff(phi, q[p]) * dq[p] for p in range(2)
    )
    claimed = stated(sum(x**2 for x in dc) + sum(x**2 for x in Pi_g), "dφ/dt = |V̇|² + |Πg|²")
    r = _numeric_zero([dphi - claimed], n_points=6)
    from sims.markov.tensor_dynamics import FlowConfig, solve_symmetric

    rng = np.random.default_rng(0)
    _, _, _, phis = solve_symmetric(FlowConfig(T=10, t_max=1e3, n_eval=400),
                                    s0=rng.dirichlet(np.ones(10)))  # fmt: skip
    worst = float(np.diff(phis).min())
    holds = r.holds and worst > -1e-8
    return CheckResult(
        holds,
        r.residual,
        "symmetric flow, s*_a = e_a",
        r.method,
        sizes="h = T = 2 symbolic (general H, m); T = 10 numeric trajectory",
        detail=f"min phi increment along an integrated trajectory: {worst:.3g}",
    )


@claim(
    "seed004_theorem1_fixed_point",
    f"{REF}, Theorem 1 (Eqs. 6, 7, 10)",
    "With identical heads initialised in the region of Eq. (6), the flow converges to V = "
    "(m_1/H) V_1*, s = s_1*; the loss plateau is 1/2 sum_{a>=2} m_a^2.",
)
def check_theorem1_fixed_point() -> CheckResult:
    """Stationarity of Eq. (10) exactly; convergence numerically from random Eq. (6) inits."""
    H, m1, m2 = sp.symbols("H m1 m2", positive=True)
    # reduced symmetric system at s = e_1 (Pi(s) = 0), c = (m1/H, 0)
    c = [stated(m1 / H, "V = (m_1/H) V_1*"), 0]
    s = [1, 0]
    dc = [m1 * s[0] - H * 1 * c[0], m2 * s[1] - H * 1 * c[1]]
    stat = is_zero(sp.Matrix(dc))
    # the plateau: the loss 1/2 sum_{a,p} (m_a s*_a[p] - sum_i C_ia S_ip)^2 at the fixed point,
    # H identical heads with C_i = (m_1/H) e_1, S_i = e_{p_1}; h = 3 features at p_a = a - 1
    m3 = sp.symbols("m1:4", positive=True)
    Hn = sp.Symbol("H", positive=True, integer=True)
    Cf = [stated(m3[0] / Hn, "V = (m_1/H) V_1*"), 0, 0]
    Sf = [1, 0, 0]
    loss = sp.Rational(1, 2) * sum((m3[a] * (1 if p == a else 0) - Hn * Cf[a] * Sf[p]) ** 2
                                   for a in range(3) for p in range(3))  # fmt: skip
    plateau = stated(sp.Rational(1, 2) * (m3[1] ** 2 + m3[2] ** 2), "plateau 1/2 sum_{a>=2} m_a^2")
    plat = is_zero(loss - plateau, label="loss at the fixed point = plateau")
    from sims.markov.tensor_dynamics import (
        FlowConfig,
        reduced_loss,
        solve_symmetric,
        target_positions,  # fmt: skip
    )

    cfg = FlowConfig(T=6, t_max=1e5, n_eval=50)
    errs, loss_gap = [], []
    rng = np.random.default_rng(1)
    for _ in range(3):
        s0 = rng.dirichlet(np.ones(cfg.T))
        s0[:3] = np.sort(s0[:3])[::-1]
        _, cc, sv, _ = solve_symmetric(cfg, s0=s0)
        target = np.zeros(cfg.h)
        target[0] = stated(cfg.scales[0] / cfg.H, "V = (m_1/H) V_1*")
        errs.append(max(np.abs(cc[-1] - target).max(), 1 - sv[-1, 0]))
        # the flow's own loss at t_max (H identical heads) against the stated plateau
        C = np.tile(cc[-1], (cfg.H, 1))[None]
        S = np.tile(sv[-1], (cfg.H, 1))[None]
        lt = float(reduced_loss(C, S, np.asarray(cfg.scales), target_positions(cfg.h, cfg.T))[0])
        pl = float(plateau.subs({m3[k]: cfg.scales[k] for k in range(3)}))
        loss_gap.append(abs(lt / pl - 1))
    worst = max(errs)
    lg = max(loss_gap)
    num_plat = record("loss of the integrated flow at t = 1e5 = plateau (rel. tol 1e-2)", lg < 1e-2)
    return CheckResult(bool(stat.holds and plat.holds and num_plat and worst < 1e-2), worst,
                       "V(0)=0, s(0) random with s_1 largest among the target positions",
                       "numeric",
                       sizes="stationarity: general H, m; plateau: h = 3, general H, m; "
                       "convergence: h = 3, T = 6, H = 3, m = 1.7, 3 random inits",
                       detail=f"largest |c(t_max) - (m1/H) e_1| or 1 - s_1 at t=1e5: {worst:.2e} "
                       "(approach is algebraic, ~t^-1/2); loss at the fixed point - 1/2 sum_{a>=2} "
                       f"m_a^2 = {sp.simplify(loss - plateau)} (symbolic in H, m); loss of the "
                       f"integrated flow at t = 1e5 vs the plateau: max rel. dev. {lg:.1e} "
                       "(tol 1e-2)")  # fmt: skip
