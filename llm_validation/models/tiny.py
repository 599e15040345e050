"""Small decoders built from configs and a tokenizer trained locally, for tests and CPU runs.

Everything here is offline: the tokenizer is a byte-level BPE trained with ``tokenizers`` on
texts passed in (digits split one per token, so arithmetic is learnable by a few-million
parameter model), and models are standard Hugging Face architectures built from configs
(randomly initialized), saved as ordinary HF folders that
:func:`llm_validation.models.registry.load_model` loads like any pretrained model. The same pipeline
therefore runs on them and on real models.

Families (:data:`FAMILIES`): ``llama``, ``gemma3``, ``gpt_neox`` (Pythia), ``qwen3``, ``phi``
(Phi-2) and ``phi3``: the architectures of the paper's models (Qwen3, Llama 3.2, Gemma 3, Phi-2;
Pythia as the proxy) with their module names, so LoRA target resolution is tested on each.

Examples:
    >>> sorted(FAMILIES)
    ['gemma3', 'gpt_neox', 'llama', 'phi', 'phi3', 'qwen3']
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["FAMILIES", "TinySize", "train_tokenizer", "tiny_config", "make_tiny_model"]

FAMILIES = ("llama", "gemma3", "gpt_neox", "qwen3", "phi", "phi3")

#: Special tokens of the locally trained tokenizer (``<|endoftext|>`` is BOS and EOS, as GPT-2).
EOS, PAD, UNK = "<|endoftext|>", "<|pad|>", "<|unk|>"


@dataclasses.dataclass(frozen=True)
class TinySize:
    """Width and depth of a from-scratch decoder.

    Attributes:
        hidden: model width.
        layers: number of decoder blocks.
        heads: attention heads (``hidden`` must be divisible by it).
        kv_heads: key/value heads (grouped-query attention where the family has it).
        intermediate: feed-forward width (default ``4 * hidden``).
        max_positions: context length.
    """

    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int | None = None
    max_positions: int = 1024

    def __post_init__(self):
        for name in ("hidden", "layers", "heads", "kv_heads", "max_positions"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"`{name}` must be a positive int; got {v!r}.")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(
                f"`hidden`={self.hidden} must be divisible by `heads`={self.heads}, and `heads` "
                f"by `kv_heads`={self.kv_heads}."
            )


def train_tokenizer(
    texts: Iterable[str], *, vocab_size: int = 512, save_dir: str | os.PathLike | None = None
):
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it for transformers.

    Digits are split into single tokens and never merged (arithmetic stays learnable). The
    special tokens are ``<|endoftext|>`` (BOS and EOS), ``<|pad|>`` and ``<|unk|>``.

    Args:
        texts: training texts.
        vocab_size: target vocabulary size (>= 300: the 256 bytes plus merges).
        save_dir: when given, ``save_pretrained`` there.

    Returns:
        A ``PreTrainedTokenizerFast``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if not isinstance(vocab_size, int) or vocab_size < 300:
        raise ValueError(f"`vocab_size` must be an int >= 300; got {vocab_size!r}.")
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, PAD, UNK],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=EOS, eos_token=EOS, pad_token=PAD, unk_token=UNK
    )
    if save_dir is not None:
        fast.save_pretrained(save_dir)
    return fast


def tiny_config(family: str, vocab_size: int, size: TinySize = TinySize(), *, tokenizer=None):
    """An HF config of ``family`` at ``size`` (randomly initialized models only).

    Args:
        family: one of :data:`FAMILIES`.
        vocab_size: vocabulary size (``len(tokenizer)``).
        size: width and depth.
        tokenizer: when given, its BOS/EOS/PAD ids are written into the config.
    """
    import transformers as tf

    if family not in FAMILIES:
        raise ValueError(f"`family` must be one of {FAMILIES}; got {family!r}.")
    inter = size.intermediate or 4 * size.hidden
    ids = {}
    if tokenizer is not None:
        ids = dict(
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    common = dict(
        vocab_size=vocab_size,
        hidden_size=size.hidden,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        intermediate_size=inter,
        max_position_embeddings=size.max_positions,
        **ids,
    )
    head_dim = size.hidden // size.heads
    if family == "llama":
        return tf.LlamaConfig(num_key_value_heads=size.kv_heads, tie_word_embeddings=True, **common)
    if family == "qwen3":
        return tf.Qwen3Config(
            num_key_value_heads=size.kv_heads, head_dim=head_dim, tie_word_embeddings=True,
            **common,
        )  # fmt: skip
    if family == "gemma3":
        return tf.Gemma3TextConfig(
            num_key_value_heads=size.kv_heads, head_dim=head_dim,
            query_pre_attn_scalar=head_dim, sliding_window=128, **common,
        )  # fmt: skip
    if family == "gpt_neox":
        return tf.GPTNeoXConfig(use_parallel_residual=True, rotary_pct=0.25, **common)
    if family == "phi":
        return tf.PhiConfig(num_key_value_heads=size.heads, partial_rotary_factor=0.5, **common)
    return tf.Phi3Config(num_key_value_heads=size.kv_heads, **common)  # phi3


def make_tiny_model(
    folder: str | os.PathLike,
    family: str,
    tokenizer,
    size: TinySize = TinySize(),
    *,
    seed: int = 0,
):
    """Build a randomly initialized ``family`` decoder, save it with ``tokenizer`` in ``folder``.

    Returns:
        ``folder`` as a Path (an HF folder that :func:`llm_validation.models.registry.load_model`
        takes).
    """
    import torch
    from transformers import AutoModelForCausalLM

    cfg = tiny_config(family, len(tokenizer), size, tokenizer=tokenizer)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
