"""Every GEMM of a workload against figures worked out here by hand from the published configs,
and against an independent count: torch's FlopCounterMode on the diffusers transformer itself.

The configs' numbers are written below as constants, each with its source, so that a wrong
number in ``kaleido.hw.inputs.workloads`` (or a GEMM dropped, doubled or mis-shaped) fails here.
"""

import json
from importlib.resources import files

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from kaleido.hw.inputs.workloads import (ATTENTION_KINDS, MINIATURE, PUBLISHED_CONFIGS, build_gemms, get_workload,
                                  model_spec_from_config)


def shapes(wl):
    return [(g.op, g.M, g.K, g.N, g.count, g.grid_rows, g.layer_kind) for g in wl.gemms]


# -- Wan 2.1 T2V 1.3B at 480p ----------------------------------------------------------------
# Wan-AI/Wan2.1-T2V-1.3B-Diffusers transformer/config.json: num_layers 30, num_attention_heads 12,
# attention_head_dim 128, ffn_dim 8960, patch_size [1, 2, 2]; WanPipeline: max_sequence_length 512
# text tokens, 50 steps, classifier-free guidance (2 transformer calls a step).
WAN13_LAYERS, WAN13_HEADS, WAN13_HEAD_DIM, WAN13_FFN, WAN_TEXT = 30, 12, 128, 8960, 512
# 480x832, 81 frames; VAE 4x in time (causal: (81 - 1)/4 + 1 = 21), 8x in space (60 x 104),
# patch (1, 2, 2) -> 21 x 30 x 52
WAN_480P_TOKENS = 21 * 30 * 52
assert WAN_480P_TOKENS == 32_760


def test_wan_1_3b_480p_every_gemm():
    n, d, f, txt = WAN_480P_TOKENS, WAN13_HEADS * WAN13_HEAD_DIM, WAN13_FFN, WAN_TEXT
    assert d == 1536
    rep = WAN13_LAYERS * 50 * 2  # a linear layer: once per block, call and step = 3,000
    heads = WAN13_HEADS * rep  # an attention GEMM: once per head as well = 36,000
    expect = [
        # self-attention: q, k, v of the 32,760 video tokens, each (n x 1536) . (1536 x 1536)
        ("proj_q", n, d, d, rep, n, "block"),
        ("proj_k", n, d, d, rep, n, "block"),
        ("proj_v", n, d, d, rep, n, "block"),
        ("self_attn_qk", n, 128, n, heads, n, "block"),  # per head: (n x 128) . (128 x n)
        ("self_attn_pv", n, n, 128, heads, n, "block"),  # per head: (n x n) . (n x 128)
        ("proj_out", n, d, d, rep, n, "block"),
        # cross-attention: queries from the video, keys and values from the 512 text tokens (one
        # GEMM of N = 2 x 1536 for k and v); the text rows are not video tokens
        ("cross_proj_q", n, d, d, rep, n, "block"),
        ("cross_proj_kv", txt, d, 2 * d, rep, 0, "block"),
        ("cross_attn_qk", n, 128, txt, heads, n, "block"),
        ("cross_attn_pv", n, txt, 128, heads, n, "block"),
        ("cross_proj_out", n, d, d, rep, n, "block"),
        ("ffn_up", n, d, f, rep, n, "block"),  # FeedForward 1536 -> 8960 -> 1536
        ("ffn_down", n, f, d, rep, n, "block"),
    ]
    assert shapes(get_workload("wan-1.3b-480p")) == expect
    # per transformer call and layer: 6 n d^2 + 2 n^2 d (self) + 2 n txt d + txt 2d^2 (cross) + 2 n d f
    per_layer = 6 * n * d * d + 2 * n * n * d + 2 * n * txt * d + txt * d * 2 * d + 2 * n * d * f
    assert get_workload("wan-1.3b-480p").total_macs == per_layer * rep


# -- CogVideoX-5B at 480p: joint [text; video] attention ------------------------------------------
# THUDM/CogVideoX-5b transformer/config.json: num_layers 42, num_attention_heads 48,
# attention_head_dim 64, max_text_seq_length 226, patch_size 2; FeedForward's default width 4 x dim
# (CogVideoXBlock passes no ff_inner_dim); CogVideoXPipeline: 50 steps, CFG.
COG5_LAYERS, COG5_HEADS, COG5_HEAD_DIM, COG_TEXT = 42, 48, 64, 226
COG_480P_TOKENS = 13 * 30 * 45  # 480x720, 49 frames -> (49 - 1)/4 + 1 = 13 latent frames, 60 x 90 / 2
assert COG_480P_TOKENS == 17_550


