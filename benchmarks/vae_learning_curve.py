"""How fast the tiny ``AutoencoderKLWan`` learns on this machine (how far training time limits its quality), measured in one run.

Trains a VAE of the given architecture from scratch (or continues the shipped one with
``--from-shipped``; ``--decoder-only`` freezes its encoder so the shipped transformer's
latents stay valid) on the same batches as ``kaleido.tiny.train_vae`` (procedural and
real-video windows), and prints the reconstruction PSNR of held-out procedural and
real clips every ``--eval-every`` steps, with the seconds spent.  Two references are
printed first, so that the curve can be read against them:

* the shipped VAE's PSNR on the same held-out clips;
* a 4x spatial average-pool + bilinear upsample of each frame (no learning, 3 numbers
  per 4x4 pixel block): what a VAE with 16 channels per 4x4x4 block should beat.

``--code-weight`` tries the fix the model card proposes: pull the encoder's first 12 latent
channels onto that pooled code (:func:`pooled_code`) early in training.

Run: ``OMP_WAIT_POLICY=PASSIVE python benchmarks/vae_learning_curve.py --steps 300``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from kaleido.tiny import evaluate as E
from kaleido.tiny.train_vae import (POOLED_CODE_CHANNELS, VaeArch, VaeTrainConfig, build_vae, code_weight_at,
                                   decode_unclamped, pooled_code, training_batch)


def pooled_reference_psnr(clips: np.ndarray) -> float:
    """Mean per-clip PSNR of 4x average-pool + bilinear upsampling, frame by frame."""
    out = []
    for clip in clips:
        x = torch.from_numpy(np.ascontiguousarray(clip)).permute(0, 3, 1, 2)
        r = F.interpolate(F.avg_pool2d(x, 4), scale_factor=4, mode="bilinear")
        out.append(E.psnr01((x.numpy() + 1) / 2, (r.clamp(-1, 1).numpy() + 1) / 2))
    return float(np.mean(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--base-dim", type=int, default=32)
    p.add_argument("--dim-mult", default="1,2,2")
    p.add_argument("--temporal", default="1,1", help="temperal_downsample flags, e.g. 1,1 (4x in time) or 1,0 (2x)")
    p.add_argument("--no-residual", action="store_true", help="is_residual=False (Wan 2.1 blocks)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--frames", type=int, default=5)
    p.add_argument("--crop", type=int, default=32)
    p.add_argument("--from-shipped", action="store_true", help="start from the shipped VAE")
    p.add_argument("--decoder-only", action="store_true", help="with --from-shipped: train the decoder only")
    p.add_argument("--code-weight", type=float, default=0.0,
                   help="weight of a loss pulling the encoder's first 12 latent channels onto the pooled code "
                        "(pooled_code), decayed linearly to 0 over --code-steps")
    p.add_argument("--code-steps", type=int, default=200)
    p.add_argument("--n-eval", type=int, default=8, help="held-out clips of each kind (17 frames, 64x64)")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    from diffusers import AutoencoderKLWan

    from kaleido.tiny.pipeline import tiny_pipeline_path

    proc, _, _ = E.heldout_procedural_clips(a.n_eval)
    real = E.heldout_real_windows(a.n_eval)
    shipped = AutoencoderKLWan.from_pretrained(tiny_pipeline_path(), subfolder="vae").eval()
    print(f"reference 4x avg-pool + bilinear: procedural {pooled_reference_psnr(proc):.2f} dB, "
          f"real {pooled_reference_psnr(real):.2f} dB")
    print(f"reference shipped VAE:            procedural {np.mean(E.vae_psnr(shipped, proc)):.2f} dB, "
          f"real {np.mean(E.vae_psnr(shipped, real)):.2f} dB")

    cfg = VaeTrainConfig(steps=a.steps, batch=a.batch, frames=a.frames, early_frames=a.frames, early_steps=0,
                         finetune_steps=0, crop=a.crop, lr=a.lr, warmup=0, code_weight=a.code_weight,
                         code_steps=a.code_steps,
                         arch=VaeArch(base_dim=a.base_dim, dim_mult=tuple(int(c) for c in a.dim_mult.split(",")),
                                      temperal_downsample=tuple(c.strip() == "1" for c in a.temporal.split(","))))
    cfg.validate()
    if a.from_shipped:
        vae = shipped
    else:
        vae = build_vae(cfg.arch)
        if a.no_residual:
            kw = cfg.arch.to_kwargs() | {"is_residual": False}
            vae = AutoencoderKLWan(**kw)
    params = list(vae.parameters())
    if a.decoder_only:
        if not a.from_shipped:
            raise SystemExit("--decoder-only needs --from-shipped (a random encoder would stay random)")
        for q in vae.parameters():
            q.requires_grad_(False)
        params = list(vae.decoder.parameters()) + list(vae.post_quant_conv.parameters())
        for q in params:
            q.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0, betas=(0.9, 0.99))
    t0 = time.time()
    print("step  procedural_dB  real_dB  seconds")
    for step in range(a.steps + 1):
        if step % a.eval_every == 0:
            vae.eval()
            pp, pr = np.mean(E.vae_psnr(vae, proc)), np.mean(E.vae_psnr(vae, real))
            print(f"{step:5d}  {pp:13.2f}  {pr:7.2f}  {time.time() - t0:7.0f}", flush=True)
            vae.train()
        if step == a.steps:
            break
        x = training_batch(cfg, step)
        if a.decoder_only:
            with torch.no_grad():
                z = vae.encode(x).latent_dist.mode()
        else:
            post = vae.encode(x).latent_dist
            z = post.mean + post.std * torch.randn_like(post.mean)
        rec = decode_unclamped(vae, z)
        loss = (rec - x).abs().mean() + ((rec - x) ** 2).mean()
        w = code_weight_at(cfg, step)
        if w > 0 and not a.decoder_only:
            loss = loss + w * ((post.mean[:, :POOLED_CODE_CHANNELS] - pooled_code(x)) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()


if __name__ == "__main__":
    main()
