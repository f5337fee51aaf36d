"""The package's import graph keeps its layers: no cycles, no upward imports, no private diffusers modules.

An AST scan of every module under src/kaleido gives the import graph: module-level and
function-level imports (``if TYPE_CHECKING:`` ones too), relative imports resolved, each import
pointing at the module it names (``from kaleido.reuse import quant`` -> ``kaleido.reuse.quant``,
``from kaleido.reuse import ModeMap`` -> ``kaleido.reuse``). Every module belongs to a unit - a
sub-package (``reuse``, ``trace``), a top-level module (``atomic``), or a module of :data:`UNIT_OF_MODULE`
that is a unit of its own (none today) - and every unit to a layer of :data:`LAYERS`.
The tests fail on

* a cycle between units, or between modules, through imports at any level (the cycle is printed,
  one import a line with its file:line); an ``if TYPE_CHECKING:`` import counts too: it never runs,
  but a module that needs another's names even for its annotations depends on it;
* an import of a unit whose layer the importing layer may not import (:data:`MAY_IMPORT`), unless
  it is one of :data:`KNOWN_EXCEPTIONS`, each with the reason it is still there. A listed exception
  that no longer occurs fails too, so the list can only shrink. A listed exception is also left out
  of the cycle check (it is already counted, once, as a known exception);
* an import of a third-party library a layer must run without (:data:`NO_THIRD_PARTY`);
* an import of a private diffusers module or name (a dotted part starting with ``_``) other than
  :data:`PRIVATE_DIFFUSERS_EXCEPTIONS`.

docs/architecture.md shows the same table. Not seen: imports by string (``importlib.import_module``,
the lazy names of ``kaleido/__init__.py``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "kaleido"

#: the layers, lowest first, and the units in each
LAYERS: dict[str, tuple[str, ...]] = {
    "files": ("atomic",),  # crash-safe result writing
    "base": ("ops", "device", "generation_settings", "heap", "metrics", "prompts", "video_io"),  # vocabularies, utilities
    "sampling": ("sampling",),  # the samplers of a flow-matching pipeline (a scheduler swap), seeded per call
    "families": ("families",),  # what each vDiT family is made of (GEMMs, shaping config keys), no model loaded
    "core": ("reuse",),  # the reuse decision, GEMM and attention on tensors; ModeMap, OpCounts
    "model": ("tiny",),  # the miniature model, its training, and the one pipeline loader
    "trace": ("trace",),  # ReuseTrace: what a technique decided, in one format
    "models": ("models",),  # one adapter per diffusers family: GEMM sites, token grid, RoPE groups, attention plug
    "techniques": ("techniques",),  # Kaleido and every other technique, their registry and kaleido.apply / remove
    "simulator": ("hw",),  # the accelerator: consumes traces, mode maps and op counts; its circuits (hw.rtl)
    "evaluation": ("evaluation", "characterize", "calibration", "compare"),  # measurements over generations
    "apps": ("report",),  # the HTML report from results
    "cli": ("cli",),  # argument parsing, one library call, printing
    "package": (ROOT,),  # kaleido/__init__.py: lazy names only
}

_BELOW_MODELS = {"files", "base", "sampling", "families", "core", "model", "trace"}
_BELOW_EVALUATION = _BELOW_MODELS | {"models", "techniques"}

#: the layers each layer may import (its own only where listed: units of one layer otherwise stay apart)
MAY_IMPORT: dict[str, set[str]] = {
    "files": set(),
    "base": {"files"},
    "sampling": {"files", "base"},
    "families": {"files", "base"},
    "core": {"files", "base"},
    "model": {"files", "base", "sampling"},
    "trace": {"files", "base", "core"},
    "models": {"files", "base", "sampling", "families", "core", "model"},  # the adapters never see a technique or a trace
    "techniques": set(_BELOW_EVALUATION) - {"techniques"},
    "simulator": {"files", "base", "families", "core", "trace"},  # never a model, a technique or diffusers
    "evaluation": _BELOW_EVALUATION | {"evaluation", "simulator"},  # a row keeps its traces' simulator profiles
    "apps": _BELOW_EVALUATION | {"evaluation", "simulator"},
    "cli": _BELOW_EVALUATION | {"evaluation", "simulator", "apps"},
    "package": set(),
}

#: packages whose parts (sub-packages and modules) keep floors of their own, lowest first: a part imports only
#: the parts of lower floors (and its own modules), never one beside (a tuple is one floor of parts that stay
#: apart) or above it; every part is on a floor
FLOORS: dict[str, tuple] = {
    "kaleido.hw": ("inputs", "arch", "designs", "chip_presets", "run", "outputs", "rtl"),
    "kaleido.techniques": (
        ("shapes", "call_context"),  # GEMMs of a call, the call in progress
        ("ledger", "method_report"),
        "handle",  # the generic handle: sees every call, keeps the counts, undoes itself
        ("_hooks", "_merge", "_blocks", "accel_trace"),  # what several techniques share
        "attention_core",
        "base",
        "registry",
        ("sparse_videogen", "block_topk", "tome", "adaptiv", "exion", "cambricon_d", "kaleido_reuse", "step_cache",
         "cache_dit_peer"),  # the techniques, apart from one another
        "stack",
        "catalog",
        "front_door",
    ),
    #: the comparison's sweep grids: the policy they share, the grids, their one registry
    "kaleido.compare.grids": ("policy", ("step_caches", "reuse_and_sparsity"), "catalog"),
}


def _floor_of(floors: tuple, part: str) -> int:
    return next(i for i, f in enumerate(floors) if part == f or (isinstance(f, tuple) and part in f))


def _parts(floors: tuple) -> set[str]:
    return {p for f in floors for p in ((f,) if isinstance(f, str) else f)}

#: modules that are a unit of their own, though they live in another unit's folder (the trace was one,
#: ``kaleido.trace``, before it became the package ``kaleido.trace``; that module is now a re-export)
UNIT_OF_MODULE: dict[str, str] = {}

#: third-party top-level packages a layer must run without (it runs with no model loaded)
NO_THIRD_PARTY: dict[str, tuple[str, ...]] = {
    layer: ("diffusers", "transformers") for layer in ("files", "base", "families", "core", "trace", "simulator")
}

#: imports against the layer direction that are still there: (importing module, imported module) -> why
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}

#: private diffusers imports (a dotted part starting with ``_``) still there: (importing module, what) -> why
PRIVATE_DIFFUSERS_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("kaleido.techniques.step_cache", "diffusers.hooks._common._ALL_TRANSFORMER_BLOCK_IDENTIFIERS"):
        "owned by the technique registry change; diffusers (0.42) has no public way to ask which block lists "
        "its block caches (FirstBlockCache, MagCache) hook, which the step caches check to refuse a model in one line",
    ("kaleido.techniques.step_cache", "diffusers.hooks._helpers.TransformerBlockRegistry"):
        "owned by the technique registry change; diffusers (0.42) has no public way to ask which block classes "
        "its block caches can hook",
    ("kaleido.techniques.step_cache", "diffusers.hooks.mag_cache._MAG_CACHE_LEADER_BLOCK_HOOK"):
        "owned by the technique registry change; diffusers (0.42) does not export the name of MagCache's "
        "leader-block hook",
}


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``source`` imports ``target`` at ``path``:``line``."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}  ({self.path}:{self.line})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    return {module_name(p): p for p in sorted((SRC / ROOT).rglob("*.py"))}


def _existing(dotted: str) -> str | None:
    """``dotted`` or its nearest enclosing package that is a module of the package, else ``None``."""
    while dotted and dotted not in modules():
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def _absolute(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@lru_cache(maxsize=None)
def scan() -> tuple[tuple[Import, ...], tuple[Import, ...]]:
    """``(imports of package modules, imports of third-party modules)`` of every module, at any level.

    A third-party import's ``target`` is the dotted name it takes (``from a.b import c`` gives ``a.b.c``).
    """
    internal, external = [], []
    for name, path in modules().items():
        rel = str(path.relative_to(SRC.parent))
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                dotted = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, path.name == "__init__.py")
                dotted = [f"{base}.{a.name}" if a.name != "*" else base for a in node.names]
            else:
                continue
            for d in dotted:
                if d.split(".")[0] == ROOT:
                    target = _existing(d)
                    if target is not None and target != name:
                        internal.append(Import(name, target, rel, node.lineno))
                else:
                    external.append(Import(name, d, rel, node.lineno))
    return tuple(dict.fromkeys(internal)), tuple(dict.fromkeys(external))


def unit(module: str) -> str:
    for m, u in UNIT_OF_MODULE.items():
        if module == m or module.startswith(m + "."):
            return u
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def layer(u: str) -> str:
    for name, units in LAYERS.items():
        if u in units:
            return name
    raise AssertionError(f"unit {u!r} is in no layer of LAYERS: add it to the layer it belongs to")


def _find_cycle(edges: dict[str, dict[str, Import]]) -> list[Import] | None:
    """One cycle of ``edges`` (node -> {successor: an import that makes the edge}) as its imports, else ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(edges.get(v, {})):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(edges):
        if v not in state:
            found = visit(v)
            if found:
                return [edges[a][b] for a, b in zip(found, found[1:])]
    return None


