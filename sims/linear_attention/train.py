"""Full-batch trainer on sufficient statistics: ``lax.scan`` over steps, ``vmap`` over runs.

Each run has its own initialization, dataset moments (so usage-count weights for upsampling),
test moments, learning rate and SAM radius ``ρ``; all runs of a batch advance together in one
jitted scan. A step costs O(d⁴ + H d²) (the loss is the quadratic form of
:mod:`sims.linear_attention.stats`), independent of ``P`` and ``N``. The per-step update is the
optax-style transformation from :data:`sims.optim.METHODS` (``gd``, ``sam``, ``sam_flow``): one
``update`` = one optimizer step, so step counts compare 1:1 between GD and SAM.

Recorded every ``log_every`` steps: training loss ``L(w_t)`` (before the update of step ``t``, as
in the anchor's loop), test loss and the eigen-components ``e_iᵀ M(w_t) e_i`` of the merged
matrix; parameters every ``record_every`` steps. First passages (the step at which a component
reaches a target, or the test loss falls below a level) and the last step's losses are tracked
inside the scan at full step resolution, so long horizons need not store every step. A
non-finite loss, gradient or parameter stops that run (its parameters are frozen and the rest
of its trajectory is NaN); :func:`train_runs` then reports the step and parameter and raises
:class:`TrainingDivergedError` (carrying the partial result) unless ``raise_on_failure=False``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import threading
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr

from .models import AttnMParams, AttnSParams, merged_matrix
from .sam_variants import METHODS
from .stats import Moments, loss

__all__ = [
    "TrainResult",
    "TrainingDivergedError",
    "train_runs",
    "compile_runs",
    "train",
    "integrate_flow",
]


class TrainingDivergedError(ValueError):
    """Raised when a loss, gradient or parameter becomes non-finite; ``.result`` keeps the data."""

    def __init__(self, message: str, result: TrainResult):
        super().__init__(message)
        self.result = result


@dataclasses.dataclass
class TrainResult:
    """Outcome of :func:`train_runs` (style rule 4: status, message, success, counters).

    Attributes:
        status: ``"success"`` or ``"failed"``.
        message: human-readable summary (names run, step and parameter on failure).
        success: ``status == "success"``.
        n_steps: steps requested.
        n_completed: ``(run,)`` steps completed before a failure (``n_steps`` when none).
        ds: ``xr.Dataset`` with ``train_loss (run, step)``, ``test_loss (run, step)``,
            ``component (run, step, feature)``, ``grad_norm (run, step)`` (``‖∇L‖₂`` of the
            training loss), ``first_component_step``, ``first_test_below``,
            ``v (run, snapshot, head)``, key/query or ``u`` snapshots, ``final_*`` parameters;
            config in ``attrs``.
    """

    status: str
    message: str
    success: bool
    n_steps: int
    n_completed: np.ndarray
    ds: xr.Dataset

    def final_params(self, run: int | None = None):
        """Final parameters as a params NamedTuple (all runs, or one ``run``)."""
        ds = self.ds
        sel = (lambda a: a) if run is None else (lambda a: a[run])
        if "final_k" in ds:
            return AttnSParams(
                sel(jnp.asarray(ds.final_v.values)),
                sel(jnp.asarray(ds.final_k.values)),
                sel(jnp.asarray(ds.final_q.values)),
            )
        return AttnMParams(sel(jnp.asarray(ds.final_v.values)), sel(jnp.asarray(ds.final_u.values)))


def _leaf_names(params) -> tuple[str, ...]:
    return tuple(type(params)._fields)


@functools.lru_cache(maxsize=32)
def _compiled(optimizer: str, num_steps: int, record_every: int, log_every: int,
              param_type: type):  # fmt: skip
    logs_per_rec = record_every // log_every
    n_rec = -(-num_steps // record_every)

    def run(params0, moments, test_moments, eigvecs, lr, rho, comp_thr, loss_thr, ckpt_steps):
        loss_fn = functools.partial(_loss, moments=moments)
        grad_fn = jax.grad(loss_fn)
        opt = METHODS[optimizer](lr, rho)
        state0 = opt.init(params0)

        def step(carry, t):
            params, state, ok, fail_step, fail_leaf, hit_c, hit_l, last, ckpt = carry
            # parameters w_t at the requested steps (before step t's update)
            at = t == ckpt_steps  # (K,)
            ckpt = jax.tree_util.tree_map(
                lambda c, p: jnp.where(at.reshape((-1,) + (1,) * p.ndim), p[None], c), ckpt, params
            )
            value, grads = jax.value_and_grad(loss_fn)(params)
            test_value = _loss(params, test_moments)
            m = merged_matrix(params)
            comp = jnp.einsum("ia,ij,ja->a", eigvecs, m, eigvecs)  # e_aᵀ M e_a, (d,)
            updates, new_state = opt.update(grads, state, params, grad_fn=grad_fn)
            new_params = optax.apply_updates(params, updates)
            leaf_ok = jnp.stack(
                [
                    jnp.all(jnp.isfinite(g)) & jnp.all(jnp.isfinite(p))
                    for g, p in zip(grads, new_params, strict=False)
                ]
            )
            finite = jnp.isfinite(value) & jnp.all(leaf_ok)
            active = t < num_steps
            valid = ok & active  # this step's values belong to the trajectory
            # first passages (exact step resolution, whatever the logging stride)
            hit_c = jnp.where((hit_c < 0) & valid & (comp >= comp_thr), t, hit_c)
            hit_l = jnp.where((hit_l < 0) & valid & (test_value <= loss_thr), t, hit_l)
            last = jnp.where(valid, jnp.stack([value, test_value]), last)
            newly_bad = valid & ~finite
            fail_step = jnp.where(newly_bad, t, fail_step)
            fail_leaf = jnp.where(newly_bad, jnp.argmin(leaf_ok), fail_leaf)
            keep = valid & finite
            params = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), new_params, params)
            state = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), new_state, state)
            ok = ok & ~newly_bad
            nan = jnp.nan
            rec_ok = valid  # record the failing step's values too
            out = (
                jnp.where(rec_ok, value, nan),
                jnp.where(rec_ok, test_value, nan),
                jnp.where(rec_ok, comp, nan),
                jnp.where(rec_ok, optax.tree.norm(grads), nan),
            )
            return (params, state, ok, fail_step, fail_leaf, hit_c, hit_l, last, ckpt), out

        def log_block(carry, b):
            carry, outs = jax.lax.scan(step, carry, b * log_every + jnp.arange(log_every))
            return carry, jax.tree_util.tree_map(lambda o: o[0], outs)  # first step of the block

        def rec_block(carry, r):
            snap = carry[0]
            idx = r * logs_per_rec + jnp.arange(logs_per_rec)
            carry, outs = jax.lax.scan(log_block, carry, idx)
            return carry, (outs, snap)

        d = comp_thr.shape[0]
        ckpt0 = jax.tree_util.tree_map(
            lambda p: jnp.full((ckpt_steps.shape[0],) + p.shape, jnp.nan), params0
        )
        carry0 = (
            params0, state0, jnp.array(True), jnp.array(-1), jnp.array(0),
            jnp.full(d, -1), jnp.full(loss_thr.shape[0], -1), jnp.full(2, jnp.nan), ckpt0,
        )  # fmt: skip
        carry, (outs, snaps) = jax.lax.scan(rec_block, carry0, jnp.arange(n_rec))
        params_final, _, ok, fail_step, fail_leaf, hit_c, hit_l, last, ckpt = carry
        at_end = ckpt_steps == num_steps  # w_{num_steps}: the final parameters
        ckpt = jax.tree_util.tree_map(
            lambda c, p: jnp.where(at_end.reshape((-1,) + (1,) * p.ndim), p[None], c),
            ckpt, params_final,
        )  # fmt: skip
        n_log = n_rec * logs_per_rec
        train_l, test_l, comp, gnorm = (o.reshape((n_log,) + o.shape[2:]) for o in outs)
        n_keep = -(-num_steps // log_every)
        return (
            train_l[:n_keep], test_l[:n_keep], comp[:n_keep], gnorm[:n_keep], snaps,
            params_final, ok, fail_step, fail_leaf, hit_c, hit_l, last, ckpt,
        )  # fmt: skip

    return jax.jit(jax.vmap(run, in_axes=(0, 0, 0, 0, 0, 0, 0, 0, None)))


#: Compiled executables by (static configuration, argument shapes); see :func:`compile_runs`.
_EXECUTABLES: dict[tuple, concurrent.futures.Future] = {}
_EXECUTABLES_LOCK = threading.Lock()


def _executable(static: tuple, args: tuple):
    """The compiled program of ``_compiled(*static)`` for ``args``' shapes (compiled once).

    Ahead-of-time compilation (``lower(...).compile()``) keyed by the static configuration and
    the argument shapes, shared between threads: a second caller waits for the first one's
    compilation instead of repeating it (so :func:`compile_runs` in a background thread
    overlaps the compilation with other work, e.g. sampling the data).
    """
    leaves, tree = jax.tree_util.tree_flatten(args)
    key = (static, tree, tuple((tuple(x.shape), str(x.dtype)) for x in leaves))
    with _EXECUTABLES_LOCK:
        fut = _EXECUTABLES.get(key)
        owner = fut is None
        if owner:
            fut = _EXECUTABLES[key] = concurrent.futures.Future()
            while len(_EXECUTABLES) > 32:  # bounded, like _compiled's cache
                _EXECUTABLES.pop(next(iter(_EXECUTABLES)))
    if owner:
        try:
            fut.set_result(_compiled(*static).lower(*args).compile())
        except BaseException as err:
            fut.set_exception(err)
            with _EXECUTABLES_LOCK:
                _EXECUTABLES.pop(key, None)
    return fut.result()


def _loss(params, moments):
    return loss(params, moments)


def _host(x, dtype=np.float64) -> np.ndarray:
    """``x`` as a contiguous numpy array.

    The arguments are validated and broadcast in numpy: an eager JAX operation compiles a small
    program the first time it meets a shape (~20 ms each, a dozen in all), which would sit on
    the critical path of a cold run; the compiled program takes numpy arrays as they are.
    """
    return np.asarray(x, dtype=dtype, order="C")


def _as_batched_moments(moments: Moments, n_runs: int, name: str) -> Moments:
    c0, b, a = (_host(x) for x in moments)
    if b.ndim == 1:
        c0, b, a = (_host(np.broadcast_to(x, (n_runs,) + x.shape)) for x in (c0, b, a))
    if b.ndim != 2 or a.ndim != 3 or c0.shape != (n_runs,) or b.shape[0] != n_runs:
        raise ValueError(
            f"`{name}` must hold c0 (R,), b (R, d²), A (R, d², d²) or unbatched versions for "
            f"R={n_runs} runs; got {c0.shape=}, {b.shape=}, {a.shape=}."
        )
    if a.shape[1:] != (b.shape[1], b.shape[1]):
        raise ValueError(f"`{name}`.A must be (d², d²) matching b's {b.shape[1]}; got {a.shape}.")
    return Moments(c0, b, a)


def _per_run(x, n_runs: int, name: str) -> np.ndarray:
    arr = _host(x)
    if arr.ndim == 0:
        arr = _host(np.broadcast_to(arr, (n_runs,)))
    if arr.shape != (n_runs,):
        raise ValueError(f"`{name}` must be a scalar or have shape ({n_runs},); got {arr.shape}.")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"`{name}` must be finite and >= 0; got {arr.tolist()}.")
    return arr


def train_runs(
    params0,
    moments: Moments,
    num_steps: int,
    *,
    optimizer: Literal["gd", "sam", "sam_flow"] = "gd",
    learning_rate=0.02,
    rho=0.0,
    test_moments: Moments | None = None,
    eigvecs=None,
    record_every: int = 100,
    log_every: int = 1,
    component_targets=None,
    loss_levels=None,
    raise_on_failure: bool = True,
    attrs: dict | None = None,
    checkpoint_steps=None,
) -> TrainResult:
    """Train ``R`` runs at once (``vmap`` over runs, ``lax.scan`` over steps).

    Args:
        params0: ATTN_S or ATTN_M parameters with a leading run axis ``R`` on every leaf.
        moments: training :class:`Moments`, batched ``(R, ...)`` or shared.
        num_steps: number of optimizer steps (``>= 1``).
        optimizer: ``"gd"`` (eq. 2), ``"sam"`` (eq. 6), ``"sam_flow"`` (eq. 8 Euler step), or
            the head-wise ablations ``"sam_headwise"``, ``"sam_flow_headwise"``
            (:mod:`sims.linear_attention.sam_variants`).
        learning_rate: ``η`` (scalar or ``(R,)``).
        rho: SAM radius ``ρ >= 0`` (scalar or ``(R,)``; ignored by ``"gd"``).
        test_moments: held-out moments (default: ``moments``).
        eigvecs: ``(d, d)`` or ``(R, d, d)`` eigenvectors (columns) for the recorded components;
            default identity.
        record_every: parameter snapshot stride (a multiple of ``log_every``).
        log_every: stride of the recorded train/test loss and components (1 = every step).
        component_targets: ``(d,)`` or ``(R, d)`` levels; ``first_component_step (run,
            feature)`` is the first step at which ``e_aᵀ M e_a >= target_a`` (-1: never), at
            full step resolution whatever ``log_every``. Default: never.
        loss_levels: ``(L,)`` or ``(R, L)`` levels; ``first_test_below (run, level)`` is the
            first step at which the *test* loss is ``<= level`` (-1: never). Default: none.
        raise_on_failure: raise :class:`TrainingDivergedError` on a non-finite value.
        attrs: extra config stored in ``ds.attrs``.
        checkpoint_steps: steps ``s`` (``0 <= s <= num_steps``) at which to keep the parameters
            ``w_s`` (after ``s`` updates): ``checkpoint_v``, ``checkpoint_k``, ... with dims
            ``(run, checkpoint, ...)``, at any step whatever ``record_every`` (the upsampling
            proxy's checkpoints are read off the GD run this way).

    Returns:
        A :class:`TrainResult`.

    Raises:
        ValueError, TypeError: on bad shapes or values (before any tracing).
        TrainingDivergedError: on divergence when ``raise_on_failure``.
    """
    static, args = _train_args(
        params0, moments, num_steps, optimizer=optimizer, learning_rate=learning_rate, rho=rho,
        test_moments=test_moments, eigvecs=eigvecs, record_every=record_every,
        log_every=log_every, component_targets=component_targets, loss_levels=loss_levels,
        checkpoint_steps=checkpoint_steps,
    )  # fmt: skip
    out = jax.device_get(_executable(static, args)(*args))
    return _package(
        args[0], *out, num_steps=int(num_steps), record_every=int(record_every),
        log_every=int(log_every), optimizer=optimizer, lr=np.asarray(args[4]),
        rho=np.asarray(args[5]), raise_on_failure=raise_on_failure, attrs=attrs or {},
        checkpoint_steps=np.asarray(args[8]),
    )  # fmt: skip


def compile_runs(params0, moments: Moments, num_steps: int, **kwargs) -> None:
    """Compile :func:`train_runs`' program for these arguments without running it.

    Takes :func:`train_runs`' arguments (only their shapes and the static settings matter: zeros
    of the right shapes will do). Thread-safe: call it in a background thread to overlap the
    ~1 s compilation with other work; a later :func:`train_runs` with the same settings and
    shapes reuses the program (or waits for it).
    """
    kwargs.pop("raise_on_failure", None)
    kwargs.pop("attrs", None)
    _executable(*_train_args(params0, moments, num_steps, **kwargs))


def _train_args(params0, moments, num_steps, *, optimizer="gd", learning_rate=0.02, rho=0.0,
                test_moments=None, eigvecs=None, record_every=100, log_every=1,
                component_targets=None, loss_levels=None, checkpoint_steps=None):  # fmt: skip
    """Validate :func:`train_runs`' arguments; return its static settings and array arguments."""
    if not isinstance(params0, (AttnSParams, AttnMParams)):
        raise TypeError(
            f"`params0` must be AttnSParams or AttnMParams; got {type(params0).__name__}."
        )
    if optimizer not in METHODS:
        raise ValueError(f"`optimizer` must be one of {sorted(METHODS)}; got {optimizer!r}.")
    for name, val in (
        ("num_steps", num_steps), ("record_every", record_every), ("log_every", log_every)
    ):  # fmt: skip
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"`{name}` must be an int >= 1; got {val!r}.")
    if record_every % log_every:
        raise ValueError(
            f"`record_every` ({record_every}) must be a multiple of `log_every` ({log_every})."
        )
    params0 = type(params0)(*(jnp.asarray(x, dtype=jnp.float64) for x in params0))
    if params0.v.ndim != 2:
        raise ValueError(
            f"`params0.v` must be (R, H), batched over runs; got shape {params0.v.shape}; "
            "use `train` for a single run."
        )
    n_runs = params0.v.shape[0]
    if any(x.shape[0] != n_runs for x in params0):
        raise ValueError(
            f"all leaves of `params0` need the same run axis; got {[x.shape for x in params0]}."
        )
    d = params0[1].shape[-1]
    moments = _as_batched_moments(moments, n_runs, "moments")
    test_moments = (
        moments
        if test_moments is None
        else _as_batched_moments(test_moments, n_runs, "test_moments")
    )
    if moments.b.shape[1] != d * d or test_moments.b.shape[1] != d * d:
        raise ValueError(
            f"moments are for d²={moments.b.shape[1]} features but params have d={d} (d²={d * d}); "
            "build moments and params for the same dimension."
        )
    lr = _per_run(learning_rate, n_runs, "learning_rate")
    rho_arr = _per_run(rho, n_runs, "rho")
    e = np.eye(d) if eigvecs is None else _host(eigvecs)
    if e.ndim == 2:
        e = _host(np.broadcast_to(e, (n_runs, d, d)))
    if e.shape != (n_runs, d, d):
        raise ValueError(f"`eigvecs` must be (d, d) or (R, d, d) with d={d}; got {e.shape}.")

    comp_thr = _levels(component_targets, n_runs, d, "component_targets", np.inf)
    loss_thr = _levels(loss_levels, n_runs, None, "loss_levels", -np.inf)
    steps = np.asarray([] if checkpoint_steps is None else checkpoint_steps)
    if steps.ndim != 1 or (steps.size and (steps.dtype.kind not in "iu" or steps.min() < 0
                                           or steps.max() > num_steps)):  # fmt: skip
        raise ValueError(
            f"`checkpoint_steps` must be integer steps in [0, num_steps={num_steps}]; got "
            f"{steps.tolist()}."
        )
    ckpt = _host(steps, np.int64)
    static = (optimizer, int(num_steps), int(record_every), int(log_every), type(params0))
    return static, (params0, moments, test_moments, e, lr, rho_arr, comp_thr, loss_thr, ckpt)


