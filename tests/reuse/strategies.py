"""Hypothesis strategies and small builders shared by the reuse tests."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from kaleido.reuse import ChannelGroups, ReuseConfig, TokenGrid


@st.composite
def grids(draw, max_side: int = 4):
    return TokenGrid(
        draw(st.integers(1, max_side)),
        draw(st.integers(1, max_side)),
        draw(st.integers(1, max_side)),
        prefix=draw(st.integers(0, 2)),
        suffix=draw(st.integers(0, 2)),
    )


@st.composite
def channel_groups(draw, max_groups: int = 3, max_size: int = 5):
    n = draw(st.integers(1, max_groups))
    sizes = tuple(draw(st.integers(1, max_size)) for _ in range(n))
    axes = tuple(draw(st.sampled_from("thw")) for _ in range(n))
    return ChannelGroups(sizes, axes, tuple(f"g{i}" for i in range(n)))


@st.composite
def configs(draw, metric: str | None = None):
    low_bits = draw(st.integers(1, 7))
    metric = metric or draw(st.sampled_from(["linf", "mean_abs"]))
    top = 2 ** (low_bits - 1) if metric == "linf" else 12
    # quarter steps: exact in binary, so mean|d| < theta has no rounding ambiguity
    q2 = draw(st.integers(0, 4 * top))
    q1 = draw(st.integers(0, q2))
    return ReuseConfig(q1 / 4, q2 / 4, low_bits=low_bits, metric=metric)


def correlated_rows(lead: tuple[int, ...], S: int, K: int, seed: int, step: float = 2.0, amp: float = 60.0) -> torch.Tensor:
    """Float rows that drift slowly along the sequence (so every mode occurs)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(*lead, 1, K, generator=g) * amp
    walk = torch.randn(*lead, S, K, generator=g).mul(step).cumsum(-2)
    jumps = (torch.rand(*lead, S, 1, generator=g) < 0.15).float() * torch.randn(*lead, S, K, generator=g) * 30
    return base + walk + jumps


def correlated_int8(lead, S, K, seed, step=2.0) -> torch.Tensor:
    return correlated_rows(lead, S, K, seed, step).round().clamp(-127, 127).to(torch.int8)
