"""Transformers for the sparse-attention Markov task (seed 004, Section 2, App. B, C.1, Table 3).

* :class:`MinimalAttention`: the minimal model of App. B/C.1: one-hot tokens and positions
  ``x~_p = [e_{x_p}; e_p] in R^D`` (``D = d + L``), one bilinear score matrix ``A_k`` per head,
  value matrices ``V_k in R^{d x D}``, no embedding, LN, residual, MLP, dropout or 1/sqrt scaling:
  ``logits_p = sum_k V_k sum_{j<=p} softmax_j(x~_j^T A_k x~_p) x~_j``.
  Init: ``A_k ~ U[-u, u]``, ``V_k = 0`` (C.1).
* :class:`FullTransformer`: the one-block decoder of Table 3 (hidden 255, 3 heads, FF 64,
  dropout 0.1, learned positions, untied (un)embedding, post-LN with ReLU, digest A6).

Both take ``context``: ``None`` (full causal) or ``c``, a banded causal mask that lets query ``p``
see only keys ``p-c+1..p`` (lags ``1..c`` of its target; the restricted-context models of App. B).
Both score only the ``T`` query positions ``p = w-1 .. L-2`` (0-based), whose targets are the
generated tokens, and return ``(B, T, d)`` logits (and ``(B, H, T, L)`` attention on request).

Examples:
    >>> cfg = MinimalConfig(d=5, L=9, w=3, n_head=2)
    >>> model = MinimalAttention(cfg)
    >>> logits, att = model(torch.zeros(4, 9, dtype=torch.long), return_attn=True)
    >>> tuple(logits.shape), tuple(att.shape)
    ((4, 6, 5), (2, 4, 6, 9))
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "MinimalConfig",
    "FullConfig",
    "MinimalAttention",
    "FullTransformer",
    "build_model",
    "param_groups",
    "query_mask",
]


def _check_common(cfg) -> None:
    for name in ("d", "L", "w", "n_head"):
        v = getattr(cfg, name)
        if not (isinstance(v, int) and v >= 1):
            raise ValueError(f"`{name}` must be a positive int; got {v!r}.")
    if cfg.w >= cfg.L:
        raise ValueError(f"`w`={cfg.w} must be smaller than the sequence length `L`={cfg.L}.")
    if cfg.context is not None and not (isinstance(cfg.context, int) and cfg.context >= 1):
        raise ValueError(f"`context` must be None or a positive int; got {cfg.context!r}.")


@dataclasses.dataclass(frozen=True)
class MinimalConfig:
    """Minimal model (App. B/C.1). Defaults: minimal setting of Table 4 (w=6, L=26, d=50)."""

    d: int = 50  # vocabulary size
    L: int = 26  # sequence length w + T
    w: int = 6  # seed tokens; queries are positions w-1..L-2
    n_head: int = 3  # Table 3
    init_scale: float = 1.0  # u of A_k ~ U[-u, u] (C.1); unstated default, Table 3 "scale 1"
    context: int | None = None  # banded mask width c (None = full causal)

    def __post_init__(self) -> None:
        _check_common(self)
        if not (isinstance(self.init_scale, (int, float)) and math.isfinite(self.init_scale)
                and self.init_scale >= 0):  # fmt: skip
            raise ValueError(
                f"`init_scale` (u) must be >= 0; got {self.init_scale!r}. u = 0 gives identical "
                "heads (Fig. 4 left)."
            )


@dataclasses.dataclass(frozen=True)
class FullConfig:
    """Full one-block decoder (Table 3). Defaults: full setting of Table 4 (w=12, L=32)."""

    d: int = 50
    L: int = 32
    w: int = 12
    n_head: int = 3
    n_embd: int = 255  # 3 heads x 85
    d_ff: int = 64  # Table 3 "feedforward dimension"
    dropout: float = 0.1
    init_scale: float = 1.0  # multiplies PyTorch's default init of every weight (Table 3)
    context: int | None = None

    def __post_init__(self) -> None:
        _check_common(self)
        if self.n_embd % self.n_head:
            raise ValueError(f"`n_embd`={self.n_embd} must be divisible by `n_head`={self.n_head}.")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"`dropout` must be in [0, 1); got {self.dropout!r}.")
        if not (math.isfinite(self.init_scale) and self.init_scale >= 0):
            raise ValueError(f"`init_scale` must be a finite number >= 0; got {self.init_scale!r}.")


def query_mask(L: int, w: int, context: int | None, device=None) -> torch.Tensor:
    """Boolean ``(T, L)`` mask (True = may attend) for queries ``p = w-1..L-2``: causal, banded."""
    p = torch.arange(w - 1, L - 1, device=device)[:, None]  # (T, 1)
    j = torch.arange(L, device=device)[None, :]  # (1, L)
    ok = j <= p
    if context is not None:
        ok &= j > p - context
    return ok


class MinimalAttention(nn.Module):
    """Minimal multi-head attention of App. B/C.1 (see the module docstring)."""

    def __init__(self, config: MinimalConfig) -> None:
        super().__init__()
        self.config = c = config
        D = c.d + c.L
        self.A = nn.Parameter(torch.empty(c.n_head, D, D).uniform_(-c.init_scale, c.init_scale))
        self.V = nn.Parameter(torch.zeros(c.n_head, c.d, D))
        bias = torch.zeros(c.L - c.w, c.L).masked_fill(~query_mask(c.L, c.w, c.context), -math.inf)
        self.register_buffer("bias", bias[:, None, :], persistent=False)  # (T, 1, L) causal mask
        self.register_buffer("qpos", torch.arange(c.w - 1, c.L - 1), persistent=False)

    def forward(self, idx: torch.Tensor, return_attn: bool = False):
        """Logits ``(B, T, d)`` at the scored queries (and the attention ``(H, B, T, L)``)."""
        c = self.config
        B, L = idx.shape
        H, d, D = c.n_head, c.d, c.d + c.L
        if L != c.L:
            raise ValueError(f"`idx` must have length L={c.L}; got {idx.shape=}.")
        Tq = L - c.w
        onehot = F.one_hot(idx, d).to(self.A.dtype)  # (B, L, d)
        eye = torch.eye(L, dtype=onehot.dtype, device=idx.device).expand(B, L, L)  # (B, L, L)
        Xt = torch.cat([onehot, eye], dim=-1)  # (B, L, D) columns x~_j = [e_{x_j}; e_j]
        # Query side: A_k x~_p for every head at once (one-hot matmuls beat gathers' backward).
        Xq = Xt[:, c.w - 1 : L - 1].reshape(B * Tq, D)  # (B*Tq, D) scored queries
        Wq = self.A.transpose(1, 2).permute(1, 0, 2).reshape(D, H * D)  # (D, H*D) [A_1^T..A_H^T]
        R = (Xq @ Wq).view(B, Tq * H, D)  # (B, Tq*H, D): row (q, k) = (A_k x~_p)^T
        # Key side: score(p, j) = x~_j^T (A_k x~_p).
        score = torch.bmm(R, Xt.transpose(1, 2)).view(B, Tq, H, L)  # (B, Tq, H, L)
        att = torch.softmax(score + self.bias, dim=-1)  # (B, Tq, H, L); bias (Tq, 1, L)
        # Values: V_k x~_j for every key j and head k, laid out (B, L*H, d).
        Wv = self.V.transpose(1, 2).permute(1, 0, 2).reshape(D, H * d)  # (D, H*d) [V_1^T..V_H^T]
        U = (Xt.reshape(B * L, D) @ Wv).view(B, L * H, d)  # (B, L*H, d): row (j, k) = V_k x~_j
        a = att.transpose(2, 3).reshape(B, Tq, L * H)  # (B, Tq, L*H)
        logits = torch.bmm(a, U)  # (B, Tq, L*H) @ (B, L*H, d) -> (B, Tq, d)
        att = att.permute(2, 0, 1, 3)  # (H, B, Tq, L)
        return (logits, att) if return_attn else logits


class CausalSelfAttention(nn.Module):
    """Multi-head causal (optionally banded) self-attention that can return its weights."""

    def __init__(self, config: FullConfig) -> None:
        super().__init__()
        c = config
        self.n_head, self.n_embd = c.n_head, c.n_embd
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)
        self.attn_dropout = nn.Dropout(c.dropout)
        ok = torch.ones(c.L, c.L, dtype=torch.bool).tril()
        if c.context is not None:
            ok &= ~torch.ones(c.L, c.L, dtype=torch.bool).tril(-c.context)
        self.register_buffer("ok", ok, persistent=False)  # (L, L)

    def forward(self, x: torch.Tensor):
        B, L, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)  # 3 x (B, L, C)
        q = q.view(B, L, self.n_head, hs).transpose(1, 2)  # (B, H, L, hs)
        k = k.view(B, L, self.n_head, hs).transpose(1, 2)  # (B, H, L, hs)
        v = v.view(B, L, self.n_head, hs).transpose(1, 2)  # (B, H, L, hs)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, H, L, L)
        att = att.masked_fill(~self.ok[:L, :L], float("-inf"))
        att = torch.softmax(att, dim=-1)  # (B, H, L, L)
        y = self.attn_dropout(att) @ v  # (B, H, L, hs)
        y = y.transpose(1, 2).contiguous().view(B, L, C)  # (B, L, C)
        return self.c_proj(y), att


class Block(nn.Module):
    """Post-LN encoder block with ReLU MLP (PyTorch ``TransformerEncoderLayer`` layout)."""

    def __init__(self, config: FullConfig) -> None:
        super().__init__()
        self.attn = CausalSelfAttention(config)
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, config.d_ff),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.d_ff, config.n_embd),
        )
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor):
        a, att = self.attn(x)
        x = self.ln_1(x + self.drop(a))  # (B, L, C)
        x = self.ln_2(x + self.drop(self.mlp(x)))  # (B, L, C)
        return x, att


class FullTransformer(nn.Module):
    """One-block decoder of Table 3 with learned absolute positions and untied unembedding."""

    def __init__(self, config: FullConfig) -> None:
        super().__init__()
        self.config = c = config
        self.wte = nn.Embedding(c.d, c.n_embd)
        self.wpe = nn.Embedding(c.L, c.n_embd)
        self.drop = nn.Dropout(c.dropout)
        self.block = Block(c)
        self.lm_head = nn.Linear(c.n_embd, c.d)
        if c.init_scale != 1.0:
            with torch.no_grad():
                for p in self.parameters():
                    if p.ndim >= 2:
                        p.mul_(c.init_scale)

    def forward(self, idx: torch.Tensor, return_attn: bool = False):
        """Logits ``(B, T, d)`` at the scored queries (and attention ``(H, B, T, L)``)."""
        c = self.config
        B, L = idx.shape
        if L != c.L:
            raise ValueError(f"`idx` must have length L={c.L}; got {idx.shape=}.")
        pos = torch.arange(L, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, L, C)
        x, att = self.block(x)  # (B, L, C), (B, H, L, L)
        x = x[:, c.w - 1 : L - 1]  # (B, T, C) scored queries
        logits = self.lm_head(x)  # (B, T, d)
        if return_attn:
            return logits, att[:, :, c.w - 1 : L - 1].transpose(0, 1)  # (H, B, T, L)
        return logits


def build_model(config: MinimalConfig | FullConfig) -> nn.Module:
    """Instantiate the model that ``config`` describes."""
    if isinstance(config, MinimalConfig):
        return MinimalAttention(config)
    if isinstance(config, FullConfig):
        return FullTransformer(config)
    raise TypeError(f"`config` must be MinimalConfig or FullConfig; got {type(config).__name__}.")


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """NanoGPT partition: matrices (``ndim >= 2``) decay; gains, biases decay-free.

    Embeddings are matrices here and decay, as in nanoGPT's ``configure_optimizers``.
    """
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups
