"""The one interface every baseline implements, and the MAC bookkeeping they share.

A :class:`Method` is a technique with validated settings.  ``method.apply(transformer)``
patches a diffusers ``WanTransformer3DModel`` in place and returns a
:class:`MethodHandle`; ``handle.remove()`` restores the model exactly, and
``handle.report()`` says what the technique computed, per op kind, in the same
8-bit-equivalent MAC units as Kaleido's :class:`~kaleido.reuse.OpCounts`.

Op kinds (the names Kaleido's traces use)::

    self_qk, self_pv            self-attention q.k^T and P.V   (B*heads*S*S*head_dim each)
    cross_qk, cross_pv          cross-attention q.k^T and P.V  (B*heads*S*L*head_dim each)
    proj_q, proj_k, proj_v,     self-attention (attn1) q/k/v/out projections (B*S*dim*dim each)
    proj_out
    cross_proj_q, cross_proj_out  cross-attention (attn2) q and out projections (video tokens)
    cross_proj_kv               attn2's k and v projections of the L text tokens (2*B*L*dim*dim)
    ffn_in, ffn_out             the feed-forward's two linears (B*S*dim*ffn_dim each)
    estimate                    work a method adds to decide what to skip (pooled scores,
                                sampled rows, token matching, predictions); it has no
                                dense counterpart and is charged on top

Accounting.  Every transformer call is charged its dense MACs per op kind
("expected").  For op kinds a method does not *claim*, the handle counts what really
ran: a forward hook on ``attn1.to_q``, ``attn2.to_q`` and ``ffn.net[0]`` of every block
fires only when that unit really computes, so a step cache that returns a cached
output is charged nothing for it (skipped).  For op kinds a method claims, the method
itself records ``mac8`` / ``mac_low`` / ``skipped`` from the work it did (kept blocks,
merged token counts, non-zero deltas...).  Only the transformer blocks' GEMMs are
counted (patch embedding, time/text embedders and the output head are left out for
every method alike).

Observers.  What records a method's decisions (the accelerator baselines' trace
recorder, :mod:`.accel_trace`) attaches by name, never by replacing the handle's or the
ledger's functions: :meth:`OpLedger.add_observer` sees every count added,
:meth:`MethodHandle.observe` sees what a method announces with
:meth:`MethodHandle.notify` (:data:`EVENTS`), :meth:`MethodHandle.register_report_extra`
adds entries to ``report().extra`` and :meth:`MethodHandle.register_trace_provider`
answers :meth:`MethodHandle.accel_trace`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch

from kaleido.ops import BLOCK_OPS, UNIT_OPS
from kaleido.reuse import OpCounts, TokenGrid

#: The ledger's op kinds: the GEMMs of one Wan block (:data:`kaleido.ops.BLOCK_OPS`).
OP_KINDS: tuple[str, ...] = tuple(k.value for k in BLOCK_OPS)
ESTIMATE = "estimate"
#: The units of a Wan block whose execution the handle observes, and the op kinds each covers.
UNIT_KINDS: dict[str, tuple[str, ...]] = {u: tuple(k.value for k in ops) for u, ops in UNIT_OPS.items()}
#: What a method announces to its handle's observers (:meth:`MethodHandle.notify`) -> the arguments.
EVENTS: dict[str, str] = {
    "attention keep-mask": "keep (B, H, queries, keys) bool: the (query, key) pairs a self-attention core computes",
}


def _check_new_name(what: str, name: str, taken) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} name must be a non-empty string, got {name!r}")
    if name in taken:
        raise ValueError(f"{what} {name!r} is already registered; pick another name or remove that one first")


@dataclass(frozen=True)
class WanShapes:
    """The dimensions of a ``WanTransformer3DModel`` that decide its MAC counts."""

    dim: int
    heads: int
    head_dim: int
    ffn_dim: int
    n_layers: int
    patch: tuple[int, int, int]
    rope_sizes: tuple[int, int, int]

    @classmethod
    def of(cls, transformer: torch.nn.Module) -> "WanShapes":
        if type(transformer).__name__ != "WanTransformer3DModel" or not hasattr(transformer, "blocks"):
            raise ValueError(
                f"baselines support diffusers' WanTransformer3DModel, got {type(transformer).__name__}; "
                "pass pipe.transformer of a WanPipeline"
            )
        cfg = transformer.config
        heads, hd = int(cfg.num_attention_heads), int(cfg.attention_head_dim)
        rope = transformer.rope
        return cls(heads * hd, heads, hd, int(cfg.ffn_dim), len(transformer.blocks), tuple(cfg.patch_size),
                   (int(rope.t_dim), int(rope.h_dim), int(rope.w_dim)))

    def unit_macs(self, unit: str, batch: int, S: int, L: int) -> dict[str, int]:
        """Dense MACs of one execution of ``unit`` in one block, per op kind."""
        D, H, d, F = self.dim, self.heads, self.head_dim, self.ffn_dim
        if unit == "attn1":
            qk = batch * H * S * S * d
            lin = batch * S * D * D
            return {"self_qk": qk, "self_pv": qk, "proj_q": lin, "proj_k": lin, "proj_v": lin, "proj_out": lin}
        if unit == "attn2":
            qk = batch * H * S * L * d
            return {"cross_qk": qk, "cross_pv": qk, "cross_proj_q": batch * S * D * D,
                    "cross_proj_kv": 2 * batch * L * D * D, "cross_proj_out": batch * S * D * D}
        if unit == "ffn":
            return {"ffn_in": batch * S * D * F, "ffn_out": batch * S * F * D}
        raise ValueError(f"unknown unit {unit!r}; known: {list(UNIT_KINDS)}")


@dataclass
class CallInfo:
    """What the handle knows about the transformer call in progress."""

    grid: TokenGrid
    batch: int
    text_len: int
    timestep: float
    step: int  # denoising step index within the current generation (0-based)
    slot: int  # 0 for the first call of a step (cond), 1 for the second (uncond), ...
    generation: int  # counts generations (a new one starts when the timestep rises)


class OpLedger:
    """Additive MAC counts per op kind (one ``total`` group each)."""

    def __init__(self, low_bits: int = 8) -> None:
        self.low_bits = int(low_bits)
        self._c: dict[str, list[int]] = {}
        self._observers: dict[str, Callable[[str, int, int, int], None]] = {}

    def add_observer(self, name: str, fn: Callable[[str, int, int, int], None]) -> None:
        """Call ``fn(kind, mac8, mac_low, skipped)`` after every :meth:`add`, in registration order."""
        _check_new_name("ledger observer", name, self._observers)
        self._observers[name] = fn

    def remove_observer(self, name: str) -> None:
        self._observers.pop(name, None)

    def add(self, kind: str, mac8: int = 0, mac_low: int = 0, skipped: int = 0) -> None:
        if kind not in OP_KINDS and kind != ESTIMATE:
            raise ValueError(f"unknown op kind {kind!r}; known: {list(OP_KINDS) + [ESTIMATE]}")
        if min(mac8, mac_low, skipped) < 0:
            raise ValueError(f"negative MAC count for {kind}: {mac8}, {mac_low}, {skipped}")
        c = self._c.setdefault(kind, [0, 0, 0])
        c[0] += int(mac8)
        c[1] += int(mac_low)
        c[2] += int(skipped)
        for fn in self._observers.values():
            fn(kind, mac8, mac_low, skipped)

    def op_counts(self) -> dict[str, OpCounts]:
        return {k: OpCounts(("total",), (c[0],), (c[1],), (c[2],), self.low_bits) for k, c in self._c.items()}


@dataclass
class MethodReport:
    """Per-op-kind counts of everything that ran while a method was applied."""

    method: str
    settings: dict
    op_counts: dict[str, OpCounts]
    calls: int
    extra: dict = field(default_factory=dict)

    def saved_fraction(self, kind: str) -> float:
        """8-bit-equivalent MACs saved on ``kind`` (its own work only, estimates excluded)."""
        oc = self.op_counts.get(kind)
        return 0.0 if oc is None else oc.saved_fraction

    @property
    def dense_macs(self) -> int:
        return sum(oc.dense_macs for k, oc in self.op_counts.items() if k != ESTIMATE)

    @property
    def estimate_macs(self) -> float:
        oc = self.op_counts.get(ESTIMATE)
        return 0.0 if oc is None else oc.equiv8_macs

    @property
    def equiv8_macs(self) -> float:
        """8-bit-equivalent MACs of the whole transformer's blocks, estimates included."""
        return sum(oc.equiv8_macs for oc in self.op_counts.values())

    @property
    def total_saved_fraction(self) -> float:
        d = self.dense_macs
        return 0.0 if d == 0 else 1.0 - self.equiv8_macs / d

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "settings": dict(self.settings),
            "calls": self.calls,
            "op_counts": {k: v.to_dict() for k, v in sorted(self.op_counts.items())},
            "saved_fraction": {k: self.saved_fraction(k) for k in OP_KINDS if k in self.op_counts},
            "dense_macs": self.dense_macs,
            "estimate_macs": self.estimate_macs,
            "equiv8_macs": self.equiv8_macs,
            "total_saved_fraction": self.total_saved_fraction,
            "extra": dict(self.extra),
        }


