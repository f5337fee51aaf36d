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


def _tiny_wan(num_layers: int = 2):
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    m = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4,
                              out_channels=4, text_dim=16, freq_dim=16, ffn_dim=96, num_layers=num_layers,
                              rope_max_seq_len=64).eval()
    g = torch.Generator().manual_seed(0)
    scene = torch.randn(1, 4, 1, 8, 8, generator=g)
    kw = dict(hidden_states=(scene + 0.05 * torch.randn(1, 4, 3, 8, 8, generator=g)), timestep=torch.tensor([500.0]),
              encoder_hidden_states=torch.randn(1, 7, 16, generator=g), return_dict=False)
    return m, kw


def test_down_projection_in_tiles_equals_whole(monkeypatch):
    """Tiling a down projection's float path (bounded memory) keeps every decision and, up to GEMM
    rounding, every output; and it really ran tiled."""
    import importlib

    import kaleido
    from kaleido.techniques.kaleido_reuse import KaleidoConfig, get_trace
    from kaleido.reuse import ReuseConfig

    lin = importlib.import_module("kaleido.techniques.kaleido_reuse.linear")
    rl = importlib.import_module("kaleido.reuse.linear")

    cfg = KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=0))

    def run():
        m, kw = _tiny_wan(num_layers=1)
        kaleido.apply(m, cfg)
        # a hook on the down projection: its input is then not the feed-forward's own, so it copies (tiled)
        m.blocks[0].ffn.net[2].register_forward_pre_hook(lambda module, args: None)
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


def test_feed_forward_activation_decided_in_place(monkeypatch):
    """A FeedForward's hidden activation is decided in place by its down projection (no effective copy), with
    the same decisions and outputs as the copying path; a hook that could see the tensor turns it off."""
    import kaleido
    from kaleido.techniques.kaleido_reuse import KaleidoConfig, get_trace
    from kaleido.techniques.kaleido_reuse.runtime import KaleidoRuntime

    cfg = KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=0))
    owned = []
    real_owns = KaleidoRuntime.owns
    monkeypatch.setattr(KaleidoRuntime, "owns", lambda self, t: owned.append(real_owns(self, t)) or owned[-1])

    def run(watch: bool):
        m, kw = _tiny_wan()
        kaleido.apply(m, cfg)
        if watch:
            for b in m.blocks:
                b.ffn.net[2].register_forward_hook(lambda module, args, out: None)
        owned.clear()
        with torch.no_grad():
            out = m(**kw)[0]
        return out, get_trace(m), sum(owned)

    in_place, tr_in_place, n_in_place = run(watch=False)
    copied, tr_copied, n_copied = run(watch=True)
    assert n_in_place == 2 and n_copied == 0  # one feed-forward per block
    ffn = [(a, b) for a, b in zip(tr_in_place.records, tr_copied.records) if a.op == "ffn_out"]
    assert len(ffn) == 2 and all((a.head_counts == b.head_counts).all() for a, b in ffn)
    assert sum(int(a.head_counts[..., 2].sum()) for a, _ in ffn) > 0  # FULL rows: the effective operand mattered
    assert torch.equal(in_place, copied)


def test_in_place_needs_inference():
    """With autograd recording, the activation is not overwritten (the backward pass needs it)."""
    import kaleido
    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.techniques.kaleido_reuse.apply import _runtime

    m, kw = _tiny_wan()
    kaleido.apply(m, KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=0)))
    rt = _runtime(m)
    t = torch.randn(3, 4, requires_grad=True)
    rt.own_activation(t)
    assert not rt.owns(t)
    u = torch.randn(3, 4)
    rt.own_activation(u)
    assert not rt.owns(torch.randn(3, 4))  # another tensor: not the marked one
    u.add_(1)
    assert not rt.owns(u)  # changed since it was marked
    rt.own_activation(u)
    assert rt.owns(u) and not rt.owns(u)  # the mark is spent once used


def test_effective_buffer_drops_the_kept_decision():
    """The kept linear decision's effective operand lives in the runtime's one buffer: handing the buffer to the
    next decision (an attention's q, another linear) drops it, so no later reader of the same x gets stale data."""
    import kaleido
    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.techniques.kaleido_reuse.apply import _runtime

    m, _ = _tiny_wan()
    kaleido.apply(m, KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=0)))
    rt = _runtime(m)
    grid = TokenGrid(2, 2, 2)
    groups = ChannelGroups.from_chunks(8, 4, "t")
    cfg = ReuseConfig(4.0, 8.0)
    x = torch.randn(1, grid.seq_len, 8)
    mm, x_eff = decide_effective(x, grid, groups, cfg, out=rt.effective_out(x))
    rt.keep_decision(x, groups, cfg, mm, x_eff)
    assert rt.shared_decision(x, groups, cfg)[1] is x_eff
    q = rt.effective_out(torch.empty(1, 2, grid.seq_len, 4))
    assert q.untyped_storage().data_ptr() == x_eff.untyped_storage().data_ptr()  # one buffer...
    assert rt.shared_decision(x, groups, cfg) is None  # ...so the decision kept in it is gone
