"""Mode counts of one GEMM call: on the device, without a host copy, or those of an all-COMPUTE GEMM."""

from __future__ import annotations

import numpy as np
import torch

from kaleido.reuse.modes import MAX_PATTERN_GROUPS, Mode


def counts_on_device(modes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(H, G, 3)`` counts and the row-pattern histogram (``None`` past ``MAX_PATTERN_GROUPS`` groups) of a
    ``(B, H, S, G)`` mode tensor, as int64 tensors on its device (no host copy, no sync)."""
    if modes.dim() != 4:
        raise ValueError(f"expected a (B, H, S, G) mode tensor, got shape {tuple(modes.shape)}")
    H, G = modes.shape[1], modes.shape[-1]
    dev = modes.device
    if dev.type == "cpu" and modes.dtype == torch.uint8:  # one compiled pass instead of a handful of ops
        from kaleido.reuse.cpu_kernels import mode_histograms

        return mode_histograms(modes, G <= MAX_PATTERN_GROUPS)
    m = modes.to(torch.int64)
    idx = m + 3 * torch.arange(G, device=dev).view(1, 1, 1, G) + 3 * G * torch.arange(H, device=dev).view(1, H, 1, 1)
    counts = torch.bincount(idx.reshape(-1), minlength=3 * G * H).view(H, G, 3)
    patterns = None
    if G <= MAX_PATTERN_GROUPS:
        w = torch.tensor([3**g for g in range(G)], dtype=torch.int64, device=dev)
        patterns = torch.bincount((m * w).sum(-1).reshape(-1), minlength=3**G)
    return counts, patterns


def dense_counts(batch: int, heads: int, rows: int, n_groups: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Counts of an all-COMPUTE GEMM."""
    c = np.zeros((heads, n_groups, 3), dtype=np.int64)
    c[:, :, int(Mode.COMPUTE)] = batch * rows
    p = None
    if n_groups <= MAX_PATTERN_GROUPS:
        p = np.zeros(3**n_groups, dtype=np.int64)
        p[0] = batch * heads * rows
    return c, p
