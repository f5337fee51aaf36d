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
    low_bits = draw(st.one_of(st.integers(1, 7), st.integers(3, 6)))
    metric = metric or draw(st.sampled_from(["linf", "mean_abs"]))
    top = 2 ** (low_bits - 1) if metric == "linf" else 12
    # quarter steps: exact in binary, so mean|d| < theta has no rounding ambiguity
    q2 = draw(st.integers(0, 4 * top))
    q1 = draw(st.integers(0, q2))
    return ReuseConfig(q1 / 4, q2 / 4, low_bits=low_bits, metric=metric)


def correlated_rows(
    lead: tuple[int, ...], grid: TokenGrid, K: int, seed: int, step: float = 1.0, amp: float = 60.0
) -> torch.Tensor:
    """Float rows ``(*lead, grid.seq_len, K)`` that vary smoothly over the grid.

    Each grid axis adds a random walk whose per-position step spans about two
    orders of magnitude around ``step``, so neighbours along any axis are anywhere
    from near-copies to far apart, and every mode occurs; some tokens jump.
    Non-grid rows are random.
    """
    g = torch.Generator().manual_seed(seed)
    T, H, W = grid.shape
    field = torch.randn(*lead, 1, 1, 1, K, generator=g) * amp
    for dim, n in zip((-4, -3, -2), (T, H, W)):
        shape = [*lead, T, H, W, K]
        step_shape = list(shape)
        step_shape[-1] = 1
        steps = step * torch.exp(1.2 * torch.randn(step_shape, generator=g))
        field = field + (torch.randn(shape, generator=g) * steps).cumsum(dim)
    jumps = (torch.rand(*lead, T, H, W, 1, generator=g) < 0.1).float() * torch.randn(*lead, T, H, W, K, generator=g) * 30
    rows = (field + jumps).reshape(*lead, grid.n_grid, K)
    pre = torch.randn(*lead, grid.prefix, K, generator=g) * amp
    suf = torch.randn(*lead, grid.suffix, K, generator=g) * amp
    return torch.cat([pre, rows, suf], dim=-2)


def correlated_int8(lead, grid, K, seed, step=1.0) -> torch.Tensor:
    return correlated_rows(lead, grid, K, seed, step).round().clamp(-127, 127).to(torch.int8)
