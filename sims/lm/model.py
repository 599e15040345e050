"""A small decoder-only LM in the nanoGPT / modded-nanogpt style (for from-scratch runs on CPU).

Pre-norm blocks with RMSNorm, rotary position embeddings (RoPE), explicit causal softmax
attention (forward-mode AD works through it, which the Hessian diagnostics need; PyTorch's fused
``scaled_dot_product_attention`` supports neither forward AD nor double backward on CPU), a
ReLU² MLP, no biases, and a token embedding tied to the LM head.

Examples:
    >>> import torch
    >>> cfg = GPTConfig(vocab_size=32, seq_len=8, n_layer=1, n_head=2, d_model=16)
    >>> model = GPT(cfg)
    >>> model(torch.zeros(2, 8, dtype=torch.long)).shape
    torch.Size([2, 8, 32])
    >>> model.lm_head.weight is model.wte.weight
    True
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["GPTConfig", "GPT", "RMSNorm", "Rotary", "CausalSelfAttention", "MLP", "Block"]

_ACTIVATIONS = ("relu2", "gelu", "relu")
_DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """Architecture of :class:`GPT` (defaults: ~0.1M parameters, a few ms per step on one core).

    Attributes:
        vocab_size: number of tokens ``V``.
        seq_len: maximum context ``T`` (RoPE tables are built for it).
        n_layer: number of blocks.
        n_head: attention heads; ``d_model`` must be divisible by it (head dim even, for RoPE).
        d_model: width ``D``.
        mlp_ratio: MLP hidden width ``F = mlp_ratio · D`` (4 as in GPT-2).
        activation: ``"relu2"`` (modded-nanogpt), ``"gelu"`` (GPT-2/Nanodo) or ``"relu"``.
        tie_embeddings: share the token embedding with the LM head (nanoGPT, Nanodo).
        rope_base: RoPE frequency base (10000 as in RoFormer/Llama).
        norm_eps: RMSNorm epsilon.
        init_std: std of the normal init of matrices (0.02, GPT-2); residual output projections
            get ``init_std/sqrt(2·n_layer)`` (GPT-2's scaled init).
        dtype: parameter dtype name: ``"float32"`` (training), ``"float64"`` (exact tests).
    """

    vocab_size: int = 256
    seq_len: int = 64
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    mlp_ratio: int = 4
    activation: str = "relu2"
    tie_embeddings: bool = True
    rope_base: float = 10000.0
    norm_eps: float = 1e-6
    init_std: float = 0.02
    dtype: str = "float32"

    def __post_init__(self):
        for name in ("vocab_size", "seq_len", "n_layer", "n_head", "d_model", "mlp_ratio"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"`{name}` must be a positive int; got {v!r}.")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(
                f"`d_model`={self.d_model} must be a multiple of `n_head`={self.n_head} with an "
                "even head dimension (RoPE rotates pairs); e.g. d_model=64, n_head=2."
            )
        if self.activation not in _ACTIVATIONS:
            raise ValueError(
                f"unknown `activation` {self.activation!r}; choose one of {_ACTIVATIONS}."
            )
        if self.dtype not in _DTYPES:
            raise ValueError(f"unknown `dtype` {self.dtype!r}; choose one of {sorted(_DTYPES)}.")
        if not (self.init_std > 0 and self.norm_eps > 0 and self.rope_base > 1):
            raise ValueError("`init_std`, `norm_eps` must be > 0 and `rope_base` > 1.")

    @property
    def torch_dtype(self) -> torch.dtype:
        """The parameter dtype as a ``torch.dtype``."""
        return _DTYPES[self.dtype]


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + ε) · w`` over the last dimension, learnable gain ``w`` (ones)."""

    def __init__(self, dim: int, eps: float = 1e-6, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize ``x`` ``(..., D)``."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Rotary(nn.Module):
    """Rotary embedding: rotate pairs ``(x_i, x_{i+d/2})`` by angle ``t · base^(-2i/d)``.

    ``q·k`` after rotation depends on positions only through ``t_q − t_k``.
    """

    def __init__(self, head_dim: int, seq_len: int, base: float, dtype: torch.dtype):
        super().__init__()
        inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        ang = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv[None, :]  # (T, d/2)
        self.register_buffer("cos", ang.cos().to(dtype), persistent=False)
        self.register_buffer("sin", ang.sin().to(dtype), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Rotate ``x`` ``(B, H, T, d)`` by its positions ``0..T-1``."""
        T = x.shape[-2]
        cos, sin = self.cos[:T], self.sin[:T]  # (T, d/2)
        x1, x2 = x.chunk(2, dim=-1)  # (B, H, T, d/2) each
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with RoPE on queries and keys, explicit softmax."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        D, dt = cfg.d_model, cfg.torch_dtype
        self.n_head, self.head_dim = cfg.n_head, D // cfg.n_head
        self.qkv = nn.Linear(D, 3 * D, bias=False, dtype=dt)
        self.proj = nn.Linear(D, D, bias=False, dtype=dt)
        self.rotary = Rotary(self.head_dim, cfg.seq_len, cfg.rope_base, dt)
        mask = torch.ones(cfg.seq_len, cfg.seq_len, dtype=torch.bool).tril()
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, D) -> (B, T, D)``."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)  # (B, T, D) each
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = self.rotary(q), self.rotary(k)  # (B, H, T, hd)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, T, T)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        return self.proj(y)


class MLP(nn.Module):
    """``W₂ φ(W₁ x)`` with ``φ`` = ReLU² (default), GELU or ReLU."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        D, dt = cfg.d_model, cfg.torch_dtype
        self.fc = nn.Linear(D, cfg.mlp_ratio * D, bias=False, dtype=dt)
        self.proj = nn.Linear(cfg.mlp_ratio * D, D, bias=False, dtype=dt)
        self.activation = cfg.activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, D) -> (B, T, D)``."""
        h = self.fc(x)  # (B, T, F)
        if self.activation == "relu2":
            h = F.relu(h).square()
        elif self.activation == "gelu":
            h = F.gelu(h)
        else:
            h = F.relu(h)
        return self.proj(h)


class Block(nn.Module):
    """Pre-norm residual block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        dt = cfg.torch_dtype
        self.norm1 = RMSNorm(cfg.d_model, cfg.norm_eps, dt)
        self.attn = CausalSelfAttention(cfg)
        self.norm2 = RMSNorm(cfg.d_model, cfg.norm_eps, dt)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, D) -> (B, T, D)``."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """Decoder-only LM: token ids ``(B, T)`` to next-token logits ``(B, T, V)``."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if not isinstance(cfg, GPTConfig):
            raise TypeError(f"`cfg` must be a GPTConfig; got {type(cfg).__name__}.")
        self.config = cfg
        dt = cfg.torch_dtype
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model, dtype=dt)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps, dt)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False, dtype=dt)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self._init()

    @torch.no_grad()
    def _init(self) -> None:
        std, out_std = (
            self.config.init_std,
            self.config.init_std / math.sqrt(2 * self.config.n_layer),
        )
        for name, p in self.named_parameters():
            if p.ndim < 2:
                continue  # RMSNorm gains stay at 1
            p.normal_(0.0, out_std if name.endswith("proj.weight") else std)

    def get_input_embeddings(self) -> nn.Embedding:
        """The token embedding (Hugging Face convention, used by ``partition_params``)."""
        return self.wte

    def get_output_embeddings(self) -> nn.Linear:
        """The LM head (the embedding itself when tied)."""
        return self.lm_head

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, T, V)`` of token ids ``idx`` ``(B, T)``, ``T <= seq_len``."""
        T = idx.shape[-1]
        if T > self.config.seq_len:
            raise ValueError(f"sequence length {T} exceeds `seq_len`={self.config.seq_len}.")
        x = self.wte(idx)  # (B, T, D)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))  # (B, T, V)

    def num_params(self, *, non_embedding: bool = False) -> int:
        """Parameter count (tied weights once); ``non_embedding`` leaves the embedding out."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wte.weight.numel() if non_embedding else n
