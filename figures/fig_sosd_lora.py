"""SoSD of LoRA adapters while fine-tuning the real SmolLM2-135M-Instruct (do they stabilize?).

LoRA fine-tuning through the pipeline's public API (:func:`llm_validation.train.finetune.finetune`,
rank 8, alpha 32 on the attention projections, AdamW, cosine schedule with 3% warm-up) on the
pipeline's procedurally generated MathInstruct-like corpus
(:func:`llm_validation.data.corpus.generate_corpus`), with
:func:`sims.sosd.spectral.hf_spectral_callback` recording the adapters ``A`` (r × in), ``B`` (out ×
r) and their update ``ΔW = (α/r)·B A`` every ``EVERY`` steps (:func:`sims.sosd.bridge.
lora_matrices`). ``B`` and ``ΔW`` start at zero: their spectra exist from the first step on.

Reads ``results/sosd_lora/<scale>/spectra.nc`` (+ ``loss.json``); computes it when missing. CPU
scale: 320 examples, max length 128, batch 8, 2 epochs (80 steps; about 10 min on 2 idle cores);
``--quick``: 16 examples, 4 steps. Needs the ``models`` extra (the SmolLM2 GGUF package).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402

FIGURE = FigureSpec(
    name="sosd_lora",
    title="SoSD of LoRA adapters fine-tuning SmolLM2-135M-Instruct",
    paper_ref="seed 002 x main paper Sec. 6 (beyond the papers)",
    result_file="sosd_lora/cpu/spectra.nc",
    producer=(
        "figures.fig_sosd_lora.compute() (llm_validation.train.finetune + hf_spectral_callback)"
    ),
    extra="models",
)

SCALES = {
    "quick": dict(n=16, max_length=64, epochs=1.0, batch_size=4, every=1),
    "cpu": dict(n=320, max_length=128, epochs=2.0, batch_size=8, every=2),
}


def compute(results_dir, *, quick: bool = False, progress: bool = False) -> Path:
    """Fine-tune with the spectral callback and write the spectra and the loss log."""
    from transformers import TrainerCallback

    from llm_validation.config import FinetuneConfig
    from llm_validation.data.corpus import generate_corpus
    from llm_validation.data.records import Example
    from llm_validation.train.finetune import finetune
    from sims.runtime.io import provenance, write_json, write_netcdf
    from sims.sosd.bridge import lora_matrices
    from sims.sosd.spectral import hf_spectral_callback

    scale = "quick" if quick else "cpu"
    s = SCALES[scale]
    out = Path(results_dir) / "sosd_lora" / scale
    recs = generate_corpus(s["n"], seed=0)
    examples = [Example(r["instruction"], r["output"], r["source"], i)
                for i, r in enumerate(recs)]  # fmt: skip
    cfg = FinetuneConfig(model="smollm2-135m-instruct", settings=("ft",), lora_rank=8,
                         lora_alpha=32.0, epochs=s["epochs"], lr=2e-4, batch_size=s["batch_size"],
                         per_device_batch_size=4, dtype="float32", save_total_limit=1,
                         seed=0)  # fmt: skip
    cb = hf_spectral_callback(every=s["every"], matrices=lora_matrices)
    losses: list[tuple[int, float]] = []

    class LossLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append((state.global_step, float(logs["loss"])))

    finetune(examples, None, cfg, out / "run", max_length=s["max_length"],
             callbacks=[cb, LossLog()], progress=progress)  # fmt: skip
    if cb.recorder is None:
        raise RuntimeError(f"no training happened in {out / 'run'} (an old finished run there?)")
    meta = provenance({**s, "finetune": cfg.__dict__}, seed=0)
    ds = cb.recorder.to_dataset(attrs={"model": cfg.model, "lora_rank": cfg.lora_rank})
    write_netcdf(out / "spectra.nc", ds, meta=meta)
    write_json(out / "loss.json", {"loss": losses}, meta=meta)
    return out / "spectra.nc"


def _kind_curve(ds, suffix):
    sel = np.array([str(m).endswith(suffix) for m in ds.matrix.values])
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log10(ds.delta_sigma.values[:, sel])
    cnt = np.sum(np.isfinite(x), axis=1)
    return np.where(cnt > 0, 10 ** (np.nansum(x, axis=1) / np.maximum(cnt, 1)), np.nan)


def plot(ds, losses, path=None):
    """Three panels: loss with ΔΣ of A, B, ΔW; spectral cosine to final; effective rank of ΔW."""
    from sims.sosd.spectral import detect_onset

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4.6), constrained_layout=True)
    st = ds.step.values
    if losses:
        a.plot([x for x, _ in losses], [y for _, y in losses], "k", lw=1.2, label="train loss")
    a.set(xlabel="optimizer step", ylabel="train loss")
    a2 = a.twinx()
    title = "(a) ΔΣ of the adapters (geometric mean over modules)"
    for suffix, col in ((".A", "tab:blue"), (".B", "tab:orange"), (".delta", "tab:purple")):
        y = _kind_curve(ds, suffix)
        a2.semilogy(st, y, color=col, lw=1, label=f"ΔΣ {suffix[1:]}")
        if suffix == ".delta" and np.isfinite(y).sum() >= 6:
            try:
                on = detect_onset(st, y, window=max(3, len(st) // 10))
            except ValueError:
                on = None
            if on is not None and on.success:
                a.axvline(on.step, color="tab:purple", ls="--")
                title += f"\nΔW onset (floor detector): step {on.step:.0f}"
    a.set_title(title, fontsize=9)
    a2.legend(fontsize=8)
    for suffix, col in ((".A", "tab:blue"), (".B", "tab:orange"), (".delta", "tab:purple")):
        sel = np.array([str(m).endswith(suffix) for m in ds.matrix.values])
        v = ds.spectral_cos_final.values[:, sel]
        cs = np.array([np.mean(r[np.isfinite(r)]) if np.isfinite(r).any() else np.nan for r in v])
        b.semilogy(st, np.maximum(1 - cs, 1e-12), color=col,
                   label=f"1 − cos⟨Σ_t, Σ_T⟩ {suffix[1:]}")  # fmt: skip
    b.set(xlabel="optimizer step", title="(b) spectral cosine to the final state")
    b.legend(fontsize=8)
    sel = np.array([str(m).endswith(".delta") for m in ds.matrix.values])
    sig = ds.sigma.values[:, sel, :]  # (record, module, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = sig / np.nansum(sig, axis=2, keepdims=True)
        ent = np.exp(-np.nansum(np.where(p > 0, p * np.log(p), 0.0), axis=2))
    ent = np.where(np.isfinite(p).any(2) & (np.nansum(sig, axis=2) > 0), ent, np.nan)
    med = [float(np.median(r[np.isfinite(r)])) if np.isfinite(r).any() else np.nan for r in ent]
    c.plot(st, med, "k")
    c.set(xlabel="optimizer step", ylabel="effective rank exp(H(Σ̂)) of ΔW (median)",
          title="(c) how many directions the update uses")  # fmt: skip
    if path is not None:
        save_figure(fig, path, dpi=110)
    return fig


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved spectra, computing them when missing."""
    from sims.runtime.io import read_json, read_netcdf

    scale = "quick" if quick else "cpu"
    src = Path(results_dir) / "sosd_lora" / scale / "spectra.nc"
    if recompute or not src.exists():
        if recompute:
            import shutil

            shutil.rmtree(src.parent / "run", ignore_errors=True)
        compute(results_dir, quick=quick)
    losses = read_json(src.with_name("loss.json"))["loss"]
    out = Path(out_dir) / ("fig_sosd_lora_quick.png" if quick else "fig_sosd_lora.png")
    plot(read_netcdf(src), losses, out)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
