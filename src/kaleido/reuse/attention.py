"""Attention with channel-group reuse on q.k^T (and optionally on P.V) (SPEC §4).

Layout follows diffusers' processors: ``q`` ``(B, Sq, H, D)``, ``k`` ``(B, Sk, H, D)``,
``v`` ``(B, Sk, H, Dv)``; the output is ``(B, Sq, H, Dv)``.  The query rows are the
token grid (``Sq == grid.seq_len``); keys may be other tokens (cross-attention over
text has ``Sk != Sq``).  Each query row and channel group gets a mode; a fully reused
(row, group) takes its anchor's partial score ``q[anchor, g] . k[:, g]``.

Float path: the effective query (anchor rows gathered per group) goes through one
:func:`torch.nn.functional.scaled_dot_product_attention` call, so the cost over dense
SDPA is the quantisation, the decision and one gather.  With ``pv_config`` the
probabilities ``P`` are materialised and ``P.V`` reuses along query rows too, with
``pv_groups`` partitioning the key axis (default: chunks of 128 keys, axis ``w``).
Without P.V reuse, the exact P.V row skip (SPEC §4) applies where every group reuses
along one axis: a query row FULL in every group has its anchor's scores, probabilities and
output, so its output row is copied from the anchor and its P.V MACs count as skipped
(:func:`pv_row_skip`; with groups on different axes no row qualifies).
``exact_int8=True`` computes q.k^T (and P.V when enabled) on the int8 path; without
P.V reuse it runs one key block at a time with an online softmax, so the score matrix
is never held whole.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .config import ReuseConfig
from .decide import check_plain_config, decide, decide_effective
from .grid import Axis, TokenGrid
from .groups import ChannelGroups
from .matmul import int8_acc_dtype, int8_matmul_blocks, int8_matmul_from_map, reuse_matmul_map
from .modes import Mode, ModeMap
from .opcounts import OpCounts
from .quant import quantize

#: Default P.V key chunk (groups over the key axis when P.V reuse is on).
PV_DEFAULT_CHUNK = 128


def head_saved_fractions(mode_map: ModeMap, head_dim: int = -3) -> list[float]:
    """8-bit-equivalent MAC fraction saved per head of a ``(B, H, S, G)`` mode map.

    A FULL (row, group) saves all ``size_g`` MACs per column, a PARTIAL one
    ``1 - low_bits / 8`` of them; columns cancel out.
    """
    modes = mode_map.modes
    sizes = torch.tensor(mode_map.groups.sizes, dtype=torch.float64, device=modes.device)
    w_full = (modes == int(Mode.FULL)).to(torch.float64)
    w_part = (modes == int(Mode.PARTIAL)).to(torch.float64) * (1.0 - mode_map.low_bits / 8)
    saved = ((w_full + w_part) * sizes).movedim(head_dim, 0)  # (H, ..., S, G)
    per_head = saved.reshape(saved.shape[0], -1).sum(1)
    dense = sizes.sum() * (modes.numel() // max(1, modes.shape[-1]) // modes.shape[head_dim])
    return [float(x) for x in (per_head / dense)]


@dataclass
class AttentionStats:
    """What one reuse-attention call decided and saved.

    ``qk_modes``: mode map of q.k^T, shape ``(B, H, Sq, G)``; ``qk_ops``: its MACs
    (``qk_cols`` = ``Sk`` columns).  ``pv_modes``/``pv_ops``: the same for P.V
    (``pv_cols`` = ``Dv``; ``pv_modes`` is ``None`` and ``pv_ops`` the dense count when
    P.V reuse is off).  ``*_head_saved_fraction``: 8-bit-equivalent saving per head.
    The counts are derived from the maps when first read, so a call that only needs the
    maps (the diffusers integration) never copies counts to the host.
    """

    qk_modes: ModeMap
    qk_cols: int
    pv_modes: ModeMap | None
    pv_cols: int
    pv_dense_ops: OpCounts | None = None
    #: ``(B, H, Sq)`` bool: query rows whose softmax and P.V were skipped exactly (:func:`pv_row_skip`)
    pv_skipped_rows: torch.Tensor | None = None

    @functools.cached_property
    def qk_ops(self) -> OpCounts:
        return self.qk_modes.op_counts(self.qk_cols)

    @functools.cached_property
    def pv_ops(self) -> OpCounts:
        if self.pv_modes is not None:
            return self.pv_modes.op_counts(self.pv_cols)
        d = self.pv_dense_ops
        if self.pv_skipped_rows is None or d is None:
            return d
        per_row = d.dense_macs // max(1, self.pv_skipped_rows.numel())  # Sk * Dv
        skipped = int(self.pv_skipped_rows.sum()) * per_row
        return OpCounts(d.group_names, (d.total_mac8 - skipped,), (0,), (skipped,), d.low_bits)

    @functools.cached_property
    def qk_head_saved_fraction(self) -> list[float]:
        return head_saved_fractions(self.qk_modes)

    @functools.cached_property
    def pv_head_saved_fraction(self) -> list[float] | None:
        return None if self.pv_modes is None else head_saved_fractions(self.pv_modes)

    def to_dict(self) -> dict:
        return {
            "qk_modes": {**self.qk_modes.meta(), "stats": self.qk_modes.stats().to_dict()},
            "qk_ops": self.qk_ops.to_dict(),
            "pv_modes": None
            if self.pv_modes is None
            else {**self.pv_modes.meta(), "stats": self.pv_modes.stats().to_dict()},
            "pv_ops": self.pv_ops.to_dict(),
            "qk_head_saved_fraction": list(self.qk_head_saved_fraction),
            "pv_head_saved_fraction": None if self.pv_head_saved_fraction is None else list(self.pv_head_saved_fraction),
        }


def pv_row_skip(qk_modes: ModeMap) -> torch.Tensor | None:
    """``(B, H, Sq)`` bool: the query rows whose P.V follows exactly from q.k^T (SPEC §4, "P.V row skip").

    A row FULL in every group *with one anchor* - every group reused along the same axis -
    has its reference row's effective query in every group, hence the same scores,
    probabilities and output row.  ``None`` when the groups reuse along different axes
    (a row FULL in all of them mixes two anchors' partial scores: no row qualifies).
    """
    if len(set(qk_modes.groups.axes)) != 1:
        return None
    return (qk_modes.modes == int(Mode.FULL)).all(-1)


def copy_skipped_rows(out: torch.Tensor, skipped: torch.Tensor, qk_modes: ModeMap) -> torch.Tensor:
    """``out`` ``(B, H, Sq, Dv)`` with each skipped row replaced by its reference's output row (the nearest
    row before it along the groups' axis that was not skipped: chains of skipped rows resolve to it).

    In place, one position along the axis at a time (position ``p`` after ``p - 1``, so a chain carries
    its anchor's row): one select per position, not an index and a gather of the whole output."""
    grid = qk_modes.grid
    dim = 2 + Axis.parse(qk_modes.groups.axes[0]).dim  # in (B, H, T, H', W, Dv)
    rows = out[..., grid.grid_slice, :].unflatten(-2, grid.shape)
    skip = skipped[..., grid.grid_slice].unflatten(-1, grid.shape).unsqueeze(-1)
    for p in range(1, rows.shape[dim]):
        cur = rows.select(dim, p)
        cur.copy_(torch.where(skip.select(dim, p), rows.select(dim, p - 1), cur))
    return out


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a (B, S, H, D) tensor, got shape {tuple(getattr(t, 'shape', ()))}")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must share (B, Sk, H)")
    if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2] or q.shape[3] != k.shape[3]:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must share batch, heads and head dim")


