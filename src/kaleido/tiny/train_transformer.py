"""Train the tiny ``WanTransformer3DModel`` by flow matching on cached VAE latents.

Flow matching as the shipped ``FlowMatchEulerDiscreteScheduler`` integrates it:
``x_sigma = (1 - sigma) x0 + sigma eps``, target ``v = eps - x0``, model input timestep
``1000 sigma``; training sigmas are ``shift u / (1 + (shift - 1) u)`` with ``u ~ U(0, 1)``
(by default the sampler's shift, ``SCHEDULER_SHIFT``); with ``frame_noise`` some samples draw one
sigma per latent frame (``training_sigmas``). Latents are normalised per channel with the statistics the
VAE config stores (``latents_mean`` / ``latents_std``), exactly as ``WanPipeline`` undoes it.
Text conditioning: the pipeline's own ``encode_prompt`` (``max_sequence_length`` =
``TINY_TEXT_TOKENS``, the length the demo settings generate with; frozen UMT5), with the prompt replaced by ``""`` ``cfg_dropout`` of the time, for classifier-free guidance.

Resumable (``out_dir/ckpt``: weights, EMA weights, AdamW moments, step) and reproducible: the
batch and noise of step ``i`` depend only on ``(seed, i)``.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from kaleido.atomic import write_atomic
from kaleido.tiny.build import SCHEDULER_SHIFT, TransformerArch, build_transformer
from kaleido.tiny.checkpoint import has_checkpoint, load_checkpoint, save_checkpoint
from kaleido.tiny.latents import LatentSet
from kaleido.tiny.pipeline import TINY_TEXT_TOKENS


@dataclass
class TransformerTrainConfig:
    out_dir: str = "runs/tiny/transformer"
    steps: int = 4000
    batch: int = 4
    lr: float = 1e-3
    warmup: int = 50
    #: the first ``lowres_steps`` steps draw ``lowres_batch`` clips from the low-resolution latent
    #: set (progressive resolution, as Wan itself is trained: cheap steps first, then the demo size)
    lowres_steps: int = 0
    lowres_batch: int = 8
    cfg_dropout: float = 0.1
    ema_decay: float = 0.995
    #: shift of the training sigmas (the shipped recipe: the sampler's); a larger one puts more
    #: steps at high noise, where a sample's layout - and so the object's path - is decided
    shift: float = SCHEDULER_SHIFT
    #: probability that a training sample draws one noise level per latent frame instead of one
    #: for the clip (``training_sigmas``; 0 = the plain flow matching the sampler integrates)
    frame_noise: float = 0.0
    max_sequence_length: int = TINY_TEXT_TOKENS
    seed: int = 0
    ckpt_every: int = 100
    log_every: int = 10
    val_every: int = 250
    val_clips: int = 32  # held-out clips scored during training (the report scores more)
    #: at each validation also log how much the held-out loss of the moving clips rises when their
    #: direction word is swapped (``val_direction_swap_gain``; ~0: the model ignores the word)
    word_probe: bool = True
    time_budget_s: float | None = None
    #: a saved ``WanTransformer3DModel`` folder (``config.json`` + safetensors) whose weights start the run
    #: (fine-tuning, :mod:`kaleido.tiny.finetune`); its architecture must be ``arch``. Used only when
    #: ``out_dir`` holds no checkpoint yet (a resumed run continues from its own)
    init_from: str | None = None
    arch: TransformerArch = field(default_factory=TransformerArch)

    def validate(self) -> None:
        if self.steps < 1 or self.batch < 1:
            raise ValueError(f"steps={self.steps}, batch={self.batch}: both must be >= 1")
        if not 0 <= self.lowres_steps <= self.steps or self.lowres_batch < 1:
            raise ValueError(f"lowres_steps={self.lowres_steps}, lowres_batch={self.lowres_batch}: need "
                             f"0 <= lowres_steps <= steps ({self.steps}) and lowres_batch >= 1")
        if not 0.0 <= self.cfg_dropout < 1.0:
            raise ValueError(f"cfg_dropout={self.cfg_dropout} must be in [0, 1)")
        if not 0.0 <= self.frame_noise <= 1.0:
            raise ValueError(f"frame_noise={self.frame_noise} must be in [0, 1] (a probability per sample)")
        if self.shift <= 0:
            raise ValueError(f"shift={self.shift} must be > 0 (1 = uniform sigmas)")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay={self.ema_decay} must be in [0, 1)")


class PromptEmbeddings:
    """Embeddings of a fixed set of prompts via ``pipe.encode_prompt``; ``""`` is the unconditional one.

    Stored trimmed to each prompt's length and zero-padded on demand to ``max_sequence_length``
    (what ``WanPipeline._get_t5_prompt_embeds`` produces)."""

    def __init__(self, pipe, prompts: list[str], max_sequence_length: int = TINY_TEXT_TOKENS):
        self.max_len = max_sequence_length
        self.table: dict[str, torch.Tensor] = {}
        unique = sorted(set(prompts) | {""})
        with torch.no_grad():
            for p in unique:
                emb = pipe.encode_prompt(p, do_classifier_free_guidance=False, max_sequence_length=max_sequence_length,
                                         device=torch.device("cpu"))[0][0]
                n = int((emb.abs().sum(-1) > 0).sum())
                self.table[p] = emb[:n].clone()

    def batch(self, prompts: list[str]) -> torch.Tensor:
        """``(B, max_sequence_length, text_dim)``."""
        first = next(iter(self.table.values()))
        out = torch.zeros(len(prompts), self.max_len, first.shape[-1])
        for i, p in enumerate(prompts):
            e = self.table[p]
            out[i, : e.shape[0]] = e
        return out


def normalise(latents: torch.Tensor, mean, std) -> torch.Tensor:
    """Raw VAE latents -> model space ``(z - mean) / std`` (per channel)."""
    m = torch.as_tensor(mean, dtype=latents.dtype).view(1, -1, 1, 1, 1)
    s = torch.as_tensor(std, dtype=latents.dtype).view(1, -1, 1, 1, 1)
    return (latents - m) / s


def shifted_sigma(u: torch.Tensor, shift: float) -> torch.Tensor:
    return shift * u / (1 + (shift - 1) * u)


def training_sigmas(gen: torch.Generator, batch: int, frames: int, shift: float, frame_noise: float) -> torch.Tensor:
    """Noise levels of one training batch, ``(B, frames)`` (one per latent frame).

    A sample gets one shifted-uniform sigma for all its frames, except with probability
    ``frame_noise``, when each latent frame draws its own (diffusion forcing; Wan 2.2 TI2V trains
    its conditioning frame the same way, with per-token timesteps). Such a sample shows some
    frames clearer than others, so the prompt's direction word says where the object is in the
    noisier frames - far more of the loss than it explains when all frames are equally noisy."""
    sigma = shifted_sigma(torch.rand(batch, 1, generator=gen), shift).expand(batch, frames).clone()
    if frame_noise:
        own = torch.rand(batch, generator=gen) < frame_noise
        per_frame = shifted_sigma(torch.rand(batch, frames, generator=gen), shift)
        sigma[own] = per_frame[own]
    return sigma


def _sigma_view(sigma: torch.Tensor) -> torch.Tensor:
    """sigma ``(B,)`` or ``(B, T)`` -> broadcastable against ``(B, C, T, H, W)``."""
    return sigma.view(-1, 1, 1, 1, 1) if sigma.ndim == 1 else sigma[:, None, :, None, None]


def flow_matching_pair(x0: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor):
    """``(x_sigma, v_target)`` for sigma ``(B,)`` or per latent frame ``(B, T)``."""
    s = _sigma_view(sigma)
    return (1 - s) * x0 + s * noise, noise - x0


def predict(transformer, x_t: torch.Tensor, sigma: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    """The model's velocity; sigma ``(B,)``, or ``(B, T)`` per latent frame, passed as per-token
    timesteps (``(B, tokens)``, diffusers' Wan 2.2 convention) - a batch whose frames all share
    one sigma takes the ``(B,)`` path, the one ``WanPipeline`` samples with."""
    if sigma.ndim == 2:
        if bool((sigma == sigma[:, :1]).all()):
            sigma = sigma[:, 0]
        else:
            p_t, p_h, p_w = transformer.config.patch_size
            if p_t != 1:
                raise ValueError(f"per-frame sigmas need a transformer with temporal patch size 1, not {p_t}: "
                                 "its tokens would mix latent frames of different noise levels")
            h, w = x_t.shape[-2:]
            sigma = sigma[:, :, None].expand(-1, -1, (h // p_h) * (w // p_w)).reshape(len(sigma), -1)
    return transformer(hidden_states=x_t, timestep=sigma * 1000, encoder_hidden_states=text, return_dict=False)[0]


def latent_psnr(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Mean over the batch of each latent's PSNR (dB) against ``target``, the peak being ``target``'s largest
    magnitude (what the distillation's validation figures report)."""
    peak = target.abs().amax(dim=tuple(range(1, target.ndim))) ** 2
    err = ((pred - target) ** 2).mean(dim=tuple(range(1, target.ndim)))
    return float((10 * torch.log10(peak / err)).mean())


def trainable_with_ema(model):
    """``model`` with gradients on, and a frozen copy of it in eval mode (its EMA): ``(model, ema)``."""
    import copy

    for p in model.parameters():
        p.requires_grad_(True)
    ema = copy.deepcopy(model).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    return model, ema


def append_log(path, record: dict, progress: bool) -> None:
    """Append ``record`` as one JSON line to ``path`` (a killed run leaves whole lines) and print it if ``progress``."""
    import json

    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
    if progress:
        print(json.dumps(record), flush=True)


def phase_logger(path, phase: str, every: int, last: int, progress: bool, measures):
    """``record(step, **extra)`` for a training phase: appends ``{step, phase, **extra}`` to ``path``
    (:func:`append_log`), with ``measures()``'s validation figures added at step 0, every ``every`` steps and at
    step ``last``."""

    def record(step: int, **extra) -> None:
        rec = dict(step=step, phase=phase, **extra)
        if step % every == 0 or step in (0, last):
            rec.update(measures())
        append_log(path, rec, progress)

    return record


def optimiser_step(model, ema, opt, loss: torch.Tensor, ema_decay: float, step: int) -> None:
    """Backward, clip the gradient norm to 1, AdamW step, then move ``ema`` towards ``model``
    (decay ``min(ema_decay, (1 + step) / (10 + step))``: fast at first)."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    with torch.no_grad():
        d = min(ema_decay, (1 + step) / (10 + step))
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm, 1 - d)


def warmup_cosine(lr: float, step: int, warmup: int, total: int, floor: float) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine from ``lr`` down to ``floor * lr`` at ``total``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def lr_at(cfg: TransformerTrainConfig, step: int) -> float:
    return warmup_cosine(cfg.lr, step, cfg.warmup, cfg.steps, 0.05)


def fixed_validation_draws(n: int, shape: tuple[int, ...], sigmas: list[float], seed: int = 1234):
    """Fixed noise for validation: ``(len(sigmas), n, *shape)``."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((len(sigmas), n, *shape), generator=gen)


@torch.no_grad()
def validation_loss_per_sigma(predict_fn, x0: torch.Tensor, text: torch.Tensor, sigmas: list[float], noise: torch.Tensor,
                              batch: int = 16, clean_frames: int = 0) -> list[float]:
    """Mean flow-matching MSE at each fixed sigma; ``predict_fn(x_t, sigma, text) -> v``.

    ``clean_frames``: the first that many latent frames are given clean (sigma 0, per-frame
    sigmas ``(B, T)``) and the loss is scored on the others; 0: one sigma ``(B,)`` for the clip."""
    if not 0 <= clean_frames < x0.shape[2]:
        raise ValueError(f"clean_frames={clean_frames} must leave at least one of the {x0.shape[2]} latent frames noisy")
    losses = []
    for k, s in enumerate(sigmas):
        total, count = 0.0, 0
        for i in range(0, len(x0), batch):
            xb, nb = x0[i : i + batch], noise[k, i : i + batch]
            if clean_frames:
                sig = torch.full((len(xb), xb.shape[2]), float(s))
                sig[:, :clean_frames] = 0.0
            else:
                sig = torch.full((len(xb),), float(s))
            x_t, v = flow_matching_pair(xb, nb, sig)
            err = (predict_fn(x_t, sig, text[i : i + batch]) - v)[:, :, clean_frames:] ** 2
            total += float(err.sum())
            count += err.numel()
        losses.append(total / count)
    return losses


VAL_SIGMAS = [0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95]
#: the noise levels of the training log's word probe (where a sample's layout is decided)
PROBE_SIGMAS = [0.75, 0.95]


def word_probe_set(val: LatentSet, n: int) -> tuple[list[int], list[str], list[str]] | None:
    """Moving clips among the first ``n`` held-out ones: (indices, true prompts, prompts with the
    direction word swapped); ``None`` when there are none."""
    from kaleido.tiny.evaluate import swapped_prompt

    idx = [i for i in val.moving() if i < n]
    if not idx:
        return None
    return idx, [swapped_prompt(val.specs[i], None) for i in idx], [swapped_prompt(val.specs[i], "direction") for i in idx]


def direction_swap_gain(predict_fn, x_val: torch.Tensor, val_noise: torch.Tensor, probe, emb: "PromptEmbeddings",
                        clean_frames: int = 0) -> float:
    """Relative rise of the held-out loss of the probe's clips at ``PROBE_SIGMAS`` when their
    direction word is swapped (same noise): ``swapped / true - 1``; ``clean_frames``: see
    ``validation_loss_per_sigma`` (1: the word alone says where the first frame's object goes)."""
    idx, true, swapped = probe
    rows = [VAL_SIGMAS.index(s) for s in PROBE_SIGMAS]
    x0, noise = x_val[idx], val_noise[rows][:, idx]
    a = validation_loss_per_sigma(predict_fn, x0, emb.batch(true), PROBE_SIGMAS, noise, clean_frames=clean_frames)
    b = validation_loss_per_sigma(predict_fn, x0, emb.batch(swapped), PROBE_SIGMAS, noise, clean_frames=clean_frames)
    return float(np.mean(b) / max(float(np.mean(a)), 1e-12) - 1)


def load_transformer_weights(folder: str | Path) -> dict[str, torch.Tensor]:
    """The state dict of the ``WanTransformer3DModel`` saved in ``folder`` (safetensors only, never a pickle)."""
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise ValueError(f"{folder}: no .safetensors weights there; pass a folder a WanTransformer3DModel was saved "
                         "to (save_pretrained) or a pipeline's transformer/ folder")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        weights.update(load_file(str(f)))
    return weights


def train_transformer(cfg: TransformerTrainConfig, train: LatentSet, val: LatentSet, pipe, latents_mean, latents_std,
                      progress: bool = True, train_lowres: LatentSet | None = None):
    """Train (or resume); returns the EMA transformer. Writes ``out_dir/{ckpt,log.jsonl,config.json}``.

    ``train_lowres``: the low-resolution set of the first ``cfg.lowres_steps`` steps."""
    from tqdm.auto import tqdm

    cfg.validate()
    if cfg.lowres_steps and train_lowres is None:
        raise ValueError(f"lowres_steps={cfg.lowres_steps} needs a low-resolution latent set (train_lowres)")
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "config.json", json.dumps(asdict(cfg), indent=1))
    text_dim = pipe.text_encoder.config.d_model
    z_dim = train.latents.shape[1]
    model = build_transformer(cfg.arch, text_dim=text_dim, z_dim=z_dim, seed=cfg.seed)
    ema = build_transformer(cfg.arch, text_dim=text_dim, z_dim=z_dim, seed=cfg.seed)
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01, betas=(0.9, 0.99))
    start = 0
    if has_checkpoint(out / "ckpt"):
        start = load_checkpoint(out / "ckpt", model, opt)["step"]
        load_checkpoint(out / "ema", ema, None)
    elif cfg.init_from:
        weights = load_transformer_weights(cfg.init_from)
        for m in (model, ema):
            try:
                m.load_state_dict(weights)
            except RuntimeError as e:
                raise ValueError(f"init_from={cfg.init_from!r}: its weights do not fit this run's architecture "
                                 f"{asdict(cfg.arch)} ({str(e).splitlines()[0][:200]})") from None
    x_train = normalise(train.latents, latents_mean, latents_std)
    x_low = normalise(train_lowres.latents, latents_mean, latents_std) if cfg.lowres_steps else None
    x_val = normalise(val.latents, latents_mean, latents_std)[: cfg.val_clips]
    probe = word_probe_set(val, cfg.val_clips) if cfg.word_probe else None
    if cfg.word_probe and probe is None:
        warnings.warn(f"word_probe: none of the first {cfg.val_clips} held-out clips moves, so the log will have no "
                      "val_direction_swap_gain; add moving procedural clips to the held-out set", stacklevel=2)
    emb = PromptEmbeddings(pipe, train.prompts + val.prompts + (train_lowres.prompts if x_low is not None else [])
                           + (probe[1] + probe[2] if probe else []), cfg.max_sequence_length)
    val_text = emb.batch(val.prompts[: cfg.val_clips])
    val_noise = fixed_validation_draws(len(x_val), tuple(x_val.shape[1:]), VAL_SIGMAS)
    log = open(out / "log.jsonl", "a")
    t_start = time.time()
    model.train()
    bar = tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, desc="transformer", disable=not progress)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = lr_at(cfg, step)
        rng = np.random.default_rng([cfg.seed, step, 2])
        low = step < cfg.lowres_steps
        source, x_source = (train_lowres, x_low) if low else (train, x_train)
        idx = rng.integers(0, len(source), size=cfg.lowres_batch if low else cfg.batch)
        prompts = [("" if rng.random() < cfg.cfg_dropout else source.prompts[i]) for i in idx]
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        x0 = x_source[torch.from_numpy(idx)]
        noise = torch.randn(x0.shape, generator=gen)
        sigma = training_sigmas(gen, len(idx), x0.shape[2], cfg.shift, cfg.frame_noise)
        x_t, v = flow_matching_pair(x0, noise, sigma)
        pred = predict(model, x_t, sigma, emb.batch(prompts))
        loss = ((pred - v) ** 2).mean()
        optimiser_step(model, ema, opt, loss, cfg.ema_decay, step)
        record = None
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            record = dict(step=step, loss=float(loss.detach()), lr=lr_at(cfg, step), elapsed_s=round(time.time() - t_start, 1))
        if cfg.val_every and ((step + 1) % cfg.val_every == 0 or step == cfg.steps - 1):
            ema.eval()
            per_sigma = validation_loss_per_sigma(lambda x, s, t: predict(ema, x, s, t), x_val, val_text, VAL_SIGMAS, val_noise)
            record = record or dict(step=step, elapsed_s=round(time.time() - t_start, 1))
            record.update(val_loss=float(np.mean(per_sigma)), val_per_sigma=per_sigma)
            if probe:
                record["val_direction_swap_gain"] = direction_swap_gain(
                    lambda x, s, t: predict(ema, x, s, t), x_val, val_noise, probe, emb)
        if record:
            log.write(json.dumps(record) + "\n")
            log.flush()
        bar.set_postfix(loss=f"{float(loss.detach()):.4f}")
        out_of_time = cfg.time_budget_s is not None and time.time() - t_start > cfg.time_budget_s
        if (step + 1) % cfg.ckpt_every == 0 or step == cfg.steps - 1 or out_of_time:
            save_checkpoint(out / "ckpt", model, opt, {"step": step + 1})
            save_checkpoint(out / "ema", ema, torch.optim.SGD([torch.zeros(1)], lr=0.0), {"step": step + 1})
        if out_of_time:
            break
    log.close()
    ema.eval()
    return ema
