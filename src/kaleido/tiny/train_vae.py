"""Train the tiny ``AutoencoderKLWan`` on procedural clips and real-video windows.

Loss per batch: ``L1 + MSE`` on pixels (decoder fed a posterior sample) plus a small KL term
(``kl_weight`` x mean KL per latent element) that keeps the latent scale near 1, plus, early in
training, a latent target: the MSE between the encoder's first 12 latent channels (posterior
mean) and :func:`pooled_code` (each frame 4x4 average-pooled, in Wan's causal-chunk layout),
weighted ``code_weight`` and decayed linearly to 0 over ``code_steps``. That linear code alone
reconstructs the held-out clips at 30.3 / 26.5 dB (procedural / real); starting the encoder on it
is what lifts a from-scratch VAE past the ~19 dB plateau plain reconstruction training reaches on
2 cores, and it spreads the variance over many channels (see ``benchmarks/vae_learning_curve.py``
and the model card). Batches are random ``crop x crop`` patches of ``frames``-frame
clips rendered/cropped at the demo resolution (64x64), so the statistics match generation.

Resumable: every ``ckpt_every`` steps (and at the end or when the time budget runs out) the
model, AdamW moments and step go to ``out_dir/ckpt``; the data of step ``i`` depends only on
``(seed, i)``, so a resumed run sees the same batches as an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from kaleido.atomic import write_atomic
from kaleido.tiny import data as D
from kaleido.tiny.checkpoint import has_checkpoint, load_checkpoint, save_checkpoint


@dataclass
class VaeArch:
    """Architecture of the tiny VAE (``AutoencoderKLWan`` keyword arguments)."""

    base_dim: int = 32
    z_dim: int = 16
    dim_mult: tuple[int, ...] = (1, 2, 2)
    num_res_blocks: int = 1
    temperal_downsample: tuple[bool, ...] = (True, True)

    def to_kwargs(self) -> dict:
        return dict(
            base_dim=self.base_dim,
            z_dim=self.z_dim,
            dim_mult=list(self.dim_mult),
            num_res_blocks=self.num_res_blocks,
            temperal_downsample=list(self.temperal_downsample),
            is_residual=True,
            scale_factor_spatial=2 ** (len(self.dim_mult) - 1),
            scale_factor_temporal=2 ** sum(self.temperal_downsample),
        )


@dataclass
class VaeTrainConfig:
    out_dir: str = "runs/tiny/vae"
    steps: int = 3000
    batch: int = 4
    frames: int = 5
    #: the first ``early_steps`` steps use ``early_frames``-frame clips (then ``frames``, which is cheaper)
    early_frames: int = 9
    early_steps: int = 0
    #: after ``steps``, ``finetune_steps`` more on ``finetune_frames``-frame clips (cosine from
    #: ``finetune_lr``): clips of >= 3 latent frames teach the causal cache its steady state, which
    #: 5-frame clips (2 latent frames) never reach; without it PSNR falls from frame 6 on
    finetune_steps: int = 150
    finetune_frames: int = 9
    finetune_lr: float = 1e-4
    crop: int = 32
    render_size: int = 64
    real_fraction: float = 0.5
    lr: float = 1e-3
    warmup: int = 30
    kl_weight: float = 1e-5
    #: weight of the pooled-code latent target (``pooled_code``), decayed linearly to 0 over ``code_steps``
    code_weight: float = 1.0
    code_steps: int = 1200
    seed: int = 0
    ckpt_every: int = 50
    log_every: int = 10
    time_budget_s: float | None = None
    arch: VaeArch = field(default_factory=VaeArch)

    def validate(self) -> None:
        if self.steps < 1 or self.batch < 1:
            raise ValueError(f"steps={self.steps}, batch={self.batch}: both must be >= 1")
        for name in ("frames", "early_frames", "finetune_frames"):
            n = getattr(self, name)
            if n < 5 or (n - 1) % 4 != 0:
                raise ValueError(f"{name}={n} must be 1 + 4k >= 5 (the VAE compresses time by 4); e.g. 5, 9, 17")
        if self.crop % 4 != 0 or self.crop > self.render_size:
            raise ValueError(f"crop={self.crop} must be a multiple of 4 and <= render_size={self.render_size}")
        if self.code_weight < 0 or self.code_steps < 0:
            raise ValueError(f"code_weight={self.code_weight}, code_steps={self.code_steps}: both must be >= 0")
        if self.code_weight > 0 and self.arch.z_dim < POOLED_CODE_CHANNELS:
            raise ValueError(f"code_weight > 0 needs z_dim >= {POOLED_CODE_CHANNELS} (the pooled code's channels); "
                             f"got z_dim={self.arch.z_dim}: set code_weight=0 or widen the latent")
        if not 0.0 <= self.real_fraction <= 1.0:
            raise ValueError(f"real_fraction={self.real_fraction} must be in [0, 1]")


LOGVAR_INIT = -6.0
#: channels of :func:`pooled_code` (RGB x the 4 frames of one causal chunk)
POOLED_CODE_CHANNELS = 12


def pooled_code(x: torch.Tensor) -> torch.Tensor:
    """The 12-channel linear code of a clip ``(B, 3, 1 + 4k, H, W)``: ``(B, 12, 1 + k, H/4, W/4)``.

    Latent frame 0 holds frame 0 (4x4-average-pooled RGB) in all four 3-channel slots; latent frame
    i >= 1 holds frames 4i-3 .. 4i, one per slot - the layout of Wan's causal chunks.
    """
    B, C, T, H, W = x.shape
    if (T - 1) % 4 or H % 4 or W % 4:
        raise ValueError(f"pooled_code needs 1 + 4k frames and sides divisible by 4; got {tuple(x.shape)}")
    pooled = F.avg_pool2d(x.transpose(1, 2).reshape(B * T, C, H, W), 4).reshape(B, T, C, H // 4, W // 4)
    first = pooled[:, :1].expand(B, 4, C, H // 4, W // 4).reshape(B, 1, 4 * C, H // 4, W // 4)
    rest = pooled[:, 1:].reshape(B, (T - 1) // 4, 4 * C, H // 4, W // 4)
    return torch.cat([first, rest], 1).transpose(1, 2)


def code_weight_at(cfg: "VaeTrainConfig", step: int) -> float:
    """Weight of the pooled-code target at ``step``: ``code_weight`` decayed linearly to 0 over ``code_steps``."""
    return cfg.code_weight * max(0.0, 1.0 - step / max(1, cfg.code_steps))


def build_vae(arch: VaeArch, seed: int = 0):
    from diffusers import AutoencoderKLWan

    torch.manual_seed(seed)
    vae = AutoencoderKLWan(**arch.to_kwargs())
    # Start the posterior narrow (std ~0.05) so the decoder sees informative latents from step 0;
    # with the default init (std ~1) a small-KL VAE spends hundreds of steps at a blurry plateau.
    with torch.no_grad():
        z = arch.z_dim
        vae.quant_conv.weight[z:].zero_()
        vae.quant_conv.bias[z:].fill_(LOGVAR_INIT)
    return vae


def decode_unclamped(vae, z: torch.Tensor) -> torch.Tensor:
    """``vae.decode`` without the final clamp (so gradients reach saturated pixels).

    Mirrors ``AutoencoderKLWan._decode``: one latent frame at a time through the causal cache.
    z: ``(B, z_dim, t, h, w)`` -> ``(B, 3, 1 + 4 (t - 1), 4h, 4w)``.
    """
    vae.clear_cache()
    x = vae.post_quant_conv(z)
    outs = []
    for i in range(z.shape[2]):
        vae._conv_idx = [0]
        outs.append(vae.decoder(x[:, :, i : i + 1], feat_cache=vae._feat_map, feat_idx=vae._conv_idx, first_chunk=(i == 0)))
    vae.clear_cache()
    return torch.cat(outs, 2)


def training_batch(cfg: VaeTrainConfig, step: int) -> torch.Tensor:
    """The batch of step ``step`` (depends only on seed and step): ``(B, 3, T, crop, crop)``."""
    rng = np.random.default_rng([cfg.seed, step, 1])
    frames = cfg.early_frames if step < cfg.early_steps else cfg.frames
    if step >= cfg.steps:
        frames = cfg.finetune_frames
    n_real = int(rng.binomial(cfg.batch, cfg.real_fraction))
    parts = []
    if cfg.batch - n_real:
        parts.append(D.procedural_batch(rng, cfg.batch - n_real, frames, cfg.render_size)[0])
    if n_real:
        parts.append(D.real_batch(rng, n_real, frames, cfg.render_size)[0])
    clips = np.concatenate(parts)
    if cfg.crop < cfg.render_size:
        crops = []
        for clip in clips:
            y0, x0 = rng.integers(0, cfg.render_size - cfg.crop + 1, size=2)
            crops.append(clip[:, y0 : y0 + cfg.crop, x0 : x0 + cfg.crop])
        clips = np.stack(crops)
    return D.to_video_tensor(clips)


def lr_at(cfg: VaeTrainConfig, step: int) -> float:
    if step >= cfg.steps:
        progress = (step - cfg.steps) / max(1, cfg.finetune_steps)
        return cfg.finetune_lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def train_vae(cfg: VaeTrainConfig, progress: bool = True):
    """Train (or resume) and return the VAE; writes ``out_dir/{ckpt,log.jsonl,config.json}``."""
    from tqdm.auto import tqdm

    cfg.validate()
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "config.json", json.dumps(asdict(cfg), indent=1))
    vae = build_vae(cfg.arch, cfg.seed)
    opt = torch.optim.AdamW(vae.parameters(), lr=cfg.lr, weight_decay=0.0, betas=(0.9, 0.99))
    start = 0
    if has_checkpoint(out / "ckpt"):
        start = load_checkpoint(out / "ckpt", vae, opt)["step"]
    vae.train()
    t_start = time.time()
    log = open(out / "log.jsonl", "a")
    total = cfg.steps + cfg.finetune_steps
    bar = tqdm(range(start, total), initial=start, total=total, desc="vae", disable=not progress)
    step = start
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = lr_at(cfg, step)
        x = training_batch(cfg, step)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        posterior = vae.encode(x).latent_dist
        z = posterior.mean + posterior.std * torch.randn(posterior.mean.shape, generator=gen)
        rec = decode_unclamped(vae, z)
        l1 = (rec - x).abs().mean()
        mse = ((rec - x) ** 2).mean()
        kl = 0.5 * (posterior.mean**2 + posterior.var - 1.0 - posterior.logvar).mean()
        loss = l1 + mse + cfg.kl_weight * kl
        w_code = code_weight_at(cfg, step)
        code = torch.zeros(())
        if w_code > 0:
            code = ((posterior.mean[:, :POOLED_CODE_CHANNELS] - pooled_code(x)) ** 2).mean()
            loss = loss + w_code * code
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        psnr = float(10 * torch.log10(4.0 / mse.detach().clamp_min(1e-10)))
        if step % cfg.log_every == 0 or step == total - 1:
            rec_log = dict(step=step, loss=float(loss.detach()), l1=float(l1.detach()), mse=float(mse.detach()), kl=float(kl.detach()), code=float(code.detach()), psnr_train=psnr,
                           lr=lr_at(cfg, step), elapsed_s=round(time.time() - t_start, 1))
            log.write(json.dumps(rec_log) + "\n")
            log.flush()
        bar.set_postfix(loss=f"{float(loss.detach()):.4f}", psnr=f"{psnr:.1f}", kl=f"{float(kl.detach()):.2f}")
        out_of_time = cfg.time_budget_s is not None and time.time() - t_start > cfg.time_budget_s
        if (step + 1) % cfg.ckpt_every == 0 or step == total - 1 or out_of_time:
            save_checkpoint(out / "ckpt", vae, opt, {"step": step + 1})
        if out_of_time:
            break
    log.close()
    vae.eval()
    return vae


def main() -> None:  # pragma: no cover - used for background runs: python -m kaleido.tiny.train_vae ARGS
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--out", default="runs/tiny/vae")
    p.add_argument("--steps", type=int, default=VaeTrainConfig.steps)
    p.add_argument("--base-dim", type=int, default=VaeArch.base_dim)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--budget-s", type=float, default=None)
    p.add_argument("--finetune-steps", type=int, default=VaeTrainConfig.finetune_steps)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cfg = VaeTrainConfig(out_dir=a.out, steps=a.steps, lr=a.lr, time_budget_s=a.budget_s, arch=VaeArch(base_dim=a.base_dim),
                         finetune_steps=a.finetune_steps)
    train_vae(cfg)


if __name__ == "__main__":
    main()
