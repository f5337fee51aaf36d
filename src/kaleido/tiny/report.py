"""Measure a trained tiny pipeline and write the figures the model card quotes.

``python -m kaleido.tiny.report --run runs/tiny --pipeline runs/tiny/pipeline --docs docs``
writes ``docs/tiny/results.json``, ``docs/tiny/loss_per_timestep.png``,
``docs/tiny/training_curves.png`` and ``docs/samples/*.gif``. Every number comes from this run.
``--model tiny-96 --run runs/tiny-96`` measures a shipped variant (:mod:`kaleido.tiny.finetune`) at its own
size instead: ``docs/tiny-96/`` and ``docs/samples/tiny-96/``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from kaleido.tiny import evaluate as E
from kaleido.tiny.latents import LatentSet, latent_spectrum
from kaleido.tiny.pipeline import TINY_TEXT_TOKENS
from kaleido.tiny.train_transformer import VAL_SIGMAS, fixed_validation_draws, normalise, predict, validation_loss_per_sigma

SAMPLE_PROMPTS = [
    "a red circle moving left on a striped background",
    "a yellow square moving down on a checkered background",
    "a blue triangle rotating on a gradient background",
    "a green circle growing on a plain background",
]


@dataclass
class TinyReport:
    vae_psnr_real_heldout_db: float = 0.0
    vae_psnr_procedural_heldout_db: float = 0.0
    vae_psnr_carphone_pristine_db: float = 0.0
    n_real_windows: int = 0
    n_procedural_clips: int = 0
    latent_spectrum: dict = field(default_factory=dict)
    sigmas: list = field(default_factory=list)
    transformer_val_loss_per_sigma: list = field(default_factory=list)
    linear_val_loss_per_sigma: list = field(default_factory=list)
    transformer_val_loss: float = 0.0
    linear_val_loss: float = 0.0
    loss_reduction_vs_linear: float = 0.0
    #: held-out flow-matching loss of moving clips with the true prompt and with one word swapped:
    #: ``{"sigmas": [...], "true": [...], "direction": [...], "colour": [...]}`` (a word the model
    #: ignores costs nothing when swapped)
    word_use: dict = field(default_factory=dict)
    prompt_following_rate: float = 0.0
    prompt_check_ground_truth_rate: float = 0.0  # the check on the rendered clips themselves
    prompt_check_vae_reconstruction_rate: float = 0.0  # ... on their VAE reconstructions (a ceiling)
    prompt_following_cases: list = field(default_factory=list)
    generation_seconds: list = field(default_factory=list)
    demo_settings: dict = field(default_factory=dict)
    pipeline_bytes: int = 0
    #: the pipeline measured (a tiny variant's name, or a folder) and its clip size in pixels
    model: str = "tiny"
    size: int = 64
    #: a fine-tuned variant: the same held-out loss of the transformer it started from (the shipped one,
    #: trained at 64 px), i.e. what fine-tuning at this size bought
    base_transformer_val_loss: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def measure_vae(pipe, report: TinyReport, n: int = 24) -> None:
    vae = pipe.vae
    real = E.heldout_real_windows(n, size=report.size)
    proc, _, _ = E.heldout_procedural_clips(n, size=report.size)
    report.vae_psnr_real_heldout_db = float(np.mean(E.vae_psnr(vae, real)))
    report.vae_psnr_procedural_heldout_db = float(np.mean(E.vae_psnr(vae, proc)))
    report.vae_psnr_carphone_pristine_db = float(np.mean(E.vae_psnr(vae, E.carphone_clip())))
    report.n_real_windows = report.n_procedural_clips = n


def measure_flow_matching(pipe, run: Path, report: TinyReport, plot_path: Path, n_val: int = 80,
                          base_transformer=None) -> None:
    train = LatentSet.load(run / "latents" / "train")
    val = LatentSet.load(run / "latents" / "val")
    report.latent_spectrum = latent_spectrum(train.latents)
    mean, std = pipe.vae.config.latents_mean, pipe.vae.config.latents_std
    x_train = normalise(train.latents, mean, std)
    x_val = normalise(val.latents, mean, std)[:n_val]
    prompts = val.prompts[:n_val]
    with torch.no_grad():
        text = torch.cat([pipe.encode_prompt(p, do_classifier_free_guidance=False, max_sequence_length=TINY_TEXT_TOKENS)[0]
                          for p in prompts])
    noise = fixed_validation_draws(len(x_val), tuple(x_val.shape[1:]), VAL_SIGMAS)
    tr = pipe.transformer.eval()
    model_loss = validation_loss_per_sigma(lambda x, s, t: predict(tr, x, s, t), x_val, text, VAL_SIGMAS, noise)
    maps = E.fit_linear_predictors(x_train, VAL_SIGMAS)
    lin_loss = []
    for k, s in enumerate(VAL_SIGMAS):
        lin_loss.append(validation_loss_per_sigma(lambda x, _s, _t: E.linear_predict(maps[k], x), x_val, text, [s],
                                                  noise[k : k + 1])[0])
    report.sigmas = VAL_SIGMAS
    report.transformer_val_loss_per_sigma = model_loss
    report.linear_val_loss_per_sigma = lin_loss
    report.transformer_val_loss = float(np.mean(model_loss))
    report.linear_val_loss = float(np.mean(lin_loss))
    report.loss_reduction_vs_linear = 1 - report.transformer_val_loss / report.linear_val_loss
    if base_transformer is not None:
        base = base_transformer.eval()
        report.base_transformer_val_loss = float(np.mean(validation_loss_per_sigma(
            lambda x, s, t: predict(base, x, s, t), x_val, text, VAL_SIGMAS, noise)))
    E.save_loss_curve_plot(VAL_SIGMAS, model_loss, lin_loss, str(plot_path))


WORD_USE_SIGMAS = [0.55, 0.75, 0.95]


def measure_word_use(pipe, run: Path, report: TinyReport, n_clips: int = 32) -> None:
    """Held-out loss of up to ``n_clips`` moving clips with the true prompt, the direction word
    swapped and the colour word swapped (``evaluate.swapped_prompt``), same noise for all three."""
    val = LatentSet.load(run / "latents" / "val")
    idx = val.moving()[:n_clips]
    if not idx:
        raise ValueError(f"{run / 'latents' / 'val'} has no moving procedural clips to measure word use on")
    x0 = normalise(val.latents[idx], pipe.vae.config.latents_mean, pipe.vae.config.latents_std)
    noise = fixed_validation_draws(len(x0), tuple(x0.shape[1:]), WORD_USE_SIGMAS)
    tr = pipe.transformer.eval()
    out = {"sigmas": WORD_USE_SIGMAS, "clips": len(idx)}
    for name, attribute in (("true", None), ("direction", "direction"), ("colour", "colour")):
        with torch.no_grad():
            text = torch.cat([pipe.encode_prompt(E.swapped_prompt(val.specs[i], attribute), do_classifier_free_guidance=False,
                                                 max_sequence_length=TINY_TEXT_TOKENS)[0] for i in idx])
        out[name] = validation_loss_per_sigma(lambda x, s, t: predict(tr, x, s, t), x0, text, WORD_USE_SIGMAS, noise)
    report.word_use = out


def generate(pipe, prompt: str, seed: int, **overrides) -> np.ndarray:
    """One clip ``(T, H, W, 3)`` in [0, 1] with the pipeline's demo settings (a tiny variant's own size)."""
    from kaleido.tiny.pipeline import TINY_DEMO

    kwargs = getattr(pipe, "demo", TINY_DEMO).to_dict() | overrides
    out = pipe(prompt, generator=torch.Generator().manual_seed(seed), output_type="np", **kwargs)
    return out.frames[0]


def measure_prompt_check_ceiling(pipe, report: TinyReport) -> None:
    """The prompt check on ground-truth renders of the evaluation prompts and on their VAE
    reconstructions: what the measurement gives when the transformer is perfect."""
    from kaleido.tiny import data as D

    gt, rec = [], []
    for i, (colour, shape, direction, background) in enumerate(E.EVAL_PROMPTS):
        clip, _ = D.render_clip(D.ShapeSpec(colour, shape, "moving", direction, background), 17, report.size, seed=i)
        gt.append(E.check_prompt_following((clip + 1) / 2, colour, direction).ok)
        back = E.reconstruct(pipe.vae, clip[None])[0]
        rec.append(E.check_prompt_following((back + 1) / 2, colour, direction).ok)
    report.prompt_check_ground_truth_rate = float(np.mean(gt))
    report.prompt_check_vae_reconstruction_rate = float(np.mean(rec))


def measure_prompt_following(pipe, report: TinyReport, seeds=(0, 1)) -> None:
    cases = []
    for colour, shape, direction, background in E.EVAL_PROMPTS:
        prompt = E.eval_prompt(colour, shape, direction, background)
        for seed in seeds:
            t0 = time.time()
            clip = generate(pipe, prompt, seed)
            report.generation_seconds.append(round(time.time() - t0, 2))
            check = E.check_prompt_following(clip, colour, direction)
            cases.append({"prompt": prompt, "seed": seed, **check.to_dict()})
    report.prompt_following_cases = cases
    report.prompt_following_rate = float(np.mean([c["ok"] for c in cases]))


def save_gif(clip01: np.ndarray, path: Path, scale: int = 2, fps: int = 8) -> None:
    from PIL import Image

    frames = [Image.fromarray((np.clip(f, 0, 1) * 255).astype(np.uint8)).resize(
        (f.shape[1] * scale, f.shape[0] * scale), Image.NEAREST) for f in clip01]
    from kaleido.atomic import open_atomic

    with open_atomic(path, "wb") as out:
        frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0)


def sample_stem(prompt: str) -> str:
    """A sample's file name without suffix: ``"a red circle moving left on a striped background"`` ->
    ``"a_red_circle_moving_left_striped"``."""
    return prompt.replace(" on a ", "_").replace(" background", "").replace(" ", "_")


def save_samples(pipe, samples_dir: Path, seed: int = 0) -> list[str]:
    samples_dir.mkdir(parents=True, exist_ok=True)
    names = []
    for prompt in SAMPLE_PROMPTS:
        name = sample_stem(prompt) + ".gif"
        save_gif(generate(pipe, prompt, seed), samples_dir / name)
        names.append(name)
    return names


def plot_training_curves(run: Path, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vae_log = run / "vae" / "log.jsonl"  # a fine-tuned variant (kaleido.tiny.finetune) trains no VAE
    vae = [json.loads(line) for line in vae_log.read_text().splitlines()] if vae_log.exists() else []
    tr = [json.loads(line) for line in (run / "transformer" / "log.jsonl").read_text().splitlines()]
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    if not vae:
        ax[0].set_visible(False)
    steps = [r["step"] for r in vae]
    psnr = np.array([r["psnr_train"] for r in vae])
    k = 5
    ax[0].plot(steps, psnr, alpha=0.3, label="per batch")
    if len(psnr) >= k:
        ax[0].plot(steps[k - 1 :], np.convolve(psnr, np.ones(k) / k, mode="valid"), label=f"mean of {k}")
    ax[0].set(xlabel="VAE step", ylabel="training-batch PSNR (dB)", title="VAE")
    ax[0].legend(fontsize=8)
    trs = [r for r in tr if "loss" in r]
    loss = np.array([r["loss"] for r in trs])
    ax[1].plot([r["step"] for r in trs], loss, alpha=0.3, label="train batch")
    vals = [r for r in tr if "val_loss" in r]
    ax[1].plot([r["step"] for r in vals], [r["val_loss"] for r in vals], "o-", label="held-out (fixed noise)")
    ax[1].set(xlabel="transformer step", ylabel="flow-matching MSE", title="Transformer", yscale="log")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    from kaleido.atomic import open_atomic

    with open_atomic(path, "wb") as out:
        fig.savefig(out, format="png", dpi=90)
    plt.close(fig)


def main() -> None:  # pragma: no cover
    import argparse

    from kaleido.tiny.pipeline import TINY_VARIANTS, load_pipeline, variant_transformer_path

    p = argparse.ArgumentParser()
    p.add_argument("--run", default="runs/tiny")
    p.add_argument("--pipeline", default="runs/tiny/pipeline")
    p.add_argument("--docs", default="docs")
    p.add_argument("--model", default=None, help="measure this shipped tiny variant (e.g. tiny-96) instead of "
                                                 "--pipeline; figures go to DOCS/<model>/ and DOCS/samples/<model>/")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip", default="", help="comma list of: vae,flow,words,prompts,samples (skipped parts keep "
                                                "their figures from the existing results.json)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    skip = set(a.skip.split(",")) - {""}
    run, docs = Path(a.run), Path(a.docs)
    name = a.model or "tiny"
    (docs / name).mkdir(parents=True, exist_ok=True)
    pipe = load_pipeline(a.model or a.pipeline)
    pipe.set_progress_bar_config(disable=True)
    results = docs / name / "results.json"
    report = TinyReport()
    if skip and results.exists():
        old = json.loads(results.read_text())
        report = TinyReport(**{k: v for k, v in old.items() if k in TinyReport.__dataclass_fields__})
    from kaleido.tiny.pipeline import TINY_DEMO

    demo = getattr(pipe, "demo", TINY_DEMO)
    report.demo_settings = demo.to_dict()
    report.model, report.size = name, int(demo.height)
    from kaleido.tiny.pipeline import tiny_pipeline_path

    folders = [tiny_pipeline_path() if a.model else Path(a.pipeline)]
    if a.model and TINY_VARIANTS[a.model].transformer:
        folders.append(variant_transformer_path(a.model).parent)
    report.pipeline_bytes = sum(f.stat().st_size for d in folders for f in d.rglob("*") if f.is_file())
    if "vae" not in skip:
        measure_vae(pipe, report)
        print("vae", report.vae_psnr_real_heldout_db, report.vae_psnr_procedural_heldout_db, report.vae_psnr_carphone_pristine_db)
    if "flow" not in skip:
        base = load_pipeline("tiny").transformer if a.model and TINY_VARIANTS[a.model].transformer else None
        measure_flow_matching(pipe, run, report, docs / name / "loss_per_timestep.png", base_transformer=base)
        print("flow", report.transformer_val_loss, report.linear_val_loss, report.loss_reduction_vs_linear,
              "base", report.base_transformer_val_loss)
    if "words" not in skip:
        measure_word_use(pipe, run, report)
        print("word use", report.word_use)
    if "prompts" not in skip:
        measure_prompt_check_ceiling(pipe, report)
        print("prompt check ceiling", report.prompt_check_ground_truth_rate, report.prompt_check_vae_reconstruction_rate)
        measure_prompt_following(pipe, report)
        print("prompts", report.prompt_following_rate, np.mean(report.generation_seconds))
    if "samples" not in skip:
        save_samples(pipe, docs / "samples" / (name if a.model else ""))
    plot_training_curves(run, docs / name / "training_curves.png")
    from kaleido.atomic import write_atomic

    write_atomic(results, json.dumps(report.to_dict(), indent=1))
    print(json.dumps({k: v for k, v in report.to_dict().items() if k != "prompt_following_cases"}, indent=1))


if __name__ == "__main__":
    main()
