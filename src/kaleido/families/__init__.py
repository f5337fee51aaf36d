"""What each vDiT family is made of, with no model loaded: its GEMMs, the config keys that shape them, its
published resolutions (:class:`~kaleido.families.shapes.FamilyShapes`, one module per family).

The simulator builds its workloads from these declarations (:mod:`kaleido.hw.inputs.workloads`); each model adapter
names the declaration of its family (``ModelAdapter.shapes``, :mod:`kaleido.models`).  A new family is one
module here and its line in :data:`FAMILIES`.
"""

from __future__ import annotations

from kaleido.families.cogvideox import COGVIDEOX
from kaleido.families.hunyuan_video import HUNYUAN_VIDEO
from kaleido.families.shapes import FamilyShapes, Gemm, ModelSpec
from kaleido.families.wan import WAN

#: family name -> its declaration
FAMILIES: dict[str, FamilyShapes] = {f.name: f for f in (WAN, HUNYUAN_VIDEO, COGVIDEOX)}


def family_of_class(class_name: str | None) -> FamilyShapes:
    """The declaration of the family whose diffusers transformer class is ``class_name``."""
    for f in FAMILIES.values():
        if f.class_name == class_name:
            return f
    raise ValueError(f"config of {class_name!r}; known transformer classes: "
                     f"{sorted(f.class_name for f in FAMILIES.values())}")


__all__ = ["FAMILIES", "FamilyShapes", "Gemm", "ModelSpec", "family_of_class", "WAN", "HUNYUAN_VIDEO",
           "COGVIDEOX"]
