"""A chip of several Kaleido arrays sharing one DRAM, and how each GEMM is split across them.

Each of the ``arrays`` arrays is an :class:`~kaleido.hw.arch.config.ArrayConfig` (its PEs, its
own SRAM buffers, its own decision unit and dispatcher); all of them share one off-chip
memory of ``dram_gbps``.  :func:`split_gemm` partitions one GEMM record:

* **linear layers: by output-column tiles** (whole column folds of ``C`` columns, so no
  array gets a partial fold the single array would not have).  Every array streams the
  whole activation matrix ``A`` in its raster order and holds a slice of the weights, so
  the mode map, the dispatcher's windows and the anchor distances of each array are the
  single array's (the reuse model needs no change), and no reduction is needed (a K-split
  would need one).  ``A`` is fetched from DRAM once and multicast to the arrays
  (``multicast=False``: each array fetches its own copy).  Each array's decision unit
  judges every row it streams (the decision is repeated per array: conservative).
  Imbalance: ``F`` column folds on ``n`` arrays give ``ceil(F/n)`` folds to the busiest;
  arrays beyond ``F`` idle.
* **attention (q.k^T, P.V): by heads**, per layer call (``heads`` instances): each head is
  an independent GEMM pair with its own q, k, v and mode map, so no reduction; ``H`` heads
  on ``n <= H`` arrays take ``ceil(H/n)`` rounds.  With more arrays than heads each head
  gets ``s = n // H`` arrays and its **keys are split** (split-KV): q.k^T by key columns
  (no reduction; the softmax row statistics the chunks exchange, two values per row and
  chunk, are not charged, as softmax itself is not modelled) and P.V by the same key chunk,
  a K-split whose ``s' - 1`` partial outputs (int32, ``M x N``) are reduced on one array:
  ``(s'-1) M N`` int32 adds at ``C`` per cycle after the split GEMM, each partial written
  and read back through that array's output buffer.  ``s'`` is the split count in
  ``1..s`` with the fewest dense cycles including the reduction, so splitting never makes
  a head slower.  Keys are split only when P.V runs without reuse statistics (its mode map
  is over the keys; splitting it is not modelled): otherwise heads only.
  Imbalance: ``H mod n`` heads in the last round; ``n - s H`` arrays idle.

Shared DRAM: a GEMM's time on the chip is at least its total DRAM bytes over the chip's
bandwidth (``SimResult.time_s``: per GEMM ``max(compute, DRAM)``).  With one array the
split is the whole GEMM and every figure is the single array's, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .compute import dense_cycles
from .config import ArrayConfig
from .mapping import ceil_div
from ..inputs.workloads import ATTENTION_KINDS, Gemm

MAX_ARRAYS = 4096


@dataclass(frozen=True)
class ChipConfig:
    """``arrays`` copies of ``array`` (each with its own SRAM and dispatcher) and one shared DRAM.

    ``dram_gbps``: the chip's off-chip bandwidth, shared by all arrays (``None``: the
    array's ``buffers.dram_gbps``, so ``ChipConfig(1, cfg)`` is the single array).
    ``multicast``: a linear layer's activations are fetched once and sent to every array
    that uses them (the on-chip network's energy is not charged).  ``name``: a label
    (the preset's name).
    """

    arrays: int = 1
    array: ArrayConfig = field(default_factory=ArrayConfig)
    dram_gbps: float | None = None
    multicast: bool = True
    name: str = "custom"

    def __post_init__(self) -> None:
        if isinstance(self.arrays, bool) or not isinstance(self.arrays, int) or not 1 <= self.arrays <= MAX_ARRAYS:
            raise ValueError(f"ChipConfig.arrays={self.arrays!r} is outside 1..{MAX_ARRAYS}; give a whole number "
                             "of arrays (e.g. --arrays 19)")
        if not isinstance(self.array, ArrayConfig):
            raise ValueError(f"ChipConfig.array must be an ArrayConfig, got {type(self.array).__name__}")
        if self.dram_gbps is not None and not (0 < self.dram_gbps < 1e7):
            raise ValueError(f"ChipConfig.dram_gbps={self.dram_gbps!r} must be in (0, 1e7) GB/s, or None for the "
                             "array's own bandwidth")

    @property
    def bandwidth_gbps(self) -> float:
        """The shared DRAM bandwidth in GB/s."""
        return float(self.array.buffers.dram_gbps if self.dram_gbps is None else self.dram_gbps)

    @property
    def peak_ops_per_s(self) -> float:
        """Peak int8 throughput of all arrays (one MAC = 2 ops)."""
        return self.arrays * self.array.peak_ops_per_s

    def to_dict(self) -> dict:
        return {"name": self.name, "arrays": self.arrays, "dram_gbps": self.bandwidth_gbps,
                "multicast": self.multicast, "peak_tops_int8": self.peak_ops_per_s / 1e12,
                "array": self.array.to_dict()}


@dataclass(frozen=True)
class Part:
    """``arrays`` arrays each run ``rounds`` instances of the sub-GEMM ``M x K x N`` one after another."""

    M: int
    K: int
    N: int
    arrays: int
    rounds: int


@dataclass(frozen=True)
class GemmSplit:
    """How one unit of a GEMM record (``instances`` instances: a layer call's heads, or 1) runs on the chip.

    ``parts``: what each group of arrays runs; ``shared_dram_bytes``: bytes per instance
    that each part's own DRAM figure counts but the chip moves once per instance (the
    multicast activations, or a K-split's output, written once after the reduction): the
    unit moves ``instances * shared + sum(arrays * rounds * (part bytes - shared))``;
    ``reduction_psums``: int32 partial outputs reduced across arrays per unit;
    ``reduction_cycles``: cycles the reduction adds after the split GEMM (per unit, on
    the critical path); ``kind``: ``"columns"``, ``"heads"``, ``"heads+key-columns"``
    or ``"heads+k-split"``.
    """

    kind: str
    instances: int
    parts: tuple[Part, ...]
    shared_dram_bytes: float = 0.0
    reduction_psums: float = 0.0
    reduction_cycles: float = 0.0


def _tiles(total: int, unit: int, n: int) -> list[tuple[int, int]]:
    """``total`` elements cut into tiles of ``unit`` (the last one partial) dealt to at most ``n`` arrays.

    Returns ``[(elements, arrays), ...]``: how many arrays get how many elements, the busiest
    ``ceil(F/n)`` tiles (``F = ceil(total/unit)``), the partial tile on an array with the fewest.
    """
    F = int(ceil_div(total, unit))
    used = min(n, F)
    q, r = divmod(F, used)
    rem = total - (F - 1) * unit  # elements of the last (possibly partial) tile
    out: dict[int, int] = {}
    # r arrays with q+1 tiles, used-r (>= 1) arrays with q tiles; the last of the latter holds
    # the partial tile
    groups = [(q + 1, r), (q, used - r)]
    groups = [(t, a) for t, a in groups if a > 0 and t > 0]
    t_last, a_last = groups[-1]
    for t, a in groups[:-1]:
        out[t * unit] = out.get(t * unit, 0) + a
    if a_last > 1:
        out[t_last * unit] = out.get(t_last * unit, 0) + a_last - 1
    last = (t_last - 1) * unit + rem
    out[last] = out.get(last, 0) + 1
    return sorted(out.items(), reverse=True)


def array_of(cfg: ArrayConfig | None, chip: "ChipConfig | None", who: str) -> ArrayConfig:
    """The array a run uses: ``chip.array`` on a chip (``cfg`` then ``None`` or the same), else ``cfg`` or the
    default :class:`~kaleido.hw.arch.config.ArrayConfig`; a one-line ``ValueError`` naming ``who`` otherwise."""
    if chip is not None:
        if not isinstance(chip, ChipConfig):
            raise ValueError(f"chip must be a kaleido.hw.arch.chip.ChipConfig, got {type(chip).__name__}")
        if cfg is not None and cfg != chip.array:
            raise ValueError(f"{who}: cfg and chip.array differ; pass the array only inside the ChipConfig")
        return chip.array
    return cfg or ArrayConfig()


def split_gemm(g: Gemm, heads: int, chip: ChipConfig, key_split: bool = True) -> GemmSplit:
    """The partition of ``g`` on ``chip`` (see the module docstring).

    ``heads``: attention heads per layer call (the model's); ``key_split``: whether an
    attention head may be split by keys (its P.V runs without reuse statistics).
    """
    n, cfg = chip.arrays, chip.array
    if g.op not in ATTENTION_KINDS:
        parts = tuple(Part(g.M, g.K, w, a, 1) for w, a in _tiles(g.N, cfg.cols, n))
        return GemmSplit("columns", 1, parts, float(g.M * g.K) if chip.multicast else 0.0)
    H = int(heads)
    if H < 1:
        raise ValueError(f"split_gemm: heads={heads!r} must be a positive int (the model's attention heads)")
    if n <= H or not key_split:
        used = min(n, H)
        q, r = divmod(H, used)
        parts = tuple(Part(g.M, g.K, g.N, a, t) for t, a in ((q + 1, r), (q, used - r)) if a > 0 and t > 0)
        return GemmSplit("heads", H, parts)
    s = n // H
    if g.op.endswith("_qk"):
        parts = tuple(Part(g.M, g.K, w, a * H, 1) for w, a in _tiles(g.N, cfg.cols, s))
        return GemmSplit("heads+key-columns", H, parts, float(g.M * g.K) if chip.multicast else 0.0)
    # P.V: a K-split over the key chunks; pick the split count with the fewest dense cycles
    best = None
    for s2 in range(1, min(s, int(ceil_div(g.K, cfg.rows))) + 1):
        tiles = _tiles(g.K, cfg.rows, s2)
        red_psums = float((s2 - 1) * g.M * g.N)
        red_cyc = red_psums / cfg.cols
        cyc = max(dense_cycles(g.M, k, g.N, cfg) for k, _ in tiles) + red_cyc
        if best is None or cyc < best[0]:
            best = (cyc, s2, tiles, red_psums, red_cyc)
    _, s2, tiles, red_psums, red_cyc = best
    parts = tuple(Part(g.M, k, g.N, a * H, 1) for k, a in tiles)
    if s2 == 1:
        return GemmSplit("heads", H, parts)
    return GemmSplit("heads+k-split", H, parts, float(g.M * g.N), red_psums * H, red_cyc)
