"""Kaleido: channel-wise partial-result reuse for video diffusion transformers.

Parts (one sub-package each):

* :mod:`kaleido.reuse` - the reuse decision and the reuse GEMM / attention (SPEC §2-4);
* :mod:`kaleido.integrations` - the drop-in for diffusers' vDiT models;
* :mod:`kaleido.tiny` - the miniature Wan pipeline trained here and shipped;
* :mod:`kaleido.hw` - the accelerator simulator (SPEC §5);
* :mod:`kaleido.cli` - the ``kaleido`` command.
"""

__version__ = "0.1.0"

#: top-level names loaded on first use (``import kaleido`` stays light: no torch/diffusers)
_LAZY = {
    "apply": "kaleido.integrations.apply",
    "remove": "kaleido.integrations.apply",
    "get_trace": "kaleido.integrations.apply",
    "reset": "kaleido.integrations.apply",
    "set_num_steps": "kaleido.integrations.apply",
    "KaleidoConfig": "kaleido.integrations.config",
    "ReuseTrace": "kaleido.integrations.trace",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kaleido' has no attribute {name!r}")
