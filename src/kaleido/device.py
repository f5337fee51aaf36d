"""Which device a model may run on here: refuse an unavailable one before anything loads.

Without this check, ``--device cuda`` on a machine without a GPU loads every weight and
then fails deep inside ``pipe.to("cuda")`` with torch's ``AssertionError: Torch not
compiled with CUDA enabled`` and a traceback.  :func:`check_device` says instead, in one
line, what is missing and what to do.
"""

from __future__ import annotations

#: the device names the messages suggest
_KNOWN = "'cpu', 'cuda', 'cuda:N' or 'mps'"


def check_device(device) -> "torch.device":  # noqa: F821 - torch is imported lazily
    """``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, a ``torch.device``) as a ``torch.device``.

    Raises ``ValueError`` naming the device, why it cannot be used here and the fix: not a
    device name, a torch build without that backend, no such GPU visible, or an index past
    the number of devices."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device {str(device)!r} is not a device name: use {_KNOWN}") from None
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
            raise ValueError(f"device {str(device)!r}: this torch ({torch.__version__}) is a CPU-only build, so no GPU "
                             "can be used; use 'cpu', or on a machine with an NVIDIA GPU install a CUDA build of torch "
                             "first (DEVELOPERS.md)")
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError(f"device {str(device)!r}: torch {torch.__version__} has CUDA support but sees no GPU "
                             "(no driver, no device, or CUDA_VISIBLE_DEVICES hides them); use 'cpu', or check nvidia-smi")
        if dev.index is not None and dev.index >= n:
            raise ValueError(f"device {str(device)!r}: this machine has {n} CUDA device(s), cuda:0 to cuda:{n - 1}; "
                             "pick one of those")
        return dev
    backend = getattr(torch.backends, dev.type, None) if dev.type == "mps" else getattr(torch, dev.type, None)
    available = getattr(backend, "is_available", None)
    if not callable(available):
        raise ValueError(f"device {str(device)!r}: Kaleido runs models on {_KNOWN}, not on {dev.type!r}")
    if not available():
        raise ValueError(f"device {str(device)!r}: no {dev.type} device is available to this torch "
                         f"({torch.__version__}); use 'cpu'")
    return dev