def _levels(x, n_runs: int, width: int | None, name: str, fill: float):
    """Per-run first-passage levels ``(R, width)`` (``None``: one never-reached level)."""
    if x is None:
        return np.full((n_runs, width or 1), fill, dtype=np.float64)
    arr = _host(x)
    if arr.ndim == 1:
        arr = _host(np.broadcast_to(arr, (n_runs, arr.shape[0])))
    if arr.ndim != 2 or arr.shape[0] != n_runs or (width is not None and arr.shape[1] != width):
        want = f"({width},) or ({n_runs}, {width})" if width else f"(L,) or ({n_runs}, L)"
        raise ValueError(f"`{name}` must have shape {want}; got {tuple(arr.shape)}.")
    if np.any(np.isnan(arr)):
        raise ValueError(f"`{name}` must not contain NaN; got {arr.tolist()}.")
    return arr


def _package(params0, train_l, test_l, comp, gnorm, snaps, pfinal, ok, fail_step, fail_leaf, hit_c,
             hit_l, last, ckpt, *, num_steps, record_every, log_every, optimizer, lr, rho,
             raise_on_failure, attrs, checkpoint_steps):  # fmt: skip
    n_runs, n_heads = params0.v.shape
    d = comp.shape[-1]
    snap_steps = np.arange(snaps.v.shape[1]) * record_every
    coords = {
        "run": np.arange(n_runs),
        "step": np.arange(train_l.shape[1]) * log_every,
        "feature": np.arange(d),
        "level": np.arange(hit_l.shape[1]),
        "head": np.arange(n_heads),
        "snapshot_step": ("snapshot", snap_steps),
    }
    data = {
        "train_loss": (("run", "step"), train_l),
        "test_loss": (("run", "step"), test_l),
        "component": (("run", "step", "feature"), comp),
        "grad_norm": (("run", "step"), gnorm),
        "v": (("run", "snapshot", "head"), np.asarray(snaps.v)),
        "final_v": (("run", "head"), np.asarray(pfinal.v)),
        "final_train_loss": (("run",), last[:, 0]),
        "final_test_loss": (("run",), last[:, 1]),
        "first_component_step": (("run", "feature"), np.where(hit_c >= 0, hit_c, np.nan)),
        "first_test_below": (("run", "level"), np.where(hit_l >= 0, hit_l, np.nan)),
        "learning_rate": (("run",), lr),
        "rho": (("run",), rho),
    }
    if isinstance(params0, AttnSParams):
        data["k"] = (("run", "snapshot", "head", "rank", "dim"), np.asarray(snaps.k))
        data["q"] = (("run", "snapshot", "head", "rank", "dim"), np.asarray(snaps.q))
        data["final_k"] = (("run", "head", "rank", "dim"), np.asarray(pfinal.k))
        data["final_q"] = (("run", "head", "rank", "dim"), np.asarray(pfinal.q))
    else:
        data["u"] = (("run", "snapshot", "head", "dim", "dim2"), np.asarray(snaps.u))
        data["final_u"] = (("run", "head", "dim", "dim2"), np.asarray(pfinal.u))
    if checkpoint_steps.size:
        extra = {"v": ("head",), "k": ("head", "rank", "dim"), "q": ("head", "rank", "dim"),
                 "u": ("head", "dim", "dim2")}  # fmt: skip
        for name, leaf in zip(_leaf_names(params0), ckpt, strict=True):
            data[f"checkpoint_{name}"] = (("run", "checkpoint", *extra[name]), np.asarray(leaf))
        coords["checkpoint_step"] = ("checkpoint", checkpoint_steps.astype(int))
    n_completed = np.where(ok, num_steps, fail_step).astype(int)
    data["n_completed"] = (("run",), n_completed)
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        {"optimizer": optimizer, "num_steps": num_steps, "record_every": record_every,
         "log_every": log_every, **attrs}
    )
    names = _leaf_names(params0)
    if bool(np.all(ok)):
        status, message = "success", f"{n_runs} run(s) completed {num_steps} steps ({optimizer})."
    else:
        bad = np.flatnonzero(~ok)
        parts = [
            f"run {r}: non-finite loss/gradient/parameter at step {int(fail_step[r])} "
            f"(first bad parameter `{names[int(fail_leaf[r])]}`, "
            f"learning_rate={lr[r]:g}, rho={rho[r]:g})"
            for r in bad[:5]
        ]
        status = "failed"
        message = (
            f"training diverged in {bad.size} of {n_runs} run(s): "
            + "; ".join(parts)
            + ". The trajectory up to that step is kept; lower `learning_rate` (or `rho`)."
        )
    ds.attrs["status"] = status
    ds.attrs["message"] = message
    result = TrainResult(status, message, status == "success", num_steps, n_completed, ds)
    if status == "failed" and raise_on_failure:
        raise TrainingDivergedError(message, result)
    return result


