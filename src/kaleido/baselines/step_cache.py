"""Step caching through diffusers' own hooks: Pyramid Attention Broadcast, FirstBlockCache, TaylorSeer.

Each method builds the diffusers config and calls ``transformer.enable_cache(config)``;
``remove()`` calls ``transformer.disable_cache()``.  Unlike diffusers, we check that the
module identifiers really match modules of the model and refuse to run when they match
nothing (TaylorSeer's default patterns match nothing on Wan, for instance): the matched
module names are listed in the report's ``extra["matched"]``.

Savings are measured, not assumed: the handle counts which of each block's units
(``attn1``, ``attn2``, ``ffn``) really computed on every call (see
:mod:`kaleido.baselines.base`); a unit served from the cache is charged nothing.
The caches' own state is reset at the start of every generation.

Pyramid Attention Broadcast keeps one iteration counter per attention module, shared
by every call: with Wan's separate cond/uncond calls it would hand the cond pass's
cached attention to the uncond pass, so it refuses pipelines with classifier-free
guidance run as two calls per step (use ``guidance_scale=1`` or another cache).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import Method, MethodHandle, check_range

#: Wan's self-attention and feed-forward modules (TaylorSeer's defaults match nothing there).
WAN_TAYLORSEER_IDENTIFIERS = (r"blocks\.\d+\.attn1", r"blocks\.\d+\.ffn")


def _enable(handle: MethodHandle, config) -> None:
    tr = handle.transformer
    if getattr(tr, "is_cache_enabled", False):
        raise ValueError(f"the transformer already has a diffusers cache ({type(tr._cache_config).__name__}); "
                         "call transformer.disable_cache() first")
    tr.enable_cache(config)
    handle.add_undo(tr.disable_cache)
    handle.on_new_generation(lambda: _reset_keeping_context(tr))


def _reset_keeping_context(transformer) -> None:
    """Reset diffusers' cache state for a new generation, from inside the transformer's forward.

    ``StateManager.reset`` also clears the cache context the pipeline has just set for
    this call, so the contexts are put back afterwards.
    """
    from diffusers.hooks import HookRegistry
    from diffusers.hooks.hooks import StateManager

    registry = HookRegistry.check_if_exists_or_initialize(transformer)
    saved = []
    for child in (registry, *registry._get_child_registries()):
        for hook in child.hooks.values():
            saved += [(a, a._context) for a in vars(hook).values() if isinstance(a, StateManager)]
    transformer._reset_stateful_cache(recurse=True)
    for manager, context in saved:
        manager.set_context(context)


@dataclass(frozen=True)
class PABSettings:
    self_skip_range: int = 2  # recompute self-attention every this many calls
    cross_skip_range: int | None = 4  # recompute cross-attention every this many calls (None: never skip)
    timestep_range: tuple = (100, 800)  # skip only while the timestep is inside (lo, hi)
    identifiers: tuple = ("blocks",)  # diffusers' re.search patterns for the blocks

    def __post_init__(self) -> None:
        check_range("pab", "self_skip_range", self.self_skip_range, 1, 1000)
        if self.cross_skip_range is not None:
            check_range("pab", "cross_skip_range", self.cross_skip_range, 1, 1000)
        lo, hi = tuple(self.timestep_range)
        if not lo < hi:
            raise ValueError(f"pab: timestep_range={self.timestep_range!r} needs lo < hi")
        object.__setattr__(self, "timestep_range", (float(lo), float(hi)))
        object.__setattr__(self, "identifiers", tuple(self.identifiers))


class PyramidAttentionBroadcast(Method):
    name = "pab"
    Settings = PABSettings

    def _install(self, handle: MethodHandle) -> None:
        from diffusers import PyramidAttentionBroadcastConfig

        s = self.settings
        matched = []
        for name, mod in handle.transformer.named_modules():
            if type(mod).__name__ != "WanAttention" or not any(re.search(i, name) for i in s.identifiers):
                continue
            if getattr(mod, "is_cross_attention", False) and s.cross_skip_range is None:
                continue
            matched.append(name)
        if not matched:
            raise ValueError(f"pab: identifiers {s.identifiers} match no attention module of this transformer")
        handle.extra["matched"] = matched
        cfg = PyramidAttentionBroadcastConfig(
            spatial_attention_block_skip_range=s.self_skip_range,
            spatial_attention_timestep_skip_range=s.timestep_range,
            spatial_attention_block_identifiers=s.identifiers,
            cross_attention_block_skip_range=s.cross_skip_range,
            cross_attention_timestep_skip_range=s.timestep_range,
            cross_attention_block_identifiers=s.identifiers,
            current_timestep_callback=lambda: handle.call.timestep,
        )
        _enable(handle, cfg)
        def refuse_two_calls_per_step(call) -> None:
            if call.slot > 0:
                raise ValueError(
                    "pab: this pipeline calls the transformer twice per step (cond/uncond); diffusers' PAB "
                    "shares one cache between both calls. Run with guidance_scale=1 or use fbcache/taylorseer"
                )

        handle.call_checks.append(refuse_two_calls_per_step)


@dataclass(frozen=True)
class FBCacheSettings:
    threshold: float = 0.05  # relative change of the first block's residual below which later blocks are skipped

    def __post_init__(self) -> None:
        check_range("fbcache", "threshold", self.threshold, 0.0, 100.0)


class FirstBlockCache(Method):
    name = "fbcache"
    Settings = FBCacheSettings

    def _install(self, handle: MethodHandle) -> None:
        from diffusers import FirstBlockCacheConfig

        n = len(handle.transformer.blocks)
        if n < 2:
            raise ValueError(f"fbcache needs a transformer with >= 2 blocks, this one has {n}")
        handle.extra["matched"] = [f"blocks.{i}" for i in range(n)]
        _enable(handle, FirstBlockCacheConfig(threshold=self.settings.threshold))


@dataclass(frozen=True)
class TaylorSeerSettings:
    cache_interval: int = 3  # full computation every this many steps
    disable_cache_before_step: int = 1
    max_order: int = 1
    identifiers: tuple = WAN_TAYLORSEER_IDENTIFIERS  # re.fullmatch patterns of the cached modules

    def __post_init__(self) -> None:
        check_range("taylorseer", "cache_interval", self.cache_interval, 1, 1000)
        check_range("taylorseer", "disable_cache_before_step", self.disable_cache_before_step, 0, 10_000)
        check_range("taylorseer", "max_order", self.max_order, 0, 4)
        object.__setattr__(self, "identifiers", tuple(self.identifiers))


class TaylorSeer(Method):
    name = "taylorseer"
    Settings = TaylorSeerSettings

    def _install(self, handle: MethodHandle) -> None:
        import torch
        from diffusers import TaylorSeerCacheConfig

        s = self.settings
        matched = [n for n, _ in handle.transformer.named_modules() if any(re.fullmatch(p, n) for p in s.identifiers)]
        if not matched:
            raise ValueError(
                f"taylorseer: identifiers {s.identifiers} match no module of this transformer; for Wan use "
                f"{list(WAN_TAYLORSEER_IDENTIFIERS)}"
            )
        handle.extra["matched"] = matched
        cfg = TaylorSeerCacheConfig(
            cache_interval=s.cache_interval,
            disable_cache_before_step=s.disable_cache_before_step,
            max_order=s.max_order,
            taylor_factors_dtype=torch.float32,
            cache_identifiers=list(s.identifiers),
        )
        _enable(handle, cfg)
