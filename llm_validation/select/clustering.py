"""Select the examples to upsample from proxy loss trajectories (Section 5; Fig. 4b-d, Tables 4, 6).

All clustering goes through :mod:`sims.selection` (one k-means for the whole package):
per-source k-means (k = 2) on the trajectories (or on the last checkpoint, or on consecutive
ratios), the higher-mean cluster of each source is *hard*, sources smaller than the mean source
size are upsampled whole (the authors' rule). The compute-matched ablations draw the same number
of random examples, or of easy ones.

:func:`select_examples` returns an ``xarray.Dataset`` over ``example`` with boolean masks
``hard``, ``random``, ``easy`` and the within-source ``cluster``; the per-source table is in
``attrs["per_source"]``. :func:`usage_counts` turns a mask into per-example repeat counts
(``1 + upsample_factor`` for selected examples). :func:`plot_selection` draws the report figure.
"""

from __future__ import annotations

import numpy as np

from llm_validation.config import SelectionConfig

__all__ = ["EmptySelectionError", "select_examples", "usage_counts", "selection_table",
           "plot_selection"]  # fmt: skip


class EmptySelectionError(ValueError):
    """Clustering selected no example (nothing to upsample)."""


def select_examples(traj, cfg: SelectionConfig):
    """Cluster trajectories and build the hard / random / easy masks.

    Args:
        traj: the proxy's trajectories (``loss (example, checkpoint)``, ``source``).
        cfg: selection settings.

    Returns:
        ``xarray.Dataset`` with ``hard``, ``random``, ``easy`` (bool) and ``cluster`` (int,
        ``-1`` for wholly upsampled small sources) over ``example``; attrs ``per_source``,
        ``hard_fraction``, ``features``, ``n_checkpoints``.

    Raises:
        ValueError: when ``n_checkpoints`` exceeds the recorded checkpoints.
        EmptySelectionError: when no example is hard (e.g. every trajectory identical).
    """
    import xarray as xr

    from sims.selection import cluster_by_source, select_easy, select_random

    k_all = traj.sizes["checkpoint"]
    k = cfg.n_checkpoints or k_all
    if k > k_all:
        raise ValueError(
            f"`selection.n_checkpoints`={k} exceeds the {k_all} recorded proxy checkpoints; "
            f"record more with `proxy.n_checkpoints` or use at most {k_all}."
        )
    losses = traj["loss"].values[:, :k]
    sources = traj["source"].values.astype(str)
    if not cfg.per_source:
        sources = np.full(sources.shape, "all")
    sel = cluster_by_source(
        losses, sources, cfg.n_clusters, seed=cfg.seed, features=cfg.features,
        small_sources=cfg.small_sources if cfg.per_source else "none",
        min_source_size=cfg.min_source_size,
    )  # fmt: skip
    hard = sel.hard_mask
    if not hard.any():
        raise EmptySelectionError(
            f"the hard cluster is empty: no example of {len(hard)} was selected "
            f"(features={cfg.features!r}, per-source rules "
            f"{ {s: v['rule'] for s, v in sel.per_source.items()} }); the trajectories may be "
            "identical (an untrained proxy?). Nothing was written."
        )
    count = int(hard.sum())
    rand = select_random(len(hard), count, seed=cfg.seed + 1)
    easy = select_easy(hard, min(count, int((~hard).sum())), seed=cfg.seed + 2)
    nan = np.isnan(losses).any(axis=1)
    return xr.Dataset(
        {
            "hard": ("example", hard),
            "random": ("example", rand),
            "easy": ("example", easy),
            "cluster": ("example", sel.labels),
            "source": ("example", traj["source"].values),
        },
        coords={"example": traj["example"].values},
        attrs={
            "per_source": sel.per_source,
            "hard_fraction": float(hard.mean()),
            "features": cfg.features,
            "n_checkpoints": int(k),
            "n_nan_losses": int(nan.sum()),
            "upsample_factor": cfg.upsample_factor,
        },
    )


def usage_counts(selection, setting: str, upsample_factor: int) -> np.ndarray:
    """Per-example repeat counts for a fine-tuning ``setting`` (``ft``: all ones).

    ``ft_up`` upsamples ``hard``; ``random``/``easy`` their masks; ``synth`` and ``both`` use
    ``hard`` (``synth`` adds rephrasings instead of copies, so its counts are all ones).
    """
    from sims.selection import usage_weights

    n = selection.sizes["example"]
    mask = {
        "ft": None, "synth": None, "ft_up": "hard", "both": "hard", "random": "random",
        "easy": "easy",
    }[setting]  # fmt: skip
    if mask is None:
        return np.ones(n, dtype=np.int64)
    return usage_weights(n, selection[mask].values.astype(bool), upsample_factor)


def selection_table(selection) -> str:
    """A Markdown table: per source, its size, the rule applied, and the hard fraction."""
    rows = ["| source | examples | rule | hard | hard % |", "|---|---:|---|---:|---:|"]
    for name, info in selection.attrs["per_source"].items():
        rows.append(
            f"| {name} | {info['size']} | {info['rule']} | {info['n_hard']} | "
            f"{100 * info['hard_fraction']:.1f} |"
        )
    n = selection.sizes["example"]
    h = int(selection["hard"].sum())
    rows.append(f"| **all** | {n} | | {h} | {100 * h / n:.1f} |")
    return "\n".join(rows)


def plot_selection(traj, selection, path, *, max_sources: int | None = None):
    """Hard vs easy loss trajectories per source (median and quartiles), saved to ``path``.

    ``max_sources``: draw only the first this many sources (``None``: every source).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(selection.attrs["per_source"])[:max_sources]  # None: all
    cols = min(4, len(names))
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    k = selection.attrs["n_checkpoints"]
    steps = traj["step"].values[:k]
    src = traj["source"].values.astype(str)
    hard = selection["hard"].values.astype(bool)
    loss = traj["loss"].values[:, :k]
    for ax, name in zip(axes.flat, names, strict=False):
        in_src = src == name
        for mask, color, label in ((in_src & ~hard, "tab:blue", "easy"),
                                   (in_src & hard, "tab:red", "hard")):  # fmt: skip
            if mask.sum() == 0:
                continue
            q = np.nanpercentile(loss[mask], [25, 50, 75], axis=0)
            ax.plot(steps, q[1], color=color, label=f"{label} ({mask.sum()})")
            ax.fill_between(steps, q[0], q[2], color=color, alpha=0.2)
        ax.set_title(name if len(name) < 32 else "..." + name[-29:], fontsize=8)
        ax.set_xlabel("proxy step")
        ax.set_ylabel("loss")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.suptitle(
        f"hard (upsampled) vs easy trajectories; {100 * selection.attrs['hard_fraction']:.1f}% "
        f"hard ({selection.attrs['features']})", fontsize=9,
    )  # fmt: skip
    fig.tight_layout()
    return save_plot(fig, path)


def save_plot(fig, path):
    """Write ``fig`` atomically (format from the suffix) and close it."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    from sims.runtime.io import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", dpi=120)
    plt.close(fig)
    return path
