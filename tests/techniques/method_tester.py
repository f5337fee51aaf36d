"""One tester for every technique on every supported model family (a mixin, as diffusers'
``tests/models/testing_utils`` has one per technique).

A concrete test class sets :attr:`MethodTesterMixin.family` to one of :data:`FAMILIES` (a
tiny random pipeline of :mod:`kaleido.models.testing`: Wan with classifier-free
guidance as two calls per step, HunyuanVideo with dual- and single-stream blocks, CogVideoX
5B-style with RoPE and 2B-style without, both batching guidance into one call) and inherits
one test per technique of the registry (:data:`kaleido.techniques.catalog.TECHNIQUES`).  What the tester
knows of a technique comes from its registration: the settings under which it changes
something (``test_settings``), its "off" settings (``null_settings``), the op kinds it decides
(its method's ``claims``), whether it is a step cache, the families it refuses and why
(``refuses``).  Each test applies the technique, runs :data:`STEPS` denoising steps of the
pipeline (latents out, no decoding) and checks that

* the output is finite;
* per op kind, the report's MACs computed + skipped are the dense MACs of the calls that ran,
  computed here from the model's config and each call's shapes (batch, video tokens, text
  tokens), independently of the adapter's site tables;
* the technique saves on the op kinds it decides and, if it decides any, nowhere else (a step
  cache, Kaleido and a stack save somewhere); its "off" settings (:data:`NULL_SETTINGS`) give
  the dense output; block top-k on a joint model keeps every (query, key) pair with a text token
  (counted as computed);
* ``remove()`` restores the dense output bit for bit;
* a technique that cannot serve the family (:attr:`Family.refused`) refuses with a one-line
  ``ValueError`` (listed with the reason in docs/baselines.md).

A new technique needs nothing here: its registration carries what the tester reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar

import pytest
import torch

from kaleido.evaluation.simulator_profiles import simulator_profile_extras
from kaleido.models.testing import TESTED_FAMILIES
from kaleido.techniques import METHODS, TECHNIQUES, make_method
from tester_settings import CASES, TEST_STEPS

STEPS = TEST_STEPS  # enough for every technique to act: caches and cross-step methods skip from the second step on

#: settings under which each technique changes something on the tiny models (2 steps, 48 video tokens)
SETTINGS: dict[str, dict] = {n: dict(c.settings) for n, c in CASES.items() if c.settings is not None}
#: settings under which a technique computes what dense computes (up to float reordering)
NULL_SETTINGS: dict[str, dict] = {n: dict(c.null) for n, c in CASES.items() if c.null is not None}


def _skip_if_unavailable(name: str) -> None:
    """Skip a technique whose optional package (a peer library's extra) is not installed here."""
    why = TECHNIQUES[name].unavailable()
    if why:
        pytest.skip(why)


def decides(name: str) -> frozenset:
    """The op kinds technique ``name`` decides under its test settings (the rest, unless it decides none,
    must be computed in full)."""
    return frozenset(k for _, k in make_method(name, **SETTINGS[name]).claims)


# -- dense MACs per call, from each model's config (B sequences, S video tokens, L text tokens) -----------
def _wan_dense(c, B: int, S: int, L: int) -> dict[str, int]:
    H, d, F = c.num_attention_heads, c.attention_head_dim, c.ffn_dim
    D = H * d
    per = {"self_qk": B * H * S * S * d, "self_pv": B * H * S * S * d, "cross_qk": B * H * S * L * d,
           "cross_pv": B * H * S * L * d, "cross_proj_q": B * S * D * D, "cross_proj_kv": 2 * B * L * D * D,
           "cross_proj_out": B * S * D * D, "ffn_in": B * S * D * F, "ffn_out": B * S * F * D}
    per.update({k: B * S * D * D for k in ("proj_q", "proj_k", "proj_v", "proj_out")})
    return {k: c.num_layers * v for k, v in per.items()}


def _hunyuan_dense(c, B: int, S: int, L: int) -> dict[str, int]:
    H, d = c.num_attention_heads, c.attention_head_dim
    D, N = H * d, S + L
    M = int(D * c.mlp_ratio)
    # dual-stream: joint attention; video-side projections and FFN (the text side is `dense`, not counted)
    dual = {"self_qk": B * H * N * N * d, "self_pv": B * H * N * N * d, "ffn_in": B * S * D * M, "ffn_out": B * S * M * D}
    dual.update({k: B * S * D * D for k in ("proj_q", "proj_k", "proj_v", "proj_out")})
    # single-stream: q/k/v and the MLP on the joint rows, proj_out fused over [attention, MLP]
    single = {"self_qk": B * H * N * N * d, "self_pv": B * H * N * N * d, "ffn_in": B * N * D * M,
              "fused_out": B * N * (D + M) * D}
    single.update({k: B * N * D * D for k in ("proj_q", "proj_k", "proj_v")})
    out: dict[str, int] = {}
    for per, n in ((dual, c.num_layers), (single, c.num_single_layers)):
        for k, v in per.items():
            out[k] = out.get(k, 0) + n * v
    return out


def _cogvideox_dense(c, B: int, S: int, L: int) -> dict[str, int]:
    H, d = c.num_attention_heads, c.attention_head_dim
    D, N = H * d, S + L
    F = 4 * D  # FeedForward's default width (CogVideoX sets no ff_inner_dim)
    per = {"self_qk": B * H * N * N * d, "self_pv": B * H * N * N * d, "ffn_in": B * N * D * F, "ffn_out": B * N * F * D}
    per.update({k: B * N * D * D for k in ("proj_q", "proj_k", "proj_v", "proj_out")})
    return {k: c.num_layers * v for k, v in per.items()}


def _tokens_bcfhw(c, x: torch.Tensor) -> int:
    pt, ph, pw = c.patch_size
    return (x.shape[2] // pt) * (x.shape[3] // ph) * (x.shape[4] // pw)


def _tokens_hunyuan(c, x: torch.Tensor) -> int:
    p = c.patch_size
    return (x.shape[2] // c.patch_size_t) * (x.shape[3] // p) * (x.shape[4] // p)


def _tokens_bfchw(c, x: torch.Tensor) -> int:
    p, pt = c.patch_size, c.patch_size_t or 1
    return (x.shape[1] // pt) * (x.shape[3] // p) * (x.shape[4] // p)


def _wan_pipe():
    from kaleido.models.testing import tiny_random_wan_pipeline

    pipe = tiny_random_wan_pipeline(0, ffn_dim=96)
    return pipe, dict(prompt="a red ball", height=64, width=64, num_frames=9, guidance_scale=5.0,
                      max_sequence_length=16)


def _hunyuan_pipe():
    from kaleido.models import testing as T

    return T.tiny_random_hunyuan_video_pipeline(0), T.hunyuan_call_kwargs()


def _cog_pipe(rope: bool):
    def build():
        from kaleido.models import testing as T

        return T.tiny_random_cogvideox_pipeline(0, rope=rope), T.cogvideox_call_kwargs()

    return build


@dataclass(frozen=True)
class Family:
    """A model family the tester runs on: its tiny pipeline, its dense MAC model, what it refuses."""

    name: str
    build: Callable[[], tuple]
    tokens: Callable
    dense: Callable[..., dict[str, int]]

    @property
    def refused(self) -> dict[str, tuple[str, str]]:
        """technique -> (regex of its one-line refusal, the reason as docs/baselines.md states it): the
        tester cases' ``refuses`` of this family (tests/techniques/tester_settings.py)."""
        return {n: c.refuses[self.name] for n, c in CASES.items() if self.name in c.refuses}


FAMILIES: dict[str, Family] = {
    "wan": Family("wan", _wan_pipe, _tokens_bcfhw, _wan_dense),
    "hunyuan_video": Family("hunyuan_video", _hunyuan_pipe, _tokens_hunyuan, _hunyuan_dense),
    "cogvideox_5b_style": Family("cogvideox_5b_style", _cog_pipe(True), _tokens_bfchw, _cogvideox_dense),
    "cogvideox_2b_style": Family("cogvideox_2b_style", _cog_pipe(False), _tokens_bfchw, _cogvideox_dense),
}
assert tuple(FAMILIES) == TESTED_FAMILIES  # the tester cases' refusals are keyed by these names


@dataclass
class Bench:
    """One family's pipeline, its call and its dense output."""

    family: Family
    pipe: object
    call: dict
    dense: torch.Tensor | None = None
    calls: list = field(default_factory=list)  # (B, S, L) of every transformer call of the last run

    def run(self) -> torch.Tensor:
        tr = self.pipe.transformer
        self.calls = []

        def record(module, args, kwargs):
            x, e = kwargs["hidden_states"], kwargs["encoder_hidden_states"]
            self.calls.append((int(x.shape[0]), self.family.tokens(tr.config, x), int(e.shape[1])))

        h = tr.register_forward_pre_hook(record, with_kwargs=True)
        try:
            with torch.no_grad():
                out = self.pipe(num_inference_steps=STEPS, output_type="latent",
                                generator=torch.Generator().manual_seed(0), **self.call).frames
        finally:
            h.remove()
        return out

    def expected_dense(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for B, S, L in self.calls:
            for k, v in self.family.dense(self.pipe.transformer.config, B, S, L).items():
                total[k] = total.get(k, 0) + v
        return total


class MethodTesterMixin:
    """Inherit and set ``family`` (a key of :data:`FAMILIES`); one test per technique runs on it."""

    family: ClassVar[str]

    @pytest.fixture(scope="class")
    @classmethod
    def bench(cls) -> Bench:
        fam = FAMILIES[cls.family]
        pipe, call = fam.build()
        pipe.set_progress_bar_config(disable=True)
        b = Bench(fam, pipe, call)
        b.dense = b.run()
        return b

    def _apply_and_run(self, bench: Bench, name: str, settings: dict):
        handle = make_method(name, **settings).apply(bench.pipe.transformer)
        try:
            out = bench.run()
            report = handle.report()
            trace = handle.accel_trace() if getattr(handle, "has_accel_trace", False) else None
        finally:
            handle.remove()
        return out, report, trace

    @pytest.mark.parametrize("name", sorted(METHODS))
    def test_technique(self, bench: Bench, name: str):
        _skip_if_unavailable(name)
        refusal = bench.family.refused.get(name)
        if refusal is not None:
            self._check_refusal(bench, name, refusal[0])
            return
        out, report, trace = self._apply_and_run(bench, name, SETTINGS[name])
        assert torch.isfinite(out).all()
        assert not torch.equal(out, bench.dense), f"{name} changed nothing on {bench.family.name}"
        expected = bench.expected_dense()
        got = {k: oc.dense_macs for k, oc in report.op_counts.items() if k != "estimate"}
        assert got == expected, f"{name} on {bench.family.name}: computed + skipped per op kind"
        self._check_savings(bench, name, report)
        if trace is not None:  # the accelerator trace holds the same counts, per step and layer
            from kaleido.techniques.accel_trace import trace_op_totals

            totals = trace_op_totals(trace)
            for kind, oc in report.op_counts.items():
                if kind != "estimate":
                    assert tuple(totals[kind][:3]) == (oc.total_mac8, oc.total_mac_low, oc.total_skipped), kind
            extra = simulator_profile_extras({"accel": trace})  # the comparison's door to the replay's profile
            assert "accel_profile" in extra, extra.get("accel_profile_error")
        assert torch.equal(bench.run(), bench.dense), f"{name}: remove() did not restore the dense model"

    def _check_refusal(self, bench: Bench, name: str, pattern: str) -> None:
        with pytest.raises(ValueError, match=pattern) as e:
            self._apply_and_run(bench, name, SETTINGS[name])
        assert "\n" not in str(e.value)
        assert torch.equal(bench.run(), bench.dense)

    def _check_savings(self, bench: Bench, name: str, report) -> None:
        saved = {k: report.saved_fraction(k) for k in report.op_counts if k != "estimate"}
        kinds = decides(name)
        if not kinds:  # a step cache, Kaleido (its trace decides), a stack
            assert report.total_saved_fraction > 0, f"{name} saved nothing"
            return
        assert all(saved[k] > 0 for k in kinds if k in ("self_qk", "proj_q")), saved
        assert all(v == 0.0 for k, v in saved.items() if k not in kinds), saved  # the rest is computed in full
        if name == "block_topk":  # video x video pairs: exactly half the blocks; every text pair computed
            c = bench.pipe.transformer.config
            layers = c.num_layers + getattr(c, "num_single_layers", 0)  # one self-attention per block
            skipped = layers * sum(B * c.num_attention_heads * (S * S // 2) * c.attention_head_dim
                                   for B, S, _ in bench.calls)
            assert report.op_counts["self_qk"].total_skipped == skipped

    @pytest.mark.parametrize("name", sorted(NULL_SETTINGS))
    def test_off_settings_compute_dense(self, bench: Bench, name: str):
        _skip_if_unavailable(name)
        if name in bench.family.refused:
            pytest.skip(f"{name} refuses {bench.family.name}")
        out, report, _ = self._apply_and_run(bench, name, NULL_SETTINGS[name])
        torch.testing.assert_close(out, bench.dense, rtol=1e-4, atol=1e-4)
        assert all(report.saved_fraction(k) == 0.0 for k in report.op_counts if k != "estimate")
