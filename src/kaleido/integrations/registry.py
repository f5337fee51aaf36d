"""Per-model adapters, registered by transformer class name.

An adapter tells Kaleido, for one diffusers transformer class, how to read the token
grid from the forward's inputs, where the RoPE axis blocks are, where text tokens sit
in joint sequences, and which attention modules and linear layers to patch.  A new
model is a new adapter class decorated with :func:`register_adapter`; nothing in
:mod:`kaleido.integrations.apply` names a model.

The built-in adapters (Wan, HunyuanVideo, CogVideoX) register when :mod:`kaleido.integrations`
is imported, which any import of this module does first.  Lookup walks the model's class hierarchy (so subclasses of a supported class work).
Models that cannot be supported are listed in :data:`UNSUPPORTED` with the reason.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import torch

from kaleido.ops import OpKind
from kaleido.reuse.grid import TokenGrid

#: transformer class name -> adapter class
_ADAPTERS: dict[str, type["ModelAdapter"]] = {}
#: classes Kaleido refuses, with the reason
UNSUPPORTED: dict[str, str] = {
    "LTXVideoTransformer3DModel": (
        "LTX-Video applies RoPE before the head split with its t/h/w frequencies interleaved across all "
        "heads, so no head has contiguous per-axis channel groups, and its processor exposes no per-head "
        "RoPE layout; Kaleido would need calibrated chunk axes per layer, which it does not ship for LTX-Video"
    ),
    "MochiTransformer3DModel": (
        "Mochi learns its RoPE frequencies as a mix of all three axes (no channel block encodes one axis), "
        "so RoPE groups do not exist; calibrated chunk groups are not shipped for Mochi"
    ),
}


@dataclass
class AttentionSite:
    """One attention module to patch.

    ``kind``: ``"self"`` (video queries and keys, maybe joint with text), ``"cross"``
    (video queries, text keys).  ``make_processor(runtime, site, original)`` returns the
    Kaleido processor that replaces ``original``.
    """

    name: str
    module: torch.nn.Module
    layer: int
    kind: str
    make_processor: Callable[..., Any]


@dataclass
class LinearSite:
    """One linear layer whose input activations are reused (rows = video tokens [+ text])."""

    name: str
    module: torch.nn.Linear
    layer: int
    op: str


def attention_linears(attn: str) -> tuple[tuple[str, str], ...]:
    """``(path, op)`` of a diffusers ``Attention``'s q/k/v/out projections named ``attn`` in its block."""
    return ((f"{attn}.to_q", "proj_q"), (f"{attn}.to_k", "proj_k"), (f"{attn}.to_v", "proj_v"),
            (f"{attn}.to_out.0", "proj_out"))


def ffn_linears(ffn: str) -> tuple[tuple[str, str], ...]:
    """``(path, op)`` of a diffusers ``FeedForward``'s two linears named ``ffn`` in its block."""
    return ((f"{ffn}.net.0.proj", "ffn_in"), (f"{ffn}.net.2", "ffn_out"))


def block_linear_sites(prefix: str, block: torch.nn.Module, layer: int, table: Sequence[tuple[str, str]]) -> list[LinearSite]:
    """The :class:`LinearSite` of each ``(submodule path, op kind)`` of ``table`` in ``block``.

    Paths are dotted as in ``named_modules`` (``"attn1.to_out.0"``); a path the block does not
    have raises ``ValueError`` naming it (a diffusers version with other module names).
    """
    sites = []
    for path, op in table:
        try:
            module = block.get_submodule(path)
        except AttributeError:
            raise ValueError(f"{prefix} has no submodule {path!r}: this diffusers version names the block's "
                             "layers differently; Kaleido's adapter needs updating") from None
        sites.append(LinearSite(f"{prefix}.{path}", module, layer, op))
    return sites