def train(params0, moments: Moments, num_steps: int, **kwargs) -> TrainResult:
    """Train a single run (unbatched ``params0`` and ``moments``); see :func:`train_runs`."""
    if not isinstance(params0, (AttnSParams, AttnMParams)):
        raise TypeError(
            f"`params0` must be AttnSParams or AttnMParams; got {type(params0).__name__}."
        )
    batched = type(params0)(*(jnp.asarray(x)[None] for x in params0))
    if "eigvecs" in kwargs and kwargs["eigvecs"] is not None:
        kwargs["eigvecs"] = jnp.asarray(kwargs["eigvecs"])
    return train_runs(batched, moments, num_steps, **kwargs)


def integrate_flow(
    params0,
    moments: Moments,
    t_final: float,
    *,
    dt: float = 1e-2,
    rho: float = 0.0,
    eigvecs=None,
    tau: float = 1.0,
) -> TrainResult:
    """Integrate the gradient flow ``τ Ẇ = -½ (I + P) ∇L`` (eqs. 7–8; ``ρ = 0`` gives GD flow).

    Classical RK4 with step ``dt`` (time units of the paper's ODEs). The returned dataset uses the
    same layout as :func:`train_runs` with ``step`` = RK4 step (time = ``step * dt``).
    """
    if not np.isfinite(t_final) or t_final <= 0:
        raise ValueError(f"`t_final` must be positive and finite; got {t_final!r}.")
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"`dt` must be positive and finite; got {dt!r}.")
    if not np.isfinite(rho) or rho < 0:
        raise ValueError(f"`rho` must be finite and >= 0; got {rho!r}.")
    num_steps = int(np.ceil(t_final / dt))
    return _rk4(params0, moments, num_steps, dt / tau, rho, eigvecs)


