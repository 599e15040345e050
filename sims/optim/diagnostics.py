r"""Sharpness diagnostics of seed 003: τ fractions, λ_max, Hutchinson traces, logit statistics.

Everything works on a **logit model**: ``logits_fn(params) -> Z`` (a pure function of a dict of
parameter tensors, e.g. from :func:`functionalize`) and ``loss_fn(Z) -> L`` (e.g.
:func:`cross_entropy_loss`). With ``J = ∂Z/∂θ``, ``r = ∂L/∂Z`` and ``H_out = ∂²L/∂Z²``, the loss
Hessian splits (seed 003 eq. 8) into the Gauss–Newton part and the functional Hessian,

.. math::

    H_L = H_G + H_F, \qquad H_G = J^\top H_\text{out} J, \qquad
    H_F = \textstyle\sum_{i,k} r_{ik}\, \nabla^2_θ Z_{ik},

and the sharpness gradient ``H_L ε*`` (``ε* = g/‖g‖``) into ``δ_logit = H_G ε*`` and
``δ_func = H_F ε*``, whose shares of ``‖H_L ε*‖²`` are the τ fractions (eq. 9):
``τ_logit = ‖δ_logit‖²/‖H_L ε*‖²``, ``τ_func = ‖δ_func‖²/‖H_L ε*‖²``,
``τ_cross = 2⟨δ_logit, δ_func⟩/‖H_L ε*‖²``; they sum to 1.

All products are exact: JVPs/VJPs through the model and forward-over-reverse HVPs, one vector at
a time. (Not ``torch.func.hessian``/``vmap``: functorch's batching rule for layer-norm's double
backward gives wrong mixed second derivatives in torch 2.13, pytorch/functorch#534; the
per-vector products used here are exact.) The model must support forward-mode AD: use explicit
("eager"/"math") attention, not ``scaled_dot_product_attention``.

Functions: :func:`functionalize`, :func:`cross_entropy_loss`, :func:`tau_fractions`,
:func:`hvp`, :func:`ggn_quadratic`, :func:`lanczos`, :func:`power_iteration`,
:func:`lambda_max`, :func:`hutchinson`, :func:`hessian_traces`, :func:`logit_statistics`,
:func:`cosine_similarity`.

Examples:
    >>> import torch
    >>> lin = torch.nn.Linear(3, 4, bias=False).double()  # logits linear in θ: H_F = 0
    >>> x, y = torch.randn(8, 3, dtype=torch.float64), torch.randint(0, 4, (8,))
    >>> params, logits_fn = functionalize(lin, x)
    >>> tau = tau_fractions(logits_fn, cross_entropy_loss(y), params)
    >>> round(tau.tau_logit, 12), round(tau.tau_func, 12), round(tau.tau_cross, 12)
    (1.0, 0.0, 0.0)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.func import functional_call, grad, jvp, vjp

from .torch_sam import cosine_similarity

__all__ = [
    "functionalize",
    "cross_entropy_loss",
    "TauResult",
    "tau_fractions",
    "hvp",
    "ggn_quadratic",
    "lanczos",
    "power_iteration",
    "lambda_max",
    "hutchinson",
    "hessian_traces",
    "logit_statistics",
    "cosine_similarity",
]

Params = dict[str, torch.Tensor]


# ---------------------------------------------------------------------------------- tree helpers
def _dot(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> float:
    return float(sum(torch.vdot(a[k].detach().flatten(), b[k].detach().flatten()) for k in a))


def _norm(a: Mapping[str, torch.Tensor]) -> float:
    return math.sqrt(max(_dot(a, a), 0.0))


def _scale(a: Mapping[str, torch.Tensor], c: float) -> Params:
    return {k: v * c for k, v in a.items()}


def _flatten(a: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([v.flatten() for v in a.values()])


def _unflatten(v: torch.Tensor, like: Mapping[str, torch.Tensor]) -> Params:
    out, i = {}, 0
    for k, t in like.items():
        out[k] = v[i : i + t.numel()].view_as(t).to(t.dtype)
        i += t.numel()
    return out


# ---------------------------------------------------------------------------------- logit model
def functionalize(
    model: torch.nn.Module, *args: Any, trainable_only: bool = True, **kwargs: Any
) -> tuple[Params, Callable[[Params], torch.Tensor]]:
    """``(params, logits_fn)`` for ``model`` on fixed inputs.

    ``logits_fn(p)`` runs ``model(*args, **kwargs)`` with the parameters ``p`` substituted
    (``torch.func.functional_call``; tied weights stay tied) and returns the logits (the
    ``.logits`` of a Hugging Face output). ``params`` are detached copies of the trainable
    parameters (all parameters with ``trainable_only=False``), e.g. only LoRA adapters for PEFT.
    """
    params = {
        n: p.detach().clone()
        for n, p in model.named_parameters()
        if p.requires_grad or not trainable_only
    }
    if not params:
        raise ValueError(
            "`model` has no trainable parameters: the diagnostics differentiate with respect "
            "to them; pass trainable_only=False or unfreeze some."
        )

    def logits_fn(p: Params) -> torch.Tensor:
        out = functional_call(model, p, args, kwargs, tie_weights=True, strict=False)
        return out if isinstance(out, torch.Tensor) else out["logits"]

    return params, logits_fn


def cross_entropy_loss(
    targets: torch.Tensor, *, ignore_index: int = -100
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``Z ↦`` mean token cross-entropy over targets ``!= ignore_index`` (the LM loss).

    ``Z`` has shape ``(..., V)`` and ``targets`` the leading shape ``(...)``; no shift is done
    (give next-token targets).
    """

    def loss_fn(logits: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
        )

    return loss_fn