def _graph(key) -> dict[str, dict[str, Import]]:
    out: dict[str, dict[str, Import]] = {}
    for imp in scan()[0]:
        a, b = key(imp.source), key(imp.target)
        if a != b and (imp.source, imp.target) not in KNOWN_EXCEPTIONS:
            out.setdefault(a, {}).setdefault(b, imp)
    return out


def _report_cycle(kind: str, cycle: list[Import]) -> str:
    return f"import cycle between {kind}: " + " -> ".join(
        [unit(cycle[0].source) if kind == "units" else cycle[0].source]
        + [unit(i.target) if kind == "units" else i.target for i in cycle]) + "\n  " + "\n  ".join(map(str, cycle))


def test_every_unit_has_a_layer_and_every_layer_a_rule():
    assert set(MAY_IMPORT) == set(LAYERS)
    assert all(set(v) <= set(LAYERS) for v in MAY_IMPORT.values())
    for m in modules():
        layer(unit(m))
    listed = [u for units in LAYERS.values() for u in units]
    present = {unit(m) for m in modules()}
    assert sorted(set(listed) - present) == [], "LAYERS names units the package no longer has"
    assert len(listed) == len(set(listed))


def test_allowed_imports_point_down():
    """MAY_IMPORT is a partial order: no two layers may import each other, directly or through others."""
    edges = {a: {b: Import(a, b, "MAY_IMPORT", 0) for b in bs if b != a} for a, bs in MAY_IMPORT.items()}
    cycle = _find_cycle(edges)
    assert cycle is None, "MAY_IMPORT has a cycle: " + " -> ".join([cycle[0].source] + [i.target for i in cycle])


