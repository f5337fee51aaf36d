"""Cambricon-D / Ditto-style differential computing across denoising steps.

Every block linear the model adapter names (the q, k, v, out projections of self- and
cross-attention, the feed-forward linears, HunyuanVideo's fused single-stream ``proj_out``:
:meth:`~kaleido.models.adapter.ModelAdapter.gemm_linear_sites`) keeps, per call slot
(cond / uncond), the input it last saw (``x_ref``) and its output (``y_ref``).  On the next step it computes only the
difference: ``d = x - x_ref`` is quantised to ``delta_bits`` signed bits with one
scale per tensor (``max|d| / (2**(delta_bits-1) - 1)``); entries that round to zero
are skipped; ``y = y_ref + W (scale * d_q)``.  ``x_ref`` becomes the reconstructed
input ``x_ref + scale * d_q`` (so errors do not drift along steps) and ``y_ref`` the new
output.  This is lossy: small changes are dropped and large ones rounded, which is
where the approximation error of differential accelerators comes from.  The first call
of every slot in a generation, and every ``refresh_period``-th step, run dense.

Counts: per linear, non-zero deltas x ``out_features`` ``delta_bits x 8`` MACs
(``mac_low``), zero deltas skipped; dense calls are 8x8 MACs.  Attention q.k^T and P.V
stay dense (softmax is nonlinear: a difference of scores cannot be carried through it),
so this baseline saves nothing on self-attention q.k^T by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kaleido.techniques._hooks import replace_forward
from kaleido.techniques.accel_trace import AccelTraceRecorder, attach_recorder
from kaleido.techniques.base import Method, check_range
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.registry import DIFFERENTIAL, register_technique
from kaleido.ops import BLOCK_KINDS
from kaleido.techniques.shapes import claims_of

#: the op kinds of the block linears (every block GEMM kind but attention's q.k^T and P.V)
_LINEAR_KINDS = tuple(k for k in BLOCK_KINDS if not k.endswith(("_qk", "_pv")))


@dataclass(frozen=True)
class CambriconDSettings:
    delta_bits: int = 4  # signed bits of a quantised temporal difference
    refresh_period: int = 0  # recompute densely every this many steps (0: only the first)

    def __post_init__(self) -> None:
        check_range("cambricon_d", "delta_bits", self.delta_bits, 2, 8)
        check_range("cambricon_d", "refresh_period", self.refresh_period, 0, 10_000)


@register_technique(group=DIFFERENTIAL, needs_accelerator=True)
class CambriconD(Method):
    name = "cambricon_d"
    Settings = CambriconDSettings
    claims = claims_of(_LINEAR_KINDS)

    @property
    def low_bits(self) -> int:  # type: ignore[override]
        return self.settings.delta_bits

    def _install(self, handle: MethodHandle) -> None:
        s = self.settings
        rec = attach_recorder(handle)  # its decisions in the trace format, for the accelerator model
        _record_outliers(handle, rec)
        state: dict[tuple, tuple[torch.Tensor, torch.Tensor, int]] = {}  # (site, slot) -> (x_ref, y_ref, step)
        handle.on_new_generation(state.clear)
        qmax = 2 ** (s.delta_bits - 1) - 1
        density = handle.extra.setdefault("delta_nonzero_fraction", [])

        for site in handle.linear_sites:
            lin, name, kind = site.module, site.name, site.op

            def forward(original, x, *a, name=name, kind=kind, lin=lin, **kw):
                c = handle.call
                rows = x.numel() // x.shape[-1]
                full = rows * lin.in_features * lin.out_features
                key = (name, c.slot)
                prev = state.get(key)
                refresh = s.refresh_period > 0 and c.step > 0 and c.step % s.refresh_period == 0
                if prev is None or refresh or prev[0].shape != x.shape:
                    y = original(x, *a, **kw)
                    state[key] = (x.detach().clone(), y.detach().clone(), c.step)
                    handle.ledger.add(kind, mac8=full)
                    return y
                x_ref, y_ref, _ = prev
                d = x - x_ref
                scale = d.abs().amax().clamp(min=1e-12) / qmax
                dq = torch.round(d / scale).clamp(-qmax, qmax)
                nnz = int((dq != 0).sum())
                density.append(nnz / dq.numel())
                y = y_ref + F.linear(dq * scale, lin.weight)
                state[key] = (x_ref + dq * scale, y.detach().clone(), c.step)
                handle.ledger.add(kind, mac_low=nnz * lin.out_features, skipped=full - nnz * lin.out_features)
                return y

            replace_forward(handle, lin, "kaleido_cambricon_d", forward)
            handle.take_over(name, (kind,))


def _record_outliers(handle: MethodHandle, rec: AccelTraceRecorder) -> None:
    """Feed ``rec`` each differential linear's outlier count: input entries whose step-to-step
    difference, at the input's int8 scale (``max|x| / 127``), does not fit ``delta_bits`` signed bits."""
    qmax = 2 ** (handle.method.settings.delta_bits - 1) - 1
    prev: dict[tuple, torch.Tensor] = {}
    handle.on_new_generation(prev.clear)
    for site in handle.linear_sites:
        def pre(module, args, name=site.name, kind=site.op):
            x = args[0].detach()
            key = (name, handle.call.slot)
            p = prev.get(key)
            if p is not None and p.shape == x.shape:
                scale = x.abs().amax().clamp(min=1e-12) / 127.0
                out = int(((x - p).abs() > qmax * scale).sum())
                rec.add_outliers(kind, out, x.numel())
            prev[key] = x.clone()

        hk = site.module.register_forward_pre_hook(pre)
        handle.add_undo(hk.remove)
