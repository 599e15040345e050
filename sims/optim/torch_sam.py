r"""The SAM family in torch: pure perturbation kernels and one thin ``torch.optim`` shell.

Seed 003 (Singh et al., "Avoiding spurious sharpness minimization broadens applicability of
SAM"). With ``θ`` the parameters, ``Z = F(θ)`` the logits, ``r = ∂L/∂Z`` the logit gradient
(detached), ``g = J(θ)ᵀ r = ∇L(θ)`` and the perturbation ``e`` (below), the gradient each variant
hands to its base optimizer is

.. math::

    \begin{aligned}
    \text{SAM (eq. 2)}:\; & J(θ+e)^\top r(θ+e) = ∇L(θ+e) \\
    \text{Functional-SAM (eq. 11)}:\; & J(θ+e)^\top r(θ) \\
    \text{Logit-SAM (App. D)}:\; & J(θ)^\top r(θ+e) \\
    \text{ANGLE-SAM (eq. 19)}:\; & g + w_\text{logit}\,(g_\text{LSAM} - g)
        + w_\text{func}\,(g_\text{FSAM} - g)
    \end{aligned}

and the base step (AdamW, SGD, ... including its weight decay) is applied at the **unperturbed**
``θ``. The perturbation is ``e = ρ g/‖g‖₂`` (global norm over every parameter), or for the
preconditioned forms (eq. 12, ``M = sqrt(v̂) + ε`` from the base Adam's second moment, taken
before the current step) ``e = ρ M⁻¹g / N`` with ``N = ‖g‖`` (``"pre"``, eq. 12 literally),
``‖M⁻¹g‖`` (``"post"``, so ``‖e‖ = ρ``) or ``sqrt(gᵀM⁻¹g)`` (``"dual"``), or for ASAM
(``adaptive=True``, Kwon et al. 2021, SAM and Functional-SAM) ``e = ρ T²g/‖Tg‖₂`` with the
element-wise ``T = |θ|``, so ``‖T⁻¹e‖₂ = ρ``: exactly davda54/sam's ``adaptive=True`` (no ``η``
offset; ASAM's authors use ``ρ`` about 10x larger than SAM's, e.g. 0.5-2.0). To first order in ρ,
``g_SAM = g + ρ(H_G + H_F)ε*``, ``g_FSAM = g + ρ H_F ε*`` and ``g_LSAM = g + ρ H_G ε*``
(seed 003 eq. 10), which the tests check with their ρ-slopes.

Passes per step: SAM and FSAM 2 forward + 2 backward; Logit-SAM 3F + 2B and ANGLE-SAM 3F + 3B
(the parameters are perturbed in place, so the logit-path VJP at ``θ`` re-runs the forward there).

Kernels (pure: tensors in, tensors out): :func:`global_norm`, :func:`sam_perturbation`,
:func:`adaptive_perturbation`, :func:`preconditioned_perturbation`, :func:`adam_preconditioner`,
:func:`angle_combine`, :func:`angle_weights`. The shell :class:`SAMFamily` runs the passes;
:class:`SAM` is its plain-SAM spelling with the historical ``SAM(params, base_cls, rho,
**base_kwargs)`` signature (davda54/sam's, ``adaptive=`` included).

**Closure protocol.** ``opt.step(closure)`` takes a callable (or a list of them: micro-batches of
one accumulated step) that runs the forward pass and returns ``(loss, logits)`` **without**
calling ``backward``: the optimizer runs the backward passes itself because it needs ``∂L/∂Z``.
With micro-batches each loss must already carry its share of the batch objective (e.g. divided
by the number of micro-batches), exactly as for plain gradient accumulation; the perturbation is
then computed from the **accumulated** gradient and every micro-batch is re-evaluated at
``θ + e``. Random layers (dropout) see the same random numbers in every pass of a micro-batch.

**Coming from davda54/sam.** ``from sims.optim import SAM`` replaces ``from sam import SAM``:
the constructor (``SAM(params, torch.optim.SGD, rho=0.05, adaptive=False, lr=..., ...)``), the
``first_step``/``second_step`` halves and the ``ρ`` semantics are the same. A davda54-style
closure (it calls ``loss.backward()`` and returns the loss) is detected for plain SAM/ASAM: when
``step(closure)`` finds a gradient computed since the last step in ``p.grad`` (davda54's loop
runs ``loss.backward()`` before ``step``), it climbs from that gradient and calls the closure once
at ``θ + e``, exactly as davda54/sam does; otherwise it first calls the closure at ``θ`` for the
gradient (one extra pass). The other variants need the logits and take only the closure protocol
above. As davda54's: ``adaptive`` is also the fourth positional argument of :class:`SAM`, every
param group carries ``"rho"`` and ``"adaptive"``, a zero gradient gives ``e = 0``, and after
``step`` ``p.grad`` holds the pass-2 gradient. Differences: ``rho`` and ``adaptive`` are one
value for all param groups; a davda54 ``SAM.state_dict()`` is refused with an explanation (it
holds ``old_p`` copies but not the base optimizer's momentum or Adam moments, which davda54 does
not save): load the base optimizer's ``state_dict()`` instead, or this optimizer's own.

**BatchNorm.** By default (``batchnorm_stats="unperturbed"``) running statistics are updated only
by the forwards at ``θ`` before :meth:`SAMFamily.first_step` (once per step, or once per
micro-batch with gradient accumulation, as without SAM): from ``first_step`` to
``second_step`` a process-wide forward hook lets each batch-norm layer whose parameters this
optimizer holds (or that has none) update copies of ``running_mean``, ``running_var`` and
``num_batches_tracked``, then puts the originals back. Normalization inside every pass still
uses the batch's statistics (training mode). This is what davda54/sam's example does by hand
with ``disable_running_stats``/``enable_running_stats`` (which still count the perturbed pass in
``num_batches_tracked``); loops that call those helpers get the same statistics.
``batchnorm_stats="every_pass"`` updates them in every pass (2-3 per step).

**Several processes** (``DistributedDataParallel``, ``accelerate launch``, ``torchrun``). Pass 2
is always all-reduced (every replica takes the same base step). ``sync_perturbation`` chooses the
gradient that ``e`` is computed from: ``True`` (default) the all-reduced one, so a run on ``n``
processes equals one process on the whole batch, at the cost of one more all-reduce per step
(pass 1's); ``False`` each replica's own (local) gradient, pass 1 running under ``no_sync``: the
SAM paper's choice (Foret et al. 2021 perturb per accelerator; their "m-sharpness" experiments
find smaller per-replica batches generalise better), cheaper by one all-reduce, but the update
then depends on how the batch is split across processes. Call :meth:`SAMFamily.attach_ddp` with
the DDP-wrapped model (``SAMFamilyTrainer`` does it): the optimizer then runs every backward
that is not the last of its pass under ``no_sync`` (one all-reduce per pass, however many
micro-batches). Without it a DDP model all-reduces every backward itself, which is
``sync_perturbation=True`` at more communication; ``False`` then raises. With
``sync_perturbation=False``, ``attach_ddp`` also registers a DDP comm hook that leaves the
backward passes before ``first_step`` un-reduced, so the two halves
(``loss.backward(); first_step(); loss.backward(); second_step()``) and davda54-style closures
get the per-replica perturbation too; on a DDP model that already has a comm hook of its own
(DDP takes one) they raise a ``ValueError`` instead, and ``step(closure)`` still works. FSDP and
DeepSpeed shard the parameters and are not supported.

**Mixed precision.** Norms of low-precision (bf16/fp16) gradients are taken per tensor in
float32 and combined in float64. Under autocast the logits must be those the loss was computed
from (``SAMFamilyTrainer`` takes them from the output layer when the model returns a float32
copy). fp16 with loss scaling: pass ``grad_scaler=torch.amp.GradScaler(...)``; ``step(closure)``
then scales every backward by the scaler's scale, **unscales pass 1's gradient before its norm**
(``scaler.unscale_``, recording overflows), unscales the final gradient, and skips the step when
either is not finite (no error; ``skipped_steps`` counts it) so that the caller's
``scaler.update()`` backs the scale off. With :meth:`first_pass` (the Trainer) the caller's
``scaler.step(opt)`` unscales pass 1 before calling :meth:`step`.

Examples:
    >>> import torch
    >>> w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    >>> opt = SAM([w], torch.optim.SGD, rho=0.5, lr=0.1)
    >>> def closure():
    ...     return 0.5 * (w**2).sum(), w   # (loss, "logits"): here the logits are w itself
    >>> float(opt.step(closure))
    12.5
    >>> [round(v, 4) for v in w.tolist()]  # w - 0.1 * (w + 0.5 * w/|w|)
    [2.67, 3.56]
    >>> a = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    >>> e = adaptive_perturbation([torch.tensor([4.0, 1.0])], [a], rho=1.0)[0]  # ρ T²g/‖Tg‖
    >>> [round(v, 4) for v in e.tolist()], round(float((e / a.abs()).norm()), 6)
    ([0.8944, 0.8944], 1.0)
"""