def test_no_cycle_between_units():
    cycle = _find_cycle(_graph(unit))
    assert cycle is None, _report_cycle("units", cycle)


def test_no_cycle_between_modules():
    cycle = _find_cycle(_graph(lambda m: m))
    assert cycle is None, _report_cycle("modules", cycle)


def test_imports_follow_the_layers():
    bad = []
    for imp in scan()[0]:
        a, b = layer(unit(imp.source)), layer(unit(imp.target))
        if unit(imp.source) != unit(imp.target) and b not in MAY_IMPORT[a] \
                and (imp.source, imp.target) not in KNOWN_EXCEPTIONS:
            bad.append(f"{imp}: layer {a!r} may not import layer {b!r}")
    assert not bad, "imports against the layer direction (see docs/architecture.md):\n" + "\n".join(bad)


def _part(package: str, module: str) -> str | None:
    """The part of ``package`` that ``module`` is in (``None``: the package's ``__init__`` or outside it)."""
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1:].split(".")[0]


def test_every_part_of_a_floored_package_is_on_a_floor():
    for package, floors in FLOORS.items():
        parts = {_part(package, m) for m in modules()} - {None}
        assert sorted(parts - _parts(floors)) == [], f"{package}: parts on no floor of FLOORS"
        assert sorted(_parts(floors) - parts) == [], f"{package}: FLOORS names parts it no longer has"


