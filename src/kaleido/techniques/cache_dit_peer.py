"""cache-dit's DBCache (vipshop/cache-dit, a peer library of step caches) as a technique, through cache-dit's public API.

DBCache ("dual block cache") runs the first ``Fn_compute_blocks`` blocks of a block list on
every call and compares their residual with the one of the last call that computed
everything; while the relative L1 difference stays under ``residual_diff_threshold`` (after
``max_warmup_steps`` steps, at most ``max_cached_steps`` / ``max_continuous_cached_steps``),
the middle blocks are skipped and their cached residual is added instead, and the last
``Bn_compute_blocks`` blocks run to correct it.  Its TaylorSeer calibrator (``taylorseer``,
``taylorseer_order``) forecasts the cached residual; a steps mask (``steps_mask``: 1 compute,
0 cache, one per step) forces the steps to compute (``steps_mask_policy="static"``: the 0
steps always cache).

Applied with ``cache_dit.enable_cache(BlockAdapter(transformer=..., blocks=...,
forward_pattern=...), cache_config=DBCacheConfig(...), calibrator_config=...)`` on the
transformer alone (cache-dit's persistent, transformer-only contexts), with the block lists
and each list's :class:`cache_dit.ForwardPattern` from the model adapter's family
(:data:`FORWARD_PATTERNS`: Wan's blocks return the hidden states only, ``Pattern_2``;
HunyuanVideo's dual- and single-stream lists and CogVideoX's blocks return ``(hidden,
encoder hidden)``, ``Pattern_0``; each list gets its own cache context, as cache-dit's own
adapters do).  Removed with ``cache_dit.disable_cache``; a new generation refreshes the
contexts (``cache_dit.refresh_context``).  A family without a known pattern, blocks fewer
than ``Fn + Bn``, a transformer that already carries cache-dit or diffusers hooks (cache-dit
restores the forward it found by rebinding it, which a hook's wrapper does not allow:
stack cache_dit *before* Kaleido), and a pipeline whose calls do not alternate as
``separate_cfg`` says, are refused in one line.

``separate_cfg``: whether the pipeline calls the transformer twice per step, cond then
uncond (cache-dit then keeps a cache per branch and counts steps per pair of calls).
``None``: what cache-dit's own adapter says for the family (Wan: yes; HunyuanVideo,
CogVideoX: no).  A pipeline run with ``guidance_scale=1`` calls once per step: set
``separate_cfg=False``.

Accounting.  The report's MACs are read from cache-dit's own statistics
(``cache_dit.summary(transformer)``: per block list, the steps it served from the cache, for
the cond and the uncond branch): a call whose list was served computed its first Fn and last
Bn blocks, every other call all of them.  The handle's execution-based count (the GEMMs whose
modules ran, as every baseline keeps it) must agree exactly, or the report refuses.

Needs the ``peers`` extra: ``pip install 'kaleido-vdit[peers]'``.  cache-dit logs at
``CACHE_DIT_LOG_LEVEL`` (set to ``error`` here unless already set).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from kaleido.reuse import OpCounts

from kaleido.techniques.base import Method, check_range
from kaleido.techniques.call_context import CallInfo
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.method_report import MethodReport
from kaleido.techniques.registry import STEP_CACHE, register_technique

#: the command that installs cache-dit with Kaleido
PEERS_INSTALL = "pip install 'kaleido-vdit[peers]'"
#: cache-dit's ForwardPattern of each block list of each model adapter: which hidden states a block takes and returns
FORWARD_PATTERNS: dict[str, dict[str, str]] = {
    "WanAdapter": {"blocks": "Pattern_2"},  # (hidden, encoder hidden, ...) -> hidden
    "HunyuanVideoAdapter": {"transformer_blocks": "Pattern_0", "single_transformer_blocks": "Pattern_0"},
    "CogVideoXAdapter": {"transformer_blocks": "Pattern_0"},  # -> (hidden, encoder hidden)
}
#: the adapters whose pipelines call the transformer twice per step (cond, uncond) by default: cache-dit's own
#: adapters set ``has_separate_cfg`` for them
SEPARATE_CFG_FAMILIES = frozenset({"WanAdapter"})


def import_cache_dit():
    """The ``cache_dit`` module (``ValueError`` in one line naming the install command when it is missing)."""
    os.environ.setdefault("CACHE_DIT_LOG_LEVEL", "error")  # its INFO and WARNING lines go to stdout otherwise
    try:
        import cache_dit
    except ImportError:
        raise ValueError(f"cache_dit: the cache-dit package is not installed; install it with {PEERS_INSTALL}") from None
    return cache_dit


@dataclass(frozen=True)
class CacheDiTSettings:
    """cache-dit's DBCache settings (its ``DBCacheConfig`` names), its TaylorSeer calibrator and steps mask."""

    Fn_compute_blocks: int = 1  # first blocks always computed (cache-dit's own default, 8, is for 30-60-block models)
    Bn_compute_blocks: int = 0  # last blocks always computed (correct the cached residual)
    residual_diff_threshold: float = 0.08  # relative L1 change of the Fn residual under which the middle is cached
    max_warmup_steps: int = 8  # steps that always compute (cache-dit's default)
    warmup_interval: int = 1  # within the warm-up, compute every this many steps
    max_cached_steps: int = -1  # at most this many cached steps per generation (-1: no limit)
    max_continuous_cached_steps: int = -1  # at most this many cached steps in a row (-1: no limit)
    taylorseer: bool = False  # forecast the cached residual with cache-dit's TaylorSeer calibrator
    taylorseer_order: int = 1  # its Taylor expansion order
    #: 1 (compute) / 0 (cache) per step, cache-dit's ``steps_computation_mask`` (``cache_dit.steps_mask`` makes one)
    steps_mask: tuple | None = None
    steps_mask_policy: str = "dynamic"  # "dynamic": a 0 step caches when DBCache allows; "static": it always caches
    separate_cfg: bool | None = None  # cond and uncond as two calls per step (None: the family's default)

    def __post_init__(self) -> None:
        for name, lo in (("Fn_compute_blocks", 1), ("Bn_compute_blocks", 0), ("max_warmup_steps", 0),
                         ("warmup_interval", 1), ("max_cached_steps", -1), ("max_continuous_cached_steps", -1),
                         ("taylorseer_order", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"cache_dit: {name}={value!r} must be a whole number")
            check_range("cache_dit", name, value, lo, 10_000)
        check_range("cache_dit", "taylorseer_order", self.taylorseer_order, 1, 4)
        check_range("cache_dit", "residual_diff_threshold", self.residual_diff_threshold, 0.0, 100.0,
                    "0 never caches, 1 and more cache whenever DBCache's other limits allow")
        for name in ("taylorseer",) + (("separate_cfg",) if self.separate_cfg is not None else ()):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"cache_dit: {name}={getattr(self, name)!r} must be true or false")
        if self.steps_mask_policy not in ("dynamic", "static"):
            raise ValueError(f"cache_dit: steps_mask_policy={self.steps_mask_policy!r}; allowed: 'dynamic', 'static'")
        if self.steps_mask is not None:
            mask = self.steps_mask
            if isinstance(mask, (str, bytes)) or not hasattr(mask, "__iter__"):
                raise ValueError(f"cache_dit: steps_mask={mask!r} must be a list of 1 (compute) / 0 (cache), one per step")
            mask = tuple(mask)
            if not mask or any(isinstance(m, bool) or m not in (0, 1) for m in mask):
                raise ValueError(f"cache_dit: steps_mask={list(mask)} must be 1 (compute) / 0 (cache), one per step")
            object.__setattr__(self, "steps_mask", tuple(int(m) for m in mask))


