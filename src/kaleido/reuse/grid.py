"""The token grid a vDiT layer sees, and the reference token of each grid token.

A layer sees ``N = T*H*W`` video tokens after patchify, in raster order: t-major,
then h, then w (token index ``t*H*W + h*W + w``).  Non-grid tokens (text tokens
that joint-attention models concatenate to the sequence) sit before the grid
(``prefix``, CogVideoX's ``[text; video]``) or after it (``suffix``,
HunyuanVideo's ``[video; text]``) and never take part in reuse: they always
compute.  See SPEC §2.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch


class Axis(str, Enum):
    """A reuse axis of the token grid."""

    T = "t"
    H = "h"
    W = "w"

    @classmethod
    def parse(cls, value: "Axis | str") -> "Axis":
        if isinstance(value, Axis):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(
                f"unknown reuse axis {value!r}: use one of 't', 'h', 'w'"
            ) from None

    @property
    def dim(self) -> int:
        """Position of this axis in the ``(T, H, W)`` grid shape."""
        return {"t": 0, "h": 1, "w": 2}[self.value]


@dataclass(frozen=True)
class TokenGrid:
    """A ``T x H x W`` grid of video tokens plus ``prefix``/``suffix`` non-grid tokens.

    The sequence layout is ``[prefix non-grid | T*H*W grid tokens (raster) | suffix non-grid]``.
    """

    T: int
    H: int
    W: int
    prefix: int = 0
    suffix: int = 0

    def __post_init__(self) -> None:
        for name in ("T", "H", "W"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"TokenGrid.{name} must be a positive int, got {v!r}")
        for name in ("prefix", "suffix"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"TokenGrid.{name} must be a non-negative int, got {v!r}")

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.T, self.H, self.W)

    @property
    def n_grid(self) -> int:
        """Number of video tokens, ``T*H*W``."""
        return self.T * self.H * self.W

    @property
    def seq_len(self) -> int:
        """Total sequence length, non-grid tokens included."""
        return self.prefix + self.n_grid + self.suffix

    @property
    def grid_slice(self) -> slice:
        """Slice of the sequence that holds the grid tokens."""
        return slice(self.prefix, self.prefix + self.n_grid)

    def axis_len(self, axis: Axis | str) -> int:
        return self.shape[Axis.parse(axis).dim]

    def check_seq_len(self, seq_len: int, what: str = "sequence") -> None:
        """Raise ``ValueError`` unless ``seq_len`` equals this grid's sequence length."""
        if seq_len != self.seq_len:
            raise ValueError(
                f"{what} has {seq_len} tokens but the grid {self.T}x{self.H}x{self.W} "
                f"with prefix={self.prefix}, suffix={self.suffix} has {self.seq_len}; "
                "pass the grid the tokens were patchified on"
            )

    def ref_index(self, axis: Axis | str) -> torch.Tensor:
        """Reference of each grid token along ``axis``, as grid indices (``-1``: none).

        Returns a ``(n_grid,)`` int64 tensor: ``ref[i]`` is the previous token along
        ``axis`` (``(t-1,h,w)``, ``(t,h-1,w)`` or ``(t,h,w-1)``), or ``-1`` for a token
        whose coordinate on ``axis`` is 0.
        """
        axis = Axis.parse(axis)
        idx = torch.arange(self.n_grid).view(self.shape)
        ref = torch.full(self.shape, -1, dtype=torch.int64)
        if axis is Axis.T:
            ref[1:] = idx[:-1]
        elif axis is Axis.H:
            ref[:, 1:] = idx[:, :-1]
        else:
            ref[:, :, 1:] = idx[:, :, :-1]
        return ref.reshape(-1)

    def to_lines(self, x: torch.Tensor, axis: Axis | str) -> torch.Tensor:
        """View grid rows as lines along ``axis``.

        ``x`` has shape ``(..., n_grid, C)`` (grid tokens only, raster order).
        Returns ``(L, ..., n_lines, C)`` where ``L = axis_len(axis)``: position
        ``p`` of every line at once, so a decision can loop over ``p`` only.
        """
        axis = Axis.parse(axis)
        lead = x.shape[:-2]
        c = x.shape[-1]
        if x.shape[-2] != self.n_grid:
            raise ValueError(f"expected {self.n_grid} grid rows, got {x.shape[-2]}")
        g = x.reshape(*lead, self.T, self.H, self.W, c)
        nl = len(lead)
        g = g.movedim(nl + axis.dim, 0)  # (L, *lead, a, b, C)
        L = g.shape[0]
        return g.reshape(L, *lead, self.n_grid // L, c)

    def from_lines(self, lines: torch.Tensor, axis: Axis | str) -> torch.Tensor:
        """Inverse of :meth:`to_lines`: ``(L, ..., n_lines, C)`` -> ``(..., n_grid, C)``."""
        axis = Axis.parse(axis)
        L = lines.shape[0]
        lead = lines.shape[1:-2]
        c = lines.shape[-1]
        others = [s for d, s in enumerate(self.shape) if d != axis.dim]
        g = lines.reshape(L, *lead, *others, c)
        g = g.movedim(0, len(lead) + axis.dim)
        return g.reshape(*lead, self.n_grid, c)

    def to_dict(self) -> dict:
        return {"T": self.T, "H": self.H, "W": self.W, "prefix": self.prefix, "suffix": self.suffix}

    @classmethod
    def from_dict(cls, d: dict) -> "TokenGrid":
        try:
            return cls(int(d["T"]), int(d["H"]), int(d["W"]), int(d.get("prefix", 0)), int(d.get("suffix", 0)))
        except KeyError as e:
            raise ValueError(f"TokenGrid dict is missing key {e.args[0]!r}: need T, H, W") from None
