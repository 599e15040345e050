"""Result files and figures of the linear-attention experiments (one place for both CLIs).

Every product is a netCDF result under ``<results>/linear_attention/`` (with provenance, written
atomically) and one or more PNGs; a ``quick`` product uses a seconds-long configuration and
``_quick`` file names, so it never overwrites the full one. ``figures/fig*_la*.py`` register the
``render_*`` functions; ``python -m sims.linear_attention`` calls them too.

=====================  ======================================  ==========================
product                result file                             renderer
=====================  ======================================  ==========================
Figure 1 (+ horizon)   ``figure1.nc``                          :func:`render_figure1`,
                                                               :func:`render_horizon`
SAM mechanism          ``sam_mechanism.nc``, ``sam_escape.nc``  :func:`render_mechanism`
upsampling study       ``upsampling_study.nc``                 :func:`render_upsampling`
theory vs simulation   ``theory_vs_sim.nc``                    :func:`render_theory_vs_sim`
=====================  ======================================  ==========================
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

__all__ = [
    "DEFAULT_OUT",
    "DEFAULT_RESULTS",
    "figure1_config",
    "ensure_figure1",
    "ensure_mechanism",
    "ensure_study",
    "ensure_theory_vs_sim",
    "render_figure1",
    "render_horizon",
    "render_mechanism",
    "render_upsampling",
    "render_theory_vs_sim",
]

_REPO = Path(__file__).resolve().parents[2]
#: Default folders of the CLI (the same places as ``python -m figures`` uses).
DEFAULT_OUT = _REPO / "figures" / "out"
DEFAULT_RESULTS = _REPO / "results"
SUBDIR = "linear_attention"

#: Seconds-long Figure 1 configuration for tests and ``--quick``.
QUICK_FIGURE1 = dict(
    d=3, n_heads=3, n_examples=2_000, num_steps=4_001, paper_steps=1_001, n_runs=4,
    learning_rate=0.05, init_scale=0.05, rho=1e-3, log_every=10,
)  # fmt: skip
QUICK_ESCAPE = dict(d=3, saddles=(0, 1), backgrounds=(0.0, 1e-2, 3e-2), rhos=(5e-4, 1e-3),
                    eps=0.01, num_steps=2_001)  # fmt: skip
QUICK_THEORY = dict(d=3, rhos=(0.0, 0.02), num_steps=3_000, learning_rate=0.25)


def _path(results_dir, name: str, quick: bool) -> Path:
    stem = name + ("_quick" if quick else "")
    return Path(results_dir) / SUBDIR / f"{stem}.nc"


def _jax():
    import jax

    jax.config.update("jax_enable_x64", True)


def figure1_config(quick: bool = False):
    """The Figure 1 configuration: every method, anchor setting (or the quick one)."""
    from .experiment import METHOD_NAMES, Figure1Config

    return Figure1Config(methods=METHOD_NAMES, **(QUICK_FIGURE1 if quick else {}))


def ensure_figure1(results_dir, *, quick: bool = False, recompute: bool = False,
                   progress: bool = False, config=None) -> Path:  # fmt: skip
    """Path of the Figure 1 result, computing it when missing (or ``recompute``)."""
    path = _path(results_dir, "figure1", quick)
    if path.exists() and not recompute and config is None:
        return path
    _jax()
    from sims.runtime.io import provenance, write_netcdf

    from .experiment import _MethodStore, run_figure1, summarize

    cfg = config if config is not None else figure1_config(quick)
    store = parts_folder(path)
    if recompute:
        _MethodStore(store, cfg).clear()
    ds = run_figure1(cfg, progress=progress, store=store)
    meta = provenance(
        config=dataclasses.asdict(cfg), seed=cfg.seed, status=ds.attrs["status"],
        extra={"timings": ds.attrs["timings"], "summary": summarize(ds)},
    )  # fmt: skip
    out = write_netcdf(path, ds, meta=meta)
    _MethodStore(store, cfg).clear()
    return out


def parts_folder(path) -> Path:
    """Where Figure 1's finished methods wait until the whole result is written (resume)."""
    path = Path(path)
    return path.with_name(path.stem + ".parts")


def ensure_mechanism(results_dir, *, quick: bool = False, recompute: bool = False,
                     progress: bool = False) -> tuple[Path, Path]:  # fmt: skip
    """Paths of the mechanism analysis and the escape experiment (computed when missing)."""
    ana, esc = _path(results_dir, "sam_mechanism", quick), _path(results_dir, "sam_escape", quick)
    if ana.exists() and esc.exists() and not recompute:
        return ana, esc
    _jax()
    from sims.runtime.io import provenance, read_netcdf, write_netcdf

    from .mechanism import EscapeConfig, analyze, escape_experiment

    fig1 = read_netcdf(ensure_figure1(results_dir, quick=quick, progress=progress))
    write_netcdf(ana, analyze(fig1), meta=provenance(config=fig1.attrs["config"]))
    ecfg = EscapeConfig(**(QUICK_ESCAPE if quick else {}))
    write_netcdf(esc, escape_experiment(ecfg), meta=provenance(config=dataclasses.asdict(ecfg)))
    return ana, esc