# ---------------------------------------------------------------------------------- τ fractions
@dataclasses.dataclass(frozen=True)
class TauResult:
    """Split of the sharpness gradient ``H_L ε*`` (seed 003 eq. 9).

    Attributes:
        tau_logit, tau_func, tau_cross: the fractions (sum to 1).
        loss: ``L(θ)``.
        grad_norm: ``‖g‖``.
        sharpness_grad_norm: ``‖H_L ε*‖``.
        curvature: ``ε*ᵀ H_L ε*`` (the curvature along the gradient).
        check_residual: ``‖δ_logit + δ_func − H_L ε*‖/‖H_L ε*‖`` with ``H_L ε*`` from an
            independent HVP of the loss (``nan`` when not checked).
    """

    tau_logit: float
    tau_func: float
    tau_cross: float
    loss: float
    grad_norm: float
    sharpness_grad_norm: float
    curvature: float
    check_residual: float = float("nan")

    def as_dict(self) -> dict[str, float]:
        """The fields as a dict."""
        return dataclasses.asdict(self)


def hvp(f: Callable[[Params], torch.Tensor], params: Params, v: Params) -> Params:
    """Exact Hessian-vector product ``∇²f(θ) v`` (forward-over-reverse)."""
    return jvp(grad(f), (params,), (v,))[1]


