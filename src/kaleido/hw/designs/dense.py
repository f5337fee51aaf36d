"""The dense systolic array: the same array as Kaleido, every op dense (docs/hardware.md section 1).

Counted here from the architecture models alone: per GEMM SCALE-Sim-compatible folds, fill and drain
(:func:`kaleido.hw.arch.compute.dense_cycles`), SRAM and DRAM traffic (:mod:`kaleido.hw.arch.memory`), on one
array or a chip of several (each GEMM split by :func:`kaleido.hw.arch.chip.split_gemm`, attention by heads and,
with more arrays than heads, by keys).  Time per GEMM is ``max(compute, DRAM)``, summed.  Statistics: none.
Kaleido's design counts the same reference beside its own figures (:mod:`.kaleido`); a test holds the two equal.
"""

from __future__ import annotations

from types import MappingProxyType

from ..arch.chip import ChipConfig, array_of, split_gemm
from ..arch.compute import dense_cycles
from ..arch.config import ArrayConfig
from ..arch.energy import ActionCounts
from ..arch.memory import dram_bytes, sram_bytes
from ..inputs.workloads import ATTENTION_KINDS, Gemm
from .protocol import ArrayDesign, DesignCounts


def _one(g: Gemm, M: int, K: int, N: int, cfg: ArrayConfig) -> tuple[float, ActionCounts, float, float]:
    """``(cycles, actions, DRAM bytes, MACs)`` of one dense ``M x K x N`` instance of ``g`` (or of a part of it)."""
    part = g if (M, K, N) == (g.M, g.K, g.N) else Gemm(g.op, M, K, N, g.count, g.grid_rows, g.layer_kind)
    cyc, macs, dram = dense_cycles(M, K, N, cfg), float(M) * K * N, dram_bytes(part, cfg)
    return cyc, ActionCounts(cfg.low_bits, mac8=macs, pe_reg_bytes=6 * macs, sram_bytes=sram_bytes(M, K, N, cfg),
                             dram_bytes=dram, cycles=cyc), dram, macs


def _on_chip(g: Gemm, heads: int, chip: ChipConfig) -> tuple[float, ActionCounts, float, float]:
    """One instance of ``g`` on ``chip``: the busiest part's rounds plus the reduction; every array's actions;
    the parts' DRAM bytes less what the chip moves once."""
    split = split_gemm(g, heads, chip, g.op in ATTENTION_KINDS)
    inst = split.instances
    res = [(p, _one(g, p.M, p.K, p.N, chip.array)) for p in split.parts]
    cyc = max(r[0] * (p.rounds / inst) for p, r in res) + split.reduction_cycles / inst
    w = [p.arrays * p.rounds / inst for p, _ in res]
    acts = res[0][1][1].scaled(w[0])
    for wi, (_, r) in zip(w[1:], res[1:]):
        acts = acts + r[1].scaled(wi)
    acts.reduction_psums += split.reduction_psums / inst
    shared = split.shared_dram_bytes
    dram = shared + sum(wi * (r[2] - shared) for wi, (_, r) in zip(w, res))
    acts.cycles, acts.dram_bytes = cyc, dram
    return cyc, acts, dram, sum(wi * r[3] for wi, (_, r) in zip(w, res))


class DenseArray(ArrayDesign):
    name = "dense"
    label = "dense int8 array"
    assumptions = ("every op runs dense on the array; non-GEMM work not modelled",)
    inputs = MappingProxyType({"fold / fill / drain cycle model and SRAM traffic":
                               "MODELLED: SCALE-Sim v2 / v3.0.0 compatible (docs/hardware.md section 1)"})

    def count(self, workload, stats=None, cfg=None, *, chip=None) -> DesignCounts:
        """``stats`` is ignored (a dense array needs none); ``chip``: a :class:`~kaleido.hw.arch.chip.ChipConfig`
        (``cfg`` then ``None`` or ``chip.array``)."""
        cfg = array_of(cfg, chip, "dense")
        arr = cfg.to_dict()
        clock = arr["clock_ghz"] * 1e9
        bw = (arr["buffers"]["dram_gbps"] if chip is None else chip.to_dict()["dram_gbps"]) * 1e9
        cycles = time_s = macs = 0.0
        acts = ActionCounts(cfg.low_bits)
        for g in workload.gemms:
            k = g.count // workload.steps * workload.steps
            one = (_one(g, g.M, g.K, g.N, cfg) if chip is None else _on_chip(g, workload.model.heads, chip))
            c = one[0] * k
            cycles += c
            time_s += max(c / clock / 1.0, one[2] * k / bw)
            macs += one[3] * k
            acts = acts + one[1].scaled(1.0).scaled(k)
        kib = {n: arr["buffers"][f"{n}_kib"] for n in ("ifmap", "filter", "ofmap")}
        return DesignCounts(f"dense {arr['rows']}x{arr['cols']} int8 array", workload.name, cycles, cycles, time_s, macs,
                            macs, (acts,), kib, arr["clock_ghz"], 1 if chip is None else int(chip.arrays))
