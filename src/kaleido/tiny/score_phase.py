"""A score-distillation phase for the consistency student: the reverse-divergence regulariser rCM adds.

Consistency regression is mode-covering: where the student cannot fit the teacher's map exactly, its ``x0``
prediction is a mean over what the state leaves open, and its samples are blurrier and less saturated than
the teacher's. rCM (Zheng et al., 2025, the distillation behind TurboDiffusion) adds score distillation (DMD's
reverse divergence, mode-seeking) as a regulariser for that reason. This phase does the same on two cores, at
the student's last time, where its sample is made:

* the student predicts ``x0`` from its own re-noised states at its last time (:mod:`kaleido.tiny.onpolicy`'s
  inputs);
* ``x0`` is noised to a random time ``t`` (``x_t = (1 - t) x0 + t z``) and scored twice: by the teacher (guided,
  as it samples) and by a *fake* score model that learns, alongside, the distribution of the student's own
  samples (flow matching on them; it starts as the teacher's conditional branch). DMD's gradient moves ``x0``
  by ``x0_fake - x0_real`` (the two models' clean-latent estimates), normalised by ``|x0 - x0_real|``;
* the regression onto the teacher's targets from the same states (half of each batch) keeps the student on the
  teacher's map, as the consistency term does in rCM.

Resumable (checkpoints of the student, its EMA and the fake model under ``out_dir/train/``).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import torch


def x0_of(model, x: torch.Tensor, t: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    """The clean-latent estimate ``x - t v`` of a flow model at times ``t`` (``(B,)``)."""
    from kaleido.tiny.train_transformer import predict

    return x - t.view(-1, 1, 1, 1, 1) * predict(model, x, t, text)


def dmd_target(x0: torch.Tensor, x0_real: torch.Tensor, x0_fake: torch.Tensor) -> torch.Tensor:
    """Where DMD moves ``x0``: ``x0 - (x0_fake - x0_real) / w`` with ``w`` the mean ``|x0 - x0_real|`` per sample
    (the gradient of ``0.5 |x0 - target|^2`` is DMD's normalised score difference)."""
    w = (x0 - x0_real).abs().mean(dim=(1, 2, 3, 4), keepdim=True).clamp_min(1e-6)
    return (x0 - (x0_fake - x0_real) / w).detach()


def train_score_phase(out_dir: Path, student, teacher, ins: torch.Tensor, tgs: torch.Tensor, times: list[float],
                      text: torch.Tensor, uncond: torch.Tensor, train_idx: torch.Tensor, *, steps: int, lr: float,
                      fake_lr: float, guidance: float, batch: int = 4, weight: float = 0.25, fake_updates: int = 1,
                      ema_decay: float = 0.995, seed: int = 0, log_every: int = 25, ckpt_every: int = 50,
                      val_idx: torch.Tensor | None = None, progress: bool = True):
    """``steps`` student updates; each: ``fake_updates`` flow-matching steps of the fake model on the student's
    current samples, then the student's loss ``regression + weight * DMD`` at its last time. Returns the student's
    EMA weights and the seconds it took."""
    from kaleido.tiny.checkpoint import has_checkpoint, load_checkpoint, save_checkpoint
    from kaleido.tiny.train_transformer import latent_psnr, optimiser_step, phase_logger, predict, trainable_with_ema

    j = len(times) - 1  # the last time: where the sample is made
    s_last = float(times[j])
    teacher = teacher.float().eval()
    model, ema = trainable_with_ema(student.float().train())
    fake = copy.deepcopy(teacher).float().train()
    for p in fake.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    fopt = torch.optim.AdamW(fake.parameters(), lr=fake_lr, weight_decay=0.0)
    root = Path(out_dir) / "train"
    root.mkdir(parents=True, exist_ok=True)
    ck, ek, fk, log = root / "score_ckpt", root / "score_ema", root / "score_fake", root / "log.jsonl"
    start = 0
    if has_checkpoint(ck):
        start = int(load_checkpoint(ck, model, opt)["step"])
        load_checkpoint(ek, ema, None)
        load_checkpoint(fk, fake, fopt)
    def draws(step: int):
        """Every random number of ``step`` from a generator of its own (a resumed run draws what it would have)."""
        gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + 7 + step)
        b = train_idx[torch.randint(len(train_idx), (batch,), generator=gen)]
        t = 0.02 + 0.96 * torch.rand(batch, generator=gen)
        tf = 0.02 + 0.96 * torch.rand(fake_updates, batch, generator=gen)
        return b, t, tf, gen

    full = torch.full((batch,), s_last)

    def val() -> float:
        """Latent PSNR (dB) of the EMA's x0 from the validation states against the teacher's targets."""
        if val_idx is None:
            return float("nan")
        with torch.no_grad():
            v = val_idx
            return latent_psnr(x0_of(ema, ins[v, j], torch.full((len(v),), s_last), text[v]), tgs[v, j])

    record = phase_logger(log, "score", log_every * 4, steps, progress,
                          lambda: dict(val_own_state_psnr=round(val(), 3)))

    t0 = time.time()
    if start == 0:
        record(0)
    for step in range(start, steps):
        b, t, tf, gen = draws(step)
        x_in, target, txt = ins[b, j], tgs[b, j], text[b]
        with torch.no_grad():
            x0 = x0_of(model, x_in, full, txt)
        for k in range(fake_updates):  # the fake score follows the student's current samples (flow matching)
            z = torch.randn(x0.shape, generator=gen)
            tk = tf[k].view(-1, 1, 1, 1, 1)
            xt = (1 - tk) * x0 + tk * z
            floss = torch.nn.functional.mse_loss(predict(fake, xt, tf[k], txt), z - x0)
            fopt.zero_grad(set_to_none=True)
            floss.backward()
            torch.nn.utils.clip_grad_norm_(fake.parameters(), 1.0)
            fopt.step()
        x0 = x0_of(model, x_in, full, txt)
        z = torch.randn(x0.shape, generator=gen)
        tt = t.view(-1, 1, 1, 1, 1)
        with torch.no_grad():
            xt = (1 - tt) * x0 + tt * z
            vc, vu = predict(teacher, xt, t, txt), predict(teacher, xt, t, uncond[b])
            x0_real = xt - tt * (vu + guidance * (vc - vu))
            x0_fake = x0_of(fake, xt, t, txt)
        reg = torch.nn.functional.mse_loss(x0, target)
        dmd = 0.5 * torch.nn.functional.mse_loss(x0, dmd_target(x0.detach(), x0_real, x0_fake))
        loss = reg + weight * dmd
        optimiser_step(model, ema, opt, loss, ema_decay, step + 10_000)
        done = step + 1
        if done % log_every == 0 or done == steps:
            record(done, loss=round(float(loss.detach()), 6), regression=round(float(reg.detach()), 6),
                   dmd=round(float(dmd.detach()), 6), fake=round(float(floss.detach()), 6),
                   seconds=round(time.time() - t0, 1))
        if done % ckpt_every == 0 or done == steps:
            save_checkpoint(ck, model, opt, {"step": done})
            save_checkpoint(ek, ema, opt, {"step": done})
            save_checkpoint(fk, fake, fopt, {"step": done})
    return ema, time.time() - t0
