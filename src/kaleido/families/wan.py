"""Wan 2.1 / 2.2 (``WanTransformer3DModel``): video-only self-attention, cross-attention over the text.

Config: ``num_layers`` blocks, ``num_attention_heads`` x ``attention_head_dim``, FFN width ``ffn_dim``; RoPE
``h = w = 2*(head_dim//6)``, ``t`` the rest (``WanRotaryPosEmbed``).  The text length is the pipeline's
(512 in ``WanPipeline``).
"""

from __future__ import annotations

from kaleido.families.shapes import FamilyShapes, Gemm, ModelSpec, attention_gemms


def _config_fields(config, hd: int, text_len: int | None) -> dict:
    hw = 2 * (hd // 6)
    return dict(ffn_dim=int(config["ffn_dim"]), single_layers=0, rope_thw=(hd - 2 * hw, hw, hw), text_len=text_len)


def _gemms(m: ModelSpec, grid_thw: tuple[int, int, int], steps: int) -> list[Gemm]:
    T, H, W = grid_thw
    n, d, f, txt = T * H * W, m.dim, m.ffn_dim, m.text_len
    rep = m.layers * steps * m.cfg_passes
    g = [Gemm(op, n, d, d, rep, n, "block") for op in ("proj_q", "proj_k", "proj_v")]
    g += attention_gemms("self_attn_qk", "self_attn_pv", m, n, n, n, rep, "block")
    g.append(Gemm("proj_out", n, d, d, rep, n, "block"))
    g.append(Gemm("cross_proj_q", n, d, d, rep, n, "block"))
    g.append(Gemm("cross_proj_kv", txt, d, 2 * d, rep, 0, "block"))
    g += attention_gemms("cross_attn_qk", "cross_attn_pv", m, n, txt, n, rep, "block")
    g.append(Gemm("cross_proj_out", n, d, d, rep, n, "block"))
    g.append(Gemm("ffn_up", n, d, f, rep, n, "block"))
    g.append(Gemm("ffn_down", n, f, d, rep, n, "block"))
    return g


WAN = FamilyShapes("wan", "WanTransformer3DModel", _config_fields, _gemms,
                   {"480p": (480, 832, 81), "720p": (720, 1280, 81)})
