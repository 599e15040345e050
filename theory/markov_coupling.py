r"""Seed 004, Theorem 2 and beyond: why the heads decouple after a time ~ log^2(1/eps).

Theorem 2 bounds how fast heads initialised ``eps`` apart drift apart (``eps e^{c t}``); read
naively, the competitive phase would last ``Theta(log 1/eps)``. The measured decoupling times of the
Fig. 10 flow do not follow that: ``32, 308, 820, 1564, 2526`` for ``eps = 1e-4 ... 1e-12`` (T = 40,
H = h = 3, m = 1.7), i.e. ``sqrt(t_c)`` is linear in ``log(1/eps)``. The mechanism, derived here:

1. **Neutral mode.** The reduced flow (:func:`sims.markov.tensor_dynamics.reduced_rhs`) is
   equivariant under permutations of the heads, so about a symmetric state its linearisation splits
   into the symmetric sector and ``H - 1`` copies of an *asymmetric* block acting on
   ``delta_k = u_k (gamma, eta)``, ``sum_k u_k = 0``. In that block the restoring term
   ``-sum_j <s_j, s_j> C_j`` of ``dC`` only sees ``sum_k delta_k = 0``: there is no
   ``-H ||s||^2 gamma`` damping, and at Theorem 1's fixed point ``s = e_{p_1}``,
   ``c = (m_1/H) e_1`` (where ``Pi(s) = 0``) the whole asymmetric block vanishes. The symmetric
   sector keeps the damping ``-H``.
2. **Algebraic approach.** Along the symmetric trajectory ``c`` is slaved to
   ``c_a = m_a s_{p_a} / (H ||s||^2)`` and, with ``s_{p_1} = 1 - sum_r s_r``,

   .. math:: \dot s_r = -s_r\,(\kappa_r s_r^2 + \textstyle\sum_{r'} \kappa_{r'} s_{r'}^2) + O(s^4),
      \qquad \kappa_{p_a} = (m_1^2 - m_a^2)/H,\ \kappa_{\rm other} = m_1^2/H,

   a cubic decay, so ``s_r ~ a_r t^{-1/2}`` with ``kappa_r a_r^2 = 1/(2T)`` (all ``T - 1``
   off-target positions share ``K = 1/(2T)``; the ratios relax only as ``t^{-1/T}``).
3. **Slow growth.** To first order in ``s`` the asymmetric block closes on ``(gamma_a,
   eta_{p_a} - eta_{p_1})``, ``a >= 2``: ``dgamma = D eta``, ``deta = (D + 1 u^T) gamma`` with
   ``u_a = m_a s_{p_a}`` and ``D = diag(u)``, so the growth rate is
   ``lambda = sqrt(lambda_max(D^2 + u u^T)) = beta / sqrt(t)`` with

   .. math:: \beta^2 = \frac{H}{2T}\,\lambda_{\max}\big(\mathrm{diag}(r)
      + \sqrt r\sqrt r^{\,T}\big), \qquad r_a = \frac{m_a^2}{m_1^2 - m_a^2}\ (a \ge 2),

   independent of ``b0`` (``beta = 0.2069`` at T = 40, ``0.2926`` at T = 20, m = 1.7, H = 3).
4. **Coupling time.** The asymmetry grows as ``exp(int lambda dt) = exp(2 beta sqrt t)``, so it
   reaches an O(1) threshold at

   .. math:: t_c \approx \frac{(\log(1/\epsilon) + b)^2}{4\beta^2},

   a ``log^2(1/eps)`` law with leading constant ``1/(4 beta^2)`` (5.84 at T = 40); ``b`` collects
   the growth during stage 1 and the threshold. This does not contradict Theorem 2 (a bound), but
   the coupling time is not ``Theta(log 1/eps)``.

Claims registered here check each step symbolically (``T = 3, 4``) and against the integrated flow.
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp

from .verify import CheckResult, claim, is_zero, record, stated, statement

__all__ = [
    "coupling_beta",
    "coupling_time_law",
    "approach_amplitudes",
    "antisymmetric_block",
    "check_coupling_neutral_mode",
    "check_symmetric_approach",
    "check_coupling_growth_rate",
    "check_coupling_time_log2",
    "check_coupling_time_log_reading",
]

REF = "seed004"
#: Perturbation stds of the decoupling-time checks (Fig. 10 init, T = 40).
EPS = (1e-6, 1e-8, 1e-10, 1e-12)


# ----------------------------------------------------------------------------- closed forms
@statement
def approach_amplitudes(mstar, H: int, T: int) -> np.ndarray:
    """``a_p`` of ``s_p ~ a_p t^{-1/2}`` for the ``h - 1`` secondary targets, then the others.

    ``kappa_p a_p^2 = 1/(2T)``; returns ``(a_{p_2}, ..., a_{p_h}, a_other)``.
    """
    m = np.asarray(mstar, float)
    kappa = np.append((m[0] ** 2 - m[1:] ** 2) / H, m[0] ** 2 / H)
    if np.any(kappa <= 0):
        raise ValueError(f"need m_1 > m_a for a >= 2 (distinct plateaus); got mstar={m.tolist()}.")
    return np.sqrt(1.0 / (2 * T * kappa))


@statement
def coupling_beta(mstar, H: int, T: int) -> float:
    """``beta`` of the asymmetric growth rate ``lambda(t) = beta / sqrt(t)`` (step 3)."""
    m = np.asarray(mstar, float)
    if m.size < 2:
        raise ValueError("need at least two features (h >= 2) for a secondary pattern.")
    if not (isinstance(H, int) and H >= 2 and isinstance(T, int) and T >= m.size):
        raise ValueError(f"need H >= 2 and T >= h; got H={H!r}, T={T!r}.")
    u = m[1:] * approach_amplitudes(m, H, T)[:-1]  # u_a sqrt(t)
    return float(np.sqrt(np.linalg.eigvalsh(np.diag(u**2) + np.outer(u, u)).max()))


@statement
def coupling_time_law(eps, mstar, H: int, T: int, b: float = 0.0) -> np.ndarray:
    """``t_c = (log(1/eps) + b)^2 / (4 beta^2)`` (step 4)."""
    beta = coupling_beta(mstar, H, T)
    return (np.log(1.0 / np.asarray(eps, float)) + b) ** 2 / (4 * beta**2)


# ----------------------------------------------------------------------------- symbolic model
def _pi(s: sp.Matrix, v: sp.Matrix) -> sp.Matrix:
    """``Pi(s) v = s * v - s <s, v>``."""
    sv = (s.T * v)[0]
    return sp.Matrix([s[p] * (v[p] - sv) for p in range(len(s))])


def _head_rhs(i: int, C: list, S: list, m, h: int) -> tuple[sp.Matrix, sp.Matrix]:
    """``(dC_i, dq_i)`` of the reduced flow, targets at positions ``0..h-1`` (s-coordinates)."""
    T = len(S[0])
    H = len(C)
    dC = sp.Matrix([m[a] * S[i][a] - sum((S[i].T * S[j])[0] * C[j][a] for j in range(H))
                    for a in range(h)])  # fmt: skip
    g = sp.Matrix([(m[p] * C[i][p] if p < h else 0) for p in range(T)])
    for j in range(H):
        g -= (C[i].T * C[j])[0] * S[j]
    return dC, _pi(S[i], g)


def antisymmetric_block(c: sp.Matrix, s: sp.Matrix, m, H: int, gamma: sp.Matrix,
                        eta: sp.Matrix) -> sp.Matrix:  # fmt: skip
    """Linearised head-0 velocity for the perturbation ``u (gamma, eta)``, ``u = (1, -1, 0..)``.

    ``eta`` perturbs the logits ``q``, so ``s`` moves by ``Pi(s) eta``. Returns the stacked
    ``(dgamma, deta)`` (exact derivative at the symmetric state ``(c, s)``).
    """
    d = sp.Symbol("delta_lin")
    u = [1, -1] + [0] * (H - 2)
    ds = _pi(s, eta)
    C = [c + u[k] * d * gamma for k in range(H)]
    S = [s + u[k] * d * ds for k in range(H)]
    dC, dq = _head_rhs(0, C, S, m, len(c))
    out = sp.Matrix.vstack(dC, dq)
    return out.diff(d).subs(d, 0)


def _symbols(h: int, T: int):
    m = sp.symbols(f"m1:{h + 1}", positive=True)
    gamma = sp.Matrix(sp.symbols(f"gamma1:{h + 1}", real=True))
    eta = sp.Matrix(sp.symbols(f"eta1:{T + 1}", real=True))
    return m, gamma, eta


# ----------------------------------------------------------------------------- claims
@claim(
    "seed004_coupling_neutral_mode",
    f"{REF}, Theorem 1 fixed point (Eq. 7) and Theorem 2 (derived here)",
    "At the fixed point s = s_1*, V = (m_1/H) V_1* of the symmetric flow, the linearised flow of "
    "head differences (sum_k delta_k = 0) vanishes identically (a neutral mode), while the "
    "symmetric sector keeps the damping -H ||s||^2 of V.",
)
def check_coupling_neutral_mode() -> CheckResult:
    """Exact linearisation (``h = 2, T = 3``; ``H = 2`` and ``H = 3``) at the fixed point."""
    h, T = 2, 3
    m, gamma, eta = _symbols(h, T)
    res = []
    for H in (2, 3):
        c = sp.Matrix([m[0] / H, 0])
        s = sp.Matrix([1, 0, 0])
        res.append(is_zero(antisymmetric_block(c, s, m, H, gamma, eta), simplify=False))
        # symmetric sector: all heads move together; dC picks up -H ||s||^2 gamma = -H gamma
        d = sp.Symbol("d")
        C = [c + d * gamma for _ in range(H)]
        dC = _head_rhs(0, C, [s] * H, m, h)[0].diff(d).subs(d, 0)
        res.append(is_zero(dC + stated(H * gamma, "symmetric damping −H||s||²γ"), simplify=False))
    # away from the fixed point the asymmetric block has no -H||s||^2 gamma term
    cs = sp.Matrix(sp.symbols("c1:3", real=True))
    ss = sp.Matrix(sp.symbols("s1:4", positive=True))
    H = 3
    blk = antisymmetric_block(cs, ss, m, H, gamma, sp.zeros(T, 1))
    res.append(is_zero(blk[:h, :] - sp.zeros(h, 1), simplify=False))  # gamma alone: no dgamma
    holds = all(r.holds for r in res)
    return CheckResult(holds, max((r.residual for r in res), key=lambda x: abs(sp.N(x))),
                       "targets at positions 1..h; general m", _ran(res),
                       sizes="h = 2, T = 3, H = 2 and 3",
                       detail="asymmetric block at the fixed point = 0; symmetric V-block = -H I; "
                       "the asymmetric dgamma has no gamma term anywhere (neutral)")  # fmt: skip


def _ran(results) -> str:
    """What the zero tests actually ran: "symbolic", or "numeric" where any fell back."""
    return "symbolic" if all(r.method == "symbolic" for r in results) else "numeric"


def _taylor(expr: sp.Expr, x: sp.Symbol, n: int) -> sp.Expr:
    """Taylor polynomial of a rational function of ``x`` to order ``n - 1`` (series division).

    Much faster than ``sympy.series`` when the coefficients are numbers.
    """
    num, den = sp.fraction(sp.together(expr))
    N = sp.Poly(sp.expand(num), x).all_coeffs()[::-1]
    D = sp.Poly(sp.expand(den), x).all_coeffs()[::-1]
    N += [0] * n
    D += [0] * n
    if D[0] == 0:
        raise ValueError("the denominator vanishes at x = 0; no Taylor series.")
    out = []
    for k in range(n):
        out.append(sp.expand((N[k] - sum(out[j] * D[k - j] for j in range(k))) / D[0]))
    return sum(c * x**k for k, c in enumerate(out))


def _near_fixed_point(m, H: int, h: int, T: int):
    """Symmetric state ``s = (1 - e sum a, e a_2, ..), c = c*(s)`` and its symbols."""
    e = sp.Symbol("epsilon", positive=True)
    a = sp.symbols(f"a2:{T + 1}", positive=True)
    s = sp.Matrix([1 - e * sum(a)] + [e * x for x in a])
    s2 = (s.T * s)[0]
    c = sp.Matrix([m[k] * s[k] / (H * s2) for k in range(h)])  # slaved values, dc = 0
    return e, a, s, c


@claim(
    "seed004_symmetric_approach",
    f"{REF}, Theorem 1 (rate of convergence; derived here)",
    "Near the fixed point the symmetric flow (c slaved) obeys ds_r/dt = -s_r (kappa_r s_r^2 + "
    "sum_r' kappa_r' s_r'^2) + O(s^4), kappa = (m_1^2 - m_a^2)/H on targets and m_1^2/H "
    "elsewhere, so s_r ~ a_r t^(-1/2) with kappa_r a_r^2 = 1/(2T): an algebraic approach.",
)
def check_symmetric_approach() -> CheckResult:
    """Series of ``ds/dt`` in the distance ``epsilon`` (h = 3, T = 4), then the trajectory.

    The series is exact in rational arithmetic at seeded random rational ``(m, H, a)`` (a general
    symbolic series of this rational function takes minutes).
    """
    h, T = 3, 4
    rng = np.random.default_rng(4)
    resid = []
    for _ in range(3):
        m1, m2, m3 = sorted((sp.Rational(int(x), 7) for x in rng.integers(5, 40, 3)),
                            reverse=True)  # fmt: skip
        m, H = (m1, m2, m3), sp.Integer(int(rng.integers(2, 5)))
        e, a, s, c = _near_fixed_point(m, H, h, T)
        a_val = {x: sp.Rational(int(v), 5) for x, v in zip(a, rng.integers(1, 10, T - 1),
                                                            strict=True)}  # fmt: skip
        s, c = s.subs(a_val), c.subs(a_val)
        g = sp.Matrix([m[p] * c[p] if p < h else 0 for p in range(T)]) - H * (c.T * c)[0] * s
        sdot = _pi(s, _pi(s, g))  # ds = Pi(s)^2 g in s-space (Eq. 5)
        kappa = [(m[0] ** 2 - m[k] ** 2) / H for k in range(1, h)] + [m[0] ** 2 / H]
        av = [a_val[x] for x in a]
        tot = sum(kp * x**2 for kp, x in zip(kappa, av, strict=True))
        for r in range(1, T):
            ser = _taylor(sdot[r], e, 4)
            resid.append(sp.expand(ser + e**3 * av[r - 1] * (kappa[r - 1] * av[r - 1] ** 2 + tot)))
    sym = is_zero(sp.Matrix(resid), simplify=False)
    # the ansatz a_r^2 = 1/(2 T kappa_r) solves -a/2 = -a (kappa a^2 + sum kappa a^2)
    Ts = sp.Symbol("T", positive=True)
    K = 1 / (2 * Ts)
    ans = is_zero(sp.Rational(1, 2) - (K + (Ts - 1) * K))
    # numerically: exponent -1/2 and amplitudes along the integrated symmetric flow (T = 40)
    from sims.markov.tensor_dynamics import FlowConfig, solve_symmetric

    cfg = FlowConfig(T=40, t_max=1e5, n_eval=60)
    t, _, sv, _ = solve_symmetric(cfg)
    sel = (t >= 1e3) & (t <= 1e5)
    slope = float(np.polyfit(np.log(t[sel]), np.log(sv[sel, 1]), 1)[0])
    amp = sv[-1, [1, 2, 5]] * np.sqrt(t[-1])
    pred_amp = approach_amplitudes(cfg.scales, cfg.H, cfg.T)
    rel = float(np.abs(amp / pred_amp - 1).max())
    holds = sym.holds and ans.holds and abs(slope + 0.5) < 0.03 and rel < 0.15
    return CheckResult(holds, sym.residual, "c slaved to its fixed point given s",
                       _ran([sym, ans]) + " (exact series at 3 random rational points)",
                       sizes="series: h = 3, T = 4, random rational m, H in 2..4, a; trajectory: "
                       "T = 40, H = h = 3, m = 1.7, b0 = 1",
                       detail=f"log-log slope of s_2(t) over t in [1e3, 1e5]: {slope:.3f}; "
                       f"s_r sqrt(t) at t=1e5 {np.round(amp, 4).tolist()} vs a_r "
                       f"{np.round(pred_amp, 4).tolist()} (max rel. dev. {rel:.2f}; the ratios "
                       "relax only as t^(-1/T))")  # fmt: skip


@claim(
    "seed004_coupling_growth_rate",
    f"{REF}, Theorem 2 (derived here)",
    "To first order in the distance to the fixed point, head differences (gamma_a, eta_{p_a} - "
    "eta_{p_1}), a >= 2, obey dgamma = D eta, deta = (D + 1 u^T) gamma with u_a = m_a s_{p_a}, "
    "D = diag(u): growth rate lambda = sqrt(lambda_max(D^2 + u u^T)) = beta / sqrt(t).",
)
def check_coupling_growth_rate() -> CheckResult:
    """First-order expansion of the asymmetric block (h = 3, T = 4, H = 2), then the flow."""
    h, T, H = 3, 4, 2
    m, gamma, eta = _symbols(h, T)
    e, a, s, c = _near_fixed_point(m, H, h, T)
    blk = antisymmetric_block(c, s, m, H, gamma, eta)
    J1 = blk.diff(e).subs(e, 0)  # J(0) = 0 (neutral mode)
    u = [m[k] * a[k - 1] for k in range(1, h)]  # u_a / epsilon
    eta_t = [eta[p] - eta[0] for p in range(T)]
    pred_g = [0] + [u[k - 1] * eta_t[k] for k in range(1, h)]
    pred_e = [u[p - 1] * gamma[p] if 1 <= p < h else 0 for p in range(T)]
    coupling = sum(u[k - 1] * gamma[k] for k in range(1, h))
    resid = [J1[k] - pred_g[k] for k in range(h)]
    resid += [(J1[h + p] - J1[h]) - (pred_e[p] + coupling) for p in range(1, T)]
    sym = is_zero(sp.Matrix([sp.simplify(r) for r in resid]), simplify=False)
    zero0 = is_zero(blk.subs(e, 0), simplify=False)
    # the growth rate of that block: [[0, D], [D + 1u^T, 0]]^2 has D(D + 1u^T) = D^2 + uu^T
    us = sp.symbols("u2:4", positive=True)
    Dm, one = sp.diag(*us), sp.ones(2, 1)
    M = sp.BlockMatrix([[sp.zeros(2), Dm], [Dm + one * sp.Matrix([us]), sp.zeros(2)]])
    M = sp.Matrix(M)
    square = is_zero((M * M)[:2, :2] - (Dm**2 + sp.Matrix(us) * sp.Matrix([us])),
                     label="rate^2 = eigenvalues of D^2 + uu^T")  # fmt: skip
    # beta: u_a sqrt(t) -> m_a a_a with kappa_a a_a^2 = 1/(2T) gives
    # (H/2T)(diag(r) + sqrt r sqrt r^T)
    Hs, Ts = sp.symbols("H T", positive=True)
    amp2 = [Hs / (2 * Ts * (m[0] ** 2 - m[k] ** 2)) for k in (1, 2)]
    uu = sp.Matrix([m[k] * sp.sqrt(amp2[k - 1]) for k in (1, 2)])
    r = [m[k] ** 2 / (m[0] ** 2 - m[k] ** 2) for k in (1, 2)]
    sr = sp.Matrix([sp.sqrt(x) for x in r])
    beta_form = is_zero(sp.diag(*[x**2 for x in uu]) + uu * uu.T
                        - Hs / (2 * Ts) * (sp.diag(*r) + sr * sr.T),
                        label="beta^2 = (H/2T) lambda_max(diag(r) + sqrt r sqrt r^T)")  # fmt: skip
    # coupling_beta (the stated beta) against that closed form, exactly, at several settings
    beta_dev = 0.0
    for scales, H_, T_ in (((1.7, 1.0, 1 / 1.7), 3, 40), ((1.7, 1.0, 1 / 1.7), 3, 10),
                           ((2.0, 1.5, 0.5), 2, 7)):
        mm = [sp.nsimplify(x) for x in scales]
        rr = [mm[k] ** 2 / (mm[0] ** 2 - mm[k] ** 2) for k in (1, 2)]
        srr = sp.Matrix([sp.sqrt(x) for x in rr])
        mat = sp.Rational(H_, 2 * T_) * (sp.diag(*rr) + srr * srr.T)
        exact = sp.sqrt(max(mat.eigenvals(), key=lambda v: sp.N(v, 40)))
        got = coupling_beta(scales, H_, T_)
        beta_dev = max(beta_dev, abs(float(sp.N(got / exact - 1, 30))))
    beta_ok = record("coupling_beta equals the closed form (rel. tol 1e-9)", beta_dev < 1e-9)
    # numerically: the exact asymmetric Jacobian's top eigenvalue along the symmetric flow against
    # the first-order rate sqrt(lambda_max(D^2 + uu^T)) with the measured u_a = m_a s_{p_a}(t); the
    # deviation is O(s) (second order), so late times resolve it far below the tolerance
    from sims.markov.tensor_dynamics import (
        FlowConfig,
        antisymmetric_jacobian,
        solve_symmetric,
        target_positions,  # fmt: skip
    )

    tol = 1e-2
    rows, devs, asym = [], [], []
    for T_ in (40, 10):
        cfg = FlowConfig(T=T_, t_max=1e7, t_min=1e6, n_eval=2)
        tt, cc, sv, _ = solve_symmetric(cfg)
        beta = coupling_beta(cfg.scales, cfg.H, cfg.T)
        mm = np.asarray(cfg.scales)
        for i in range(1, len(tt)):
            q = np.log(sv[i]) - np.log(sv[i]).mean()
            J = antisymmetric_jacobian(cc[i], q, cfg.scales, target_positions(cfg.h, cfg.T),
                                       cfg.H)  # fmt: skip
            lam = float(np.linalg.eigvals(J).real.max())
            u_t = mm[1:] * sv[i][1:cfg.h]
            pred = float(np.sqrt(np.linalg.eigvalsh(np.diag(u_t**2) + np.outer(u_t, u_t)).max()))
            devs.append(abs(lam / pred - 1))
            asym.append(lam * np.sqrt(tt[i]) / beta - 1)
            rows.append(f"T = {T_}, t = {tt[i]:.0e}: {lam / pred - 1:+.1e}")
    rel = max(devs)
    num_ok = record(f"exact Jacobian rate = first-order rate (tol {tol:g})", rel < tol)
    holds = sym.holds and zero0.holds and square.holds and beta_form.holds and beta_ok and num_ok
    return CheckResult(holds, sym.residual, "first order in the distance to the fixed point",
                       _ran([sym, zero0, square, beta_form]) + " + numeric Jacobian",
                       sizes="symbolic: h = 3, T = 4, H = 2, general m, a (block); h = 3, general "
                       "m, H, T (rate and beta); numeric: T = 40 and 10, H = h = 3, m = 1.7, "
                       "t = 1e6, 1e7",
                       detail="coupling_beta vs the closed form (H/2T) lambda_max(diag(r) + "
                       "sqrt r sqrt r^T), exact eigenvalues at 3 settings: max rel. dev. "
                       f"{beta_dev:.1e} (tol 1e-9); exact asymmetric Jacobian's top eigenvalue / "
                       f"first-order rate with the measured s(t) - 1: {'; '.join(rows)} (max "
                       f"{rel:.1e}, tol {tol:g}: O(s), shrinking with t). Information, not "
                       "used: sqrt(t) lambda / beta - 1 = "
                       f"{', '.join(f'{x:+.3f}' for x in asym)}, because the amplitudes "
                       "s_r sqrt(t) reach a_r only as t^(-1/T) (seed004_symmetric_approach)")


@functools.lru_cache(maxsize=2)
def _measured(T: int = 40):
    from sims.markov.tensor_dynamics import FlowConfig, coupling_times

    cfg = FlowConfig(T=T, t_max=4e3, n_eval=1500)
    return cfg, coupling_times(cfg, EPS)


@claim(
    "seed004_coupling_time_log2",
    f"{REF}, Theorem 2 / Fig. 10 coupling time (derived here, not in the paper)",
    "Heads initialised eps apart decouple at t_c ~ (log(1/eps) + b)^2 / (4 beta^2), beta^2 = "
    "(H/2T) lambda_max(diag(r) + sqrt(r) sqrt(r)^T), r_a = m_a^2/(m_1^2 - m_a^2): sqrt(t_c) is "
    "linear in log(1/eps) with slope 1/(2 beta).",
)
def check_coupling_time_log2() -> CheckResult:
    """Measured decoupling times of the Fig. 10 flow (T = 40) vs the law's slope 1/(2 beta)."""
    cfg, tc = _measured()
    L = np.log(1.0 / np.asarray(EPS))
    slope = np.polyfit(L, np.sqrt(tc), 1)[0]
    beta = coupling_beta(cfg.scales, cfg.H, cfg.T)
    rel = abs(slope * 2 * beta - 1)
    b = float(np.mean(2 * beta * np.sqrt(tc) - L))  # the one fitted constant, slope fixed
    law = coupling_time_law(EPS, cfg.scales, cfg.H, cfg.T, b=b)
    fit = float(np.abs(law / tc - 1).max())
    return CheckResult(bool(rel < 0.05 and fit < 0.05), rel,
                       f"LSODA rtol {cfg.rtol:g}; decoupling = max_k ||s_k - mean s|| > 0.1",
                       "numeric (integrated flow vs the law)",
                       sizes=f"T = {cfg.T}, H = h = 3, m = 1.7, b0 = 1, seed 0, "
                       f"eps = {', '.join(f'{e:g}' for e in EPS)}",
                       detail=f"t_c = {np.round(tc, 1).tolist()} at eps = {list(EPS)}; slope of "
                       f"sqrt(t_c) vs log(1/eps) {slope:.3f} vs 1/(2 beta) = {1 / (2 * beta):.3f}"
                       f" (rel. dev. {rel:.3f}); leading constant 1/(4 beta^2) = "
                       f"{1 / (4 * beta**2):.2f}, b = {b:.2f}; law within {fit:.1%} of every "
                       "measured time")  # fmt: skip


