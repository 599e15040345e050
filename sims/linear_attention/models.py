"""Multi-head linear self-attention models ATTN_S and ATTN_M (main paper Section 3, Appendix A.1).

ATTN_S (Lemma 3.1, separate rank-``r`` key and query per head)::

    ATTN_S(X) = X + Σ_h (1/N) W^V_h X Xᵀ W^K_hᵀ W^Q_h X,   ŷ_q = ATTN_S(X)[d, N]  (0-based)

with the paper's zero blocks ``W^V_h = [[*, *], [0ᵀ, v_h]]``, ``W^K_h = [K_h, 0]``,
``W^Q_h = [Q_h, *]`` (``K_h, Q_h ∈ R^{r×d}``). Then ``ŷ_q = βᵀ M x_q = ⟨M, β x_qᵀ⟩`` with
``β = (1/N) Σ_n y_n x_n`` and ``M = Σ_h v_h K_hᵀ Q_h`` (``= Σ_h v_h k_h q_hᵀ`` for rank one).
ATTN_M (Appendix A.1, merged key-query ``W^{KQ}_h = [[U_h, *], [0ᵀ, *]]``) gives
``M = Σ_h v_h U_h`` (a two-layer linear network on ``z``).

Parameters are NamedTuple pytrees of arrays; only the non-zero, non-``*`` blocks are trained.
:func:`token_forward` runs the real attention on token matrices (the naive path used to prove the
sufficient-statistics engine exact); ``*`` blocks are filled with fixed random values there to
show they do not matter.

Output scale: ``scale="paper"`` keeps the ``1/N`` of the paper; ``scale="anchor"`` drops it, as
Zhang et al.'s ``linattn-icl`` does (``ŷ`` multiplied by ``N``).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = [
    "AttnSParams",
    "AttnMParams",
    "MODELS",
    "VALUE_INITS",
    "output_scale",
    "merged_matrix",
    "init_params",
    "ansatz_params",
    "predict",
    "token_forward",
    "token_loss",
    "tokens_to_matrix",
]

MODELS = ("attn_s", "attn_m")

#: ATTN_S value initializations (:func:`init_params`): ``"linattn-icl"`` (the default, std
#: ``init/√(H(d+1)²)``, as ``linattn-icl``'s value ``nn.Linear``) and ``"value-row"`` (std
#: ``init/√(H(d+1))``, the package's value init before commit 4d1fae3 "linattn-icl value init";
#: √(d+1) = √5 larger at d = 4).
VALUE_INITS = ("linattn-icl", "value-row")


class AttnSParams(NamedTuple):
    """ATTN_S trainable weights: value scalars ``v`` and rank-``r`` key/query blocks."""

    v: Float[Array, " H"]  # noqa: F722
    k: Float[Array, "H r d"]  # noqa: F722
    q: Float[Array, "H r d"]  # noqa: F722


class AttnMParams(NamedTuple):
    """ATTN_M trainable weights: value scalars ``v`` and merged key-query blocks ``U``."""

    v: Float[Array, " H"]  # noqa: F722
    u: Float[Array, "H d d"]  # noqa: F722


def output_scale(scale: Literal["paper", "anchor"] | float, n_context: int) -> float:
    """Multiplier ``s`` of ``⟨M, β x_qᵀ⟩``: 1 (paper, with 1/N) or ``N`` (anchor, without)."""
    if scale == "paper":
        return 1.0
    if scale == "anchor":
        return float(n_context)
    if isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0:
        return float(scale)
    raise ValueError(f"`scale` must be 'paper', 'anchor' or a positive number; got {scale!r}.")


def merged_matrix(params: AttnSParams | AttnMParams) -> Float[Array, "d d"]:  # noqa: F722
    """``M = Σ_h v_h K_hᵀ Q_h`` (ATTN_S) or ``Σ_h v_h U_h`` (ATTN_M), so that ``ŷ = βᵀ M x_q``.

    Leading batch axes (runs, checkpoints) broadcast: ``v (..., H)`` gives ``M (..., d, d)``.
    """
    if isinstance(params, AttnSParams):
        return jnp.einsum("...h,...hri,...hrj->...ij", params.v, params.k, params.q)  # (..., d, d)
    if isinstance(params, AttnMParams):
        return jnp.einsum("...h,...hij->...ij", params.v, params.u)  # (..., d, d)
    raise TypeError(f"`params` must be AttnSParams or AttnMParams; got {type(params).__name__}.")


def init_params(
    key,
    d: int,
    n_heads: int,
    *,
    model: Literal["attn_s", "attn_m"] = "attn_s",
    rank: int = 1,
    init_scale: float = 0.01,
    value_init: Literal["linattn-icl", "value-row"] = "linattn-icl",
) -> AttnSParams | AttnMParams:
    """Small Gaussian initialization, as Zhang et al.'s ``linattn-icl`` (``net.py``) does.

    ATTN_S (``Attention_Separate._init_weights``): every weight is ``N(0, (init/√numel)²)``
    with ``numel`` the size of the whole ``nn.Linear`` the block lives in: ``H r (d+1)`` for
    the key and query, and ``H (d+1)²`` for the value (``value`` maps ``d+1`` to ``H (d+1)``);
    ``v_h`` is the ``(d+1, d+1)`` entry of head ``h``'s value block, so its std is
    ``init / √(H (d+1)²)`` (``0.01/√125`` at the anchor's d = 4, H = 5).
    ATTN_M (``Attention_Merge._init_weights``): every weight is ``N(0, init²)`` (no ``numel``).

    ``value_init="value-row"`` (ATTN_S only) draws ``v_h`` with std ``init / √(H (d+1))``
    instead, the value of a single ``H (d+1)`` row, as the package did before commit 4d1fae3
    ("linattn-icl value init"); the same key gives the same draws, ``√(d+1)`` times larger. The
    SoSD bridge's onset-under-upsampling finding depends on this choice (issue 28).

    Raises:
        ValueError: for ``n_heads < 1``, ``d < 1``, ``rank < 1``, ``init_scale < 0``, an unknown
            ``model`` or an unknown ``value_init``.
    """
    for name, val in (("d", d), ("n_heads", n_heads), ("rank", rank)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"`{name}` must be an int >= 1; got {val!r}.")
    if not np.isfinite(init_scale) or init_scale < 0:
        raise ValueError(f"`init_scale` must be finite and >= 0; got {init_scale!r}.")
    if model not in MODELS:
        raise ValueError(f"`model` must be one of {MODELS}; got {model!r}.")
    if value_init not in VALUE_INITS:
        raise ValueError(f"`value_init` must be one of {VALUE_INITS}; got {value_init!r}.")
    # The draws come from JAX; the keys are split off and the draws multiplied in numpy, so a
    # cold process compiles 4 small programs instead of 9 (~0.2 s at the start of an
    # experiment). Products are correctly rounded in both, so the numbers are the same bit for
    # bit; the division stays in JAX (XLA's CPU divide is not always correctly rounded).
    kv, kk, kq = np.asarray(jax.random.split(key, 3))

    def normal(k, shape):
        return np.asarray(jax.random.normal(k, shape))

    if model == "attn_s":
        fan = n_heads * (d + 1) ** (2 if value_init == "linattn-icl" else 1)
        v = jnp.asarray(normal(kv, (n_heads,)) * init_scale) / np.sqrt(fan)
        std = init_scale / np.sqrt(n_heads * rank * (d + 1))
        k = normal(kk, (n_heads, rank, d)) * std
        q = normal(kq, (n_heads, rank, d)) * std
        return AttnSParams(v, jnp.asarray(k), jnp.asarray(q))
    v = normal(kv, (n_heads,)) * init_scale
    u = normal(kk, (n_heads, d, d)) * init_scale
    return AttnMParams(jnp.asarray(v), jnp.asarray(u))


def ansatz_params(eigvecs, values, n_heads: int | None = None) -> AttnSParams:
    """ATTN_S weights on the ansatz (3)–(5): head ``i`` has ``k_i = q_i = v_i e_i``.

    Args:
        eigvecs: ``(d, d)`` eigenvectors of ``Σ`` as columns, in decreasing eigenvalue order.
        values: ``(m,)`` values ``v_i`` for the first ``m <= n_heads`` heads (others zero).
        n_heads: ``H`` (default ``m``).
    """
    e = jnp.asarray(eigvecs)
    vals = jnp.asarray(values, dtype=e.dtype)
    m = vals.shape[0]
    h = m if n_heads is None else n_heads
    if h < m or m > e.shape[1]:
        raise ValueError(
            f"`values` has {m} entries; need m <= n_heads={h} and m <= d={e.shape[1]}."
        )
    v = jnp.zeros(h, e.dtype).at[:m].set(vals)
    k = jnp.zeros((h, 1, e.shape[0]), e.dtype).at[:m, 0, :].set(vals[:, None] * e[:, :m].T)
    return AttnSParams(v, k, k)


def predict(params, beta, xq, *, scale: float = 1.0):
    """``ŷ = s βᵀ M x_q`` for arrays ``beta (P, d)``, ``xq (P, d)``."""
    m = merged_matrix(params)
    return scale * jnp.einsum("pi,ij,pj->p", beta, m, xq)


def tokens_to_matrix(x, y):
    """Paper's ``X`` (eq. 1) from tokens ``x (P, N+1, d)``, ``y (P, N+1)``: shape ``(P, d+1, N+1)``.

    The query label (last column, last row) is zeroed.
    """
    x = jnp.asarray(x)
    y = jnp.asarray(y).at[:, -1].set(0.0)
    return jnp.concatenate([jnp.swapaxes(x, 1, 2), y[:, None, :]], axis=1)  # (P, d+1, N+1)


def _full_weights(params, star_key):
    """Assemble ``W^V, W^K, W^Q`` (or ``W^{KQ}``) with zero blocks and random ``*`` blocks."""
    h = params.v.shape[0]
    if isinstance(params, AttnSParams):
        d = params.k.shape[2]
        r = params.k.shape[1]
    else:
        d = params.u.shape[1]
    dp = d + 1
    k1, k2, k3 = jax.random.split(star_key, 3)
    wv = jax.random.normal(k1, (h, dp, dp))  # '*' rows
    wv = wv.at[:, d, :d].set(0.0).at[:, d, d].set(params.v)  # last row [0ᵀ, v_h]
    if isinstance(params, AttnSParams):
        wk = jnp.concatenate([params.k, jnp.zeros((h, r, 1))], axis=2)  # [K_h, 0]
        wq = jnp.concatenate([params.q, jax.random.normal(k2, (h, r, 1))], axis=2)  # [Q_h, *]
        return wv, wk, wq
    wkq = jax.random.normal(k3, (h, dp, dp))
    wkq = wkq.at[:, :d, :d].set(params.u).at[:, d, :d].set(0.0)  # [[U_h, *], [0ᵀ, *]]
    return wv, wkq, None


def token_forward(params, xmat, *, n_context: int, scale: float = 1.0, star_seed: int = 0):
    """Token-level forward pass of ATTN_S / ATTN_M on ``X`` of shape ``(P, d+1, N+1)``.

    Computes ``X + Σ_h (s/N) W^V_h X Xᵀ W^K_hᵀ W^Q_h X`` (resp. ``W^{KQ}_h X``) literally, with
    the residual, and returns the full output ``(P, d+1, N+1)``; ``ŷ_q`` is ``out[:, d, N]``.
    """
    wv, w2, w3 = _full_weights(params, jax.random.PRNGKey(star_seed))
    gram = jnp.einsum("pat,pbt->pab", xmat, xmat)  # X Xᵀ, (P, d+1, d+1)
    left = jnp.einsum("hab,pbc->phac", wv, gram)  # W^V X Xᵀ, (P, H, d+1, d+1)
    if w3 is not None:
        kq = jnp.einsum("hra,hrb->hab", w2, w3)  # W^Kᵀ W^Q, (H, d+1, d+1)
    else:
        kq = w2
    out = jnp.einsum("phac,hcb,pbt->pat", left, kq, xmat)  # (P, d+1, N+1)
    return xmat + (scale / n_context) * out


def token_loss(
    params, xmat, yq, *, n_context: int, scale: float = 1.0, weights=None, star_seed: int = 0
):
    """Mean squared query error ``E[(y_q - ŷ_q)²]`` from the token-level forward pass."""
    out = token_forward(params, xmat, n_context=n_context, scale=scale, star_seed=star_seed)
    d = xmat.shape[1] - 1
    err = (yq - out[:, d, -1]) ** 2
    if weights is None:
        return jnp.mean(err)
    w = jnp.asarray(weights, dtype=err.dtype)
    return jnp.sum(w * err) / jnp.sum(w)
