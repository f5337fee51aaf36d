"""The integration's linear path equals the reuse core's reuse_linear."""

from __future__ import annotations

import pytest
import torch

from kaleido.reuse import ChannelGroups, ReuseConfig, TokenGrid, decide_effective, reuse_linear


@pytest.mark.parametrize("granularity", ["group", "tensor", "head"])
@pytest.mark.parametrize("chunk,axes", [(8, "t"), (8, "w"), (12, "h"), (32, "t")])
def test_batched_chunks_equal_core(granularity, chunk, axes):
    torch.manual_seed(0)
    grid = TokenGrid(3, 4, 5, prefix=2)
    # per-channel offsets plus small token-to-token variation: reusable along every axis
    x = torch.randn(2, 1, 32) + 0.01 * torch.randn(2, 62, 32)
    x[:, 30:40] += 0.3 * torch.randn(2, 10, 32)  # and some tokens that must compute
    groups = ChannelGroups.from_chunks(32, chunk, axes)
    cfg = ReuseConfig(3.0, 8.0, granularity=granularity)
    w, b = torch.randn(16, 32), torch.randn(16)
    y_ref, mm_ref, _ = reuse_linear(x, w, b, grid, groups, cfg)
    mm, x_eff = decide_effective(x, grid, groups, cfg)
    assert torch.equal(mm.modes, mm_ref.modes)
    assert mm.groups == groups and mm.grid == grid
    assert (mm.modes == 2).any()  # the test exercises reuse
    assert torch.allclose(torch.nn.functional.linear(x_eff, w, b), y_ref, atol=1e-5)


def test_down_projection_in_tiles_equals_whole(monkeypatch):
    """Tiling a down projection's float path (bounded memory) keeps every decision and, up to GEMM
    rounding, every output; and it really ran tiled."""
    import importlib

    from diffusers import WanTransformer3DModel

    import kaleido
    from kaleido.integrations import KaleidoConfig, get_trace
    from kaleido.reuse import ReuseConfig

    lin = importlib.import_module("kaleido.integrations.linear")
    rl = importlib.import_module("kaleido.reuse.linear")

    def build():
        torch.manual_seed(0)
        return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4,
                                     out_channels=4, text_dim=16, freq_dim=16, ffn_dim=96, num_layers=1,
                                     rope_max_seq_len=64).eval()

    g = torch.Generator().manual_seed(0)
    scene = torch.randn(1, 4, 1, 8, 8, generator=g)
    kw = dict(hidden_states=(scene + 0.05 * torch.randn(1, 4, 3, 8, 8, generator=g)), timestep=torch.tensor([500.0]),
              encoder_hidden_states=torch.randn(1, 7, 16, generator=g), return_dict=False)
    cfg = KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=0))

    def run():
        m = build()
        kaleido.apply(m, cfg)
        with torch.no_grad():
            out = m(**kw)[0]
        tr = get_trace(m)
        ffn = [r for r in tr.records if r.op == "ffn_out"]
        return out, ffn

    whole, ffn_whole = run()
    calls = []
    real = rl.linear_in_tiles
    monkeypatch.setattr(lin, "TILE_ELEMENTS", 50)
    monkeypatch.setattr(lin, "linear_in_tiles", lambda *a: calls.append(a[-1]) or real(*a))
    tiled, ffn_tiled = run()
    assert calls, "the down projection did not run tiled"
    assert len(ffn_whole) == len(ffn_tiled) > 0
    for a, b in zip(ffn_whole, ffn_tiled):
        assert (a.head_counts == b.head_counts).all()
    assert ffn_whole[0].head_counts[..., 2].sum() > 0  # some FULL rows, so the effective operand mattered
    torch.testing.assert_close(tiled, whole, rtol=1e-5, atol=1e-5)