def _block_lists(adapter, transformer: torch.nn.Module) -> list[tuple[str, torch.nn.ModuleList, str]]:
    """``(attribute, block list, forward pattern name)`` of each of the model's block lists (its model adapter's),
    refused in one line for a family without known patterns."""
    family = type(adapter).__name__
    patterns = FORWARD_PATTERNS.get(family)
    if patterns is None or set(patterns) != set(adapter.block_lists):
        raise ValueError(f"cache_dit: no cache-dit forward pattern is known for {type(transformer).__name__}'s blocks "
                         f"({family}: {list(adapter.block_lists)}); supported: {sorted(FORWARD_PATTERNS)}")
    return [(attr, getattr(transformer, attr), patterns[attr]) for attr in adapter.block_lists]


def _plain_forward(module: torch.nn.Module) -> bool:
    """Whether ``module`` runs its class's own forward (none on the instance, or that one rebound to it, as a
    removed hook leaves it)."""
    fwd = vars(module).get("forward")
    return fwd is None or (getattr(fwd, "__func__", None) is type(module).forward and fwd.__self__ is module)


def _refuse_unwrappable(method: str, transformer: torch.nn.Module, lists, s: CacheDiTSettings, cache_dit) -> None:
    name = type(transformer).__name__
    if cache_dit.BlockAdapter.is_cached(transformer):
        raise ValueError(f"{method}: this {name} already has cache-dit enabled; call cache_dit.disable_cache first")
    hooks = getattr(getattr(transformer, "_diffusers_hook", None), "hooks", None)
    if hooks or not _plain_forward(transformer):
        what = f"diffusers hooks {sorted(hooks)}" if hooks else "a replaced forward"
        raise ValueError(f"{method}: this {name} already has {what}; cache-dit restores the forward it finds by "
                         "rebinding it, so apply cache_dit first (before Kaleido in a stack) or remove the others")
    fn_bn = f"Fn_compute_blocks={s.Fn_compute_blocks} + Bn_compute_blocks={s.Bn_compute_blocks}"
    for attr, blocks, _ in lists:
        if s.Fn_compute_blocks + s.Bn_compute_blocks > len(blocks):
            raise ValueError(f"{method}: {fn_bn} exceed the {len(blocks)} blocks of {name}.{attr}; choose "
                             f"Fn + Bn <= {len(blocks)} (cache-dit's default Fn=8 is for 30-60-block models)")
    if all(s.Fn_compute_blocks + s.Bn_compute_blocks == len(blocks) for _, blocks, _ in lists):
        sizes = ", ".join(f"{attr}: {len(blocks)}" for attr, blocks, _ in lists)
        raise ValueError(f"{method}: with {fn_bn} DBCache computes every block of {name} ({sizes}) on every call, so "
                         "it would skip nothing; it needs more blocks per list than Fn + Bn (Fn >= 1)")


