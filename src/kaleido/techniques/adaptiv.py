"""AdapTiV-style token merging (MICRO'24): sign similarity, local matching, dynamic rate.

* **Sign similarity**: two tokens are compared by the sign bits of their attention
  input (``hidden_states`` after norm/modulation): the fraction of channels whose signs
  agree (an XOR/popcount in hardware, no multiplies).
* **Local matching**: a token is only compared with the destination of its own local
  window of ``window`` = (1, 2, 2) grid cells (its first member), not with all tokens.
* **Dynamic merge rate**: a token merges whenever its sign agreement reaches ``tau``,
  so how many tokens merge varies per layer, step and prompt.

Only video tokens merge (text tokens of joint sequences stay alone).
Merged tokens share one attention row and column (proportional attention, unmerged
after; see :mod:`._merge`).  Savings: ``N'^2`` of ``N^2`` self-attention pairs (text included) from
the merged count of each call.  The sign comparisons (``S * dim`` one-bit XORs) are charged
as ``estimate`` by the width rule (1x1 bit = 1/64 of an 8x8 MAC).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kaleido.techniques._merge import groups_from_pairs, local_windows, window_dst
from kaleido.techniques.accel_trace import attach_recorder
from kaleido.techniques.attention_core import AttnContext, install_attention_core, merged_joint_attention, record_pairs
from kaleido.techniques.base import Method, check_range
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.registry import TOKEN_MERGING, register_technique
from kaleido.techniques.shapes import claims_of


@dataclass(frozen=True)
class AdapTiVSettings:
    tau: float = 0.8  # sign agreement (fraction of channels) at or above which a token merges
    window: tuple = (1, 2, 2)
    dense_steps: int = 0

    def __post_init__(self) -> None:
        check_range("adaptiv", "tau", self.tau, 0.0, 1.0, "fraction of channels with equal sign")
        if len(tuple(self.window)) != 3 or any(int(w) < 1 for w in self.window):
            raise ValueError(f"adaptiv: window={self.window!r} must be three positive ints (t, h, w)")
        object.__setattr__(self, "window", tuple(int(w) for w in self.window))
        check_range("adaptiv", "dense_steps", self.dense_steps, 0, 10_000)


def sign_agreement(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Fraction of channels where ``x`` and ``ref`` (…, C) have the same sign (zero counts as +)."""
    return ((x >= 0) == (ref >= 0)).to(torch.float32).mean(-1)


@register_technique(group=TOKEN_MERGING, needs_accelerator=True)
class AdapTiV(Method):
    name = "adaptiv"
    Settings = AdapTiVSettings
    claims = claims_of(("self_qk", "self_pv"))

    def _install(self, handle: MethodHandle) -> None:
        s = self.settings
        attach_recorder(handle)  # its decisions in the trace format, for the accelerator model

        def core(q, k, v, ctx: AttnContext):
            B, N, H, d = q.shape
            S = ctx.grid.n_grid  # video tokens merge (their attention input: ctx.hidden_states); text stays alone
            win = local_windows(ctx.call.grid, s.window)
            is_dst = window_dst(win)  # the first member of every window
            dst_of_win = torch.empty(int(win.max()) + 1, dtype=torch.long)
            dst_of_win[win[is_dst]] = is_dst.nonzero().squeeze(1)
            src_idx = (~is_dst).nonzero().squeeze(1)
            partner = dst_of_win[win[src_idx]]
            outs, kept, merged = [], 0, 0
            for b in range(B):
                x = ctx.hidden_states[b]
                agree = sign_agreement(x[src_idx], x[partner])
                take = agree >= s.tau
                group = groups_from_pairs(S, src_idx[take], partner[take])
                o, n = merged_joint_attention(q[b], k[b], v[b], group, ctx, b)
                outs.append(o)
                kept += H * n * n
                merged += int(take.sum())
            C = ctx.hidden_states.shape[-1]
            handle.ledger.add("estimate", mac8=math.ceil(B * src_idx.numel() * C / 64))
            handle.extra.setdefault("merged_tokens", []).append(merged)
            record_pairs(handle, kept, B * H * N * N, d)
            return torch.stack(outs)

        install_attention_core(handle, core, s.dense_steps)