def _scores_to_probs(scores: torch.Tensor, scale: float, attn_mask: torch.Tensor | None) -> torch.Tensor:
    scores = scores * scale
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, dim=-1)


def _int8_qk_online_softmax(
    q_q: torch.Tensor,
    scale_q: torch.Tensor,
    qk_modes: ModeMap,
    kt: torch.Tensor,
    vt: torch.Tensor,
    scale: float,
    attn_mask: torch.Tensor | None,
    max_block_elems: int = 1 << 21,
) -> torch.Tensor:
    """softmax(int8-path q.k^T * scale + mask) . v, one key block at a time (online softmax).

    The score matrix is never materialised: each block of exact int8-path scores
    updates a running row max, row sum and output, as in flash attention.
    """
    lead = tuple(q_q.shape[:-2])
    Sq = q_q.shape[-2]
    acc_dtype = torch.float64 if int8_acc_dtype(qk_modes.groups) == torch.float64 else torch.float32
    m = torch.full((*lead, Sq, 1), float("-inf"), dtype=acc_dtype)
    l = torch.zeros((*lead, Sq, 1), dtype=acc_dtype)  # noqa: E741
    out = torch.zeros((*lead, Sq, vt.shape[-1]), dtype=acc_dtype)
    for cols, s in int8_matmul_blocks(
        q_q, scale_q, qk_modes, kt.transpose(-1, -2), max_block_elems=max_block_elems
    ):
        s = s.to(acc_dtype) * scale
        if attn_mask is not None:
            mk = attn_mask[..., cols] if attn_mask.shape[-1] > 1 else attn_mask
            s = s.masked_fill(~mk, float("-inf")) if mk.dtype == torch.bool else s + mk.to(acc_dtype)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe)
        corr = torch.exp(m - m_safe)
        l = l * corr + p.sum(-1, keepdim=True)  # noqa: E741
        out = out * corr + torch.matmul(p, vt[..., cols, :].to(acc_dtype))
        m = m_new
    return out / l


