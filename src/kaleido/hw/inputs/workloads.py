"""vDiT workloads: published model shapes -> the list of GEMMs of one denoising run.

Each model is built from its published configuration (``docs/hardware.md`` cites
them): layers, heads x head_dim, FFN width, text length, RoPE axis split, VAE
compression (4x temporal, 8x spatial), patch (1, 2, 2), default steps and whether
classifier-free guidance runs two passes.  What a family's config decides and which
GEMMs it runs are the family's declaration (:mod:`kaleido.families`: one module per
family); this module holds the catalogue of published checkpoints and builds a
:class:`Workload` (a model at a resolution and step count) from it.

A :class:`Gemm` is ``C (M x N) = A (M x K) . B (K x N)`` repeated ``count`` times
(heads x layers x passes x steps).  ``grid_rows`` of the ``M`` rows of ``A`` are
video tokens (they may reuse); the other ``M - grid_rows`` rows are text tokens
(always computed, SPEC §2).  ``op`` is the op kind the reuse profile is keyed by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kaleido.families import FAMILIES, Gemm, ModelSpec, family_of_class
from kaleido.ops import HW_KIND_OF, OpKind

__all__ = ["ATTENTION_KINDS", "Gemm", "MINIATURE", "MODELS", "ModelSpec", "PUBLISHED_CONFIGS",
           "RESOLUTIONS", "Workload", "build_gemms", "get_workload", "latent_grid", "miniature_workload",
           "model_spec_from_config", "workload_names"]

ATTENTION_KINDS: tuple[str, ...] = tuple(
    HW_KIND_OF[k.value] for k in (OpKind.SELF_QK, OpKind.SELF_PV, OpKind.CROSS_QK, OpKind.CROSS_PV)
)

def model_spec_from_config(name: str, config: Mapping, *, steps: int, cfg_passes: int, text_len: int | None = None,
                           attn_density: float = 1.0, source: str = "", class_name: str | None = None) -> ModelSpec:
    """A :class:`ModelSpec` from a diffusers transformer's ``config.json`` (or ``model.config``, with
    ``class_name=type(model).__name__``: a loaded model's config does not hold its ``_class_name``).

    What each family's config decides is its declaration's (:meth:`kaleido.families.FamilyShapes.spec`; the
    module of each family in :mod:`kaleido.families` says which keys).  ``steps`` and ``cfg_passes`` (transformer
    calls per step) come from the pipeline, not the config.
    """
    cls = class_name or config.get("_class_name")
    try:
        family = family_of_class(cls)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    return family.spec(name, config, steps=steps, cfg_passes=cfg_passes, text_len=text_len,
                       attn_density=attn_density, source=source)


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

#: family -> resolution name -> (height, width, frames) of the generated video (the families' declarations)
RESOLUTIONS: dict[str, Mapping[str, tuple[int, int, int]]] = {f.name: f.resolutions for f in FAMILIES.values()}


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


def build_gemms(m: ModelSpec, grid_thw: tuple[int, int, int], steps: int) -> tuple[Gemm, ...]:
    """All GEMMs of ``steps`` denoising steps (``cfg_passes`` transformer calls each), as ``m``'s family
    declares them (the ``gemms`` of its :class:`kaleido.families.FamilyShapes`)."""
    if m.family not in FAMILIES:
        raise ValueError(f"unknown model family {m.family!r}; known: {sorted(FAMILIES)}")
    return tuple(FAMILIES[m.family].gemms(m, grid_thw, steps))


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
