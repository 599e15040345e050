"""LoRA adapters with module names resolved per architecture (Section 6).

The paper adds LoRA (rank 128, alpha 512, dropout 0.05) to the attention projections (query,
key, value and output) of Qwen3, Llama 3.2 and Gemma 3, and to the attention (query, key,
value) and feed-forward modules of Phi-2. Module names differ between architectures, so targets
are given by role and resolved here:

=========  ==============================  ==================================================
family     attention                       feed-forward
=========  ==============================  ==================================================
llama,     q_proj k_proj v_proj o_proj     gate_proj up_proj down_proj
qwen3,
gemma3,
mistral
phi        q_proj k_proj v_proj dense      fc1 fc2
phi3       qkv_proj o_proj                 gate_up_proj down_proj
gpt_neox   query_key_value dense           dense_h_to_4h dense_4h_to_h
gpt2       c_attn c_proj (attn)            c_fc c_proj (mlp)
=========  ==============================  ==================================================

``auto`` is the paper's choice: attention for every family, plus the feed-forward for ``phi``
(the paper's Phi-2 setting: q, k, v and the feed-forward). An explicit list of module names is
checked against the model; a name that matches no linear layer is an error that lists the
names that exist.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence

__all__ = [
    "ATTENTION", "MLP", "resolve_lora_targets", "check_lora_targets", "apply_lora", "quiet_peft",
]  # fmt: skip

ATTENTION = {
    "llama": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "qwen3": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "qwen2": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "gemma3_text": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "gemma3": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "gemma2": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "gemma": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "mistral": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "phi": ("q_proj", "k_proj", "v_proj", "dense"),
    "phi3": ("qkv_proj", "o_proj"),
    "gpt_neox": ("query_key_value", "dense"),
    "gpt2": ("c_attn", "attn.c_proj"),
}
MLP = {
    "llama": ("gate_proj", "up_proj", "down_proj"),
    "qwen3": ("gate_proj", "up_proj", "down_proj"),
    "qwen2": ("gate_proj", "up_proj", "down_proj"),
    "gemma3_text": ("gate_proj", "up_proj", "down_proj"),
    "gemma3": ("gate_proj", "up_proj", "down_proj"),
    "gemma2": ("gate_proj", "up_proj", "down_proj"),
    "gemma": ("gate_proj", "up_proj", "down_proj"),
    "mistral": ("gate_proj", "up_proj", "down_proj"),
    "phi": ("fc1", "fc2"),
    "phi3": ("gate_up_proj", "down_proj"),
    "gpt_neox": ("dense_h_to_4h", "dense_4h_to_h"),
    "gpt2": ("c_fc", "mlp.c_proj"),
}
# The paper's Phi-2 setting: LoRA on q, k, v and the feed-forward (not the output projection).
_AUTO = {"phi": ("q_proj", "k_proj", "v_proj", "fc1", "fc2")}


def _linear_names(model) -> list[str]:
    import torch
    from transformers.pytorch_utils import Conv1D

    return [n for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, Conv1D)) and n]


def resolve_lora_targets(model, spec: str | Sequence[str] = "auto") -> list[str]:
    """Module-name suffixes for LoRA on ``model`` (see the module docstring).

    Args:
        model: an HF causal LM.
        spec: ``"auto"``, ``"attention"``, ``"attention+mlp"`` or explicit module names.

    Returns:
        Names that each match at least one linear layer (as suffixes of the module path).

    Raises:
        ValueError: for an unknown architecture with a role spec, or a name matching no
            linear layer (the message lists the layer names that exist).
    """
    family = getattr(model.config, "model_type", None)
    linear = _linear_names(model)
    if isinstance(spec, str):
        if spec not in ("auto", "attention", "attention+mlp"):
            raise ValueError(
                f"`lora_targets` must be 'auto', 'attention', 'attention+mlp' or a list of module "
                f"names; got {spec!r}."
            )
        if family not in ATTENTION:
            suffixes = sorted({n.split(".")[-1] for n in linear})
            raise ValueError(
                f"no LoRA target table for architecture {family!r}; give `lora_targets` as a "
                f"list of module names, e.g. from: {', '.join(suffixes)}."
            )
        if spec == "auto":
            names = _AUTO.get(family, ATTENTION[family])
        elif spec == "attention":
            names = ATTENTION[family]
        else:
            names = ATTENTION[family] + MLP[family]
    else:
        names = tuple(spec)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"`lora_targets` must be non-empty module names; got {list(spec)!r}.")
    missing = [t for t in names if not any(n == t or n.endswith("." + t) for n in linear)]
    if missing:
        suffixes = sorted({n.split(".")[-1] for n in linear})
        raise ValueError(
            f"LoRA target module(s) {missing} do not exist in this {family} model; its linear "
            f"layers are named: {', '.join(suffixes)}."
        )
    return list(names)


def check_lora_targets(spec, targets: str | Sequence[str] = "auto") -> None:
    """Check ``targets`` against the model ``spec`` without loading its weights.

    For a local HF folder the model is built from its config on the meta device (no memory,
    no weights); other specs (a GGUF file or named model not converted yet) are checked when
    they are loaded.

    Raises:
        ValueError: as :func:`resolve_lora_targets`.
    """
    from llm_validation.models.registry import _is_hf_folder, _offline, _parse_spec

    kind, folder = _parse_spec(spec)
    if kind != "hf" or not _is_hf_folder(folder):
        return
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with _offline():
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    resolve_lora_targets(model, targets)


def apply_lora(
    model,
    *,
    rank: int = 128,
    alpha: float = 512.0,
    dropout: float = 0.05,
    targets: str | Sequence[str] = "auto",
    seed: int | None = None,
):
    """Wrap ``model`` with LoRA adapters (only they are trainable).

    Returns:
        A ``peft.PeftModel``.
    """
    import torch
    from peft import LoraConfig, get_peft_model

    names = resolve_lora_targets(model, targets)
    cfg = LoraConfig(
        r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=names,
        bias="none", task_type="CAUSAL_LM",
    )  # fmt: skip
    if seed is not None:
        torch.manual_seed(seed)
    with quiet_peft():
        return get_peft_model(model, cfg)


@contextlib.contextmanager
def quiet_peft():
    """Silence the FutureWarning peft raises on every wrap under transformers 5.

    peft 0.21 reads ``model.is_gradient_checkpointing``, which transformers 5 deprecates with a
    FutureWarning on each call: nothing our users can act on. Only that message is filtered.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing",
                                category=FutureWarning)  # fmt: skip
        yield
