"""Random valid mode maps for the simulator's and the RTL's tests (no optional package needed)."""

import numpy as np
import torch

from kaleido.reuse import Mode, ModeMap


def random_map(A, grid, groups, low_bits, rng, p=None):
    """A valid mode map of int operand ``A`` (numpy or an int8 tensor): each item FULL / PARTIAL (only where its
    difference to eff(ref) fits) / COMPUTE, drawn with weights ``p`` (``None``: uniformly)."""
    A = A.numpy().astype(np.int64) if isinstance(A, torch.Tensor) else A
    S, G = A.shape[0], len(groups)
    modes = np.zeros((S, G), np.uint8)
    lim = 1 << (low_bits - 1)
    for g, (sl, axis) in enumerate(zip(groups.slices, groups.axes)):
        ref = grid.ref_index(axis).numpy()
        eff = A[:, sl].copy()
        for j in range(grid.n_grid):
            if ref[j] < 0:
                continue
            i, r = grid.prefix + j, grid.prefix + ref[j]
            choice = rng.integers(0, 3) if p is None else rng.choice(3, p=p)
            d = A[i, sl] - eff[r]
            if choice == 2:
                modes[i, g] = Mode.FULL
                eff[i] = eff[r]
            elif choice == 1 and d.min() >= -lim and d.max() < lim:
                modes[i, g] = Mode.PARTIAL
    return ModeMap(torch.tensor(modes), grid, groups, low_bits)