def test_cogvideox_5b_480p_every_gemm_and_its_video_rows():
    n, txt, d = COG_480P_TOKENS, COG_TEXT, COG5_HEADS * COG5_HEAD_DIM
    assert d == 3072
    # every op of a CogVideoX block runs on the joint sequence [226 text; 17,550 video] (the attention
    # processor concatenates encoder_hidden_states before hidden_states, the FFN the two normed streams);
    # only the 17,550 video rows are grid tokens that may reuse, the 226 text rows always compute
    s = txt + n
    rep = COG5_LAYERS * 50 * 2
    heads = COG5_HEADS * rep
    expect = [
        ("proj_q", s, d, d, rep, n, "block"), ("proj_k", s, d, d, rep, n, "block"), ("proj_v", s, d, d, rep, n, "block"),
        ("self_attn_qk", s, 64, s, heads, n, "block"), ("self_attn_pv", s, s, 64, heads, n, "block"),
        ("proj_out", s, d, d, rep, n, "block"),
        ("ffn_up", s, d, 4 * d, rep, n, "block"), ("ffn_down", s, 4 * d, d, rep, n, "block"),
    ]
    assert shapes(get_workload("cogvideox-5b-480p")) == expect


# -- HunyuanVideo at 720p: dual-stream and single-stream blocks, joint [video; text] ---------------
# hunyuanvideo-community/HunyuanVideo transformer/config.json: num_layers 20 (dual-stream),
# num_single_layers 40, num_attention_heads 24, attention_head_dim 128, mlp_ratio 4.0; the pipeline's
# max_sequence_length 256 text tokens, 50 steps, embedded guidance (one transformer call a step).
HY_DUAL, HY_SINGLE, HY_HEADS, HY_HEAD_DIM, HY_TEXT = 20, 40, 24, 128, 256
HY_720P_TOKENS = 33 * 45 * 80  # 720x1280, 129 frames -> 33 latent frames, 90 x 160 / 2
assert HY_720P_TOKENS == 118_800


def test_hunyuan_720p_every_gemm_and_its_video_rows():
    n, txt, d = HY_720P_TOKENS, HY_TEXT, HY_HEADS * HY_HEAD_DIM
    f = 4 * d  # mlp_ratio 4.0
    s = n + txt  # the joint sequence [118,800 video; 256 text] of both block kinds' attention
    dual, single = HY_DUAL * 50, HY_SINGLE * 50
    expect = []
    for op in ("proj_q", "proj_k", "proj_v"):  # a dual-stream block projects each stream with its own weights
        expect += [(op, n, d, d, dual, n, "dual"), (op, txt, d, d, dual, 0, "dual-text")]
    expect += [
        ("self_attn_qk", s, 128, s, HY_HEADS * dual, n, "dual"), ("self_attn_pv", s, s, 128, HY_HEADS * dual, n, "dual"),
        ("proj_out", n, d, d, dual, n, "dual"), ("proj_out", txt, d, d, dual, 0, "dual-text"),
        ("ffn_up", n, d, f, dual, n, "dual"), ("ffn_down", n, f, d, dual, n, "dual"),
        ("ffn_up", txt, d, f, dual, 0, "dual-text"), ("ffn_down", txt, f, d, dual, 0, "dual-text"),
    ]
    # a single-stream block runs the joint sequence through one linear1 = [q | k | v | mlp_in] and one
    # linear2 = [attention | mlp] -> d, which the workload splits by K into proj_out and ffn_down
    expect += [(op, s, d, d, single, n, "single") for op in ("proj_q", "proj_k", "proj_v")]
    expect += [
        ("ffn_up", s, d, f, single, n, "single"),
        ("self_attn_qk", s, 128, s, HY_HEADS * single, n, "single"),
        ("self_attn_pv", s, s, 128, HY_HEADS * single, n, "single"),
        ("proj_out", s, d, d, single, n, "single"), ("ffn_down", s, f, d, single, n, "single"),
    ]
    assert shapes(get_workload("hunyuan-720p")) == expect


def test_the_miniature_workload_is_the_shipped_tiny_wan():
    cfg = json.loads((files("kaleido") / "assets" / "tiny-wan" / "transformer" / "config.json").read_text())
    assert {k: cfg[k] for k in PUBLISHED_CONFIGS["kaleido/assets/tiny-wan"]} == PUBLISHED_CONFIGS["kaleido/assets/tiny-wan"]
    assert (MINIATURE.layers, MINIATURE.heads, MINIATURE.head_dim, MINIATURE.ffn_dim) == (4, 2, 64, 512)


