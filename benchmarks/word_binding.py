"""Does the tiny transformer bind its direction word? One training variant, measured in one run.

Trains a ``WanTransformer3DModel`` from scratch on the latents of a finished tiny run's VAE
(``--run``, e.g. ``runs/tiny2``), with the recipe knobs of ``kaleido.tiny`` and one diagnostic,
and logs the word probe every ``--probe-every`` steps: the relative rise of the held-out
flow-matching loss of the moving clips at sigma 0.75 / 0.95 when their direction word is swapped
(``train_transformer.direction_swap_gain``; ~0 = the model ignores the word).  At the end it
prints the word use (``report.measure_word_use``) and the prompt check on the 12 evaluation
prompts x 2 seeds at ``--size``.

Knobs: ``--size`` (clip side: 32 = 5x8x8 latents, ~6x cheaper steps than 64), ``--trail``,
``--pan`` (tracking camera), ``--frame-noise P`` (per-frame noise levels; also logs the probe
with the first latent frame clean), ``--shift``, ``--heads``. Diagnostics that cannot ship:
``--coords``, two extra input channels with each token's absolute (x, y), to test whether
translation equivariance (RoPE-only positions) is what keeps the word unbound; ``--plain``,
plain backgrounds and moving objects only, so that direction is most of what is left to learn
(the evaluation prompts' other backgrounds are then unseen words).  The model card's runs ("What still fails") used
this training loop and these knobs.

Run: ``OMP_WAIT_POLICY=PASSIVE python benchmarks/word_binding.py --run runs/tiny2 --size 32 --budget-s 480``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="finished tiny run (its vae/ checkpoint and latents/stats.json)")
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6000, help="cosine horizon")
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--shift", type=float, default=3.0)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--trail", action="store_true")
    ap.add_argument("--pan", action="store_true", help="tracking camera: the background slides against the motion")
    ap.add_argument("--frame-noise", type=float, default=0.0,
                    help="probability that a sample draws one noise level per latent frame (diffusion forcing)")
    ap.add_argument("--plain", action="store_true",
                    help="diagnostic: plain backgrounds and moving objects only, so direction is most of what is left to learn")
    ap.add_argument("--coords", action="store_true", help="diagnostic: absolute (x, y) input channels")
    ap.add_argument("--n-train", type=int, default=1200, help="procedural training clips (+100 real)")
    ap.add_argument("--probe-every", type=int, default=250)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    from diffusers import WanTransformer3DModel

    from kaleido.tiny import evaluate as E
    from kaleido.tiny import train_transformer as TT
    from kaleido.tiny.build import assemble_pipeline, build_text_encoder, build_tokenizer
    from kaleido.tiny.latents import build_latent_set
    from kaleido.tiny.report import TinyReport, generate, measure_word_use
    from kaleido.tiny.train import TinyTrainConfig, load_trained_vae

    cfg = TinyTrainConfig(out_dir=a.run)
    stats = json.loads((Path(a.run) / "latents" / "stats.json").read_text())
    vae = load_trained_vae(cfg)
    vae.register_to_config(**stats)
    t0 = time.perf_counter()
    fraction = 0.85
    if a.plain:
        from kaleido.tiny import data as D

        D.BACKGROUNDS, fraction = ("plain",), 1.0
    kw = dict(num_frames=17, size=a.size, moving_fraction=fraction, trail=a.trail, pan=a.pan, progress=False)
    train = build_latent_set(vae, a.n_train, 100, "train", 0, **kw)
    val = build_latent_set(vae, 64, 16, "heldout", 1, **kw)
    print(f"encoded {len(train)} + {len(val)} clips at {a.size} px in {time.perf_counter() - t0:.0f} s", flush=True)

    tok = build_tokenizer()
    te = build_text_encoder(len(tok), seed=0)
    pipe = assemble_pipeline(vae, None, te, tok)
    tc = dataclasses.replace(cfg.transformer, steps=a.steps, shift=a.shift,
                             arch=dataclasses.replace(cfg.transformer.arch, num_attention_heads=a.heads))
    kwargs = tc.arch.to_kwargs(text_dim=te.config.d_model, z_dim=16)
    kwargs["in_channels"] = 18 if a.coords else 16
    torch.manual_seed(0)
    model = WanTransformer3DModel(**kwargs)
    ema = WanTransformer3DModel(**kwargs)
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=0.01, betas=(0.9, 0.99))
    mean, std = stats["latents_mean"], stats["latents_std"]
    x_train, x_val = TT.normalise(train.latents, mean, std), TT.normalise(val.latents, mean, std)[:32]
    probe = TT.word_probe_set(val, 32)
    emb = TT.PromptEmbeddings(pipe, train.prompts + val.prompts + probe[1] + probe[2], tc.max_sequence_length)
    val_noise = TT.fixed_validation_draws(len(x_val), tuple(x_val.shape[1:]), TT.VAL_SIGMAS)
    _, _, t, h, w = x_train.shape
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    grid = torch.stack([xx, yy])[None, :, None].expand(1, 2, t, h, w)

    def pred(m, x, sigma, text):
        if a.coords:
            x = torch.cat([x, grid.expand(len(x), -1, -1, -1, -1).to(x.dtype)], 1)
        return TT.predict(m, x, sigma, text)

    t0 = time.perf_counter()
    step = 0
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = TT.lr_at(tc, step)
        rng = np.random.default_rng([0, step, 2])
        idx = rng.integers(0, len(train), size=tc.batch)
        prompts = [("" if rng.random() < tc.cfg_dropout else train.prompts[i]) for i in idx]
        gen = torch.Generator().manual_seed(step)
        x0 = x_train[torch.from_numpy(idx)]
        noise = torch.randn(x0.shape, generator=gen)
        sigma = TT.training_sigmas(gen, len(idx), x0.shape[2], tc.shift, a.frame_noise)
        x_t, v = TT.flow_matching_pair(x0, noise, sigma)
        loss = ((pred(model, x_t, sigma, emb.batch(prompts)) - v) ** 2).mean()
        TT.optimiser_step(model, ema, opt, loss, tc.ema_decay, step)
        if (step + 1) % a.probe_every == 0:
            gain = TT.direction_swap_gain(lambda x, s, tx: pred(ema, x, s, tx), x_val, val_noise, probe, emb)
            extra = ""
            if a.frame_noise:  # the same probe with the first latent frame clean: the word then fixes the path
                clean = TT.direction_swap_gain(lambda x, s, tx: pred(ema, x, s, tx), x_val, val_noise, probe, emb,
                                               clean_frames=1)
                extra = f", first-frame-clean gain {100 * clean:+.3f}%"
            print(f"step {step + 1}: loss {float(loss.detach()):.4f}, direction-swap gain {100 * gain:+.3f}%{extra} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        if time.perf_counter() - t0 > a.budget_s:
            break
    print(f"trained {step + 1} steps in {time.perf_counter() - t0:.0f} s")
    if a.coords:
        print("--coords: the model takes 18 input channels, so WanPipeline cannot sample it; probe only")
        return
    pipe.transformer = ema.eval()
    pipe.set_progress_bar_config(disable=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "latents").mkdir()
        val.save(Path(tmp) / "latents" / "val")
        report = TinyReport()
        measure_word_use(pipe, Path(tmp), report)
    u = report.word_use
    for word in ("direction", "colour"):
        rise = [f"{100 * (b / t - 1):+.2f}%" for b, t in zip(u[word], u["true"])]
        print(f"{word} word swapped, loss change at sigma {u['sigmas']}: {rise}")
    checks = [E.check_prompt_following(generate(pipe, E.eval_prompt(c, s, d, b), seed, height=a.size, width=a.size), c, d)
              for seed in (0, 1) for c, s, d, b in E.EVAL_PROMPTS]
    print(f"prompt check at {a.size} px: {sum(k.ok for k in checks)} of {len(checks)} "
          f"(colour {sum(k.colour_ok for k in checks)}, direction {sum(k.direction_ok for k in checks)})")


if __name__ == "__main__":
    main()