def _rk4(params0, moments, num_steps, h, rho, eigvecs):
    from sims.optim import sam_flow_direction

    mom = Moments(*(jnp.asarray(x, dtype=jnp.float64) for x in moments))
    grad_fn = jax.grad(functools.partial(_loss, moments=mom))

    def field(p):
        g = grad_fn(p)
        direction = sam_flow_direction(grad_fn, p, g, rho) if rho > 0 else g
        return jax.tree_util.tree_map(lambda x: -0.5 * x, direction)

    def axpy(a, x, y):
        return jax.tree_util.tree_map(lambda u, w: u + a * w, x, y)

    d = params0[1].shape[-1]
    e = jnp.eye(d) if eigvecs is None else jnp.asarray(eigvecs)

    @jax.jit
    def run(p0):
        def step(p, _):
            k1 = field(p)
            k2 = field(axpy(h / 2, p, k1))
            k3 = field(axpy(h / 2, p, k2))
            k4 = field(axpy(h, p, k3))
            incr = jax.tree_util.tree_map(
                lambda a, b, c, dd: (a + 2 * b + 2 * c + dd) / 6, k1, k2, k3, k4
            )
            new = axpy(h, p, incr)
            m = merged_matrix(p)
            return new, (_loss(p, mom), jnp.einsum("ia,ij,ja->a", e, m, e), p.v)

        return jax.lax.scan(step, p0, None, length=num_steps)

    p0 = type(params0)(*(jnp.asarray(x, dtype=jnp.float64) for x in params0))
    pfinal, (lvals, comp, vs) = jax.device_get(run(p0))
    ds = xr.Dataset(
        {
            "train_loss": (("step",), lvals),
            "component": (("step", "feature"), comp),
            "v": (("step", "head"), vs),
            "time": (("step",), np.arange(num_steps) * h),
        },
        attrs={"method": "rk4", "dt": h, "rho": rho},
    )
    ok = bool(np.all(np.isfinite(lvals)))
    status = "success" if ok else "failed"
    msg = (
        "flow integrated"
        if ok
        else (f"non-finite loss at RK4 step {int(np.argmin(np.isfinite(lvals)))}; lower `dt`.")
    )
    return TrainResult(status, msg, ok, num_steps, np.array([num_steps]), ds)
