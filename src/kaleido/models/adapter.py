"""Per-model adapters, registered by transformer class name.

An adapter tells Kaleido, for one diffusers transformer class, how to read the token
grid from the forward's inputs, where the RoPE axis blocks are, where text tokens sit
in joint sequences, and which attention modules and linear layers to patch.  A new
model is a new adapter class decorated with :func:`register_adapter`; nothing in
:mod:`kaleido.techniques.kaleido_reuse.apply` names a model.

The built-in adapters (Wan, HunyuanVideo, CogVideoX) register when :mod:`kaleido.techniques.kaleido_reuse`
is imported, which any import of this module does first.  Lookup walks the model's class hierarchy (so subclasses of a supported class work).
Models that cannot be supported are listed in :data:`UNSUPPORTED` with the reason.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import torch

from kaleido.families import FamilyShapes
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


#: Which tokens a GEMM's rows (or an attention's queries / keys) are: the video grid, the text, or the
#: joint sequence of both (``[video; text]`` or ``[text; video]``: the adapter's ``text_position``).
VIDEO, TEXT, JOINT = "video", "text", "joint"
SEQUENCES = (VIDEO, TEXT, JOINT)


@dataclass
class AttentionSite:
    """One attention module: where its model processor hands q, k, v to an attention core.

    ``kind``: ``"self"`` (video queries and keys, maybe joint with text), ``"cross"``
    (video queries, text keys); ``queries`` / ``keys``: which tokens they are
    (:data:`SEQUENCES`).  ``make_processor(core, site, original)`` returns the model's
    processor that replaces ``original``: it computes q, k, v as the stock processor does
    and calls ``core`` (an :class:`~kaleido.models.attention.AttentionCore`:
    Kaleido's reuse, or a baseline's attention) for the attention itself.
    """

    name: str
    module: torch.nn.Module
    layer: int
    kind: str
    make_processor: Callable[..., Any]
    queries: str = VIDEO
    keys: str = VIDEO


@dataclass
class LinearSite:
    """One linear layer of a block: its op kind, its layer, and which tokens its rows are (:data:`SEQUENCES`)."""

    name: str
    module: torch.nn.Linear
    layer: int
    op: str
    rows: str = VIDEO


def attention_linears(attn: str) -> tuple[tuple[str, str], ...]:
    """``(path, op)`` of a diffusers ``Attention``'s q/k/v/out projections named ``attn`` in its block."""
    return ((f"{attn}.to_q", "proj_q"), (f"{attn}.to_k", "proj_k"), (f"{attn}.to_v", "proj_v"),
            (f"{attn}.to_out.0", "proj_out"))


def ffn_linears(ffn: str) -> tuple[tuple[str, str], ...]:
    """``(path, op)`` of a diffusers ``FeedForward``'s two linears named ``ffn`` in its block."""
    return ((f"{ffn}.net.0.proj", "ffn_in"), (f"{ffn}.net.2", "ffn_out"))


