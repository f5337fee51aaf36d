"""A method applied to one transformer (:class:`MethodHandle`): it sees every call, keeps the counts, undoes itself.

Accounting.  Every transformer call is charged all its GEMMs as skipped when it starts
(the ``"call planned"`` event).  A forward hook on every linear site, and on every
attention site's ``to_q`` (which runs exactly when the attention does), sees the GEMMs
that really run (``"gemm ran"``): a GEMM of a site the method took over
(:meth:`MethodHandle.take_over`: its attention core's sites, its differential linears...)
is then recorded by the method itself - ``mac8`` / ``mac_low`` / ``skipped`` from the work
it did (kept blocks, merged token counts, non-zero deltas...) - and every other GEMM that
runs counts as computed.  So a step cache that returns a cached output is charged nothing
for it (skipped), stacked or alone, and ``computed + skipped`` of every op kind is the
call's dense count (:class:`~kaleido.techniques.shapes.ModelShapes`).  A linear that runs on
other rows than the call's shapes plan raises ``ValueError`` (the accounting would be wrong).

Steps and slots.  The handle registers a :class:`~kaleido.techniques.call_context.ContextHook`
on the transformer, so it sees the cache context the pipeline sets around each call
(``with transformer.cache_context("cond", step_index=i, ...)``).  Under a context, the
call's step follows Kaleido's own rule (:class:`~kaleido.techniques.call_context.StepCounter`:
the context's ``step_index``, else the number of earlier calls in that context; a step
index or timestep that goes back up starts a new generation), and its slot is the order
in which its context's name first appeared in the generation (``"cond"`` 0, ``"uncond"``
1 in every diffusers pipeline, which calls cond first).  A call outside any context (a
bare transformer call) falls back to the timestep rule: a repeated timestep is the next
slot of the same step, a lower one the next step, a higher one a new generation (so does
a bare call after calls under a context, and the other way round).

Observers.  What records a method's decisions (the accelerator baselines' trace
recorder, :mod:`.accel_trace`) attaches by name, never by replacing the handle's or the
ledger's functions: :meth:`~kaleido.techniques.ledger.OpLedger.add_observer` sees every count
added, :meth:`MethodHandle.observe` sees what the handle and the method announce with
:meth:`MethodHandle.notify` (:data:`EVENTS`), :meth:`MethodHandle.register_report_extra`
adds entries to ``report().extra`` and :meth:`MethodHandle.register_trace_provider`
answers :meth:`MethodHandle.accel_trace`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol

import torch

from kaleido.reuse import TokenGrid

from kaleido.techniques.call_context import CallInfo, ContextHook, StepCounter, as_float, reads_shapes_only, remove_hook
from kaleido.techniques.ledger import OpLedger, check_new_name
from kaleido.techniques.method_report import MethodReport
from kaleido.ops import BLOCK_KINDS
from kaleido.techniques.shapes import CallGemm, ModelShapes


class TechniqueHandle(Protocol):
    """What applying any technique returns (``kaleido.apply``, ``Method.apply``): this module's
    :class:`MethodHandle`, Kaleido's :class:`~kaleido.techniques.kaleido_reuse.method.KaleidoHandle` (a
    ``MethodHandle``) and a stack's :class:`~kaleido.techniques.stack.StackHandle`."""

    removed: bool
    records_trace: bool

    def report(self) -> MethodReport: ...

    def simulator_traces(self) -> dict: ...

    def recorded_trace(self) -> Any: ...

    def summary(self) -> str: ...

    def remove(self) -> None: ...


class AppliedMethod(Protocol):
    """What a handle reads of the technique it applies (a :class:`kaleido.techniques.base.Method`): its name,
    its settings and the op kinds it claims."""

    name: str
    claims: Any

    def settings_dict(self) -> dict: ...

#: What the handle and the methods announce to the handle's observers (:meth:`MethodHandle.notify`) -> the arguments.
EVENTS: dict[str, str] = {
    "attention keep-mask": "keep (B, H, queries, keys) bool: the (query, key) pairs a self-attention core computes",
    "call planned": "gemms (list[CallGemm]): every block GEMM of the call that starts, each charged as skipped",
    "gemm ran": "gemm (CallGemm), taken (bool): a planned GEMM ran; taken: the method records its counts itself",
}