# -- an independent count: the diffusers transformers themselves -----------------------------------
def _wan():
    from diffusers import WanTransformer3DModel

    m = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
                              out_channels=4, text_dim=16, freq_dim=16, ffn_dim=40, num_layers=2, rope_max_seq_len=32)
    kw = dict(hidden_states=torch.randn(1, 4, 3, 8, 8), timestep=torch.tensor([10]),
              encoder_hidden_states=torch.randn(1, 7, 16))
    return m, kw, 7


def _hunyuan():
    from diffusers import HunyuanVideoTransformer3DModel

    m = HunyuanVideoTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=12,
                                       num_layers=1, num_single_layers=2, num_refiner_layers=1, mlp_ratio=2.0,
                                       patch_size=2, patch_size_t=1, text_embed_dim=16, pooled_projection_dim=8,
                                       rope_axes_dim=(4, 4, 4))
    kw = dict(hidden_states=torch.randn(1, 4, 3, 8, 8), timestep=torch.tensor([10]),
              encoder_hidden_states=torch.randn(1, 5, 16), encoder_attention_mask=torch.ones(1, 5),
              pooled_projections=torch.randn(1, 8), guidance=torch.tensor([1000.0]))
    return m, kw, 5


def _cogvideox():
    from diffusers import CogVideoXTransformer3DModel

    m = CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                                    time_embed_dim=8, text_embed_dim=16, num_layers=2, sample_width=8, sample_height=8,
                                    sample_frames=9, patch_size=2, max_text_seq_length=7,
                                    use_rotary_positional_embeddings=True)
    kw = dict(hidden_states=torch.randn(1, 3, 4, 8, 8), timestep=torch.tensor([10]),
              encoder_hidden_states=torch.randn(1, 7, 16))
    return m, kw, 7


BLOCKS = ("blocks", "transformer_blocks", "single_transformer_blocks")
# the adaptive norms' modulation linears take the timestep embedding (one row per call), not the
# tokens: they are no GEMM of the workload
MODULATION = ("norm1", "norm1_context", "norm2", "norm")


@pytest.mark.parametrize("build", [_wan, _hunyuan, _cogvideox], ids=["wan", "hunyuan", "cogvideox"])
def test_the_workloads_macs_equal_a_flop_count_of_the_diffusers_model(build):
    torch.manual_seed(0)
    model, kw, text = build()
    model.eval()
    # the math backend: the fused CPU attention kernel is invisible to the counter, its matmuls are not
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        model(**kw, return_dict=False)
    counts = fc.get_flop_counts()
    linear = attention = 0
    for name, ops in counts.items():
        parts = name.split(".")
        if len(parts) == 3 and parts[1] in BLOCKS:  # Model.blocks.<i>: everything inside one block
            linear += sum(v for op, v in ops.items() if str(op) in ("aten.addmm", "aten.mm"))
            attention += sum(v for op, v in ops.items() if str(op) == "aten.bmm")
            assert set(map(str, ops)) <= {"aten.addmm", "aten.mm", "aten.bmm"}, name
        elif len(parts) == 4 and parts[1] in BLOCKS and parts[3] in MODULATION:
            linear -= sum(ops.values())
    assert linear > 0 and attention > 0
    # the same reduced config through the workload's own derivation: 3 x 4 x 4 = 48 video tokens
    spec = model_spec_from_config("reduced", model.config, steps=1, cfg_passes=1, text_len=text,
                                  class_name=type(model).__name__)
    gemms = build_gemms(spec, (3, 4, 4), 1)
    w_attention = sum(g.macs for g in gemms if g.op in ATTENTION_KINDS)
    w_linear = sum(g.macs for g in gemms if g.op not in ATTENTION_KINDS)
    assert (w_linear, w_attention) == (linear // 2, attention // 2)  # a multiply-accumulate is 2 FLOPs


def test_a_config_of_another_model_class_is_refused():
    with pytest.raises(ValueError, match="FluxTransformer2DModel"):
        model_spec_from_config("flux", {"_class_name": "FluxTransformer2DModel"}, steps=1, cfg_passes=1)
    with pytest.raises(ValueError, match="text_len"):
        model_spec_from_config("wan", PUBLISHED_CONFIGS["Wan-AI/Wan2.1-T2V-1.3B-Diffusers"], steps=1, cfg_passes=1)
