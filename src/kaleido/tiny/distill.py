"""A few-step student of the miniature pipeline: ``tiny-turbo``, distilled by teacher-trajectory regression.

The paper's regime is a few-step distilled model (TurboDiffusion: Wan 2.1 distilled to 4 steps, one
transformer call per step). :func:`run_distill` builds its miniature counterpart on a 2-core CPU:

1. **Teacher trajectories.** The shipped pipeline (25 Euler steps, guidance 5, two transformer calls per
   step) runs from stored noise seeds on training-distribution prompts (:func:`training_prompts`: random
   clip descriptions of the training data, never an evaluation or calibration prompt), and every state of
   its sampling path is kept (26 latents per trajectory, in chunks of safetensors: resumable).
2. **Regression.** The student starts from the teacher's weights and is trained so that **one** Euler step
   from the teacher's state at its sigma ``s_i`` lands on the teacher's state at ``s_{i+1}`` (MSE of the
   landing state), conditioned on the prompt alone (no unconditional call: guidance is distilled into it).
   The teacher's Euler path is piecewise linear in sigma, so its state at a student sigma between two of
   its own is the exact linear interpolation of the two. A last phase (``rollout_fraction`` of the steps)
   trains on the student's own 4-step rollout from the noise, scored on the teacher's final latent, so
   the errors a step inherits from the steps before it are trained on too.

Why this method: it needs only forward passes of the teacher (no reward model, discriminator or second
network in training, unlike adversarial or consistency distillation), fits a 2-core CPU in about an hour,
and keeps the teacher's noise-to-video map, so the student is scored against the teacher for the same seed.

The student's schedule: diffusers' 4-step sigmas at shift 2 are ``[1.0, 0.80, 0.50, 0.002, 0]`` (one step
from 0.5 to almost clean, then a step that does nothing). The student stretches them with the scheduler's
own ``shift_terminal`` so that its last step starts at ``shift_terminal`` (0.25: ``[1.0, 0.85, 0.625, 0.25,
0]``); the schedule ships with the variant as its scheduler config.

``out_dir`` layout::

    trajectories/   chunk-NNNN.safetensors (states, noise), chunk-NNNN.json (prompts, seeds, sigmas)
    train/          ckpt/ (resumable), ema/, log.jsonl
    variant/        transformer/ (EMA weights, diffusers layout), scheduler/ and variant.json

``python -m kaleido.tiny.distill --out runs/tiny-turbo`` is the shipped run's command (docs/model-card.md).

**The consistency student** (``tiny-rcm``, ``--sampler consistency``) is sampled as TurboDiffusion samples its
rCM students (:mod:`kaleido.sampling`): at each of its times ``t_i`` (TurboDiffusion's, :func:`kaleido.sampling.
rcm_sigmas`) it predicts the clean latent ``x0 = x - t_i v`` and re-noises it with fresh noise to ``t_{i+1}``.
Its training is consistency regression onto the teacher's ODE endpoint: from the teacher's own state at ``t_i``
(exact, as above) the student's ``x0`` prediction is regressed onto the teacher's final latent of that
trajectory. The teacher's ODE state at ``t`` has the marginal of ``(1 - t) x0 + t z`` (rectified flow keeps
the interpolation's marginals), which is the distribution of the re-noised inputs the sampler gives the student,
so the regression trains on the inputs it meets. It starts from ``tiny-turbo``'s weights (guidance already
distilled in, one call per step). A phase on the student's own re-noised states needs a teacher run from each of
them; it is a separate, optional phase (below).

    python -m kaleido.tiny.distill --sampler consistency --out runs/tiny-rcm

Two later phases can follow, from a student already distilled (``--init tiny-rcm --train-steps 0``): one on the
student's own re-noised states (``--own-state-steps``, :mod:`kaleido.tiny.onpolicy`) and one of score distillation
(``--score-steps``, :mod:`kaleido.tiny.score_phase`); docs/model-card.md gives what each measured.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from kaleido.atomic import atomic_path, write_atomic


@dataclass
class DistillConfig:
    out_dir: str = "runs/tiny-turbo"
    seed: int = 0
    #: teacher trajectories (each one prompt x one noise seed) and how many run in one batched pipeline call
    n_trajectories: int = 320
    chunk: int = 16
    #: the teacher's sampling (the shipped pipeline's defaults)
    teacher_steps: int = 25
    teacher_guidance: float = 5.0
    #: noise seeds of trajectory ``i`` are ``noise_seed_base + i`` (evaluation uses seeds 0, 1, ...)
    noise_seed_base: int = 100_000
    #: the student's schedule: ``student_steps`` sigmas of the scheduler at ``student_shift``, stretched so the
    #: last non-zero one is ``student_shift_terminal`` (``None``: diffusers' own, unstretched)
    student_steps: int = 4
    student_shift: float = 2.0
    student_shift_terminal: float | None = 0.25
    #: regression
    train_steps: int = 1000
    batch: int = 8
    lr: float = 1e-4
    warmup: int = 50
    ema_decay: float = 0.995
    #: the last fraction of the steps trains on the student's own rollout (batch ``rollout_batch``)
    rollout_fraction: float = 0.2
    rollout_batch: int = 4
    ckpt_every: int = 100
    log_every: int = 25
    #: trajectories kept apart to validate the student (its own rollout vs the teacher's final latent)
    n_val: int = 16
    threads: int = 2
    #: the sampler the student is distilled for (:data:`kaleido.sampling.SAMPLERS`): ``euler`` regresses Euler
    #: landings (``tiny-turbo``), ``consistency`` the x0 prediction onto the teacher's endpoint (``tiny-rcm``)
    sampler: str = "euler"
    #: the consistency student's times (last 0; ``None``: TurboDiffusion's, :func:`kaleido.sampling.rcm_sigmas`)
    student_sigmas: tuple[float, ...] | None = None
    #: the weights the student starts from (a tiny variant's name)
    init: str = "tiny"
    #: the consistency student's last phase on its own re-noised states (:mod:`kaleido.tiny.onpolicy`): its steps
    #: (0: none), how many of the last times get own-state targets, its learning rate
    own_state_steps: int = 0
    own_state_last: int = 1
    own_state_lr: float = 3e-5
    #: the score-distillation phase (:mod:`kaleido.tiny.score_phase`, the reverse-divergence regulariser rCM adds):
    #: its steps (0: none), the student's and the fake score model's learning rates, the weight of its term
    score_steps: int = 0
    score_lr: float = 2e-5
    score_fake_lr: float = 2e-5
    score_weight: float = 0.25

    def validate(self) -> None:
        if self.n_trajectories <= self.n_val or self.n_val < 1:
            raise ValueError(f"n_trajectories={self.n_trajectories} must exceed n_val={self.n_val} >= 1")
        if self.chunk < 1 or self.batch < 1 or self.rollout_batch < 1:
            raise ValueError("chunk, batch and rollout_batch must be >= 1")
        if self.student_steps < 1 or self.student_steps >= self.teacher_steps:
            raise ValueError(f"student_steps={self.student_steps} must be in 1..{self.teacher_steps - 1}")
        if self.student_shift_terminal is not None and not 0.0 < self.student_shift_terminal < 1.0:
            raise ValueError(f"student_shift_terminal={self.student_shift_terminal} must be in (0, 1)")
        if not 0.0 <= self.rollout_fraction <= 1.0:
            raise ValueError(f"rollout_fraction={self.rollout_fraction} must be in [0, 1]")
        from kaleido.sampling import check_sampler

        check_sampler(self.sampler)
        if self.sampler == "consistency" and self.rollout_fraction:
            raise ValueError("the consistency student has no rollout phase (its sampler re-noises every step): "
                             "pass rollout_fraction=0")
        if (self.own_state_steps or self.score_steps) and self.sampler != "consistency":
            raise ValueError("the own-state and score phases are the consistency student's (--sampler consistency)")
        if self.score_steps < 0 or not 0 <= self.score_weight:
            raise ValueError(f"score_steps={self.score_steps} and score_weight={self.score_weight} must be >= 0")
        if self.own_state_steps < 0 or self.train_steps < 0 or not 1 <= self.own_state_last <= self.student_steps:
            raise ValueError(f"own_state_steps={self.own_state_steps} and train_steps={self.train_steps} must be "
                             f">= 0 and own_state_last={self.own_state_last} in 1..{self.student_steps}")
        init_folder(self.init)  # refused here, before the teacher's trajectories, not after them
        if self.student_sigmas is not None:
            if self.sampler != "consistency":  # the Euler student's schedule is shift and shift_terminal
                raise ValueError("student_sigmas (--times) are the consistency student's times (--sampler consistency);"
                                 " the Euler student's schedule is set by --shift-terminal")
            s = list(self.student_sigmas)
            if len(s) != self.student_steps + 1 or s[-1] != 0.0 or any(a <= b for a, b in zip(s, s[1:])) or s[0] > 1:
                raise ValueError(f"student_sigmas={s}: give {self.student_steps + 1} decreasing times in (0, 1] "
                                 "ending with 0")


def consistency_config(**overrides) -> "DistillConfig":
    """The recipe of the shipped consistency student (``tiny-rcm``): from ``tiny-turbo``'s weights, 240 teacher
    trajectories, 600 regression steps at batch 8 (about 20 minutes on two cores)."""
    base = dict(out_dir="runs/tiny-rcm", sampler="consistency", init="tiny-turbo", n_trajectories=240,
                train_steps=600, warmup=30, rollout_fraction=0.0, student_shift=1.0, student_shift_terminal=None)
    return DistillConfig(**{**base, **overrides})


def excluded_prompts() -> set[str]:
    """Prompts a student must never train on: the comparison's evaluation prompts and the calibration ones."""
    from kaleido.tiny.data import HELDOUT_PROMPTS as DEFAULT_PROMPTS

    out = set(DEFAULT_PROMPTS)
    root = Path(__file__).resolve().parents[3] / "configs" / "calibration"
    for name in ("prompts.txt", "heldout.txt"):
        f = root / name
        if f.is_file():
            out |= {ln.strip() for ln in f.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    return out


def training_prompts(n: int, seed: int) -> list[str]:
    """``n`` clip descriptions drawn as the training data draws them (:func:`kaleido.tiny.data.random_spec`),
    plus the two real-video prompts now and then; evaluation and calibration prompts are redrawn."""
    from kaleido.tiny.data import REAL_PROMPTS, random_spec

    rng = np.random.default_rng([seed, 7177])
    banned = excluded_prompts()
    real = list(REAL_PROMPTS.values())
    out: list[str] = []
    while len(out) < n:
        if rng.random() < 0.1:
            p = real[int(rng.integers(len(real)))]
        else:
            p = random_spec(rng).prompt
        if p not in banned:
            out.append(p)
    return out


def student_scheduler(base_scheduler, cfg: DistillConfig):
    """The teacher's scheduler class and config with the student's shift and terminal sigma; for the consistency
    student a :class:`kaleido.sampling.FlowSampler` on the consistency sampler carrying its fixed times."""
    if cfg.sampler == "consistency":
        from kaleido.sampling import make_sampler, rcm_sigmas

        flat = type(base_scheduler).from_config(base_scheduler.config, shift=cfg.student_shift,
                                                shift_terminal=cfg.student_shift_terminal)
        return make_sampler(flat, "consistency", cfg.student_sigmas or rcm_sigmas())
    return type(base_scheduler).from_config(base_scheduler.config, shift=cfg.student_shift,
                                            shift_terminal=cfg.student_shift_terminal)


def schedule_sigmas(scheduler, steps: int) -> list[float]:
    """The ``steps + 1`` sigmas (last 0) ``scheduler`` samples with."""
    scheduler.set_timesteps(steps)
    return [float(s) for s in scheduler.sigmas]


def consistency_loss(transformer, x: torch.Tensor, t: torch.Tensor, text: torch.Tensor,
                     target: torch.Tensor) -> torch.Tensor:
    """MSE of the student's clean-latent prediction ``x0 = x - t v`` from ``x`` at times ``t`` onto ``target``."""
    from kaleido.tiny.train_transformer import predict

    v = predict(transformer, x, t, text)
    return torch.nn.functional.mse_loss(x - t.view(-1, 1, 1, 1, 1) * v, target)


# --------------------------------------------------------------------------------------------- trajectories
def _chunk_paths(root: Path, i: int) -> tuple[Path, Path]:
    return root / f"chunk-{i:04d}.safetensors", root / f"chunk-{i:04d}.json"


@torch.no_grad()
def teacher_chunk(pipe, prompts: list[str], seeds: list[int], steps: int, guidance: float):
    """Run the teacher on ``prompts`` from the noise of ``seeds``; ``(states (B, steps + 1, C, T, H, W), sigmas)``."""
    from kaleido.tiny.pipeline import TINY_DEMO

    d = TINY_DEMO
    c = pipe.transformer.config.in_channels
    t = (d.num_frames - 1) // pipe.vae_scale_factor_temporal + 1
    h, w = d.height // pipe.vae_scale_factor_spatial, d.width // pipe.vae_scale_factor_spatial
    noise = torch.stack([torch.randn((c, t, h, w), generator=torch.Generator().manual_seed(s)) for s in seeds])
    states = [noise.clone()]

    def keep(_pipe, _i, _t, kw):
        states.append(kw["latents"].detach().float().clone())
        return kw

    pipe(list(prompts), negative_prompt=[d.negative_prompt] * len(prompts), height=d.height, width=d.width,
         num_frames=d.num_frames, num_inference_steps=steps, guidance_scale=guidance, latents=noise.clone(),
         max_sequence_length=d.max_sequence_length, output_type="latent", callback_on_step_end=keep,
         callback_on_step_end_tensor_inputs=["latents"])
    sigmas = [float(s) for s in pipe.scheduler.sigmas]
    return torch.stack(states, 1), sigmas


def make_trajectories(cfg: DistillConfig, pipe, progress: bool = True) -> Path:
    """Every chunk of teacher trajectories not yet on disk (each chunk depends only on ``(seed, index)``)."""
    root = Path(cfg.out_dir) / "trajectories"
    root.mkdir(parents=True, exist_ok=True)
    prompts = training_prompts(cfg.n_trajectories, cfg.seed)
    n_chunks = math.ceil(cfg.n_trajectories / cfg.chunk)
    for i in range(n_chunks):
        st, js = _chunk_paths(root, i)
        if js.is_file() and st.is_file():
            continue
        lo, hi = i * cfg.chunk, min(cfg.n_trajectories, (i + 1) * cfg.chunk)
        seeds = [cfg.noise_seed_base + k for k in range(lo, hi)]
        t0 = time.time()
        states, sigmas = teacher_chunk(pipe, prompts[lo:hi], seeds, cfg.teacher_steps, cfg.teacher_guidance)
        from safetensors.torch import save_file

        with atomic_path(st) as tmp:
            save_file({"states": states.contiguous()}, str(tmp))
        write_atomic(js, json.dumps(dict(prompts=prompts[lo:hi], seeds=seeds, sigmas=sigmas,
                                         steps=cfg.teacher_steps, guidance=cfg.teacher_guidance,
                                         seconds=round(time.time() - t0, 1))))
        if progress:
            print(f"trajectories {hi}/{cfg.n_trajectories} ({time.time() - t0:.1f} s for {hi - lo})", flush=True)
    return root


def load_trajectories(root: Path) -> tuple[torch.Tensor, list[float], list[str]]:
    """All chunks: states ``(N, K, C, T, H, W)``, the teacher's sigmas (``K``), the prompts (``N``)."""
    from safetensors.torch import load_file

    states, prompts, sigmas = [], [], None
    for js in sorted(root.glob("chunk-*.json")):
        meta = json.loads(js.read_text())
        states.append(load_file(str(js.with_suffix(".safetensors")))["states"])
        prompts += meta["prompts"]
        sigmas = meta["sigmas"]
    if not states:
        raise ValueError(f"no teacher trajectories under {root}: run the trajectory stage first")
    return torch.cat(states), sigmas, prompts


def states_at(states: torch.Tensor, teacher_sigmas: list[float], sigma: float) -> torch.Tensor:
    """The teacher's state at ``sigma``: exact on its Euler path (linear in sigma between two of its sigmas)."""
    ts = teacher_sigmas
    for k in range(len(ts) - 1):
        hi, lo = ts[k], ts[k + 1]
        if lo <= sigma <= hi:
            a = 0.0 if hi == lo else (hi - sigma) / (hi - lo)
            return (1 - a) * states[:, k] + a * states[:, k + 1]
    raise ValueError(f"sigma={sigma} outside the teacher's range [{ts[-1]}, {ts[0]}]")


# ------------------------------------------------------------------------------------------------ training
def _lr(cfg: DistillConfig, step: int) -> float:
    from kaleido.tiny.train_transformer import warmup_cosine

    return warmup_cosine(cfg.lr, step, cfg.warmup, cfg.train_steps, 0.1)


def rollout(transformer, x: torch.Tensor, sigmas: list[float], text: torch.Tensor) -> torch.Tensor:
    """The student's Euler sampling from ``x`` (at ``sigmas[0]``) along ``sigmas``."""
    from kaleido.tiny.train_transformer import predict

    for s, s_next in zip(sigmas[:-1], sigmas[1:]):
        v = predict(transformer, x, torch.full((len(x),), s), text)
        x = x + (s_next - s) * v
    return x


def consistency_val_psnr(transformer, at: torch.Tensor, sigmas: list[float], text: torch.Tensor) -> float:
    """Mean latent PSNR (dB) of the x0 prediction from the teacher's states at the student's times against the
    teacher's final latent (``at``: ``(N, steps + 1, ...)``, the last the endpoint)."""
    from kaleido.tiny.train_transformer import latent_psnr, predict

    out = []
    with torch.no_grad():
        for i, s in enumerate(sigmas[:-1]):
            t = torch.full((len(at),), s)
            out.append(latent_psnr(at[:, i] - s * predict(transformer, at[:, i], t, text), at[:, -1]))
    return sum(out) / len(out)


def train_student(cfg: DistillConfig, pipe, progress: bool = True):
    """Regress the student on the stored trajectories; returns its EMA weights (a transformer)."""
    from kaleido.tiny.checkpoint import has_checkpoint, load_checkpoint, save_checkpoint
    from kaleido.tiny.train_transformer import (PromptEmbeddings, append_log, latent_psnr, optimiser_step, predict,
                                                trainable_with_ema)

    states, teacher_sigmas, prompts = load_trajectories(Path(cfg.out_dir) / "trajectories")
    sigmas = schedule_sigmas(student_scheduler(pipe.scheduler, cfg), cfg.student_steps)
    at = torch.stack([states_at(states, teacher_sigmas, s) for s in sigmas], 1)  # (N, steps + 1, ...)
    at[:, 0] = states[:, 0]
    at[:, -1] = states[:, -1]
    n_val = cfg.n_val
    train_idx = torch.arange(n_val, len(at))
    emb = PromptEmbeddings(pipe, prompts)
    text = emb.batch(prompts)

    model, ema = trainable_with_ema(pipe.transformer.float().train())
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    root = Path(cfg.out_dir) / "train"
    root.mkdir(parents=True, exist_ok=True)
    ckpt, ema_dir, log = root / "ckpt", root / "ema", root / "log.jsonl"
    start = 0
    if has_checkpoint(ckpt):
        start = int(load_checkpoint(ckpt, model, opt)["step"])
        load_checkpoint(ema_dir, ema, None)
    gen = torch.Generator().manual_seed(cfg.seed)
    for _ in range(start):  # the same draws as an uninterrupted run
        torch.randint(len(train_idx), (max(cfg.batch, cfg.rollout_batch),), generator=gen)
        torch.randint(cfg.student_steps, (cfg.batch,), generator=gen)

    def val_psnr() -> float:
        if cfg.sampler == "consistency":  # the x0 prediction from the teacher's states, mean over the times
            return consistency_val_psnr(ema, at[:n_val], sigmas, text[:n_val])
        with torch.no_grad():
            return latent_psnr(rollout(ema, at[:n_val, 0], sigmas, text[:n_val]), at[:n_val, -1])

    rollout_from = int(cfg.train_steps * (1 - cfg.rollout_fraction))
    t0 = time.time()
    if start == 0:
        write_atomic(log, json.dumps(dict(step=0, val_latent_psnr=round(val_psnr(), 3), sigmas=sigmas)) + "\n")
    for step in range(start, cfg.train_steps):
        for g in opt.param_groups:
            g["lr"] = _lr(cfg, step)
        pick = train_idx[torch.randint(len(train_idx), (max(cfg.batch, cfg.rollout_batch),), generator=gen)]
        k = torch.randint(cfg.student_steps, (cfg.batch,), generator=gen)
        if cfg.sampler == "consistency":
            b = pick[: cfg.batch]
            t = torch.tensor([sigmas[i] for i in k.tolist()])
            loss = consistency_loss(model, at[b, k], t, text[b], at[b, -1])
        elif step >= rollout_from:
            b = pick[: cfg.rollout_batch]
            x = rollout(model, at[b, 0], sigmas, text[b])
            loss = torch.nn.functional.mse_loss(x, at[b, -1])
        else:
            b = pick[: cfg.batch]
            x = at[b, k]
            s = torch.tensor([sigmas[i] for i in k.tolist()])
            s_next = torch.tensor([sigmas[i + 1] for i in k.tolist()])
            v = predict(model, x, s, text[b])
            landed = x + (s_next - s).view(-1, 1, 1, 1, 1) * v
            loss = torch.nn.functional.mse_loss(landed, at[b, k + 1])
        optimiser_step(model, ema, opt, loss, cfg.ema_decay, step)
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.train_steps:
            rec = dict(step=done, loss=round(float(loss.detach()), 6), lr=_lr(cfg, step), seconds=round(time.time() - t0, 1),
                       phase=("consistency" if cfg.sampler == "consistency"
                              else "rollout" if step >= rollout_from else "step"))
            if done % (cfg.log_every * 8) == 0 or done == cfg.train_steps:
                rec["val_latent_psnr"] = round(val_psnr(), 3)
            append_log(log, rec, progress)
        if done % cfg.ckpt_every == 0 or done == cfg.train_steps:
            save_checkpoint(ckpt, model, opt, {"step": done})
            save_checkpoint(ema_dir, ema, opt, {"step": done})
    return ema, sigmas, time.time() - t0


def train_own_states(cfg: DistillConfig, pipe, teacher, student, progress: bool = True):
    """The own-state phase (:mod:`kaleido.tiny.onpolicy`) from ``student`` (the regression's EMA weights): builds
    the targets (resumable), then ``own_state_steps`` steps whose batches are half own-state pairs (at the last
    ``own_state_last`` times) and half regression pairs; returns ``(EMA weights, seconds of targets, seconds of
    training)``."""
    from kaleido.tiny.checkpoint import has_checkpoint, load_checkpoint, save_checkpoint
    from kaleido.tiny.onpolicy import load_targets, make_targets
    from kaleido.tiny.train_transformer import (PromptEmbeddings, latent_psnr, optimiser_step, phase_logger, predict,
                                                trainable_with_ema, warmup_cosine)

    states, teacher_sigmas, prompts = load_trajectories(Path(cfg.out_dir) / "trajectories")
    sigmas = schedule_sigmas(student_scheduler(pipe.scheduler, cfg), cfg.student_steps)
    at = torch.stack([states_at(states, teacher_sigmas, s) for s in sigmas], 1)
    at[:, 0] = states[:, 0]
    at[:, -1] = states[:, -1]
    emb = PromptEmbeddings(pipe, prompts)
    text, uncond = emb.batch(prompts), emb.batch([""] * len(prompts))
    teacher = teacher.float().eval()
    model = student.float().eval()
    root = make_targets(Path(cfg.out_dir), model, teacher, states[:, 0], text, uncond, sigmas, teacher_sigmas,
                        cfg.teacher_guidance, cfg.own_state_last, cfg.noise_seed_base + 500_000, cfg.chunk, progress)
    ins, tgs, times, targets_s = load_targets(root)
    n_val, n = cfg.n_val, cfg.own_state_steps
    train_idx = torch.arange(n_val, len(at))
    model, ema = trainable_with_ema(model.train())
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.own_state_lr, weight_decay=0.0)
    train = Path(cfg.out_dir) / "train"
    train.mkdir(parents=True, exist_ok=True)
    ckpt, ema_dir, log = train / "own_ckpt", train / "own_ema", train / "log.jsonl"
    start = 0
    if has_checkpoint(ckpt):
        start = int(load_checkpoint(ckpt, model, opt)["step"])
        load_checkpoint(ema_dir, ema, None)
    half = max(1, cfg.batch // 2)
    gen = torch.Generator().manual_seed(cfg.seed + 1)

    def draws():
        return (train_idx[torch.randint(len(train_idx), (half,), generator=gen)],
                torch.randint(cfg.student_steps, (half,), generator=gen),
                train_idx[torch.randint(len(train_idx), (half,), generator=gen)],
                torch.randint(len(times), (half,), generator=gen))

    for _ in range(start):  # the same draws as an uninterrupted run
        draws()

    def own_val() -> float:
        """Latent PSNR (dB) of the x0 prediction from the student's own validation states against their targets."""
        out = []
        with torch.no_grad():
            for j, s in enumerate(times):
                x = ins[:n_val, j]
                out.append(latent_psnr(x - s * predict(ema, x, torch.full((n_val,), s), text[:n_val]), tgs[:n_val, j]))
        return sum(out) / len(out)

    record = phase_logger(log, "own-states", cfg.log_every * 4, n, progress, lambda: dict(
        val_latent_psnr=round(consistency_val_psnr(ema, at[:n_val], sigmas, text[:n_val]), 3),
        val_own_state_psnr=round(own_val(), 3)))

    t0 = time.time()
    if start == 0:
        record(0)
    for step in range(start, n):
        lr = warmup_cosine(cfg.own_state_lr, step, min(cfg.warmup, max(1, n // 10)), n, 0.1)
        for g in opt.param_groups:
            g["lr"] = lr
        b1, k, b2, j = draws()
        t1 = torch.tensor([sigmas[i] for i in k.tolist()])
        t2 = torch.tensor([times[i] for i in j.tolist()])
        loss = 0.5 * (consistency_loss(model, at[b1, k], t1, text[b1], at[b1, -1])
                      + consistency_loss(model, ins[b2, j], t2, text[b2], tgs[b2, j]))
        # the EMA starts from the student the phase begins with: its full decay from the first step
        optimiser_step(model, ema, opt, loss, cfg.ema_decay, step + 10_000)
        done = step + 1
        if done % cfg.log_every == 0 or done == n:
            record(done, loss=round(float(loss.detach()), 6), lr=lr, seconds=round(time.time() - t0, 1))
        if done % cfg.ckpt_every == 0 or done == n:
            save_checkpoint(ckpt, model, opt, {"step": done})
            save_checkpoint(ema_dir, ema, opt, {"step": done})
    return ema, targets_s, time.time() - t0


def train_score(cfg: DistillConfig, pipe, teacher, student, progress: bool = True):
    """The score phase (:mod:`kaleido.tiny.score_phase`) from ``student``, on the own-state inputs and targets (built
    from ``student`` where they are not on disk yet); returns ``(EMA weights, seconds of targets, seconds)``."""
    from kaleido.tiny.onpolicy import load_targets, make_targets
    from kaleido.tiny.score_phase import train_score_phase
    from kaleido.tiny.train_transformer import PromptEmbeddings

    states, teacher_sigmas, prompts = load_trajectories(Path(cfg.out_dir) / "trajectories")
    sigmas = schedule_sigmas(student_scheduler(pipe.scheduler, cfg), cfg.student_steps)
    emb = PromptEmbeddings(pipe, prompts)
    text, uncond = emb.batch(prompts), emb.batch([""] * len(prompts))
    root = make_targets(Path(cfg.out_dir), student.float().eval(), teacher.float().eval(), states[:, 0], text, uncond,
                        sigmas, teacher_sigmas, cfg.teacher_guidance, cfg.own_state_last, cfg.noise_seed_base + 500_000,
                        cfg.chunk, progress)
    ins, tgs, times, targets_s = load_targets(root)
    ema, secs = train_score_phase(Path(cfg.out_dir), student, teacher, ins, tgs, times, text, uncond,
                                  torch.arange(cfg.n_val, len(ins)), steps=cfg.score_steps, lr=cfg.score_lr,
                                  fake_lr=cfg.score_fake_lr, guidance=cfg.teacher_guidance,
                                  batch=max(1, cfg.batch // 2), weight=cfg.score_weight, ema_decay=cfg.ema_decay,
                                  seed=cfg.seed, log_every=cfg.log_every, val_idx=torch.arange(cfg.n_val),
                                  progress=progress)
    return ema, targets_s, secs


def export_variant(cfg: DistillConfig, transformer, scheduler, sigmas: list[float], target: Path | None = None,
                   timing: dict | None = None) -> Path:
    """Save the student's transformer and scheduler and ``variant.json`` to ``target`` (default ``out_dir/variant``)."""
    target = Path(target) if target is not None else Path(cfg.out_dir) / "variant"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    transformer.save_pretrained(str(target / "transformer"), safe_serialization=True)
    from diffusers import FlowMatchEulerDiscreteScheduler

    # diffusers' own class in the config (the consistency sampler is its stochastic_sampling=True; the loader puts
    # kaleido's seeded FlowSampler on it with the times of variant.json)
    FlowMatchEulerDiscreteScheduler.from_config(scheduler.config).save_pretrained(str(target / "scheduler"))
    record = dict(num_inference_steps=cfg.student_steps, guidance_scale=1.0, sampler=cfg.sampler,
                  sigmas=[round(s, 6) for s in sigmas],
                  teacher=dict(steps=cfg.teacher_steps, guidance=cfg.teacher_guidance), recipe=asdict(cfg),
                  **(timing or {}))
    write_atomic(target / "variant.json", json.dumps(record, indent=1))
    return target


def init_folder(init: str) -> Path | None:
    """The transformer folder of ``init`` when it names a run's exported variant folder (``runs/NAME/variant``, its
    ``transformer/`` in diffusers layout), ``None`` when it names a tiny variant; anything else is refused."""
    from kaleido.tiny.pipeline import TINY_VARIANTS

    folder = Path(init) / "transformer"
    if folder.is_dir():
        return folder
    if init not in TINY_VARIANTS:
        raise ValueError(f"init={init!r}: give a tiny variant ({', '.join(sorted(TINY_VARIANTS))}) or a run's "
                         "variant folder (one with transformer/ inside)")
    return None


def initial_transformer(init: str):
    """The transformer a student starts from: a tiny variant's (``"tiny-turbo"``) or a run's variant folder's."""
    from kaleido.tiny.pipeline import from_pretrained, load_pipeline

    folder = init_folder(init)
    if folder is None:
        return load_pipeline(init).transformer
    from diffusers import WanTransformer3DModel

    return from_pretrained(WanTransformer3DModel, str(folder))


def run_distill(cfg: DistillConfig, progress: bool = True, stop_after: str | None = None) -> Path:
    """Trajectories, regression, export; each stage resumes where a killed run stopped."""
    from kaleido.tiny.pipeline import load_pipeline

    cfg.validate()
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "distill_config.json", json.dumps(asdict(cfg), indent=1))
    pipe = load_pipeline("tiny")
    pipe.set_progress_bar_config(disable=True)
    t0 = time.time()
    root = make_trajectories(cfg, pipe, progress)
    # the teacher's time as the chunks recorded it (a resumed run made some of them earlier)
    traj_s = sum(json.loads(f.read_text()).get("seconds", 0.0) for f in root.glob("chunk-*.json")) or time.time() - t0
    if stop_after == "trajectories":
        return out
    teacher = pipe.transformer
    if cfg.init != "tiny":  # the student's first weights: the teacher's pipeline with another student's transformer
        pipe.transformer = initial_transformer(cfg.init)
    ema, sigmas, train_s = train_student(cfg, pipe, progress)
    timing = {"trajectories_s": round(traj_s, 1), "train_s": round(train_s, 1)}
    if cfg.own_state_steps:
        ema, targets_s, own_s = train_own_states(cfg, pipe, teacher, ema, progress)
        timing.update(own_state_targets_s=round(targets_s, 1), own_state_train_s=round(own_s, 1))
    if cfg.score_steps:
        ema, targets_s, score_s = train_score(cfg, pipe, teacher, ema, progress)
        timing.update(score_train_s=round(score_s, 1))
    return export_variant(cfg, ema, student_scheduler(pipe.scheduler, cfg), sigmas, timing=timing)


def parse_times(text: str) -> tuple[float, ...]:
    """``--times 0.988,0.853,0.609,0.25,0`` as a tuple (the config's validation checks the order)."""
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated times, e.g. 0.988,0.853,0.609,0.25,0")


def main() -> None:  # pragma: no cover - the long run: python -m kaleido.tiny.distill ...
    import argparse

    p = argparse.ArgumentParser(description="Distil the shipped miniature transformer to a few-step student.")
    p.add_argument("--sampler", choices=["euler", "consistency"], default="euler",
                   help="the sampler the student is distilled for: euler (tiny-turbo) or consistency (tiny-rcm)")
    p.add_argument("--out", default=None, help="run folder (default runs/tiny-turbo or runs/tiny-rcm)")
    p.add_argument("--trajectories", type=int, default=None)
    p.add_argument("--train-steps", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="the student's sampling steps")
    p.add_argument("--shift-terminal", type=float, default=None)
    p.add_argument("--times", type=parse_times, default=None,
                   help="the consistency student's times, comma-separated, last 0 (default TurboDiffusion's)")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--rollout-fraction", type=float, default=None)
    p.add_argument("--init", default=None,
                   help="the student's first weights: a tiny variant or a run's variant folder")
    p.add_argument("--own-state-steps", type=int, default=None,
                   help="steps of the consistency student's last phase on its own re-noised states (0: none)")
    p.add_argument("--own-state-lr", type=float, default=None)
    p.add_argument("--own-state-last", type=int, default=None, help="how many of the last times get own-state targets")
    p.add_argument("--score-steps", type=int, default=None,
                   help="steps of the consistency student's score-distillation phase (0: none)")
    p.add_argument("--score-weight", type=float, default=None)
    p.add_argument("--stop-after", choices=["trajectories"], default=None)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    given = {"n_trajectories": a.trajectories, "train_steps": a.train_steps, "student_steps": a.steps, "lr": a.lr,
             "rollout_fraction": a.rollout_fraction, "student_shift_terminal": a.shift_terminal, "init": a.init,
             "own_state_steps": a.own_state_steps, "own_state_lr": a.own_state_lr, "own_state_last": a.own_state_last,
             "score_steps": a.score_steps, "score_weight": a.score_weight, "student_sigmas": a.times}
    given = {k: v for k, v in given.items() if v is not None}
    if a.out is not None:
        given["out_dir"] = a.out
    cfg = (consistency_config(threads=a.threads, **given) if a.sampler == "consistency"
           else DistillConfig(threads=a.threads, **given))
    try:
        cfg.validate()
    except ValueError as e:  # one line naming the setting, not a traceback
        p.error(str(e))
    print(run_distill(cfg, stop_after=a.stop_after))


if __name__ == "__main__":  # pragma: no cover
    main()
