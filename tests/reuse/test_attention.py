import json

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from kaleido.reuse import (
    ChannelGroups,
    Mode,
    ReuseConfig,
    TokenGrid,
    effective_operand,
    quantize,
    reuse_attention,
)

from .strategies import correlated_rows, grids

FAST = settings(max_examples=25, deadline=None)


def _sdpa(q, k, v, **kw):
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), **kw).transpose(1, 2)


def _qkv(grid, D, seed, B=2, H=2, Sk=None, Dv=None):
    g = torch.Generator().manual_seed(seed)
    q = (correlated_rows((B, H), grid, D, seed, step=0.7) / 60).transpose(1, 2).contiguous()
    Sk = grid.seq_len if Sk is None else Sk
    k = torch.randn(B, Sk, H, D, generator=g)
    v = torch.randn(B, Sk, H, Dv or D, generator=g)
    return q, k, v


@FAST
@given(grid=grids(), seed=st.integers(0, 10_000), cross=st.booleans(), masked=st.booleans())
def test_zero_thresholds_match_sdpa(grid, seed, cross, masked):
    groups = ChannelGroups.from_rope(4, 2, 2)
    Sk = 7 if cross else None
    q, k, v = _qkv(grid, 8, seed, Sk=Sk, Dv=5)
    mask = None
    if masked:
        mask = torch.rand(1, 1, grid.seq_len, k.shape[1], generator=torch.Generator().manual_seed(seed)) < 0.8
        mask[..., 0] = True  # every query attends somewhere
    out, stats = reuse_attention(q, k, v, grid, groups, ReuseConfig.dense(), attn_mask=mask)
    ref = _sdpa(q, k, v, attn_mask=mask)
    assert out.shape == (2, grid.seq_len, 2, 5)
    assert torch.allclose(out, ref, atol=1e-6, rtol=1e-5)
    assert stats.qk_ops.total_mac8 == stats.qk_ops.dense_macs == 2 * 2 * grid.seq_len * k.shape[1] * 8
    assert stats.qk_head_saved_fraction == [0.0, 0.0]
    # the int8 path with zero thresholds is close to SDPA too (quantisation only)
    out8, _ = reuse_attention(q, k, v, grid, groups, ReuseConfig.dense(), attn_mask=mask, exact_int8=True)
    assert float((out8 - ref).abs().max()) < 0.1


def test_reuse_attention_equals_sdpa_on_the_effective_query():
    grid = TokenGrid(3, 4, 4, suffix=3)
    groups = ChannelGroups.from_rope(6, 5, 5)
    q, k, v = _qkv(grid, 16, 1, Sk=11)
    cfg = ReuseConfig(2, 6)
    out, stats = reuse_attention(q, k, v, grid, groups, cfg, scale=0.3)
    modes = stats.qk_modes.modes
    assert modes.shape == (2, 2, grid.seq_len, 3)
    assert (modes == Mode.FULL).any() and (modes == Mode.PARTIAL).any()
    assert not modes[:, :, -3:].any()  # text suffix computes
    q_eff = effective_operand(q.transpose(1, 2), stats.qk_modes).transpose(1, 2)
    assert torch.allclose(out, _sdpa(q_eff, k, v, scale=0.3), atol=1e-6)
    # decisions are those of the quantised q
    from kaleido.reuse import decide

    q_q, _ = quantize(q.transpose(1, 2), groups)
    assert torch.equal(decide(q_q, grid, groups, cfg).modes, modes)
    # per-head fractions agree with the op counts
    total = sum(stats.qk_head_saved_fraction) / 2
    assert total == pytest.approx(stats.qk_ops.saved_fraction)
    assert stats.pv_modes is None and stats.pv_ops.total_mac8 == 2 * 2 * grid.seq_len * 11 * 16
    d = json.loads(json.dumps(stats.to_dict()))
    assert d["qk_ops"]["dense_macs"] == stats.qk_ops.dense_macs and d["pv_modes"] is None


def test_pv_reuse_and_int8_path():
    grid = TokenGrid(2, 4, 4)
    groups = ChannelGroups.from_rope(6, 5, 5)
    q, k, v = _qkv(grid, 16, 2)
    cfg = ReuseConfig(2, 6)
    ref = _sdpa(q, k, v)
    out_f, st_f = reuse_attention(q, k, v, grid, groups, cfg, pv_config=ReuseConfig.dense())
    out_s, st_s = reuse_attention(q, k, v, grid, groups, cfg)
    assert torch.allclose(out_f, out_s, atol=1e-5)  # dense P.V through the explicit path
    assert st_f.pv_modes.modes.shape == (2, 2, grid.seq_len, 1)
    assert st_f.pv_ops.dense_macs == st_s.pv_ops.dense_macs
    pv_groups = ChannelGroups.from_chunks(grid.seq_len, 8, "w")
    out_r, st_r = reuse_attention(q, k, v, grid, groups, cfg, pv_config=ReuseConfig(1, 4), pv_groups=pv_groups)
    assert st_r.pv_modes.modes.shape[-1] == 4 and len(st_r.pv_head_saved_fraction) == 2
    out_i, st_i = reuse_attention(q, k, v, grid, groups, cfg, exact_int8=True)
    assert torch.equal(st_i.qk_modes.modes, st_s.qk_modes.modes)
    for o in (out_r, out_i):
        assert float((o - ref).norm() / ref.norm()) < 0.1


def test_reuse_attention_rejects_bad_input():
    grid = TokenGrid(2, 2, 2)
    groups = ChannelGroups.from_rope(4, 2, 2)
    q, k, v = _qkv(grid, 8, 0)
    cfg = ReuseConfig(1, 4)
    with pytest.raises(ValueError, match="sum to 8 channels but the q head dim has 6"):
        reuse_attention(q[..., :6], k[..., :6], v, grid, groups, cfg)
    with pytest.raises(ValueError, match="q has 8 tokens but the grid 2x2x3"):
        reuse_attention(q, k, v, TokenGrid(2, 2, 3), groups, cfg)
    with pytest.raises(ValueError, match=r"\(B, S, H, D\)"):
        reuse_attention(q[0], k, v, grid, groups, cfg)
    with pytest.raises(ValueError, match="share batch, heads"):
        reuse_attention(q, k[:, :, :1], v[:, :, :1], grid, groups, cfg)
    bad = q.clone()
    bad[0, 0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match="non-finite"):
        reuse_attention(bad, k, v, grid, groups, cfg)


def test_int8_online_softmax_equals_materialised_scores():
    from kaleido.reuse import decide
    from kaleido.reuse.attention import _int8_qk_online_softmax
    from kaleido.reuse.matmul import int8_matmul_from_map

    grid = TokenGrid(2, 3, 4, prefix=2)
    groups = ChannelGroups.from_rope(6, 5, 5)
    q, k, v = _qkv(grid, 16, 4, Sk=37)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    q_q, s_q = quantize(qt, groups)
    mm = decide(q_q, grid, groups, ReuseConfig(2, 6))
    mask = torch.rand(1, 1, grid.seq_len, 37, generator=torch.Generator().manual_seed(0)) < 0.7
    mask[..., 5] = True
    scores = int8_matmul_from_map(q_q, s_q, mm, kt.transpose(-1, -2))
    ref = torch.softmax((scores * 0.25).masked_fill(~mask, float("-inf")), -1) @ vt
    # several key blocks of 8 columns go through the online softmax
    out = _int8_qk_online_softmax(q_q, s_q, mm, kt, vt, 0.25, mask, max_block_elems=2 * 2 * grid.seq_len * 8)
    assert torch.allclose(out, ref, atol=1e-5, rtol=1e-5)