def tau_fractions(
    logits_fn: Callable[[Params], torch.Tensor],
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    params: Params,
    *,
    check: bool = False,
) -> TauResult:
    """τ_logit, τ_func, τ_cross of the sharpness gradient at ``params`` (seed 003 eq. 9).

    ``δ_logit = Jᵀ H_out J ε*`` (JVP, output HVP, VJP) and ``δ_func`` = the HVP of the
    surrogate ``θ ↦ ⟨stopgrad(r), Z(θ)⟩`` along ``ε*``. Costs about 1 gradient + 1 JVP + 1 VJP +
    1 HVP (``check=True`` adds one HVP of the loss to verify ``δ_logit + δ_func = H_L ε*``).

    Args:
        logits_fn: ``params -> logits``.
        loss_fn: ``logits -> scalar loss``.
        params: the point ``θ``.
        check: also compute ``H_L ε*`` directly and report the residual.

    Returns:
        A :class:`TauResult`.

    Raises:
        ValueError: if the gradient vanishes (ε* undefined) or is not finite.
    """
    params = {k: v.detach() for k, v in params.items()}
    logits, pull = vjp(logits_fn, params)
    r, loss = torch.func.grad_and_value(loss_fn)(logits)
    r = r.detach()
    (g,) = pull(r)
    gn = _norm(g)
    if not math.isfinite(gn) or gn == 0.0:
        raise ValueError(f"the gradient norm is {gn}: ε* = g/‖g‖ is undefined at these params.")
    eps = _scale(g, 1.0 / gn)
    u = jvp(logits_fn, (params,), (eps,))[1]  # J ε*
    hu = jvp(grad(loss_fn), (logits.detach(),), (u,))[1]  # H_out J ε*
    (d_logit,) = pull(hu)

    def surrogate(p: Params) -> torch.Tensor:
        return torch.sum(r * logits_fn(p))

    d_func = hvp(surrogate, params, eps)
    ll, ff, lf = _dot(d_logit, d_logit), _dot(d_func, d_func), _dot(d_logit, d_func)
    total = ll + ff + 2 * lf
    s = {k: d_logit[k] + d_func[k] for k in d_logit}
    residual = float("nan")
    if check:
        h = hvp(lambda p: loss_fn(logits_fn(p)), params, eps)
        residual = _norm({k: s[k] - h[k] for k in s}) / max(_norm(h), 1e-300)
    return TauResult(
        tau_logit=ll / total,
        tau_func=ff / total,
        tau_cross=2 * lf / total,
        loss=float(loss),
        grad_norm=gn,
        sharpness_grad_norm=math.sqrt(total),
        curvature=_dot(eps, s),
        check_residual=residual,
    )


def ggn_quadratic(
    logits_fn: Callable[[Params], torch.Tensor],
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    params: Params,
    z: Params,
) -> float:
    """``zᵀ H_G z = (Jz)ᵀ H_out (Jz)`` with one JVP through the model (no second derivative)."""
    logits, u = jvp(logits_fn, (params,), (z,))
    hu = jvp(grad(loss_fn), (logits.detach(),), (u,))[1]
    return float(torch.vdot(u.flatten(), hu.flatten()))


# ---------------------------------------------------------------------------------- eigenvalues
def lanczos(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    dim: int,
    *,
    iters: int = 30,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    v0: torch.Tensor | None = None,
) -> torch.Tensor:
    """Ritz values of a symmetric operator by Lanczos with full reorthogonalization.

    Args:
        matvec: ``v -> A v`` on flat vectors of length ``dim``.
        dim: the dimension.
        iters: Krylov dimension (capped at ``dim``; ``iters = dim`` gives the exact spectrum).
        seed: seed of the random start vector.
        dtype: working precision of the recurrence.
        v0: start vector (default random). The Krylov space contains it, so the top Ritz value
            is at least ``v0ᵀAv0/‖v0‖²`` after any number of iterations.

    Returns:
        The Ritz values, ascending. The largest converges to ``λ_max`` (algebraic) from below.
    """
    if dim < 1 or iters < 1:
        raise ValueError(f"`dim` and `iters` must be >= 1; got dim={dim}, iters={iters}.")
    k = min(iters, dim)
    if v0 is None:
        gen = torch.Generator().manual_seed(seed)
        q = torch.randn(dim, generator=gen, dtype=dtype)
    else:
        q = v0.detach().flatten().to(dtype)
        if q.numel() != dim or not bool(torch.isfinite(q).all()) or float(q.norm()) == 0.0:
            raise ValueError(
                f"`v0` must be a finite non-zero vector of length `dim`={dim}; got "
                f"{q.numel()} entries with norm {float(q.norm())}."
            )
    q = q / q.norm()
    Q = torch.zeros(k, dim, dtype=dtype)
    alpha = torch.zeros(k, dtype=dtype)
    beta = torch.zeros(k, dtype=dtype)
    m = k
    for j in range(k):
        Q[j] = q
        w = matvec(q).to(dtype)
        alpha[j] = torch.dot(w, q)
        w = w - Q[: j + 1].T @ (Q[: j + 1] @ w)  # full reorthogonalization (twice is enough)
        w = w - Q[: j + 1].T @ (Q[: j + 1] @ w)
        if j + 1 < k:
            beta[j] = w.norm()
            if beta[j] <= 1e-12 * max(1.0, float(alpha[: j + 1].abs().max())):
                m = j + 1  # invariant subspace found: the Ritz values are exact
                break
            q = w / beta[j]
    T = torch.diag(alpha[:m]) + torch.diag(beta[: m - 1], 1) + torch.diag(beta[: m - 1], -1)
    return torch.linalg.eigvalsh(T)


