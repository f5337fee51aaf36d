"""The one pipeline loader - the shipped tiny Wan pipeline, a local diffusers folder, or a hub checkpoint -
and the tiny pipeline's call defaults.

``load_pipeline("tiny")`` loads the pipeline trained by ``kaleido train-tiny`` that ships inside
the package (``tiny_pipeline_path()``), offline. Any other value is a local diffusers folder or
a hub id (e.g. ``"Wan-AI/Wan2.1-T2V-1.3B-Diffusers"``); a Wan pipeline is loaded the way diffusers
documents for Wan 2.1 (VAE kept in float32, the rest in ``dtype``), any other class through
``DiffusionPipeline``. Every ``--model`` of the ``kaleido`` command, and the comparison's pipelines, load here.
``TINY_DEMO`` holds the generation settings the tiny model was trained for, and ``load_pipeline("tiny")``
returns a :class:`TinyWanPipeline`: a ``WanPipeline`` whose call defaults are ``TINY_DEMO`` (17 frames of
64x64, 25 steps, 16 text tokens) instead of Wan 2.1's 480x832 x 81 frames x 50 steps, so
``pipe("a prompt")`` runs the miniature model at the size it was trained for; every keyword still
overrides. It also warns (:class:`PromptWarning`) about prompt words outside its vocabulary, which it
would read as ``<unk>``.

Every loader error a user can cause - a folder without ``model_index.json``, a name that is no folder
or hub id, a hub id that is not cached while ``HF_HUB_OFFLINE=1``, a repository that does not exist, an
unknown dtype or an absent device - is a one-line ``ValueError`` (docs/errors.md lists them).
"""

from __future__ import annotations

import importlib.resources
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from diffusers import WanPipeline

from kaleido.generation_settings import GenerationSettings
from kaleido.sampling import FlowSampler, make_sampler, sampler_of


#: text tokens of the tiny model, in training and generation: its prompts are at most 10 words plus
#: ``</s>``; at Wan's 512 the prompt's tokens would sit among ~500 identical zero-padding keys,
#: which cross-attention must learn to outweigh (the first shipped model barely used its text)
TINY_TEXT_TOKENS = 16
#: the tiny model's demo: 17 frames x 64x64 -> latents 5x16x16 -> 5x16x16 tokens after patchify
TINY_DEMO = GenerationSettings(height=64, width=64, num_frames=17, num_inference_steps=25, guidance_scale=5.0,
                               negative_prompt="", max_sequence_length=TINY_TEXT_TOKENS)


#: the second variant's demo: 17 frames x 96x96 -> latents 5x24x24 = 2,880 tokens (1.5x each spatial side,
#: the 480p -> 720p step; :mod:`kaleido.tiny.finetune`)
TINY_96_DEMO = TINY_DEMO.overridden(height=96, width=96)


#: the few-step student's demo: 4 steps, one transformer call per step (guidance distilled into it;
#: :mod:`kaleido.tiny.distill`), at the shipped model's size
TINY_TURBO_DEMO = TINY_DEMO.overridden(num_inference_steps=4, guidance_scale=1.0)


@dataclass(frozen=True)
class TinyVariant:
    """A shipped variant of the miniature pipeline: its own transformer (``None``: the shipped pipeline's)
    in ``kaleido/assets/<transformer>/transformer`` and, for a distilled student, its own scheduler config
    beside it (``<transformer>/scheduler``: the sigmas it was distilled for); everything else shared with ``tiny``."""

    name: str
    demo: GenerationSettings
    transformer: str | None = None
    #: the packaged KaleidoConfig calibrated for this model (``kaleido calibrate``), used when none is given
    #: (:func:`kaleido.techniques.kaleido_reuse.config.default_config` looks it up)
    config: str | None = None
    #: a distilled student: its scheduler ships beside its transformer, and it warns when called at another
    #: step count, guidance or sampler than its demo's
    distilled: bool = False
    #: the sampler it was made for (:data:`kaleido.sampling.SAMPLERS`; its scheduler runs it)
    sampler: str = "euler"


