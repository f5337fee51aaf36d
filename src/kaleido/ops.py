"""The op vocabulary: every GEMM kind of a vDiT block, named once.

Trace records, :class:`~kaleido.techniques.kaleido_reuse.KaleidoConfig` switches, the baselines'
MAC ledgers, the simulator's workloads (:mod:`kaleido.hw.inputs.workloads`) and the report
all name a GEMM by an :class:`OpKind`; every other name of it is derived here:

* ``OpKind.value``: the name in traces, configs' per-op statistics and ledgers
  (``"self_qk"``);
* :attr:`OpInfo.hw`: the simulator workload's op kind (``"self_attn_qk"``; the
  workloads group ``fused_out`` with ``ffn_down``);
* :attr:`OpInfo.switch`: the :class:`~kaleido.techniques.kaleido_reuse.KaleidoConfig` switch that
  turns reuse on it on or off (``None``: never reused);
* :attr:`OpInfo.unit`: the block unit that runs it (``"attn1"`` self-attention,
  ``"attn2"`` cross-attention, ``"ffn"`` feed-forward): a unit a step cache skips
  skips every op of it.

This module imports nothing of the project, so every layer may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class OpKind(str, Enum):
    """One kind of GEMM; its value is the name traces and configs use."""

    SELF_QK = "self_qk"
    SELF_PV = "self_pv"
    CROSS_QK = "cross_qk"
    CROSS_PV = "cross_pv"
    PROJ_Q = "proj_q"
    PROJ_K = "proj_k"
    PROJ_V = "proj_v"
    PROJ_OUT = "proj_out"
    CROSS_PROJ_Q = "cross_proj_q"
    CROSS_PROJ_KV = "cross_proj_kv"
    CROSS_PROJ_OUT = "cross_proj_out"
    FFN_IN = "ffn_in"
    FFN_OUT = "ffn_out"
    FUSED_OUT = "fused_out"
    DENSE = "dense"

    def __str__(self) -> str:
        return self.value

    @property
    def info(self) -> "OpInfo":
        return OPS[self]

    @classmethod
    def parse(cls, name: "str | OpKind") -> "OpKind":
        """``name`` as an :class:`OpKind`; ``ValueError`` naming the known ones otherwise."""
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown op kind {name!r}; known: {[k.value for k in cls]}") from None


@dataclass(frozen=True)
class OpInfo:
    """What the other layers call an op kind, and what it is."""

    hw: str | None
    switch: str | None
    unit: str | None
    description: str


OPS: dict[OpKind, OpInfo] = {
    OpKind.SELF_QK: OpInfo("self_attn_qk", "self_qk", "attn1",
                           "q . k^T of self-attention (A = q, RoPE groups where the model has RoPE)"),
    OpKind.SELF_PV: OpInfo("self_attn_pv", "pv", "attn1", "P . V of self-attention (A = P)"),
    OpKind.CROSS_QK: OpInfo("cross_attn_qk", "cross_qk", "attn2",
                            "q . k^T of cross-attention to the text (A = q of video tokens)"),
    OpKind.CROSS_PV: OpInfo("cross_attn_pv", "pv", "attn2", "P . V of cross-attention (A = P)"),
    OpKind.PROJ_Q: OpInfo("proj_q", "proj", "attn1", "query projection (A = activations)"),
    OpKind.PROJ_K: OpInfo("proj_k", "proj", "attn1", "key projection (A = activations)"),
    OpKind.PROJ_V: OpInfo("proj_v", "proj", "attn1", "value projection (A = activations)"),
    OpKind.PROJ_OUT: OpInfo("proj_out", "proj", "attn1", "attention output projection (A = attention output)"),
    OpKind.CROSS_PROJ_Q: OpInfo("cross_proj_q", "proj", "attn2",
                                "cross-attention query projection (A = video activations)"),
    OpKind.CROSS_PROJ_KV: OpInfo("cross_proj_kv", None, "attn2",
                                 "cross-attention key/value projections of the text (A = text, never reused)"),
    OpKind.CROSS_PROJ_OUT: OpInfo("cross_proj_out", "proj", "attn2", "cross-attention output projection"),
    OpKind.FFN_IN: OpInfo("ffn_up", "ffn", "ffn", "FFN / MLP first linear (A = activations)"),
    OpKind.FFN_OUT: OpInfo("ffn_down", "ffn", "ffn", "FFN / MLP second linear (A = hidden activations)"),
    OpKind.FUSED_OUT: OpInfo("ffn_down", "ffn", None,
                             "HunyuanVideo single-stream proj_out(cat[attn, mlp]) (A = activations)"),
    OpKind.DENSE: OpInfo(None, None, None,
                         "every other linear / conv GEMM (text side, embeddings, output head); never reused"),
}

#: The op kinds of one Wan-style block (self-attention, cross-attention, FFN): the baselines' ledger kinds.
BLOCK_OPS: tuple[OpKind, ...] = tuple(k for k, i in OPS.items() if i.unit is not None)
#: The op kinds of a block GEMM in any supported family: :data:`BLOCK_OPS` plus HunyuanVideo's single-stream
#: ``fused_out`` (a block op outside the three units): the baselines' ledger kinds.
ALL_BLOCK_OPS: tuple[OpKind, ...] = BLOCK_OPS + (OpKind.FUSED_OUT,)
#: The same as names: the kinds a technique's op ledger counts (its report's per-op savings).
BLOCK_KINDS: tuple[str, ...] = tuple(k.value for k in ALL_BLOCK_OPS)
#: Block unit -> its op kinds, in :data:`BLOCK_OPS` order.
UNIT_OPS: dict[str, tuple[OpKind, ...]] = {
    u: tuple(k for k in BLOCK_OPS if OPS[k].unit == u) for u in ("attn1", "attn2", "ffn")
}
#: Simulator workload op kind -> its description (one per ``hw`` name; ``ffn_down`` from ``ffn_out``).
HW_OPS: dict[str, str] = {}
for _k, _i in OPS.items():
    if _i.hw is not None and _i.hw not in HW_OPS:
        HW_OPS[_i.hw] = _i.description
del _k, _i
#: Trace op name -> simulator workload op kind.
HW_KIND_OF: dict[str, str] = {k.value: i.hw for k, i in OPS.items() if i.hw is not None}
#: Trace op name -> the KaleidoConfig switch that controls it.
SWITCH_OF: dict[str, str] = {k.value: i.switch for k, i in OPS.items() if i.switch is not None}
#: Every KaleidoConfig switch, in the order configs list them.
SWITCHES: tuple[str, ...] = ("self_qk", "cross_qk", "proj", "ffn", "pv")
assert set(SWITCH_OF.values()) == set(SWITCHES)
