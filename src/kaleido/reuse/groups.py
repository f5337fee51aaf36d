"""Channel groups of an operand and the reuse axis of each (SPEC §2).

For RoPE'd q/k the groups are the model's RoPE axis blocks, contiguous
``[t | h | w]`` per head.  Default reuse axes: the t-group reuses along ``w``
(left neighbour in the same frame), the h- and w-groups along ``t`` (same place,
previous frame).  For tensors without RoPE the groups are contiguous chunks of a
configured size with calibrated (or configured) axes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .grid import Axis

#: Default reuse axis of each RoPE group: t-channels along w, h/w-channels along t.
ROPE_DEFAULT_AXES: dict[str, Axis] = {"t": Axis.W, "h": Axis.T, "w": Axis.T}


@dataclass(frozen=True)
class ChannelGroups:
    """A partition of ``dim`` channels into contiguous groups, each with a reuse axis.

    ``sizes[g]`` channels starting at ``offsets[g]`` form group ``g``, named
    ``names[g]``, reusing along ``axes[g]``.
    """

    sizes: tuple[int, ...]
    axes: tuple[Axis, ...]
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        sizes = tuple(int(s) for s in self.sizes)
        axes = tuple(Axis.parse(a) for a in self.axes)
        names = tuple(str(n) for n in self.names)
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "names", names)
        if not sizes:
            raise ValueError("ChannelGroups needs at least one group")
        if any(s < 1 for s in sizes):
            raise ValueError(f"every channel group needs >= 1 channel, got sizes {sizes}")
        if len(axes) != len(sizes) or len(names) != len(sizes):
            raise ValueError(
                f"ChannelGroups: {len(sizes)} sizes but {len(axes)} axes and {len(names)} names"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"ChannelGroups: group names must be unique, got {names}")

    # -- constructors ---------------------------------------------------------------
    @classmethod
    def from_rope(
        cls,
        t: int,
        h: int,
        w: int,
        axes: Sequence[Axis | str] | None = None,
    ) -> "ChannelGroups":
        """Groups from RoPE axis sizes ``(t, h, w)`` (contiguous ``[t | h | w]`` per head)."""
        if axes is None:
            axes = (ROPE_DEFAULT_AXES["t"], ROPE_DEFAULT_AXES["h"], ROPE_DEFAULT_AXES["w"])
        sizes, names, ax = [], [], []
        for name, size, a in zip(("t", "h", "w"), (t, h, w), axes):
            if size < 0:
                raise ValueError(f"RoPE axis size {name}={size} is negative")
            if size == 0:  # an axis without RoPE channels has no group
                continue
            sizes.append(size)
            names.append(name)
            ax.append(a)
        return cls(tuple(sizes), tuple(ax), tuple(names))

    @classmethod
    def from_chunks(
        cls,
        dim: int,
        chunk: int,
        axes: Axis | str | Sequence[Axis | str] = Axis.T,
    ) -> "ChannelGroups":
        """Contiguous chunks of ``chunk`` channels (the last one may be smaller).

        ``axes`` is one axis for every chunk or one per chunk (e.g. from calibration).
        """
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if chunk < 1:
            raise ValueError(f"chunk size must be >= 1, got {chunk}")
        sizes = [chunk] * (dim // chunk) + ([dim % chunk] if dim % chunk else [])
        if isinstance(axes, (Axis, str)):
            axes = [axes] * len(sizes)
        axes = list(axes)
        if len(axes) != len(sizes):
            raise ValueError(f"{len(sizes)} chunks of {chunk} in {dim} channels but {len(axes)} axes given")
        return cls(tuple(sizes), tuple(Axis.parse(a) for a in axes), tuple(f"c{i}" for i in range(len(sizes))))

    # -- properties -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def dim(self) -> int:
        """Total channels, ``sum(sizes)``."""
        return sum(self.sizes)

    @property
    def offsets(self) -> tuple[int, ...]:
        out, o = [], 0
        for s in self.sizes:
            out.append(o)
            o += s
        return tuple(out)

    @property
    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(o, o + s) for o, s in zip(self.offsets, self.sizes))

    def check_dim(self, dim: int, what: str = "operand") -> None:
        """Raise ``ValueError`` unless the groups cover exactly ``dim`` channels."""
        if dim != self.dim:
            raise ValueError(
                f"channel groups {dict(zip(self.names, self.sizes))} sum to {self.dim} "
                f"channels but the {what} has {dim}; groups must cover the head dim exactly"
            )

    def with_axes(self, axes: Sequence[Axis | str]) -> "ChannelGroups":
        """The same partition with other reuse axes (e.g. chosen by calibration)."""
        return ChannelGroups(self.sizes, tuple(axes), self.names)

    def to_dict(self) -> dict:
        return {"sizes": list(self.sizes), "axes": [a.value for a in self.axes], "names": list(self.names)}

    @classmethod
    def from_dict(cls, d: dict) -> "ChannelGroups":
        try:
            return cls(tuple(d["sizes"]), tuple(d["axes"]), tuple(d["names"]))
        except KeyError as e:
            raise ValueError(f"ChannelGroups dict is missing key {e.args[0]!r}: need sizes, axes, names") from None