from __future__ import annotations

import contextlib
import math
import warnings
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__all__ = [
    "VARIANTS",
    "PRECOND_MODES",
    "NonFiniteGradientError",
    "global_norm",
    "sam_perturbation",
    "adaptive_perturbation",
    "preconditioned_perturbation",
    "adam_preconditioner",
    "angle_combine",
    "angle_weights",
    "cosine_similarity",
    "SAMFamily",
    "SAM",
]

#: Perturbation paths (the preconditioned forms are ``precondition=True`` on ``sam``/``fsam``).
VARIANTS = ("sam", "fsam", "lsam", "angle_sam")
#: Normalizations of the preconditioned perturbation (seed 003 eq. 12; see the module docstring).
PRECOND_MODES = ("pre", "post", "dual")
_NONFINITE = ("raise", "skip")
_STEP0 = ("identity", "zero")
_BN_STATS = ("unperturbed", "every_pass")

Tensors = Sequence[torch.Tensor]


class NonFiniteGradientError(FloatingPointError):
    """A gradient of a SAM-family pass has a NaN or infinite entry (parameters left unchanged)."""


# --------------------------------------------------------------------------------------------
# Pure kernels
# --------------------------------------------------------------------------------------------


def global_norm(tensors: Iterable[torch.Tensor | None]) -> torch.Tensor:
    """``‖(t_1, ..., t_n)‖₂`` over all tensors together, as a float64 scalar (``None`` skipped).

    Each tensor's norm is taken in its own precision, except bf16/fp16 tensors, whose norms are
    accumulated and returned in float32 (a bf16 norm keeps only 3 significant digits).
    """
    present = [t.detach() for t in tensors if t is not None]
    if not present:
        return torch.zeros((), dtype=torch.float64)
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in present:
        by_dtype.setdefault(t.dtype, []).append(t)
    norms = []
    for dtype, group in by_dtype.items():
        low = dtype in (torch.bfloat16, torch.float16)
        norms += torch._foreach_norm(group, 2, dtype=torch.float32 if low else None)
    device = norms[0].device
    return torch.linalg.vector_norm(torch.stack([n.to(device, torch.float64) for n in norms]))


def _check_rho(rho) -> float:
    if isinstance(rho, bool) or not isinstance(rho, (int, float)):
        raise TypeError(f"`rho` must be a real number; got {rho!r} ({type(rho).__name__}).")
    if not math.isfinite(rho) or rho < 0:
        raise ValueError(
            f"`rho` must be finite and >= 0; got {rho!r}. Use a small radius such as 0.05 "
            "(rho=0 reproduces the base optimizer)."
        )
    return float(rho)


def _scale(norm: torch.Tensor, rho: float) -> float:
    n = float(norm)
    return rho / n if n > 0 else 0.0


def sam_perturbation(grads: Sequence[torch.Tensor | None], rho: float) -> list[torch.Tensor | None]:
    """SAM ascent step ``e_i = ρ g_i/‖g‖₂`` with one global norm over all tensors (eq. 2).

    Args:
        grads: gradients (``None`` entries are passed through as ``None``).
        rho: the radius ``ρ >= 0``; ``‖e‖ = ρ`` (``e = 0`` when every gradient vanishes).

    Returns:
        One perturbation per gradient (detached).

    Raises:
        ValueError: if ``rho`` is negative or not finite.
    """
    rho = _check_rho(rho)
    scale = _scale(global_norm(grads), rho)
    return [None if g is None else g.detach() * scale for g in grads]


def adaptive_perturbation(
    grads: Sequence[torch.Tensor | None], params: Sequence[torch.Tensor], rho: float
) -> list[torch.Tensor | None]:
    """ASAM ascent step ``e = ρ T²g/‖Tg‖₂`` with ``T = |θ|`` element-wise (Kwon et al. 2021).

    The maximiser of ``gᵀe`` over ``‖T⁻¹e‖₂ <= ρ``, so ``‖T⁻¹e‖₂ = ρ`` (davda54/sam's
    ``adaptive=True``: ``e = ρ θ² g / ‖|θ| g‖``). Entries with ``θ = 0`` are not perturbed.

    Args:
        grads: gradients (``None`` entries are passed through as ``None``).
        params: the parameters ``θ`` (same shapes as ``grads``).
        rho: the radius ``ρ >= 0`` in the ``T⁻¹``-scaled norm.

    Returns:
        One perturbation per gradient (detached); ``e = 0`` when ``Tg = 0``.

    Raises:
        ValueError: for a bad ``rho`` or mismatched lengths.
    """
    rho = _check_rho(rho)
    if len(params) != len(grads):
        raise ValueError(
            f"`params` has {len(params)} tensors but `grads` has {len(grads)}; pass the "
            "parameter of every gradient."
        )
    scaled = [None if g is None else g.detach() * p.detach().abs()
              for g, p in zip(grads, params, strict=True)]  # fmt: skip
    scale = _scale(global_norm(scaled), rho)
    return [None if t is None else t.mul_(p.detach().abs()).mul_(scale)
            for t, p in zip(scaled, params, strict=True)]  # fmt: skip


