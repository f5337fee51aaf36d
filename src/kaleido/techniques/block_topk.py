"""Block top-k sparse attention in the spirit of MInference's block-sparse pattern.

Per head, q and k are mean-pooled over blocks of ``block_size`` raster-order tokens;
the pooled scores ``q_blk . k_blk^T`` pick, for each query block, the ``density``
fraction of key blocks with the highest score; attention is computed on those blocks
only (video tokens: every pair with a text token of a joint sequence is computed).
Savings: the skipped blocks' q.k^T and P.V pairs, counted from the masks used;
the pooled score GEMM (``B*H*nb*nb*head_dim`` MACs) is charged as ``estimate``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kaleido.techniques._blocks import block_of_token, expand_block_mask, keep_count, n_blocks
from kaleido.techniques.attention_core import AttnContext, install_attention_core, joint_keep, keep_attention
from kaleido.techniques.base import Method, check_range
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.registry import SPARSE_ATTENTION, register_technique
from kaleido.techniques.shapes import claims_of


@dataclass(frozen=True)
class BlockTopKSettings:
    density: float = 0.3  # fraction of key blocks each query block keeps
    block_size: int = 16
    dense_steps: int = 0

    def __post_init__(self) -> None:
        check_range("block_topk", "density", self.density, 0.0, 1.0, "fraction of key blocks kept")
        check_range("block_topk", "block_size", self.block_size, 1, 1 << 16)
        check_range("block_topk", "dense_steps", self.dense_steps, 0, 10_000)


def pooled_block_scores(q: torch.Tensor, k: torch.Tensor, block_size: int) -> torch.Tensor:
    """(B, S, H, d) q, k -> (B, H, nb, nb) scores of block means (last block may be partial)."""
    B, S, H, d = q.shape
    nb = n_blocks(S, block_size)
    pad = nb * block_size - S

    def pool(x):
        xh = x.permute(0, 2, 1, 3)  # (B, H, S, d)
        if pad:
            xh = F.pad(xh, (0, 0, 0, pad))
        summed = xh.reshape(B, H, nb, block_size, d).sum(3)
        counts = torch.full((nb,), float(block_size))
        counts[-1] = block_size - pad
        return summed / counts.view(1, 1, nb, 1)

    return pool(q) @ pool(k).transpose(-1, -2)


@register_technique(group=SPARSE_ATTENTION)
class BlockTopK(Method):
    name = "block_topk"
    Settings = BlockTopKSettings
    claims = claims_of(("self_qk", "self_pv"))

    def _install(self, handle: MethodHandle) -> None:
        s = self.settings

        def core(q, k, v, ctx: AttnContext):
            qv, kv = ctx.video(q), ctx.video(k)  # blocks of video tokens (text pairs stay dense)
            B, S, H, d = qv.shape
            nb = n_blocks(S, s.block_size)
            scores = pooled_block_scores(qv, kv, s.block_size)
            top = scores.topk(keep_count(s.density, nb), dim=-1).indices
            bm = torch.zeros(B, H, nb, nb, dtype=torch.bool).scatter_(-1, top, True)
            keep = expand_block_mask(bm, block_of_token(torch.arange(S), s.block_size))
            handle.ledger.add("estimate", mac8=B * H * nb * nb * d)
            return keep_attention(q, k, v, joint_keep(keep, q, k, ctx), ctx)

        install_attention_core(handle, core, s.dense_steps)