class MethodHandle:
    """A method applied to one transformer: observes calls, keeps counts, undoes itself."""

    def __init__(self, method: "Method", transformer: torch.nn.Module) -> None:
        self.method = method
        self.transformer = transformer
        self.shapes = WanShapes.of(transformer)
        self.ledger = OpLedger(method.low_bits)
        self.call: CallInfo | None = None
        self.calls = 0
        self.extra: dict[str, Any] = {}
        self._undo: list[Callable[[], None]] = []
        self._last_t: float | None = None
        self._step = -1
        self._slot = 0
        self._generation = 0
        self._new_generation_callbacks: list[Callable[[], None]] = []
        self._removed = False
        self.call_checks: list[Callable[[CallInfo], None]] = []
        self._observers: dict[str, dict[str, Callable[..., None]]] = {e: {} for e in EVENTS}
        self._report_extras: dict[str, Callable[[], dict]] = {}
        self._trace_providers: dict[str, Callable[[], Any]] = {}
        h = transformer.register_forward_pre_hook(self._pre_call, with_kwargs=True)
        self._undo.append(h.remove)
        for block in transformer.blocks:
            for unit, mod in (("attn1", block.attn1.to_q), ("attn2", block.attn2.to_q), ("ffn", block.ffn.net[0])):
                hk = mod.register_forward_hook(self._unit_hook(unit))
                self._undo.append(hk.remove)

    # -- observation ------------------------------------------------------------------
    def _pre_call(self, module, args, kwargs):
        hs = kwargs.get("hidden_states", args[0] if args else None)
        ehs = kwargs.get("encoder_hidden_states", args[2] if len(args) > 2 else None)
        ts = kwargs.get("timestep", args[1] if len(args) > 1 else None)
        if hs is None or hs.dim() != 5:
            raise ValueError("the Wan transformer must be called with hidden_states of shape (B, C, F, H, W)")
        B, _, F, Hh, Ww = hs.shape
        pt, ph, pw = self.shapes.patch
        grid = TokenGrid(F // pt, Hh // ph, Ww // pw)
        t = float(ts.reshape(-1)[0]) if isinstance(ts, torch.Tensor) else float(ts if ts is not None else 0.0)
        if self._last_t is None or t > self._last_t:
            if self._last_t is not None:
                self._generation += 1
            self._step, self._slot = 0, 0
            for cb in self._new_generation_callbacks:
                cb()
        elif t == self._last_t:
            self._slot += 1
        else:
            self._step += 1
            self._slot = 0
        self._last_t = t
        L = int(ehs.shape[1]) if ehs is not None else 0
        self.call = CallInfo(grid, int(B), L, t, self._step, self._slot, self._generation)
        self.calls += 1
        S = grid.n_grid
        for unit, kinds in UNIT_KINDS.items():
            macs = self.shapes.unit_macs(unit, int(B), S, L)
            for k in kinds:
                if (unit, k) not in self.method.claims:
                    self.ledger.add(k, skipped=macs[k] * self.shapes.n_layers)
        for check in self.call_checks:
            check(self.call)
        return None

    def _unit_hook(self, unit: str):
        def hook(module, inputs, output):
            c = self.call
            if c is None:
                return None
            macs = self.shapes.unit_macs(unit, c.batch, c.grid.n_grid, c.text_len)
            for k in UNIT_KINDS[unit]:
                if (unit, k) not in self.method.claims:
                    # move one execution's worth from "skipped" to "computed"
                    cnt = self.ledger._c[k]
                    cnt[0] += macs[k]
                    cnt[2] -= macs[k]
            return None

        return hook

    def on_new_generation(self, cb: Callable[[], None]) -> None:
        """Call ``cb`` whenever a new generation starts (cross-step state must reset)."""
        self._new_generation_callbacks.append(cb)

    def add_undo(self, fn: Callable[[], None]) -> None:
        self._undo.append(fn)

    # -- observers --------------------------------------------------------------------
    def _event(self, event: str) -> dict[str, Callable[..., None]]:
        try:
            return self._observers[event]
        except KeyError:
            raise ValueError(f"unknown handle event {event!r}; known: {sorted(EVENTS)}") from None

    def observe(self, event: str, name: str, fn: Callable[..., None]) -> None:
        """Call ``fn(*args)`` whenever the method announces ``event`` (:data:`EVENTS`); undone by :meth:`remove`."""
        observers = self._event(event)
        _check_new_name(f"{event!r} observer", name, observers)
        observers[name] = fn
        self.add_undo(lambda: observers.pop(name, None))

    def notify(self, event: str, *args: Any) -> None:
        """Announce ``event`` (:data:`EVENTS`) with ``args`` to every observer of it, in registration order."""
        for fn in self._event(event).values():
            fn(*args)

    def register_report_extra(self, name: str, fn: Callable[[], dict]) -> None:
        """:meth:`report` adds the entries of ``fn()`` to ``extra`` (after the handle's own), also after removal."""
        _check_new_name("report extra", name, self._report_extras)
        self._report_extras[name] = fn

    def register_trace_provider(self, name: str, fn: Callable[[], Any]) -> None:
        """:meth:`accel_trace` returns ``fn()`` (a recorder's ``ReuseTrace``); one provider per handle."""
        if self._trace_providers:
            raise ValueError(f"trace provider {name!r}: this handle already has {sorted(self._trace_providers)}; "
                             "a handle records one trace")
        _check_new_name("trace provider", name, self._trace_providers)
        self._trace_providers[name] = fn

    # -- results ----------------------------------------------------------------------
    def report(self) -> MethodReport:
        r = MethodReport(self.method.name, self.method.settings_dict(), self.ledger.op_counts(), self.calls,
                         dict(self.extra))
        for fn in self._report_extras.values():
            r.extra.update(fn())
        return r

    def accel_trace(self):
        """The :class:`~kaleido.integrations.trace.ReuseTrace` of the method's decisions, from its recorder."""
        if not self._trace_providers:
            raise ValueError(f"{self.method.name} records no accelerator trace; accel_trace() serves the methods "
                             "that attach a recorder (kaleido.baselines.accel_trace: adaptiv, exion, cambricon_d)")
        (fn,) = self._trace_providers.values()
        return fn()

    def remove(self) -> None:
        """Undo everything :meth:`Method.apply` did, in reverse order."""
        if self._removed:
            return
        for fn in reversed(self._undo):
            fn()
        self._undo.clear()
        self._removed = True

    def __enter__(self) -> "MethodHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class Method(ABC):
    """A technique with validated settings; see the module docstring.

    Subclasses declare ``name``, a frozen ``Settings`` dataclass (validated in
    ``__post_init__``), ``claims`` (the ``(unit, op kind)`` pairs whose MACs they
    record themselves) and implement :meth:`_install`.
    """

    name: ClassVar[str]
    Settings: ClassVar[type]
    claims: frozenset = frozenset()
    low_bits: int = 8

    def __init__(self, **settings: Any) -> None:
        names = {f.name for f in dataclasses.fields(self.Settings)}
        bad = sorted(set(settings) - names)
        if bad:
            raise ValueError(f"{self.name}: unknown setting(s) {bad}; allowed: {sorted(names)}")
        self.settings = self.Settings(**settings)

    def settings_dict(self) -> dict:
        return dataclasses.asdict(self.settings)

    def apply(self, transformer: torch.nn.Module) -> MethodHandle:
        handle = MethodHandle(self, transformer)
        try:
            self._install(handle)
        except Exception:
            handle.remove()
            raise
        return handle

    @abstractmethod
    def _install(self, handle: MethodHandle) -> None:
        """Patch ``handle.transformer``; register every undo with ``handle.add_undo``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings_dict()})"


def check_range(method: str, name: str, value: float, lo: float, hi: float, hint: str = "") -> None:
    """``ValueError`` naming the setting, its value and the allowed range unless ``lo <= value <= hi``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ValueError(f"{method}: {name}={value!r} is out of range; allowed [{lo}, {hi}]{'; ' + hint if hint else ''}")
