"""Token merging (ToMe, Bolya et al.; the ToMe-for-diffusion variant) on self-attention.

Per sequence, every local window of ``window`` = (1, 2, 2) grid cells contributes one
destination token (a random member, fixed per layer and step); all others are sources.
Each source is matched to its most similar destination (cosine similarity of the keys,
all heads concatenated - ToMe's metric); the ``ratio * S`` best-matched sources are
merged into their destinations.  q, k and v are merged after RoPE (the models apply RoPE
after the projections, so merging before them would mix positions); projections stay
dense.  In joint sequences only the video tokens merge; text tokens stay alone.  Attention runs on the merged tokens with proportional attention and is
unmerged afterwards (:mod:`._merge`).

Savings: self-attention q.k^T and P.V cost ``N'^2`` instead of ``N^2`` pairs (text included), counted
from the merged token count ``N'`` of every call.  The similarity GEMM
(``n_src * n_dst * heads*head_dim`` MACs) is charged as ``estimate``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kaleido.techniques._merge import groups_from_pairs, local_windows, window_dst
from kaleido.techniques.attention_core import AttnContext, install_attention_core, merged_joint_attention, record_pairs
from kaleido.techniques.base import Method, check_range
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.registry import TOKEN_MERGING, register_technique
from kaleido.techniques.shapes import claims_of


@dataclass(frozen=True)
class ToMeSettings:
    ratio: float = 0.5  # fraction of all tokens merged away (at most the number of sources)
    window: tuple = (1, 2, 2)  # (t, h, w) grid cells per destination window
    dense_steps: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        check_range("tome", "ratio", self.ratio, 0.0, 1.0, "fraction of tokens merged away")
        if len(tuple(self.window)) != 3 or any(int(w) < 1 for w in self.window):
            raise ValueError(f"tome: window={self.window!r} must be three positive ints (t, h, w)")
        object.__setattr__(self, "window", tuple(int(w) for w in self.window))
        check_range("tome", "dense_steps", self.dense_steps, 0, 10_000)


@register_technique(group=TOKEN_MERGING)
class ToMe(Method):
    name = "tome"
    Settings = ToMeSettings
    claims = claims_of(("self_qk", "self_pv"))

    def _install(self, handle: MethodHandle) -> None:
        s = self.settings

        def core(q, k, v, ctx: AttnContext):
            B, N, H, d = q.shape
            kv = ctx.video(k)  # video tokens merge; text tokens stay alone
            S = kv.shape[1]
            win = local_windows(ctx.call.grid, s.window)
            g = torch.Generator().manual_seed(s.seed * 1_000_003 + ctx.layer * 1009 + ctx.call.step)
            is_dst = window_dst(win, g)
            dst_idx, src_idx = is_dst.nonzero().squeeze(1), (~is_dst).nonzero().squeeze(1)
            r = min(int(round(s.ratio * S)), src_idx.numel())
            outs, kept = [], 0
            for b in range(B):
                metric = F.normalize(kv[b].reshape(S, H * d), dim=-1)
                sim = metric[src_idx] @ metric[dst_idx].T  # (n_src, n_dst)
                best, best_dst = sim.max(dim=1)
                chosen = best.argsort(descending=True)[:r]
                group = groups_from_pairs(S, src_idx[chosen], dst_idx[best_dst[chosen]])
                o, n = merged_joint_attention(q[b], k[b], v[b], group, ctx, b)
                outs.append(o)
                kept += H * n * n
                handle.ledger.add("estimate", mac8=src_idx.numel() * dst_idx.numel() * H * d)
            handle.extra.setdefault("merged_tokens", []).append(r)
            record_pairs(handle, kept, B * H * N * N, d)
            return torch.stack(outs)

        install_attention_core(handle, core, s.dense_steps)
