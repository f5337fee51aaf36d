"""CogVideoX (``CogVideoXTransformer3DModel``): one joint ``[text; video]`` sequence through every block.

Config: ``num_layers`` blocks, FFN width ``4 * dim`` (``FeedForward``'s default ``mult``; the model passes no
inner width), text length ``max_text_seq_length`` unless the pipeline's is given, 3-D RoPE
``(D/4, 3D/8, 3D/8)`` when ``use_rotary_positional_embeddings``.  The published resolution is 480x720 (49
frames); "720p" is an extrapolation.
"""

from __future__ import annotations

from kaleido.families.shapes import FamilyShapes, Gemm, ModelSpec, attention_gemms


def _config_fields(config, hd: int, text_len: int | None) -> dict:
    dim = int(config["num_attention_heads"]) * hd
    rope = (hd // 4, 3 * hd // 8, 3 * hd // 8) if config.get("use_rotary_positional_embeddings", False) else None
    return dict(ffn_dim=4 * dim, single_layers=0, rope_thw=rope,
                text_len=int(config.get("max_text_seq_length", 226)) if text_len is None else text_len)


def _gemms(m: ModelSpec, grid_thw: tuple[int, int, int], steps: int) -> list[Gemm]:
    T, H, W = grid_thw
    n, d, f = T * H * W, m.dim, m.ffn_dim
    s = n + m.text_len  # joint [text; video]
    rep = m.layers * steps * m.cfg_passes
    g = [Gemm(op, s, d, d, rep, n, "block") for op in ("proj_q", "proj_k", "proj_v")]
    g += attention_gemms("self_attn_qk", "self_attn_pv", m, s, s, n, rep, "block")
    g.append(Gemm("proj_out", s, d, d, rep, n, "block"))
    g.append(Gemm("ffn_up", s, d, f, rep, n, "block"))
    g.append(Gemm("ffn_down", s, f, d, rep, n, "block"))
    return g


COGVIDEOX = FamilyShapes("cogvideox", "CogVideoXTransformer3DModel", _config_fields, _gemms,
                         {"480p": (480, 720, 49), "720p": (720, 1280, 49)})