def block_linear_sites(prefix: str, block: torch.nn.Module, layer: int, table: Sequence[tuple[str, str]],
                       rows: str = VIDEO) -> list[LinearSite]:
    """The :class:`LinearSite` of each ``(submodule path, op kind)`` of ``table`` in ``block``, rows ``rows``.

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
        sites.append(LinearSite(f"{prefix}.{path}", module, layer, op, rows))
    return sites


def feed_forwards(model: torch.nn.Module, sites: Sequence[LinearSite]) -> list[tuple[str, int, torch.nn.Module]]:
    """``(name, layer, module)`` of every diffusers ``FeedForward`` whose two linears are in ``sites``
    (the pairs :func:`ffn_linears` names: ``<ffn>.net.0.proj`` as ``ffn_in``, ``<ffn>.net.2`` as ``ffn_out``).

    An ``ffn_in`` without that pair (HunyuanVideo's single-stream ``proj_mlp``, whose down projection
    is fused with the attention output) is no feed-forward module and is not listed.
    """
    by_name = {s.name: s for s in sites}
    out = []
    for s in sites:
        if s.op != "ffn_in" or not s.name.endswith(".net.0.proj"):
            continue
        prefix = s.name[: -len(".net.0.proj")]
        down = by_name.get(f"{prefix}.net.2")
        if down is not None and down.op == "ffn_out" and down.layer == s.layer:
            out.append((prefix, s.layer, model.get_submodule(prefix)))
    return out


class ModelAdapter:
    """How Kaleido patches one transformer class; subclass and :func:`register_adapter`."""

    #: diffusers class names this adapter handles
    model_classes: ClassVar[tuple[str, ...]] = ()
    #: the family's shape declaration (its GEMMs, what of its config shapes them): what the simulator's workloads
    #: of this family are built from (:mod:`kaleido.families`)
    shapes: ClassVar[FamilyShapes | None] = None
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

    def require_stock_processor(self, site: "AttentionSite", who: str, fix: str) -> None:
        """Refuse in one line (``ValueError``, ``"<who>: ... ; <fix>"``) an attention site whose processor is not one
        of :attr:`stock_processors` (another technique or a custom processor is installed there)."""
        proc = site.module.processor
        if self.stock_processors and type(proc).__name__ not in self.stock_processors:
            raise ValueError(f"{who}: {site.name} uses the attention processor {type(proc).__name__}, not the stock "
                             f"{' / '.join(self.stock_processors)}; {fix}")

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

    def blocks(self, model: torch.nn.Module) -> list[tuple[str, int, torch.nn.Module]]:
        """``(name, layer, block)`` of every transformer block, numbered as :meth:`layer_of` numbers them."""
        out, layer = [], 0
        for attr in self.block_lists:
            for i, block in enumerate(getattr(model, attr)):
                out.append((f"{attr}.{i}", layer, block))
                layer += 1
        return out

    #: ``(submodule path in a block, op kind, rows)`` of linears Kaleido leaves dense but names in traces
    #: and ledgers (Wan's cross-attention key/value projections of the text: ``cross_proj_kv``, rows
    #: ``"text"``); every other unpatched linear / conv layer is recorded as ``dense``
    dense_linears: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def dense_op(self, name: str) -> str:
        """Trace op of the unpatched linear / conv layer called ``name`` (its :attr:`dense_linears` kind
        when ``name`` is ``<block list>.<i>.<path>``, else ``dense``)."""
        parts = name.split(".")
        if len(parts) > 2 and parts[0] in self.block_lists and parts[1].isdigit():
            path = ".".join(parts[2:])
            for p, op, _ in self.dense_linears:
                if p == path:
                    return op
        return OpKind.DENSE.value

    def attention_sites(self, model: torch.nn.Module) -> list[AttentionSite]:
        raise NotImplementedError

    def linear_sites(self, model: torch.nn.Module) -> list[LinearSite]:
        raise NotImplementedError

    def gemm_linear_sites(self, model: torch.nn.Module) -> list[LinearSite]:
        """Every block linear the op vocabulary names: :meth:`linear_sites` (the reusable ones) and the
        :attr:`dense_linears` (left dense, e.g. Wan's text-side ``cross_proj_kv``), in block order.

        What the baselines' ledgers count besides attention (text-side streams of dual-stream blocks,
        embeddings and the output head are ``dense`` and left out, for every technique alike).
        """
        sites = self.linear_sites(model)
        for prefix, layer, block in self.blocks(model):
            for path, op, rows in self.dense_linears:
                sites += block_linear_sites(prefix, block, layer, ((path, op),), rows)
        order = {name: i for i, (name, _) in enumerate(model.named_modules())}
        return sorted(sites, key=lambda s: order[s.name])

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

    #: the forward argument holding the text embeddings
    text_arg: ClassVar[str] = "encoder_hidden_states"

    def batch_size(self, inputs: dict[str, Any]) -> int:
        """Batch of the call (classifier-free guidance batched as one call counts twice)."""
        return int(inputs[self.hidden_states_arg].shape[0])

    def text_len(self, inputs: dict[str, Any]) -> int:
        """Text tokens the blocks see (their joint sequences' text part, cross-attention's keys)."""
        e = inputs.get(self.text_arg)
        return int(e.shape[1]) if isinstance(e, torch.Tensor) and e.dim() >= 2 else 0

    def sequence_grid(self, base: TokenGrid, seq_len: int, where: str) -> TokenGrid:
        """The grid of a sequence of ``seq_len`` rows: the ``base`` video grid plus the text at
        :attr:`text_position` (``ValueError`` naming ``where`` when ``seq_len`` cannot be that)."""
        extra = seq_len - base.n_grid
        if extra < 0 or (extra > 0 and self.text_position == "none"):
            raise ValueError(
                f"Kaleido: {where} sees {seq_len} tokens but the transformer input gives a "
                f"{base.T}x{base.H}x{base.W} grid ({base.n_grid} video tokens)"
                + ("" if self.text_position == "none" else f" plus text {self.text_position}")
                + "; the token grid cannot be derived for this tensor"
            )
        if extra and self.text_position == "prefix":
            return TokenGrid(base.T, base.H, base.W, prefix=extra)
        if extra:
            return TokenGrid(base.T, base.H, base.W, suffix=extra)
        return base

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
        f"{', '.join(supported_models())} (register one with kaleido.models.adapter.register_adapter)"
    )
