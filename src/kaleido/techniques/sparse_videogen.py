"""Sparse VideoGen-style attention (Xi et al., 2025): per-head spatial / temporal sparsity.

Every head of every layer and step is classified online from sampled query rows:

* the *spatial* pattern keeps, for each query block, the nearest key blocks in raster
  (frame-major) order - the tokens of the same and neighbouring frames;
* the *temporal* pattern keeps the nearest key blocks in the position-major layout
  ``(h, w, t)`` (SVG's layout transformation) - the same place in every frame and its
  neighbours;
* ``n_sample`` query rows are computed densely and under both masks; the head takes
  the pattern whose sampled output is closer (mean squared error) to the dense one.

Savings: the self-attention q.k^T and P.V pairs of the skipped blocks, counted from the
masks actually used.  The sampled rows' dense q.k^T and P.V are charged as ``estimate``.
The first ``dense_steps`` steps run dense.  In joint sequences the masks and the
classification cover video queries x video keys; every pair with a text token is computed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from kaleido.reuse import TokenGrid

from kaleido.techniques._blocks import (band_block_mask, block_of_token, expand_block_mask, keep_count, n_blocks,
                      temporal_layout)
from kaleido.techniques.attention_core import (AttnContext, dense_attention, install_attention_core, joint_keep, keep_attention,
                             masked_attention)
from kaleido.techniques.base import Method, check_range
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.registry import SPARSE_ATTENTION, register_technique
from kaleido.techniques.shapes import claims_of


@dataclass(frozen=True)
class SparseVideoGenSettings:
    density: float = 0.3  # fraction of key blocks each query block keeps
    block_size: int = 16  # tokens per block
    n_sample: int = 64  # query rows sampled per head to classify it ...
    max_sample_fraction: float = 0.125  # ... but at most this fraction of the rows (tiny grids)
    dense_steps: int = 0

    def __post_init__(self) -> None:
        check_range("sparse_videogen", "density", self.density, 0.0, 1.0, "fraction of key blocks kept")
        check_range("sparse_videogen", "block_size", self.block_size, 1, 1 << 16)
        check_range("sparse_videogen", "n_sample", self.n_sample, 1, 1 << 16)
        check_range("sparse_videogen", "max_sample_fraction", self.max_sample_fraction, 0.0, 1.0)
        check_range("sparse_videogen", "dense_steps", self.dense_steps, 0, 10_000)


def sample_rows(S: int, n: int) -> torch.Tensor:
    """``n`` (at most ``S``) evenly spaced query rows."""
    n = max(1, min(n, S))
    return torch.linspace(0, S - 1, n).round().long().unique()


@functools.lru_cache(maxsize=16)
def spatial_temporal_masks(grid: TokenGrid, density: float, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The two ``(S, S)`` bool masks: spatial (raster layout) and temporal (position-major layout); cached, read-only."""
    S = grid.n_grid
    nb = n_blocks(S, block_size)
    band = band_block_mask(nb, keep_count(density, nb))
    m_sp = expand_block_mask(band, block_of_token(torch.arange(S), block_size))
    m_tp = expand_block_mask(band, block_of_token(temporal_layout(grid), block_size))
    return m_sp, m_tp


def classify_heads(q, k, v, m_sp, m_tp, rows) -> torch.Tensor:
    """(B, H) bool, True where the temporal mask reproduces the sampled rows' dense output better."""
    qs = q[:, rows]
    ref = dense_attention(qs, k, v)  # (B, n, H, d)
    err_sp = (masked_attention(qs, k, v, m_sp[rows]) - ref).pow(2).mean(dim=(1, 3))  # (B, H)
    err_tp = (masked_attention(qs, k, v, m_tp[rows]) - ref).pow(2).mean(dim=(1, 3))
    return err_tp < err_sp


@register_technique(group=SPARSE_ATTENTION)
class SparseVideoGen(Method):
    name = "sparse_videogen"
    Settings = SparseVideoGenSettings
    claims = claims_of(("self_qk", "self_pv"))

    def _install(self, handle: MethodHandle) -> None:
        s = self.settings
        stats = handle.extra.setdefault("heads_spatial_temporal", [0, 0])

        def core(q, k, v, ctx: AttnContext):
            qv, kv, vv = ctx.video(q), ctx.video(k), ctx.video(v)  # the heads are classified on the video grid
            B, S, H, d = qv.shape
            m_sp, m_tp = spatial_temporal_masks(ctx.call.grid, s.density, s.block_size)
            rows = sample_rows(S, min(s.n_sample, int(s.max_sample_fraction * S)))
            temporal = classify_heads(qv, kv, vv, m_sp, m_tp, rows)  # (B, H)
            keep = torch.where(temporal.view(B, H, 1, 1), m_tp, m_sp)  # (B, H, S, S)
            stats[0] += int((~temporal).sum())
            stats[1] += int(temporal.sum())
            handle.ledger.add("estimate", mac8=2 * B * H * len(rows) * S * d)
            return keep_attention(q, k, v, joint_keep(keep, q, k, ctx), ctx)

        install_attention_core(handle, core, s.dense_steps)
