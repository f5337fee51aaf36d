"""The few-step student's model-card figures: how close ``tiny-turbo`` at 4 steps comes to its teacher at 25.

For every held-out prompt x seed (the comparison's 8 prompts, never trained on), the teacher (``tiny``, 25 Euler
steps, guidance 5) gives the reference video; against it are scored the student at its 4 steps (one call per
step) and the teacher run naively at 4 and 8 Euler steps (same guidance, two calls per step). PSNR and SSIM
(:func:`kaleido.metrics.compare_videos`) per run, the mean with a 95% bootstrap interval over prompts, and the
colour check of :func:`kaleido.tiny.evaluate.check_prompt_following` (is the prompted colour the dominant
saturated one; the direction too, reported apart). Samples of the student go to ``samples_dir`` as GIFs.

``python -m kaleido.tiny.student_card --json docs/tiny-turbo/card.json --samples docs/samples/tiny-turbo``
writes the model card's figures.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch


@dataclass
class CardRow:
    """One contender (``student-4``, ``teacher-4``, ``teacher-8``) against the 25-step teacher."""

    name: str
    steps: int
    calls_per_step: int
    psnr: list[float] = field(default_factory=list)
    ssim: list[float] = field(default_factory=list)
    colour_ok: list[bool] = field(default_factory=list)
    direction_ok: list[bool] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        from kaleido.metrics import bootstrap_interval

        def per_prompt(values):
            by: dict[str, list[float]] = {}
            for p, v in zip(self.prompts, values):
                by.setdefault(p, []).append(float(v))
            return [float(np.mean(v)) for v in by.values()]

        return dict(name=self.name, steps=self.steps, transformer_calls=self.steps * self.calls_per_step,
                    runs=len(self.psnr), psnr=float(np.mean(self.psnr)), psnr_min=float(np.min(self.psnr)),
                    psnr_ci95=list(bootstrap_interval(per_prompt(self.psnr))), ssim=float(np.mean(self.ssim)),
                    ssim_ci95=list(bootstrap_interval(per_prompt(self.ssim))),
                    colour_rate=float(np.mean(self.colour_ok)), direction_rate=float(np.mean(self.direction_ok)),
                    seconds_median=float(np.median(self.seconds)))


def _prompt_parts(prompt: str) -> tuple[str, str]:
    """``"a red circle moving left on ..."`` -> ``("red", "left")``."""
    words = prompt.split()
    return words[1], words[words.index("moving") + 1]


def _generate(pipe, prompt: str, seed: int, **kw) -> tuple[np.ndarray, float]:
    t0 = time.time()
    out = pipe(prompt, generator=torch.Generator().manual_seed(seed), output_type="np", **kw)
    return out.frames[0], time.time() - t0


def measure(prompts, seeds=(0, 1), samples_dir: Path | None = None, progress: bool = True) -> dict:
    """The card's figures for ``prompts`` x ``seeds`` (see the module docstring)."""
    from kaleido.metrics import compare_videos
    from kaleido.tiny.evaluate import check_prompt_following
    from kaleido.tiny.pipeline import TINY_DEMO, load_pipeline
    from kaleido.tiny.report import sample_stem, save_gif

    teacher, student = load_pipeline("tiny"), load_pipeline("tiny-turbo")
    for p in (teacher, student):
        p.set_progress_bar_config(disable=True)
    rows = {"student-4": CardRow("student-4", student.demo.num_inference_steps, 1),
            "teacher-4": CardRow("teacher-4", 4, 2), "teacher-8": CardRow("teacher-8", 8, 2)}
    reference = CardRow("teacher-25", TINY_DEMO.num_inference_steps, 2)
    for prompt in prompts:
        colour, direction = _prompt_parts(prompt)
        for seed in seeds:
            ref, s = _generate(teacher, prompt, seed)
            reference.seconds.append(s)
            reference.prompts.append(prompt)
            check = check_prompt_following(ref, colour, direction)
            reference.colour_ok.append(check.colour_ok)
            reference.direction_ok.append(check.direction_ok)
            for name, (pipe, kw) in {"student-4": (student, {}), "teacher-4": (teacher, dict(num_inference_steps=4)),
                                     "teacher-8": (teacher, dict(num_inference_steps=8))}.items():
                video, s = _generate(pipe, prompt, seed, **kw)
                cmp = compare_videos(ref, video, lpips=False)
                check = check_prompt_following(video, colour, direction)
                r = rows[name]
                r.psnr.append(cmp.psnr_mean_db)
                r.ssim.append(cmp.ssim_mean)
                r.colour_ok.append(check.colour_ok)
                r.direction_ok.append(check.direction_ok)
                r.seconds.append(s)
                r.prompts.append(prompt)
                if name == "student-4" and samples_dir is not None and seed == seeds[0]:
                    samples_dir.mkdir(parents=True, exist_ok=True)
                    stem = sample_stem(prompt)
                    save_gif(video, samples_dir / f"{stem}.gif")
                    save_gif(ref, samples_dir / f"{stem}_teacher25.gif")
            if progress:
                print(f"{prompt!r} seed {seed}: " + ", ".join(f"{n} {r.psnr[-1]:.2f} dB" for n, r in rows.items()),
                      flush=True)
    ref_summary = dict(name="teacher-25", steps=reference.steps, transformer_calls=reference.steps * 2,
                       colour_rate=float(np.mean(reference.colour_ok)),
                       direction_rate=float(np.mean(reference.direction_ok)),
                       seconds_median=float(np.median(reference.seconds)))
    return dict(prompts=list(prompts), seeds=list(seeds), reference=ref_summary,
                rows=[r.summary() for r in rows.values()])


def main() -> None:  # pragma: no cover - a measurement: python -m kaleido.tiny.student_card ...
    import argparse

    from kaleido.atomic import write_atomic
    from kaleido.tiny.data import HELDOUT_PROMPTS as DEFAULT_PROMPTS

    p = argparse.ArgumentParser(description="tiny-turbo (4 steps) and the teacher at 4 / 8 steps vs the teacher at 25.")
    p.add_argument("--json", default=None)
    p.add_argument("--samples", default=None)
    p.add_argument("--prompts", type=int, default=len(DEFAULT_PROMPTS))
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.time()
    card = measure(DEFAULT_PROMPTS[: a.prompts], tuple(int(s) for s in a.seeds.split(",")),
                   Path(a.samples) if a.samples else None)
    card["seconds"] = round(time.time() - t0, 1)
    text = json.dumps(card, indent=1)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(a.json, text)
    print(text)


if __name__ == "__main__":  # pragma: no cover
    main()