class MethodHandle:
    """A method applied to one transformer: observes calls, keeps counts, undoes itself.

    ``adapter``, ``attention_sites``, ``linear_sites`` (:meth:`gemm_linear_sites
    <kaleido.models.adapter.ModelAdapter.gemm_linear_sites>`) and ``shapes`` describe the
    model; ``call`` and ``gemms`` the call in progress.
    """

    def __init__(self, method: "AppliedMethod", transformer: torch.nn.Module) -> None:
        from kaleido.models.adapter import adapter_for

        self.method = method
        self.transformer = transformer
        self.adapter = adapter_for(transformer)
        self.adapter.check_model(transformer)
        self.attention_sites = self.adapter.attention_sites(transformer)
        self.linear_sites = self.adapter.gemm_linear_sites(transformer)
        self.shapes = ModelShapes.from_sites(transformer, self.adapter, self.attention_sites, self.linear_sites)
        self._index = self.shapes.index
        self.ledger = OpLedger(method.low_bits)
        self.call: CallInfo | None = None
        self.gemms: list[CallGemm] = []
        self.calls = 0
        self.extra: dict[str, Any] = {}
        self._undo: list[Callable[[], None]] = []
        self._taken: set[tuple[str, str]] = set()
        self._ran: set[int] = set()
        self._grids: dict[int, TokenGrid] = {}
        self._begun = False  # a generation is under way
        self._bare = False  # its calls run outside any cache context
        self._last_t: float | None = None
        self._step = -1
        self._slot = 0
        self._generation = 0
        self._steps = StepCounter()  # steps of calls under a cache context
        self._contexts_seen: list[str] = []  # context names of the generation, first appearance first: the slots
        self._new_generation_callbacks: list[Callable[[], None]] = []
        self._removed = False
        self.call_checks: list[Callable[[CallInfo], None]] = []
        self._observers: dict[str, dict[str, Callable[..., None]]] = {e: {} for e in EVENTS}
        self._report_extras: dict[str, Callable[[], dict]] = {}
        self._trace_providers: dict[str, Callable[[], Any]] = {}
        self._context_hook = self._register_context_hook()
        h = transformer.register_forward_pre_hook(self._pre_call, with_kwargs=True)
        self._undo.append(h.remove)
        # to_q runs exactly when its attention does (a cache serving the attention module skips both)
        for s in self.attention_sites:
            kinds = (f"{s.kind}_qk", f"{s.kind}_pv")
            self._undo.append(s.module.to_q.register_forward_hook(self._ran_hook(s.name, kinds, False)).remove)
        for s in self.linear_sites:
            self._undo.append(s.module.register_forward_hook(self._ran_hook(s.name, (s.op,), True)).remove)

    # -- observation ------------------------------------------------------------------
    def _register_context_hook(self):
        """A :class:`~kaleido.techniques.call_context.ContextHook` on the transformer, under a name of this handle's."""
        from diffusers.hooks import HookRegistry


        hook, name = ContextHook(), f"baseline_context_{id(self)}"
        HookRegistry.check_if_exists_or_initialize(self.transformer).register_hook(hook, name)
        self._undo.append(lambda: remove_hook(self.transformer, name))
        return hook

    def _new_generation(self) -> None:
        if self._begun:
            self._generation += 1
        self._begun = True
        self._steps.clear()
        self._contexts_seen.clear()
        for cb in self._new_generation_callbacks:
            cb()

    def _step_and_slot(self, t: float, ts: float | None) -> tuple[str | None, int | None]:
        """Set the step and slot of the call starting now (see the module docstring); its context's name and
        number of steps (``None`` outside a context)."""
        bare = self._context_hook.contexts.current is None
        switched = self._begun and bare != self._bare  # calls outside contexts after calls in one, or back
        self._bare = bare
        if bare:  # the timestep rule
            if not self._begun or switched or t > self._last_t:
                self._new_generation()
                self._step, self._slot = 0, 0
            elif t == self._last_t:
                self._slot += 1
            else:
                self._step += 1
                self._slot = 0
            self._last_t = t
            return None, None
        name, step_index, num_steps = self._context_hook.contexts.describe()
        if not self._begun or switched or self._steps.restarts(name, step_index, ts):
            self._new_generation()
        self._step = self._steps.step(name, step_index)
        self._steps.record(name, self._step, ts)
        if name not in self._contexts_seen:
            self._contexts_seen.append(name)
        self._slot = self._contexts_seen.index(name)
        self._last_t = t
        return name, num_steps

    def _pre_call(self, module, args, kwargs):
        inputs = self.adapter.bound_inputs(module, args, kwargs)
        grid = self.adapter.grid(module, inputs)
        B, L = self.adapter.batch_size(inputs), self.adapter.text_len(inputs)
        ts = as_float(self.adapter.timestep(inputs))
        t = 0.0 if ts is None else ts
        context, num_steps = self._step_and_slot(t, ts)
        self.call = CallInfo(grid, self._step, t, context, num_steps, batch=B, text_len=L, slot=self._slot,
                             generation=self._generation)
        self.calls += 1
        self.gemms = self.shapes.gemms(B, grid.n_grid, L)
        self._ran = set()
        self._grids = {}
        totals: dict[str, int] = {}
        for g in self.gemms:
            totals[g.kind] = totals.get(g.kind, 0) + g.macs
        for k in BLOCK_KINDS:
            if totals.get(k):
                self.ledger.add(k, skipped=totals[k])
        self.notify("call planned", self.gemms)
        for check in self.call_checks:
            check(self.call)
        return None

    def _ran_hook(self, site: str, kinds: tuple[str, ...], check_rows: bool):
        idx = [self._index[(site, k)] for k in kinds]

        def hook(module, inputs, output):
            if self.call is None:
                return None
            for i in idx:
                g = self.gemms[i]
                if i in self._ran:
                    raise ValueError(f"{self.method.name}: {site} ran twice in one transformer call; the "
                                     "accounting expects each block module once per call")
                if check_rows:
                    self._check_rows(g, inputs[0])
                self._ran.add(i)
                taken = (site, g.kind) in self._taken
                if taken:
                    self.ledger.uncharge(g.kind, g.macs)
                else:
                    self.ledger.ran(g.kind, g.macs)
                self.notify("gemm ran", g, taken)
            return None

        return reads_shapes_only(hook)  # it reads the rows' count only: Kaleido may decide the operand in place

    def _check_rows(self, g: CallGemm, x: torch.Tensor) -> None:
        rows = x.numel() // max(1, x.shape[-1])
        if rows != g.batch * g.rows or x.shape[-1] != g.K:
            c = self.call
            raise ValueError(
                f"{self.method.name}: {g.site} ran on {rows} rows of {x.shape[-1]} channels, but the call's shapes "
                f"(batch {c.batch}, {c.grid.n_grid} video and {c.text_len} text tokens) plan {g.batch * g.rows} "
                f"{g.seq} rows of {g.K}: the model adapter's sites do not fit this call"
            )

    def take_over(self, site: str, kinds: Iterable[str]) -> None:
        """The method records the ``kinds`` GEMMs of ``site`` itself from now on (a kind it claims)."""
        claimed = {k for _, k in self.method.claims}
        for k in kinds:
            if (site, k) not in self._index:
                raise ValueError(f"{self.method.name}: {site} has no {k} GEMM")
            if k not in claimed:
                raise ValueError(f"{self.method.name}: takes over {k} at {site} but does not claim {k}")
            self._taken.add((site, k))

    def sequence_grid(self, seq_len: int, where: str) -> TokenGrid:
        """The grid of a sequence of ``seq_len`` tokens in the call in progress (text where the model puts it)."""
        if self.call is None:
            raise ValueError(f"{self.method.name}: {where} ran outside a call of the transformer it was applied to; "
                             "call the transformer itself (not one block)")
        g = self._grids.get(seq_len)
        if g is None:
            g = self._grids[seq_len] = self.adapter.sequence_grid(self.call.grid, seq_len, where)
        return g

    def feed_forwards(self) -> list[tuple[str, int, torch.nn.Module]]:
        """``(name, layer, module)`` of the model's diffusers ``FeedForward`` modules (from the linear sites)."""
        from kaleido.models.adapter import feed_forwards

        return feed_forwards(self.transformer, self.linear_sites)

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
        """Call ``fn(*args)`` whenever ``event`` (:data:`EVENTS`) is announced; undone by :meth:`remove`."""
        observers = self._event(event)
        check_new_name(f"{event!r} observer", name, observers)
        observers[name] = fn
        self.add_undo(lambda: observers.pop(name, None))

    def notify(self, event: str, *args: Any) -> None:
        """Announce ``event`` (:data:`EVENTS`) with ``args`` to every observer of it, in registration order."""
        for fn in self._event(event).values():
            fn(*args)

    def register_report_extra(self, name: str, fn: Callable[[], dict]) -> None:
        """:meth:`report` adds the entries of ``fn()`` to ``extra`` (after the handle's own), also after removal."""
        check_new_name("report extra", name, self._report_extras)
        self._report_extras[name] = fn

    def register_trace_provider(self, name: str, fn: Callable[[], Any]) -> None:
        """:meth:`accel_trace` returns ``fn()`` (a recorder's ``ReuseTrace``); one provider per handle."""
        if self._trace_providers:
            raise ValueError(f"trace provider {name!r}: this handle already has {sorted(self._trace_providers)}; "
                             "a handle records one trace")
        check_new_name("trace provider", name, self._trace_providers)
        self._trace_providers[name] = fn

    # -- results ----------------------------------------------------------------------
    def report(self) -> MethodReport:
        r = MethodReport(self.method.name, self.method.settings_dict(), self.ledger.op_counts(), self.calls,
                         dict(self.extra))
        for fn in self._report_extras.values():
            r.extra.update(fn())
        return r

    @property
    def has_accel_trace(self) -> bool:
        """Whether a recorder answers :meth:`accel_trace` (the accelerator baselines attach one)."""
        return bool(self._trace_providers)

    def accel_trace(self):
        """The :class:`~kaleido.trace.ReuseTrace` of the method's decisions, from its recorder."""
        if not self._trace_providers:
            raise ValueError(f"{self.method.name} records no accelerator trace; accel_trace() serves the methods "
                             "that attach a recorder (kaleido.techniques.accel_trace: adaptiv, exion, cambricon_d)")
        (fn,) = self._trace_providers.values()
        return fn()

    def simulator_traces(self) -> dict:
        """The traces of this generation a simulator replays, by kind: ``"accel"`` (an accelerator baseline's
        recorder, :meth:`accel_trace`) and, on Kaleido's handle, ``"kaleido"`` (its :class:`ReuseTrace`).  The
        technique never builds a simulator profile itself: the comparison does, through ``kaleido.hw``."""
        return {"accel": self.accel_trace()} if self._trace_providers else {}

    @property
    def records_trace(self) -> bool:
        """Whether the method records a trace of its decisions (:meth:`recorded_trace`)."""
        return self.has_accel_trace

    def recorded_trace(self):
        """The :class:`~kaleido.trace.ReuseTrace` of what the method decided, if it records one (an accelerator
        baseline's recorder; Kaleido's own trace on its handle), else ``None``; also after :meth:`remove`."""
        return self.accel_trace() if self._trace_providers else None

    def summary(self) -> str:
        """One line: what the method watches and decides on the transformer."""
        settings = ", ".join(f"{k}={v}" for k, v in self.method.settings_dict().items())
        return (f"{self.method.name} applied to {type(self.transformer).__name__} ({settings}): "
                f"{len(self.attention_sites)} attention modules and {len(self.linear_sites)} linear layers observed; "
                f"decides {', '.join(sorted({k for _, k in self.method.claims})) or 'no op kind itself'}")

    @property
    def removed(self) -> bool:
        """Whether :meth:`remove` ran (the transformer no longer carries this method)."""
        return self._removed

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
