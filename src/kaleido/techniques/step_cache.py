"""Step caching through diffusers' own hooks: Pyramid Attention Broadcast, FirstBlockCache, TaylorSeer, MagCache.

Each method builds the diffusers config and calls ``transformer.enable_cache(config)``;
``remove()`` calls ``transformer.disable_cache()``.  Unlike diffusers, we match the modules
through the model adapter's sites (the same attention sites and blocks every other technique
uses), check that the identifiers really match some, and refuse to run when they match
nothing: the matched module names are listed in the report's ``extra["matched"]``.

Savings are measured, not assumed: the handle counts which GEMMs really ran on every call
(see :mod:`kaleido.techniques.base`); a module served from the cache is charged nothing.
The caches' own state is reset at the start of every generation.

Where diffusers' cache cannot serve a model, the method refuses in one line
(``ValueError``): a transformer without diffusers' ``CacheMixin``; FirstBlockCache and
MagCache on a model whose blocks diffusers' block registry does not know, or whose block
lists it does not look for; Pyramid Attention Broadcast on a pipeline that calls the
transformer twice per step.  PAB keeps one iteration counter per attention module, shared
by every call: with Wan's separate cond/uncond calls (``guidance_scale > 1``; HunyuanVideo's
``true_cfg_scale > 1`` alike) it would hand the cond pass's cached attention to the uncond
pass, so the second call of a step raises (use ``guidance_scale=1`` or another cache).
CogVideoX batches cond and uncond into one call, so PAB serves it.

MagCache (Ma et al., 2025) skips whole steps: every block of a step is served from the
previous residual (last block's output minus first block's input) while the accumulated
error of the model's per-step *magnitude ratios* (mean ratio of consecutive residuals'
norms) stays within ``threshold``, for at most ``max_skip_steps`` steps in a row, after
the first ``retention_ratio`` of the steps.  Diffusers keeps its state per cache context,
so Wan's separate cond/uncond calls each get their own.  The ratios depend on the
checkpoint (and scheduler), so there is no default: without ``mag_ratios`` the settings
refuse in one line, pointing at ``calibrate=True`` - diffusers' calibration mode, which
skips nothing and measures them; the handle reports them per context in
``report().extra["mag_ratios"]`` (pass the ``"cond"`` list back as ``mag_ratios``;
diffusers also prints them when the run ends).  Diffusers interpolates the ratios to
``num_inference_steps`` (nearest step), so ratios measured at one step count serve
another.  ``num_inference_steps`` must be the pipeline's: a call whose cache context
says otherwise (Wan's does), or a step past it, raises; so does ``report()`` after a
generation of fewer steps (the only way to see it where the pipeline does not pass its step
count, as HunyuanVideo's and CogVideoX's do not).  ``report().extra["served_steps"]``
lists, per context, the steps served from the cache.  The comparison's MagCache points
(:func:`kaleido.compare.grids.step_caches.magcache`) use the ratios calibrated for its pipeline, step count
and sampler (:func:`calibrated_mag_ratios`, from ``kaleido/assets/magcache_ratios.json``, which
``benchmarks/calibrate_magcache.py`` writes).
"""

from __future__ import annotations

import importlib.resources
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from kaleido.techniques.base import Method, check_range
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.registry import STEP_CACHE, register_technique

#: Wan's self-attention and feed-forward modules, the default TaylorSeer caches there (diffusers' own
#: defaults match nothing on Wan or CogVideoX); on every model the default is its adapter's self-attention
#: sites and feed-forward modules (:func:`default_cache_identifiers`)
WAN_TAYLORSEER_IDENTIFIERS = (r"blocks\.\d+\.attn1", r"blocks\.\d+\.ffn")


def _check_cache_support(handle: MethodHandle) -> None:
    tr = handle.transformer
    if not callable(getattr(tr, "enable_cache", None)):
        raise ValueError(f"{handle.method.name}: {type(tr).__name__} does not support diffusers' caches "
                         "(no CacheMixin.enable_cache)")


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


def _exact(names: list[str]) -> tuple[str, ...]:
    """``re.search`` patterns that match exactly ``names``."""
    return tuple(f"^{re.escape(n)}$" for n in names)