def ensure_study(results_dir, *, quick: bool = False, recompute: bool = False,
                 progress: bool = False) -> Path:  # fmt: skip
    """Path of the upsampling study (computed when missing)."""
    path = _path(results_dir, "upsampling_study", quick)
    if path.exists() and not recompute:
        return path
    _jax()
    from sims.runtime.io import provenance, write_netcdf

    from .experiment import Figure1Config
    from .study import StudyConfig, run_upsampling_study, summarize_study

    base = Figure1Config(**{**(QUICK_FIGURE1 if quick else {}),
                            "log_every": 10 if quick else 1000})  # fmt: skip
    cfg = StudyConfig(base=base)
    ds = run_upsampling_study(cfg, progress=progress)
    meta = provenance(config=dataclasses.asdict(cfg), seed=base.seed, status=ds.attrs["status"],
                      extra={"summary": summarize_study(ds)})  # fmt: skip
    return write_netcdf(path, ds, meta=meta)


def ensure_theory_vs_sim(results_dir, *, quick: bool = False, recompute: bool = False) -> Path:
    """Path of the ansatz theory-vs-simulation comparison (computed when missing)."""
    path = _path(results_dir, "theory_vs_sim", quick)
    if path.exists() and not recompute:
        return path
    _jax()
    from sims.runtime.io import provenance, write_netcdf

    from .theory import TheoryConfig, theory_vs_sim

    cfg = TheoryConfig(**(QUICK_THEORY if quick else {}))
    return write_netcdf(path, theory_vs_sim(cfg), meta=provenance(config=dataclasses.asdict(cfg)))


def _png(out_dir, name: str, quick: bool) -> Path:
    return Path(out_dir) / f"{name}{'_quick' if quick else ''}.png"


def render_figure1(out_dir, *, results_dir, quick: bool = False, recompute: bool = False,
                   progress: bool = False) -> list[Path]:  # fmt: skip
    """Figure 1 (both horizons)."""
    from sims.runtime.io import read_netcdf

    from .plotting import plot_figure1

    ds = read_netcdf(ensure_figure1(results_dir, quick=quick, recompute=recompute,
                                    progress=progress))  # fmt: skip
    out = _png(out_dir, "fig01_linear_attention", quick)
    plot_figure1(ds, out)
    return [out]


def render_horizon(out_dir, *, results_dir, quick: bool = False, recompute: bool = False,
                   progress: bool = False) -> list[Path]:  # fmt: skip
    """Test loss against the horizon (where the paper's ordering holds)."""
    from sims.runtime.io import read_netcdf

    from .plotting import plot_horizon

    ds = read_netcdf(ensure_figure1(results_dir, quick=quick, recompute=recompute,
                                    progress=progress))  # fmt: skip
    out = _png(out_dir, "fig_la_horizon", quick)
    plot_horizon(ds, out)
    return [out]


def render_mechanism(out_dir, *, results_dir, quick: bool = False, recompute: bool = False,
                     progress: bool = False) -> list[Path]:  # fmt: skip
    """The SAM-mechanism figure."""
    from sims.runtime.io import read_netcdf

    from .plotting import plot_mechanism

    ana, esc = ensure_mechanism(results_dir, quick=quick, recompute=recompute, progress=progress)
    fig1 = read_netcdf(_path(results_dir, "figure1", quick))
    out = _png(out_dir, "fig_la_sam_mechanism", quick)
    plot_mechanism(read_netcdf(ana), read_netcdf(esc), out, fig1=fig1)
    return [out]


def render_upsampling(out_dir, *, results_dir, quick: bool = False, recompute: bool = False,
                      progress: bool = False) -> list[Path]:  # fmt: skip
    """The upsampling-study figure."""
    from sims.runtime.io import read_netcdf

    from .plotting import plot_upsampling

    ds = read_netcdf(ensure_study(results_dir, quick=quick, recompute=recompute,
                                  progress=progress))  # fmt: skip
    out = _png(out_dir, "fig_la_upsampling", quick)
    plot_upsampling(ds, out)
    return [out]


def render_theory_vs_sim(out_dir, *, results_dir, quick: bool = False,
                         recompute: bool = False) -> list[Path]:  # fmt: skip
    """Learning times on the ansatz vs the Theorem 4.2 ODEs."""
    from sims.runtime.io import read_netcdf

    from .plotting import plot_theory_vs_sim

    ds = read_netcdf(ensure_theory_vs_sim(results_dir, quick=quick, recompute=recompute))
    out = _png(out_dir, "fig_la_theory_vs_sim", quick)
    plot_theory_vs_sim(ds, out)
    return [out]
