"""The one registry of techniques: everything the package needs to know about each, in one entry.

A technique registers its :class:`~kaleido.techniques.base.Method` class where it is defined::

    @register_technique(group=TOKEN_MERGING)
    class ToMe(Method):
        name = "tome"
        Settings = ToMeSettings
        claims = claims_of(("self_qk", "self_pv"))

and every reader takes it from here: ``make_method`` and :data:`kaleido.techniques.catalog.METHODS`
(views of :data:`TECHNIQUES`), ``kaleido.apply`` (the config type it dispatches on and its
handler), the stacking rules (:func:`kaleido.techniques.stack.check_composable`: which
techniques are step caches, which op kinds each decides), the report's sections (each technique's group) and
``kaleido compare --help``.  What the comparison sweeps of each technique (its grid) is kept with the
comparison (:mod:`kaleido.compare.grids`), and how a technique is drawn (its plot colour) with its plots
(:mod:`kaleido.compare.presentation`).  What the shared tester runs each technique with (its settings, its
"off" settings, the families it refuses and why) is kept with the tests (``tests/techniques/tester_settings.py``).
So a new baseline is one module that registers itself (imported by :mod:`kaleido.techniques.catalog`), its
grid and colour with the comparison, plus its tester case.

This module imports no technique; the technique modules import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

#: Technique groups (what kind of technique it is), in the order the report lists them (:attr:`Technique.group`).
#: "Family" names a model family (:mod:`kaleido.families`) only.
KALEIDO, SPARSE_ATTENTION, TOKEN_MERGING, SPARSE_ATTENTION_FFN, STEP_CACHE, DIFFERENTIAL, STACK = (
    "Kaleido", "sparse attention", "token merging", "sparse attention + FFN reuse", "step cache",
    "differential computing", "step cache + Kaleido")
GROUPS: tuple[str, ...] = (KALEIDO, SPARSE_ATTENTION, TOKEN_MERGING, SPARSE_ATTENTION_FFN, STEP_CACHE, DIFFERENTIAL,
                           STACK)
#: the technique a config without ``technique`` names and ``kaleido.apply(transformer)`` applies: the project's own
DEFAULT_TECHNIQUE = "kaleido"

#: ``register_technique(config=OWN_SETTINGS)`` (the default): ``kaleido.apply`` dispatches on the technique's ``Settings``
OWN_SETTINGS = object()


@dataclass(frozen=True)
class Technique:
    """One registered technique.

    ``method``: its :class:`~kaleido.techniques.base.Method` class (``name``, ``Settings``); ``claims``: the op
    kinds it may decide itself (what its handle takes over; every other op kind is counted as it runs);
    ``group``: what kind of technique it is (:data:`GROUPS`: the stacking rules and the report's sections); ``config``: the type :func:`kaleido.apply` dispatches on (``None``: not
    through ``kaleido.apply``); ``handler(transformer, config, filter_fn)``: what ``kaleido.apply`` runs for it;
    ``requires``: ``(module, install command)`` of an optional
    package it needs (a peer library); ``needs_accelerator``: its MAC saving turns into time only on the hardware
    it was designed for (which :mod:`kaleido.hw` simulates) - on a CPU or GPU its float path emulates the reduced
    or skipped work and costs time; ``False``: it skips work on today's CPUs and GPUs (step caches, sparse
    attention, token merging).
    """

    name: str
    method: type
    group: str
    claims: frozenset = frozenset()
    config: type | None = None
    handler: Callable[..., Any] | None = None
    requires: tuple[str, str] | None = None
    needs_accelerator: bool = False

    def unavailable(self) -> str | None:
        """Why it cannot run here (its optional package is missing: the install command), or ``None``."""
        if self.requires is None or module_available(self.requires[0]):
            return None
        return f"{self.name}: the {self.requires[0]} package is not installed; install it with {self.requires[1]}"

    @property
    def settings(self) -> type:
        """Its settings dataclass (what ``make_method`` and the comparison's rows hold)."""
        return self.method.Settings

    @property
    def is_step_cache(self) -> bool:
        """Whether it decides which block units run (one per transformer: see :mod:`kaleido.techniques.stack`)."""
        return self.group == STEP_CACHE

    def config_to_dict(self, config: Any) -> dict:
        """``config`` as a plain mapping: its own ``to_dict()`` if it has one, else its dataclass fields."""
        import dataclasses

        if callable(getattr(config, "to_dict", None)):
            return dict(config.to_dict())
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}

    def config_from_dict(self, d: Mapping[str, Any]) -> Any:
        """The config :meth:`config_to_dict` wrote (its own ``from_dict`` if it has one; unknown keys refused)."""
        import dataclasses

        cls = self.config
        if callable(getattr(cls, "from_dict", None)):
            return cls.from_dict(dict(d))
        fields = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - fields)
        if bad:
            raise ValueError(f"{self.name}: unknown setting(s) {bad}; allowed: {sorted(fields)}")
        return cls(**d)