@claim(
    "seed004_coupling_time_log_reading",
    "beyond the papers (ours: our digest's reading of seed004 Theorem 2, sec. 4.6; not the "
    "paper's claim): coupling time Theta(log 1/eps)",
    "Reading of Theorem 2: the competitive phase (heads coupled) lasts a time proportional to "
    "log(1/eps).",
       failure="ours",
       why="our digest's reading of Theorem 2 (a Θ(log 1/ε) coupling duration); the theorem "
           "bounds a window and is not contradicted.")
def check_coupling_time_log_reading() -> CheckResult:
    """``t_c / log(1/eps)`` would be constant; it grows with ``log(1/eps)`` (log^2 law instead)."""
    cfg, tc = _measured()
    L = np.log(1.0 / np.asarray(EPS))
    ratio = tc / L
    spread = float(ratio.max() / ratio.min())
    return CheckResult(bool(spread < 1.5), spread, "holds if t_c / log(1/eps) varies < 1.5x",
                       "numeric (integrated flow)",
                       sizes=f"T = {cfg.T}, H = h = 3, m = 1.7, b0 = 1, seed 0, "
                       f"eps = {', '.join(f'{e:g}' for e in EPS)}",
                       detail=f"t_c / log(1/eps) = {np.round(ratio, 1).tolist()} for eps = "
                       f"{list(EPS)} (x{spread:.2f}, not constant). Theorem 2 itself is only an "
                       "upper bound eps e^(c t) and is not contradicted; the coupling time follows "
                       "(log(1/eps) + b)^2/(4 beta^2) (seed004_coupling_time_log2)")  # fmt: skip
