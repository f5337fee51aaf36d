"""Pipelines the comparison runs on, by name.

* ``"random-wan"``: a tiny *randomly initialised* ``WanPipeline`` built in code (no
  download, no files): the development and test pipeline.  Its videos are noise, but
  every baseline and Kaleido see exactly the same model, prompt embeddings and seed.
* ``"tiny"``: the miniature trained Wan pipeline shipped with Kaleido
  (:func:`kaleido.tiny.pipeline.load_pipeline`).
* a local directory: ``WanPipeline.from_pretrained(path)`` (safetensors only).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

#: The random pipeline's transformer: 2 blocks, 2 heads x 24 channels (RoPE 8/8/8).
RANDOM_WAN_TRANSFORMER = dict(
    patch_size=(1, 2, 2),
    num_attention_heads=2,
    attention_head_dim=24,
    in_channels=4,
    out_channels=4,
    text_dim=32,
    freq_dim=32,
    ffn_dim=96,
    num_layers=2,
    cross_attn_norm=True,
    qk_norm="rms_norm_across_heads",
    rope_max_seq_len=64,
)

#: Generation settings that suit the random pipeline: 17 frames of 64x64 pixels
#: -> latent 5x8x8 after the VAE (4x temporal, 8x spatial) -> 5x4x4 = 80 tokens after patchify.
RANDOM_WAN_CALL = dict(height=64, width=64, num_frames=17, num_inference_steps=4, guidance_scale=1.0)

_VOCAB = ["<pad>", "</s>", "<unk>"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]


def _word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(_VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def build_random_wan_pipeline(seed: int = 0):
    """A tiny random ``WanPipeline`` on CPU, float32; identical for the same ``seed``."""
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    torch.manual_seed(seed)
    text_encoder = UMT5EncoderModel(
        UMT5Config(vocab_size=len(_VOCAB), d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=16)
    ).eval()
    vae = AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True],
                           latents_mean=[0.0] * 4, latents_std=[1.0] * 4).eval()
    transformer = WanTransformer3DModel(**RANDOM_WAN_TRANSFORMER).eval()
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0)
    pipe = WanPipeline(tokenizer=_word_tokenizer(), text_encoder=text_encoder, vae=vae,
                       scheduler=scheduler, transformer=transformer)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def pipeline_fingerprint(name: str) -> str:
    """Identity of the weights behind ``name``: a hash of the transformer's safetensors files.

    Part of every sweep point's key, so rows computed on another checkpoint (a re-shipped
    model, a retrained folder) never mix with the current ones.
    """
    import hashlib

    if name == "random-wan":
        return "random-wan:" + hashlib.sha256(repr(sorted(RANDOM_WAN_TRANSFORMER.items())).encode()).hexdigest()[:12]
    if name == "tiny":
        from kaleido.tiny.pipeline import tiny_pipeline_path

        folder = tiny_pipeline_path()
    else:
        folder = Path(os.path.expanduser(name))
    files = sorted((folder / "transformer").glob("*.safetensors"))
    if not files:
        raise ValueError(f"pipeline {name!r}: no transformer/*.safetensors under {folder} to fingerprint")
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return f"{name}:{h.hexdigest()[:16]}"


def load_pipeline(name: str):
    """``(pipeline, default call kwargs)`` for ``name``: ``random-wan``, ``tiny`` or a local directory."""
    if name == "random-wan":
        return build_random_wan_pipeline(), dict(RANDOM_WAN_CALL)
    if name == "tiny":
        try:
            from kaleido.tiny import pipeline as tiny_pipeline
        except ImportError as e:  # the miniature model ships with kaleido.tiny
            raise ValueError(f"pipeline 'tiny' needs kaleido.tiny.pipeline, which failed to import ({e}); "
                             "use --pipeline random-wan") from None
        pipe = tiny_pipeline.load_pipeline("tiny")
        pipe.set_progress_bar_config(disable=True)
        return pipe, tiny_pipeline.TINY_DEMO.to_dict()
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        from diffusers import WanPipeline

        pipe = WanPipeline.from_pretrained(str(path), use_safetensors=True)
        pipe.set_progress_bar_config(disable=True)
        return pipe, {}
    raise ValueError(f"unknown pipeline {name!r}: use 'random-wan', 'tiny' or a local WanPipeline directory")
