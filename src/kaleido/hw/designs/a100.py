"""The NVIDIA A100 roofline (:mod:`kaleido.hw.arch.gpu`, docs/hardware.md section 6).

Counts: the seconds of every GEMM at its roofline (``max(flops / (peak x efficiency), HBM bytes /
bandwidth)``, fused attention).  Its energy table is its board power (400 W, an upper bound), priced
over those seconds.  Not on the simulated array: no cycles, no action counts.  Statistics: none.
"""

from __future__ import annotations

from types import MappingProxyType

from .protocol import DesignCounts


class A100:
    name = "a100"
    label = "NVIDIA A100 (roofline)"
    method = None
    on_array = False
    assumptions = ("linear layers at the attention efficiency (no separate source)",
                   "attention fused: scores never reach HBM",
                   "board power for the whole run (an upper bound on its draw)")
    inputs = MappingProxyType({
        "peaks: bf16 312 TFLOPS, int8 624 TOPS, HBM2e 2,039 GB/s, 400 W": "paper: NVIDIA A100 (SXM4 80 GB) datasheet",
        "attention efficiency 0.73 of peak": "paper: FlashAttention-2 (arXiv 2307.08691), top of its 50-73% on A100",
        "linear-layer efficiency 0.73 of peak": "ASSUMED (the attention figure)",
    })

    def count(self, workload, stats=None, cfg=None, *, a100=None) -> DesignCounts:
        """``stats`` and ``cfg`` are ignored; ``a100``: an :class:`~kaleido.hw.arch.gpu.A100Config` (default: bf16)."""
        from ..arch.gpu import A100Config, a100_gemm_seconds

        a = a100 or A100Config()
        t = sum(a100_gemm_seconds(g, a) for g in workload.gemms)
        macs = sum(float(g.M) * g.K * g.N * g.count for g in workload.gemms)
        return DesignCounts(f"NVIDIA A100 (roofline, {a.precision})", workload.name, 0.0, 0.0, t, macs, macs,
                            source=f"roofline, {a.precision}, efficiency {a.attention_efficiency}", detail=a)

    def price(self, counts: DesignCounts, energy=None) -> dict[str, float]:
        """The board power (``counts.detail``, the :class:`~kaleido.hw.arch.gpu.A100Config` it was counted with) over
        the run; ``energy`` (the array's table) does not apply."""
        return {"board": counts.detail.power_w * counts.time_s * 1e12}

    def __repr__(self) -> str:
        return f"<design {self.name!r}: {self.label}>"
