"""The baselines' attention cores, plugged into each model's own processor.

A method that changes self-attention (Sparse VideoGen, block top-k, ToMe, AdapTiV, EXION's
prediction) is a function ``fn(q, k, v, ctx) -> out`` on the site's q, k, v as the model's
processor built them - after norms and RoPE, text joined where the model joins it, layout
``(B, S, heads, head_dim)`` - the same point where Kaleido's processors call
:func:`~kaleido.techniques.kaleido_reuse.attention.reuse_attend`.  :func:`install_attention_core`
gives every self-attention site of the model its family's processor
(``site.make_processor(core, site, original)``: :mod:`kaleido.models.wan`,
``hunyuan_video``, ``cogvideox``) with a :class:`MethodCore` around ``fn``, and takes the
sites' q.k^T and P.V over for the method's own accounting.

Joint sequences (HunyuanVideo ``[video; text]``, CogVideoX ``[text; video]``): the text
tokens are not grid tokens.  A method selects over the video grid only -
:meth:`AttnContext.video` gives its part of q, k, v - and the helpers here compute every
(query, key) pair with a text token densely and count it as computed:
:func:`keep_attention` (a keep mask over video queries x video keys) and
:func:`merged_joint_attention` (token merging of the video tokens, text tokens alone).
The model's mask (HunyuanVideo's padded text) is applied as the stock kernel applies it.
Without text (Wan) both are the plain functions on the method's own mask or merge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from kaleido.reuse import TokenGrid

from kaleido.techniques._merge import merged_attention
from kaleido.techniques.call_context import CallInfo
from kaleido.techniques.handle import MethodHandle


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Plain softmax attention; (B, S, H, d) in and out."""
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return o.transpose(1, 2)


@dataclass
class AttnContext:
    """What a method's attention function may need besides q, k, v.

    ``hidden_states``: the attention's input rows of the video tokens ``(B, S_video, C)``;
    ``grid``: the grid of the site's sequence (text as ``prefix`` / ``suffix``; default: the call's
    video grid); ``attn_mask``: the model's mask as the stock kernel takes it; ``dense``: the stock
    kernel (default :func:`dense_attention`).
    """

    layer: int
    call: CallInfo
    hidden_states: torch.Tensor
    handle: MethodHandle
    grid: TokenGrid | None = None
    attn_mask: torch.Tensor | None = None
    dense: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None

    def __post_init__(self) -> None:
        if self.grid is None:
            self.grid = self.call.grid
        if self.dense is None:
            self.dense = dense_attention

    @property
    def has_text(self) -> bool:
        return self.grid.prefix + self.grid.suffix > 0

    def video(self, x: torch.Tensor) -> torch.Tensor:
        """The video-token rows of ``x`` ``(B, S, ...)`` (``x`` itself without text)."""
        return x[:, self.grid.grid_slice] if self.has_text else x


AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, AttnContext], torch.Tensor]


class MethodCore:
    """A baseline's attention core (an :class:`~kaleido.models.attention.AttentionCore`).

    Calls ``fn(q, k, v, ctx)``; the first ``dense_steps`` denoising steps (a warm-up every
    method shares) run the stock kernel instead and are charged as dense.
    """

    def __init__(self, handle: MethodHandle, fn: AttentionFn, dense_steps: int = 0) -> None:
        self.handle = handle
        self.fn = fn
        self.dense_steps = int(dense_steps)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, call) -> torch.Tensor:
        h, site = self.handle, call.site
        grid = h.sequence_grid(q.shape[1], f"attention {site.name}")
        ctx = AttnContext(site.layer, h.call, call.hidden_states, h, grid, call.attn_mask, call.dense)
        if ctx.call.step < self.dense_steps:
            B, Sq, H, d = q.shape
            record_pairs(h, B * H * Sq * k.shape[1], B * H * Sq * k.shape[1], d)
            return call.dense(q, k, v)
        return self.fn(q, k, v, ctx)

    def note_side_attention(self, call, q, k, v, tag: str) -> None:
        """Attention beside the site's own (Wan I2V image context) stays outside the ledger's op kinds."""


def install_attention_core(handle: MethodHandle, fn: AttentionFn, dense_steps: int = 0) -> None:
    """Give every self-attention site its model's processor calling ``fn``; undo restores the originals.

    Refused in one line: a site whose processor is not the stock one (another technique is applied).
    """
    adapter = handle.adapter
    core = MethodCore(handle, fn, dense_steps)
    sites = [s for s in handle.attention_sites if s.kind == "self"]
    for s in sites:
        adapter.require_stock_processor(s, handle.method.name, "remove the other technique first")
    for s in sites:
        original = s.module.processor
        s.module.set_processor(s.make_processor(core, s, original))
        handle.add_undo(lambda m=s.module, p=original: m.set_processor(p))
        handle.take_over(s.name, ("self_qk", "self_pv"))


