"""The one interface every baseline implements, and the MAC bookkeeping they share.

A :class:`Method` is a technique with validated settings.  ``method.apply(transformer)``
patches a diffusers vDiT transformer of any family Kaleido has an adapter for
(:func:`kaleido.integrations.registry.adapter_for`: Wan, HunyuanVideo, CogVideoX) in place
and returns a :class:`MethodHandle`; ``handle.remove()`` restores the model exactly, and
``handle.report()`` says what the technique computed, per op kind, in the same
8-bit-equivalent MAC units as Kaleido's :class:`~kaleido.reuse.OpCounts`.

Sites and shapes come from the adapter, as they do for Kaleido: its attention sites
(module, layer, ``self`` / ``cross``, which tokens the queries and keys are) and its block
linears (:meth:`~kaleido.integrations.registry.ModelAdapter.gemm_linear_sites`: module,
layer, op kind, which tokens the rows are).  :class:`ModelShapes` turns them and a call's
batch ``B``, video tokens ``S`` and text tokens ``L`` into the call's GEMMs (:class:`Gemm`),
so a call's dense MACs are right on every family: Wan's cross-attention over ``L`` text
keys, HunyuanVideo's joint ``[video; text]`` attention over ``S + L`` tokens with its
single-stream q/k/v and fused ``proj_out`` on the joint rows, CogVideoX's ``[text; video]``.

Op kinds (:data:`kaleido.ops.ALL_BLOCK_OPS`, the names Kaleido's traces use)::

    self_qk, self_pv            self-attention q.k^T and P.V   (B*heads*Sq*Sk*head_dim each)
    cross_qk, cross_pv          cross-attention q.k^T and P.V  (B*heads*S*L*head_dim each)
    proj_q, proj_k, proj_v,     self-attention q/k/v/out projections (B*rows*C_in*C_out each)
    proj_out
    cross_proj_q, cross_proj_out  cross-attention q and out projections (video tokens)
    cross_proj_kv               cross-attention k and v projections of the L text tokens
    ffn_in, ffn_out             the feed-forward's two linears
    fused_out                   HunyuanVideo's single-stream proj_out(cat[attention, MLP])
    estimate                    work a method adds to decide what to skip (pooled scores,
                                sampled rows, token matching, predictions); it has no
                                dense counterpart and is charged on top

Accounting.  Every transformer call is charged all its GEMMs as skipped when it starts
(the ``"call planned"`` event).  A forward hook on every linear site, and on every
attention site's ``to_q`` (which runs exactly when the attention does), sees the GEMMs
that really run (``"gemm ran"``): a GEMM of a site the method took over
(:meth:`MethodHandle.take_over`: its attention core's sites, its differential linears...)
is then recorded by the method itself - ``mac8`` / ``mac_low`` / ``skipped`` from the work
it did (kept blocks, merged token counts, non-zero deltas...) - and every other GEMM that
runs counts as computed.  So a step cache that returns a cached output is charged nothing
for it (skipped), stacked or alone, and ``computed + skipped`` of every op kind is the
call's dense count.  Only the transformer blocks' GEMMs the adapter names are counted
(patch embedding, time/text embedders, text-side streams of dual-stream blocks and the
output head are left out for every method alike).  A linear that runs on other rows than
the call's shapes plan raises ``ValueError`` (the accounting would be wrong).

Steps and slots.  The handle registers a :class:`~kaleido.integrations.grid.ContextHook`
on the transformer, so it sees the cache context the pipeline sets around each call
(``with transformer.cache_context("cond", step_index=i, ...)``).  Under a context, the
call's step follows Kaleido's own rule (:class:`~kaleido.integrations.state.StepCounter`:
the context's ``step_index``, else the number of earlier calls in that context; a step
index or timestep that goes back up starts a new generation), and its slot is the order
in which its context's name first appeared in the generation (``"cond"`` 0, ``"uncond"``
1 in every diffusers pipeline, which calls cond first).  A call outside any context (a
bare transformer call) falls back to the timestep rule: a repeated timestep is the next
slot of the same step, a lower one the next step, a higher one a new generation (so does
a bare call after calls under a context, and the other way round).

Observers.  What records a method's decisions (the accelerator baselines' trace
recorder, :mod:`.accel_trace`) attaches by name, never by replacing the handle's or the
ledger's functions: :meth:`OpLedger.add_observer` sees every count added,
:meth:`MethodHandle.observe` sees what the handle and the method announce with
:meth:`MethodHandle.notify` (:data:`EVENTS`), :meth:`MethodHandle.register_report_extra`
adds entries to ``report().extra`` and :meth:`MethodHandle.register_trace_provider`
answers :meth:`MethodHandle.accel_trace`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable

import torch

from kaleido.ops import ALL_BLOCK_OPS, OPS, UNIT_OPS, OpKind
from kaleido.reuse import OpCounts, TokenGrid

#: The ledger's op kinds: every block GEMM kind of the supported families (:data:`kaleido.ops.ALL_BLOCK_OPS`).
OP_KINDS: tuple[str, ...] = tuple(k.value for k in ALL_BLOCK_OPS)
ESTIMATE = "estimate"
#: The units of a Wan-style block (self-attention, cross-attention, FFN) and the op kinds each covers.
UNIT_KINDS: dict[str, tuple[str, ...]] = {u: tuple(k.value for k in ops) for u, ops in UNIT_OPS.items()}
#: What the handle and the methods announce to the handle's observers (:meth:`MethodHandle.notify`) -> the arguments.
EVENTS: dict[str, str] = {
    "attention keep-mask": "keep (B, H, queries, keys) bool: the (query, key) pairs a self-attention core computes",
    "call planned": "gemms (list[Gemm]): every block GEMM of the call that starts, each charged as skipped",
    "gemm ran": "gemm (Gemm), taken (bool): a planned GEMM ran; taken: the method records its counts itself",
}
#: Which tokens a GEMM's rows are (the adapter's vocabulary: kaleido.integrations.registry.SEQUENCES).
VIDEO, TEXT, JOINT = "video", "text", "joint"


def _check_new_name(what: str, name: str, taken) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} name must be a non-empty string, got {name!r}")
    if name in taken:
        raise ValueError(f"{what} {name!r} is already registered; pick another name or remove that one first")


def kind_unit(kind: str) -> str | None:
    """The block unit of op kind ``kind`` (``None`` for HunyuanVideo's ``fused_out``)."""
    return OPS[OpKind(kind)].unit


def claims_of(kinds: Iterable[str]) -> frozenset:
    """The ``(unit, op kind)`` claims of ``kinds`` (what :attr:`Method.claims` holds)."""
    return frozenset((kind_unit(k), k) for k in kinds)


@dataclass(frozen=True)
class Gemm:
    """One GEMM of one transformer call: ``batch x heads`` products of ``rows x K`` by ``K x n_cols``.

    ``site``: the module it belongs to (an attention site for q.k^T / P.V, else the linear);
    ``seq``: which tokens its rows are (``"video"``, ``"text"``, ``"joint"``).
    """

    layer: int
    kind: str
    site: str
    seq: str
    batch: int
    heads: int
    rows: int
    K: int
    n_cols: int

    @property
    def macs(self) -> int:
        return self.batch * self.heads * self.rows * self.K * self.n_cols


@dataclass(frozen=True)
class AttentionShape:
    """An attention site's dimensions (from its module) and which tokens its queries / keys are."""

    name: str
    layer: int
    kind: str  # "self" or "cross"
    queries: str
    keys: str
    heads: int
    head_dim: int
    value_dim: int


@dataclass(frozen=True)
class LinearShape:
    """A linear site's op kind, rows and dimensions."""

    name: str
    layer: int
    op: str
    rows: str
    in_features: int
    out_features: int


@dataclass(frozen=True)
class ModelShapes:
    """The dimensions of a transformer that decide its MAC counts, read through its model adapter."""

    model_class: str
    heads: int
    head_dim: int
    dim: int
    ffn_dim: int
    n_layers: int
    patch: tuple[int, int, int]
    rope_split: tuple[int, int, int] | None
    text_position: str
    attention: tuple[AttentionShape, ...]
    linears: tuple[LinearShape, ...]

    @classmethod
    def of(cls, transformer: torch.nn.Module) -> "ModelShapes":
        """The shapes of ``transformer`` (``ValueError`` in one line for a model without an adapter)."""
        from kaleido.integrations.registry import adapter_for

        adapter = adapter_for(transformer)
        adapter.check_model(transformer)
        return cls.from_sites(transformer, adapter, adapter.attention_sites(transformer),
                              adapter.gemm_linear_sites(transformer))

    @classmethod
    def from_sites(cls, transformer: torch.nn.Module, adapter, attention_sites, linear_sites) -> "ModelShapes":
        name = type(transformer).__name__
        att = []
        for s in attention_sites:
            m = s.module
            if getattr(m, "fused_projections", False):
                raise ValueError(f"{name}: {s.name} has fused q/k/v projections; call "
                                 "transformer.unfuse_qkv_projections() first (the accounting reads to_q/to_k/to_v)")
            to_q, to_v = getattr(m, "to_q", None), getattr(m, "to_v", None)
            if not isinstance(to_q, torch.nn.Linear) or not isinstance(to_v, torch.nn.Linear):
                raise ValueError(f"{name}: {s.name} has no to_q / to_v linears; the baselines need diffusers' "
                                 "Attention modules")
            heads = int(m.heads)
            att.append(AttentionShape(s.name, s.layer, s.kind, s.queries, s.keys, heads,
                                      to_q.out_features // heads, to_v.out_features // heads))
        lin = [LinearShape(s.name, s.layer, s.op, s.rows, int(s.module.in_features), int(s.module.out_features))
               for s in linear_sites]
        ffn = [s.out_features for s in lin if s.op == OpKind.FFN_IN.value]
        heads, hd = int(transformer.config.num_attention_heads), adapter.head_dim(transformer)
        rope = adapter.rope_split(transformer)
        return cls(name, heads, hd, heads * hd, ffn[0] if ffn else 0, adapter.num_layers(transformer),
                   tuple(adapter.patch_sizes(transformer)), None if rope is None else tuple(rope),
                   adapter.text_position, tuple(att), tuple(lin))

    def gemms(self, batch: int, n_video: int, n_text: int) -> list[Gemm]:
        """Every block GEMM of one call with ``batch`` sequences of ``n_video`` video and ``n_text`` text tokens:
        q.k^T and P.V of each attention site, then each linear site (the order of :attr:`index`)."""
        n = {VIDEO: n_video, TEXT: n_text, JOINT: n_video + n_text}
        out = []
        for a in self.attention:
            sq, sk = n[a.queries], n[a.keys]
            out.append(Gemm(a.layer, f"{a.kind}_qk", a.name, a.queries, batch, a.heads, sq, a.head_dim, sk))
            out.append(Gemm(a.layer, f"{a.kind}_pv", a.name, a.queries, batch, a.heads, sq, sk, a.value_dim))
        for s in self.linears:
            out.append(Gemm(s.layer, s.op, s.name, s.rows, batch, 1, n[s.rows], s.in_features, s.out_features))
        return out

    @property
    def index(self) -> dict[tuple[str, str], int]:
        """``(site, op kind)`` -> position of its GEMM in :meth:`gemms`."""
        keys = [(a.name, f"{a.kind}_{op}") for a in self.attention for op in ("qk", "pv")]
        keys += [(s.name, s.op) for s in self.linears]
        return {k: i for i, k in enumerate(keys)}

    def dense_macs(self, batch: int, n_video: int, n_text: int) -> dict[str, int]:
        """Dense MACs per op kind of one call (see :meth:`gemms`)."""
        out: dict[str, int] = {}
        for g in self.gemms(batch, n_video, n_text):
            out[g.kind] = out.get(g.kind, 0) + g.macs
        return out


def merged_shape(gemms: Iterable[Gemm]) -> tuple[int, int, int, int, int]:
    """``(batch, heads, rows, K, n_cols)`` of GEMMs of one layer and op kind streamed as one
    (e.g. Wan's text-side k and v projections: one ``L x dim`` operand against both weights)."""
    gs = list(gemms)
    g0 = gs[0]
    if any((g.batch, g.heads, g.rows, g.K) != (g0.batch, g0.heads, g0.rows, g0.K) for g in gs):
        raise ValueError(f"layer {g0.layer} {g0.kind}: its GEMMs {[g.site for g in gs]} differ in rows or K")
    return g0.batch, g0.heads, g0.rows, g0.K, sum(g.n_cols for g in gs)


@dataclass
class CallInfo:
    """What the handle knows about the transformer call in progress."""

    grid: TokenGrid
    batch: int
    text_len: int
    timestep: float
    step: int  # denoising step index within the current generation (0-based)
    slot: int  # 0 for the first call of a step (cond), 1 for the second (uncond), ...
    generation: int  # counts generations (a new one starts when the step or timestep goes back up)
    context: str | None = None  # the pipeline's cache context name (None: a call outside any context)
    num_steps: int | None = None  # the number of steps, when the pipeline passes it to the context


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

    def _charged(self, kind: str, macs: int) -> list[int]:
        c = self._c.get(kind)
        if c is None or c[2] < macs:
            raise ValueError(f"{kind}: {macs} MACs ran that the call did not charge as skipped")
        return c

    def ran(self, kind: str, macs: int) -> None:
        """``macs`` of ``kind`` charged as skipped at the call's start ran: computed (no observer sees it;
        the handle announces it as ``"gemm ran"``)."""
        c = self._charged(kind, macs)
        c[0] += int(macs)
        c[2] -= int(macs)

    def uncharge(self, kind: str, macs: int) -> None:
        """Take back ``macs`` of ``kind`` charged as skipped: the method that ran them records them itself."""
        self._charged(kind, macs)[2] -= int(macs)

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
    """A method applied to one transformer: observes calls, keeps counts, undoes itself.

    ``adapter``, ``attention_sites``, ``linear_sites`` (:meth:`gemm_linear_sites
    <kaleido.integrations.registry.ModelAdapter.gemm_linear_sites>`) and ``shapes`` describe the
    model; ``call`` and ``gemms`` the call in progress.
    """

    def __init__(self, method: "Method", transformer: torch.nn.Module) -> None:
        from kaleido.integrations.registry import adapter_for
        from kaleido.integrations.state import StepCounter

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
        self.gemms: list[Gemm] = []
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
        """A :class:`~kaleido.integrations.grid.ContextHook` on the transformer, under a name of this handle's."""
        from diffusers.hooks import HookRegistry

        from kaleido.integrations.grid import ContextHook, remove_hook

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
        from kaleido.integrations.state import as_float

        inputs = self.adapter.bound_inputs(module, args, kwargs)
        grid = self.adapter.grid(module, inputs)
        B, L = self.adapter.batch_size(inputs), self.adapter.text_len(inputs)
        ts = as_float(self.adapter.timestep(inputs))
        t = 0.0 if ts is None else ts
        context, num_steps = self._step_and_slot(t, ts)
        self.call = CallInfo(grid, B, L, t, self._step, self._slot, self._generation, context, num_steps)
        self.calls += 1
        self.gemms = self.shapes.gemms(B, grid.n_grid, L)
        self._ran = set()
        self._grids = {}
        totals: dict[str, int] = {}
        for g in self.gemms:
            totals[g.kind] = totals.get(g.kind, 0) + g.macs
        for k in OP_KINDS:
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

        return hook

    def _check_rows(self, g: Gemm, x: torch.Tensor) -> None:
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
        from kaleido.integrations.registry import feed_forwards

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
    ``__post_init__``), ``claims`` (the ``(unit, op kind)`` pairs whose MACs they may
    record themselves, at the sites they :meth:`~MethodHandle.take_over`) and implement
    :meth:`_install`.
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
