"""HunyuanVideo (``HunyuanVideoTransformer3DModel``): dual-stream blocks (separate video and text weights, joint
attention), then single-stream blocks over the joint ``[video; text]`` sequence.

Config: ``num_layers`` dual-stream and ``num_single_layers`` single-stream blocks, FFN width
``int(dim * mlp_ratio)``, RoPE ``rope_axes_dim``; the text length is the pipeline's (256).  A single-stream
block's ``linear1`` is ``[q|k|v|mlp_in]`` and its ``linear2`` ``[attn|mlp] -> dim``, split here by op kind.
"""

from __future__ import annotations

from kaleido.families.shapes import FamilyShapes, Gemm, ModelSpec, attention_gemms


def _config_fields(config, hd: int, text_len: int | None) -> dict:
    dim = int(config["num_attention_heads"]) * hd
    return dict(ffn_dim=int(dim * float(config.get("mlp_ratio", 4.0))),
                single_layers=int(config.get("num_single_layers", 40)),
                rope_thw=tuple(int(x) for x in config.get("rope_axes_dim", (16, 56, 56))), text_len=text_len)


def _gemms(m: ModelSpec, grid_thw: tuple[int, int, int], steps: int) -> list[Gemm]:
    T, H, W = grid_thw
    n, d, f, txt = T * H * W, m.dim, m.ffn_dim, m.text_len
    s = n + txt  # joint [video; text]
    calls = steps * m.cfg_passes
    rep = m.layers * calls  # dual-stream blocks: separate weights for the video and the text stream
    g: list[Gemm] = []
    for op in ("proj_q", "proj_k", "proj_v"):
        g.append(Gemm(op, n, d, d, rep, n, "dual"))
        g.append(Gemm(op, txt, d, d, rep, 0, "dual-text"))
    g += attention_gemms("self_attn_qk", "self_attn_pv", m, s, s, n, rep, "dual")
    g.append(Gemm("proj_out", n, d, d, rep, n, "dual"))
    g.append(Gemm("proj_out", txt, d, d, rep, 0, "dual-text"))
    g.append(Gemm("ffn_up", n, d, f, rep, n, "dual"))
    g.append(Gemm("ffn_down", n, f, d, rep, n, "dual"))
    g.append(Gemm("ffn_up", txt, d, f, rep, 0, "dual-text"))
    g.append(Gemm("ffn_down", txt, f, d, rep, 0, "dual-text"))
    rep = m.single_layers * calls  # single-stream blocks
    for op in ("proj_q", "proj_k", "proj_v"):
        g.append(Gemm(op, s, d, d, rep, n, "single"))
    g.append(Gemm("ffn_up", s, d, f, rep, n, "single"))
    g += attention_gemms("self_attn_qk", "self_attn_pv", m, s, s, n, rep, "single")
    g.append(Gemm("proj_out", s, d, d, rep, n, "single"))
    g.append(Gemm("ffn_down", s, f, d, rep, n, "single"))
    return g


HUNYUAN_VIDEO = FamilyShapes("hunyuan", "HunyuanVideoTransformer3DModel", _config_fields, _gemms,
                             {"480p": (480, 848, 129), "720p": (720, 1280, 129)})