def power_iteration(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    dim: int,
    *,
    iters: int = 100,
    seed: int = 0,
    tol: float = 1e-10,
    dtype: torch.dtype = torch.float64,
) -> float:
    """The eigenvalue of largest **magnitude** (Rayleigh quotient of the power iterate).

    For an indefinite ``H_L`` this can be a negative eigenvalue; :func:`lanczos` gives the
    largest algebraic one, which is what the paper's ``λ_max`` tables report.
    """
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(dim, generator=gen, dtype=dtype)
    v /= v.norm()
    lam = 0.0
    for _ in range(iters):
        w = matvec(v).to(dtype)
        new = float(torch.dot(v, w))
        n = w.norm()
        if n == 0:
            return 0.0
        v = w / n
        if abs(new - lam) <= tol * max(1.0, abs(new)):
            return new
        lam = new
    return lam


def lambda_max(
    logits_fn: Callable[[Params], torch.Tensor],
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    params: Params,
    *,
    iters: int = 30,
    method: str = "lanczos",
    seed: int = 0,
    start: str = "random",
) -> float:
    """Largest eigenvalue of ``H_L`` at ``params``: ``"lanczos"`` (algebraic) or ``"power"``.

    ``start="gradient"`` starts Lanczos from ``g = ∇L`` (one extra gradient): with few
    iterations the estimate is then at least the curvature along the gradient, ``ε*ᵀH_Lε*``,
    which directions of high curvature dominate (a random start needs more iterations).
    """
    if start not in ("random", "gradient"):
        raise ValueError(f"unknown `start` {start!r}; choose 'random' or 'gradient'.")
    params = {k: v.detach() for k, v in params.items()}
    dim = sum(v.numel() for v in params.values())

    def f(p: Params) -> torch.Tensor:
        return loss_fn(logits_fn(p))

    def matvec(v: torch.Tensor) -> torch.Tensor:
        return _flatten(hvp(f, params, _unflatten(v, params))).to(torch.float64)

    if method == "lanczos":
        v0 = _flatten(grad(f)(params)) if start == "gradient" else None
        return float(lanczos(matvec, dim, iters=iters, seed=seed, v0=v0)[-1])
    if method == "power":
        return power_iteration(matvec, dim, iters=iters, seed=seed)
    raise ValueError(f"unknown `method` {method!r}; choose 'lanczos' or 'power'.")