@dataclass(frozen=True)
class PABSettings:
    self_skip_range: int = 2  # recompute self-attention every this many calls
    cross_skip_range: int | None = 4  # recompute cross-attention every this many calls (None: never skip)
    timestep_range: tuple = (100, 800)  # skip only while the timestep is inside (lo, hi)
    identifiers: tuple = ("blocks",)  # re.search patterns for the attention sites' names

    def __post_init__(self) -> None:
        check_range("pab", "self_skip_range", self.self_skip_range, 1, 1000)
        if self.cross_skip_range is not None:
            check_range("pab", "cross_skip_range", self.cross_skip_range, 1, 1000)
        lo, hi = tuple(self.timestep_range)
        if not lo < hi:
            raise ValueError(f"pab: timestep_range={self.timestep_range!r} needs lo < hi")
        object.__setattr__(self, "timestep_range", (float(lo), float(hi)))
        object.__setattr__(self, "identifiers", tuple(self.identifiers))


@register_technique(group=STEP_CACHE)
class PyramidAttentionBroadcast(Method):
    name = "pab"
    Settings = PABSettings

    def _install(self, handle: MethodHandle) -> None:
        from diffusers import PyramidAttentionBroadcastConfig

        s = self.settings
        _check_cache_support(handle)
        spatial, cross = [], []
        for site in handle.attention_sites:  # the model's attention sites only (not e.g. a text refiner's)
            if not any(re.search(i, site.name) for i in s.identifiers):
                continue
            if getattr(site.module, "is_cross_attention", False):  # diffusers' own test for cross-attention
                if s.cross_skip_range is not None:
                    cross.append(site.name)
            else:
                spatial.append(site.name)
        if not spatial + cross:
            raise ValueError(f"pab: identifiers {s.identifiers} match no attention site of this transformer")
        handle.extra["matched"] = [n for n, _ in handle.transformer.named_modules() if n in set(spatial + cross)]
        cfg = PyramidAttentionBroadcastConfig(
            spatial_attention_block_skip_range=s.self_skip_range,
            spatial_attention_timestep_skip_range=s.timestep_range,
            spatial_attention_block_identifiers=_exact(spatial),
            cross_attention_block_skip_range=s.cross_skip_range,
            cross_attention_timestep_skip_range=s.timestep_range,
            cross_attention_block_identifiers=_exact(cross),
            current_timestep_callback=lambda: handle.call.timestep,
        )
        _enable(handle, cfg)

        def refuse_two_calls_per_step(call) -> None:
            if call.slot > 0:
                raise ValueError(
                    "pab: this pipeline calls the transformer twice per step (cond/uncond); diffusers' PAB "
                    "shares one cache between both calls. Run with guidance_scale=1 or use fbcache/taylorseer/magcache"
                )

        handle.call_checks.append(refuse_two_calls_per_step)


@dataclass(frozen=True)
class FBCacheSettings:
    threshold: float = 0.05  # relative change of the first block's residual below which later blocks are skipped

    def __post_init__(self) -> None:
        check_range("fbcache", "threshold", self.threshold, 0.0, 100.0)


@register_technique(group=STEP_CACHE)
class FirstBlockCache(Method):
    name = "fbcache"
    Settings = FBCacheSettings

    def _install(self, handle: MethodHandle) -> None:
        from diffusers import FirstBlockCacheConfig

        _check_cache_support(handle)
        blocks = handle.adapter.blocks(handle.transformer)
        if len(blocks) < 2:
            raise ValueError(f"fbcache needs a transformer with >= 2 blocks, this one has {len(blocks)}")
        handle.extra["matched"] = _check_block_hooks(handle, "FirstBlockCache")
        _enable(handle, FirstBlockCacheConfig(threshold=self.settings.threshold))


