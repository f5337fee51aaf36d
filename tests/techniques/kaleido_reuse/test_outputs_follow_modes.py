"""With reuse on, what every patched layer returns is what its mode map says - not the dense result.

The tiny random transformers of every family (``kaleido.models.testing.TRANSFORMER_CASES``) run on a video whose
frames are the same up to a little noise, at large thresholds, so that many rows are
FULL or PARTIAL.  Then:

* the transformer's output differs from the dense model's by far more than float noise
  (reuse of attention alone, of linear layers alone, and of both);
* each patched linear layer returns ``F.linear(x_eff, W, b)``, where ``x_eff`` is the
  effective operand the reuse core (:func:`kaleido.reuse.decide_effective`) computes on
  its own from the layer's input, with the grid and the chunk groups worked out here
  from the input's shape; its rows differ from the dense ``F.linear(x, W, b)`` only where
  the mode map has a non-COMPUTE group; the recorded mode map is that decision;
* each self-attention returns ``softmax(q_eff k^T / sqrt(d)) v`` with ``q_eff`` the
  reuse core's effective query over the model's RoPE groups (chunk groups without
  RoPE), and differs from dense attention only on (row, head) pairs whose query is not
  all-COMPUTE.  ``q`` and ``k`` (after RoPE) come from the runtime's operand observers,
  ``v``, the mask and the attention output from forward hooks.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig, get_trace
from kaleido.techniques.kaleido_reuse.apply import add_observer
from kaleido.reuse import ChannelGroups, Mode, ReuseConfig, TokenGrid, decide_effective

THETA1, THETA2, LOW_BITS = 16.0, 32.0, 6
CHUNK = 8
PLAIN = ReuseConfig(THETA1, THETA2, low_bits=LOW_BITS)
#: where a joint sequence's text tokens sit (SPEC §2: HunyuanVideo [video; text], CogVideoX [text; video])
TEXT_SIDE = {"wan": None, "hunyuan_video": "suffix", "cogvideox_5b_style": "prefix", "cogvideox_2b_style": "prefix"}
#: channels of the (t, h, w) RoPE blocks of each tiny model's heads; None: no RoPE (chunk groups)
ROPE_SPLIT = {"wan": (8, 8, 8), "hunyuan_video": (4, 6, 6), "cogvideox_5b_style": (4, 6, 6), "cogvideox_2b_style": None}


def config(*, attention: bool = True, linears: bool = True, cross: bool = True) -> KaleidoConfig:
    reuse = {"theta1": THETA1, "theta2": THETA2, "low_bits": LOW_BITS}
    return KaleidoConfig.from_dict({
        "reuse": {**reuse, "dense_steps": 0},
        "ops": {
            "self_qk": {"enabled": attention, "chunk_size": CHUNK, **reuse},
            "cross_qk": {"enabled": attention and cross, "chunk_size": CHUNK, "axes": "t"},
            "proj": {"enabled": linears, "chunk_size": CHUNK, "axes": "t"},
            "ffn": {"enabled": linears, "chunk_size": CHUNK, "axes": "t"},
            "pv": {"enabled": False},
        },
        "trace": {"record_maps": True},
    })


def run(model: torch.nn.Module, kwargs: dict) -> torch.Tensor:
    with torch.no_grad():
        return model(**kwargs)[0]


def similar_frames(case, noise: float = 0.05, seed: int = 0) -> dict:
    """The case's inputs with every frame equal to the first plus a little noise (neighbours along t are close)."""
    kw = case.inputs(static=True, seed=seed)
    x = kw["hidden_states"]
    g = torch.Generator().manual_seed(1234 + seed)
    kw["hidden_states"] = x + noise * torch.randn(x.shape, generator=g)
    return kw


def grid_of(case, kw: dict, seq_len: int) -> TokenGrid:
    """The token grid of a ``seq_len``-row operand: every tiny model patchifies 1 x 2 x 2."""
    x = kw["hidden_states"]
    f = x.shape[1] if case.name.startswith("cogvideox") else x.shape[2]  # CogVideoX: (B, F, C, H, W)
    T, H, W = int(f), int(x.shape[3]) // 2, int(x.shape[4]) // 2
    extra = seq_len - T * H * W
    if extra == 0:
        return TokenGrid(T, H, W)
    side = TEXT_SIDE[case.name]
    assert side is not None and extra > 0, (case.name, seq_len)
    return TokenGrid(T, H, W, prefix=extra) if side == "prefix" else TokenGrid(T, H, W, suffix=extra)


