"""Seed 003's τ split on real pretrained weights: SmolLM2-135M-Instruct along a LoRA fine-tune.

Does the logit path dominate the SAM sharpness gradient (τ_logit ≈ 1, seed 003 eq. 9, Fig. 2)
on a real pretrained LM? τ_logit, τ_func, τ_cross and λ_max(H_L) (Lanczos from the gradient)
on a fixed held-out probe of generated math problems (the pipeline's corpus, prompt format and
response-token loss), at step 0 (the LoRA initialization, B = 0) and along a short LoRA
fine-tune through the pipeline (:func:`llm_validation.train.finetune.finetune`; AdamW, cosine
schedule), measured by :func:`llm_validation.experiments.sharpness.sharpness_along_finetune` with
respect to (i) the trainable LoRA adapters and (ii) the last decoder block's feed-forward weights
(base coordinates; adapters held at their current values). Exact products in float32, each
checked against an independent Hessian-vector product (``check_residual``).

CPU scale: rank 8 (α 32) on the attention projections, 120 examples at batch 4 (30 steps,
lr 2e-4), probe of 4 sequences of ≤ 128 tokens, measurements at steps 0, 10, 20, 30, Lanczos
5; about 15-20 min on one core. ``--quick``: a 2-layer Llama built from a config
(:mod:`llm_validation.models.tiny`), seconds. Reads
``results/sam_family/smollm2/cpu/tau_smollm2.nc`` (resumable: per-step measurements and checkpoints
live beside it).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402
from figures._sam_family import TAU_SHARES, tau_panel  # noqa: E402

FIGURE = FigureSpec(
    name="sam_family_tau_smollm2",
    title="Logit vs functional share of the sharpness gradient on SmolLM2-135M (LoRA)",
    paper_ref="seed 003 eq. 9, Fig. 2 (on a real pretrained LM; beyond the paper)",
    result_file="sam_family/smollm2/cpu/tau_smollm2.nc",
    producer="python -m figures.fig_sam_family_tau_smollm2 --recompute",
    extra="models",
)

SCALES = {
    "quick": dict(model=None, n_train=8, batch_size=2, steps=(0, 2, 4), n_probe=2,
                  max_length=96, lora_rank=2, lora_alpha=8.0, lr=1e-2, lanczos_iters=3),
    "cpu": dict(model="smollm2-135m-instruct", n_train=120, batch_size=4,
                steps=(0, 10, 20, 30), n_probe=4, max_length=128, lora_rank=8,
                lora_alpha=32.0, lr=2e-4, lanczos_iters=5),
}  # fmt: skip
PARAM_SETS = ("lora", "last_mlp")
LABELS = {"lora": "LoRA adapters", "last_mlp": "last block's MLP (base weights)"}


def _tiny_model(folder: Path) -> str:
    """A 2-layer Llama from a config with a tokenizer trained on the corpus (quick runs)."""
    from llm_validation.data.corpus import generate_corpus
    from llm_validation.data.records import format_prompt
    from llm_validation.models.tiny import TinySize, make_tiny_model, train_tokenizer

    if not (folder / "config.json").exists():
        texts = [format_prompt(r["instruction"]) + r["output"]
                 for r in generate_corpus(300, seed=99)]  # fmt: skip
        tok = train_tokenizer(texts, vocab_size=400)
        make_tiny_model(folder, "llama", tok, TinySize(hidden=32, layers=2, heads=4, kv_heads=2))
    return str(folder)


def compute(results_dir, *, quick: bool = False, recompute: bool = False, progress: bool = True):
    """Fine-tune with the sharpness recorder and save the dataset (loaded when saved)."""
    import shutil

    from llm_validation.config import FinetuneConfig
    from llm_validation.data.corpus import generate_corpus
    from llm_validation.data.records import Example
    from llm_validation.experiments.sharpness import sharpness_along_finetune
    from sims.runtime.io import provenance, read_netcdf, write_netcdf

    scale = "quick" if quick else "cpu"
    s = SCALES[scale]
    out = Path(results_dir) / "sam_family" / "smollm2" / scale
    path = out / "tau_smollm2.nc"
    if path.exists() and not recompute:
        return read_netcdf(path)
    if recompute:
        for sub in ("run", "measurements"):
            shutil.rmtree(out / sub, ignore_errors=True)
    model = s["model"] or _tiny_model(out / "tiny_model")
    recs = generate_corpus(s["n_train"] + s["n_probe"], seed=0)
    ex = [Example(r["instruction"], r["output"], r["source"], i) for i, r in enumerate(recs)]
    train, probe = ex[: s["n_train"]], ex[s["n_train"] :]  # distinct problems (no repeats)
    cfg = FinetuneConfig(
        model=model, settings=("ft",), lora_rank=s["lora_rank"], lora_alpha=s["lora_alpha"],
        lora_targets="attention", epochs=1.0, lr=s["lr"], batch_size=s["batch_size"],
        per_device_batch_size=s["batch_size"], dtype="float32", save_total_limit=1, seed=0,
    )  # fmt: skip
    ds = sharpness_along_finetune(
        train, probe, cfg, out, steps=s["steps"], max_length=s["max_length"],
        param_sets=PARAM_SETS, lanczos_iters=s["lanczos_iters"], progress=progress,
    )  # fmt: skip
    ds.attrs["model"] = "tiny llama (from config)" if quick else s["model"]
    meta = provenance({"scale": scale, **s, "finetune": cfg.__dict__}, seed=0)
    write_netcdf(path, ds, meta=meta)
    return read_netcdf(path)


def summary(ds) -> str:
    """One line per parameter set and step."""
    lines = [f"{ds.attrs['model']}: LoRA rank {ds.attrs['lora_rank']}, probe {ds.attrs['n_probe']} "
             f"sequences ({ds.attrs['probe_response_tokens']} response tokens), "
             f"{ds.attrs['dtype']}"]  # fmt: skip
    for p in ds.param_set.values:
        for st in ds.step.values:
            r = ds.sel(param_set=p, step=st)
            lines.append(
                f"{p:>8} step {int(st):>3}: τ_logit {float(r.tau_logit):.3f}  τ_func "
                f"{float(r.tau_func):.3f}  τ_cross {float(r.tau_cross):+.3f}  λ_max "
                f"{float(r.lambda_max):.4g}  ε*ᵀHε* {float(r.curvature):.4g}  loss "
                f"{float(r.loss):.4f}  residual {float(r.check_residual):.1e}  "
                f"({float(r.seconds_tau + r.seconds_lambda):.0f} s, "
                f"load {float(ds.loadavg.sel(step=st)):.1f})"
            )
    return "\n".join(lines)


def plot(ds, out: Path, *, quick: bool = False) -> list[Path]:
    """τ fractions vs step per parameter set, and λ_max vs step."""
    sets = list(ds.param_set.values)
    fig, axes = plt.subplots(1, len(sets) + 1, figsize=(5.2 * (len(sets) + 1), 4.2),
                             constrained_layout=True)  # fmt: skip
    steps = ds.step.values
    for ax, p in zip(axes, sets, strict=False):
        tau_panel(ax, steps, {k: ds[k].sel(param_set=p) for k, _ in TAU_SHARES}, marker="o-",
                  xlabel="optimizer step", ylabel="share of ‖H_L ε*‖²",
                  title=f"w.r.t. {LABELS.get(str(p), str(p))}")  # fmt: skip
    ax = axes[-1]
    for i, p in enumerate(sets):
        ax.plot(steps, ds.lambda_max.sel(param_set=p), "o-", color=f"C{i}",
                label=f"λ_max, {LABELS.get(str(p), str(p))}")  # fmt: skip
        ax.plot(steps, ds.curvature.sel(param_set=p), "x--", color=f"C{i}",
                label=f"ε*ᵀH_Lε*, {LABELS.get(str(p), str(p))}")  # fmt: skip
    ax.set_yscale("symlog", linthresh=0.1)  # ε*ᵀH_Lε* can be negative (H_L is indefinite)
    ax.axhline(0, color="k", lw=0.6)
    ax.set(xlabel="optimizer step", ylabel="curvature",
           title=f"λ_max(H_L) (Lanczos, {ds.attrs['lanczos_iters']} it.) and along ε*")  # fmt: skip
    ax.legend(fontsize=7)
    fig.suptitle(
        "Seed 003 Fig. 2 on a real pretrained LM: logit vs functional share of the SAM sharpness "
        "gradient along a LoRA fine-tune\n"
        f"{ds.attrs['model']}, LoRA rank {ds.attrs['lora_rank']} (α {ds.attrs['lora_alpha']:g}, "
        f"{ds.attrs['lora_targets']}), probe {ds.attrs['n_probe']} sequences / "
        f"{ds.attrs['probe_response_tokens']} response tokens, {ds.attrs['dtype']}",
        fontsize=10,
    )
    name = "sam_family_tau_smollm2" + ("_quick" if quick else "")
    return [save_figure(fig, Path(out) / f"{name}.png")]


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Compute (or load) and render; prints the measurements."""
    ds = compute(results_dir, quick=quick, recompute=recompute, progress=not quick)
    print(summary(ds))
    return plot(ds, Path(out_dir), quick=quick)


def main(argv=None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
