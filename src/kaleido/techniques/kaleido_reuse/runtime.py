"""Per-model runtime state of Kaleido: grid, step, context, and the trace being recorded.

One :class:`KaleidoRuntime` lives on each patched transformer (``apply`` creates it,
``remove`` drops it); nothing is global.  The transformer's pre-hook
(:mod:`kaleido.techniques.kaleido_reuse.hooks`) calls :meth:`KaleidoRuntime.begin_call` before every
forward; processors and linear hooks ask it for the token grid, the effective
config of their op at the current step and layer, and record into it.

Steps and generations
---------------------
* The step index is the cache context's ``step_index`` when the pipeline passes one
  (Wan's pipeline does: ``cache_context("cond", step_index=i, num_inference_steps=n)``),
  otherwise the number of earlier transformer calls in the same context (``"cond"``,
  ``"uncond"``, ``"cond_uncond"``, or ``"default"`` outside any context).
* A generation ends when diffusers resets stateful hooks (every pipeline does at the end
  of ``__call__`` through ``maybe_free_model_hooks``), on :func:`kaleido.reset`, or when
  a call starts over (its step index or timestep goes back up).  The finished
  generation's records become :attr:`KaleidoRuntime.last_trace`.

:class:`~kaleido.techniques.call_context.StepCounter` is that rule, defined once: Kaleido's runtime and
every baseline's handle (:class:`kaleido.techniques.base.MethodHandle`, which adds the call's slot: the
order in which the step's contexts first appeared) count steps with it.
"""

from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from kaleido.reuse.config import ReuseConfig
from kaleido.reuse.grid import TokenGrid
from kaleido.reuse.groups import ChannelGroups
from kaleido.reuse.memory import Scratch
from kaleido.reuse.modes import MAX_PATTERN_GROUPS, Mode, ModeMap

from kaleido.techniques.call_context import CallInfo, StepCounter
from kaleido.techniques.kaleido_reuse.config import OP_SWITCH_OF, KaleidoConfig
from kaleido.trace import DENSE_OP, ReuseTrace, TraceRecord, counts_on_device, dense_counts

if TYPE_CHECKING:
    from kaleido.models.adapter import ModelAdapter


