"""No module of src/kaleido replaces another module's or another object's functions.

An AST scan of every module for two patterns (the ones a recorder used before it
attached through named hooks):

* an assignment to an attribute of an imported module - ``<mod>.<attr> = ...`` (also
  augmented, annotated, ``del``) or ``setattr(<mod>, ...)`` / ``delattr(<mod>, ...)``,
  where ``<mod>`` is a name the file binds with ``import <mod>`` or
  ``from <package> import <module>`` (a project module, or a relative import);
* a function stored on another object - ``<obj>.<attr> = <fn>`` or
  ``setattr(<obj>, "<attr>", <fn>)`` where ``<obj>`` is a plain name other than
  ``self`` / ``cls`` and ``<fn>`` is a lambda, a function the file defines (and never
  uses as a variable name), or
  ``<x>.<method>`` naming a method a class of the file defines (``ledger.add = add``,
  ``handle.report = report``, ``handle.accel_trace = rec.trace``).

What it does not see: patches through names it cannot resolve statically (``getattr``,
a module reached through an attribute chain, a function received as an argument), and
mutation of another module's containers (``mod.TABLE[k] = v``).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _is_project_module(dotted: str) -> bool:
    p = SRC.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _module_names(tree: ast.AST, package: str) -> set[str]:
    """Names bound to modules by the file's import statements (any scope)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                if _is_project_module(f"{base}.{a.name}"):
                    names.add(a.asname or a.name)
    return names


def patches(source: str, package: str = "") -> list[str]:
    """``"line N: ..."`` for every pattern of the module docstring found in ``source``."""
    tree = ast.parse(source)
    modules = _module_names(tree, package)
    variables = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    functions = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))} - variables
    methods = {m.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for m in c.body
               if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def is_function(v: ast.AST | None) -> bool:
        return (isinstance(v, ast.Lambda) or (isinstance(v, ast.Name) and v.id in functions)
                or (isinstance(v, ast.Attribute) and v.attr in methods))

    found: list[tuple[int, str]] = []

    def check_target(t: ast.AST, value: ast.AST | None, line: int) -> None:
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                check_target(e, None, line)
            return
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)):
            return
        name = t.value.id
        if name in modules:
            found.append((line, f"assigns {name}.{t.attr} of imported module {name}"))
        elif name not in ("self", "cls") and is_function(value):
            found.append((line, f"stores a function on {name}.{t.attr}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                check_target(t, node.value, node.lineno)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            check_target(node.target, node.value, node.lineno)
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                check_target(t, None, node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("setattr", "delattr") and node.args and isinstance(node.args[0], ast.Name)):
            name = node.args[0].id
            value = node.args[2] if len(node.args) > 2 else None
            if name in modules:
                found.append((node.lineno, f"{node.func.id}() on imported module {name}"))
            elif name not in ("self", "cls") and is_function(value):
                found.append((node.lineno, f"setattr() stores a function on {name}"))
    return [f"line {n}: {what}" for n, what in sorted(found)]


def test_the_scan_sees_each_pattern_and_leaves_ordinary_code_alone():
    bad = '''
import numpy as np
from . import exion
from kaleido.techniques import attention_core

def attach(handle, ledger, rec):
    original = ledger.add

    def add(kind):
        original(kind)

    def report():
        return None

    ledger.add = add
    handle.report = report
    handle.accel_trace = rec.trace
    handle.hook = lambda: None
    exion.masked_attention = add
    attention_core.LIMIT += 1
    np.pi = 3
    setattr(exion, "masked_attention", original)
    setattr(handle, "report", report)
    del exion.masked_attention

class Recorder:
    def trace(self):
        return None
'''
    found = patches(bad, "kaleido.techniques")
    assert [f.split(":")[0] for f in found] == [f"line {n}" for n in (15, 16, 17, 18, 19, 20, 21, 22, 23, 24)], found
    ok = '''
import torch

def install(handle, attn, make):
    self_like = make()
    attn.processor = make()  # diffusers' processor attribute: an object, not a function
    handle.extra["matched"] = [1]
    handle.calls = 3
    setattr(handle, "name", "x")
    torch_version = torch.__version__

class Handle:
    def __init__(self, fn):
        self.report = fn
        self.trace = self.method

    def method(self):
        return None
'''
    assert patches(ok, "kaleido.techniques.catalog") == []


def test_no_module_patches_another():
    offenders = {}
    for path in sorted((SRC / "kaleido").rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        parts = list(rel.parts)
        package = ".".join(parts[:-1])
        found = patches(path.read_text(), package)
        if found:
            offenders[str(path.relative_to(SRC))] = found
    assert offenders == {}, offenders
