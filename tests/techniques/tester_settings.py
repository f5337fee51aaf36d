"""What the shared tester (``method_tester.py``) runs each registered technique with, kept with the tests.

Per technique: ``settings`` under which it changes something on the tester's tiny models (``None``: it has
none), ``null`` settings under which it computes what dense computes (``None``: none), and ``refuses``: a
tested family (:data:`TESTED_FAMILIES`) -> ``(regex of its one-line refusal, the reason as docs/baselines.md
states it)``. The library's registry holds only what the library needs at run time; a technique registered
without an entry here fails ``test_every_registered_technique_has_tester_settings``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaleido.models.testing import TESTED_FAMILIES

#: The tester's denoising steps (enough for every technique to act: caches and cross-step methods skip from the
#: second step on); the settings below are chosen for it.
TEST_STEPS = 2


@dataclass(frozen=True)
class TesterCase:
    settings: dict | None = None
    null: dict | None = None
    refuses: dict = field(default_factory=dict)


CASES: dict[str, TesterCase] = {
    "kaleido": TesterCase(dict(theta1=64, theta2=64, low_bits=7, metric="mean_abs"), dict(theta1=0, theta2=0)),
    "sparse_videogen": TesterCase(dict(density=0.5, block_size=8), dict(density=1.0, block_size=8)),
    "block_topk": TesterCase(dict(density=0.5, block_size=8), dict(density=1.0, block_size=8)),
    "tome": TesterCase(dict(ratio=0.5), dict(ratio=0.0)),
    "adaptiv": TesterCase(dict(tau=0.5)),
    "exion": TesterCase(dict(attn_density=0.5, ffn_tau=0.2, ffn_period=2), dict(attn_density=1.0, ffn_tau=0.0)),
    "cambricon_d": TesterCase(dict(delta_bits=4)),
    # DDIM's last timestep is 0: the tester's range covers every step
    "pab": TesterCase(dict(self_skip_range=2, cross_skip_range=2, timestep_range=(-1, 1001)),
                      dict(self_skip_range=1, cross_skip_range=1),
                      {"wan": ("calls the transformer twice per step",
                               "guidance as two calls per step would share PAB's cache (runs with guidance_scale=1)")}),
    "fbcache": TesterCase(dict(threshold=50.0), dict(threshold=0.0)),
    "taylorseer": TesterCase(dict(cache_interval=2, disable_cache_before_step=1),
                             dict(cache_interval=1, disable_cache_before_step=0)),
    # ratios as a calibration would give them for the tester's steps; the second step is served from the cache;
    # diffusers' calibration mode skips nothing
    "magcache": TesterCase(dict(mag_ratios=(1.0, 0.95), num_inference_steps=TEST_STEPS, retention_ratio=0.0,
                                threshold=0.5, max_skip_steps=1),
                           dict(calibrate=True, num_inference_steps=TEST_STEPS)),
    # every block after the first served from the cache once a step has computed (threshold >= 1: whenever allowed)
    "cache_dit": TesterCase(dict(Fn_compute_blocks=1, Bn_compute_blocks=0, residual_diff_threshold=1.0,
                                 max_warmup_steps=0), dict(residual_diff_threshold=0.0),
                            {"hunyuan_video": ("it would skip nothing",
                                               "the tiny model has one block per stream and DBCache always computes "
                                               "the first of each (Fn >= 1), so it would skip nothing; it runs on "
                                               "HunyuanVideo with more blocks (tests/techniques/test_cache_dit.py)")}),
    "stack": TesterCase(dict(techniques=[dict(technique="taylorseer", cache_interval=2, disable_cache_before_step=1),
                                         dict(technique="kaleido", theta1=16, theta2=32, low_bits=6)])),
}

assert all(set(c.refuses) <= set(TESTED_FAMILIES) for c in CASES.values()), "refuses names an untested family"