# ---------------------------------------------------------------------------------- traces
def hutchinson(
    quadratic: Callable[[torch.Tensor], torch.Tensor | float],
    dim: int,
    *,
    probes: int = 100,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> tuple[float, float]:
    """Hutchinson's estimate of ``tr(A)`` from ``z ↦ zᵀAz`` with Rademacher ``z``.

    Returns:
        ``(mean, standard error)`` over ``probes`` probes. The variance of one probe is
        ``2(‖A‖_F² − Σ A_ii²)`` for Rademacher ``z``.
    """
    if probes < 2:
        raise ValueError(f"`probes` must be >= 2 (for the standard error); got {probes}.")
    gen = torch.Generator().manual_seed(seed)
    vals = []
    for _ in range(probes):
        z = torch.randint(0, 2, (dim,), generator=gen).to(dtype) * 2 - 1
        vals.append(float(quadratic(z)))
    t = torch.tensor(vals, dtype=torch.float64)
    return float(t.mean()), float(t.std(unbiased=True) / math.sqrt(probes))


def hessian_traces(
    logits_fn: Callable[[Params], torch.Tensor],
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    params: Params,
    *,
    probes: int = 100,
    seed: int = 0,
) -> dict[str, float]:
    """Hutchinson ``tr(H_L)``, ``tr(H_G)`` and ``tr(H_F) = tr(H_L) − tr(H_G)`` (same probes).

    ``zᵀH_Gz`` uses one JVP (:func:`ggn_quadratic`), ``zᵀH_Lz`` one HVP. The paired difference
    gives ``tr(H_F)`` a smaller standard error than two independent estimates would.

    Returns:
        ``{"tr_H_L", "tr_H_G", "tr_H_F", "se_H_L", "se_H_G", "se_H_F", "probes"}``.
    """
    params = {k: v.detach() for k, v in params.items()}
    dim = sum(v.numel() for v in params.values())

    def f(p: Params) -> torch.Tensor:
        return loss_fn(logits_fn(p))

    rows = []

    def quad(z: torch.Tensor) -> float:
        zt = _unflatten(z, params)
        ql = _dot(zt, hvp(f, params, zt))
        qg = ggn_quadratic(logits_fn, loss_fn, params, zt)
        rows.append((ql, qg))
        return ql

    hutchinson(quad, dim, probes=probes, seed=seed)
    t = torch.tensor(rows, dtype=torch.float64)
    hl, hg = t[:, 0], t[:, 1]
    hf = hl - hg
    se = 1.0 / math.sqrt(probes)
    return {
        "tr_H_L": float(hl.mean()),
        "tr_H_G": float(hg.mean()),
        "tr_H_F": float(hf.mean()),
        "se_H_L": float(hl.std() * se),
        "se_H_G": float(hg.std() * se),
        "se_H_F": float(hf.std() * se),
        "probes": probes,
    }


# ---------------------------------------------------------------------------------- logits
@torch.no_grad()
def logit_statistics(
    logits: torch.Tensor, targets: torch.Tensor | None = None, *, ignore_index: int = -100
) -> dict[str, float]:
    """Confidence statistics of the predictive distributions (seed 003 §6.4; per-token means).

    Returns ``entropy`` (nats), ``max_prob``, ``one_minus_p_sq`` (``1 − ‖p‖²``, the trace of
    ``diag(p) − ppᵀ``: the "logit sharpness" per token), ``logit_std`` (across the vocabulary),
    and with ``targets`` also ``loss``, ``p_true`` and ``grad_sq`` (``‖p − y‖²``). Tokens whose
    target is ``ignore_index`` are left out.
    """
    z = logits.detach().reshape(-1, logits.shape[-1]).to(torch.float64)
    keep = torch.ones(z.shape[0], dtype=torch.bool)
    if targets is not None:
        t = targets.reshape(-1)
        keep = t != ignore_index
        t = t[keep]
    z = z[keep]
    logp = torch.log_softmax(z, -1)
    p = logp.exp()
    out = {
        "entropy": float(-(p * logp).sum(-1).mean()),
        "max_prob": float(p.max(-1).values.mean()),
        "one_minus_p_sq": float((1 - (p * p).sum(-1)).mean()),
        "logit_std": float(z.std(-1).mean()),
    }
    if targets is not None:
        pt = p.gather(-1, t[:, None])[:, 0]
        out["loss"] = float(-logp.gather(-1, t[:, None]).mean())
        out["p_true"] = float(pt.mean())
        out["grad_sq"] = float(((p * p).sum(-1) - 2 * pt + 1).mean())
    return out