#: ``--model`` names of the shipped miniature pipelines
TINY_VARIANTS = {
    "tiny": TinyVariant("tiny", TINY_DEMO, config="tiny-default"),
    "tiny-96": TinyVariant("tiny-96", TINY_96_DEMO, transformer="tiny-wan-96"),
    "tiny-turbo": TinyVariant("tiny-turbo", TINY_TURBO_DEMO, transformer="tiny-wan-turbo", config="tiny-turbo-default",
                              distilled=True),
    # sampled as TurboDiffusion samples its rCM students: x0 predicted, re-noised with fresh noise at each step
    "tiny-rcm": TinyVariant("tiny-rcm", TINY_TURBO_DEMO, transformer="tiny-wan-rcm", config="tiny-rcm-default",
                            distilled=True, sampler="consistency"),
}


def native_sampler(model: str) -> str | None:
    """The sampler a tiny variant was made for (``None`` for any other model: its scheduler decides)."""
    variant = TINY_VARIANTS.get(model)
    return None if variant is None else variant.sampler


def demo_settings(model: str) -> GenerationSettings:
    """The generation settings ``model`` was made for: a tiny variant's demo, else the pipeline's own defaults."""
    variant = TINY_VARIANTS.get(model)
    return variant.demo if variant is not None else GenerationSettings()


class PromptWarning(UserWarning):
    """A prompt the model will not read as written: words outside its vocabulary, or too many tokens."""


class DistillationWarning(UserWarning):
    """A distilled student called at a step count or guidance it was not distilled for (it runs, off its training)."""


def distillation_message(demo: GenerationSettings, steps: int | None, guidance: float | None,
                         sampler: str | None = None, made_for: str = "euler") -> str | None:
    """One line when a student distilled for ``demo``'s steps and guidance and sampler ``made_for`` is called with
    others, else ``None``."""
    off = []
    if steps is not None and steps != demo.num_inference_steps:
        off.append(f"{steps} steps")
    if guidance is not None and guidance != demo.guidance_scale:
        off.append(f"guidance {guidance:g}")
    if sampler is not None and sampler != made_for:
        off.append(f"the {sampler} sampler")
    if not off:
        return None
    return (f"this model was distilled for {demo.num_inference_steps} steps at guidance {demo.guidance_scale:g} "
            f"with the {made_for} sampler (one transformer call per step); called with {' and '.join(off)} it runs "
            "outside what it learned")


def unknown_words(tokenizer, prompt: str) -> list[str]:
    """The words of ``prompt`` that ``tokenizer`` maps to its unknown token (in order, once each).

    Needs a fast tokenizer (offsets); a tokenizer without an unknown token (byte-level) returns ``[]``.
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or not getattr(tokenizer, "is_fast", False):
        return []
    enc = tokenizer(prompt, return_offsets_mapping=True, add_special_tokens=False)
    out: list[str] = []
    for tid, (a, b) in zip(enc.input_ids, enc.offset_mapping):
        if tid == unk and prompt[a:b] not in out:
            out.append(prompt[a:b])
    return out


def vocabulary_file(tokenizer) -> str:
    """Where ``tokenizer``'s word list is: its folder's ``vocab.txt`` when there is one, else its name."""
    name = str(getattr(tokenizer, "name_or_path", "") or "")
    vocab = Path(name) / "vocab.txt"
    return str(vocab) if vocab.is_file() else (name or "the tokenizer's vocabulary")


def unknown_words_message(tokenizer, prompt: str) -> str | None:
    """One line naming the words of ``prompt`` outside ``tokenizer``'s vocabulary and where that is, or ``None``."""
    words = unknown_words(tokenizer, prompt)
    if not words:
        return None
    return (f"prompt {prompt!r}: {', '.join(map(repr, words))} not in the model's vocabulary (read as <unk>); "
            f"use words from {vocabulary_file(tokenizer)}")


def truncation_message(tokenizer, prompt: str, max_sequence_length: int | None) -> str | None:
    """One line when ``prompt`` has more tokens than ``max_sequence_length`` (Wan drops the rest silently)."""
    if max_sequence_length is None or tokenizer is None:
        return None
    n = len(tokenizer(prompt).input_ids)
    if n > max_sequence_length:
        return (f"prompt {prompt!r} has {n} tokens but this model reads only the first {max_sequence_length} "
                "(the rest is dropped); shorten the prompt")
    return None


