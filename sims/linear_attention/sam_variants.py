"""Head-wise SAM: the perturbation normalized per attention head (an ablation of eq. 6).

Standard SAM (:func:`sims.optim.sam`, main paper eq. 6) perturbs *all* parameters by
``ε = ρ g/‖g‖₂`` with the **global** gradient norm, so the heads share one radius: head ``h`` is
moved by ``ρ ‖g_h‖/‖g‖``, its share of the gradient. The paper's reduction of SAM to one scalar
ODE per feature (App. C.2, eq. 22: ``P = ρ H₁/‖∇_{w₁}L‖``) normalizes by the *active head's*
gradient alone, i.e. gives every head the full radius ``ρ``. That is what these transformations
do, for every head at once (Def. B.1's layer-wise SAM with the heads as layers)::

    ε_h = ρ g_h / ‖g_h‖₂            (head-wise exact SAM)
    d_h = g_h + ρ (H ĝ_head)_h      (head-wise first-order SAM, ĝ_head = (g_h/‖g_h‖)_h)

Comparing them with global SAM isolates the mechanism of :mod:`theory.sam_saddle`: SAM's
slow-down falls on the head that dominates the gradient.

Params are the NamedTuples of :mod:`sims.linear_attention.models`: every leaf has the head axis
first, so ``‖g_h‖² = Σ_leaves Σ_{other axes} g_leaf[h]²``.

:data:`METHODS` extends :data:`sims.optim.METHODS` with ``"sam_headwise"`` and
``"sam_flow_headwise"`` (same signature ``METHODS[name](learning_rate, rho)``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

from sims.optim import METHODS as _BASE_METHODS
from sims.optim import gd
from sims.optim.optax_sam import _check_nonneg
from sims.optim.optax_sam import _sam_transform as _transform  # the one SAM shell

__all__ = [
    "head_norms",
    "headwise_perturbation",
    "headwise_sam_gradient",
    "headwise_sam_flow_direction",
    "headwise_sam",
    "headwise_sam_flow",
    "METHODS",
]


def head_norms(grads) -> jax.Array:
    """``‖g_h‖₂`` per head (leading axis of every leaf), shape ``(H,)``."""
    leaves = jax.tree_util.tree_leaves(grads)
    sq = [jnp.sum(x.reshape(x.shape[0], -1) ** 2, axis=1) for x in leaves]
    return jnp.sqrt(sum(sq))


def _per_head_scale(grads, factor):
    return jax.tree_util.tree_map(
        lambda g: g * factor.reshape((-1,) + (1,) * (g.ndim - 1)), grads
    )


def headwise_perturbation(grads, rho):
    """``ε_h = ρ g_h/‖g_h‖₂`` for every head (0 for a head with zero gradient); detached."""
    g = jax.lax.stop_gradient(grads)
    n = head_norms(g)
    factor = jnp.where(n > 0, rho / jnp.where(n > 0, n, 1.0), 0.0)
    return _per_head_scale(g, factor)


def headwise_sam_gradient(grad_fn: Callable, params, grads, rho):
    """``∇L(w + ε)`` with the head-wise ``ε`` of :func:`headwise_perturbation`."""
    eps = headwise_perturbation(grads, rho)
    return grad_fn(jax.tree_util.tree_map(jnp.add, params, eps))


def headwise_sam_flow_direction(grad_fn: Callable, params, grads, rho):
    """First-order head-wise SAM: ``g + ρ H ĝ_head`` (``ĝ_head`` unit per head; ``H·`` by jvp)."""
    g = jax.lax.stop_gradient(grads)
    unit = headwise_perturbation(g, 1.0)
    _, hu = jax.jvp(grad_fn, (params,), (unit,))
    return jax.tree_util.tree_map(lambda a, b: a + rho * b, g, hu)


def _check_rho(rho):
    _check_nonneg("rho", rho, "rho=0 recovers GD.")


def headwise_sam(rho) -> optax.GradientTransformationExtraArgs:
    """Head-wise exact SAM: ``g ↦ ∇L(w + ε)``, ``ε_h = ρ g_h/‖g_h‖`` (one update = one step)."""
    _check_rho(rho)
    return _transform(
        "headwise_sam", lambda gf, p, g: headwise_sam_gradient(gf, p, g, rho)
    )


def headwise_sam_flow(rho) -> optax.GradientTransformationExtraArgs:
    """Head-wise first-order SAM: ``g ↦ g + ρ H ĝ_head`` (Euler step of eq. 8, per-head ``P``)."""
    _check_rho(rho)
    return _transform(
        "headwise_sam_flow", lambda gf, p, g: headwise_sam_flow_direction(gf, p, g, rho)
    )


def _chain(transform):
    def make(learning_rate, rho=0.0):
        return optax.chain(transform(rho), gd(learning_rate))

    return make


#: ``METHODS[name](learning_rate, rho)``: :data:`sims.optim.METHODS` plus the head-wise forms.
METHODS: dict[str, Callable[..., optax.GradientTransformationExtraArgs]] = {
    **_BASE_METHODS,
    "sam_headwise": _chain(headwise_sam),
    "sam_flow_headwise": _chain(headwise_sam_flow),
}
