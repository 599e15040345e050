"""Seed-003 analogs on :mod:`sims.lm`: Table 1, Fig. 2 (τ), Fig. 3 (ρ sweep), Tables 4/6.

Table 1: final loss of each method; Fig. 2: τ fractions along training; Fig. 3: the ρ sweep;
Tables 4/6: the sharpness of the final models.

Each function takes a :class:`SAMStudy` (the shared run: model, corpus, steps, lr, ...) and
returns an ``xr.Dataset`` with named dims (``optimizer``, ``seed``, ``rho``, ``step``; not
``method``, which ``Dataset.sel`` takes as its own keyword) and the study
config in ``attrs``. Runs are independent jobs for :func:`sims.runtime.parallel.pmap` (a
:class:`~sims.runtime.parallel.JobStore` keeps finished ones, so an interrupted sweep resumes), and
the final weights of the Table 1 runs are saved for :func:`final_sharpness`.

Every method of a seed starts from the same initialization and sees the same batches in the same
order (both are functions of the seed only), so differences between methods are paired.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .data import CorpusConfig
from .model import GPTConfig
from .train import LMTrainConfig

__all__ = [
    "SAMStudy",
    "DEFAULT_STUDY",
    "QUICK_STUDY",
    "run_method",
    "table1",
    "rho_sweep",
    "tau_along_training",
    "final_sharpness",
    "result_path",
    "run_or_load",
]

#: The default CPU study: a 0.1M-parameter model on the HMM corpus (V = 256, T = 64, 16 states;
#: Bayes loss ≈ 4.42 nats), batch 16, 600 steps of AdamW-family training with a cosine schedule.
DEFAULT_BASE = LMTrainConfig(
    model=GPTConfig(vocab_size=256, seq_len=64, n_layer=2, n_head=2, d_model=64),
    corpus=CorpusConfig(kind="hmm", vocab_size=256, seq_len=64, n_train=9600, n_val=256),
    lr=3e-3, weight_decay=0.1, steps=600, batch_size=16, schedule="cosine", warmup_steps=30,
    eval_every=100, min_lr_factor=0.1,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class SAMStudy:
    """The shared setting of the SAM-family experiments.

    Attributes:
        base: the run config every method shares (its ``optimizer``/``rho`` are overridden).
        methods: optimizers compared (Table 1: AdamW, SAM, PSAM, FSAM, PFSAM).
        rho: radius per SAM-family method (seed 003 tunes ρ per method; here from the ρ sweep).
        seeds: seeds (init and data order).
        precond_norm: normalization of the preconditioned perturbation (``"post"``: ‖e‖ = ρ, so
            radii compare across methods; seed 003 §2.5).
        tau_every: steps between τ measurements.
        probe_sequences: held-out sequences for τ, λ_max and the Hessian traces.
        lanczos_iters: Lanczos iterations for λ_max.
        trace_probes: Hutchinson probes for the traces.
    """

    base: LMTrainConfig = DEFAULT_BASE
    methods: tuple[str, ...] = ("adamw", "sam", "psam", "fsam", "pfsam")
    rho: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {
            "sam": 0.05,
            "psam": 0.05,
            "fsam": 0.05,
            "pfsam": 0.05,
            "lsam": 0.05,
        }  # fmt: skip
    )
    seeds: tuple[int, ...] = (0, 1, 2)
    precond_norm: str = "post"
    tau_every: int = 25
    probe_sequences: int = 32
    lanczos_iters: int = 20
    trace_probes: int = 30

    def __post_init__(self):
        if not isinstance(self.base, LMTrainConfig):
            raise TypeError(f"`base` must be an LMTrainConfig; got {type(self.base).__name__}.")
        missing = [
            m for m in self.methods if m not in ("adamw", "sgd", "muon") and m not in self.rho
        ]
        if missing:
            raise ValueError(f"`rho` has no radius for {missing}; add them.")
        if not self.seeds:
            raise ValueError("`seeds` must not be empty.")
        object.__setattr__(self, "rho", dict(self.rho))
        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "seeds", tuple(self.seeds))

    def config(self, method: str, *, seed: int, rho: float | None = None) -> LMTrainConfig:
        """The run config of ``method`` (radius ``rho`` or the study's) with ``seed``."""
        sam = method not in ("adamw", "sgd", "muon")
        opts = {"precond_norm": self.precond_norm} if method in ("psam", "pfsam") else {}
        return self.base.replace(
            optimizer=method, seed=seed, optimizer_options=opts,
            rho=(self.rho[method] if rho is None else rho) if sam else None,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (for result attrs)."""
        d = dataclasses.asdict(self)
        d["base"] = self.base.to_dict()
        return d


DEFAULT_STUDY = SAMStudy()

#: Seconds-scale version for tests and ``--quick`` figures.
QUICK_STUDY = SAMStudy(
    base=DEFAULT_BASE.replace(
        model={"d_model": 16, "n_layer": 1, "vocab_size": 32, "seq_len": 16},
        corpus={"vocab_size": 32, "seq_len": 16, "n_train": 128, "n_val": 16, "n_states": 4},
        steps=12, warmup_steps=2, eval_every=6, batch_size=8,
    ),
    seeds=(0, 1), tau_every=6, probe_sequences=4, lanczos_iters=5, trace_probes=3,
)  # fmt: skip


def _model_path(model_dir: str | None, method: str, rho: float | None, seed: int) -> Path | None:
    if model_dir is None:
        return None
    tag = method if rho is None else f"{method}_rho{rho:g}"
    return Path(model_dir) / f"{tag}_seed{seed}.pt"


def run_method(job: tuple[dict[str, Any], str, float | None, int, str | None]):
    """One training run (a :func:`sims.runtime.parallel.pmap` job), returning its history.

    ``job = (config dict, method, rho, seed, model_dir)``; the final weights are saved under
    ``model_dir`` (when not None).
    """
    import torch

    from sims.runtime.io import atomic_path

    from .train import train_lm

    cfg_dict, method, rho, seed, model_dir = job
    cfg = LMTrainConfig.from_dict(cfg_dict)
    run = train_lm(cfg)
    path = _model_path(model_dir, method, rho, seed)
    if path is not None:
        with atomic_path(path) as tmp:
            torch.save(run.model.state_dict(), tmp)
    h = run.history
    h.attrs = {k: v for k, v in h.attrs.items() if k in ("status", "bayes_loss", "n_params")}
    return h


def _jobs(study: SAMStudy, methods, seeds, rhos: Mapping[str, float | None], model_dir):
    return [
        (study.config(m, seed=s, rho=rhos.get(m)).to_dict(), m,
         None if m in ("adamw", "sgd", "muon") else rhos.get(m, study.rho.get(m)), s, model_dir)
        for m in methods for s in seeds
    ]  # fmt: skip


def table1(
    study: SAMStudy = DEFAULT_STUDY, *, workers: int | None = None, store=None,
    model_dir: str | None = None,
):  # fmt: skip
    """Seed 003 Table 1 analog: every method × seed at equal steps; final validation loss.

    Returns:
        ``xr.Dataset`` over ``(optimizer, seed)``: ``final_val_loss``, ``val_loss`` over
        ``eval_step``, ``train_loss`` over ``step``, ``perturbation_norm`` (mean over steps);
        attrs ``bayes_loss``, ``n_params``, ``study``.
    """
    import xarray as xr

    from sims.runtime.parallel import pmap

    jobs = _jobs(study, study.methods, study.seeds, {}, model_dir)
    hs = pmap(run_method, jobs, workers=workers, desc="table1", store=store)
    M, S = len(study.methods), len(study.seeds)
    h0 = hs[0]
    val = np.stack([h.val_loss.values for h in hs]).reshape(M, S, -1)
    train = np.stack([h.train_loss.values for h in hs]).reshape(M, S, -1)
    pn = np.array([float(h["perturbation_norm"].mean()) if "perturbation_norm" in h else np.nan
                   for h in hs]).reshape(M, S)  # fmt: skip
    rho = [study.rho.get(m, 0.0) if m not in ("adamw", "sgd", "muon") else 0.0
           for m in study.methods]  # fmt: skip
    ds = xr.Dataset(
        {"final_val_loss": (("optimizer", "seed"), val[:, :, -1]),
         "val_loss": (("optimizer", "seed", "eval_step"), val),
         "train_loss": (("optimizer", "seed", "step"), train),
         "perturbation_norm": (("optimizer", "seed"), pn)},
        coords={"optimizer": list(study.methods), "seed": list(study.seeds),
                "eval_step": h0.eval_step.values, "step": h0.step.values,
                "rho": ("optimizer", rho)},
    )  # fmt: skip
    ds.attrs = {"bayes_loss": float(h0.attrs["bayes_loss"]), "n_params": int(h0.attrs["n_params"]),
                "study": study.to_dict()}  # fmt: skip
    return ds


def rho_sweep(
    study: SAMStudy = DEFAULT_STUDY, *, rhos: Sequence[float] = (0.01, 0.03, 0.1, 0.3),
    methods: Sequence[str] = ("sam", "fsam", "pfsam"), seed: int = 0,
    workers: int | None = None, store=None,
):  # fmt: skip
    """Seed 003 Fig. 3 analog: final validation loss over ``(optimizer, rho)`` for one seed.

    The AdamW run of the same seed is included (``adamw_val_loss``) as the ρ = 0 baseline.
    """
    import xarray as xr

    from sims.runtime.parallel import pmap

    items = [(m, r) for m in methods for r in rhos]
    jobs = [(study.config(m, seed=seed, rho=r).to_dict(), m, r, seed, None) for m, r in items]
    jobs.append((study.config("adamw", seed=seed).to_dict(), "adamw", None, seed, None))
    hs = pmap(run_method, jobs, workers=workers, desc="rho sweep", store=store)
    final = np.array([float(h.val_loss.isel(eval_step=-1)) for h in hs[:-1]])
    ds = xr.Dataset(
        {"final_val_loss": (("optimizer", "rho"), final.reshape(len(methods), len(rhos))),
         "adamw_val_loss": float(hs[-1].val_loss.isel(eval_step=-1))},
        coords={"optimizer": list(methods), "rho": list(rhos)},
    )  # fmt: skip
    ds.attrs = {"seed": seed, "bayes_loss": float(hs[0].attrs["bayes_loss"]),
                "study": study.to_dict()}  # fmt: skip
    return ds


def _probe(corpus, n: int):
    import torch

    seqs = torch.as_tensor(corpus.val[:n])
    return seqs[:, :-1], seqs[:, 1:]


def _diagnose(model, x, y, *, which: Sequence[str], lanczos_iters=20, trace_probes=30, seed=0):
    """τ fractions / λ_max / traces / logit statistics of ``model`` on ``(x, y)`` in float64."""
    import copy

    from sims.optim import diagnostics as dg

    m64 = copy.deepcopy(model).double().eval()
    params, logits_fn = dg.functionalize(m64, x)
    loss_fn = dg.cross_entropy_loss(y)
    out: dict[str, float] = {}
    if "tau" in which:
        tau = dg.tau_fractions(logits_fn, loss_fn, params).as_dict()
        for k, v in tau.items():  # probe_* avoids clashing with the optimizer's grad_norm etc.
            if k != "check_residual":
                out[k if k.startswith("tau_") else f"probe_{k}"] = v
    if "lambda_max" in which:
        out["lambda_max"] = dg.lambda_max(
            logits_fn, loss_fn, params, iters=lanczos_iters, seed=seed
        )
    if "traces" in which:
        tr = dg.hessian_traces(logits_fn, loss_fn, params, probes=trace_probes, seed=seed)
        out.update({k: float(v) for k, v in tr.items() if k != "probes"})
    if "logits" in which:
        import torch

        with torch.no_grad():
            logits = m64(x)
        out.update({f"logit_{k}": v for k, v in dg.logit_statistics(logits, y).items()})
    return out


def _tau_job(job):
    """A pmap job: one run with τ measured every ``every`` steps on held-out sequences."""
    from .data import make_corpus
    from .train import train_lm

    cfg_dict, method, seed, every, n_probe = job
    cfg = LMTrainConfig.from_dict(cfg_dict)
    corpus = make_corpus(cfg.corpus)
    x, y = _probe(corpus, n_probe)

    def cb(ctx):
        return _diagnose(ctx.model, x, y, which=("tau", "logits"))

    first = _diagnose_init(cfg, x, y)
    run = train_lm(cfg, callback=cb, callback_every=every, corpus=corpus)
    h = run.history
    keys = [k for k in h.data_vars if h[k].dims == ("callback_step",)]
    ds = h[keys]
    import xarray as xr

    init = xr.Dataset({k: ("callback_step", [first[k]]) for k in keys},
                      coords={"callback_step": [0]})  # fmt: skip
    ds = xr.concat([init, ds], "callback_step")
    ds["val_loss"] = h.val_loss
    ds.attrs = {"method": method, "seed": seed}
    return ds


def _diagnose_init(cfg, x, y):
    import torch

    from .model import GPT

    torch.manual_seed(cfg.seed)
    return _diagnose(GPT(cfg.model), x, y, which=("tau", "logits"))


def tau_along_training(
    study: SAMStudy = DEFAULT_STUDY, *, methods: Sequence[str] = ("adamw",),
    seeds: Sequence[int] | None = None, workers: int | None = None, store=None,
):  # fmt: skip
    """Seed 003 Fig. 2 analog: τ_logit, τ_func, τ_cross (and logit statistics) along training.

    Measured every ``study.tau_every`` steps (and at initialization) on the first
    ``study.probe_sequences`` validation sequences, with ``ε*`` from that batch's gradient, in a
    float64 copy of the model. Methods other than AdamW extend the paper (which measured along
    AdamW only).

    Returns:
        ``xr.Dataset`` over ``(optimizer, seed, callback_step)``.
    """
    import xarray as xr

    from sims.runtime.parallel import pmap

    seeds = study.seeds if seeds is None else tuple(seeds)
    jobs = [(study.config(m, seed=s).to_dict(), m, s, study.tau_every, study.probe_sequences)
            for m in methods for s in seeds]  # fmt: skip
    hs = pmap(_tau_job, jobs, workers=workers, desc="tau", store=store)
    rows = [h.drop_vars("val_loss").expand_dims(optimizer=[j[1]], seed=[j[2]])
            for h, j in zip(hs, jobs, strict=True)]  # fmt: skip
    ds = xr.combine_by_coords(rows, combine_attrs="drop")
    vals = [h[["val_loss"]].expand_dims(optimizer=[j[1]], seed=[j[2]])
            for h, j in zip(hs, jobs, strict=True)]  # fmt: skip
    ds["val_loss"] = xr.combine_by_coords(vals, combine_attrs="drop")["val_loss"]
    ds.attrs = {"study": study.to_dict()}
    return ds


def _sharpness_job(job):
    import torch

    from .data import make_corpus
    from .model import GPT

    cfg_dict, path, n_probe, iters, probes = job
    cfg = LMTrainConfig.from_dict(cfg_dict)
    x, y = _probe(make_corpus(cfg.corpus), n_probe)
    model = GPT(cfg.model)
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return _diagnose(model, x, y, which=("lambda_max", "traces", "logits", "tau"),
                     lanczos_iters=iters, trace_probes=probes)  # fmt: skip


def final_sharpness(study: SAMStudy = DEFAULT_STUDY, *, model_dir: str, workers: int | None = None):
    """Seed 003 Tables 4/6 analog: λ_max(H_L), tr(H_L), tr(H_G), tr(H_F) of the final models.

    Reads the weights :func:`table1` saved in ``model_dir``; evaluates on the first
    ``study.probe_sequences`` validation sequences (float64; Lanczos ``study.lanczos_iters``,
    ``study.trace_probes`` Rademacher probes with standard errors ``se_*``).

    Returns:
        ``xr.Dataset`` over ``(optimizer, seed)``.

    Raises:
        ValueError: if a model file is missing (run :func:`table1` with ``model_dir`` first).
    """
    import xarray as xr

    from sims.runtime.parallel import pmap

    jobs, keys = [], []
    for m in study.methods:
        for s in study.seeds:
            rho = None if m in ("adamw", "sgd", "muon") else study.rho[m]
            path = _model_path(model_dir, m, rho, s)
            if not path.exists():
                raise ValueError(
                    f"no final model {str(path)!r}: run table1(..., model_dir={model_dir!r}) first."
                )
            jobs.append((study.config(m, seed=s).to_dict(), str(path), study.probe_sequences,
                         study.lanczos_iters, study.trace_probes))  # fmt: skip
            keys.append((m, s))
    outs = pmap(_sharpness_job, jobs, workers=workers, desc="sharpness")
    names = sorted(outs[0])
    arr = {k: np.full((len(study.methods), len(study.seeds)), math.nan) for k in names}
    for (m, s), o in zip(keys, outs, strict=True):
        for k in names:
            arr[k][study.methods.index(m), study.seeds.index(s)] = o[k]
    coords = {"optimizer": list(study.methods), "seed": list(study.seeds)}
    ds = xr.Dataset({k: (("optimizer", "seed"), v) for k, v in arr.items()}, coords=coords)
    ds.attrs = {"study": study.to_dict()}
    return ds


def result_path(results_dir, name: str, *, quick: bool = False) -> Path:
    """``<results>/sam_family/[quick/]<name>`` (quick results never overwrite full ones)."""
    return Path(results_dir) / "sam_family" / ("quick" if quick else "") / name


def run_or_load(path: Path, compute, *, recompute: bool = False, config=None, store_dir=None):
    """Load the NetCDF result at ``path``, or compute it (with provenance) and save it first.

    ``compute(store)`` gets a :class:`~sims.runtime.parallel.JobStore` under ``store_dir`` (finished
    runs survive an interruption); it is cleared once the result is written (and first, on
    ``recompute``).
    """
    from sims.runtime.io import provenance, read_netcdf, write_netcdf
    from sims.runtime.parallel import JobStore

    path = Path(path)
    if path.exists() and not recompute:
        return read_netcdf(path)
    store = JobStore(store_dir or path.with_suffix(".parts"))
    if recompute:
        store.clear()
    ds = compute(store)
    write_netcdf(path, ds, meta=provenance(config or {}, seed=None))
    store.clear()
    return read_netcdf(path)
