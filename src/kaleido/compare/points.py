"""Sweep points and their keys.

A point is one generation: (pipeline, call overrides, method, settings, prompt, seed).
Its key is a hash of exactly those fields (plus :data:`ROW_VERSION`), so the same point
always lands in the same ``<key>.json`` row file: an interrupted sweep resumes by
skipping the rows that exist, and a finished one re-plots without computing anything.
``method == "dense"`` is the reference generation of a (pipeline, call, prompt, seed).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

#: Bump when the meaning of a row changes (old rows then no longer match any key).
ROW_VERSION = 1
DENSE = "dense"


@dataclass(frozen=True)
class SweepPoint:
    pipeline: str
    method: str
    prompt: str
    seed: int
    settings: dict = field(default_factory=dict)
    call: dict = field(default_factory=dict)  # overrides of the pipeline's call kwargs (steps, size...)
    model_id: str = ""  # fingerprint of the weights (kaleido.compare.pipelines.pipeline_fingerprint)

    def identity(self) -> dict:
        return {"version": ROW_VERSION, "pipeline": self.pipeline, "model_id": self.model_id, "call": self.call,
                "method": self.method, "settings": self.settings, "prompt": self.prompt, "seed": int(self.seed)}

    @property
    def key(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"), default=_jsonable)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]

    def dense(self) -> "SweepPoint":
        """The dense reference point of this point's pipeline, call, prompt and seed."""
        return SweepPoint(self.pipeline, DENSE, self.prompt, self.seed, {}, self.call, self.model_id)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["key"] = self.key
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "SweepPoint":
        return cls(d["pipeline"], d["method"], d["prompt"], int(d["seed"]), dict(d.get("settings") or {}),
                   dict(d.get("call") or {}), str(d.get("model_id", "")))


def _jsonable(x):
    if isinstance(x, tuple):
        return list(x)
    raise TypeError(f"setting value {x!r} is not JSON-serialisable")


def settings_label(method: str, settings: dict) -> str:
    """Short human label of a method's settings, e.g. ``tome ratio=0.3``."""
    if not settings:
        return method
    if method == "stack":  # "taylorseer cache_interval=3 + kaleido theta1=32 ..."
        return " + ".join(settings_label(t["technique"], {k: v for k, v in t.items() if k != "technique"})
                          for t in settings.get("techniques", ()))
    if settings.get("config") is not None:  # a whole config: its label, or a hash of it
        label = settings.get("label") or hashlib.sha256(
            json.dumps(settings["config"], sort_keys=True, default=_jsonable).encode()).hexdigest()[:8]
        return f"{method} config={label}"
    return method + " " + " ".join(f"{k}={_short(v)}" for k, v in sorted(settings.items()))


def _short(value) -> str:
    """A setting's value in a label; a long list (MagCache's ratios per step) as its length."""
    if isinstance(value, (list, tuple)) and len(value) > 4:
        return f"<{len(value)} values>"
    return str(value)
