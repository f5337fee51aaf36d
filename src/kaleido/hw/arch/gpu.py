"""NVIDIA A100 (SXM4 80 GB) roofline model from its datasheet peaks.

Per GEMM: ``time = max(flops / (peak * efficiency), bytes / bandwidth)``;
energy = board power x time.  Peaks (NVIDIA A100 datasheet): bf16/fp16 dense
312 TFLOPS, int8 624 TOPS, HBM2e 2,039 GB/s, 400 W (SXM4).  Attention efficiency:
FlashAttention-2 reaches 50-73% of peak on A100 (Dao, arXiv 2307.08691); we use the
top of that range (0.73, favouring the A100) for attention and, as a stated
assumption without a separate source, the same for the linear layers.  Energy uses
the 400 W board limit for the whole run (an upper bound on the A100's draw).
Attention is taken as fused (FlashAttention): q/k/v/o move through HBM once and the
score matrix never does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..inputs.workloads import Gemm

PEAK = {"bf16": 312e12, "int8": 624e12}
BYTES = {"bf16": 2, "int8": 1}


@dataclass(frozen=True)
class A100Config:
    precision: str = "bf16"
    attention_efficiency: float = 0.73
    linear_efficiency: float = 0.73
    hbm_gbps: float = 2039.0
    power_w: float = 400.0

    def __post_init__(self) -> None:
        if self.precision not in PEAK:
            raise ValueError(f"A100 precision {self.precision!r}: use one of {sorted(PEAK)}")
        for n in ("attention_efficiency", "linear_efficiency"):
            v = getattr(self, n)
            if not 0 < v <= 1:
                raise ValueError(f"A100Config.{n}={v} must be in (0, 1]")

    @property
    def peak_ops(self) -> float:
        return PEAK[self.precision]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["peak_ops_per_s"] = self.peak_ops
        return d


def gemm_bytes(g: Gemm, bpe: int) -> float:
    """HBM bytes of one instance (fused attention: scores never leave the chip)."""
    if g.op in ("self_attn_qk", "cross_attn_qk"):
        return float((g.M * g.K + g.N * g.K) * bpe)  # q and k
    if g.op in ("self_attn_pv", "cross_attn_pv"):
        return float((g.K * g.N + g.M * g.N) * bpe)  # v and the output
    return float((g.M * g.K + g.K * g.N + g.M * g.N) * bpe)


def a100_gemm_seconds(g: Gemm, cfg: A100Config) -> float:
    """Seconds of all ``g.count`` instances on the A100 (the roofline: what the A100 design counts)."""
    eff = cfg.attention_efficiency if "attn_q" in g.op or "attn_p" in g.op else cfg.linear_efficiency
    t_compute = 2.0 * g.M * g.K * g.N / (cfg.peak_ops * eff)
    t_mem = gemm_bytes(g, BYTES[cfg.precision]) / (cfg.hbm_gbps * 1e9)
    return max(t_compute, t_mem) * g.count


def a100_gemm(g: Gemm, cfg: A100Config) -> tuple[float, float]:
    """(seconds, joules) of all ``g.count`` instances on the A100: its board power over those seconds."""
    t = a100_gemm_seconds(g, cfg)
    return t, t * cfg.power_w
