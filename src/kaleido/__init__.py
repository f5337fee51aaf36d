"""Kaleido: channel-wise partial-result reuse for video diffusion transformers.

Parts (one sub-package each):

* :mod:`kaleido.reuse` - the reuse decision and the reuse GEMM / attention (SPEC §2-4);
* :mod:`kaleido.trace` - what a technique decided, in one format;
* :mod:`kaleido.models` - one adapter per diffusers vDiT family;
* :mod:`kaleido.techniques` - Kaleido (:mod:`kaleido.techniques.kaleido_reuse`) and every technique it is compared
  with, behind one registry and ``kaleido.apply`` / ``kaleido.remove``;
* :mod:`kaleido.tiny` - the miniature Wan pipeline trained here and shipped;
* :mod:`kaleido.evaluation`, :mod:`kaleido.calibration`, :mod:`kaleido.compare` - generating, calibrating and
  comparing on a pipeline;
* :mod:`kaleido.hw` - the accelerator simulator (SPEC §5);
* :mod:`kaleido.cli` - the ``kaleido`` command.
"""

__version__ = "0.1.0"

#: top-level names loaded on first use (``import kaleido`` stays light: no torch/diffusers)
_LAZY = {
    "apply": "kaleido.techniques",
    "remove": "kaleido.techniques",
    "get_trace": "kaleido.techniques.kaleido_reuse.apply",
    "reset": "kaleido.techniques.kaleido_reuse.apply",
    "set_num_steps": "kaleido.techniques.kaleido_reuse.apply",
    "KaleidoConfig": "kaleido.techniques.kaleido_reuse.config",
    "ReuseTrace": "kaleido.trace",
}


#: sub-packages reachable as attributes after a bare ``import kaleido`` (``kaleido.tiny.pipeline`` etc.),
#: imported on first use
_SUBPACKAGES = ("calibration", "characterize", "cli", "compare", "evaluation", "hw", "metrics", "models", "report",
                "reuse", "techniques", "tiny", "trace", "video_io")

#: modules a sub-package's attribute access also loads (``kaleido.tiny`` has no imports of its own)
_WITH_MODULES = {"tiny": ("kaleido.tiny.pipeline",)}


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBPACKAGES:
        for module in _WITH_MODULES.get(name, ()):
            importlib.import_module(module)  # so that e.g. ``kaleido.tiny.pipeline`` is an attribute too
        return importlib.import_module(f"kaleido.{name}")
    raise AttributeError(f"module 'kaleido' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's own names plus the lazily loaded ones, so completion lists them."""
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))