class ModelAdapter:
    """How Kaleido patches one transformer class; subclass and :func:`register_adapter`."""

    #: diffusers class names this adapter handles
    model_classes: ClassVar[tuple[str, ...]] = ()
    #: where text tokens sit in joint sequences: "none", "prefix" or "suffix"
    text_position: ClassVar[str] = "none"
    #: the forward argument holding the latent video
    hidden_states_arg: ClassVar[str] = "hidden_states"

    # -- model facts ---------------------------------------------------------------
    def rope_split(self, model: torch.nn.Module) -> tuple[int, int, int] | None:
        """Channels of the ``(t, h, w)`` RoPE blocks of each head, or ``None`` without RoPE."""
        raise NotImplementedError

    def head_dim(self, model: torch.nn.Module) -> int:
        return int(model.config.attention_head_dim)

    def patch_sizes(self, model: torch.nn.Module) -> tuple[int, int, int]:
        raise NotImplementedError

    def latent_thw(self, hidden_states: torch.Tensor) -> tuple[int, int, int]:
        """``(frames, height, width)`` of the latent input; default layout ``(B, C, F, H, W)``."""
        return int(hidden_states.shape[2]), int(hidden_states.shape[3]), int(hidden_states.shape[4])

    def num_layers(self, model: torch.nn.Module) -> int:
        raise NotImplementedError

    def check_model(self, model: torch.nn.Module) -> None:
        """Raise ``ValueError`` for a variant of the class that Kaleido cannot patch."""

    #: class names of the stock processors this adapter replaces
    stock_processors: ClassVar[tuple[str, ...]] = ()

    #: attribute names of the model's block lists, in layer order (layers continue across lists)
    block_lists: ClassVar[tuple[str, ...]] = ()

    def layer_of(self, model: torch.nn.Module, name: str) -> int:
        """Transformer-block index of the module called ``name`` (``-1``: outside the blocks).

        Blocks are numbered through :attr:`block_lists` in order: the first block of a
        list follows the last block of the list before it.
        """
        parts = name.split(".")
        if len(parts) < 2 or not parts[1].isdigit():
            return -1
        offset = 0
        for attr in self.block_lists:
            if parts[0] == attr:
                return offset + int(parts[1])
            offset += len(getattr(model, attr))
        return -1

    #: ``(submodule path in a block, op kind)`` of linears Kaleido leaves dense but names in traces
    #: (Wan's cross-attention key/value projections of the text: ``cross_proj_kv``); every other
    #: unpatched linear / conv layer is recorded as ``dense``
    dense_linears: ClassVar[tuple[tuple[str, str], ...]] = ()

    def dense_op(self, name: str) -> str:
        """Trace op of the unpatched linear / conv layer called ``name`` (its :attr:`dense_linears` kind
        when ``name`` is ``<block list>.<i>.<path>``, else ``dense``)."""
        parts = name.split(".")
        if len(parts) > 2 and parts[0] in self.block_lists and parts[1].isdigit():
            path = ".".join(parts[2:])
            for p, op in self.dense_linears:
                if p == path:
                    return op
        return OpKind.DENSE.value

    def attention_sites(self, model: torch.nn.Module) -> list[AttentionSite]:
        raise NotImplementedError

    def linear_sites(self, model: torch.nn.Module) -> list[LinearSite]:
        raise NotImplementedError

    # -- per-call inputs -------------------------------------------------------------
    def bound_inputs(self, model: torch.nn.Module, args: tuple, kwargs: dict) -> dict[str, Any]:
        """The forward's arguments by name (positional ones bound to their parameter names)."""
        if not args:
            return dict(kwargs)
        sig = _signature(type(model))
        try:
            bound = sig.bind_partial(model, *args, **kwargs)
        except TypeError:
            return dict(kwargs)
        return dict(bound.arguments)

    def grid(self, model: torch.nn.Module, inputs: dict[str, Any]) -> TokenGrid:
        """The ``T x H x W`` token grid from the latent input's shape and the patch sizes."""
        x = inputs.get(self.hidden_states_arg)
        name = type(model).__name__
        if not isinstance(x, torch.Tensor) or x.dim() != 5:
            raise ValueError(
                f"Kaleido: {name}.forward got {self.hidden_states_arg}="
                f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}; the token grid is derived "
                "from a 5-D latent video tensor, so it cannot be derived here"
            )
        f, h, w = self.latent_thw(x)
        pt, ph, pw = self.patch_sizes(model)
        T, H, W = f // pt, h // ph, w // pw
        if min(T, H, W) < 1:
            raise ValueError(
                f"Kaleido: latent (frames, height, width)=({f}, {h}, {w}) is smaller than the patch sizes "
                f"({pt}, {ph}, {pw}) of {name}; the token grid cannot be derived"
            )
        return TokenGrid(T, H, W)

    def timestep(self, inputs: dict[str, Any]) -> Any:
        return inputs.get("timestep")

    def describe(self, model: torch.nn.Module) -> dict[str, Any]:
        """Model facts stored in traces."""
        return {
            "model_class": type(model).__name__,
            "adapter": type(self).__name__,
            "rope_split": None if self.rope_split(model) is None else list(self.rope_split(model)),
            "head_dim": self.head_dim(model),
            "patch_size": list(self.patch_sizes(model)),
            "num_layers": self.num_layers(model),
            "text_position": self.text_position,
            "heads": int(model.config.num_attention_heads),
        }


@functools.lru_cache(maxsize=32)
def _signature(cls: type) -> inspect.Signature:
    return inspect.signature(cls.forward)


def register_adapter(cls: type[ModelAdapter]) -> type[ModelAdapter]:
    """Class decorator: register ``cls`` for every name in ``cls.model_classes``."""
    if not cls.model_classes:
        raise ValueError(f"adapter {cls.__name__} names no model class")
    for name in cls.model_classes:
        _ADAPTERS[name] = cls
    return cls


def supported_models() -> list[str]:
    return sorted(_ADAPTERS)


def adapter_for(model: Any) -> ModelAdapter:
    """The adapter of ``model``'s class (or a base class); ``ValueError`` if none."""
    if not isinstance(model, torch.nn.Module):
        raise ValueError(
            f"kaleido.apply needs a diffusers transformer (torch.nn.Module), got {type(model).__name__}; "
            "pass pipe.transformer"
        )
    for klass in type(model).__mro__:
        if klass.__name__ in UNSUPPORTED:
            raise ValueError(f"Kaleido does not support {klass.__name__}: {UNSUPPORTED[klass.__name__]}")
        if klass.__name__ in _ADAPTERS:
            return _ADAPTERS[klass.__name__]()
    raise ValueError(
        f"Kaleido has no adapter for {type(model).__name__}; supported transformer classes: "
        f"{', '.join(supported_models())} (register one with kaleido.integrations.registry.register_adapter)"
    )
