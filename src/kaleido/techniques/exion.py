"""EXION's algorithms (HPCA'25): FFN reuse across steps and eager attention prediction.

**FFN reuse (inter-iteration output sparsity).**  Every ``ffn_period`` steps the
feed-forward runs dense and records, per token, which of its ``ffn_dim`` GELU outputs
matter: ``|h| >= ffn_tau * max_token|h|``.  On the steps in between that bitmask is
reused: only the marked neurons of the first linear are computed (the others are taken
as zero), and the second linear only consumes the marked ones.  Saved: the unmarked
neurons' MACs in both linears, counted from the masks.  State is kept per call slot
(cond / uncond) and reset every generation.

**Eager attention prediction.**  q and k are quantised to int8 (one scale per head);
every score is predicted with leading-one detection - each operand replaced by
``sign * 2**floor(log2|x|)``, so a product is an exponent addition - and each query
keeps only the ``attn_density`` fraction of keys with the highest predicted scores
(video queries among video keys; pairs with a text token of a joint sequence are computed).
The exact q.k^T and P.V run on those pairs only.  Saved: the pruned pairs, counted
from the masks; the predictions (``S*S*head_dim`` per head) are charged as
``estimate`` at 1/4 of an 8x8 MAC each (a 4-bit exponent adder, by the width rule
4x4/64 - our assumption, not EXION's figure).  ``attn_density = 1`` turns it off.
ConMerge (EXION's compaction of sparse rows for its hardware) is a dataflow matter
and lives in the accelerator model (:mod:`kaleido.hw.designs.exion`), not here; what
that model needs from a run (per-tile column unions of the FFN mask and of the
attention keep-mask, announced as the handle's ``"attention keep-mask"`` event) is
fed to the trace recorder (:mod:`.accel_trace`) from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kaleido.techniques._hooks import replace_forward
from kaleido.techniques.accel_trace import RECORDER, AccelTraceRecorder, attach_recorder
from kaleido.techniques.attention_core import AttnContext, install_attention_core, joint_keep, keep_attention
from kaleido.techniques.base import Method, check_range
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.registry import SPARSE_ATTENTION_FFN, register_technique


@dataclass(frozen=True)
class ExionSettings:
    ffn_tau: float = 0.05  # a GELU output matters when |h| >= ffn_tau * (its token's max |h|); 0 disables FFN reuse
    ffn_period: int = 2  # dense FFN every this many steps; the mask is reused in between
    attn_density: float = 0.5  # fraction of keys kept per query by the prediction; 1 disables it
    dense_steps: int = 0

    def __post_init__(self) -> None:
        check_range("exion", "ffn_tau", self.ffn_tau, 0.0, 1.0)
        check_range("exion", "ffn_period", self.ffn_period, 1, 1000)
        check_range("exion", "attn_density", self.attn_density, 0.0, 1.0)
        check_range("exion", "dense_steps", self.dense_steps, 0, 10_000)


def leading_one(x_int: torch.Tensor) -> torch.Tensor:
    """``sign(x) * 2**floor(log2|x|)`` of integer-valued ``x`` (0 stays 0)."""
    a = x_int.abs()
    p = torch.where(a > 0, torch.exp2(torch.floor(torch.log2(a.clamp(min=1)))), torch.zeros_like(a))
    return torch.sign(x_int) * p


def quantize_int8_per_head(x: torch.Tensor) -> torch.Tensor:
    """(B, S, H, d) -> int8-valued float tensor, one symmetric scale per (batch, head)."""
    amax = x.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-12)
    return torch.round(x / amax * 127).clamp(-127, 127)


@register_technique(group=SPARSE_ATTENTION_FFN, needs_accelerator=True,
                    claims=("self_qk", "self_pv", "ffn_in", "ffn_out"))
class Exion(Method):
    name = "exion"
    Settings = ExionSettings

    @property
    def claims(self) -> frozenset:  # type: ignore[override]
        c = set()
        if self.settings.attn_density < 1.0:
            c |= {("attn1", "self_qk"), ("attn1", "self_pv")}
        if self.settings.ffn_tau > 0:
            c |= {("ffn", "ffn_in"), ("ffn", "ffn_out")}
        return frozenset(c)

    def _install(self, handle: MethodHandle) -> None:
        s = self.settings
        rec = attach_recorder(handle)  # its decisions in the trace format, for the accelerator model
        _record_tile_unions(handle, rec)
        if s.attn_density < 1.0:
            self._install_attention(handle)
        if s.ffn_tau > 0:
            self._install_ffn(handle)

    def _install_attention(self, handle: MethodHandle) -> None:
        s = self.settings

        def core(q, k, v, ctx: AttnContext):
            qv, kv = ctx.video(q), ctx.video(k)  # video queries pick among video keys; text pairs stay dense
            B, S, H, d = qv.shape
            ql, kl = leading_one(quantize_int8_per_head(qv)), leading_one(quantize_int8_per_head(kv))
            pred = torch.einsum("bshd,bthd->bhst", ql, kl)
            n_keep = max(1, min(S, int(round(s.attn_density * S))))
            top = pred.topk(n_keep, dim=-1, sorted=False).indices
            keep = joint_keep(torch.zeros(B, H, S, S, dtype=torch.bool).scatter_(-1, top, True), q, k, ctx)
            handle.ledger.add("estimate", mac8=math.ceil(B * H * S * S * d / 4))
            handle.notify("attention keep-mask", keep)
            return keep_attention(q, k, v, keep, ctx)

        install_attention_core(handle, core, s.dense_steps)

    def _install_ffn(self, handle: MethodHandle) -> None:
        s = self.settings
        masks: dict[tuple[int, int], tuple[torch.Tensor, int]] = {}  # (layer, slot) -> (mask, step recorded)
        handle.on_new_generation(masks.clear)
        stats = handle.extra.setdefault("ffn_mask_density", [])

        for name, layer, ff in _feed_forwards(handle):
            gelu, out_lin = ff.net[0], ff.net[2]

            def ffn_forward(original, hidden_states, *args, layer=layer, gelu=gelu, out_lin=out_lin, **kwargs):
                c = handle.call
                D, Fd = gelu.proj.in_features, gelu.proj.out_features
                rows = hidden_states.shape[0] * hidden_states.shape[1]
                h = gelu(hidden_states)  # GELU(W1 x + b1)
                key = (layer, c.slot)
                prev = masks.get(key)
                dense = c.step < s.dense_steps or prev is None or (c.step - prev[1]) % s.ffn_period == 0
                if dense:
                    amax = h.abs().amax(dim=-1, keepdim=True)
                    masks[key] = (h.abs() >= s.ffn_tau * amax, c.step)
                    handle.ledger.add("ffn_in", mac8=rows * D * Fd)
                    handle.ledger.add("ffn_out", mac8=rows * Fd * D)
                    return out_lin(h)
                mask = prev[0]
                nnz = int(mask.sum())
                stats.append(nnz / mask.numel())
                handle.ledger.add("ffn_in", mac8=nnz * D, skipped=(rows * Fd - nnz) * D)
                handle.ledger.add("ffn_out", mac8=nnz * D, skipped=(rows * Fd - nnz) * D)
                return out_lin(h * mask)

            replace_forward(handle, ff, "kaleido_exion_ffn", ffn_forward)
            handle.take_over(f"{name}.net.0.proj", ("ffn_in",))
            handle.take_over(f"{name}.net.2", ("ffn_out",))


def _record_tile_unions(handle: MethodHandle, rec: AccelTraceRecorder) -> None:
    """Feed ``rec`` the tile unions of the FFN's masked activations and of the attention keep-mask."""
    s = handle.method.settings
    if s.ffn_tau > 0:
        for _, _, ff in _feed_forwards(handle):
            def pre(module, args):
                rec.add_tiles(("ffn_in", "ffn_out"), args[0] != 0)  # (B, S, ffn_dim) masked GELU output

            hk = ff.net[2].register_forward_pre_hook(pre)
            handle.add_undo(hk.remove)
    if s.attn_density < 1.0:
        handle.observe("attention keep-mask", RECORDER,
                       lambda keep: rec.add_tiles(("self_qk", "self_pv"), keep))  # (B, H, queries, keys)


def _feed_forwards(handle: MethodHandle) -> list[tuple[str, int, torch.nn.Module]]:
    """The model's GELU feed-forward modules (``net[0]`` a GELU with ``proj``, ``net[2]`` the down Linear).

    An MLP that is no such module (HunyuanVideo's single-stream ``proj_mlp``, whose down projection
    is fused with the attention output) keeps its dense FFN; its GEMMs count as they run.
    """
    out = []
    for name, layer, ff in handle.feed_forwards():
        gelu, down = ff.net[0], ff.net[2]
        if not isinstance(getattr(gelu, "proj", None), torch.nn.Linear) or not isinstance(down, torch.nn.Linear):
            raise ValueError(f"exion: {name} is not a GELU FeedForward (net[0].proj, net[2] Linear)")
        out.append((name, layer, ff))
    return out
