"""The distribution figures of candidate consistency students, against the model card's own reference set.

Each candidate is a transformer folder (diffusers layout, e.g. ``runs/tiny-rcm/variant/transformer``) put in
place of ``tiny-rcm``'s, sampled exactly as the card samples ``tiny-rcm`` (its sampler and times, the 8 held-out
prompts x seeds 0-7) and scored by the card's measures (:mod:`kaleido.tiny.distribution_card`: Frechet distance to
the 25-step teacher's videos from the reference seeds, with its bootstrap interval; the prompt-following probe).
The shipped student is measured first, as a check that the figures are the card's. ``--prompts validation`` uses
the distillation's validation prompts instead (its first 16 trajectories' prompts, never trained on; reference
seeds 20000-20007): the set to choose between candidates on, since the card's prompts must not be tuned on.
Run with nothing else on the machine::

    OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 python benchmarks/student_fd.py runs/tiny-rcm/variant/transformer
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main() -> None:
    import numpy as np
    import torch
    from diffusers import WanTransformer3DModel

    from kaleido.tiny.data import HELDOUT_PROMPTS
    from kaleido.tiny.distill import training_prompts
    from kaleido.sampling import make_sampler
    from kaleido.tiny.distribution_card import (REFERENCE_SEED_BASE, _probe, _videos, fd_with_interval,
                                                probe_fields, standardise, video_features)
    from kaleido.tiny.pipeline import load_pipeline

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("candidates", nargs="*", help="transformer folders to score in place of tiny-rcm's")
    p.add_argument("--prompts", choices=["card", "validation"], default="card")
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    torch.set_num_threads(2)
    if a.prompts == "card":
        prompts, ref_base = list(HELDOUT_PROMPTS), REFERENCE_SEED_BASE
    else:
        prompts = [q for q in training_prompts(240, 0)[:16] if "moving" in q.split()][:8]
        ref_base = 20_000
    t0 = time.time()
    teacher = load_pipeline("tiny")
    teacher.set_progress_bar_config(disable=True)
    ref = np.stack([video_features(v) for v in _videos(teacher, prompts, [ref_base + s for s in range(a.seeds)],
                                                       None, None)])
    pipe = load_pipeline("tiny-rcm")
    pipe.set_progress_bar_config(disable=True)
    shipped_scheduler, shipped_times = pipe.scheduler, list(pipe.scheduler.fixed_sigmas)
    rows = []
    for path in [None, *a.candidates]:
        times = shipped_times
        if path is not None:
            pipe.transformer = WanTransformer3DModel.from_pretrained(path).eval()
            record = Path(path).parent / "variant.json"
            # a candidate distilled for other times is sampled at its own (its variant.json beside it)
            if record.is_file():
                times = json.loads(record.read_text())["sigmas"]
            pipe.scheduler = make_sampler(shipped_scheduler, "consistency", times)
        videos = _videos(pipe, prompts, list(range(a.seeds)), None, None)
        z_ref, z = standardise(ref, np.stack([video_features(v) for v in videos]))
        fd, ci = fd_with_interval(z_ref, z)
        colour, direction = _probe(videos, prompts * a.seeds)
        rows.append(dict(candidate=path or "shipped tiny-rcm", times=times, fd=round(fd, 4),
                         fd_ci95=[round(c, 4) for c in ci], **probe_fields(colour, direction, len(videos))))
        print(json.dumps(rows[-1]), flush=True)
    out = dict(prompts=prompts, seeds=a.seeds, reference_seed_base=ref_base, rows=rows,
               seconds=round(time.time() - t0, 1))
    if a.json:
        from kaleido.atomic import write_atomic

        write_atomic(a.json, json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