#: name -> technique, in registration order (the order :mod:`kaleido.techniques.catalog` imports the modules)
TECHNIQUES: dict[str, Technique] = {}


def register_technique(*, group: str, claims: tuple[str, ...] | None = None, config: Any = OWN_SETTINGS,
                       handler: Callable[..., Any] | None = None, requires: tuple[str, str] | None = None,
                       needs_accelerator: bool = False) -> Callable[[type], type]:
    """Class decorator: register a :class:`~kaleido.techniques.base.Method` subclass under its ``name``.

    ``claims``: the op kinds it may decide, for a class whose ``claims`` depend on its settings (a property);
    otherwise they are read from the class's ``claims`` (``(unit, op kind)`` pairs).  ``config``: the type
    ``kaleido.apply`` dispatches on (default: its ``Settings``; ``None``: none); ``handler``: what
    ``kaleido.apply`` runs for it (default: ``Method(**settings).apply(transformer)``, refusing a ``filter_fn``).
    The other arguments are :class:`Technique`'s fields.
    """
    if group not in GROUPS:
        raise ValueError(f"register_technique: group {group!r} is not one of {list(GROUPS)}")

    def deco(cls: type) -> type:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"register_technique: {cls.__name__} has no name")
        if name in TECHNIQUES and TECHNIQUES[name].method is not cls:
            raise ValueError(f"register_technique: {name!r} is already registered by {TECHNIQUES[name].method.__name__}")
        declared = cls.__dict__.get("claims", getattr(cls, "claims", frozenset()))
        if claims is not None:
            kinds = frozenset(claims)
        elif isinstance(declared, frozenset):
            kinds = frozenset(k for _, k in declared)
        else:
            raise ValueError(f"register_technique: {name}'s claims depend on its settings; pass claims=(op kinds)")
        TECHNIQUES[name] = Technique(
            name, cls, group, kinds, cls.Settings if config is OWN_SETTINGS else config, handler, requires,
            needs_accelerator)
        return cls

    return deco


def module_available(name: str) -> bool:
    """Whether module ``name`` can be imported (found, or already imported), without importing it."""
    import importlib.util
    import sys

    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


def technique(name: str) -> Technique:
    """The technique registered as ``name`` (``ValueError`` naming the known ones)."""
    t = TECHNIQUES.get(name)
    if t is None:
        raise ValueError(f"unknown technique {name!r}; known: {sorted(TECHNIQUES)}")
    return t


def technique_of_config(config: Any) -> Technique | None:
    """The technique whose ``kaleido.apply`` config type ``config`` is (``None``: no technique's)."""
    for t in TECHNIQUES.values():
        if t.config is not None and type(config) is t.config:
            return t
    return None


def group_of(name: str) -> str | None:
    """The group of the technique ``name`` (``None`` for an unregistered name, e.g. from old rows)."""
    t = TECHNIQUES.get(name)
    return None if t is None else t.group