def reuse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    grid: TokenGrid,
    groups: ChannelGroups,
    config: ReuseConfig,
    *,
    pv_config: ReuseConfig | None = None,
    pv_groups: ChannelGroups | None = None,
    scale: float | None = None,
    attn_mask: torch.Tensor | None = None,
    exact_int8: bool = False,
    q_eff_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, AttentionStats]:
    """Attention of ``q`` ``(B, Sq, H, D)`` over ``k``/``v`` ``(B, Sk, H, D|Dv)`` with reuse.

    ``groups`` partition ``D`` (e.g. the RoPE blocks), reused along ``grid`` (over
    ``Sq``).  ``scale`` defaults to ``1/sqrt(D)``; ``attn_mask`` is SDPA's
    (bool: True = attend, or additive float), broadcastable to ``(B, H, Sq, Sk)``.
    ``q_eff_out`` ``(B, H, Sq, D)``: where the float path's effective ``q`` goes (default a fresh
    tensor; see :func:`~kaleido.reuse.decide_effective`'s ``out``).  Returns ``(out (B, Sq, H, Dv), AttentionStats)``.
    """
    _check_qkv(q, k, v)
    groups.check_dim(q.shape[-1], "q head dim")
    grid.check_seq_len(q.shape[1], "q")
    check_plain_config(config)
    if pv_config is not None:
        check_plain_config(pv_config)
    B, Sq, H, D = q.shape
    Sk, Dv = k.shape[1], v.shape[-1]
    if scale is None:
        scale = D**-0.5
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, S, D)

    if exact_int8:
        q_q, scale_q = quantize(qt, groups, config.granularity)
        qk_modes = decide(q_q, grid, groups, config)
    else:
        qk_modes, q_eff = decide_effective(qt, grid, groups, config, out=q_eff_out)

    probs = None
    if exact_int8 and pv_config is None:
        out = _int8_qk_online_softmax(q_q, scale_q, qk_modes, kt, vt, scale, attn_mask).to(q.dtype)
    elif exact_int8:
        scores = int8_matmul_from_map(q_q, scale_q, qk_modes, kt.transpose(-1, -2)).to(q.dtype)
        probs = _scores_to_probs(scores, scale, attn_mask)
        del scores
    else:
        if pv_config is None:
            out = F.scaled_dot_product_attention(q_eff, kt, vt, attn_mask=attn_mask, scale=scale)
        else:
            probs = _scores_to_probs(torch.matmul(q_eff, kt.transpose(-1, -2)), scale, attn_mask)

    pv_modes = None
    pv_dense = None
    skipped = None
    if pv_config is None:
        n = B * H * Sq * Sk * Dv
        pv_dense = OpCounts(("pv",), (n,), (0,), (0,), config.low_bits)
        skipped = pv_row_skip(qk_modes)
        if skipped is not None:  # their softmax and P.V are not needed: the output is the anchor's
            out = copy_skipped_rows(out, skipped, qk_modes)
    else:
        if pv_groups is None:
            pv_groups = ChannelGroups.from_chunks(Sk, min(Sk, PV_DEFAULT_CHUNK), Axis.W)
        out, pv_modes = reuse_matmul_map(probs, vt, grid, pv_groups, pv_config, exact_int8=exact_int8)
    stats = AttentionStats(qk_modes, Sk, pv_modes, Dv, pv_dense, skipped)
    return out.transpose(1, 2), stats
