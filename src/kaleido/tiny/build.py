"""Assemble the tiny ``WanPipeline`` from the real diffusers / transformers classes.

Parts (all offline):
- tokenizer: a word-level ``tokenizers`` model built from ``vocab.txt`` (shipped beside this
  module), lower-cased, whitespace split, ``</s>`` appended, wrapped in ``PreTrainedTokenizerFast``;
- text encoder: a small ``UMT5EncoderModel`` with frozen random weights (seeded);
- VAE: ``AutoencoderKLWan`` (trained by ``train_vae``);
- transformer: ``WanTransformer3DModel`` (patch (1, 1, 1)) with head_dim 64, so Wan's RoPE splits each head into
  t/h/w groups of 24/20/20 channels;
- scheduler: ``FlowMatchEulerDiscreteScheduler``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

VOCAB_FILE = Path(__file__).with_name("vocab.txt")
SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")


@dataclass
class TextEncoderArch:
    d_model: int = 64
    d_kv: int = 32
    d_ff: int = 128
    num_layers: int = 2
    num_heads: int = 2


@dataclass
class TransformerArch:
    """``WanTransformer3DModel`` size. Patch (1, 1, 1) on the 4x-spatial VAE keeps the demo's
    17 x 64 x 64 video at a 5 x 16 x 16 token grid (Wan 2.1 uses (1, 2, 2) on an 8x VAE; (1, 2, 2)
    here would need 128 x 128 pixels and 4x the VAE cost for the same grid)."""

    patch_size: tuple[int, int, int] = (1, 1, 1)
    num_attention_heads: int = 2
    attention_head_dim: int = 64
    ffn_dim: int = 512
    num_layers: int = 4
    freq_dim: int = 64

    def to_kwargs(self, text_dim: int, z_dim: int) -> dict:
        return dict(
            patch_size=tuple(self.patch_size),
            num_attention_heads=self.num_attention_heads,
            attention_head_dim=self.attention_head_dim,
            in_channels=z_dim,
            out_channels=z_dim,
            text_dim=text_dim,
            freq_dim=self.freq_dim,
            ffn_dim=self.ffn_dim,
            num_layers=self.num_layers,
            cross_attn_norm=True,
            qk_norm="rms_norm_across_heads",
            eps=1e-6,
            rope_max_seq_len=1024,
        )


#: flow-matching shift of the shipped scheduler (and, by default, of the training sigmas)
SCHEDULER_SHIFT = 2.0


def read_vocab(path: str | Path = VOCAB_FILE) -> list[str]:
    words = [w.strip() for w in Path(path).read_text().splitlines() if w.strip()]
    if tuple(words[:3]) != SPECIAL_TOKENS:
        raise ValueError(f"{path}: the vocabulary must start with {SPECIAL_TOKENS}, got {words[:3]}")
    if len(set(words)) != len(words):
        raise ValueError(f"{path}: duplicate words in the vocabulary")
    return words


def build_tokenizer(vocab_path: str | Path = VOCAB_FILE, model_max_length: int = 512):
    """A word-level fast tokenizer: ids follow line order of ``vocab_path``; unknown words -> ``<unk>``."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    words = read_vocab(vocab_path)
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", vocab["</s>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=model_max_length
    )


def build_text_encoder(vocab_size: int, arch: TextEncoderArch = TextEncoderArch(), seed: int = 0):
    """A small ``UMT5EncoderModel`` with seeded random weights, frozen (eval mode, no grad)."""
    from transformers import UMT5Config, UMT5EncoderModel

    config = UMT5Config(
        vocab_size=vocab_size,
        d_model=arch.d_model,
        d_kv=arch.d_kv,
        d_ff=arch.d_ff,
        num_layers=arch.num_layers,
        num_heads=arch.num_heads,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        dropout_rate=0.0,
        feed_forward_proj="gated-gelu",
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    torch.manual_seed(seed)
    model = UMT5EncoderModel(config)
    model.eval().requires_grad_(False)
    return model


def build_transformer(arch: TransformerArch, text_dim: int, z_dim: int, seed: int = 0):
    from diffusers import WanTransformer3DModel

    torch.manual_seed(seed)
    return WanTransformer3DModel(**arch.to_kwargs(text_dim=text_dim, z_dim=z_dim))


def build_scheduler(shift: float = SCHEDULER_SHIFT):
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=shift)


def assemble_pipeline(vae, transformer, text_encoder=None, tokenizer=None, seed: int = 0):
    """A ``WanPipeline`` from trained parts (text encoder/tokenizer built here when not given)."""
    from diffusers import WanPipeline

    tokenizer = tokenizer if tokenizer is not None else build_tokenizer()
    text_encoder = text_encoder if text_encoder is not None else build_text_encoder(len(tokenizer), seed=seed)
    return WanPipeline(
        tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer, scheduler=build_scheduler()
    )


def save_pipeline(pipe, directory: str | Path) -> Path:
    """Save as a diffusers folder (safetensors weights) and ship ``vocab.txt`` beside the tokenizer."""
    directory = Path(directory)
    pipe.save_pretrained(str(directory), safe_serialization=True)
    (directory / "tokenizer" / "vocab.txt").write_text(VOCAB_FILE.read_text())
    return directory


def describe(arch: object) -> dict:
    return asdict(arch)
