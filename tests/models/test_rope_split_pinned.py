"""Each adapter's RoPE groups and token order, pinned against the model's own rotary embedding.

For every family the rotary table (cos, sin per token and head channel) is built the way
the model or its pipeline builds it, for a 3 x 4 x 5 token grid (three different sides,
so that no two axes can be confused).  Then, in the channel groups Kaleido actually used
for self-attention q.k^T (read from a trace) and on the token grid it used:

* moving one step along t (h, w) - the reference token of :class:`TokenGrid` along that
  axis - changes exactly the channels of the ``t`` (``h``, ``w``) group, every one of
  them, and nothing else; the groups are in adjacent-pair units and cover the head;
* the grid is the latent's, and the text tokens of joint sequences sit where SPEC §2 says;
* sequence index ``i`` of the patchified video is grid position ``(t, h, w)`` with
  ``i = (t*H + h)*W + w`` (found by perturbing one latent patch at a time), which is the
  order the reference tokens of :class:`TokenGrid` assume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest
import torch

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig, get_trace
from kaleido.reuse import TokenGrid

LATENT_FHW = (3, 8, 10)  # latent frames, height, width; every model here patchifies 1 x 2 x 2
GRID = (3, 4, 5)
N_TEXT = 5
N_TEXT_COG = 6  # the tiny CogVideoX pipeline's max_text_seq_length (its 2B-style position table needs all of it)
SELF_QK_ONLY = KaleidoConfig.from_dict({
    "reuse": {"theta1": 4, "theta2": 8, "dense_steps": 0},
    "ops": {"cross_qk": {"enabled": False}, "proj": {"enabled": False}, "ffn": {"enabled": False}},
})


def _randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


# -- Wan ------------------------------------------------------------------------------
def _wan(head_dim: int):
    def build():
        from diffusers import WanTransformer3DModel

        torch.manual_seed(0)
        return WanTransformer3DModel(
            patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=head_dim, in_channels=4, out_channels=4,
            text_dim=16, freq_dim=16, ffn_dim=32, num_layers=1, rope_max_seq_len=64,
        ).eval()

    return build


def _wan_inputs(model, x):
    return dict(hidden_states=x, timestep=torch.full((1,), 500.0), encoder_hidden_states=_randn(1, 7, 16, seed=1),
                return_dict=False)


def _wan_rope(model, x):
    cos, sin = model.rope(x)  # (1, S, 1, head_dim) each
    return cos[0, :, 0, :], sin[0, :, 0, :]


# -- HunyuanVideo ------------------------------------------------------------------------
def _hunyuan(rope_axes: tuple[int, int, int]):
    def build():
        from diffusers import HunyuanVideoTransformer3DModel

        torch.manual_seed(0)
        return HunyuanVideoTransformer3DModel(
            in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=sum(rope_axes), num_layers=1,
            num_single_layers=1, num_refiner_layers=1, mlp_ratio=2.0, patch_size=2, patch_size_t=1,
            qk_norm="rms_norm", guidance_embeds=False, text_embed_dim=16, pooled_projection_dim=8,
            rope_axes_dim=rope_axes,
        ).eval()

    return build


def _hunyuan_inputs(model, x):
    return dict(hidden_states=x, timestep=torch.full((1,), 500.0), encoder_hidden_states=_randn(1, N_TEXT, 16, seed=1),
                encoder_attention_mask=torch.ones(1, N_TEXT), pooled_projections=_randn(1, 8, seed=2),
                return_dict=False)


def _hunyuan_rope(model, x):
    return model.rope(x)  # (S, head_dim) each


# -- CogVideoX -------------------------------------------------------------------------------
_COG_PIPES: dict[bool, object] = {}


def _cog(rope: bool):
    def build():
        from kaleido.models.testing import tiny_random_cogvideox_pipeline

        pipe = tiny_random_cogvideox_pipeline(rope=rope)
        _COG_PIPES[rope] = pipe  # the rotary table comes from the model's own pipeline
        return pipe.transformer

    return build


def _cog_rotary(model):
    pipe = next(p for p in _COG_PIPES.values() if p.transformer is model)
    F_, Hl, Wl = LATENT_FHW
    s = pipe.vae_scale_factor_spatial
    return pipe._prepare_rotary_positional_embeddings(height=Hl * s, width=Wl * s, num_frames=F_,
                                                      device=torch.device("cpu"))


def _cog_inputs(model, x):
    rot = _cog_rotary(model) if model.config.use_rotary_positional_embeddings else None
    return dict(hidden_states=x, encoder_hidden_states=_randn(1, N_TEXT_COG, 16, seed=1),
                timestep=torch.full((1,), 500.0), image_rotary_emb=rot, return_dict=False)


def _cog_rope(model, x):
    return _cog_rotary(model)  # (S, head_dim) each


@dataclass
class Family:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[torch.nn.Module, torch.Tensor], dict]
    rope: Callable | None
    frames_first: bool  # latent (B, F, C, H, W) instead of (B, C, F, H, W)
    first_block: str
    text: tuple[int, int]  # (prefix, suffix) text tokens of the self-attention sequence

    def latent(self, seed: int = 0) -> torch.Tensor:
        f, h, w = LATENT_FHW
        return _randn(1, f, 4, h, w, seed=seed) if self.frames_first else _randn(1, 4, f, h, w, seed=seed)

    def bump(self, x: torch.Tensor, t: int, h: int, w: int) -> torch.Tensor:
        """``x`` with the latent pixels of token (t, h, w)'s patch changed."""
        x = x.clone()
        if self.frames_first:
            x[0, t, :, 2 * h : 2 * h + 2, 2 * w : 2 * w + 2] += 3.0
        else:
            x[0, :, t, 2 * h : 2 * h + 2, 2 * w : 2 * w + 2] += 3.0
        return x


