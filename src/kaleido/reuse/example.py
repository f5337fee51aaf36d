"""The reuse core's built-in example: a synthetic RoPE-like attention head (no model needed).

The example is a video-like scene (static smooth background, a moving blob, small noise) over a
``T x H x W`` token grid, rotated by 3D RoPE (temporal, height and width channel blocks), so that
each block is nearly constant along the axes its rotation does not depend on, just as in a real
vDiT.  :func:`synthetic_qkv` builds it (``kaleido demo`` and ``benchmarks/bench_reuse.py`` use the
same generator); :func:`run_example` runs :func:`~kaleido.reuse.reuse_attention` on it against
dense SDPA (what ``kaleido demo`` prints).
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from .attention import reuse_attention
from .config import ReuseConfig
from .grid import TokenGrid
from .groups import ChannelGroups


def _scene_field(grid: TokenGrid, channels: int, gen: torch.Generator, fmax: float = 0.01, n_waves: int = 8) -> torch.Tensor:
    """``(n_grid, channels)`` content of a simple video scene, per channel.

    A static background (a sum of waves of at most ``fmax`` cycles per token over
    (h, w)), brightening by 1% per frame, plus a Gaussian blob with its own channel
    signature that moves across the frame: background tokens repeat along t and vary
    slowly along h and w; tokens the blob passes change.
    """
    h = torch.arange(grid.H, dtype=torch.float64).view(-1, 1, 1)
    w = torch.arange(grid.W, dtype=torch.float64).view(1, -1, 1)
    bg = torch.zeros(grid.H, grid.W, channels, dtype=torch.float64)
    for _ in range(n_waves):
        f = torch.rand(2, channels, generator=gen, dtype=torch.float64) * fmax
        phase = torch.rand(channels, generator=gen, dtype=torch.float64) * 2 * math.pi
        amp = torch.randn(channels, generator=gen, dtype=torch.float64)
        bg += amp * torch.cos(2 * math.pi * (f[0] * h + f[1] * w) + phase)
    bg = bg / bg.std()
    signature = torch.randn(channels, generator=gen, dtype=torch.float64) * 2.0
    radius = max(1.5, min(grid.H, grid.W) / 6)
    centre = torch.rand(2, generator=gen, dtype=torch.float64) * torch.tensor([grid.H, grid.W], dtype=torch.float64)
    velocity = (torch.rand(2, generator=gen, dtype=torch.float64) - 0.5) * radius  # tokens per frame
    frames = []
    for t in range(grid.T):
        c = centre + velocity * t
        dist2 = (h[..., 0] - c[0]) ** 2 + (w[..., 0] - c[1]) ** 2
        blob = torch.exp(-dist2 / (2 * radius**2))[..., None] * signature
        frames.append(bg * (1 + 0.01 * t) + blob)
    return torch.stack(frames).reshape(grid.n_grid, channels)


def _rope(x: torch.Tensor, grid: TokenGrid, sizes: tuple[int, int, int], theta: float = 10000.0) -> torch.Tensor:
    """Rotate adjacent channel pairs of ``x`` ``(n_grid, D)`` by 3D RoPE, blocks ``[t | h | w]``."""
    pos = torch.stack(
        torch.meshgrid(torch.arange(grid.T), torch.arange(grid.H), torch.arange(grid.W), indexing="ij"), -1
    ).reshape(grid.n_grid, 3).to(torch.float64)
    out = x.clone()
    start = 0
    for axis, size in enumerate(sizes):
        half = size // 2
        freqs = theta ** (-torch.arange(half, dtype=torch.float64) * 2 / max(1, size))
        ang = pos[:, axis : axis + 1] * freqs  # (n_grid, half)
        a, b = x[:, start : start + 2 * half : 2], x[:, start + 1 : start + 2 * half : 2]
        out[:, start : start + 2 * half : 2] = a * torch.cos(ang) - b * torch.sin(ang)
        out[:, start + 1 : start + 2 * half : 2] = a * torch.sin(ang) + b * torch.cos(ang)
        start += size
    return out


def synthetic_qkv(
    grid: TokenGrid,
    rope_sizes: tuple[int, int, int],
    heads: int = 2,
    seed: int = 0,
    noise: float = 0.003,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded RoPE-like ``q``, ``k``, ``v`` of shape ``(1, grid.seq_len, heads, sum(rope_sizes))``.

    Each head: a scene (:func:`_scene_field`) normalised to unit std plus ``noise``
    (i.i.d. per token and channel), rotated by 3D RoPE.  Non-grid tokens (``grid.prefix``/``suffix``) are random.
    """
    gen = torch.Generator().manual_seed(seed)
    D = sum(rope_sizes)
    out = []
    for _ in range(3):
        per_head = []
        for _ in range(heads):
            x = _scene_field(grid, D, gen)
            x = x / x.std() + noise * torch.randn(x.shape, generator=gen, dtype=torch.float64)
            x = _rope(x, grid, rope_sizes)
            pre = torch.randn(grid.prefix, D, generator=gen, dtype=torch.float64)
            suf = torch.randn(grid.suffix, D, generator=gen, dtype=torch.float64)
            per_head.append(torch.cat([pre, x, suf]))
        out.append(torch.stack(per_head, dim=1).unsqueeze(0).to(dtype))  # (1, S, H, D)
    return out[0], out[1], out[2]


def run_example(theta1: float, theta2: float, low_bits: int = 4, seed: int = 0, exact_int8: bool = False) -> dict:
    """Reuse attention on a 4x16x16 synthetic head (64 channels, Wan's RoPE split, 2 heads) against
    dense SDPA: mode fractions and savings per group, the q.k^T op counts, the error, a JSON-able dict.

    A bad threshold or width is a ``ValueError`` naming it (:class:`ReuseConfig`).
    """
    config = ReuseConfig(theta1, theta2, low_bits=low_bits)  # ValueError names a bad value
    grid = TokenGrid(4, 16, 16)
    head_dim = 64
    hw = 2 * (head_dim // 6)  # Wan's rule: h = w = 2*(head_dim//6), t = rest
    rope_sizes = (head_dim - 2 * hw, hw, hw)
    groups = ChannelGroups.from_rope(*rope_sizes)
    q, k, v = synthetic_qkv(grid, rope_sizes, heads=2, seed=seed)
    t0 = time.perf_counter()
    out, stats = reuse_attention(q, k, v, grid, groups, config, exact_int8=exact_int8)
    reuse_s = time.perf_counter() - t0
    dense = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    err = (out - dense).abs()
    fr = stats.qk_modes.fractions()
    return {
        "grid": grid.to_dict(),
        "groups": groups.to_dict(),
        "config": config.to_dict(),
        "exact_int8": exact_int8,
        "mode_fractions": {
            name: {"compute": float(fr[g, 0]), "partial": float(fr[g, 1]), "full": float(fr[g, 2])}
            for g, name in enumerate(groups.names)
        },
        "group_saved_fraction": {name: stats.qk_ops.group_saved_fraction(g) for g, name in enumerate(groups.names)},
        "qk_ops": stats.qk_ops.to_dict(),
        "qk_summary": stats.qk_ops.summary(),
        "head_saved_fraction": stats.qk_head_saved_fraction,
        "max_abs_error": float(err.max()),
        "relative_error": float((out - dense).norm() / dense.norm()),
        "reuse_seconds": reuse_s,
    }