def qk_groups(case, head_dim: int) -> ChannelGroups:
    split = ROPE_SPLIT[case.name]
    if split is None:
        return ChannelGroups.from_chunks(head_dim, CHUNK, "t")
    assert sum(split) == head_dim
    return ChannelGroups.from_rope(*split)  # default axes: t-group along w, h/w-groups along t


def full_fraction(trace) -> float:
    n = full = 0
    for r, mm in trace.mode_maps():
        full += int((mm.modes == int(Mode.FULL)).sum())
        n += mm.modes.numel()
    return full / max(1, n)


@pytest.mark.parametrize("which", ["all", "attention", "linears"])
def test_output_differs_from_dense_by_more_than_noise(case, which):
    model = case.build()
    kw = similar_frames(case)
    dense = run(model, kw)
    kaleido.apply(model, config(attention=which != "linears", linears=which != "attention"))
    out = run(model, kw)
    assert torch.isfinite(out).all()
    # large thresholds: many reused (row, group) pairs (up to 2/3 along t on 3 frames; CogVideoX-2B's
    # absolute position embeddings keep its queries further apart)
    assert full_fraction(get_trace(model)) > (0.05 if which == "attention" else 0.2)
    diff = float((out - dense).abs().max())
    scale = float(dense.abs().max())
    # float noise between two dense runs of a different summation order is ~1e-7 of the scale; measured
    # here: 2e-3 (HunyuanVideo, attention only) to 4e-2 of it
    assert diff > 1e-4 * scale, f"{case.name}/{which}: output within {diff:.3g} of dense (scale {scale:.3g})"
    # the same model with reuse removed is dense again: the difference is reuse's, not the hooks'
    kaleido.remove(model)
    assert torch.equal(run(model, kw), dense)


@pytest.mark.parametrize("attention", [False, True], ids=["linears", "with-attention"])
def test_linear_outputs_follow_their_mode_maps(case, attention):
    """(With attention on too: its effective q shares the runtime's buffer with the linears' operands, so a
    linear decision kept across an attention, e.g. HunyuanVideo's single-stream proj_mlp, must be redone.)"""
    model = case.build()
    report = kaleido.apply(model, config(attention=attention)).patched
    seen: dict[str, list] = {}
    handles = []
    for m in report.linears:
        assert m.active_ops, m.name
        mod = model.get_submodule(m.name)

        def hook(module, args, out, name=m.name):
            seen.setdefault(name, []).append((args[0].detach().clone(), out.detach().clone()))

        handles.append(mod.register_forward_hook(hook))
    kw = similar_frames(case)
    run(model, kw)
    for h in handles:
        h.remove()
    recorded: dict[str, list] = {}
    for r, mm in get_trace(model).mode_maps():
        recorded.setdefault(r.module, []).append(mm)
    assert set(seen) == {m.name for m in report.linears}
    n_rows = n_reused_rows = n_changed = 0
    for name, calls in seen.items():
        assert len(calls) == 1 and len(recorded[name]) == 1, name
        x, y = calls[0]
        mod = model.get_submodule(name)
        grid = grid_of(case, kw, x.shape[-2])
        groups = ChannelGroups.from_chunks(x.shape[-1], min(CHUNK, x.shape[-1]), "t")
        decision, x_eff = decide_effective(x, grid, groups, PLAIN)
        modes = decision.modes  # (B, S, G)
        mm = recorded[name][0]
        assert mm.groups.sizes == groups.sizes and mm.grid == grid, name
        assert torch.equal(mm.modes.reshape(modes.shape), modes), f"{name}: recorded mode map is not the decision"
        with torch.no_grad():
            expected = F.linear(x_eff, mod.weight, mod.bias)
            dense = F.linear(x, mod.weight, mod.bias)
        torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
        all_compute = (modes == int(Mode.COMPUTE)).all(-1)  # (B, S)
        x_moved = (x_eff != x).any(-1)  # rows whose effective operand is a reference's
        changed = (y - dense).abs().amax(-1) > 1e-6
        assert not (x_moved & all_compute).any(), name
        assert not (changed & ~x_moved).any(), f"{name}: rows with their own operand differ from dense"
        n_rows += all_compute.numel()
        n_reused_rows += int(x_moved.sum())
        n_changed += int(changed.sum())
    assert n_reused_rows > 0.2 * n_rows  # large thresholds: many rows stand for a reference's operand
    assert n_changed >= 0.9 * n_reused_rows  # ... and their outputs are not the dense ones