ROPE_FAMILIES = [
    Family("wan", _wan(24), _wan_inputs, _wan_rope, False, "blocks.0", (0, 0)),
    Family("wan_head_dim_20", _wan(20), _wan_inputs, _wan_rope, False, "blocks.0", (0, 0)),  # t 8, h 6, w 6
    Family("hunyuan_video", _hunyuan((4, 6, 6)), _hunyuan_inputs, _hunyuan_rope, False, "transformer_blocks.0",
           (0, N_TEXT)),
    Family("hunyuan_video_2_6_8", _hunyuan((2, 6, 8)), _hunyuan_inputs, _hunyuan_rope, False, "transformer_blocks.0",
           (0, N_TEXT)),
    Family("cogvideox_5b_style", _cog(True), _cog_inputs, _cog_rope, True, "transformer_blocks.0", (N_TEXT_COG, 0)),
]
ALL_FAMILIES = ROPE_FAMILIES + [
    Family("cogvideox_2b_style", _cog(False), _cog_inputs, None, True, "transformer_blocks.0", (N_TEXT_COG, 0)),
]


def _self_qk_record(model, fam: Family, x: torch.Tensor):
    report = kaleido.apply(model, SELF_QK_ONLY).patched
    with torch.no_grad():
        model(**fam.inputs(model, x))
    rec = next(r for r in get_trace(model).records if r.op == "self_qk")
    kaleido.remove(model)
    return report, rec


@pytest.mark.parametrize("fam", ROPE_FAMILIES, ids=[f.name for f in ROPE_FAMILIES])
def test_rope_groups_are_the_rotary_axis_blocks(fam):
    model = fam.build()
    x = fam.latent()
    cos, sin = (t.to(torch.float64) for t in fam.rope(model, x))
    report, rec = _self_qk_record(model, fam, x)
    groups, grid = rec.groups, rec.grid
    D = int(model.config.attention_head_dim)
    assert grid.shape == GRID and (grid.prefix, grid.suffix) == fam.text
    assert cos.shape == sin.shape == (grid.n_grid, D)
    assert groups.names == ("t", "h", "w") and groups.dim == D
    assert tuple(report.rope_split) == groups.sizes
    assert all(s % 2 == 0 for s in groups.sizes)  # RoPE rotates adjacent channel pairs: no pair is split
    video = TokenGrid(*grid.shape)
    for axis in ("t", "h", "w"):
        sl = groups.slices[groups.names.index(axis)]
        expect = torch.zeros(D, dtype=torch.bool)
        expect[sl] = True
        ref = video.ref_index(axis)
        i = (ref >= 0).nonzero().squeeze(1)
        delta = torch.maximum((cos[i] - cos[ref[i]]).abs(), (sin[i] - sin[ref[i]]).abs())  # (pairs, D)
        moved = delta > 0
        bad = (moved != expect).any(1)
        assert not bad.any(), (
            f"{fam.name}: one step along {axis} (token {int(i[bad][0])}) changes channels "
            f"{moved[bad][0].nonzero().flatten().tolist()}, but the adapter's {axis!r} group is "
            f"{sl.start}..{sl.stop - 1}"
        )
        assert float(delta[:, sl].min()) > 1e-7  # every channel of the group moves, visibly


def test_cogvideox_2b_style_has_no_rope_groups():
    fam = ALL_FAMILIES[-1]
    model = fam.build()
    report, rec = _self_qk_record(model, fam, fam.latent())
    assert report.rope_split is None
    assert not set(rec.groups.names) & {"t", "h", "w"}  # chunk groups
    assert rec.grid.shape == GRID and (rec.grid.prefix, rec.grid.suffix) == fam.text


class _Stop(Exception):
    pass


def _first_block_input(model, fam: Family, x: torch.Tensor) -> torch.Tensor:
    got = {}

    def pre(module, args, kwargs):
        got["x"] = (args[0] if args else kwargs["hidden_states"]).detach().clone()
        raise _Stop

    h = model.get_submodule(fam.first_block).register_forward_pre_hook(pre, with_kwargs=True)
    try:
        with torch.no_grad():
            model(**fam.inputs(model, x))
    except _Stop:
        pass
    finally:
        h.remove()
    return got["x"]


@pytest.mark.parametrize("fam", ALL_FAMILIES, ids=[f.name for f in ALL_FAMILIES])
def test_sequence_index_is_the_raster_grid_position(fam):
    model = fam.build()
    x0 = fam.latent()
    base = _first_block_input(model, fam, x0)
    T, H, W = GRID
    assert base.shape[:2] == (1, T * H * W)  # the blocks see the video tokens only, one per patch
    index = torch.full(GRID, -1, dtype=torch.int64)
    for t in range(T):
        for h in range(H):
            for w in range(W):
                out = _first_block_input(model, fam, fam.bump(x0, t, h, w))
                changed = ((out - base).abs().amax(-1)[0] > 0).nonzero().flatten().tolist()
                assert len(changed) == 1, (fam.name, (t, h, w), changed)
                index[t, h, w] = changed[0]
    assert torch.equal(index.flatten(), torch.arange(T * H * W)), f"{fam.name}: token order is not t-major raster"
    # ... which is what TokenGrid's references assume: ref of (t, h, w) along t is (t-1, h, w), etc.
    grid = TokenGrid(T, H, W)
    for axis, dim in (("t", 0), ("h", 1), ("w", 2)):
        ref = grid.ref_index(axis).view(GRID)
        prev = index.narrow(dim, 0, GRID[dim] - 1)
        assert torch.equal(ref.narrow(dim, 1, GRID[dim] - 1), prev)
        assert (ref.narrow(dim, 0, 1) == -1).all()