def _configs(s: CacheDiTSettings, separate_cfg: bool, cache_dit) -> dict[str, Any]:
    """``enable_cache``'s ``cache_config`` and ``calibrator_config`` for ``s``."""
    cache_config = cache_dit.DBCacheConfig(
        Fn_compute_blocks=s.Fn_compute_blocks, Bn_compute_blocks=s.Bn_compute_blocks,
        residual_diff_threshold=float(s.residual_diff_threshold), max_warmup_steps=s.max_warmup_steps,
        warmup_interval=s.warmup_interval, max_cached_steps=s.max_cached_steps,
        max_continuous_cached_steps=s.max_continuous_cached_steps, enable_separate_cfg=separate_cfg,
        steps_computation_mask=None if s.steps_mask is None else list(s.steps_mask),
        steps_computation_policy=s.steps_mask_policy)
    calibrator = (cache_dit.TaylorSeerCalibratorConfig(taylorseer_order=s.taylorseer_order) if s.taylorseer else None)
    return dict(cache_config=cache_config, calibrator_config=calibrator)


class _CacheDiTHandle(MethodHandle):
    """The handle of cache-dit on one transformer: cache-dit's statistics per generation, its removal last."""

    def __init__(self, method: "CacheDiT", transformer, cache_dit, block_adapter, lists, separate_cfg: bool,
                 forward_before) -> None:
        super().__init__(method, transformer)
        self._cache_dit = cache_dit
        self._block_adapter = block_adapter
        self._forward_before = forward_before
        self._separate_cfg = separate_cfg
        # (attribute, its cache-dit context name, its layers, the layers a served call computes)
        fn, bn = method.settings.Fn_compute_blocks, method.settings.Bn_compute_blocks
        names = block_adapter.unique_blocks_name[0]
        self._lists = []
        first = 0
        for (attr, blocks, _), context in zip(lists, names):
            layers = range(first, first + len(blocks))
            kept = frozenset(layers[:fn]) | frozenset(layers[len(layers) - bn:])
            self._lists.append((attr, context, frozenset(layers), kept))
            first += len(blocks)
        self._finished: list[tuple[list, dict]] = []  # (calls, statistics) of every generation that ended
        self._calls: list[tuple[int, int, int]] = []  # (batch, video tokens, text tokens) of this generation's calls
        self.call_checks.append(self._check_and_record)
        self.on_new_generation(self._next_generation)
        self.extra["matched"] = [attr for attr, *_ in self._lists]

    # -- calls --------------------------------------------------------------------
    def _check_and_record(self, call: CallInfo) -> None:
        """Refuse a call whose place cache-dit would count otherwise than the pipeline runs it; record its shape."""
        i = len(self._calls)
        if self._separate_cfg:
            expected = (i // 2, i % 2)
            if (call.step, call.slot) != expected:
                fix = "set separate_cfg=False (e.g. guidance_scale=1)" if call.slot == 0 else \
                    "this pipeline's calls do not alternate cond, uncond"
                raise ValueError(f"cache_dit: separate_cfg=True expects two transformer calls per step (cond, then "
                                 f"uncond), but call {i + 1} of this generation is step {call.step}, call {call.slot + 1} "
                                 f"of its step; {fix}")
        elif (call.step, call.slot) != (i, 0):
            raise ValueError(f"cache_dit: separate_cfg=False expects one transformer call per step, but call {i + 1} of "
                             f"this generation is call {call.slot + 1} of step {call.step} (cond and uncond as separate "
                             "calls); set separate_cfg=True")
        self._calls.append((call.batch, call.grid.n_grid, call.text_len))

    def _statistics(self) -> dict[str, dict[str, list[int]]]:
        """cache-dit's cached steps of this generation per block list: ``{attr: {"cond": [...], "uncond": [...]}}``."""
        try:
            stats = self._cache_dit.summary(self.transformer, logging=False)
        except Exception as e:  # noqa: BLE001 - cache-dit's own failure, said in one line
            raise ValueError(f"cache_dit: cache_dit.summary failed on {type(self.transformer).__name__}: "
                             f"{type(e).__name__}: {e}") from None
        by_context = {s.cache_options.get("name"): s for s in stats[:-1]}  # the last one is the transformer's
        out = {}
        for attr, context, _, _ in self._lists:
            s = by_context.get(context)
            if s is None:
                raise ValueError(f"cache_dit: cache_dit.summary has no statistics for {attr} (context {context})")
            out[attr] = {"cond": sorted(s.cached_steps), "uncond": sorted(s.cfg_cached_steps)}
        return out

    def _next_generation(self) -> None:
        """Keep the ending generation's calls and statistics; give cache-dit fresh contexts for the next one."""
        if not self._calls:
            return
        self._finished.append((self._calls, self._statistics()))
        self._calls = []
        self._cache_dit.refresh_context(self.transformer)

    # -- results ------------------------------------------------------------------
    def _served(self, stats: dict, attr: str, i: int) -> bool:
        """Whether cache-dit served block list ``attr`` from its cache on call ``i`` of a generation."""
        if self._separate_cfg:
            return i // 2 in stats[attr]["uncond" if i % 2 else "cond"]
        return i in stats[attr]["cond"]

    def _counts_from_statistics(self, generations) -> dict[str, OpCounts]:
        """MACs computed / skipped per op kind, as cache-dit's statistics say the calls ran."""
        computed: dict[str, int] = {}
        dense: dict[str, int] = {}
        for calls, stats in generations:
            for i, (B, S, L) in enumerate(calls):
                ran = set()
                for attr, _, layers, kept in self._lists:
                    ran |= kept if self._served(stats, attr, i) else layers
                for g in self.shapes.gemms(B, S, L):
                    dense[g.kind] = dense.get(g.kind, 0) + g.macs
                    computed[g.kind] = computed.get(g.kind, 0) + (g.macs if g.layer in ran else 0)
        lb = self.ledger.low_bits
        return {k: OpCounts(("total",), (computed[k],), (0,), (d - computed[k],), lb) for k, d in dense.items() if d}

    def report(self) -> MethodReport:
        base = super().report()
        generations = self._finished + ([(self._calls, self._statistics())] if self._calls and not self._removed else [])
        counts = self._counts_from_statistics(generations)
        ran = {k: (oc.total_mac8, oc.total_skipped) for k, oc in base.op_counts.items()}
        said = {k: (oc.total_mac8, oc.total_skipped) for k, oc in counts.items()}
        if ran != said:
            kind = next(k for k in sorted(set(ran) | set(said)) if ran.get(k) != said.get(k))
            raise ValueError(f"cache_dit: cache-dit's statistics account {kind} as (computed, skipped) "
                             f"{said.get(kind)} MACs but the blocks that ran give {ran.get(kind)}: the two accountings "
                             "disagree")
        extra = dict(base.extra)
        if generations:  # the last generation's cached steps, per block list and branch
            extra["cached_steps"] = generations[-1][1]
        extra["cached_calls"] = sum(any(self._served(st, a, i) for a, *_ in self._lists)
                                    for calls, st in generations for i in range(len(calls)))
        return MethodReport(base.method, base.settings, counts, base.calls, extra)

    def remove(self) -> None:
        if self._removed:
            return
        if self._calls:  # cache-dit's statistics go with its hooks
            self._finished.append((self._calls, self._statistics()))
            self._calls = []
        super().remove()  # the handle's hooks, registered after cache-dit's, first
        _disable(self._cache_dit, self._block_adapter, self.transformer, self._forward_before)


def _disable(cache_dit, block_adapter, transformer: torch.nn.Module, forward_before) -> None:
    """``cache_dit.disable_cache``, then the instance's forward as it was (cache-dit leaves the one it found rebound
    on the instance)."""
    cache_dit.disable_cache(block_adapter)
    if forward_before is None:
        vars(transformer).pop("forward", None)
    else:
        vars(transformer)["forward"] = forward_before


@register_technique(group=STEP_CACHE, requires=("cache_dit", PEERS_INSTALL))
class CacheDiT(Method):
    """cache-dit's DBCache; see the module docstring."""

    name = "cache_dit"
    Settings = CacheDiTSettings

    def apply(self, transformer: torch.nn.Module) -> _CacheDiTHandle:  # type: ignore[override]
        from kaleido.models.adapter import adapter_for

        adapter = adapter_for(transformer)  # a model without an adapter: Kaleido's one-line refusal
        adapter.check_model(transformer)
        lists = _block_lists(adapter, transformer)
        cache_dit = import_cache_dit()
        s = self.settings
        _refuse_unwrappable(self.name, transformer, lists, s, cache_dit)
        separate = s.separate_cfg if s.separate_cfg is not None else type(adapter).__name__ in SEPARATE_CFG_FAMILIES
        patterns = [getattr(cache_dit.ForwardPattern, p) for _, _, p in lists]
        forward_before = vars(transformer).get("forward")
        one = len(lists) == 1
        block_adapter = cache_dit.BlockAdapter(
            transformer=transformer, blocks=lists[0][1] if one else [b for _, b, _ in lists],
            forward_pattern=patterns[0] if one else patterns, check_forward_pattern=True, check_num_outputs=False)
        try:  # cache-dit first: the handle's own hooks wrap its forward, and come off before it
            block_adapter = cache_dit.enable_cache(block_adapter, **_configs(s, separate, cache_dit))
        except AssertionError as e:
            raise ValueError(f"cache_dit: cache-dit refused {type(transformer).__name__}'s blocks: {e}") from None
        try:
            return _CacheDiTHandle(self, transformer, cache_dit, block_adapter, lists, separate, forward_before)
        except Exception:
            _disable(cache_dit, block_adapter, transformer, forward_before)
            raise

    def _install(self, handle: MethodHandle) -> None:  # apply() does the work
        raise NotImplementedError
