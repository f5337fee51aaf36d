"""The GEMMs of one transformer call, from the model adapter's sites: what every baseline's MACs are counted in.

Sites and shapes come from the adapter, as they do for Kaleido: its attention sites
(module, layer, ``self`` / ``cross``, which tokens the queries and keys are) and its block
linears (:meth:`~kaleido.models.adapter.ModelAdapter.gemm_linear_sites`: module,
layer, op kind, which tokens the rows are).  :class:`ModelShapes` turns them and a call's
batch ``B``, video tokens ``S`` and text tokens ``L`` into the call's GEMMs (:class:`CallGemm`),
so a call's dense MACs are right on every family: Wan's cross-attention over ``L`` text
keys, HunyuanVideo's joint ``[video; text]`` attention over ``S + L`` tokens with its
single-stream q/k/v and fused ``proj_out`` on the joint rows, CogVideoX's ``[text; video]``.

Op kinds (:data:`kaleido.ops.ALL_BLOCK_OPS`, the names Kaleido's traces use)::

    self_qk, self_pv            self-attention q.k^T and P.V   (B*heads*Sq*Sk*head_dim each)
    cross_qk, cross_pv          cross-attention q.k^T and P.V  (B*heads*S*L*head_dim each)
    proj_q, proj_k, proj_v,     self-attention q/k/v/out projections (B*rows*C_in*C_out each)
    proj_out
    cross_proj_q, cross_proj_out  cross-attention q and out projections (video tokens)
    cross_proj_kv               cross-attention k and v projections of the L text tokens
    ffn_in, ffn_out             the feed-forward's two linears
    fused_out                   HunyuanVideo's single-stream proj_out(cat[attention, MLP])
    estimate                    work a method adds to decide what to skip (pooled scores,
                                sampled rows, token matching, predictions); it has no
                                dense counterpart and is charged on top

Only the transformer blocks' GEMMs the adapter names are counted (patch embedding,
time/text embedders, text-side streams of dual-stream blocks and the output head are left
out for every method alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch

from kaleido.ops import OPS, UNIT_OPS, OpKind
ESTIMATE = "estimate"
#: The units of a Wan-style block (self-attention, cross-attention, FFN) and the op kinds each covers.
UNIT_KINDS: dict[str, tuple[str, ...]] = {u: tuple(k.value for k in ops) for u, ops in UNIT_OPS.items()}
#: Which tokens a GEMM's rows are (the adapter's vocabulary: kaleido.models.adapter.SEQUENCES).
VIDEO, TEXT, JOINT = "video", "text", "joint"


def kind_unit(kind: str) -> str | None:
    """The block unit of op kind ``kind`` (``None`` for HunyuanVideo's ``fused_out``)."""
    return OPS[OpKind(kind)].unit


def claims_of(kinds: Iterable[str]) -> frozenset:
    """The ``(unit, op kind)`` claims of ``kinds`` (what :attr:`Method.claims` holds)."""
    return frozenset((kind_unit(k), k) for k in kinds)


@dataclass(frozen=True)
class CallGemm:
    """One GEMM of one transformer call: ``batch x heads`` products of ``rows x K`` by ``K x n_cols``.

    ``site``: the module it belongs to (an attention site for q.k^T / P.V, else the linear);
    ``seq``: which tokens its rows are (``"video"``, ``"text"``, ``"joint"``). A live call's GEMM at one site,
    as a technique's ledger charges it; the simulator's :class:`kaleido.families.Gemm` is the other view, the
    same products of a whole run grouped by op kind at a published shape.
    """

    layer: int
    kind: str
    site: str
    seq: str
    batch: int
    heads: int
    rows: int
    K: int
    n_cols: int

    @property
    def macs(self) -> int:
        return self.batch * self.heads * self.rows * self.K * self.n_cols


@dataclass(frozen=True)
class AttentionShape:
    """An attention site's dimensions (from its module) and which tokens its queries / keys are."""

    name: str
    layer: int
    kind: str  # "self" or "cross"
    queries: str
    keys: str
    heads: int
    head_dim: int
    value_dim: int


@dataclass(frozen=True)
class LinearShape:
    """A linear site's op kind, rows and dimensions."""

    name: str
    layer: int
    op: str
    rows: str
    in_features: int
    out_features: int


@dataclass(frozen=True)
class ModelShapes:
    """The dimensions of a transformer that decide its MAC counts, read through its model adapter."""

    model_class: str
    heads: int
    head_dim: int
    dim: int
    ffn_dim: int
    n_layers: int
    patch: tuple[int, int, int]
    rope_split: tuple[int, int, int] | None
    text_position: str
    attention: tuple[AttentionShape, ...]
    linears: tuple[LinearShape, ...]

    @classmethod
    def of(cls, transformer: torch.nn.Module) -> "ModelShapes":
        """The shapes of ``transformer`` (``ValueError`` in one line for a model without an adapter)."""
        from kaleido.models.adapter import adapter_for

        adapter = adapter_for(transformer)
        adapter.check_model(transformer)
        return cls.from_sites(transformer, adapter, adapter.attention_sites(transformer),
                              adapter.gemm_linear_sites(transformer))

    @classmethod
    def from_sites(cls, transformer: torch.nn.Module, adapter, attention_sites, linear_sites) -> "ModelShapes":
        name = type(transformer).__name__
        att = []
        for s in attention_sites:
            m = s.module
            if getattr(m, "fused_projections", False):
                raise ValueError(f"{name}: {s.name} has fused q/k/v projections; call "
                                 "transformer.unfuse_qkv_projections() first (the accounting reads to_q/to_k/to_v)")
            to_q, to_v = getattr(m, "to_q", None), getattr(m, "to_v", None)
            if not isinstance(to_q, torch.nn.Linear) or not isinstance(to_v, torch.nn.Linear):
                raise ValueError(f"{name}: {s.name} has no to_q / to_v linears; the baselines need diffusers' "
                                 "Attention modules")
            heads = int(m.heads)
            att.append(AttentionShape(s.name, s.layer, s.kind, s.queries, s.keys, heads,
                                      to_q.out_features // heads, to_v.out_features // heads))
        lin = [LinearShape(s.name, s.layer, s.op, s.rows, int(s.module.in_features), int(s.module.out_features))
               for s in linear_sites]
        ffn = [s.out_features for s in lin if s.op == OpKind.FFN_IN.value]
        heads, hd = int(transformer.config.num_attention_heads), adapter.head_dim(transformer)
        rope = adapter.rope_split(transformer)
        return cls(name, heads, hd, heads * hd, ffn[0] if ffn else 0, adapter.num_layers(transformer),
                   tuple(adapter.patch_sizes(transformer)), None if rope is None else tuple(rope),
                   adapter.text_position, tuple(att), tuple(lin))

    def gemms(self, batch: int, n_video: int, n_text: int) -> list[CallGemm]:
        """Every block GEMM of one call with ``batch`` sequences of ``n_video`` video and ``n_text`` text tokens:
        q.k^T and P.V of each attention site, then each linear site (the order of :attr:`index`)."""
        n = {VIDEO: n_video, TEXT: n_text, JOINT: n_video + n_text}
        out = []
        for a in self.attention:
            sq, sk = n[a.queries], n[a.keys]
            out.append(CallGemm(a.layer, f"{a.kind}_qk", a.name, a.queries, batch, a.heads, sq, a.head_dim, sk))
            out.append(CallGemm(a.layer, f"{a.kind}_pv", a.name, a.queries, batch, a.heads, sq, sk, a.value_dim))
        for s in self.linears:
            out.append(CallGemm(s.layer, s.op, s.name, s.rows, batch, 1, n[s.rows], s.in_features, s.out_features))
        return out

    @property
    def index(self) -> dict[tuple[str, str], int]:
        """``(site, op kind)`` -> position of its GEMM in :meth:`gemms`."""
        keys = [(a.name, f"{a.kind}_{op}") for a in self.attention for op in ("qk", "pv")]
        keys += [(s.name, s.op) for s in self.linears]
        return {k: i for i, k in enumerate(keys)}

    def dense_macs(self, batch: int, n_video: int, n_text: int) -> dict[str, int]:
        """Dense MACs per op kind of one call (see :meth:`gemms`)."""
        out: dict[str, int] = {}
        for g in self.gemms(batch, n_video, n_text):
            out[g.kind] = out.get(g.kind, 0) + g.macs
        return out


def merged_shape(gemms: Iterable[CallGemm]) -> tuple[int, int, int, int, int]:
    """``(batch, heads, rows, K, n_cols)`` of GEMMs of one layer and op kind streamed as one
    (e.g. Wan's text-side k and v projections: one ``L x dim`` operand against both weights)."""
    gs = list(gemms)
    g0 = gs[0]
    if any((g.batch, g.heads, g.rows, g.K) != (g0.batch, g0.heads, g0.rows, g0.K) for g in gs):
        raise ValueError(f"layer {g0.layer} {g0.kind}: its GEMMs {[g.site for g in gs]} differ in rows or K")
    return g0.batch, g0.heads, g0.rows, g0.K, sum(g.n_cols for g in gs)