class KaleidoRuntime:
    """State shared by the hooks and processors of one patched transformer."""

    def __init__(self, model: torch.nn.Module, adapter: "ModelAdapter", config: KaleidoConfig, meta: dict[str, Any]):
        self.config = config
        self.adapter = adapter
        self.meta = meta
        self.rope_split = adapter.rope_split(model)
        #: P.V reuse is on at some layer: P.V records keep the pv switch's key chunks (one layout per op
        #: kind); else a P.V is never decided and is recorded as one group of all keys (a small trace)
        self.pv_decided = any(config.op_config("pv", layer).enabled for layer in range(adapter.num_layers(model)))
        self.head_dim = adapter.head_dim(model)
        self.text_position = adapter.text_position
        self.num_steps_override: int | None = None
        self.call: CallInfo | None = None
        self.last_trace: ReuseTrace | None = None
        self.dtype = str(next(model.parameters()).dtype).replace("torch.", "")
        self._records: list[TraceRecord] = []
        self.steps = StepCounter()
        self._plans: dict[tuple, ReuseConfig | None] = {}
        self._groups: dict[tuple, ChannelGroups] = {}
        self._grids: dict[int, TokenGrid] = {}
        self.wall_s = 0.0
        self._t0 = 0.0
        #: the effective operands' buffer, reused decision after decision (see :meth:`effective_out`)
        self.scratch = Scratch()
        self._decision: tuple | None = None
        self._owned: tuple | None = None
        #: callables ``fn(call, layer, op, role, module, operand, grid, groups)`` handed every reuse operand
        #: as the decision sees it (``kaleido characterize`` registers one); empty = no cost
        self.observers: list = []
        #: what ``apply`` installed (its undo list and ApplyReport) and whom ``remove`` tells (set by ``apply``)
        self.undo: Any = None
        self.report: Any = None
        self.on_remove: Any = None

    # -- calls and generations ---------------------------------------------------------
    def begin_call(
        self, grid: TokenGrid, context: str, step_index: int | None, num_steps: int | None, timestep: float | None
    ) -> None:
        if self.steps.restarts(context, step_index, timestep):
            self.finish_generation()
        step = self.steps.step(context, step_index)
        if num_steps is None:
            num_steps = self.num_steps_override
        self.call = CallInfo(grid, step, timestep, context, num_steps)
        self._grids = {}
        self._decision = None
        self._owned = None
        self._t0 = time.perf_counter()

    def end_call(self) -> None:
        c = self.call
        if c is None:
            return
        self.steps.record(c.context, c.step, c.timestep)
        self.wall_s += time.perf_counter() - self._t0
        self.call = None
        self._decision = None

    def finish_generation(self) -> ReuseTrace | None:
        """Close the generation being recorded; its trace becomes :attr:`last_trace`."""
        if self._records:
            self.last_trace = self.build_trace(self._records)
        self._records = []
        self.steps.clear()
        self.call = None
        self.wall_s = 0.0
        self.scratch.clear()  # the memory goes back between generations (e.g. to the VAE's decode)
        return self.last_trace

    def current_trace(self) -> ReuseTrace | None:
        """The generation in progress if it recorded anything, else the last finished one."""
        if self._records:
            return self.build_trace(self._records)
        return self.last_trace

    def build_trace(self, records: list[TraceRecord]) -> ReuseTrace:
        for r in records:  # counts recorded on the device come to the host once, here
            if isinstance(r.head_counts, torch.Tensor):
                r.head_counts = r.head_counts.cpu().numpy().astype(np.int64)
            if isinstance(r.pattern_counts, torch.Tensor):
                r.pattern_counts = r.pattern_counts.cpu().numpy().astype(np.int64)
        meta = dict(self.meta)
        meta["kaleido_config"] = self.config.to_dict()
        meta["dtype"] = self.dtype
        grids = {r.grid.shape for r in records if r.grid is not None}
        if len(grids) == 1:
            T, H, W = next(iter(grids))
            meta["grid"] = {"T": T, "H": H, "W": W}
        meta["num_steps"] = max(r.step for r in records) + 1
        meta["contexts_seen"] = sorted({r.context for r in records})
        return ReuseTrace(list(records), meta)

    # -- what an op should do now ------------------------------------------------------
    def _require_call(self, where: str) -> CallInfo:
        if self.call is None:
            raise ValueError(
                f"Kaleido: {where} ran outside a call of the patched transformer, so the token grid "
                "cannot be derived; call the transformer itself (not one block) after kaleido.apply"
            )
        return self.call

    def plan(self, switch: str, layer: int) -> ReuseConfig | None:
        """The plain ReuseConfig of ``switch`` at ``layer`` and the current step, or ``None`` (dense)."""
        c = self._require_call(f"op {switch!r} of layer {layer}")
        key = (switch, layer, c.step, c.num_steps)
        if key in self._plans:
            return self._plans[key]
        op = self.config.op_config(switch, layer)
        plan: ReuseConfig | None = None
        if op.enabled:
            rc = self.config.reuse_config(switch, layer)
            if rc.schedule and c.num_steps is None:
                raise ValueError(
                    "Kaleido: the config has a step schedule but the number of denoising steps is unknown "
                    "(this pipeline does not pass num_inference_steps to cache_context); call "
                    "kaleido.techniques.kaleido_reuse.set_num_steps(transformer, n) before generating"
                )
            if c.step >= rc.dense_steps:
                n = max(c.num_steps or 0, c.step + 1)
                plan = rc.at_step(c.step, n)
        self._plans[key] = plan
        return plan

    def low_bits(self, switch: str, layer: int) -> int:
        return self.config.reuse_config(switch, layer).low_bits

    def grid_for(self, seq_len: int, where: str) -> TokenGrid:
        """The grid of a sequence of ``seq_len`` rows: video tokens plus text before/after them."""
        c = self._require_call(where)
        g = self._grids.get(seq_len)
        if g is None:
            g = self._grids[seq_len] = self.adapter.sequence_grid(c.grid, seq_len, where)
        return g

    def groups(self, switch: str, layer: int, dim: int) -> ChannelGroups:
        """Channel groups of ``dim`` channels for ``switch`` at ``layer`` (RoPE or chunks)."""
        key = (switch, layer, dim)
        g = self._groups.get(key)
        if g is None:
            g = self.make_groups(switch, layer, dim)
            self._groups[key] = g
        return g

    def pv_record_groups(self, layer: int, n_keys: int) -> ChannelGroups:
        """The groups a P.V record of ``layer`` is stored with (see :attr:`pv_decided`)."""
        if self.pv_decided:
            return self.groups("pv", layer, n_keys)
        return ChannelGroups((n_keys,), ("t",), ("keys",))

    def make_groups(self, switch: str, layer: int, dim: int) -> ChannelGroups:
        op = self.config.op_config(switch, layer)
        where = f"KaleidoConfig ops.{switch} (layer {layer})"
        if switch == "self_qk" and op.groups == "rope" and self.rope_split is not None:
            t, h, w = self.rope_split
            if t + h + w != dim:
                raise ValueError(f"{where}: RoPE split {self.rope_split} does not cover the head dim {dim}")
            axes = op.axes
            n = sum(1 for s in (t, h, w) if s > 0)
            if axes is not None and len(axes) == 1:
                axes = axes * 3
            if axes is not None and len(axes) != 3:
                raise ValueError(f"{where}: RoPE groups take 1 or 3 axes (t, h, w groups), got {list(axes)}")
            g = ChannelGroups.from_rope(t, h, w, axes=axes)
            assert len(g) == n
            return g
        chunk = min(op.chunk_size, dim)
        n_chunks = -(-dim // chunk)
        axes = op.axes if op.axes is not None else ("t",)
        if len(axes) == 1:
            axes = axes * n_chunks
        if len(axes) != n_chunks:
            raise ValueError(
                f"{where}: {len(axes)} axes given for {n_chunks} chunk groups of {chunk} channels in {dim}; "
                "give one axis, or one per chunk"
            )
        return ChannelGroups.from_chunks(dim, chunk, axes)

    def observe(self, *, layer: int, op: str, role: str, module: str, operand: torch.Tensor, grid: TokenGrid,
                groups: ChannelGroups) -> None:
        """Hand an operand of ``op`` to the observers: ``role`` ``"q"``/``"k"`` (``(B, S, H, D)``, after
        RoPE) or ``"x"`` (a linear layer's input ``(B, S, C)``), with the grid and groups the op uses."""
        for fn in self.observers:
            fn(self.call, layer, op, role, module, operand, grid, groups)

    # -- one decision for layers reading the same activations ---------------------------
    def shared_decision(self, x: torch.Tensor, groups: ChannelGroups, cfg: ReuseConfig):
        """``(mode_map, x_eff)`` if the last linear decision was on this very tensor, else ``None``."""
        d = self._decision
        if d is None:
            return None
        x_ref, version, g_prev, cfg_prev, mode_map, x_eff = d
        if x_ref() is x and version == x._version and g_prev == groups and cfg_prev == cfg:
            return mode_map, x_eff
        return None

    def effective_out(self, operand: torch.Tensor) -> torch.Tensor:
        """Where the next decision on ``operand`` writes its effective operand: the runtime's one buffer
        (:class:`~kaleido.reuse.memory.Scratch`).  The kept linear decision's effective operand lives
        there too, so it is dropped."""
        self._decision = None
        return self.scratch.like(operand)

    def own_activation(self, t: torch.Tensor) -> None:
        """Mark ``t`` as a feed-forward's hidden activation, made by its activation module and read by its down
        projection alone (:class:`~kaleido.techniques.kaleido_reuse.linear.ActivationOwner`)."""
        self._owned = (weakref.ref(t), t._version)

    def owns(self, t: torch.Tensor) -> bool:
        """Whether ``t`` is the activation :meth:`own_activation` marked last, unchanged since, with no observer
        to hand it to and no autograd: its reader may then overwrite it (the mark is spent)."""
        o = self._owned
        if o is None or o[0]() is not t or o[1] != t._version:
            return False
        self._owned = None
        return not self.observers and not (t.requires_grad and torch.is_grad_enabled())

    def keep_decision(self, x: torch.Tensor, groups: ChannelGroups, cfg: ReuseConfig, mode_map: ModeMap,
                      x_eff: torch.Tensor) -> None:
        """Keep the decision for the layers that read ``x`` next, for as long as ``x`` lives: holding ``x``
        (or its effective copy) past its last reader would keep e.g. a whole FFN hidden state alive
        (measured: +25% peak memory at CogVideoX-5B's shapes)."""

        def drop(ref: weakref.ref) -> None:
            if self._decision is not None and self._decision[0] is ref:
                self._decision = None

        self._decision = (weakref.ref(x, drop), x._version, groups, cfg, mode_map, x_eff)

    # -- recording ---------------------------------------------------------------------
    def record_modes(self, *, layer: int, op: str, module: str, mode_map: ModeMap, n_cols: int, heads: int) -> None:
        """Record a reuse GEMM from its mode map (``(B, H, S, G)`` or ``(B, S, G)``)."""
        c = self.call
        if c is None:
            return
        modes = mode_map.modes
        if modes.dim() == 3:
            modes = modes.unsqueeze(1)
        with torch.profiler.record_function("kaleido.record"):
            # counts stay on the operand's device until the trace is built (no host sync per GEMM)
            counts, patterns = counts_on_device(modes)
        mm = None
        if self.config.record_maps:  # asked for: the maps' one host copy
            mm = ModeMap(modes.to("cpu", copy=True).contiguous(), mode_map.grid, mode_map.groups, mode_map.low_bits)
        B, H, S, _ = modes.shape
        self._records.append(
            TraceRecord(c.step, c.context, layer, op, module, B, H, S, n_cols, mode_map.groups, mode_map.low_bits,
                        mode_map.grid, True, counts, patterns, mm)
        )

    def record_dense(
        self, *, layer: int, op: str, module: str, batch: int, heads: int, rows: int, dim: int, n_cols: int,
        grid: TokenGrid | None = None, groups: ChannelGroups | None = None, low_bits: int = 4,
    ) -> None:
        """Record a GEMM computed densely (op disabled, warm-up step, or never reusable)."""
        c = self.call
        if c is None:
            return
        if groups is None:
            groups = ChannelGroups((dim,), ("t",), ("all",))
        counts, patterns = dense_counts(batch, heads, rows, len(groups))
        self._records.append(
            TraceRecord(c.step, c.context, layer, op, module, batch, heads, rows, n_cols, groups, low_bits,
                        grid, False, counts, patterns, None)
        )

    def record_row_skip(
        self, *, layer: int, op: str, module: str, skipped: torch.Tensor, n_cols: int, grid: TokenGrid,
        groups: ChannelGroups, low_bits: int,
    ) -> None:
        """Record a P.V whose ``skipped`` ``(B, H, S)`` rows were not computed (the exact row skip of SPEC §4):
        FULL in every group, the other rows COMPUTE; ``enabled`` false, since no P.V decision was made."""
        c = self.call
        if c is None:
            return
        B, H, S = skipped.shape
        G = len(groups)
        with torch.profiler.record_function("kaleido.record"):
            full = skipped.sum(dim=(0, 2)).to(torch.int64)  # (H,) on the operand's device
            counts = torch.zeros(H, G, 3, dtype=torch.int64, device=skipped.device)
            counts[:, :, int(Mode.FULL)] = full.view(H, 1)
            counts[:, :, int(Mode.COMPUTE)] = B * S - full.view(H, 1)
            patterns = None
            if G <= MAX_PATTERN_GROUPS:
                patterns = torch.zeros(3**G, dtype=torch.int64, device=skipped.device)
                patterns[0] = B * H * S - full.sum()
                patterns[3**G - 1] = full.sum()  # FULL (2) in every group: sum_g 2 * 3**g = 3**G - 1
        self._records.append(
            TraceRecord(c.step, c.context, layer, op, module, B, H, S, n_cols, groups, low_bits, grid, False,
                        counts, patterns, None)
        )

    def record_other_dense(self, module_name: str, layer: int, rows: int, k: int, n: int) -> None:
        """A GEMM outside Kaleido's reach (text side, embeddings): ``rows x k`` times ``k x n``."""
        if self.call is None or rows <= 0 or k <= 0 or n <= 0:
            return
        self.record_dense(layer=layer, op=DENSE_OP, module=module_name, batch=1, heads=1, rows=rows, dim=k, n_cols=n)


def switch_of(op: str) -> str:
    return OP_SWITCH_OF[op]