class TinyWanPipeline(WanPipeline):
    """``WanPipeline`` whose call defaults are :data:`TINY_DEMO` (``load_pipeline("tiny")`` returns one).

    ``pipe(prompt)`` generates 17 frames of 64x64 in 25 steps with 16 text tokens, the settings the
    miniature model was trained for (Wan 2.1's own defaults, 480x832 x 81 frames x 50 steps, would take
    hours on a CPU and are far outside what it learned). Any keyword passed overrides its default;
    every other behaviour is ``WanPipeline``'s. A prompt with words outside the vocabulary, or with more
    tokens than ``max_sequence_length``, warns (:class:`PromptWarning`, at the caller's line).
    """

    #: the call defaults (``load_pipeline("tiny-96")`` sets :data:`TINY_96_DEMO`)
    demo: GenerationSettings = TINY_DEMO
    #: a distilled student (``load_pipeline("tiny-turbo")``): warns (:class:`DistillationWarning`) when called at
    #: another step count or guidance than :attr:`demo`'s
    distilled: bool = False
    #: the sampler a distilled student was made for (``load_pipeline("tiny-rcm")``: ``"consistency"``)
    made_for: str = "euler"

    def __call__(self, prompt=None, negative_prompt=None, height=None, width=None, num_frames=None,
                 num_inference_steps=None, guidance_scale=None, *args, max_sequence_length=None, **kwargs):
        d = self.demo
        negative_prompt = d.negative_prompt if negative_prompt is None else negative_prompt
        height = d.height if height is None else height
        width = d.width if width is None else width
        num_frames = d.num_frames if num_frames is None else num_frames
        num_inference_steps = d.num_inference_steps if num_inference_steps is None else num_inference_steps
        guidance_scale = d.guidance_scale if guidance_scale is None else guidance_scale
        max_sequence_length = d.max_sequence_length if max_sequence_length is None else max_sequence_length
        if self.distilled:
            msg = distillation_message(d, num_inference_steps, guidance_scale, sampler_of(self.scheduler),
                                       self.made_for)
            if msg:
                warnings.warn(msg, DistillationWarning, stacklevel=2)
        if isinstance(self.scheduler, FlowSampler):  # the step noise follows the call's generator
            gen = kwargs.get("generator")
            gen = gen[0] if isinstance(gen, (list, tuple)) and gen else gen
            seed = gen.initial_seed() if gen is not None else int(torch.randint(2**62, (1,)))
            self.scheduler.seed_noise(seed)
        for p in [prompt] if isinstance(prompt, str) else list(prompt or []):
            for msg in (unknown_words_message(self.tokenizer, p),
                        truncation_message(self.tokenizer, p, max_sequence_length)):
                if msg:
                    warnings.warn(msg, PromptWarning, stacklevel=2)
        return super().__call__(prompt, negative_prompt, height, width, num_frames, num_inference_steps,
                                guidance_scale, *args, max_sequence_length=max_sequence_length, **kwargs)


def tiny_pipeline_path() -> Path:
    """Folder of the shipped tiny pipeline (``model_index.json`` + safetensors)."""
    return Path(str(importlib.resources.files("kaleido") / "assets" / "tiny-wan"))


def variant_transformer_path(name: str) -> Path:
    """Folder of the shipped tiny variant ``name``'s transformer (``config.json`` + safetensors)."""
    sub = TINY_VARIANTS[name].transformer
    return Path(str(importlib.resources.files("kaleido") / "assets" / sub / "transformer"))


