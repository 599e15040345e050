"""SoSD metrics on the package's other simulations: the small LM, linear attention, Markov chains.

:func:`train_lm_with_spectra` records the spectra of a :func:`sims.lm.train_lm` pre-training run
through its callback hook (the seed-002 Figure 2–5 analogs).

The bridge (beyond both seeds) to the linear-attention sims and the Markov runs:

Does stage-wise feature learning (each loss drop of the main paper's linear-attention model and of
the seed-004 Markov-chain transformers) show as a *spectral restructuring event* (a peak of the SD
variation ΔΣ), and do SAM or upsampling move the SoSD onset?

Only the public APIs of :mod:`sims.linear_attention` and :mod:`sims.markov` are used:

* linear attention: :func:`sims.linear_attention.train_runs` stores parameter snapshots every
  ``record_every`` steps; the spectra of the merged matrix ``M = Σ_h v_h K_h^T Q_h`` (the
  predictor ``ŷ = β^T M x_q``) and of the stacked key/query matrices are computed from them.
  Upsampling re-runs the paper's pipeline from the package's public pieces (GD proxy checkpoints →
  :func:`~sims.linear_attention.upsampling.checkpoint_losses` → ``select_batched`` → weighted
  moments), since ``run_figure1`` keeps no weight snapshots.
* Markov: :func:`sims.markov.train.train` builds its model and optimizer inside;
  :func:`capture_torch_training` records the spectra of whatever ``nn.Module`` a training function
  trains through torch's global module-forward and optimizer-step hooks, without editing it.

:func:`stage_alignment` matches each loss-drop (stage) time with the nearest ΔΣ peak.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .spectral import DEFAULT_EXCLUDE, SpectralRecorder, detect_onset, record_trajectory

__all__ = [
    "TorchCapture",
    "capture_torch_training",
    "peak_times",
    "stage_alignment",
    "la_spectra",
    "LAStudyConfig",
    "la_study",
    "alignment_table",
    "markov_study",
    "train_lm_with_spectra",
    "LM_EXPERIMENTS",
    "lm_sosd_config",
    "lm_sosd_summary",
    "lm_decay_start",
    "LM_SOSD_SEEDS",
    "lm_sosd_dir",
    "lm_sosd_runs",
    "lora_matrices",
]


def _nanmean(x, axis=None):
    """``np.nanmean`` without its warning for an all-NaN slice.

    NaN there is the answer: a record where no matrix has a defined ΔΣ (e.g. the first one).
    """
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        return np.nanmean(x, axis=axis)


# ---------------------------------------------------------------------------------------------
# Generic capture of a torch training run
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Run:
    model: Any
    optimizer: Any
    recorder: SpectralRecorder
    step: int = 0
    recorded: int = 0


class TorchCapture:
    """State of :func:`capture_torch_training`: one recorder per trained model, in order."""

    def __init__(self, every: int, recorder_kwargs: dict[str, Any],
                 select: Callable[[Any], bool] | None):  # fmt: skip
        if isinstance(every, bool) or not isinstance(every, int) or every <= 0:
            raise ValueError(f"`every` must be a positive integer (steps); got {every!r}.")
        self.every = every
        self.kwargs = recorder_kwargs
        self.select = select
        self.runs: list[_Run] = []
        self._depth = 0
        self._candidates: list[tuple[Any, dict[str, Any]]] = []

    @property
    def recorder(self) -> SpectralRecorder | None:
        """The recorder of the first captured model (``None`` before its first step)."""
        return self.runs[0].recorder if self.runs else None

    # forward hooks: find top-level modules and keep their initial weights
    def _pre(self, module, _args):
        if self._depth == 0:
            run = next((r for r in self.runs if r.model is module), None)
            if run is not None:
                self._flush(run)
            elif not any(m is module for m, _ in self._candidates) and (
                self.select is None or self.select(module)
            ):
                init = {n: p.detach().clone() for n, p in module.named_parameters()}
                if init:
                    self._candidates.append((module, init))
        self._depth += 1

    def _post(self, _module, _args, _out):
        self._depth = max(0, self._depth - 1)

    # optimizer hook: count the steps of the optimizer that owns a model's parameters
    def _on_step(self, optimizer, _args, _kwargs):
        if hasattr(optimizer, "base_optimizer"):  # a SAM wrapper: its base optimizer counts
            return
        run = next((r for r in self.runs if r.optimizer is optimizer), None)
        if run is None:
            params = {id(p) for g in optimizer.param_groups for p in g["params"]}
            best, best_n = None, 0
            for module, init in self._candidates:
                n = sum(id(p) in params for p in module.parameters())
                if n > best_n:
                    best, best_n = (module, init), n
            if best is None:
                return  # an optimizer of a model that is already captured, or of none
            module, init = best
            known = next((r for r in self.runs if r.model is module), None)
            if known is not None:  # a second optimizer of the same model (e.g. Muon + AdamW)
                return
            rec = SpectralRecorder(module, every=self.every, **self.kwargs)
            rec.record(0, values=init)
            run = _Run(module, optimizer, rec)
            self.runs.append(run)
            self._candidates = [(m, i) for m, i in self._candidates if m is not module]
        run.step += 1

    def _flush(self, run: _Run | None = None):
        """Record the state after the last completed step (all optimizers have stepped)."""
        for r in [run] if run is not None else self.runs:
            if r.step != r.recorded:
                if r.step % self.every == 0:
                    r.recorder.record(r.step)
                r.recorded = r.step

    def to_datasets(self, **kwargs) -> list:
        """One spectra dataset per captured model, in training order."""
        return [r.recorder.to_dataset(**kwargs) for r in self.runs]

    def to_dataset(self, **kwargs):
        """The spectra of the first captured model (see :meth:`SpectralRecorder.to_dataset`)."""
        if not self.runs:
            raise ValueError("no training step was captured (no optimizer stepped a model "
                             "whose forward ran inside the context).")  # fmt: skip
        return self.runs[0].recorder.to_dataset(**kwargs)


@contextlib.contextmanager
def capture_torch_training(
    *, every: int = 10, include: str | Callable[[str], bool] | None = None,
    exclude: str | Callable[[str], bool] | None = DEFAULT_EXCLUDE, split_leading: bool = True,
    dtype: str = "float64", select: Callable[[Any], bool] | None = None,
) -> Iterator[TorchCapture]:  # fmt: skip
    """Record spectra of the model trained inside the ``with`` block, every ``every`` steps.

    A model is a top-level ``nn.Module`` (a forward call outside any other forward) whose
    parameters an optimizer steps; its weights at its first forward are the step-0 record. Several
    models trained one after another each get a recorder (``cap.runs``, in training order). A step
    is one ``step()`` of the first optimizer seen for the model (SAM wrappers count once; a second
    optimizer of the same model, e.g. Muon + AdamW, is not counted); the state after step ``t`` is
    recorded at the model's next forward call (so every optimizer of the step has run) or when
    the block exits.

    Args:
        every: record every this many optimizer steps.
        include: parameter-name filter (see :class:`SpectralRecorder`).
        exclude: names to drop (default: embeddings and LM head).
        split_leading: per-head stacks ``(H, m, n)`` become ``H`` matrices.
        dtype: SVD precision.
        select: predicate on candidate top-level modules (default: any with parameters).

    Yields:
        :class:`TorchCapture`; call ``.to_dataset()`` / ``.to_datasets()`` after the block.
    """
    import torch
    import torch.optim.optimizer as torch_optimizer

    cap = TorchCapture(every, {"include": include, "exclude": exclude, "dtype": dtype,
                               "split_leading": split_leading}, select)  # fmt: skip
    h1 = torch.nn.modules.module.register_module_forward_pre_hook(cap._pre)
    h2 = torch.nn.modules.module.register_module_forward_hook(cap._post)
    h3 = torch_optimizer.register_optimizer_step_post_hook(cap._on_step)
    try:
        yield cap
    finally:
        h1.remove()
        h2.remove()
        h3.remove()
        cap._flush()


# ---------------------------------------------------------------------------------------------
# Stage alignment
# ---------------------------------------------------------------------------------------------


def peak_times(steps, delta_sigma, *, min_ratio: float = 2.0, smooth: int = 3) -> np.ndarray:
    """Restructuring events: local maxima of the median-smoothed ΔΣ with prominence ``min_ratio``.

    A peak counts when it stands ``min_ratio`` times above the higher of the two minima that
    separate it from the next higher points on either side.

    Args:
        steps: record steps (strictly increasing).
        delta_sigma: ΔΣ per record (NaN ignored).
        min_ratio: prominence as a ratio (peak / higher of the two flanking minima).
        smooth: rolling-median window in records (odd, 1 = none).
    """
    t = np.asarray(steps, dtype=float)
    x = np.asarray(delta_sigma, dtype=float)
    if t.shape != x.shape or t.ndim != 1:
        raise ValueError(f"`steps` and `delta_sigma` must be 1-D of equal length; got {t.shape}, "
                         f"{x.shape}.")  # fmt: skip
    if min_ratio <= 1:
        raise ValueError(f"`min_ratio` must be > 1; got {min_ratio!r}.")
    ok = np.isfinite(x) & (x > 0)
    t, x = t[ok], np.log10(x[ok])
    if smooth > 1 and x.size >= smooth:
        from .spectral import _rolling_median

        x = _rolling_median(x, smooth)
    out = []
    lr = math.log10(min_ratio)
    for i in range(1, x.size - 1):
        if not (x[i] >= x[i - 1] and x[i] > x[i + 1]):
            continue
        j = i  # walk left to the previous higher point, tracking the minimum
        left = x[i]
        while j > 0 and x[j - 1] <= x[i]:
            j -= 1
            left = min(left, x[j])
        j = i
        right = x[i]
        while j < x.size - 1 and x[j + 1] <= x[i]:
            j += 1
            right = min(right, x[j])
        if x[i] - max(left, right) >= lr:
            out.append(t[i])
    return np.asarray(out)


def stage_alignment(event_times, peaks, *, horizon: float | None = None) -> dict[str, Any]:
    """Match each stage (loss-drop) time with the nearest ΔΣ peak.

    Args:
        event_times: stage times (NaN/inf = stage not reached; skipped).
        peaks: ΔΣ peak steps (:func:`peak_times`).
        horizon: last step of the run (for the chance level).

    Returns:
        ``offsets`` (peak − stage, signed), ``relative`` (|offset| / stage time), the number of
        stages and peaks, and ``chance_relative``: the median relative offset that the same
        number of peaks placed uniformly at random on a log scale over the run would give
        (seeded, 200 draws), to read the alignment against.
    """
    ev = np.asarray([e for e in np.ravel(event_times) if np.isfinite(e) and e > 0], float)
    pk = np.asarray(peaks, float)
    if ev.size == 0 or pk.size == 0:
        return {"offsets": [], "relative": [], "n_stages": int(ev.size), "n_peaks": int(pk.size),
                "chance_relative": math.nan}  # fmt: skip
    off = np.array([pk[np.argmin(np.abs(pk - e))] - e for e in ev])
    rel = np.abs(off) / ev
    chance = math.nan
    if horizon is not None and horizon > 1:
        rng = np.random.default_rng(0)
        meds = []
        for _ in range(200):
            rp = 10 ** rng.uniform(0, math.log10(horizon), size=pk.size)
            meds.append(np.median([np.min(np.abs(rp - e)) / e for e in ev]))
        chance = float(np.median(meds))
    return {"offsets": off.tolist(), "relative": rel.tolist(), "n_stages": int(ev.size),
            "n_peaks": int(pk.size), "chance_relative": chance}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Linear attention
# ---------------------------------------------------------------------------------------------


def la_spectra(ds, run: int):
    """Spectra of one run of a :func:`sims.linear_attention.train_runs` result dataset.

    Matrices: ``merged`` (``M = Σ_h v_h K_h^T Q_h``, d×d, or ``Σ_h v_h U_h`` for ATTN_M), ``key``
    and ``query`` (the ``H·r × d`` stacks of ATTN_S), or ``u[h]`` per head (ATTN_M), at the
    snapshot steps.
    """
    steps = ds.snapshot_step.values
    v = ds.v.values[run]  # (S, H)
    if "k" in ds:
        k, q = ds.k.values[run], ds.q.values[run]  # (S, H, r, d)
        merged = np.einsum("sh,shri,shrj->sij", v, k, q)
        S, H, r, d = k.shape
        stacked = {"merged": merged, "key": k.reshape(S, H * r, d),
                   "query": q.reshape(S, H * r, d)}  # fmt: skip
    else:
        u = ds.u.values[run]  # (S, H, d, d)
        stacked = {"merged": np.einsum("sh,shij->sij", v, u), "u": u}
    return record_trajectory(stacked, steps=steps, stacked=True, exclude=None,
                             split_leading=True, snapshot_every=None)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class LAStudyConfig:
    """The linear-attention bridge study (defaults: the Figure 1 setting at 8 runs).

    Attributes:
        d: input dimension.
        n_context: context length N.
        n_heads: heads H.
        n_examples: training sequences P (Wishart sufficient sampling: P costs nothing).
        num_steps: full-batch steps.
        n_runs: paired runs (own covariance rotation, data and init each).
        learning_rate: η.
        init_scale: initial weight scale.
        rho: SAM radius.
        record_every: snapshot stride (the ΔΣ interval).
        proxy_fraction: proxy budget for upsampling, as a fraction of ``num_steps``.
        n_checkpoints: proxy checkpoints.
        seed: root seed.
        value_init: ATTN_S value initialization (:data:`sims.linear_attention.models.VALUE_INITS`;
            ``"value-row"`` is the init of issue 12's bridge run, √(d+1) larger). The flip of the
            onset-under-upsampling finding between issue 12 (GD 8170 vs GD+UP 6145, 8/8 runs
            earlier) and the rerun of issues 20-25 (7290 vs 7810, 5/7) came from this factor,
            not from the selection changes: ``"value-row"`` on today's code reproduces issue
            12's numbers exactly (issue 28); pooled over 8 seeds the direction holds under both.
    """

    d: int = 4
    n_context: int = 31
    n_heads: int = 5
    n_examples: int = 80_000
    num_steps: int = 10_001
    n_runs: int = 8
    learning_rate: float = 0.02
    init_scale: float = 0.01
    rho: float = 1e-3
    record_every: int = 10
    proxy_fraction: float = 1 / 3
    n_checkpoints: int = 5
    seed: int = 0
    value_init: str = "linattn-icl"

    def __post_init__(self):
        from sims.linear_attention.models import VALUE_INITS

        if self.value_init not in VALUE_INITS:
            raise ValueError(
                f"`value_init` must be one of {VALUE_INITS}; got {self.value_init!r}."
            )
        for name in ("d", "n_context", "n_heads", "num_steps", "n_runs", "record_every",
                     "n_checkpoints"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"`{name}` must be a positive integer; got {v!r}.")
        if not (self.learning_rate > 0 and self.init_scale > 0 and self.rho >= 0):
            raise ValueError("`learning_rate` and `init_scale` must be > 0 and `rho` >= 0.")
        if not 0 < self.proxy_fraction <= 1:
            raise ValueError(f"`proxy_fraction` must be in (0, 1]; got {self.proxy_fraction!r}.")


def la_study(cfg: LAStudyConfig, *, eps: float | None = None, progress: bool = False):
    """GD, SAM and GD + upsampling on paired linear-attention runs, with spectra and alignment.

    Returns:
        ``xarray.Dataset`` with dims ``arm`` (gd, gd_upsample, sam), ``run``, ``record``,
        ``matrix`` (``delta_sigma``, ``nuclear``, ``train_loss`` at the records), the loss-drop
        times ``drop_time (arm, run, feature)``, the onset of the merged matrix ``onset (arm,
        run)`` (floor detector; and ``onset_eps`` when ``eps`` is given), and in
        ``attrs["alignment"]`` per arm the matched offsets of drop times to ΔΣ peaks of the
        merged matrix.
    """
    import jax

    jax.config.update("jax_enable_x64", True)  # the linear-attention sims run in float64
    import jax.numpy as jnp
    import xarray as xr

    from sims.linear_attention import (
        empirical_moments,
        init_params,
        make_covariance,
        saddle_losses,
        sample_dataset,
        train_runs,
    )
    from sims.linear_attention.measure import loss_drop_times
    from sims.linear_attention.models import AttnSParams, merged_matrix, output_scale
    from sims.linear_attention.stats import eigh_desc
    from sims.linear_attention.upsampling import checkpoint_losses, select_batched

    s = output_scale("anchor", cfg.n_context)
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(cfg.seed), cfg.n_runs))  # host rows
    datas, moms, params, eigs, levels = [], [], [], [], []
    for r in range(cfg.n_runs):
        rs = cfg.seed * 100_003 + r
        cov = make_covariance("linear", cfg.d, seed=rs)
        data = sample_dataset(cfg.n_examples, cfg.n_context, cov, seed=rs)
        datas.append(data)
        moms.append(empirical_moments(data, scale=s))
        params.append(init_params(keys[r], cfg.d, cfg.n_heads, init_scale=cfg.init_scale,
                                  value_init=cfg.value_init))
        eigs.append(eigh_desc(cov)[1])
        levels.append(saddle_losses(cov, cfg.n_context))

    def stack(items):
        return type(items[0])(*(np.stack(x) for x in zip(*items, strict=False)))

    moments, p0 = stack(moms), stack(params)
    common = dict(optimizer="sam", learning_rate=cfg.learning_rate, eigvecs=np.stack(eigs),
                  record_every=cfg.record_every, raise_on_failure=False)  # fmt: skip
    results = {"gd": train_runs(p0, moments, cfg.num_steps, rho=0.0, **common)}
    # upsampling from the GD proxy checkpoints (the main paper's pipeline)
    budget = max(1, int(round(cfg.proxy_fraction * cfg.num_steps)))
    ck = np.unique(np.round(np.arange(1, cfg.n_checkpoints + 1) * budget / cfg.n_checkpoints))
    snap = results["gd"].ds.snapshot_step.values
    idx = np.searchsorted(snap, ck)
    losses = []
    for r in range(cfg.n_runs):
        g = results["gd"].ds
        pk = AttnSParams(jnp.asarray(g.v.values[r, idx]), jnp.asarray(g.k.values[r, idx]),
                         jnp.asarray(g.q.values[r, idx]))  # fmt: skip
        losses.append(checkpoint_losses(np.asarray(jax.vmap(merged_matrix)(pk)), datas[r],
                                        scale=s))  # fmt: skip
    ups = select_batched(np.stack(losses), cfg.seed * 1000 + np.arange(cfg.n_runs))
    up_moments = stack([empirical_moments(datas[r], ups[r].weights, scale=s)
                        for r in range(cfg.n_runs)])  # fmt: skip
    results["gd_upsample"] = train_runs(p0, up_moments, cfg.num_steps, rho=0.0, **common)
    results["sam"] = train_runs(p0, moments, cfg.num_steps, rho=cfg.rho, **common)

    methods = list(results)
    rec_steps = results["gd"].ds.snapshot_step.values
    R, S = cfg.n_runs, rec_steps.size
    names = ["merged", "key", "query"]
    dsig = np.full((len(methods), R, S, 3), np.nan)
    nuc = np.full((len(methods), R, S, 3), np.nan)
    tl = np.full((len(methods), R, S), np.nan)
    drops = np.full((len(methods), R, cfg.d), np.nan)
    onset = np.full((len(methods), R), np.nan)
    onset_eps = np.full((len(methods), R), np.nan)
    for i, m in enumerate(methods):
        ds = results[m].ds
        for r in range(R):
            sp = la_spectra(ds, r)
            dsig[i, r] = sp.delta_sigma.sel(matrix=names).values
            nuc[i, r] = sp.nuclear.sel(matrix=names).values
            tl[i, r] = ds.train_loss.values[r, np.minimum(rec_steps, cfg.num_steps - 1)]
            drops[i, r] = loss_drop_times(ds.train_loss.values[r][None], levels[r])[0]
            merged = dsig[i, r, :, 0]
            with contextlib.suppress(ValueError):
                res = detect_onset(rec_steps, merged, window=max(3, S // 50))
                onset[i, r] = res.step
            if eps is not None:
                onset_eps[i, r] = detect_onset(rec_steps, merged, method="threshold",
                                               eps=eps).step  # fmt: skip
    out = xr.Dataset(
        {
            "delta_sigma": (("arm", "run", "record", "matrix"), dsig),
            "nuclear": (("arm", "run", "record", "matrix"), nuc),
            "train_loss": (("arm", "run", "record"), tl),
            "drop_time": (("arm", "run", "feature"), drops),
            "onset": (("arm", "run"), onset),
            "onset_eps": (("arm", "run"), onset_eps),
        },
        coords={"arm": methods, "run": np.arange(R), "record": np.arange(S),
                "step": ("record", rec_steps), "matrix": names,
                "feature": np.arange(cfg.d)},  # fmt: skip
        attrs={"config": dataclasses.asdict(cfg),
               "status": "success" if all(r.success for r in results.values()) else "failed",
               "messages": {m: r.message for m, r in results.items()},
               "eps": eps if eps is not None else math.nan},  # fmt: skip
    )
    out.attrs["alignment"] = alignment_table(out, "merged")
    return out


def alignment_table(ds, matrix: str = "merged", *, min_ratio: float = 2.0) -> dict[str, list]:
    """Per arm and run, :func:`stage_alignment` of the drop times with the ΔΣ peaks of ``matrix``.

    Args:
        ds: a :func:`la_study` dataset (``delta_sigma (arm, run, record, matrix)``,
            ``drop_time (arm, run, feature)``, coordinate ``step``).
        matrix: which matrix's ΔΣ peaks (``"merged"``, ``"key"``, ``"query"``).
        min_ratio: peak prominence (:func:`peak_times`).
    """
    steps = ds.step.values
    out: dict[str, list] = {}
    for arm in ds.arm.values:
        rows = []
        for r in ds.run.values:
            x = ds.delta_sigma.sel(arm=arm, run=r, matrix=matrix).values
            pk = peak_times(steps, x, min_ratio=min_ratio)
            rows.append(stage_alignment(ds.drop_time.sel(arm=arm, run=r).values, pk,
                                        horizon=float(steps[-1])))  # fmt: skip
        out[str(arm)] = rows
    return out


# ---------------------------------------------------------------------------------------------
# Markov chains
# ---------------------------------------------------------------------------------------------


def markov_study(exp, *, every: int = 10, sam_rho: float = 0.05, factor: int = 1,
                 seed: int = 0, progress: bool = False):  # fmt: skip
    """AdamW vs SAM vs upsampling on the Markov minimal model, with spectra of every run.

    Runs :func:`sims.markov.beyond.minimal_uniformity` (the paired AdamW / SAM / hard and random
    upsampling runs of the seed-004 beyond-the-paper study) under
    :func:`capture_torch_training`, then, per run, matches the stage times (the step at which
    some head first puts half its attention on pattern ``g``, :func:`~sims.markov.train.
    detect_stages`) with the ΔΣ peaks of the attention matrices ``A[h]`` (geometric mean over
    heads), and finds the SoSD onset of ``A`` (floor detector).

    Returns:
        ``(summary, runs)``: ``summary`` an ``xarray.Dataset`` with ``pattern_time (run, group)``,
        ``onset (run)``, ``a_delta_sigma (run, record)`` (geometric mean over heads), the
        per-matrix ``delta_sigma``, ``sigma`` and ``nuclear`` ``(run, record, matrix[, k])``, the
        test loss, and the alignment in ``attrs`` (``<run>`` for the head mean, ``<run>/per_head``
        for the union of the heads' own ΔΣ peaks);
        ``runs`` maps run name to ``(train dataset, spectra dataset)``.
    """
    import xarray as xr

    from sims.markov.beyond import minimal_uniformity
    from sims.markov.train import detect_stages

    with capture_torch_training(every=every) as cap:
        base, runs = minimal_uniformity(exp, sam_rho=sam_rho, factor=factor, seed=seed,
                                        progress=progress)  # fmt: skip
    spectra = cap.to_datasets()
    names = list(runs)
    if len(spectra) != len(names):
        raise RuntimeError(f"captured {len(spectra)} trained models for {len(names)} runs "
                           f"{names}; the capture must see every run.")  # fmt: skip
    steps = spectra[0].step.values
    a_names = [m for m in spectra[0].matrix.values if str(m).startswith("A[")]
    mats = list(spectra[0].matrix.values)
    n_rec = min(sp.sizes["record"] for sp in spectra)
    dsig = np.full((len(names), n_rec), np.nan)
    per = np.stack([sp.delta_sigma.values[:n_rec] for sp in spectra])  # (run, record, matrix)
    sig = np.stack([sp.sigma.values[:n_rec] for sp in spectra])  # (run, record, matrix, k)
    nuc = np.stack([sp.nuclear.values[:n_rec] for sp in spectra])
    onset = np.full(len(names), np.nan)
    align = {}
    ptimes = []
    for i, (name, sp) in enumerate(zip(names, spectra, strict=True)):
        a = sp.delta_sigma.sel(matrix=a_names).values[:n_rec]  # (record, head)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = 10 ** _nanmean(np.log10(a), axis=1)
        dsig[i] = g
        with contextlib.suppress(ValueError):
            onset[i] = detect_onset(steps[:n_rec], g, window=max(3, n_rec // 50)).step
        pt = detect_stages(runs[name]).group_times
        ptimes.append(pt)
        pk = peak_times(steps[:n_rec], g)
        align[name] = stage_alignment(pt, pk, horizon=float(steps[n_rec - 1]))
        # per head: the union of the heads' own ΔΣ peaks
        hp = np.unique(np.concatenate([peak_times(steps[:n_rec], a[:, j])
                                       for j in range(a.shape[1])]))  # fmt: skip
        align[f"{name}/per_head"] = stage_alignment(pt, hp, horizon=float(steps[n_rec - 1]))
    summary = xr.Dataset(
        {"pattern_time": (("run", "group"), np.stack(ptimes)),
         "onset": (("run",), onset),
         "a_delta_sigma": (("run", "record"), dsig),
         "delta_sigma": (("run", "record", "matrix"), per),
         "sigma": (("run", "record", "matrix", "k"), sig),
         "nuclear": (("run", "record", "matrix"), nuc),
         "test_loss": (("run", "eval"), np.stack([runs[n].test_loss.values for n in names])),
         "eval_step": (("eval",), runs[names[0]].step.values)},
        coords={"run": names, "group": np.arange(1, len(ptimes[0]) + 1),
                "record": np.arange(n_rec), "step": ("record", steps[:n_rec]),
                "matrix": mats},
        attrs={"alignment": align, "every": every, "sam_rho": sam_rho, "factor": factor,
               "entropy_times": base.entropy_times.values.tolist()},
    )  # fmt: skip
    return summary, {n: (runs[n], sp) for n, sp in zip(names, spectra, strict=True)}


def _median(x: Sequence[float]) -> float:
    x = np.asarray([v for v in x if np.isfinite(v)], float)
    return float(np.median(x)) if x.size else math.nan


# ---------------------------------------------------------------------------------------------
# The small decoder LM (sims.lm)
# ---------------------------------------------------------------------------------------------


def train_lm_with_spectra(config, *, every: int = 10, snapshot_every: int | None = None,
                          include=None, exclude=DEFAULT_EXCLUDE, dtype: str = "float64",
                          progress: bool = False, checkpoint=None):  # fmt: skip
    """:func:`sims.lm.train_lm` with the spectra of every 2-D weight every ``every`` steps.

    The recorder runs as ``train_lm``'s callback (``callback_every = every``), so the run itself is
    unchanged. The step-0 state is the model ``train_lm`` builds (``torch.manual_seed(seed)`` then
    ``GPT(config.model)``; tested to equal a zero-learning-rate run). The spectra are computed on
    ``config.device`` (the step-0 copy is moved there too; ``"cuda"`` is untested here: no GPU).

    Args:
        config: a :class:`sims.lm.LMTrainConfig`.
        every: spectra every this many steps (the ΔΣ interval).
        snapshot_every: weight snapshots for the cosine to the final state (multiple of
            ``every``; default ``max(every, steps // 20)`` rounded to a multiple of ``every``).
        include: parameter-name filter (default: every matrix).
        exclude: names to drop (default: the tied embedding / LM head).
        dtype: SVD precision.
        progress: tqdm bar.
        checkpoint: passed to ``train_lm`` (resume); the spectra of a resumed run start at the
            resume step.

    Returns:
        ``(run, spectra)``: the :class:`sims.lm.LMRun` and the recorder's dataset (its
        ``attrs["recording_seconds"]`` is the time spent in the callback).
    """
    import torch

    from sims.lm import GPT, train_lm
    from sims.runtime.devices import check_device

    check_device(config.device)  # before building anything
    if snapshot_every is None:
        snapshot_every = max(every, (config.steps // 20) // every * every)
    torch.manual_seed(config.seed)
    init = GPT(config.model).to(config.device)
    rec = SpectralRecorder(init, every=every, include=include, exclude=exclude, dtype=dtype,
                           snapshot_every=snapshot_every, group=_lm_group)  # fmt: skip
    rec.record(0)

    def callback(ctx):
        rec.record(ctx.step, values=dict(ctx.model.named_parameters()))

    run = train_lm(config, callback=callback, callback_every=every, progress=progress,
                   checkpoint=checkpoint)  # fmt: skip
    return run, rec.to_dataset(attrs={"run_status": run.status})


def _lm_group(name: str) -> str:
    return "attn" if ".attn." in name else "mlp" if ".mlp." in name else "other"


#: Named experiments of the seed-002 Figure 2–5 analogs (``name -> LMTrainConfig overrides``).
LM_EXPERIMENTS = {
    "constant": dict(schedule="constant"),
    "step": dict(schedule="step", step_fractions=(0.5, 0.75), step_factor=0.1),
    "wsd": dict(schedule="wsd", decay_fraction=0.284),  # 1450/5100 of the ModernArch record
    "cosine": dict(schedule="cosine", min_lr_factor=0.1),
    "cosine_wd": dict(schedule="cosine", min_lr_factor=0.1, weight_decay=0.1),
    "wsd_muon": dict(schedule="wsd", decay_fraction=0.284, optimizer="muon"),
}


def lm_sosd_config(name: str, *, scale: str = "cpu", seed: int = 0, device: str | None = None):
    """The :data:`LM_EXPERIMENTS` run ``name`` at ``scale`` (``"quick"``, ``"cpu"``, ``"gpu"``).

    ``device``: the torch device of the run (default ``"cuda"`` at the ``gpu`` scale, else
    ``"cpu"``).

    * ``cpu`` (minutes each on one core): the :mod:`sims.lm` default decoder (2 layers, width
      64, 2 heads, RoPE, RMSNorm, ReLU², tied embeddings; 0.1M parameters) on the default HMM
      corpus (V = 256, T = 64, Zipf emissions, exact Bayes loss), batch 16, AdamW (0.9, 0.95)
      lr 3e-3 (Muon: the same rate, matched to AdamW's RMS), 50 warm-up steps, 1000 steps,
      validation every 20 steps.
    * ``gpu``: 6 layers, width 384, 6 heads, T = 256, batch 64, 20k steps, validation every 100
      (about 11M parameters; for a CUDA machine, not run on CPU; CUDA untested in CI).
    * ``quick``: 60 steps of a width-32 model (tests).
    """
    from sims.lm import CorpusConfig, GPTConfig, LMTrainConfig

    if name not in LM_EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {sorted(LM_EXPERIMENTS)}.")
    if scale == "cpu":
        base = LMTrainConfig(steps=1000, warmup_steps=50, eval_every=20, seed=seed)
    elif scale == "quick":
        base = LMTrainConfig(model=GPTConfig(d_model=32, seq_len=32),
                             corpus=CorpusConfig(seq_len=32, n_train=512, n_val=32),
                             steps=60, warmup_steps=5, eval_every=10, seed=seed)  # fmt: skip
    elif scale == "gpu":
        base = LMTrainConfig(model=GPTConfig(n_layer=6, d_model=384, n_head=6, seq_len=256),
                             corpus=CorpusConfig(seq_len=256, n_train=200_000, n_val=512),
                             steps=20_000, batch_size=64, warmup_steps=200, eval_every=100,
                             seed=seed, threads=None)  # fmt: skip
    else:
        raise ValueError(f"`scale` must be 'quick', 'cpu' or 'gpu'; got {scale!r}.")
    if device is None:
        device = "cuda" if scale == "gpu" else "cpu"
    return base.replace(device=device, **LM_EXPERIMENTS[name])


#: The seeds of each :data:`LM_EXPERIMENTS` run (seed 002 Figs. 2–5 analogs).
LM_SOSD_SEEDS = (0, 1, 2)


def lm_sosd_dir(results_dir, scale: str):
    """``results_dir/sosd_lm/<scale>``: one ``<name>_seed<s>`` stem per run, and ``summary.json``.

    Each run writes ``<stem>.spectra.nc`` (:func:`train_lm_with_spectra`), ``<stem>.history.nc``
    (the :class:`sims.lm.LMRun` history) and ``<stem>.json`` (:func:`lm_sosd_summary`), each with
    the run's config and provenance.
    """
    return Path(results_dir) / "sosd_lm" / scale


def lm_sosd_runs(results_dir, *, scale: str = "cpu", names: Sequence[str] = tuple(LM_EXPERIMENTS),
                 seeds: Sequence[int] = LM_SOSD_SEEDS, device: str | None = None,
                 progress: bool = False):  # fmt: skip
    """Run the missing (name, seed) LM runs with spectra, then write the aggregated summary.

    A run whose ``<stem>.json`` exists is kept (so an interrupted sweep resumes run by run); the
    others run :func:`train_lm_with_spectra` (spectra every 10 steps; 5 at the quick scale) and
    write their three files under :func:`lm_sosd_dir`. Then ``summary.json`` there collects every
    run's summary (``{"runs": {"<name>_seed<s>": ...}}``) with provenance of ``scale``, ``names``
    and ``seeds``.

    Args:
        results_dir: the results folder.
        scale: ``"quick"``, ``"cpu"`` or ``"gpu"`` (:func:`lm_sosd_config`).
        device: the torch device (default: ``"cuda"`` at the ``gpu`` scale, else ``"cpu"``).
        names: :data:`LM_EXPERIMENTS` names.
        seeds: the seeds of each name.
        progress: tqdm bars.

    Returns:
        The path of ``summary.json``.
    """
    from sims.runtime.io import ensure_writable, provenance, read_json, write_json, write_netcdf

    out = lm_sosd_dir(results_dir, scale)
    ensure_writable(out, kind="dir", arg="results_dir")
    # every config first: a bad name or scale fails before any run
    cfgs = {(n, s): lm_sosd_config(n, scale=scale, seed=s, device=device)
            for n in names for s in seeds}  # fmt: skip
    for (name, s), cfg in cfgs.items():
        stem = out / f"{name}_seed{s}"
        if Path(f"{stem}.json").exists():
            continue
        run, sp = train_lm_with_spectra(cfg, every=10 if scale != "quick" else 5,
                                        progress=progress)  # fmt: skip
        meta = provenance(cfg.to_dict(), seed=s, status=run.status)
        write_netcdf(f"{stem}.spectra.nc", sp, meta=meta)
        write_netcdf(f"{stem}.history.nc", run.history, meta=meta)
        write_json(f"{stem}.json", lm_sosd_summary(run, sp, decay_start=lm_decay_start(cfg)),
                   meta=meta)  # fmt: skip
    runs = {}
    for p in sorted(out.glob("*_seed*.json")):
        runs[p.stem] = {k: v for k, v in read_json(p).items() if k != "meta"}
    path = out / "summary.json"
    write_json(path, {"runs": runs}, meta=provenance({"scale": scale, "names": list(names),
                                                      "seeds": list(seeds)}))  # fmt: skip
    return path


def lm_decay_start(config) -> float | None:
    """First step with a learning rate below the peak (``None`` for constant and cosine runs).

    The cosine schedule decays from the end of the warm-up on, so the whole run is used there.
    """
    if config.schedule == "step":
        return float(round(min(config.step_fractions) * config.steps))
    if config.schedule == "wsd":
        return float(config.steps - round(config.decay_fraction * config.steps))
    return None


def lm_sosd_summary(run, spectra, *, decay_start: float | None = None) -> dict[str, Any]:
    """The seed-002 claims' numbers for one LM run with spectra.

    Args:
        run: the :class:`sims.lm.LMRun`.
        spectra: its spectra (:func:`train_lm_with_spectra`).
        decay_start: step where the learning rate first decreases (``None``: never); the onset
            detector and the loss knee use the records before it.

    Returns:
        A JSON-ready dict: ``onset`` (floor detector on the geometric mean of ΔΣ over all
        matrices), ``loss_knee`` (two-segment fit of validation loss vs log step), ``sync_gap``
        (``|onset − knee| / steps``), ΔΣ levels per group (attn, mlp) at the peak, in the last
        20% before the decay and at the end, the A.4 ratio maximum, norm growth, cosines to the
        final state at the first records, final validation loss, and for decaying schedules the
        ΔΣ ratio across the decay.
    """
    h = run.history
    steps = spectra.step.values
    T = int(h.step.values[-1])
    end = decay_start if decay_start is not None else T + 1
    ds = spectra.delta_sigma.values  # (record, matrix)
    groups = spectra.group.values
    with np.errstate(divide="ignore", invalid="ignore"):
        logd = np.log10(ds)
    allg = 10 ** _nanmean(logd, axis=1)
    out: dict[str, Any] = {"steps": T, "interval": int(spectra.attrs["every"])}
    with contextlib.suppress(ValueError):
        res = detect_onset(steps, allg, end=end, window=max(3, int(np.sum(steps < end)) // 20))
        out["onset"] = res.step
        out["onset_message"] = res.message
    ev, vl = h.eval_step.values, h.val_loss.values
    with contextlib.suppress(ValueError):
        from .spectral import loss_knee

        out["loss_knee"] = loss_knee(ev, vl, end=end)
    if np.isfinite(out.get("onset", math.nan)) and "loss_knee" in out:
        out["sync_gap"] = abs(out["onset"] - out["loss_knee"]) / T
    pre = (steps >= 0.8 * end) & (steps < end) if decay_start is not None else steps >= 0.8 * T
    for g in ("attn", "mlp"):
        sel = groups == g
        gm = 10 ** _nanmean(logd[:, sel], axis=1)
        out[f"delta_sigma_{g}"] = {
            "peak": float(np.nanmax(gm)), "peak_step": float(steps[int(np.nanargmax(gm))]),
            "before_decay": float(10 ** np.nanmean(np.log10(gm[pre]))),
            "end": float(gm[-1]),
        }  # fmt: skip
    if decay_start is not None:
        span = max(0.05 * T, 2 * out["interval"])
        post = (steps > decay_start) & (steps <= decay_start + span)
        out["decay_ratio"] = float(10 ** (np.nanmean(np.log10(allg[post]))
                                          - np.nanmean(np.log10(allg[pre]))))  # fmt: skip
    r = spectra.a4_ratio.values
    out["a4_ratio_max"] = float(np.nanmax(r))
    out["a4_ratio_violations"] = int(np.sum(r > 1))
    out["a4_records_checked"] = int(np.sum(np.isfinite(r)))
    nuc = spectra.nuclear.values
    out["nuclear_growth"] = float(np.nanmean(nuc[-1] / nuc[0]))
    out["nuclear_monotone_share"] = float(np.nanmean(np.diff(nuc, axis=0) > 0))
    sc, wc = spectra.spectral_cos_final.values, spectra.weight_cos_final.values
    snap = np.nonzero(np.isfinite(wc[:, 0]))[0]
    out["cos_to_final"] = {str(int(steps[i])): {"spectral": float(np.nanmean(sc[i])),
                                                "weight": float(np.nanmean(wc[i]))}
                           for i in snap[:8]}  # fmt: skip
    out["val_loss_final"] = float(vl[-1])
    out["bayes_loss"] = float(h.attrs.get("bayes_loss", math.nan))
    out["status"] = run.status
    return out


def lora_matrices(model) -> dict[str, Any]:
    """LoRA adapter matrices of a PEFT model, and their effective updates ``ΔW = s · B A``.

    For every module with ``lora_A``/``lora_B`` adapter dicts (PEFT's ``LoraLayer``): the
    ``A`` (``r × in``) and ``B`` (``out × r``) weights and the update ``scaling · B @ A``
    (``out × in``, rank ≤ r) that the adapter adds to the frozen weight. ``B`` starts at zero, so
    ``B`` and ``ΔW`` have no spectrum at step 0 (recorded as NaN with that reason). ``ΔW`` is
    formed in float64 so that its ``min(out, in) − r`` zero singular values stay at round-off.
    """
    out: dict[str, Any] = {}
    for name, mod in model.named_modules():
        a, b = getattr(mod, "lora_A", None), getattr(mod, "lora_B", None)
        if a is None or b is None or not hasattr(a, "keys"):
            continue
        for key in a.keys():
            if key not in b:
                continue
            wa, wb = a[key].weight, b[key].weight
            scale = float(getattr(mod, "scaling", {}).get(key, 1.0))
            out[f"{name}.{key}.A"] = wa
            out[f"{name}.{key}.B"] = wb
            out[f"{name}.{key}.delta"] = scale * (wb.double() @ wa.double())  # exact rank ≤ r
    if not out:
        raise ValueError("`model` has no LoRA adapters (no module with lora_A/lora_B).")
    return out
