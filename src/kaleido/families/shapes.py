"""The shape vocabulary of a model family: a GEMM, a model's published shape, and what a family declares.

A :class:`Gemm` is ``C (M x N) = A (M x K) . B (K x N)`` repeated ``count`` times (heads x layers x passes x
steps).  ``grid_rows`` of the ``M`` rows of ``A`` are video tokens (they may reuse); the other ``M - grid_rows``
rows are text tokens (always computed, SPEC §2).  ``op`` is the op kind the reuse profile is keyed by.

A :class:`FamilyShapes` is one family's declaration: which diffusers transformer class it is, what of that
class's config decides its shape (:meth:`FamilyShapes.spec`), the GEMMs of one denoising run at a token grid
(``FamilyShapes.gemms``) and its published resolutions.  The simulator's workloads
(:mod:`kaleido.hw.inputs.workloads`) and the model adapters (:mod:`kaleido.models`) both read it; a test checks
each declaration against the matmuls torch counts on the family's diffusers transformer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Callable

from kaleido.ops import HW_OPS

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
        if self.op not in HW_OPS:
            raise ValueError(f"unknown op kind {self.op!r}; known: {sorted(HW_OPS)}")
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
    """Published shape of a vDiT: what its GEMMs are built from."""

    name: str
    family: str  # a FamilyShapes.name: "wan" | "hunyuan" | "cogvideox"
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


#: ``gemms(spec, grid_thw, steps) -> [Gemm, ...]``: every GEMM of ``steps`` denoising steps at the token grid
GemmBuilder = Callable[[ModelSpec, "tuple[int, int, int]", int], "list[Gemm]"]
#: ``config_fields(config, head_dim, text_len) -> dict`` of the ModelSpec fields the family's config decides:
#: ``ffn_dim``, ``single_layers``, ``rope_thw`` and ``text_len`` (the given one, or the config's default)
ConfigFields = Callable[[Mapping, int, "int | None"], dict]


@dataclass(frozen=True)
class FamilyShapes:
    """One model family's shape declaration (see the module docstring)."""

    name: str
    class_name: str  # the diffusers transformer class
    config_fields: ConfigFields
    gemms: GemmBuilder
    #: resolution name -> (height, width, frames) of the generated video
    resolutions: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)

    def spec(self, name: str, config: Mapping, *, steps: int, cfg_passes: int, text_len: int | None = None,
             attn_density: float = 1.0, source: str = "") -> ModelSpec:
        """The :class:`ModelSpec` of a checkpoint of this family from its transformer's ``config.json``."""
        heads, hd = int(config["num_attention_heads"]), int(config["attention_head_dim"])
        f = self.config_fields(config, hd, text_len)
        if f["text_len"] is None:
            raise ValueError(f"{name}: a {self.class_name} config does not give the text length; pass text_len "
                             "(the pipeline's)")
        return ModelSpec(name, self.name, int(config["num_layers"]), int(f["single_layers"]), heads, hd,
                         int(f["ffn_dim"]), int(f["text_len"]), f["rope_thw"], steps, cfg_passes, attn_density,
                         source)


def attention_gemms(op_qk: str, op_pv: str, m: ModelSpec, Mq: int, Nk: int, grid_rows: int, rep: int,
                    layer_kind: str) -> list[Gemm]:
    """q.k^T and P.V of ``Mq`` queries over ``Nk`` keys, per head (self-attention keeps ``attn_density`` of the
    keys: TurboDiffusion's top-k)."""
    keys = max(1, round(Nk * m.attn_density)) if op_qk == "self_attn_qk" else Nk
    return [
        Gemm(op_qk, Mq, m.head_dim, keys, m.heads * rep, grid_rows, layer_kind),
        Gemm(op_pv, Mq, keys, m.head_dim, m.heads * rep, grid_rows, layer_kind),
    ]