def resolve_model(model: str) -> str:
    """A tiny variant's name (``"tiny"``, ``"tiny-96"``) -> the shipped pipeline folder it builds on; an existing
    local folder (``~`` expanded) -> itself; otherwise a hub id."""
    if model in TINY_VARIANTS:
        path = tiny_pipeline_path()
        if not (path / "model_index.json").exists():
            raise ValueError(f"the tiny pipeline is missing at {path}; run `kaleido train-tiny --ship` to build it")
        if TINY_VARIANTS[model].transformer and not (variant_transformer_path(model) / "config.json").is_file():
            build = "kaleido.tiny.distill" if TINY_VARIANTS[model].distilled else "kaleido.tiny.finetune"
            raise ValueError(f"the {model} variant's transformer is missing at {variant_transformer_path(model)}; "
                             f"build it with `python -m {build}` (docs/model-card.md)")
        return str(path)
    folder = os.path.expanduser(model)
    if os.path.isdir(folder):
        if not (Path(folder) / "model_index.json").is_file():
            raise ValueError(f"{model!r} is a folder without model_index.json: pass a diffusers pipeline folder")
        return folder
    if model.count("/") != 1 or model.startswith((".", "/", "~")):
        raise ValueError(f"model {model!r} is neither 'tiny', an existing pipeline folder, nor a hub id like 'org/name'")
    return model


#: ``--dtype`` names and the torch dtypes they load in
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def torch_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``dtype`` itself, or the torch dtype of one of :data:`DTYPES`' names."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {list(DTYPES)}")
    return DTYPES[dtype]


def check_dtype(device: str | torch.device, dtype: str | torch.dtype) -> torch.dtype:
    """``dtype`` as a torch dtype, refused in one line (``ValueError``) where ``device`` cannot run it: float16
    on the CPU, which diffusers warns "cannot run on CPU efficiently" (the tiny demo takes over 300 s there)."""
    dt = torch_dtype(dtype)
    if dt == torch.float16 and torch.device(device).type == "cpu":
        raise ValueError("dtype fp16 is not supported on the CPU (torch runs float16 pipelines there orders of "
                         "magnitude slower; the tiny demo takes over 300 s); use bf16 or fp32, or fp16 on a GPU")
    return dt


def dtype_kwarg(dtype: torch.dtype) -> dict:
    """``{"dtype": dtype}`` for diffusers releases that take it (0.37 and later deprecate ``torch_dtype``
    with a FutureWarning on every load), else ``{"torch_dtype": dtype}``."""
    import diffusers.utils

    return {"dtype": dtype} if hasattr(diffusers.utils, "_resolve_dtype") else {"torch_dtype": dtype}


def check_hub_id(model: str) -> None:
    """Refuse at once, in one line, a hub id that cannot load: not cached while ``HF_HUB_OFFLINE=1``, or
    (online, not cached) a repository the hub does not have, will not show, or cannot be reached for."""
    from huggingface_hub import HfApi, constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model, "model_index.json"), str):
        return
    if constants.HF_HUB_OFFLINE:
        raise ValueError(f"model {model!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids "
                         f"downloading it: run `hf download {model}` with network (or unset HF_HUB_OFFLINE), "
                         "or pass 'tiny' or a local pipeline folder")
    try:
        HfApi().model_info(model)
    except Exception as e:  # a probe: whatever stops it (no such repository, gated, no network) is the user's to fix
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise ValueError(f"model {model!r} is not cached and the hub cannot give it ({type(e).__name__}: {first}); "
                         "check the id, your network, and `hf auth login` for a gated model, or pass 'tiny' "
                         "or a local pipeline folder") from None