def _check_block_hooks(handle: MethodHandle, cache: str) -> list[str]:
    """The names of the model's blocks, refused in one line unless diffusers' block caches (FirstBlockCache,
    MagCache) can hook every one: they look for blocks in the block lists diffusers names, and handle only
    block classes its ``TransformerBlockRegistry`` knows (how to find and return hidden states)."""
    from diffusers.hooks._common import _ALL_TRANSFORMER_BLOCK_IDENTIFIERS
    from diffusers.hooks._helpers import TransformerBlockRegistry

    tr, adapter, method = handle.transformer, handle.adapter, handle.method.name
    unseen = [a for a in adapter.block_lists if a not in _ALL_TRANSFORMER_BLOCK_IDENTIFIERS]
    if unseen:
        raise ValueError(f"{method}: diffusers' {cache} looks for blocks in "
                         f"{sorted(_ALL_TRANSFORMER_BLOCK_IDENTIFIERS)}, but {type(tr).__name__} keeps them in {unseen}")
    blocks = adapter.blocks(tr)
    for name, _, block in blocks:
        try:
            TransformerBlockRegistry.get(type(block))
        except ValueError:
            raise ValueError(f"{method}: diffusers' {cache} does not support {type(block).__name__} "
                             f"({name}): its block class is not in diffusers' TransformerBlockRegistry") from None
    return [name for name, _, _ in blocks]


@dataclass(frozen=True)
class TaylorSeerSettings:
    cache_interval: int = 3  # full computation every this many steps
    disable_cache_before_step: int = 1
    max_order: int = 1
    #: re.fullmatch patterns of the cached modules; None: the model's self-attention and feed-forward modules
    identifiers: tuple | None = None

    def __post_init__(self) -> None:
        check_range("taylorseer", "cache_interval", self.cache_interval, 1, 1000)
        check_range("taylorseer", "disable_cache_before_step", self.disable_cache_before_step, 0, 10_000)
        check_range("taylorseer", "max_order", self.max_order, 0, 4)
        if self.identifiers is not None:
            object.__setattr__(self, "identifiers", tuple(self.identifiers))


def default_cache_identifiers(handle: MethodHandle) -> tuple[str, ...]:
    """TaylorSeer's default modules on ``handle``'s model: its self-attention sites and feed-forward modules,
    as ``re.fullmatch`` patterns with the block index generalised (Wan: :data:`WAN_TAYLORSEER_IDENTIFIERS`)."""
    names = [s.name for s in handle.attention_sites if s.kind == "self"]
    names += [name for name, _, _ in handle.feed_forwards()]
    out: list[str] = []
    for n in names:
        block_list, _, rest = n.split(".", 2)
        p = rf"{re.escape(block_list)}\.\d+\.{re.escape(rest)}"
        if p not in out:
            out.append(p)
    return tuple(out)


@register_technique(group=STEP_CACHE)
class TaylorSeer(Method):
    name = "taylorseer"
    Settings = TaylorSeerSettings

    def _install(self, handle: MethodHandle) -> None:
        import torch
        from diffusers import TaylorSeerCacheConfig

        s = self.settings
        _check_cache_support(handle)
        identifiers = s.identifiers if s.identifiers is not None else default_cache_identifiers(handle)
        matched = [n for n, _ in handle.transformer.named_modules() if any(re.fullmatch(p, n) for p in identifiers)]
        if not matched:
            raise ValueError(
                f"taylorseer: identifiers {identifiers} match no module of this transformer; leave identifiers "
                f"unset for its self-attention and feed-forward modules {list(default_cache_identifiers(handle))}"
            )
        handle.extra["matched"] = matched
        cfg = TaylorSeerCacheConfig(
            cache_interval=s.cache_interval,
            disable_cache_before_step=s.disable_cache_before_step,
            max_order=s.max_order,
            taylor_factors_dtype=torch.float32,
            cache_identifiers=list(identifiers),
        )
        _enable(handle, cfg)


