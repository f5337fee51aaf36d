"""vDiT workloads: published model shapes -> the list of GEMMs of one denoising run.

Each model is built from its published configuration (``docs/hardware.md`` cites
them; ``/work/shared/notes/facts.md`` lists them): layers, heads x head_dim, FFN
width, text length, RoPE axis split, VAE compression (4x temporal, 8x spatial),
patch (1, 2, 2), default steps and whether classifier-free guidance runs two passes.

A :class:`Gemm` is ``C (M x N) = A (M x K) . B (K x N)`` repeated ``count`` times
(heads x layers x passes x steps).  ``grid_rows`` of the ``M`` rows of ``A`` are
video tokens (they may reuse); the other ``M - grid_rows`` rows are text tokens
(always computed, SPEC §2).  ``op`` is the op kind the reuse profile is keyed by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from kaleido.ops import HW_KIND_OF, HW_OPS, OpKind

#: Every op kind a workload can contain, with what its ``A`` operand is (:data:`kaleido.ops.HW_OPS`).
OP_KINDS: dict[str, str] = HW_OPS
ATTENTION_KINDS: tuple[str, ...] = tuple(
    HW_KIND_OF[k.value] for k in (OpKind.SELF_QK, OpKind.SELF_PV, OpKind.CROSS_QK, OpKind.CROSS_PV)
)


@dataclass(frozen=True)
class Gemm:
    """``count`` GEMMs ``(M x K) . (K x N)``; ``grid_rows`` of the M rows are video tokens."""

    op: str
    M: int
    K: int
    N: int
    count: int
    grid_rows: int
    layer_kind: str = ""

    def __post_init__(self) -> None:
        if self.op not in OP_KINDS:
            raise ValueError(f"unknown op kind {self.op!r}; known: {sorted(OP_KINDS)}")
        for name in ("M", "K", "N", "count"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"Gemm.{name} must be a positive int, got {v!r}")
        if not 0 <= self.grid_rows <= self.M:
            raise ValueError(f"Gemm.grid_rows={self.grid_rows} must be within 0..M={self.M}")

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N * self.count

    def to_dict(self) -> dict:
        d = asdict(self)
        d["macs"] = self.macs
        return d


@dataclass(frozen=True)
class ModelSpec:
    """Published shape of a vDiT (see module docstring)."""

    name: str
    family: str  # "wan" | "hunyuan" | "cogvideox"
    layers: int  # Wan/CogVideoX blocks; HunyuanVideo dual-stream blocks
    single_layers: int  # HunyuanVideo single-stream blocks (0 otherwise)
    heads: int
    head_dim: int
    ffn_dim: int
    text_len: int
    rope_thw: tuple[int, int, int] | None  # RoPE channels per head (t, h, w); None: no RoPE
    steps: int
    cfg_passes: int  # transformer calls per step (2 with classifier-free guidance)
    attn_density: float = 1.0  # fraction of attention scores computed (TurboDiffusion top-k)
    source: str = ""

    @property
    def dim(self) -> int:
        return self.heads * self.head_dim


#: diffusers transformer class -> model family
FAMILY_OF_CLASS: dict[str, str] = {
    "WanTransformer3DModel": "wan",
    "HunyuanVideoTransformer3DModel": "hunyuan",
    "CogVideoXTransformer3DModel": "cogvideox",
}


def model_spec_from_config(name: str, config: Mapping, *, steps: int, cfg_passes: int, text_len: int | None = None,
                           attn_density: float = 1.0, source: str = "", class_name: str | None = None) -> ModelSpec:
    """A :class:`ModelSpec` from a diffusers transformer's ``config.json`` (or ``model.config``, with
    ``class_name=type(model).__name__``: a loaded model's config does not hold its ``_class_name``).

    What each family's config decides (diffusers' own constructors):

    * ``WanTransformer3DModel``: ``num_layers`` blocks, ``num_attention_heads`` x
      ``attention_head_dim``, FFN width ``ffn_dim``; RoPE ``h = w = 2*(head_dim//6)``, ``t`` the
      rest (``WanRotaryPosEmbed``).  The text length is the pipeline's (``text_len``, 512 in
      ``WanPipeline``).
    * ``HunyuanVideoTransformer3DModel``: ``num_layers`` dual-stream and ``num_single_layers``
      single-stream blocks, FFN width ``int(dim * mlp_ratio)``, RoPE ``rope_axes_dim``; the
      text length is the pipeline's (256).
    * ``CogVideoXTransformer3DModel``: ``num_layers`` blocks, FFN width ``4 * dim``
      (``FeedForward``'s default ``mult``; the model passes no inner width), text length
      ``max_text_seq_length`` unless ``text_len`` is given, 3-D RoPE ``(D/4, 3D/8, 3D/8)`` when
      ``use_rotary_positional_embeddings``.

    ``steps`` and ``cfg_passes`` (transformer calls per step) come from the pipeline, not the config.
    """
    cls = class_name or config.get("_class_name")
    if cls not in FAMILY_OF_CLASS:
        raise ValueError(f"{name}: config of {cls!r}; known transformer classes: {sorted(FAMILY_OF_CLASS)}")
    family = FAMILY_OF_CLASS[cls]
    heads, hd = int(config["num_attention_heads"]), int(config["attention_head_dim"])
    dim = heads * hd
    single = 0
    if family == "wan":
        ffn = int(config["ffn_dim"])
        hw = 2 * (hd // 6)
        rope: tuple[int, int, int] | None = (hd - 2 * hw, hw, hw)
    elif family == "hunyuan":
        ffn = int(dim * float(config.get("mlp_ratio", 4.0)))
        single = int(config.get("num_single_layers", 40))
        rope = tuple(int(x) for x in config.get("rope_axes_dim", (16, 56, 56)))
    else:
        ffn = 4 * dim
        rope = (hd // 4, 3 * hd // 8, 3 * hd // 8) if config.get("use_rotary_positional_embeddings", False) else None
        if text_len is None:
            text_len = int(config.get("max_text_seq_length", 226))
    if text_len is None:
        raise ValueError(f"{name}: a {cls} config does not give the text length; pass text_len (the pipeline's)")
    return ModelSpec(name, family, int(config["num_layers"]), single, heads, hd, ffn, int(text_len), rope, steps,
                     cfg_passes, attn_density, source)


#: The keys of each checkpoint's ``transformer/config.json`` that shape its GEMMs (HF model pages;
#: ``/work/shared/notes/facts.md``); every other key leaves them unchanged.
PUBLISHED_CONFIGS: dict[str, dict] = {
    "Wan-AI/Wan2.1-T2V-1.3B-Diffusers": {"_class_name": "WanTransformer3DModel", "num_layers": 30,
                                          "num_attention_heads": 12, "attention_head_dim": 128, "ffn_dim": 8960},
    "Wan-AI/Wan2.1-T2V-14B-Diffusers": {"_class_name": "WanTransformer3DModel", "num_layers": 40,
                                         "num_attention_heads": 40, "attention_head_dim": 128, "ffn_dim": 13824},
    "hunyuanvideo-community/HunyuanVideo": {"_class_name": "HunyuanVideoTransformer3DModel", "num_layers": 20,
                                            "num_single_layers": 40, "num_attention_heads": 24,
                                            "attention_head_dim": 128, "mlp_ratio": 4.0,
                                            "rope_axes_dim": [16, 56, 56]},
    "THUDM/CogVideoX-2b": {"_class_name": "CogVideoXTransformer3DModel", "num_layers": 30, "num_attention_heads": 30,
                           "attention_head_dim": 64, "max_text_seq_length": 226,
                           "use_rotary_positional_embeddings": False},
    "THUDM/CogVideoX-5b": {"_class_name": "CogVideoXTransformer3DModel", "num_layers": 42, "num_attention_heads": 48,
                           "attention_head_dim": 64, "max_text_seq_length": 226,
                           "use_rotary_positional_embeddings": True},
    # the shipped miniature pipeline's transformer (kaleido/assets/tiny-wan/transformer/config.json)
    "kaleido/assets/tiny-wan": {"_class_name": "WanTransformer3DModel", "num_layers": 4, "num_attention_heads": 2,
                                "attention_head_dim": 64, "ffn_dim": 512},
}


def _published(name: str, repo: str, **kw) -> ModelSpec:
    return model_spec_from_config(name, PUBLISHED_CONFIGS[repo], **kw)


# Sources: HF model cards / config.json of each checkpoint (see docs/hardware.md); steps, CFG passes and
# text lengths are the pipelines' defaults.
MODELS: dict[str, ModelSpec] = {
    "wan-1.3b": _published("wan-1.3b", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", steps=50, cfg_passes=2, text_len=512,
                           source="Wan-AI/Wan2.1-T2V-1.3B-Diffusers transformer/config.json"),
    "wan-14b": _published("wan-14b", "Wan-AI/Wan2.1-T2V-14B-Diffusers", steps=50, cfg_passes=2, text_len=512,
                          source="Wan-AI/Wan2.1-T2V-14B-Diffusers transformer/config.json"),
    "hunyuan": _published("hunyuan", "hunyuanvideo-community/HunyuanVideo", steps=50, cfg_passes=1, text_len=256,
                          source="hunyuanvideo-community/HunyuanVideo transformer/config.json; "
                                 "guidance-distilled (embedded guidance), one pass per step"),
    "cogvideox-2b": _published("cogvideox-2b", "THUDM/CogVideoX-2b", steps=50, cfg_passes=2,
                               source="THUDM/CogVideoX-2b transformer/config.json (no RoPE)"),
    "cogvideox-5b": _published("cogvideox-5b", "THUDM/CogVideoX-5b", steps=50, cfg_passes=2,
                               source="THUDM/CogVideoX-5b transformer/config.json"),
    "turbodiffusion": _published("turbodiffusion", "Wan-AI/Wan2.1-T2V-14B-Diffusers", steps=4, cfg_passes=1,
                                 text_len=512, attn_density=0.1,
                                 source="TurboDiffusion (Wan2.1-T2V-14B distilled with rCM to 4 steps, no CFG; "
                                        "sparse-linear attention top-k 0.1: only the sparse q.k^T/P.V part is modelled)"),
    "turbodiffusion-1.3b": _published("turbodiffusion-1.3b", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", steps=4, cfg_passes=1,
                                      text_len=512, attn_density=0.1,
                                      source="TurboDiffusion on Wan2.1-T2V-1.3B, as above"),
}

#: the shipped miniature Wan pipeline's transformer (``kaleido/assets/tiny-wan``), to simulate its own traces at
#: the grid they were measured on (:func:`miniature_workload`); not a published workload
MINIATURE = _published("tiny-wan", "kaleido/assets/tiny-wan", steps=25, cfg_passes=2, text_len=16,
                       source="kaleido/assets/tiny-wan transformer/config.json; 16 text tokens (TINY_TEXT_TOKENS)")

#: resolution name -> (height, width, frames) of the generated video.
RESOLUTIONS: dict[str, dict[str, tuple[int, int, int]]] = {
    "wan": {"480p": (480, 832, 81), "720p": (720, 1280, 81)},
    "hunyuan": {"480p": (480, 848, 129), "720p": (720, 1280, 129)},
    # CogVideoX's published resolution is 480x720 (49 frames); "720p" is our extrapolation.
    "cogvideox": {"480p": (480, 720, 49), "720p": (720, 1280, 49)},
}


def latent_grid(family: str, resolution: str) -> tuple[int, int, int]:
    """Token grid ``(T, H, W)`` after the VAE (4x t, 8x s) and the (1, 2, 2) patch."""
    try:
        h, w, f = RESOLUTIONS[family][resolution]
    except KeyError:
        raise ValueError(f"unknown resolution {resolution!r} for {family}: use one of {sorted(RESOLUTIONS[family])}") from None
    return ((f - 1) // 4 + 1, h // 16, w // 16)


@dataclass(frozen=True)
class Workload:
    """One model at one resolution: its token grid and GEMMs for a whole run."""

    name: str
    model: ModelSpec
    resolution: str
    grid_thw: tuple[int, int, int]
    steps: int
    gemms: tuple[Gemm, ...]

    @property
    def n_video(self) -> int:
        T, H, W = self.grid_thw
        return T * H * W

    @property
    def total_macs(self) -> int:
        return sum(g.macs for g in self.gemms)

    def op_kinds(self) -> list[str]:
        out: list[str] = []
        for g in self.gemms:
            if g.op not in out:
                out.append(g.op)
        return out

    def to_dict(self) -> dict:
        return {
            "name": self.name, "model": self.model.name, "resolution": self.resolution,
            "grid_thw": list(self.grid_thw), "n_video_tokens": self.n_video, "steps": self.steps,
            "cfg_passes": self.model.cfg_passes, "total_macs": self.total_macs,
        }


def _attn(op_qk: str, op_pv: str, m: ModelSpec, Mq: int, Nk: int, grid_rows: int, rep: int, lk: str) -> list[Gemm]:
    keys = max(1, round(Nk * m.attn_density)) if op_qk == "self_attn_qk" else Nk
    return [
        Gemm(op_qk, Mq, m.head_dim, keys, m.heads * rep, grid_rows, lk),
        Gemm(op_pv, Mq, keys, m.head_dim, m.heads * rep, grid_rows, lk),
    ]


def _lin(op: str, M: int, K: int, N: int, rep: int, grid_rows: int, lk: str) -> Gemm:
    return Gemm(op, M, K, N, rep, grid_rows, lk)


def build_gemms(m: ModelSpec, grid_thw: tuple[int, int, int], steps: int) -> tuple[Gemm, ...]:
    """All GEMMs of ``steps`` denoising steps (``cfg_passes`` transformer calls each)."""
    T, H, W = grid_thw
    n = T * H * W
    L, d, f, txt = m.layers, m.dim, m.ffn_dim, m.text_len
    calls = steps * m.cfg_passes
    g: list[Gemm] = []
    if m.family == "wan":
        rep = L * calls
        for op in ("proj_q", "proj_k", "proj_v"):
            g.append(_lin(op, n, d, d, rep, n, "block"))
        g += _attn("self_attn_qk", "self_attn_pv", m, n, n, n, rep, "block")
        g.append(_lin("proj_out", n, d, d, rep, n, "block"))
        g.append(_lin("cross_proj_q", n, d, d, rep, n, "block"))
        g.append(_lin("cross_proj_kv", txt, d, 2 * d, rep, 0, "block"))
        g += _attn("cross_attn_qk", "cross_attn_pv", m, n, txt, n, rep, "block")
        g.append(_lin("cross_proj_out", n, d, d, rep, n, "block"))
        g.append(_lin("ffn_up", n, d, f, rep, n, "block"))
        g.append(_lin("ffn_down", n, f, d, rep, n, "block"))
    elif m.family == "cogvideox":
        s = n + txt  # joint [text; video]
        rep = L * calls
        for op in ("proj_q", "proj_k", "proj_v"):
            g.append(_lin(op, s, d, d, rep, n, "block"))
        g += _attn("self_attn_qk", "self_attn_pv", m, s, s, n, rep, "block")
        g.append(_lin("proj_out", s, d, d, rep, n, "block"))
        g.append(_lin("ffn_up", s, d, f, rep, n, "block"))
        g.append(_lin("ffn_down", s, f, d, rep, n, "block"))
    elif m.family == "hunyuan":
        s = n + txt  # joint [video; text]
        # dual-stream blocks: separate weights for the video and the text stream
        rep = m.layers * calls
        for op in ("proj_q", "proj_k", "proj_v"):
            g.append(_lin(op, n, d, d, rep, n, "dual"))
            g.append(_lin(op, txt, d, d, rep, 0, "dual-text"))
        g += _attn("self_attn_qk", "self_attn_pv", m, s, s, n, rep, "dual")
        g.append(_lin("proj_out", n, d, d, rep, n, "dual"))
        g.append(_lin("proj_out", txt, d, d, rep, 0, "dual-text"))
        g.append(_lin("ffn_up", n, d, f, rep, n, "dual"))
        g.append(_lin("ffn_down", n, f, d, rep, n, "dual"))
        g.append(_lin("ffn_up", txt, d, f, rep, 0, "dual-text"))
        g.append(_lin("ffn_down", txt, f, d, rep, 0, "dual-text"))
        # single-stream blocks: linear1 = [q|k|v|mlp_in], linear2 = [attn|mlp] -> d (split by K)
        rep = m.single_layers * calls
        for op in ("proj_q", "proj_k", "proj_v"):
            g.append(_lin(op, s, d, d, rep, n, "single"))
        g.append(_lin("ffn_up", s, d, f, rep, n, "single"))
        g += _attn("self_attn_qk", "self_attn_pv", m, s, s, n, rep, "single")
        g.append(_lin("proj_out", s, d, d, rep, n, "single"))
        g.append(_lin("ffn_down", s, f, d, rep, n, "single"))
    else:  # pragma: no cover - MODELS only holds the families above
        raise ValueError(f"unknown model family {m.family!r}")
    return tuple(g)


def workload_names() -> list[str]:
    out = []
    for name, m in MODELS.items():
        out += [f"{name}-{res}" for res in RESOLUTIONS[m.family]]
    return out


def miniature_workload(grid_thw: tuple[int, int, int], steps: int = MINIATURE.steps) -> Workload:
    """The miniature pipeline (:data:`MINIATURE`) at token grid ``grid_thw`` (``(5, 16, 16)``: ``tiny``,
    ``(5, 24, 24)``: ``tiny-96``) for ``steps`` denoising steps with CFG."""
    grid = tuple(int(x) for x in grid_thw)
    if len(grid) != 3 or min(grid) < 1:
        raise ValueError(f"grid_thw={grid_thw!r} must be three positive ints (T, H, W)")
    if not isinstance(steps, int) or not 1 <= steps <= 1000:
        raise ValueError(f"steps={steps!r} is outside 1..1000")
    T, H, W = grid
    return Workload(f"tiny-wan-{T}x{H}x{W}", MINIATURE, f"{4 * H}x{4 * W}px", grid, steps,
                    build_gemms(MINIATURE, grid, steps))


def get_workload(name: str, steps: int | None = None) -> Workload:
    """``"<model>-<480p|720p>"``, e.g. ``"hunyuan-720p"``; ``steps`` overrides the model default."""
    name = str(name).lower()
    if "-" not in name or name.rsplit("-", 1)[0] not in MODELS:
        raise ValueError(f"unknown workload {name!r}; known: {', '.join(workload_names())}")
    model_name, res = name.rsplit("-", 1)
    m = MODELS[model_name]
    grid = latent_grid(m.family, res)
    if steps is None:
        steps = m.steps
    if not isinstance(steps, int) or not 1 <= steps <= 1000:
        raise ValueError(f"steps={steps!r} is outside 1..1000")
    return Workload(name, m, res, grid, steps, build_gemms(m, grid, steps))
