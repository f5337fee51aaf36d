"""Accelerator configuration: the PE array and its buffers (SPEC §5).

All sizes are validated on construction; a bad value raises ``ValueError`` naming
the value, the allowed range and the fix.  Defaults are the paper's setting where it
states one (128 x 128 int8 PEs, 16 nm) and our stated assumptions elsewhere
(1 GHz clock, buffer sizes, DRAM bandwidth; see ``docs/hardware.md``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

DATAFLOWS = ("os", "ws", "is")
TIMING_MODES = ("default", "scalesim_compat")


def parse_array(spec: str) -> tuple[int, int]:
    """``"128x128"`` -> ``(128, 128)``; raises ``ValueError`` on anything else."""
    try:
        r, c = str(spec).lower().split("x")
        return int(r), int(c)
    except ValueError:
        raise ValueError(f"array size {spec!r} is not of the form RxC (e.g. 128x128)") from None


@dataclass(frozen=True)
class BufferConfig:
    """On-chip SRAM buffers (one per operand) and the off-chip memory.

    ``*_kib``: capacity of each buffer in KiB; with ``double_buffered`` half of
    each holds the tile being used and half the tile being fetched.
    ``dram_gbps``: off-chip bandwidth in GB/s (1e9 bytes/s); ``dram_pj_per_bit`` is
    taken from the energy table, not from here.

    Defaults: SCALE-Sim v2's TPU-v1 preset (``configs/google.cfg``: 256x256 PEs,
    6144/6144/2048 KB) scaled by the PE count to a 128x128 array (1/4), and one HBM2
    stack (JESD235A: 1024 bits at 2 Gb/s per pin = 256 GB/s).
    """

    ifmap_kib: int = 1536
    filter_kib: int = 1536
    ofmap_kib: int = 512
    dram_gbps: float = 256.0
    double_buffered: bool = True

    def __post_init__(self) -> None:
        for name in ("ifmap_kib", "filter_kib", "ofmap_kib"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 1 <= v <= 1 << 20:
                raise ValueError(f"BufferConfig.{name}={v!r} is outside 1..{1 << 20} KiB; give a buffer size in KiB")
        if not (self.dram_gbps > 0 and self.dram_gbps < 1e6):
            raise ValueError(f"BufferConfig.dram_gbps={self.dram_gbps!r} must be in (0, 1e6) GB/s")

    def usable_bytes(self, name: str) -> int:
        """Bytes of buffer ``name`` ('ifmap', 'filter', 'ofmap') one tile may occupy."""
        b = getattr(self, f"{name}_kib") * 1024
        return b // 2 if self.double_buffered else b

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ArrayConfig:
    """An ``rows x cols`` array of int8 PEs.

    ``dataflow``: ``"os"`` (output stationary: rows <- GEMM M, cols <- N, K streams)
    or ``"ws"`` (weight stationary: rows <- K, cols <- N, M streams) or ``"is"``
    (input stationary: rows <- K, cols <- M, N streams; SCALE-Sim v3's third flow).
    ``timing``: ``"scalesim_compat"`` reproduces SCALE-Sim v2's stall-free counts
    (folds serialised, WS preload exposed); ``"default"`` overlaps weight preload and
    output drain with the previous fold (double-buffered PE registers).
    ``clock_ghz``: assumed 1.0 (the paper does not state its clock to us).
    ``low_bits``: width of PARTIAL differences the PE's split multiplier accepts;
    the packed mode (two PARTIAL operands in one PE-cycle) needs ``2*low_bits <= 8``.
    ``dispatch_window_rows``: rows the dispatcher may reorder at once (``None``:
    as many as half the ifmap buffer holds for the GEMM's K, at least ``rows``).
    """

    rows: int = 128
    cols: int = 128
    clock_ghz: float = 1.0
    dataflow: str = "ws"
    timing: str = "default"
    buffers: BufferConfig = field(default_factory=BufferConfig)
    low_bits: int = 4
    dispatch_window_rows: int | None = None

    def __post_init__(self) -> None:
        for name in ("rows", "cols"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 1 <= v <= 4096:
                raise ValueError(f"ArrayConfig.{name}={v!r} is outside 1..4096 PEs; use e.g. --array 128x128")
        if not (0 < self.clock_ghz <= 10):
            raise ValueError(f"ArrayConfig.clock_ghz={self.clock_ghz!r} is outside (0, 10] GHz")
        if self.dataflow not in DATAFLOWS:
            raise ValueError(f"ArrayConfig.dataflow={self.dataflow!r} is not a dataflow; use one of {DATAFLOWS}")
        if self.timing not in TIMING_MODES:
            raise ValueError(f"ArrayConfig.timing={self.timing!r}: use one of {TIMING_MODES}")
        if not isinstance(self.low_bits, int) or not 1 <= self.low_bits <= 7:
            raise ValueError(f"ArrayConfig.low_bits={self.low_bits!r} is outside 1..7")
        if self.dispatch_window_rows is not None and (
            not isinstance(self.dispatch_window_rows, int) or self.dispatch_window_rows < 1
        ):
            raise ValueError(f"ArrayConfig.dispatch_window_rows={self.dispatch_window_rows!r} must be a positive int or None")
        # the array must be able to hold at least one tile of one row/column of operands
        min_bytes = max(self.rows, self.cols)
        for name in ("ifmap", "filter"):
            if self.buffers.usable_bytes(name) < min_bytes:
                raise ValueError(
                    f"{name} buffer ({getattr(self.buffers, name + '_kib')} KiB) cannot hold one {min_bytes}-byte "
                    f"edge of a {self.rows}x{self.cols} array; enlarge it"
                )

    @property
    def n_pes(self) -> int:
        return self.rows * self.cols

    @property
    def packed_partial(self) -> bool:
        """Whether two PARTIAL operands fit one 8-bit lane (``2*low_bits <= 8``)."""
        return 2 * self.low_bits <= 8

    @property
    def peak_ops_per_s(self) -> float:
        """Peak int8 throughput in ops/s (one MAC = 2 ops)."""
        return 2.0 * self.n_pes * self.clock_ghz * 1e9

    def with_(self, **kw) -> "ArrayConfig":
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d.update(kw)
        return ArrayConfig(**d)

    def to_dict(self) -> dict:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "buffers"}
        d["buffers"] = self.buffers.to_dict()
        return d
