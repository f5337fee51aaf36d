"""The mode map: the one representation of reuse decisions (SPEC §3).

Every later component consumes it: the float and int8 GEMMs, the diffusers
integration's traces, and the accelerator simulator.

Layout
------
``ModeMap.modes`` is a ``torch.uint8`` tensor of shape ``(..., S, G)``:

* ``S = grid.seq_len`` rows in *sequence order* (the GEMM's rows: prefix non-grid
  tokens, then the ``T*H*W`` grid tokens in raster order, then suffix non-grid tokens);
* ``G = len(groups)`` channel groups in channel order;
* leading dims are free (typically ``(B, heads)``);
* values are :class:`Mode`: ``0`` COMPUTE, ``1`` PARTIAL, ``2`` FULL.  Zero means
  compute, so an all-zero map is the dense GEMM.  Non-grid rows are always 0.

For storage :meth:`ModeMap.pack` keeps 2 bits per entry (4 entries per byte).

:class:`ModeStats` is the additive summary of one or more mode maps of the same
op (per-group mode counts and the histogram of per-row mode strings), which is
what traces aggregate and the simulator's dispatcher model reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import torch

from .grid import TokenGrid
from .groups import ChannelGroups
from .opcounts import OpCounts

#: Row-pattern histograms are kept for ops with at most this many groups (3**8 bins).
MAX_PATTERN_GROUPS = 8


class Mode(IntEnum):
    """Execution mode of one (row, group) of a reuse GEMM."""

    COMPUTE = 0
    PARTIAL = 1
    FULL = 2


@dataclass
class ModeMap:
    """Per-(row, group) decisions of one reuse GEMM; see the module docstring for the layout."""

    modes: torch.Tensor
    grid: TokenGrid
    groups: ChannelGroups
    low_bits: int

    def __post_init__(self) -> None:
        m = self.modes
        if not isinstance(m, torch.Tensor) or m.dtype != torch.uint8:
            raise ValueError(f"ModeMap.modes must be a torch.uint8 tensor, got {type(m).__name__} {getattr(m, 'dtype', '')}")
        if m.dim() < 2:
            raise ValueError(f"ModeMap.modes must have shape (..., S, G), got {tuple(m.shape)}")
        if m.shape[-1] != len(self.groups):
            raise ValueError(f"ModeMap has {m.shape[-1]} group columns but {len(self.groups)} channel groups")
        self.grid.check_seq_len(m.shape[-2], "ModeMap")
        if m.numel() and int(m.max()) > int(Mode.FULL):
            raise ValueError(f"ModeMap.modes holds {int(m.max())}; valid modes are 0 (COMPUTE), 1 (PARTIAL), 2 (FULL)")
        if not 1 <= int(self.low_bits) <= 8:
            raise ValueError(f"low_bits must be in 1..8, got {self.low_bits}")

    # -- construction ---------------------------------------------------------------
    @classmethod
    def dense(cls, lead: tuple[int, ...], grid: TokenGrid, groups: ChannelGroups, low_bits: int) -> "ModeMap":
        """An all-COMPUTE map (the dense GEMM)."""
        return cls(torch.zeros(*lead, grid.seq_len, len(groups), dtype=torch.uint8), grid, groups, low_bits)

    # -- summaries ------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        """Row instances, leading dims included."""
        return int(self.modes.numel() // max(1, self.modes.shape[-1]))

    def counts(self) -> np.ndarray:
        """``(G, 3)`` int64: rows in each mode per group, over all leading dims."""
        flat = self.modes.reshape(-1, self.modes.shape[-1]).to(torch.int64)
        G = flat.shape[1]
        idx = flat + 3 * torch.arange(G, device=flat.device).view(1, G)
        return torch.bincount(idx.reshape(-1), minlength=3 * G).view(G, 3).cpu().numpy().astype(np.int64)

    def fractions(self) -> np.ndarray:
        """``(G, 3)`` float: fraction of rows in each mode per group."""
        c = self.counts()
        return c / max(1, c.sum(axis=1, keepdims=True).max())

    def row_codes(self) -> torch.Tensor:
        """``(..., S)`` int64: each row's mode string as ``sum_g mode[g] * 3**g``."""
        G = self.modes.shape[-1]
        w = torch.tensor([3**g for g in range(G)], dtype=torch.int64, device=self.modes.device)
        return (self.modes.to(torch.int64) * w).sum(-1)

    def stats(self) -> "ModeStats":
        codes = None
        if len(self.groups) <= MAX_PATTERN_GROUPS:
            codes = torch.bincount(self.row_codes().reshape(-1), minlength=3 ** len(self.groups)).cpu().numpy().astype(np.int64)
        return ModeStats(self.groups.sizes, self.groups.names, self.low_bits, self.counts(), codes)

    def op_counts(self, n_cols: int) -> OpCounts:
        """MAC counts of ``C = A B`` with ``B`` of ``n_cols`` columns under this map."""
        return self.stats().op_counts(n_cols)

    # -- storage --------------------------------------------------------------------
    def pack(self) -> torch.Tensor:
        """Modes packed 2 bits per entry, 4 per byte (flattened, zero-padded), uint8."""
        flat = self.modes.reshape(-1)
        pad = (-flat.numel()) % 4
        if pad:
            flat = torch.cat([flat, torch.zeros(pad, dtype=torch.uint8, device=flat.device)])
        q = flat.view(-1, 4)
        return (q[:, 0] | (q[:, 1] << 2) | (q[:, 2] << 4) | (q[:, 3] << 6)).contiguous()

    @staticmethod
    def unpack_modes(packed: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        """Inverse of :meth:`pack` for a map of ``shape``."""
        n = int(np.prod(shape)) if shape else 1
        if packed.dtype != torch.uint8 or packed.dim() != 1 or packed.numel() != (n + 3) // 4:
            raise ValueError(
                f"packed mode map has {packed.numel()} bytes ({packed.dtype}); a map of shape "
                f"{tuple(shape)} needs {(n + 3) // 4} uint8 bytes: the file is truncated or corrupt"
            )
        out = torch.stack([(packed >> s) & 3 for s in (0, 2, 4, 6)], dim=1).reshape(-1)[:n]
        if n and int(out.max()) > int(Mode.FULL):
            raise ValueError("packed mode map holds the invalid mode 3: the file is corrupt")
        return out.reshape(shape).contiguous()

    def meta(self) -> dict:
        """JSON-able description (everything but the modes themselves)."""
        return {
            "shape": list(self.modes.shape),
            "grid": self.grid.to_dict(),
            "groups": self.groups.to_dict(),
            "low_bits": int(self.low_bits),
        }

    @classmethod
    def from_packed(cls, packed: torch.Tensor, meta: dict) -> "ModeMap":
        try:
            shape = tuple(int(s) for s in meta["shape"])
            grid = TokenGrid.from_dict(meta["grid"])
            groups = ChannelGroups.from_dict(meta["groups"])
            low_bits = int(meta["low_bits"])
        except (KeyError, TypeError) as e:
            raise ValueError(f"mode map metadata is incomplete ({e}); need shape, grid, groups, low_bits") from None
        return cls(cls.unpack_modes(packed, shape), grid, groups, low_bits)


@dataclass
class ModeStats:
    """Additive summary of mode maps of one op.

    ``mode_counts[g, m]``: rows of group ``g`` in mode ``m``.  ``pattern_counts[c]``:
    rows whose mode string has code ``c = sum_g mode[g] * 3**g`` (``None`` when the
    op has more than :data:`MAX_PATTERN_GROUPS` groups).
    """

    group_sizes: tuple[int, ...]
    group_names: tuple[str, ...]
    low_bits: int
    mode_counts: np.ndarray
    pattern_counts: np.ndarray | None = field(default=None)

    def __post_init__(self) -> None:
        self.group_sizes = tuple(int(s) for s in self.group_sizes)
        self.group_names = tuple(self.group_names)
        self.mode_counts = np.asarray(self.mode_counts, dtype=np.int64)
        G = len(self.group_sizes)
        if self.mode_counts.shape != (G, 3):
            raise ValueError(f"ModeStats.mode_counts must be ({G}, 3), got {self.mode_counts.shape}")
        if (self.mode_counts < 0).any():
            raise ValueError("ModeStats.mode_counts has negative entries")
        rows = self.mode_counts.sum(axis=1)
        if G and (rows != rows[0]).any():
            raise ValueError(f"ModeStats: groups count different numbers of rows {rows.tolist()}")
        if self.pattern_counts is not None:
            self.pattern_counts = np.asarray(self.pattern_counts, dtype=np.int64)
            if self.pattern_counts.shape != (3**G,):
                raise ValueError(f"ModeStats.pattern_counts must have 3**{G} entries, got {self.pattern_counts.shape}")
            if G and int(self.pattern_counts.sum()) != int(rows[0]):
                raise ValueError("ModeStats.pattern_counts does not add up to the row count")

    @property
    def n_rows(self) -> int:
        return int(self.mode_counts[0].sum()) if len(self.group_sizes) else 0

    def fractions(self) -> np.ndarray:
        """``(G, 3)``: fraction of rows in COMPUTE, PARTIAL, FULL per group."""
        return self.mode_counts / max(1, self.n_rows)

    def op_counts(self, n_cols: int) -> OpCounts:
        if n_cols < 0:
            raise ValueError(f"n_cols must be >= 0, got {n_cols}")
        sz = self.group_sizes
        c = self.mode_counts
        return OpCounts(
            self.group_names,
            tuple(int(c[g, Mode.COMPUTE]) * sz[g] * n_cols for g in range(len(sz))),
            tuple(int(c[g, Mode.PARTIAL]) * sz[g] * n_cols for g in range(len(sz))),
            tuple(int(c[g, Mode.FULL]) * sz[g] * n_cols for g in range(len(sz))),
            self.low_bits,
        )

    def __add__(self, other: "ModeStats") -> "ModeStats":
        if not isinstance(other, ModeStats):
            return NotImplemented
        if (other.group_sizes, other.low_bits) != (self.group_sizes, self.low_bits):
            raise ValueError(
                f"cannot add ModeStats of groups {self.group_sizes}/low_bits {self.low_bits} "
                f"and {other.group_sizes}/{other.low_bits}"
            )
        pc = None
        if self.pattern_counts is not None and other.pattern_counts is not None:
            pc = self.pattern_counts + other.pattern_counts
        return ModeStats(self.group_sizes, self.group_names, self.low_bits, self.mode_counts + other.mode_counts, pc)

    def to_dict(self) -> dict:
        return {
            "group_sizes": list(self.group_sizes),
            "group_names": list(self.group_names),
            "low_bits": self.low_bits,
            "mode_counts": self.mode_counts.tolist(),
            "pattern_counts": None if self.pattern_counts is None else self.pattern_counts.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ModeStats":
        try:
            return cls(
                tuple(d["group_sizes"]), tuple(d["group_names"]), int(d["low_bits"]),
                np.asarray(d["mode_counts"]), None if d.get("pattern_counts") is None else np.asarray(d["pattern_counts"]),
            )
        except KeyError as e:
            raise ValueError(f"ModeStats dict is missing key {e.args[0]!r}") from None
