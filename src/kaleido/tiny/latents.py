"""Latent datasets for the transformer: clips encoded once with the trained VAE, cached on disk.

A ``LatentSet`` holds ``latents (N, z_dim, t, h, w)`` (VAE posterior means, *raw* - not
normalised), ``prompts`` (N strings) and ``specs`` (N dicts or ``None`` for real clips).
Files: ``<name>.safetensors`` (tensor ``latents``) + ``<name>.json`` (prompts, specs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from kaleido.tiny import data as D


@dataclass
class LatentSet:
    latents: torch.Tensor
    prompts: list[str]
    specs: list[dict | None]

    def __len__(self) -> int:
        return len(self.prompts)

    def moving(self) -> list[int]:
        """Indices of the procedural clips whose object moves in a named direction."""
        return [i for i, s in enumerate(self.specs) if s and s.get("motion") == "moving"]

    def save(self, path_stem: str | Path) -> None:
        path_stem = Path(path_stem)
        path_stem.parent.mkdir(parents=True, exist_ok=True)
        from kaleido.atomic import atomic_path, write_atomic

        with atomic_path(path_stem.with_suffix(".safetensors")) as tmp:
            save_file({"latents": self.latents.contiguous()}, str(tmp))
        write_atomic(path_stem.with_suffix(".json"), json.dumps({"prompts": self.prompts, "specs": self.specs}))

    @classmethod
    def load(cls, path_stem: str | Path) -> "LatentSet":
        path_stem = Path(path_stem)
        meta = json.loads(path_stem.with_suffix(".json").read_text())
        return cls(load_file(str(path_stem.with_suffix(".safetensors")))["latents"], meta["prompts"], meta["specs"])


def make_clips(n_procedural: int, n_real: int, split: str, seed: int, num_frames: int = 17, size: int = 64,
               moving_fraction: float | None = None, trail: bool = False, pan: bool = False):
    """Clips ``(N, T, H, W, 3)`` in [-1, 1], prompts and specs; ``split`` picks the real frames used.

    ``moving_fraction=None``: independent random procedural clips (``data.procedural_batch``);
    a number: direction groups with that share of moving draws (``data.direction_group_batch``).
    ``trail``: moving objects leave a trail; ``pan``: a tracking camera (``data.render_clip``); in either case.
    """
    rng = np.random.default_rng([seed, 7 if split == "train" else 8])
    clips, prompts, specs = [], [], []
    if n_procedural:
        if moving_fraction is None:
            c, p, s = D.procedural_batch(rng, n_procedural, num_frames, size, trail, pan)
        else:
            c, p, s = D.direction_group_batch(rng, n_procedural, num_frames, size, moving_fraction, trail, pan)
        clips.append(c)
        prompts += p
        specs += [x.to_dict() for x in s]
    if n_real:
        c, p = D.real_batch(rng, n_real, num_frames, size, split=split)
        clips.append(c)
        prompts += p
        specs += [None] * n_real
    return np.concatenate(clips), prompts, specs


@torch.no_grad()
def encode_clips(vae, clips: np.ndarray, batch: int = 16) -> torch.Tensor:
    """Posterior means of ``clips (N, T, H, W, 3)``: ``(N, z_dim, 1 + (T - 1) / 4, H / 4, W / 4)``."""
    out = []
    for i in range(0, len(clips), batch):
        x = D.to_video_tensor(clips[i : i + batch])
        out.append(vae.encode(x).latent_dist.mean)
    return torch.cat(out)


def build_latent_set(vae, n_procedural: int, n_real: int, split: str, seed: int, progress: bool = True,
                     num_frames: int = 17, size: int = 64, moving_fraction: float | None = None,
                     trail: bool = False, pan: bool = False) -> LatentSet:
    from tqdm.auto import tqdm

    chunks, prompts, specs = [], [], []
    per = 64
    total = n_procedural + n_real
    bar = tqdm(total=total, desc=f"encode {split}", disable=not progress)
    # procedural and real in chunks so memory stays small; chunk seeds differ
    for k, start in enumerate(range(0, total, per)):
        n = min(per, total - start)
        n_r = min(max(0, start + n - n_procedural), n)
        n_p = n - n_r
        clips, p, s = make_clips(n_p, n_r, split, seed * 1000 + k, num_frames, size, moving_fraction, trail, pan)
        chunks.append(encode_clips(vae, clips))
        prompts += p
        specs += s
        bar.update(n)
    bar.close()
    return LatentSet(torch.cat(chunks), prompts, specs)


def channel_stats(latents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std of ``(N, C, t, h, w)`` latents: two ``(C,)`` tensors."""
    flat = latents.transpose(0, 1).reshape(latents.shape[1], -1)
    return flat.mean(1), flat.std(1)


def latent_spectrum(latents: torch.Tensor) -> dict:
    """Eigenvalues of the channel covariance (descending, fraction of variance) and effective ranks."""
    flat = latents.transpose(0, 1).reshape(latents.shape[1], -1).double()
    flat = flat - flat.mean(1, keepdim=True)
    cov = flat @ flat.T / flat.shape[1]
    eig = torch.linalg.eigvalsh(cov).flip(0).clamp_min(0)
    frac = eig / eig.sum()
    entropy = -(frac[frac > 0] * frac[frac > 0].log()).sum()
    cum = frac.cumsum(0)
    return {
        "variance_fraction": [round(float(f), 5) for f in frac],
        "participation_ratio": float(eig.sum() ** 2 / (eig**2).sum()),
        "entropy_effective_rank": float(entropy.exp()),
        "channels_for_90pct": int((cum < 0.90).sum()) + 1,
        "channels_for_99pct": int((cum < 0.99).sum()) + 1,
    }