def preconditioned_perturbation(
    grads: Tensors, rho: float, precond_inv: Tensors | None = None, *, mode: str = "post"
) -> list[torch.Tensor]:
    """Preconditioned SAM perturbation ``e = ρ M⁻¹g / N`` (seed 003 eq. 12).

    ``N`` is ``‖g‖₂`` for ``mode="pre"`` (eq. 12 literally), ``‖M⁻¹g‖₂`` for ``"post"`` (so
    ``‖e‖₂ = ρ``) and ``sqrt(gᵀM⁻¹g)`` for ``"dual"`` (so ``‖e‖_M = ρ``). With ``M = I``
    (``precond_inv=None`` or all ones) every mode equals :func:`sam_perturbation`.

    Args:
        grads: gradients ``g`` (one tensor per parameter).
        rho: the radius ``ρ >= 0``.
        precond_inv: diagonals of ``M⁻¹`` (same shapes as ``grads``), or None for ``M = I``.
        mode: ``"pre"``, ``"post"`` or ``"dual"``.

    Returns:
        The perturbation, one tensor per gradient; zero where ``N = 0``.

    Raises:
        ValueError: for a bad ``rho`` or ``mode`` or mismatched lengths.
    """
    rho = _check_rho(rho)
    if mode not in PRECOND_MODES:
        raise ValueError(f"`mode` must be one of {PRECOND_MODES}; got {mode!r}.")
    g = [t.detach() for t in grads]
    if precond_inv is None:
        return [t * _scale(global_norm(g), rho) for t in g]
    if len(precond_inv) != len(g):
        raise ValueError(
            f"`precond_inv` has {len(precond_inv)} tensors but `grads` has {len(g)}; pass one "
            "M⁻¹ diagonal per gradient."
        )
    d = [t * m for t, m in zip(g, precond_inv, strict=True)]
    if mode == "pre":
        norm = global_norm(g)
    elif mode == "post":
        norm = global_norm(d)
    else:
        dots = [torch.vdot(a.flatten().to(torch.float64), b.flatten().to(torch.float64))
                for a, b in zip(g, d, strict=True)]  # fmt: skip
        norm = torch.sqrt(torch.clamp(torch.stack(dots).sum(), min=0.0))
    scale = _scale(norm, rho)
    return [t.mul_(scale) for t in d]


def adam_preconditioner(
    optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor], *,
    bias_correction: bool = True,
) -> list[torch.Tensor] | None:  # fmt: skip
    """``M⁻¹ = 1/(sqrt(v̂) + ε)``, the inverse denominator of an Adam-type optimizer's update.

    ``v̂ = v/(1 − β₂ᵏ)`` is the bias-corrected second moment after ``k`` completed steps (read
    from ``optimizer.state`` *before* the current step; ``max_exp_avg_sq`` under ``amsgrad``).

    Args:
        optimizer: a ``torch.optim.Adam``/``AdamW`` (or anything keeping ``exp_avg_sq``).
        params: the parameters, in the order wanted.
        bias_correction: divide ``v`` by ``1 − β₂ᵏ`` (``False``: raw ``sqrt(v) + ε``).

    Returns:
        One ``M⁻¹`` diagonal per parameter, or ``None`` before the first step (``k = 0``, no
        second moment yet). Parameters without state get ones (``M = I``).
    """
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    out, any_state = [], False
    for p in params:
        st = optimizer.state.get(p, {})
        step = float(st["step"]) if "step" in st else 0.0
        if step <= 0 or "exp_avg_sq" not in st:
            out.append(torch.ones_like(p))
            continue
        any_state = True
        group = group_of[id(p)]
        v = st["max_exp_avg_sq"] if group.get("amsgrad", False) else st["exp_avg_sq"]
        bc = 1.0 - group["betas"][1] ** step if bias_correction else 1.0
        out.append(torch.reciprocal((v / bc).sqrt_().add_(group["eps"])))
    return out if any_state else None


def _angle_coefficients(w_logit: float, w_func: float) -> tuple[float, float, float]:
    """ANGLE-SAM's weights of ``(g, g_LSAM, g_FSAM)``: ``(1 − w_l − w_f, w_l, w_f)``."""
    return 1.0 - w_logit - w_func, w_logit, w_func


def angle_combine(
    g: Tensors, g_lsam: Tensors, g_fsam: Tensors, w_logit: float, w_func: float
) -> list[torch.Tensor]:
    """ANGLE-SAM gradient ``g + w_logit (g_LSAM − g) + w_func (g_FSAM − g)`` (App. D eq. 19).

    ``(0, 1)`` is Functional-SAM, ``(1, 0)`` Logit-SAM and ``(1, 1)`` SAM to first order in ρ;
    the paper's ``(sin φ, cos φ)`` is :func:`angle_weights`. (:class:`SAMFamily` accumulates the
    same sum in ``p.grad``, pass by pass, so that one all-reduce covers it.)
    """
    c, wl, wf = _angle_coefficients(w_logit, w_func)
    return [c * a + wl * b + wf * f for a, b, f in zip(g, g_lsam, g_fsam, strict=True)]


def angle_weights(phi: float) -> tuple[float, float]:
    """``(w_logit, w_func) = (sin φ, cos φ)`` (App. D eq. 18).

    φ = 0 is Functional-SAM, φ = π/2 Logit-SAM; φ = π/4 is SAM with radius ``ρ/√2`` to first
    order (not SAM(ρ): the paper's remark drops the ``1/√2``).
    """
    return math.sin(phi), math.cos(phi)


def cosine_similarity(a: Iterable[torch.Tensor], b: Iterable[torch.Tensor]) -> float:
    """Cosine between two parameter-shaped tensor lists, flattened and concatenated."""
    a, b = list(a), list(b)
    dot = sum(float(torch.vdot(x.flatten().double(), y.flatten().double()))
              for x, y in zip(a, b, strict=True))  # fmt: skip
    na, nb = float(global_norm(a)), float(global_norm(b))
    return dot / (na * nb) if na > 0 and nb > 0 else float("nan")


# --------------------------------------------------------------------------------------------
# RNG forking (the same dropout masks in every pass of a micro-batch)
# --------------------------------------------------------------------------------------------


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def _unpack(out, needs_logits: bool, variant: str):
    if isinstance(out, (tuple, list)) and len(out) == 2:
        loss, logits = out
    elif isinstance(out, torch.Tensor):
        loss, logits = out, None
    else:
        raise TypeError(
            "a SAM-family closure must return `(loss, logits)` (or just `loss` for SAM/PSAM); "
            f"got {type(out).__name__}."
        )
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise TypeError(f"the closure's loss must be a scalar tensor; got {loss!r:.80}.")
    if needs_logits:
        if not isinstance(logits, torch.Tensor):
            raise TypeError(
                f"variant {variant!r} needs the logits: the closure must return "
                "`(loss, logits)` with `loss` computed from `logits`."
            )
        if not logits.requires_grad:
            raise ValueError(
                "the closure's logits do not require grad; the trainable parameters must "
                "reach the logits (unfreeze them or attach adapters)."
            )
    return loss, logits