def test_imports_inside_a_package_point_down_its_floors():
    bad = []
    for package, floors in FLOORS.items():
        for imp in scan()[0]:
            a, b = _part(package, imp.source), _part(package, imp.target)
            if a is None or b is None or a == b:
                continue
            if _floor_of(floors, b) > _floor_of(floors, a):
                bad.append(f"{imp}: {package}.{a} may not import {package}.{b} (a floor above it)")
            elif _floor_of(floors, b) == _floor_of(floors, a):
                bad.append(f"{imp}: {package}.{a} may not import {package}.{b} (beside it, on its floor)")
    assert not bad, "imports against a package's floors (see docs/architecture.md):\n" + "\n".join(bad)


def test_known_exceptions_still_occur():
    """An exception that is fixed leaves the list, so the list only shrinks. (One whose importing module is not in
    the tree is not checked: a module listed while it is being written, such as a new file not yet committed.)"""
    seen = {(i.source, i.target) for i in scan()[0]}
    stale = [f"{a} -> {b}" for a, b in KNOWN_EXCEPTIONS if (a, b) not in seen and a in modules()]
    assert not stale, "fixed, so remove from KNOWN_EXCEPTIONS: " + ", ".join(stale)
    allowed = [f"{a} -> {b}" for a, b in KNOWN_EXCEPTIONS if layer(unit(b)) in MAY_IMPORT[layer(unit(a))]]
    assert not allowed, "not against the layers, so not an exception: " + ", ".join(allowed)


def test_layers_run_without_their_forbidden_libraries():
    bad = [f"{i}: layer {layer(unit(i.source))!r} runs without {i.target.split('.')[0]}" for i in scan()[1]
           if i.target.split(".")[0] in NO_THIRD_PARTY.get(layer(unit(i.source)), ())]
    assert not bad, "\n".join(bad)


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def test_no_private_diffusers_imports():
    found = [i for i in scan()[1] if i.target.split(".")[0] == "diffusers" and _private(i.target)]
    bad = [str(i) for i in found if (i.source, i.target) not in PRIVATE_DIFFUSERS_EXCEPTIONS]
    assert not bad, "private diffusers modules or names (use the public API, e.g. diffusers.hooks):\n" + "\n".join(bad)
    stale = [f"{a} -> {b}" for a, b in PRIVATE_DIFFUSERS_EXCEPTIONS if (a, b) not in {(i.source, i.target) for i in found}]
    assert not stale, "fixed, so remove from PRIVATE_DIFFUSERS_EXCEPTIONS: " + ", ".join(stale)


def test_the_scan_sees_every_kind_of_import(tmp_path, monkeypatch):
    """Module-level, function-level and relative imports, resolved to the module they name."""
    pkg = tmp_path / ROOT
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    for f in ("__init__.py", "a/__init__.py", "a/x.py", "b/__init__.py", "b/y.py"):
        (pkg / f).write_text("")
    (pkg / "a" / "x.py").write_text("from ..b import y\n\ndef f():\n    from kaleido.b.y import NAME\n"
                                    "    import diffusers.hooks._common\n    from . import missing\n")
    monkeypatch.setitem(globals(), "SRC", tmp_path)
    modules.cache_clear()
    scan.cache_clear()
    try:
        internal, external = scan()
        assert [(i.source, i.target, i.line) for i in internal] == [
            ("kaleido.a.x", "kaleido.b.y", 1), ("kaleido.a.x", "kaleido.b.y", 4), ("kaleido.a.x", "kaleido.a", 6)]
        assert [(i.target, i.line) for i in external] == [("diffusers.hooks._common", 5)]
        assert _private(external[0].target)
    finally:
        modules.cache_clear()
        scan.cache_clear()