def _self_attention_capture(model, report):
    """Forward hooks on every reusing self-attention: ``{name: dict(v=[...], mask, out)}``."""
    caps: dict[str, dict] = {}
    handles = []
    sites = [m for m in report.attention if "self_qk" in m.active_ops]
    assert sites
    for m in sites:
        attn = model.get_submodule(m.name)
        cap = caps.setdefault(m.name, {"v": [], "heads": attn.heads})

        def pre(module, args, kwargs, cap=cap):
            cap["mask"] = kwargs.get("attention_mask", args[2] if len(args) > 2 else None)

        def value(module, args, out, cap=cap):
            cap["v"].append(out.detach().clone())

        handles.append(attn.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(attn.to_v.register_forward_hook(value))
        if getattr(attn, "add_v_proj", None) is not None:  # HunyuanVideo dual-stream: text values appended
            handles.append(attn.add_v_proj.register_forward_hook(value))
        if getattr(attn, "to_out", None) is not None:
            def out_in(module, args, cap=cap):
                cap["out"] = args[0].detach().clone()

            handles.append(attn.to_out[0].register_forward_pre_hook(out_in))
        else:  # HunyuanVideo single-stream: no output projection, the processor returns (video, text)
            def out_tuple(module, args, out, cap=cap):
                cap["out"] = torch.cat([o.detach() for o in out], dim=1)

            handles.append(attn.register_forward_hook(out_tuple))
    return caps, handles


def test_self_attention_follows_query_modes(case):
    model = case.build()
    report = kaleido.apply(model, config(linears=False, cross=False)).patched
    caps, handles = _self_attention_capture(model, report)
    operands: dict[tuple[str, str], torch.Tensor] = {}

    def observer(call, layer, op, role, module, operand, grid, groups):
        if op == "self_qk":
            operands[(module, role)] = operand.detach().clone()

    name0 = next(iter(caps))
    add_observer(model, observer)
    kw = similar_frames(case)
    run(model, kw)
    for h in handles:
        h.remove()
    recorded = {r.module: mm for r, mm in get_trace(model).mode_maps() if r.op == "self_qk"}
    n_pairs = n_reused = n_changed = 0
    for name, cap in caps.items():
        q, k = operands[(name, "q")], operands[(name, "k")]  # (B, S, H, D), after RoPE
        B, S, H, D = q.shape
        v = torch.cat([t.unflatten(2, (H, -1)) for t in cap["v"]], dim=1)
        assert v.shape[:3] == k.shape[:3], name
        grid = grid_of(case, kw, S)
        groups = qk_groups(case, D)
        decision, q_eff = decide_effective(q.transpose(1, 2), grid, groups, PLAIN)
        modes = decision.modes  # (B, H, S, G); q_eff (B, H, S, D)
        mm = recorded[name]
        assert mm.groups == groups and mm.grid == grid, name
        assert torch.equal(mm.modes, modes), f"{name}: recorded mode map is not the decision on q"
        kt, vt = k.transpose(1, 2), v.transpose(1, 2)
        mask = cap["mask"]
        scores = (q_eff @ kt.transpose(-1, -2)) * D**-0.5
        dense_scores = (q.transpose(1, 2) @ kt.transpose(-1, -2)) * D**-0.5
        expected = F.scaled_dot_product_attention(q_eff, kt, vt, attn_mask=mask).transpose(1, 2)
        dense = F.scaled_dot_product_attention(q.transpose(1, 2), kt, vt, attn_mask=mask).transpose(1, 2)
        out = cap["out"]
        rows = out.shape[1]  # HunyuanVideo dual-stream: the video rows go to to_out, the text rows to to_add_out
        out = out.view(B, rows, H, -1)
        torch.testing.assert_close(out, expected[:, :rows], rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
        all_compute = (modes == int(Mode.COMPUTE)).all(-1)  # (B, H, S)
        q_moved = (q_eff != q.transpose(1, 2)).any(-1)
        assert not (q_moved & all_compute).any(), name
        # q.k^T: a row's scores move exactly where its effective query does
        score_changed = (scores - dense_scores).abs().amax(-1) > 1e-6
        assert torch.equal(score_changed, q_moved), f"{name}: scores moved on rows whose query is its own"
        changed = ((out - dense[:, :rows]).abs().amax(-1) > 1e-6).transpose(1, 2)  # (B, H, rows)
        assert not (changed & ~q_moved[..., :rows]).any(), f"{name}: (row, head) pairs with their own query differ"
        n_pairs += all_compute[..., :rows].numel()
        n_reused += int(q_moved[..., :rows].sum())
        n_changed += int(changed.sum())
    assert n_reused > 0.1 * n_pairs
    assert n_changed >= 0.9 * n_reused