def from_pretrained(cls, source: str, **kwargs):
    """``cls.from_pretrained(source, **kwargs)`` with the hub's and diffusers' loading errors (a missing,
    gated or half-downloaded repository, no network) as a one-line ``ValueError`` naming ``source``."""
    from huggingface_hub.errors import HfHubHTTPError

    if not os.path.isdir(source):
        check_hub_id(source)
    try:
        return cls.from_pretrained(source, **kwargs)
    except (OSError, HfHubHTTPError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        fix = ("check that it is a complete diffusers pipeline folder" if os.path.isdir(source) else
               "check the id, your network, and `hf auth login` for a gated model")
        raise ValueError(f"cannot load {source!r} ({type(e).__name__}: {first[:300]}); {fix}, or pass 'tiny'") from None


def load_pipeline(model: str = "tiny", device: str | torch.device = "cpu", dtype: str | torch.dtype = torch.float32):
    """The pipeline ``model`` names, on ``device``, in ``dtype`` (a ``torch.dtype`` or ``"fp32"`` / ``"bf16"`` /
    ``"fp16"``).

    model: a tiny variant (``"tiny"``, ``"tiny-96"``: shipped, offline), a local diffusers folder, or a hub id (needs network unless
    cached; with ``HF_HUB_OFFLINE=1`` an uncached id fails at once, in one line). ``"tiny"`` and a folder
    a ``TinyWanPipeline`` saved give a :class:`TinyWanPipeline` (call defaults ``TINY_DEMO``); another Wan
    pipeline a ``WanPipeline`` (a real checkpoint's VAE in float32, diffusers' Wan 2.1 recipe); any
    other class what ``DiffusionPipeline`` loads.
    """
    from diffusers import AutoencoderKLWan, DiffusionPipeline

    from kaleido.device import check_device

    check_device(device)  # an unavailable device is refused in one line before any weight is read
    dt = check_dtype(device, dtype)  # so is fp16 on the CPU
    source = resolve_model(model)
    local = os.path.isdir(source)
    if not local:
        check_hub_id(source)
    saved = _saved_class(source)
    variant = TINY_VARIANTS.get(model)
    if variant is not None and variant.transformer:
        from diffusers import WanTransformer3DModel

        transformer = from_pretrained(WanTransformer3DModel, str(variant_transformer_path(model)), **dtype_kwarg(dt))
        parts = dict(transformer=transformer)
        if variant.distilled:
            parts["scheduler"] = variant_scheduler(model)
        pipe = from_pretrained(TinyWanPipeline, source, **parts, **dtype_kwarg(dt))
        pipe.demo = variant.demo
        pipe.distilled = variant.distilled
        pipe.made_for = variant.sampler
    elif variant is not None or saved == TinyWanPipeline.__name__:
        # a folder written by ``load_pipeline("tiny").save_pretrained(...)``: the same defaults again
        pipe = from_pretrained(TinyWanPipeline, source, **dtype_kwarg(dt))
    elif saved == WanPipeline.__name__ and local and _is_small(source):
        pipe = from_pretrained(WanPipeline, source, **dtype_kwarg(dt))
    elif saved == WanPipeline.__name__:
        # diffusers' recipe for Wan 2.1: the VAE stays in float32 for quality
        vae = from_pretrained(AutoencoderKLWan, source, subfolder="vae", **dtype_kwarg(torch.float32))
        pipe = from_pretrained(WanPipeline, source, vae=vae, **dtype_kwarg(dt))
    else:
        pipe = from_pretrained(DiffusionPipeline, source, **dtype_kwarg(dt))
    return pipe.to(device)


def variant_scheduler(model: str):
    """A distilled student's scheduler, from the config shipped beside its transformer: diffusers' Euler scheduler,
    or for a consistency student a :class:`kaleido.sampling.FlowSampler` with the times of its ``variant.json``."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    folder = variant_transformer_path(model).parent
    if TINY_VARIANTS[model].sampler == "euler":
        return FlowMatchEulerDiscreteScheduler.from_pretrained(str(folder / "scheduler"))
    record = json.loads((folder / "variant.json").read_text())
    return make_sampler(FlowMatchEulerDiscreteScheduler.from_pretrained(str(folder / "scheduler")),
                        TINY_VARIANTS[model].sampler, record["sigmas"])


def _saved_class(source: str) -> str:
    """The ``_class_name`` of ``source``'s ``model_index.json`` - a folder's, or a hub id's (from the cache, else
    fetched: one small file) - or "" when it cannot be read."""
    import json

    index = Path(source) / "model_index.json"
    if not os.path.isdir(source):
        from huggingface_hub import hf_hub_download

        try:
            index = Path(hf_hub_download(source, "model_index.json"))
        except Exception:  # unreadable here: from_pretrained then names what is wrong, in one line
            return ""
    try:
        return str(json.loads(index.read_text()).get("_class_name", ""))
    except (OSError, ValueError):
        return ""


def _is_small(folder: str, limit_bytes: int = 200 * 2**20) -> bool:
    total = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
    return total < limit_bytes
