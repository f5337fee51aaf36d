"""Resumable training checkpoints stored as safetensors + JSON only (no pickle).

A checkpoint directory holds ``model.safetensors`` (the module's state dict),
``optim.safetensors`` (AdamW moments, keyed ``"<param index>.<name>"``) and ``state.json``
(step, optimiser hyper-parameters and anything else the trainer wants back).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from kaleido.atomic import atomic_path, write_atomic


def save_checkpoint(directory: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Write a checkpoint, each file atomically (:mod:`kaleido.atomic`: temporary file, then rename)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    moments: dict[str, torch.Tensor] = {}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for i, p in enumerate(params):
        for name, value in optimizer.state.get(p, {}).items():
            if torch.is_tensor(value):
                moments[f"{i}.{name}"] = value.detach().contiguous().clone().reshape(value.shape)
    for fname, tensors in (("model.safetensors", weights), ("optim.safetensors", moments)):
        with atomic_path(directory / fname) as tmp:
            save_file(tensors, str(tmp))
    write_atomic(directory / "state.json", json.dumps(state, indent=1))


def load_checkpoint(directory: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> dict:
    """Restore ``model`` (and ``optimizer`` if given) in place; returns the saved ``state`` dict."""
    directory = Path(directory)
    model.load_state_dict(load_file(str(directory / "model.safetensors")))
    if optimizer is not None and (directory / "optim.safetensors").exists():
        moments = load_file(str(directory / "optim.safetensors"))
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for key, value in moments.items():
            idx, name = key.split(".", 1)
            p = params[int(idx)]
            optimizer.state.setdefault(p, {})[name] = value
    return json.loads((directory / "state.json").read_text())


def has_checkpoint(directory: str | Path) -> bool:
    return (Path(directory) / "state.json").exists()