def record_pairs(handle: MethodHandle, kept_pairs: int, total_pairs: int, head_dim: int) -> None:
    """Charge self_qk and self_pv for ``kept_pairs`` of ``total_pairs`` (query, key) pairs."""
    kept = int(kept_pairs) * head_dim
    skipped = (int(total_pairs) - int(kept_pairs)) * head_dim
    handle.ledger.add("self_qk", mac8=kept, skipped=skipped)
    handle.ledger.add("self_pv", mac8=kept, skipped=skipped)


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor,
                     key_bias: torch.Tensor | None = None) -> torch.Tensor:
    """Attention restricted to ``keep`` (bool, broadcastable to (B, H, Sq, Sk)); (B, S, H, d) layout.

    ``key_bias`` (broadcastable to (B, H, Sq, Sk)) is added to the logits (ToMe's log-size term, an
    additive model mask).  Every query row must keep at least one key.
    """
    qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    logits = (qh @ kh.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if key_bias is not None:
        logits = logits + key_bias
    logits = logits.masked_fill(~keep, float("-inf"))
    return (logits.softmax(-1) @ vh).transpose(1, 2)


def joint_keep(keep_video: torch.Tensor, q: torch.Tensor, k: torch.Tensor, ctx: AttnContext) -> torch.Tensor:
    """The ``(B, H, Sq, Sk)`` pairs computed: ``keep_video`` (broadcastable to (B, H, S_video, S_video)) on
    video queries x video keys, every pair with a text token kept; ``keep_video`` itself without text."""
    if not ctx.has_text:
        return keep_video
    B, Sq, H, _ = q.shape
    keep = torch.ones(B, H, Sq, k.shape[1], dtype=torch.bool, device=q.device)
    gs = ctx.grid.grid_slice
    keep[:, :, gs, gs] = keep_video
    return keep


def keep_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor,
                   ctx: AttnContext) -> torch.Tensor:
    """Attention on the pairs of ``keep`` (:func:`joint_keep`'s full mask) and the model's mask; charges
    self_qk / self_pv with the kept pairs (text pairs among them: computed) of all ``B*H*Sq*Sk``."""
    B, Sq, H, d = q.shape
    Sk = k.shape[1]
    full = keep.expand(B, H, Sq, Sk)
    record_pairs(ctx.handle, int(full.sum()), B * H * Sq * Sk, d)
    m = ctx.attn_mask
    if m is None:
        return masked_attention(q, k, v, keep)
    if m.dtype == torch.bool:
        return masked_attention(q, k, v, full & m)
    return masked_attention(q, k, v, keep, key_bias=m)


def key_bias_of(ctx: AttnContext, b: int, n_keys: int) -> torch.Tensor | None:
    """The model mask of sequence ``b`` as an additive ``(n_keys,)`` bias over its keys, or ``None``.

    Token merging needs a mask that depends on the key only (HunyuanVideo's ``(B, 1, 1, S)`` padding
    mask); a mask per query is refused in one line.
    """
    m = ctx.attn_mask
    if m is None:
        return None
    mb = m[b] if m.dim() == 4 and m.shape[0] > 1 else (m[0] if m.dim() == 4 else m)
    if mb.numel() != n_keys:
        raise ValueError(f"{ctx.handle.method.name}: the model's attention mask {tuple(m.shape)} depends on the query; "
                         "token merging needs a mask over keys only")
    mb = mb.reshape(n_keys)
    if mb.dtype == torch.bool:
        return torch.zeros(n_keys, dtype=torch.float32, device=mb.device).masked_fill(~mb, float("-inf"))
    return mb.float()


def merged_joint_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group_video: torch.Tensor,
                           ctx: AttnContext, b: int) -> tuple[torch.Tensor, int]:
    """:func:`~._merge.merged_attention` of sequence ``b`` (``q, k, v``: (S, H, d)) after merging its video
    tokens by ``group_video`` ``(S_video,)``; text tokens stay alone.  Returns (out (S, H, d), merged count N')."""
    g = ctx.grid
    bias = key_bias_of(ctx, b, k.shape[0])
    if not ctx.has_text:
        return merged_attention(q, k, v, group_video, key_bias=bias)
    n_video = int(group_video.max()) + 1
    n_text = g.prefix + g.suffix
    group = torch.empty(g.seq_len, dtype=torch.long)
    text = torch.ones(g.seq_len, dtype=torch.bool)
    text[g.grid_slice] = False
    group[g.grid_slice] = group_video
    group[text] = torch.arange(n_video, n_video + n_text)
    return merged_attention(q, k, v, group, key_bias=bias)
