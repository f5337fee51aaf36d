"""ToMe merges its best-matched tokens and block top-k keeps its highest-scoring blocks (brute force).

Both methods' attention cores are the callables their ``apply`` installs on a tiny Wan
model's ``attn1`` processors; they are called here directly on small random q, k, v.
The references are written out loop by loop: every source-destination cosine
similarity (ToMe), every pooled block score and top-k (block top-k), and the attention
each selection implies.
"""

from __future__ import annotations

import math

import pytest
import torch

from kaleido.techniques import BlockTopK, ToMe
from kaleido.techniques._merge import local_windows, window_dst
from kaleido.techniques.base import CallInfo
from kaleido.techniques.block_topk import pooled_block_scores
from kaleido.techniques.attention_core import AttnContext
from kaleido.reuse import TokenGrid


def _wan():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    return WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
        text_dim=16, freq_dim=16, ffn_dim=32, num_layers=1, rope_max_seq_len=64,
    ).eval()


def _core_and_ctx(method, grid: TokenGrid, batch: int, layer: int = 0, step: int = 0):
    model = _wan()
    handle = method.apply(model)
    core = model.blocks[layer].attn1.processor.core.fn  # the method's attention function in Wan's processor
    call = CallInfo(grid, step, 500.0, batch=batch)
    return core, AttnContext(layer, call, torch.zeros(batch, grid.n_grid, 16), handle)


def _qkv(B, S, H, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, S, H, d, generator=g, dtype=torch.float64) for _ in range(3))


def _partition(out_b: torch.Tensor) -> set[frozenset[int]]:
    """Tokens whose output rows are identical (ToMe's unmerge copies one row to a whole group)."""
    _, inverse = torch.unique(out_b.reshape(out_b.shape[0], -1), dim=0, return_inverse=True)
    groups: dict[int, set[int]] = {}
    for i, gid in enumerate(inverse.tolist()):
        groups.setdefault(gid, set()).add(i)
    return {frozenset(g) for g in groups.values()}


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(sum(x * y for x, y in zip(a.tolist(), b.tolist())) / (a.norm() * b.norm()))


@pytest.mark.parametrize("ratio", [0.25, 0.5])
def test_tome_merges_the_best_matched_sources_into_their_best_destinations(ratio):
    grid, window, seed, layer, step = TokenGrid(2, 4, 4), (1, 2, 2), 3, 0, 2
    B, S, H, d = 2, grid.n_grid, 2, 4
    core, ctx = _core_and_ctx(ToMe(ratio=ratio, window=window, seed=seed), grid, B, layer, step)
    q, k, v = _qkv(B, S, H, d)
    out = core(q, k, v, ctx)
    assert out.shape == (B, S, H, d)
    # destinations: one per (1, 2, 2) window, drawn per (seed, layer, step) as ToMe documents
    g = torch.Generator().manual_seed(seed * 1_000_003 + layer * 1009 + step)
    is_dst = window_dst(local_windows(grid, window), g)
    dst = is_dst.nonzero().flatten().tolist()
    src = (~is_dst).nonzero().flatten().tolist()
    assert len(dst) == 8
    r = min(round(ratio * S), len(src))
    for b in range(B):
        keys = k[b].reshape(S, H * d)  # ToMe's metric: the keys, all heads concatenated
        best = {}
        for s in src:
            sims = {t: _cos(keys[s], keys[t]) for t in dst}
            top = max(sims, key=sims.get)
            best[s] = (sims[top], top)
        ranked = sorted(src, key=lambda s: best[s][0], reverse=True)
        chosen = ranked[:r]
        assert best[ranked[r - 1]][0] > best[ranked[r]][0]  # no tie at the cut: the expected set is unique
        expected = {t: {t} for t in dst}
        for s in chosen:
            expected[best[s][1]].add(s)
        expected_groups = {frozenset(m) for m in expected.values()} | {frozenset({s}) for s in src if s not in chosen}
        got = _partition(out[b])
        assert all(len(gr & set(dst)) <= 1 for gr in got), "ToMe's destination draw changed; update this test"
        merged = sorted(s for gr in got if len(gr) > 1 for s in gr if s not in dst)
        assert merged == sorted(chosen), (
            f"batch {b}: merged sources {merged}, but the {r} best-matched are {sorted(chosen)}"
        )
        assert got == expected_groups  # ... each into the destination it matches best
        # the attention on the merged tokens: group means, proportional attention (+ log size), unmerge
        members = sorted((sorted(gr) for gr in got), key=lambda m: m[0])
        qm = torch.stack([q[b, m].mean(0) for m in members])  # (n, H, d)
        km = torch.stack([k[b, m].mean(0) for m in members])
        vm = torch.stack([v[b, m].mean(0) for m in members])
        size = torch.tensor([len(m) for m in members], dtype=q.dtype)
        logits = torch.einsum("ahd,bhd->hab", qm, km) / math.sqrt(d) + size.log().view(1, 1, -1)
        om = torch.einsum("hab,bhd->ahd", logits.softmax(-1), vm)
        ref = torch.empty_like(out[b])
        for gi, m in enumerate(members):
            ref[m] = om[gi]
        torch.testing.assert_close(out[b], ref, rtol=1e-9, atol=1e-9)


def test_block_topk_keeps_the_highest_scoring_blocks():
    grid, block, density = TokenGrid(2, 3, 6), 8, 0.4  # 36 tokens: 5 blocks, the last one of 4 tokens
    B, S, H, d = 2, grid.n_grid, 2, 4
    nb, keep = 5, 2  # round(0.4 * 5) key blocks per query block
    core, ctx = _core_and_ctx(BlockTopK(density=density, block_size=block), grid, B)
    q, k, v = _qkv(B, S, H, d, seed=1)
    out = core(q, k, v, ctx)
    blocks = [list(range(j * block, min(S, (j + 1) * block))) for j in range(nb)]
    assert len(blocks[-1]) == 4
    scores = torch.empty(B, H, nb, nb, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            qb = [q[b, m, h].mean(0) for m in blocks]
            kb = [k[b, m, h].mean(0) for m in blocks]
            for i in range(nb):
                for j in range(nb):
                    scores[b, h, i, j] = float(sum(x * y for x, y in zip(qb[i].tolist(), kb[j].tolist())))
    torch.testing.assert_close(pooled_block_scores(q, k, block), scores, rtol=1e-9, atol=1e-9)
    ref = torch.empty_like(out)
    kept_pairs = 0
    for b in range(B):
        for h in range(H):
            for i in range(nb):
                ranked = sorted(range(nb), key=lambda j: float(scores[b, h, i, j]), reverse=True)
                assert scores[b, h, i, ranked[keep - 1]] > scores[b, h, i, ranked[keep]]  # no tie at the cut
                allowed = [t for j in ranked[:keep] for t in blocks[j]]
                kept_pairs += len(blocks[i]) * len(allowed)
                for t in blocks[i]:
                    logits = torch.stack([q[b, t, h] @ k[b, u, h] for u in allowed]) / math.sqrt(d)
                    ref[b, t, h] = logits.softmax(0) @ v[b, allowed, h]
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-9)
    # the savings it charges are those of the blocks it kept
    qk = ctx.handle.ledger.op_counts()["self_qk"]
    assert (qk.mac8, qk.skipped) == ((kept_pairs * d,), ((B * H * S * S - kept_pairs) * d,))