@dataclass(frozen=True)
class MagCacheSettings:
    threshold: float = 0.06  # accumulated magnitude-ratio error up to which a step's blocks are served from the cache
    max_skip_steps: int = 3  # at most this many consecutive steps served from the cache (0: never skip)
    retention_ratio: float = 0.2  # the first round(retention_ratio * num_inference_steps) steps always compute
    num_inference_steps: int = 28  # the pipeline's number of steps (diffusers schedules retention and ratios by it)
    #: the model's magnitude ratio per step, as calibrate=True measures them (interpolated to num_inference_steps)
    mag_ratios: tuple | None = None
    calibrate: bool = False  # measure mag_ratios (report().extra["mag_ratios"]) instead; skips nothing

    def __post_init__(self) -> None:
        check_range("magcache", "threshold", self.threshold, 0.0, 100.0)
        check_range("magcache", "retention_ratio", self.retention_ratio, 0.0, 1.0)
        for name, lo in (("max_skip_steps", 0), ("num_inference_steps", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"magcache: {name}={value!r} must be a whole number")
            check_range("magcache", name, value, lo, 10_000)
        if not isinstance(self.calibrate, bool):
            raise ValueError(f"magcache: calibrate={self.calibrate!r} must be true or false")
        if self.mag_ratios is None:
            if not self.calibrate:
                raise ValueError("magcache: mag_ratios is missing (MagCache needs the model's magnitude ratio per step, "
                                 "which depends on the checkpoint); run once with calibrate=True and pass its "
                                 "report().extra['mag_ratios']['cond'] as mag_ratios")
            return
        if self.calibrate:
            raise ValueError("magcache: calibrate=True measures mag_ratios and would ignore the ones given; "
                             "pass mag_ratios or calibrate=True, not both")
        ratios = self.mag_ratios
        if isinstance(ratios, (str, bytes)) or not hasattr(ratios, "__iter__"):
            raise ValueError(f"magcache: mag_ratios={ratios!r} must be a list of numbers, one per step")
        ratios = tuple(ratios)
        bad = [r for r in ratios if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r < float("inf")]
        if not ratios or bad:
            raise ValueError(f"magcache: mag_ratios must be positive finite numbers, one per step; got {bad or 'none'}")
        object.__setattr__(self, "mag_ratios", tuple(float(r) for r in ratios))


def mag_ratios_path() -> Path:
    """The shipped file of MagCache's calibrated magnitude ratios (``kaleido/assets/magcache_ratios.json``)."""
    return Path(str(importlib.resources.files("kaleido") / "assets" / "magcache_ratios.json"))


def ratios_key(steps: int, sampler: str | None = None) -> str:
    """The key of a step count's ratios in the file: ``"4"`` under the pipeline's own sampler, ``"4-consistency"``
    under another (the ratios change with the sampler: a re-noising sampler moves every step's residual)."""
    return str(int(steps)) if sampler is None else f"{int(steps)}-{sampler}"


def calibrated_mag_ratios(pipeline: str, steps: int, sampler: str | None = None) -> tuple[float, ...] | None:
    """MagCache's magnitude ratios (the ``"cond"`` context's) measured on ``pipeline`` at ``steps`` denoising
    steps with ``sampler`` (``None``: the pipeline's own), as :func:`mag_ratios_path`'s file holds them
    (``None``: not measured there)."""
    ratios = json.loads(mag_ratios_path().read_text())["ratios"].get(pipeline, {}).get(ratios_key(steps, sampler))
    return None if ratios is None else tuple(float(r) for r in ratios)


def write_mag_ratios(pipeline: str, steps: int, ratios, path: Path | None = None, sampler: str | None = None) -> Path:
    """Store ``ratios`` (the ``"cond"`` context's, one per step) as ``pipeline``'s at ``steps`` with ``sampler``
    in the ratios file (default :func:`mag_ratios_path`), keeping its other entries; written atomically."""
    from kaleido.atomic import write_atomic

    path = Path(path) if path is not None else mag_ratios_path()
    doc = json.loads(path.read_text())
    doc["ratios"].setdefault(pipeline, {})[ratios_key(steps, sampler)] = [round(float(r), 5) for r in ratios]
    text = json.dumps(doc, indent=1, sort_keys=True)
    text = re.sub(r"\[\s+([^\[\]]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)  # a list per line
    write_atomic(path, text + "\n")
    return path


def calibrate_command(pipeline: str, steps: int, sampler: str | None = None) -> str:
    """The command that measures MagCache's ratios on ``pipeline`` at ``steps`` and writes them to the file."""
    extra = f" --sampler {sampler}" if sampler else ""
    return (f"python benchmarks/calibrate_magcache.py --model {shlex.quote(pipeline)} --steps {int(steps)}{extra} "
            "--write")


@register_technique(group=STEP_CACHE)
class MagCache(Method):
    name = "magcache"
    Settings = MagCacheSettings

    def _install(self, handle: MethodHandle) -> None:
        import torch
        from diffusers import MagCacheConfig
        from diffusers.hooks import HookRegistry
        from diffusers.hooks._common import _ALL_TRANSFORMER_BLOCK_IDENTIFIERS
        from diffusers.hooks.mag_cache import _MAG_CACHE_LEADER_BLOCK_HOOK

        s = self.settings
        _check_cache_support(handle)
        tr = handle.transformer
        names = _check_block_hooks(handle, "MagCache")
        # diffusers' MagCache hooks every block of the transformer's block lists, in order: its first block
        # decides, the last one keeps the residual; they must be the model's blocks, no more, no fewer
        walked = [f"{n}.{i}" for n, m in tr.named_children()
                  if n in _ALL_TRANSFORMER_BLOCK_IDENTIFIERS and isinstance(m, torch.nn.ModuleList) for i in range(len(m))]
        if walked != names:
            raise ValueError(f"magcache: diffusers' MagCache would hook {walked}, but the blocks of "
                             f"{type(tr).__name__} are {names}")
        handle.extra["matched"] = names
        _enable(handle, MagCacheConfig(
            threshold=float(s.threshold), max_skip_steps=s.max_skip_steps, retention_ratio=float(s.retention_ratio),
            num_inference_steps=s.num_inference_steps, mag_ratios=None if s.mag_ratios is None else list(s.mag_ratios),
            calibrate=s.calibrate))

        # the steps of the last generation: a pipeline that does not pass its step count to the cache context
        # (HunyuanVideo's, CogVideoX's) is caught running more steps at the first step past the count, fewer
        # when the report is read (a new generation starts afresh: diffusers' state is reset)
        ran = {"steps": 0}

        def check_steps(call) -> None:
            n = s.num_inference_steps
            if call.num_steps is not None and call.num_steps != n:
                raise ValueError(f"magcache: the pipeline runs {call.num_steps} steps but num_inference_steps={n}; "
                                 f"set num_inference_steps={call.num_steps} (MagCache schedules its ratios by it)")
            if call.step >= n:
                raise ValueError(f"magcache: the pipeline runs more than num_inference_steps={n} steps; set "
                                 "num_inference_steps to its number of steps (MagCache schedules its ratios by it)")
            ran["steps"] = max(ran["steps"], call.step + 1)

        def check_complete() -> None:
            n, k = s.num_inference_steps, ran["steps"]
            if 0 < k < n:
                raise ValueError(f"magcache: the generation ran {k} steps but num_inference_steps={n}; set "
                                 f"num_inference_steps={k} (MagCache schedules its ratios by it)")

        handle.call_checks.append(check_steps)
        handle.on_new_generation(lambda: ran.update(steps=0))

        # what the cache did in the generation, per context: the steps it served, the ratios it measured
        head, tail = tr.get_submodule(names[0]), tr.get_submodule(names[-1])
        manager = HookRegistry.check_if_exists_or_initialize(head).get_hook(_MAG_CACHE_LEADER_BLOCK_HOOK).state_manager
        served: dict[str, list[int]] = {}
        measured: dict[str, list[float]] = {}

        def after_head(module, args, output) -> None:
            if handle.call is not None and not manager.get_state().should_compute:
                served.setdefault(manager.context.name, []).append(handle.call.step)

        def before_tail(module, args) -> None:
            # the list the tail's hook appends this generation's ratios to (it starts a new one when done);
            # one state manager serves every block, its context set by the first block's hook
            try:
                name = manager.context.name
            except ValueError:  # no context yet (a single-block model's first bare call)
                return
            measured[name] = manager.get_state().calibration_ratios

        handle.add_undo(head.register_forward_hook(after_head).remove)
        handle.on_new_generation(served.clear)
        def served_report() -> dict:
            check_complete()
            return {"served_steps": {k: list(v) for k, v in served.items()}}

        handle.register_report_extra("magcache", served_report)
        if s.calibrate:
            handle.add_undo(tail.register_forward_pre_hook(before_tail).remove)
            handle.on_new_generation(measured.clear)
            handle.register_report_extra("magcache calibration", lambda: {
                "mag_ratios": {k: [float(r) for r in v] for k, v in measured.items()}})
