"""Optax-style gradient transformations for GD and SAM (main paper eqs. 2, 6–8), JAX side.

Every optimizer is a factory returning an :class:`optax.GradientTransformationExtraArgs`
(``init``, ``update``) with a NamedTuple state, composable with :func:`optax.chain`. The math
lives in small pure functions (:func:`sam_perturbation`, :func:`sam_gradient`,
:func:`sam_flow_direction`); the transformations are thin shells (style rules 1–2).

* :func:`gd` ``(learning_rate)``: ``w ← w - η g`` (eq. 2) — ``optax.scale(-η)`` with validation.
* :func:`sam` ``(rho, *, normalize=True)``: one ``update`` = one full SAM step (eq. 6). Given the
  gradient ``g = ∇L(w)`` as ``updates`` and ``grad_fn`` (keyword-only extra arg), it returns
  ``∇L(w + ε)`` with ``ε = ρ g / ‖g‖₂`` (global norm over all parameters, detached). Chain with
  :func:`gd`: ``optax.chain(sam(rho), gd(lr))``. With ``ρ = 0`` it returns ``g`` exactly.
* :func:`sam_flow` ``(rho)``: the first-order SAM direction of eqs. (7)–(8),
  ``(I + P) g = g + (ρ/‖g‖) H g`` with the Hessian-vector product ``H g`` by forward-over-reverse
  autodiff of ``grad_fn``.
* :func:`sam_gd`, :func:`sam_flow_gd`: the chains above.
* :func:`preconditioned_perturbation` and :func:`functional_sam_gradient`: the SAM-family
  gradients of seed 003 (SAM eq. 2, Functional-SAM eq. 11, Logit-SAM App. D, the preconditioned
  perturbation of eq. 12) written after the paper's App. C listing (corrected). They are the JAX
  reference that the torch optimizers of :mod:`sims.optim.torch_sam` are tested against.

``rho`` may be a traced JAX scalar (so one can ``vmap`` over ρ); its sign is then not checked.

Examples:
    >>> import jax, jax.numpy as jnp, optax
    >>> f = lambda w: jnp.sum(w**2)
    >>> opt = sam_gd(learning_rate=0.1, rho=0.0)
    >>> w = jnp.array([1.0, 2.0]); s = opt.init(w)
    >>> u, s = opt.update(jax.grad(f)(w), s, w, grad_fn=jax.grad(f))
    >>> optax.apply_updates(w, u).tolist()
    [0.8, 1.6]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = [
    "SAMState",
    "global_norm",
    "sam_perturbation",
    "sam_gradient",
    "sam_flow_direction",
    "gd",
    "sam",
    "sam_flow",
    "sam_gd",
    "sam_flow_gd",
    "METHODS",
    "preconditioned_perturbation",
    "functional_sam_gradient",
]


class SAMState(NamedTuple):
    """State of :func:`sam` / :func:`sam_flow`: the last gradient norm ``‖g‖`` (diagnostic)."""

    grad_norm: Any


def _check_nonneg(name: str, value, fix: str) -> None:
    if isinstance(value, jax.core.Tracer):
        return
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu" or arr.ndim != 0:
        raise TypeError(f"`{name}` must be a real scalar; got {value!r} ({type(value).__name__}).")
    if not np.isfinite(arr) or arr < 0:
        raise ValueError(f"`{name}` must be finite and >= 0; got {value!r}. {fix}")


def global_norm(tree) -> jax.Array:
    """``‖g‖₂`` over all leaves of a pytree."""
    return optax.tree.norm(tree)


def sam_perturbation(grads, rho, *, normalize: bool = True):
    """``ε = ρ g/‖g‖₂`` (eq. 6), detached; ``0`` where ``‖g‖ = 0``. ``normalize=False``: ``ρ g``."""
    grads = jax.lax.stop_gradient(grads)
    if normalize:
        norm = global_norm(grads)
        safe = jnp.where(norm > 0, norm, 1.0)
        factor = jnp.where(norm > 0, rho / safe, 0.0)
    else:
        factor = rho
    return jax.tree_util.tree_map(lambda g: factor * g, grads)


def sam_gradient(grad_fn: Callable, params, grads, rho, *, normalize: bool = True):
    """``∇L(w + ε)`` with ``ε`` from :func:`sam_perturbation` (the SAM update direction, eq. 6)."""
    eps = sam_perturbation(grads, rho, normalize=normalize)
    return grad_fn(jax.tree_util.tree_map(jnp.add, params, eps))


def sam_flow_direction(grad_fn: Callable, params, grads, rho):
    """First-order SAM direction ``(I + P) g``, ``P = ρ H/‖g‖`` (eqs. 7–8); ``H g`` by autodiff."""
    g = jax.lax.stop_gradient(grads)
    norm = global_norm(g)
    factor = jnp.where(norm > 0, rho / jnp.where(norm > 0, norm, 1.0), 0.0)
    _, hg = jax.jvp(grad_fn, (params,), (g,))
    return jax.tree_util.tree_map(lambda a, b: a + factor * b, g, hg)


def gd(learning_rate) -> optax.GradientTransformation:
    """Plain gradient descent ``w ← w - η g`` (eq. 2), as ``optax.scale(-η)``."""
    if not callable(learning_rate):
        _check_nonneg("learning_rate", learning_rate, "Use a small positive step, e.g. 0.02.")
        return optax.scale(-learning_rate)
    return optax.scale_by_schedule(lambda count: -learning_rate(count))


def _need_grad_fn(grad_fn):
    if grad_fn is None or not callable(grad_fn):
        raise TypeError(
            "SAM's `update` needs the keyword-only extra argument `grad_fn` (params -> gradient);"
            f" got {grad_fn!r}. Call opt.update(grads, state, params, grad_fn=jax.grad(loss))."
        )


def sam(rho, *, normalize: bool = True) -> optax.GradientTransformationExtraArgs:
    """SAM (eq. 6) as a gradient transformation: ``updates = g`` in, ``∇L(w + ρ g/‖g‖)`` out.

    One ``update`` call is one full SAM step (two gradient evaluations: the incoming ``g`` and
    ``grad_fn`` at the perturbed point), so step counts compare 1:1 with GD.

    Args:
        rho: perturbation radius ``ρ >= 0`` (a traced scalar is allowed).
        normalize: divide by the global gradient norm (standard SAM); ``False`` gives ``ρ g``.

    Raises:
        ValueError: when ``rho`` is negative or non-finite.
    """
    _check_nonneg("rho", rho, "SAM's radius must be non-negative (rho=0 recovers GD).")
    return _sam_transform(
        "SAM", lambda grad_fn, params, g: sam_gradient(grad_fn, params, g, rho, normalize=normalize)
    )


def sam_flow(rho) -> optax.GradientTransformationExtraArgs:
    """First-order SAM (eqs. 7–8): ``g ↦ (I + ρ H/‖g‖) g`` with ``H g`` via ``jax.jvp(grad_fn)``."""
    _check_nonneg("rho", rho, "SAM's radius must be non-negative (rho=0 recovers GD).")
    return _sam_transform(
        "sam_flow", lambda grad_fn, params, g: sam_flow_direction(grad_fn, params, g, rho)
    )


def _sam_transform(name: str, direction) -> optax.GradientTransformationExtraArgs:
    """Shell shared by the SAM transformations: ``direction(grad_fn, params, g)`` is the math."""

    def init_fn(params):
        del params
        return SAMState(grad_norm=jnp.zeros(()))

    def update_fn(updates, state, params=None, *, grad_fn=None, **extra_args):
        del state, extra_args
        if params is None:
            raise ValueError(f"{name}'s `update` needs `params` (the current weights).")
        _need_grad_fn(grad_fn)
        return direction(grad_fn, params, updates), SAMState(grad_norm=global_norm(updates))

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def sam_gd(learning_rate, rho, *, normalize: bool = True):
    """``optax.chain(sam(rho), gd(learning_rate))``."""
    return optax.chain(sam(rho, normalize=normalize), gd(learning_rate))


def sam_flow_gd(learning_rate, rho):
    """``optax.chain(sam_flow(rho), gd(learning_rate))`` (Euler step of the eq. 8 flow)."""
    return optax.chain(sam_flow(rho), gd(learning_rate))


def _gd_method(learning_rate, rho=0.0):
    del rho
    return optax.with_extra_args_support(gd(learning_rate))


#: Methods by name: ``METHODS[name](learning_rate, rho)`` -> transformation accepting ``grad_fn``.
METHODS: dict[str, Callable[..., optax.GradientTransformationExtraArgs]] = {
    "gd": _gd_method,
    "sam": sam_gd,
    "sam_flow": sam_flow_gd,
}


_PRECOND_MODES = ("pre", "post", "dual")


def preconditioned_perturbation(grads, rho, precond_inv=None, *, mode: str = "post"):
    """SAM-family perturbation ``e`` (seed 003 eqs. 2 and 12), detached.

    With ``d = M⁻¹ g`` (``d = g`` when ``precond_inv`` is None):

    * ``"pre"`` (eq. 12 literally): ``e = ρ d / ‖g‖₂``;
    * ``"post"``: ``e = ρ d / ‖d‖₂`` (so ``‖e‖₂ = ρ``);
    * ``"dual"``: ``e = ρ d / sqrt(gᵀ d)`` (so ``‖e‖_M = ρ``).

    All three equal :func:`sam_perturbation` when ``M = I``; ``e = 0`` where the normalizer is 0.

    Args:
        grads: the gradient pytree ``g``.
        rho: the radius ``ρ >= 0``.
        precond_inv: pytree of ``M⁻¹`` diagonals (same structure as ``grads``), or None.
        mode: ``"pre"``, ``"post"`` or ``"dual"``.
    """
    if mode not in _PRECOND_MODES:
        raise ValueError(f"`mode` must be one of {_PRECOND_MODES}; got {mode!r}.")
    g = jax.lax.stop_gradient(grads)
    d = g if precond_inv is None else jax.tree_util.tree_map(jnp.multiply, precond_inv, g)
    if mode == "pre":
        n = global_norm(g)
    elif mode == "post":
        n = global_norm(d)
    else:
        dots = jax.tree_util.tree_leaves(jax.tree_util.tree_map(jnp.vdot, g, d))
        n = jnp.sqrt(sum(dots))
    factor = jnp.where(n > 0, rho / jnp.where(n > 0, n, 1.0), 0.0)
    return jax.tree_util.tree_map(lambda a: factor * a, d)


def functional_sam_gradient(
    logits_fn: Callable, loss_fn: Callable, params, rho, *, variant: str = "fsam",
    precond_inv=None, mode: str = "post",
):  # fmt: skip
    """The gradient a SAM-family method passes to its base optimizer (seed 003, App. C, fixed).

    With ``Z = F(θ)`` (``logits_fn``), ``r = ∂L/∂Z`` at ``θ`` and ``θ̃ = θ + e``
    (:func:`preconditioned_perturbation`):

    * ``"sam"``: ``∇L(θ̃) = J(θ̃)ᵀ r(θ̃)`` (eq. 2);
    * ``"fsam"``: ``J(θ̃)ᵀ r(θ)``, the VJP at the perturbed point with the unperturbed logit
      gradient (eq. 11);
    * ``"lsam"``: ``J(θ)ᵀ r(θ̃)`` (Logit-SAM, App. D eq. 19 at φ = π/2).

    Args:
        logits_fn: ``params -> logits``.
        loss_fn: ``logits -> scalar loss``.
        params: the parameter pytree ``θ``.
        rho: radius ``ρ``.
        variant: ``"sam"``, ``"fsam"`` or ``"lsam"``.
        precond_inv: ``M⁻¹`` diagonals for the preconditioned forms (eq. 12), or None.
        mode: normalization of the preconditioned perturbation (see above).

    Returns:
        ``(g_variant, g, loss)``: the variant's gradient, the plain gradient and ``L(θ)``.
    """
    if variant not in ("sam", "fsam", "lsam"):
        raise ValueError(f"`variant` must be 'sam', 'fsam' or 'lsam'; got {variant!r}.")
    logits, pull = jax.vjp(logits_fn, params)
    loss, r = jax.value_and_grad(loss_fn)(logits)
    (g,) = pull(r)
    e = preconditioned_perturbation(g, rho, precond_inv, mode=mode)
    perturbed = jax.tree_util.tree_map(jnp.add, params, e)
    if variant == "sam":
        out = jax.grad(lambda p: loss_fn(logits_fn(p)))(perturbed)
    elif variant == "fsam":
        _, pull_p = jax.vjp(logits_fn, perturbed)
        (out,) = pull_p(jax.lax.stop_gradient(r))
    else:
        (out,) = pull(jax.grad(loss_fn)(logits_fn(perturbed)))
    return out, g, loss