# --------------------------------------------------------------------------------------------
# The optimizer shell
# --------------------------------------------------------------------------------------------


def _local_pass_hook(state, bucket):
    """DDP comm hook of :meth:`SAMFamily.attach_ddp` (``sync_perturbation=False``).

    Pass 1's backward (before :meth:`SAMFamily.first_step`) keeps each replica's own gradient;
    every other backward is DDP's all-reduce (mean), so a davda54-style loop that calls
    ``loss.backward()`` itself gets the per-replica perturbation without ``no_sync``.
    """
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    opt = state()
    if opt is not None and opt._local_pass:
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut
    group = getattr(opt._ddp, "process_group", None) if opt is not None else None
    return allreduce_hook(group, bucket)


_BN_NAMES = ("running_mean", "running_var", "num_batches_tracked")


def _world_size() -> int:
    """Processes of the default ``torch.distributed`` group (1 when it is not initialized)."""
    dist = torch.distributed
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


class SAMFamily(torch.optim.Optimizer):
    """SAM, Functional-SAM, Logit-SAM, ANGLE-SAM and their preconditioned forms, around a base.

    Args:
        params: parameters or param groups (one radius and one global norm for all of them).
        base_optimizer_cls: the base optimizer (``torch.optim.AdamW``, ``SGD``, ...); it is built
            on the same param groups and takes the SAM-family gradient in place of the gradient.
        rho: the radius ``ρ >= 0`` (``ρ = 0`` reproduces the base optimizer exactly).
        variant: ``"sam"`` (eq. 2), ``"fsam"`` (eq. 11), ``"lsam"`` or ``"angle_sam"``
            (App. D).
        **base_kwargs: passed to ``base_optimizer_cls`` (``lr``, ``weight_decay``, ...).

    Other Parameters:
        precondition: perturb along ``M⁻¹g`` with ``M`` from the base's Adam second moment
            (eq. 12; PSAM = ``sam`` + this, PFSAM = ``fsam`` + this). Needs an Adam-type base.
        precond_norm: ``"pre"``, ``"post"`` or ``"dual"`` (see :func:`preconditioned_perturbation`).
        precond_step0: before the base's first step there is no ``M``: ``"identity"`` uses
            ``M = I`` (the plain variant), ``"zero"`` takes the base step without perturbation.
        precond_bias_correction: use ``v̂ = v/(1 − β₂ᵏ)`` (``False``: raw ``v``).
        adaptive: ASAM's perturbation ``ρ T²g/‖Tg‖``, ``T = |θ|`` (:func:`adaptive_perturbation`;
            davda54/sam's ``adaptive=True``), for ``"sam"`` and ``"fsam"`` without
            preconditioning.
        angle_weights: ``(w_logit, w_func)`` for ``"angle_sam"`` (required there, rejected
            elsewhere); ``angle_weights(φ)`` gives the paper's ``(sin φ, cos φ)``.
        rho_warmup_steps: ramp ``ρ_t = ρ · min(1, t/N)`` over the first ``N`` steps (``t`` =
            completed steps; the paper's fix for large-model NaNs). 0: constant ``ρ``.
        nonfinite: on a NaN/inf gradient ``"raise"`` :class:`NonFiniteGradientError` or
            ``"skip"`` the step with a warning (counted in ``skipped_steps``); either way the
            parameters and the base state are left as they were before the step. (With an
            enabled ``grad_scaler`` an overflow is skipped silently, as the scaler would.)
        max_grad_norm: clip the gradient handed to the base optimizer to this global norm.
        track_direction: keep ``g`` to report ``cos(update gradient, g)`` in ``last_info``.
        sync_perturbation: in a multi-process run, perturb with the all-reduced gradient
            (``True``, default: equals one process on the whole batch) or with each replica's
            own (``False``: the SAM paper's per-replica perturbation; needs
            :meth:`attach_ddp`). See the module docstring.
        grad_scaler: a ``torch.amp.GradScaler`` for fp16 loss scaling (see the module
            docstring); the caller still calls ``scaler.update()`` after each step.
        batchnorm_stats: ``"unperturbed"`` (default): batch-norm running statistics are left
            unchanged by the forwards between ``first_step`` and ``second_step`` (see the module
            docstring, BatchNorm); ``"every_pass"``: every forward updates them.

    Attributes:
        base_optimizer: the base optimizer (its ``param_groups`` are this optimizer's).
        sam_steps, skipped_steps: counters.
        last_info: ``rho``, ``grad_norm``, ``perturbation_norm``, ``update_grad_norm``,
            ``preconditioned`` (and ``cosine`` with ``track_direction``) of the last step.

    Raises:
        ValueError, TypeError: for a bad argument (named in the message), before any state.
    """

    def __init__(
        self,
        params: Iterable,
        base_optimizer_cls: type[torch.optim.Optimizer],
        rho: float = 0.05,
        *,
        variant: str = "sam",
        precondition: bool = False,
        precond_norm: str = "post",
        precond_step0: str = "identity",
        precond_bias_correction: bool = True,
        adaptive: bool = False,
        angle_weights: tuple[float, float] | None = None,
        rho_warmup_steps: int = 0,
        nonfinite: str = "raise",
        max_grad_norm: float | None = None,
        track_direction: bool = False,
        sync_perturbation: bool = True,
        grad_scaler: Any = None,
        batchnorm_stats: str = "unperturbed",
        **base_kwargs: Any,
    ) -> None:
        rho = _check_rho(rho)
        if not (isinstance(base_optimizer_cls, type)
                and issubclass(base_optimizer_cls, torch.optim.Optimizer)):  # fmt: skip
            raise TypeError(
                "`base_optimizer_cls` must be a torch.optim.Optimizer subclass (e.g. "
                f"torch.optim.AdamW); got {base_optimizer_cls!r}."
            )
        if variant not in VARIANTS:
            raise ValueError(
                f"unknown `variant` {variant!r}; choose one of {VARIANTS} (preconditioned "
                "forms: precondition=True)."
            )
        if precondition and not issubclass(
            base_optimizer_cls, torch.optim.Adam | torch.optim.AdamW
        ):
            raise ValueError(
                "`precondition=True` takes M from an Adam-type base optimizer's second moment; "
                f"got base {base_optimizer_cls.__name__}. Use torch.optim.AdamW as the base, or "
                "precondition=False."
            )
        if precond_norm not in PRECOND_MODES:
            raise ValueError(
                f"unknown `precond_norm` {precond_norm!r}; choose one of {PRECOND_MODES}."
            )
        if precond_step0 not in _STEP0:
            raise ValueError(f"unknown `precond_step0` {precond_step0!r}; choose one of {_STEP0}.")
        if batchnorm_stats not in _BN_STATS:
            raise ValueError(
                f"unknown `batchnorm_stats` {batchnorm_stats!r}; choose one of {_BN_STATS} "
                "('unperturbed': running statistics updated at θ only, once per forward there)."
            )
        for name, flag in (("adaptive", adaptive), ("sync_perturbation", sync_perturbation)):
            if not isinstance(flag, bool):
                raise TypeError(f"`{name}` must be True or False; got {flag!r}.")
        if adaptive and (variant not in ("sam", "fsam") or precondition):
            raise ValueError(
                "`adaptive=True` (ASAM) applies to variants 'sam' and 'fsam' without "
                f"preconditioning; got variant={variant!r}, precondition={precondition}."
            )
        if grad_scaler is not None and not all(
            callable(getattr(grad_scaler, m, None))
            for m in ("scale", "unscale_", "update", "get_scale", "is_enabled")
        ):
            raise TypeError(
                "`grad_scaler` must be a torch.amp.GradScaler (or None); got "
                f"{type(grad_scaler).__name__}."
            )
        if variant == "angle_sam":
            if angle_weights is None:
                raise ValueError(
                    "variant 'angle_sam' needs explicit `angle_weights=(w_logit, w_func)`, e.g. "
                    "angle_weights(phi) = (sin phi, cos phi); (1, 1) is SAM to first order."
                )
            if len(angle_weights) != 2 or not all(math.isfinite(float(w)) for w in angle_weights):
                raise ValueError(
                    f"`angle_weights` must be two finite numbers; got {angle_weights!r}."
                )
        elif angle_weights is not None:
            raise ValueError(
                f"`angle_weights` only applies to variant 'angle_sam'; got variant {variant!r}."
            )
        if not isinstance(rho_warmup_steps, int) or rho_warmup_steps < 0:
            raise ValueError(f"`rho_warmup_steps` must be an int >= 0; got {rho_warmup_steps!r}.")
        if nonfinite not in _NONFINITE:
            raise ValueError(f"unknown `nonfinite` {nonfinite!r}; choose one of {_NONFINITE}.")
        if max_grad_norm is not None and not (max_grad_norm > 0 and math.isfinite(max_grad_norm)):
            raise ValueError(f"`max_grad_norm` must be None or > 0; got {max_grad_norm!r}.")
        params = list(params)
        n_params = sum(
            len(list(g["params"])) if isinstance(g, dict) else 1 for g in params
        )  # fmt: skip
        if n_params == 0:
            raise ValueError(
                "`params` is empty: there are no parameters to perturb (is every parameter "
                "frozen?). Pass trainable parameters, e.g. unfreeze layers or attach adapters."
            )
        super().__init__(params, dict(rho=rho, adaptive=adaptive, **base_kwargs))
        self.base_optimizer = base_optimizer_cls(self.param_groups, **base_kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)
        self.variant = variant
        self.precondition = bool(precondition)
        self.precond_norm = precond_norm
        self.precond_step0 = precond_step0
        self.precond_bias_correction = bool(precond_bias_correction)
        self.angle_weights = None if angle_weights is None else tuple(map(float, angle_weights))
        self.rho_warmup_steps = rho_warmup_steps
        self.nonfinite = nonfinite
        self.max_grad_norm = max_grad_norm
        self.track_direction = bool(track_direction)
        self.sync_perturbation = sync_perturbation
        self.grad_scaler = grad_scaler
        self.batchnorm_stats = batchnorm_stats
        self._bn_handles: list[Any] = []
        self._ddp_hooked = False  # our comm hook keeps pass 1 local (sync_perturbation=False)
        self._local_pass = True  # under that hook: the next backward is pass 1's (not reduced)
        self._driving = False  # inside step(): pass 1 already ran under no_sync where needed
        self.sam_steps = 0
        self.skipped_steps = 0
        self.last_info: dict[str, Any] = {}
        self._pending: list[tuple[Callable | None, torch.Tensor | None, Any]] = []
        self._pass1_norm: float | None = None
        self._ddp: torch.nn.Module | None = None
        # davda54-style closures: the gradients this optimizer left in p.grad after its last step
        # (a gradient not among them was computed by the caller since), and the closure style
        # seen so far ("forward": ours, "backward": davda54's, None: not yet known)
        self._left_grads: dict[int, tuple[Any, int]] = {}
        self._closure_style: str | None = None

    # -- small helpers -------------------------------------------------------------------------
    @property
    def needs_logits(self) -> bool:
        """Whether the closure must return the logits (every variant but SAM)."""
        return self.variant != "sam"

    @property
    def rho(self) -> float:
        """The configured radius ``ρ`` (shared by all param groups)."""
        rhos = {g.get("rho", self.defaults["rho"]) for g in self.param_groups}
        if len(rhos) != 1:
            raise ValueError(f"all param groups must share one `rho`; got {sorted(rhos)}.")
        return float(rhos.pop())

    @property
    def adaptive(self) -> bool:
        """ASAM's perturbation (``group["adaptive"]``, as davda54/sam; one value for all groups)."""
        flags = {bool(g.get("adaptive", self.defaults.get("adaptive", False)))
                 for g in self.param_groups}  # fmt: skip
        if len(flags) != 1:
            raise ValueError("all param groups must share one `adaptive`; got True and False.")
        return flags.pop()

    def rho_at(self, step: int) -> float:
        """``ρ_t`` after ``step`` completed steps (the linear warm-up, then constant)."""
        if self.rho_warmup_steps == 0:
            return self.rho
        return self.rho * min(1.0, step / self.rho_warmup_steps)

    def attach_ddp(self, model: torch.nn.Module) -> SAMFamily:
        """Use ``model`` (the ``DistributedDataParallel`` wrapper of these parameters) for sync.

        The optimizer then runs each backward pass that is not the last of its pass under
        ``model.no_sync()`` (and pass 1 entirely with ``sync_perturbation=False``), so every
        pass all-reduces once. ``SAMFamilyTrainer`` calls this itself.

        Returns:
            ``self``.

        Raises:
            TypeError: when ``model`` has no ``no_sync`` context (is not DDP-wrapped).
            ValueError: when ``model`` does not hold this optimizer's parameters.
        """
        if not isinstance(model, torch.nn.Module) or not callable(getattr(model, "no_sync", None)):
            raise TypeError(
                "`model` must be the DistributedDataParallel-wrapped model (it has no_sync()); "
                f"got {type(model).__name__}."
            )
        held = {id(p) for p in model.parameters()}
        if any(id(p) not in held for p in self._params()):
            raise ValueError(
                "`model` does not hold this optimizer's parameters; attach the DDP wrapper of "
                "the model the optimizer was built on."
            )
        self._ddp = model
        if not self.sync_perturbation and not self._ddp_hooked and not getattr(
            model, "_comm_hooks", None
        ):
            try:  # DDP takes one comm hook; a model with its own keeps it (two-step API refused)
                model.register_comm_hook(weakref.ref(self), _local_pass_hook)
                self._ddp_hooked = True
            except (RuntimeError, AttributeError):
                pass
        return self

    def _sync(self, sync: bool):
        """``no_sync()`` of the attached DDP model unless ``sync`` (or in one process)."""
        if sync or self._ddp is None or _world_size() == 1:
            return contextlib.nullcontext()
        return self._ddp.no_sync()

    def _check_distributed(self) -> None:
        if not self.sync_perturbation and self._ddp is None and _world_size() > 1:
            raise ValueError(
                f"`sync_perturbation=False` in a {_world_size()}-process run needs the "
                "DistributedDataParallel model to keep pass 1 local: call "
                "optimizer.attach_ddp(ddp_model) first (SAMFamilyTrainer does this)."
            )

    def _scaling(self) -> bool:
        """Whether an enabled grad scaler scales the losses."""
        return self.grad_scaler is not None and self.grad_scaler.is_enabled()

    def _loss_scale(self) -> float:
        """The grad scaler's current scale (1.0 without an enabled scaler)."""
        return float(self.grad_scaler.get_scale()) if self._scaling() else 1.0

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def _scaler_infs(self) -> dict[Any, torch.Tensor]:
        """The grad scaler's inf checks of this optimizer (recorded when it unscaled pass 1)."""
        found = getattr(self.grad_scaler, "_found_inf_per_device", None)
        infs = found(self) if callable(found) else None
        if not infs:
            raise RuntimeError(
                "pass 1's gradient was not unscaled by the grad scaler: with `grad_scaler`, call "
                "step(closure), or complete first_pass() steps with scaler.step(optimizer) "
                "(which unscales it before the perturbation's norm is taken)."
            )
        return infs

    def _mark_overflow(self) -> None:
        """Record an overflow for this optimizer in the grad scaler, so ``update()`` backs off."""
        for t in self._scaler_infs().values():
            t.fill_(1.0)

    def _nonfinite(self, where: str) -> bool:
        """Handle a non-finite gradient: restore, then skip (scaler), raise or warn; True: skip."""
        self._restore()
        self._end_window()
        self._drop_g()
        self._pending.clear()
        self.zero_grad(set_to_none=True)
        self._left_grads = {}
        if self._scaling():  # an fp16 overflow: the scaler's business, not an error
            self._mark_overflow()
            self.skipped_steps += 1
            self.last_info = {"skipped": True, "overflow": True}
            return True
        msg = (
            f"non-finite gradient in the {where} of SAM-family step {self.sam_steps} "
            f"(variant {self.variant!r}, rho={self.rho_at(self.sam_steps)}); parameters and "
            "optimizer state are unchanged."
        )
        if self.nonfinite == "raise":
            raise NonFiniteGradientError(
                msg + " Lower the learning rate or rho, or pass nonfinite='skip' to skip such "
                "steps."
            )
        self.skipped_steps += 1
        self.last_info = {"skipped": True}
        warnings.warn(msg + " Step skipped (nonfinite='skip').", RuntimeWarning, stacklevel=3)
        return True

    @staticmethod
    def _finite(tensors) -> bool:
        present = [t for t in tensors if t is not None]
        return not present or bool(torch.isfinite(global_norm(present)))

    @torch.no_grad()
    def _restore(self) -> None:
        for p in self._params():
            theta = self.state[p].pop("theta", None)
            if theta is not None:
                p.copy_(theta)

    def _drop_g(self) -> None:
        for p in self._params():
            self.state[p].pop("g", None)

    def _remember_grads(self) -> None:
        self._left_grads = {id(p): (weakref.ref(p.grad), p.grad._version)
                            for p in self._params() if p.grad is not None}  # fmt: skip

    def _fresh_gradient(self) -> bool:
        """Whether ``p.grad`` holds a non-zero gradient computed since our last step (davda54)."""
        grads = []
        fresh = False
        for p in self._params():
            if p.grad is None:
                continue
            grads.append(p.grad)
            left = self._left_grads.get(id(p))
            fresh |= left is None or left[0]() is not p.grad or left[1] != p.grad._version
        return fresh and float(global_norm(grads)) > 0

    # -- the two halves (also usable by hand for SAM/PSAM) --------------------------------------
    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> bool:
        """Climb to ``θ + e`` from the gradient in ``p.grad`` (accumulated over micro-batches).

        Saves a copy of ``θ`` (restored exactly by :meth:`second_step`). Returns False when the
        step was skipped for a non-finite gradient (``nonfinite="skip"``, or a scaler overflow).
        """
        if (not self.sync_perturbation and not self._driving and not self._ddp_hooked
                and _world_size() > 1):  # fmt: skip
            raise ValueError(
                f"`sync_perturbation=False` with first_step()/second_step() in a {_world_size()}-"
                "process run: the gradient in p.grad was already all-reduced by DDP's backward, "
                "so the per-replica perturbation cannot be taken from it. Call "
                "optimizer.attach_ddp(ddp_model) before the first backward, on a DDP model "
                "without a comm hook of its own (the optimizer then keeps pass 1 local), or "
                "use step(closure)."
            )
        params = [p for p in self._params() if p.grad is not None]
        grads = [p.grad for p in params]
        if not self._finite(grads):
            return not self._nonfinite("first pass (gradient at theta)")
        if self._pass1_norm is not None and grads:  # undo a global rescale (a Trainer's clip)
            now = float(global_norm(grads))
            if now > 0 and not math.isclose(now, self._pass1_norm, rel_tol=1e-6):
                torch._foreach_mul_(grads, self._pass1_norm / now)
        rho = self.rho_at(self.sam_steps)
        minv = None
        if self.precondition:
            minv = adam_preconditioner(
                self.base_optimizer, params, bias_correction=self.precond_bias_correction
            )
            if minv is None and self.precond_step0 == "zero":
                rho = 0.0
        if self.adaptive:
            e = adaptive_perturbation(grads, params, rho)
        else:
            e = preconditioned_perturbation(grads, rho, minv, mode=self.precond_norm)
        self.last_info = {
            "rho": rho,
            "grad_norm": float(global_norm(grads)),
            "perturbation_norm": float(global_norm(e)),
            "preconditioned": minv is not None,
        }
        keep_g = self.variant == "angle_sam" or self.track_direction
        for p, e_i in zip(params, e, strict=True):
            self.state[p]["theta"] = p.detach().clone()
            p.add_(e_i)
            if keep_g:
                self.state[p]["g"] = p.grad.detach().clone()
        del e, minv
        self._local_pass = False  # the backward passes at θ + e (and θ) are all-reduced
        self._freeze_running_stats()
        if zero_grad:
            self.zero_grad(set_to_none=True)
        return True

    def _freeze_running_stats(self) -> None:
        """Until :meth:`_end_window`, batch-norm layers keep their running statistics.

        Between ``first_step`` and ``second_step`` every forward runs at the perturbed weights
        (or re-runs a micro-batch at θ): its batch statistics must not enter the running mean
        and variance (davda54/sam's ``disable_running_stats``). A process-wide forward hook
        saves a layer's buffers (``running_mean``, ``running_var``, ``num_batches_tracked``)
        before its forward and puts them back after it, for every ``_NormBase`` layer in
        training mode whose affine parameters this optimizer holds (or that has none).
        """
        if self.batchnorm_stats != "unperturbed" or self._bn_handles:
            return
        from torch.nn.modules.batchnorm import _NormBase
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        ours = {id(p) for p in self._params()}
        saved: dict[int, dict[str, torch.Tensor]] = {}

        def before(module, args):  # the forward updates copies (autograd may save them)
            if (isinstance(module, _NormBase) and module.training and module.track_running_stats
                    and (module.weight is None or id(module.weight) in ours)):  # fmt: skip
                keep = {n: module._buffers[n] for n in _BN_NAMES
                        if module._buffers.get(n) is not None}  # fmt: skip
                saved[id(module)] = keep
                for n, b in keep.items():
                    module._buffers[n] = b.detach().clone()

        def after(module, args, out):  # the untouched buffers back in place
            module._buffers.update(saved.pop(id(module), {}))

        self._bn_handles = [register_module_forward_pre_hook(before),
                            register_module_forward_hook(after)]  # fmt: skip

    def _end_window(self) -> None:
        """Back at θ for good: running statistics update again, pass 1 is local again."""
        for h in self._bn_handles:
            h.remove()
        self._bn_handles = []
        self._local_pass = True

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> bool:
        """Return to ``θ`` and take the base step with the gradient now in ``p.grad``.

        Returns False when the step was skipped for a non-finite gradient.
        """
        self._restore()
        self._end_window()
        params = self._params()
        if not self._finite([p.grad for p in params]):
            return not self._nonfinite("second pass (SAM-family gradient)")
        with_grad = [p for p in params if p.grad is not None]
        if self.max_grad_norm is not None and with_grad:
            torch.nn.utils.clip_grad_norm_(with_grad, self.max_grad_norm, foreach=True)
        self.last_info["update_grad_norm"] = float(global_norm([p.grad for p in with_grad]))
        if self.track_direction:
            gs = [self.state[p].get("g", torch.zeros_like(p)) for p in with_grad]
            self.last_info["cosine"] = cosine_similarity([p.grad for p in with_grad], gs)
        self._drop_g()
        self.base_optimizer.step()
        self.sam_steps += 1
        self.last_info.setdefault("skipped", False)
        if zero_grad:
            self.zero_grad(set_to_none=True)
        self._remember_grads()
        return True

    # -- the driver ------------------------------------------------------------------------------
    def first_pass(
        self,
        loss: torch.Tensor,
        logits: torch.Tensor | None = None,
        *,
        closure: Callable[[], Any] | None = None,
        rng_state: Any = None,
        backward: Callable[[torch.Tensor], None] | None = None,
    ) -> None:
        """Backward pass 1 of one micro-batch at ``θ`` and registration for the later passes.

        Accumulates ``g`` in ``p.grad``, keeps ``r = ∂loss/∂logits`` when the variant needs it,
        and queues ``closure`` (which re-runs this micro-batch's forward and returns
        ``(loss, logits)``) for :meth:`step`. ``rng_state`` is the RNG state from just before
        this micro-batch's forward (replayed in the later passes).

        Several processes: whether this backward all-reduces is the caller's choice (run it
        under ``no_sync()`` for ``sync_perturbation=False``; for ``True`` let the last
        micro-batch's backward synchronise, as the Trainer does).

        Args:
            loss: this micro-batch's (already scaled) loss at ``θ``.
            logits: the logits it was computed from (every variant but SAM needs them).
            closure: re-evaluates the micro-batch; required.
            rng_state: RNG state before the forward (default: the current state).
            backward: how to backpropagate the loss (default ``loss.backward()``; e.g. an
                ``accelerate`` ``Accelerator.backward``, which applies an fp16 loss scale).
        """
        if closure is None or not callable(closure):
            raise TypeError(
                "`closure` (re-evaluates the micro-batch, returning (loss, logits)) is required."
            )
        self._check_distributed()
        loss, logits = _unpack((loss, logits), self.needs_logits, self.variant)
        keep_r = self.variant in ("fsam", "angle_sam")
        if keep_r:
            logits.retain_grad()
        (backward or torch.Tensor.backward)(loss)
        r = None
        if keep_r:
            if logits.grad is None:
                raise ValueError(
                    f"variant {self.variant!r}: the loss does not depend on the logits passed "
                    "with it (no gradient reached them); pass the logits the loss was computed "
                    "from (under autocast, not a float32 copy made after the loss)."
                )
            r = logits.grad.detach()
            logits.grad = None
        if self.variant == "angle_sam":  # in unscaled units (an fp16 scale is undone later)
            grads = [p.grad for p in self._params()]
            self._pass1_norm = float(global_norm(grads)) / self._loss_scale()
        self._pending.append((closure, r, rng_state if rng_state is not None else _rng_state()))

    def step(self, closure=None):  # type: ignore[override]
        """One full SAM-family step.

        Args:
            closure: a callable returning ``(loss, logits)`` without calling backward (see the
                module docstring), or a list of them (micro-batches, losses already scaled).
                For plain SAM/ASAM also a davda54/sam closure (calls backward, returns the
                loss). ``None`` completes a step whose first passes were recorded with
                :meth:`first_pass` (the Hugging Face adapter does this).

        Returns:
            The summed first-pass loss (detached) when closures were given (for a davda54
            closure, what it returned at ``θ + e``), else None.
        """
        if closure is None:
            if not self._pending:
                raise RuntimeError(
                    "SAMFamily.step needs a `closure` (returning (loss, logits)), or first "
                    "passes recorded with first_pass(); or call first_step()/second_step() "
                    "yourself."
                )
            self._finish()
            return None
        closures = [closure] if callable(closure) else list(closure)
        if not closures or not all(callable(c) for c in closures):
            raise TypeError("`closure` must be a callable or a non-empty list of callables.")
        self._check_distributed()
        davda54_ok = self.variant == "sam" and len(closures) == 1
        if davda54_ok and self._closure_style != "forward" and self._fresh_gradient():
            done, out = self._davda54_step(closures[0])
            if done:
                return out
        self._pending.clear()
        self._pass1_norm = None
        self.zero_grad(set_to_none=True)
        scaler = self.grad_scaler if self._scaling() else None
        backward = None if scaler is None else (lambda t: scaler.scale(t).backward())
        total, last = None, len(closures) - 1
        for i, c in enumerate(closures):
            rng = _rng_state()
            with self._sync(self.sync_perturbation and i == last):
                with torch.enable_grad():
                    out = c()
                if i == 0 and any(p.grad is not None for p in self._params()):
                    if not davda54_ok:
                        raise RuntimeError(
                            "the closure called backward(): a SAM-family closure must only run "
                            "the forward pass and return (loss, logits); the optimizer runs "
                            "backward (a davda54/sam closure works with variant 'sam', one "
                            "closure per step)."
                        )
                    return self._davda54_step(c)[1]  # its gradient at θ is now in p.grad
                self._closure_style = "forward"
                loss, logits = _unpack(out, self.needs_logits, self.variant)
                if not self.needs_logits:  # SAM: holding the logits would only cost memory
                    out = logits = None
                self.first_pass(loss, logits, closure=c, rng_state=rng, backward=backward)
            total = loss.detach() if total is None else total + loss.detach()
            del out, loss, logits  # pass 1's logits must not live through pass 2
        if scaler is not None:
            scaler.unscale_(self)  # pass 1's gradient unscaled (and checked) before its norm
        self._finish()
        return total

    def _davda54_step(self, closure) -> tuple[bool, Any]:
        """davda54/sam's step: climb from the gradient in ``p.grad``, one closure call at θ + e.

        Returns ``(done, closure's return)``; ``done`` is False (nothing changed) when the
        closure turns out to be ours (it ran no backward at ``θ + e``).
        """
        if self._scaling() or (
            not self.sync_perturbation and _world_size() > 1 and not self._ddp_hooked
        ):
            raise ValueError(
                "a davda54/sam closure runs its own backward, which the optimizer can neither "
                "loss-scale nor keep local: with `grad_scaler`, or sync_perturbation=False on a "
                "DDP model with a comm hook of its own (or without attach_ddp), use the "
                "(loss, logits) closure protocol."
            )
        self._pass1_norm = None
        if not self.first_step(zero_grad=True):
            return True, None
        try:
            with torch.enable_grad():
                out = closure()
        except BaseException:
            self._restore()
            self._end_window()
            self._drop_g()
            raise
        if not any(p.grad is not None for p in self._params()):  # our protocol after all
            self._restore()
            self._end_window()
            self._drop_g()
            self._closure_style = "forward"
            return False, None
        self._closure_style = "backward"
        self.second_step()
        return True, out.detach() if isinstance(out, torch.Tensor) else out

    def _finish(self) -> None:
        pending, self._pending = self._pending, []
        if self._scaling():
            self._scaler_infs()  # unscale before the norm, or a clear error
        try:
            self._driving = True  # pass 1 ran under no_sync where sync_perturbation=False
            if not self.first_step(zero_grad=True):
                return
            s = self._loss_scale()
            three = self.variant in ("lsam", "angle_sam")
            last = len(pending) - 1
            r_tilde = []
            for i, (c, r, rng) in enumerate(pending):  # pass 2 at θ + e
                _set_rng_state(rng)
                with self._sync(not three and i == last), torch.enable_grad():
                    loss, logits = _unpack(c(), self.needs_logits, self.variant)
                    if s != 1.0:
                        loss = loss * s
                    if self.variant == "sam":
                        logits = None
                        loss.backward()
                    elif self.variant == "fsam":
                        del loss  # frees the loss graph (e.g. log-softmax) before the VJP
                        torch.autograd.backward(logits, r)
                    elif self.variant == "lsam":
                        r_tilde.append(torch.autograd.grad(loss, logits)[0].detach())
                    else:  # angle_sam: the logit gradient at θ+e, then the FSAM VJP
                        r_tilde.append(
                            torch.autograd.grad(loss, logits, retain_graph=True)[0].detach()
                        )
                        torch.autograd.backward(logits, r)
                    loss = None
                    del loss, logits
            if three:
                w_logit = self._angle_preload(s) if self.variant == "angle_sam" else 1.0
                self._restore()  # pass 3 at θ: p.grad += w_logit J(θ)ᵀ r̃
                for i, ((c, _, rng), rt) in enumerate(zip(pending, r_tilde, strict=True)):
                    _set_rng_state(rng)
                    with self._sync(i == last), torch.enable_grad():
                        _, logits = _unpack(c(), True, self.variant)
                        torch.autograd.backward(logits, rt if w_logit == 1.0 else rt * w_logit)
                    del logits
            if s != 1.0:
                grads = [p.grad for p in self._params() if p.grad is not None]
                torch._foreach_mul_(grads, 1.0 / s)
            self.second_step()
        except BaseException:
            self._restore()
            self._end_window()
            self._drop_g()
            raise
        finally:
            self._pass1_norm = None
            self._driving = False

    @torch.no_grad()
    def _angle_preload(self, scale: float) -> float:
        """``p.grad ← scale·c·g + w_func·p.grad`` (``p.grad`` = ``g_FSAM``); returns ``w_logit``.

        Pass 3 then adds ``w_logit J(θ)ᵀ r̃`` to ``p.grad``, completing :func:`angle_combine`'s
        sum in place (one all-reduce, on pass 3's last backward, covers all three terms).
        """
        c, w_logit, w_func = _angle_coefficients(*self.angle_weights)
        for p in self._params():
            g = self.state[p].get("g")
            if g is None:
                continue
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            p.grad.mul_(w_func).add_(g, alpha=scale * c)
        return w_logit

    # -- checkpointing -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        """The base optimizer's state plus the step counters."""
        return {
            "base": self.base_optimizer.state_dict(),
            "sam_steps": self.sam_steps,
            "skipped_steps": self.skipped_steps,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:  # type: ignore[override]
        """Load :meth:`state_dict` output (or a bare base-optimizer state dict)."""
        if "base" in state_dict:
            self.base_optimizer.load_state_dict(state_dict["base"])
            self.sam_steps = int(state_dict.get("sam_steps", 0))
            self.skipped_steps = int(state_dict.get("skipped_steps", 0))
        else:
            state = state_dict.get("state", {}) if isinstance(state_dict, dict) else {}
            if any(isinstance(v, dict) and "old_p" in v for v in state.values()):
                raise ValueError(
                    "this is davda54/sam's SAM.state_dict(): it holds SAM's copies of the "
                    "parameters ('old_p') and the param groups, but not the base optimizer's "
                    "state (momentum buffers, Adam moments), which davda54/sam keeps in "
                    "`base_optimizer` and does not save; loading it would silently restart "
                    "that state. Load the base optimizer's own state instead (with davda54/sam "
                    "save `optimizer.base_optimizer.state_dict()`, and pass it here), or a "
                    "state_dict() of this optimizer (which holds both)."
                )
            self.base_optimizer.load_state_dict(state_dict)
        self.param_groups = self.base_optimizer.param_groups


class SAM(SAMFamily):
    """Plain SAM around a base optimizer: ``SAM(params, torch.optim.SGD, rho=0.05, lr=0.1)``.

    The same as ``SAMFamily(..., variant="sam")``; kept for its short signature. Besides
    ``step(closure)``, the two halves can be driven by hand::

        loss_fn(model(x)).backward(); opt.first_step(zero_grad=True)
        loss_fn(model(x)).backward(); opt.second_step(zero_grad=True)
    """

    def __init__(self, params: Iterable, base_optimizer_cls: type[torch.optim.Optimizer],
                 rho: float = 0.05, adaptive: bool = False, **kwargs: Any) -> None:  # fmt: skip
        kwargs.setdefault("variant", "sam")
        super().__init__(params, base_optimizer_cls, rho, adaptive=adaptive, **kwargs)
