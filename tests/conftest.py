"""Test-wide settings: offline hub, one torch thread (no OpenMP spin-waits on 2 cores), and
reproducible property tests; the one family fixture set (``case``, ``joint_case``, ``wan_model``: the tiny random
transformers of :data:`kaleido.models.testing.TRANSFORMER_CASES`).

Hypothesis runs the ``ci`` profile unless ``HYPOTHESIS_PROFILE`` names another: every run draws
the same examples (``derandomize``: seeded from each test's own code, so ``--hypothesis-seed`` is
ignored and no example database is read or written), without a per-example deadline (the shared
machines' timings vary). Each test keeps its own ``max_examples``; 100 for one that sets none,
Hypothesis's default. To search with fresh random examples (e.g. ``--hypothesis-seed=8``), run with
``HYPOTHESIS_PROFILE=explore``, and pin what it finds with ``@example(...)``.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import settings  # noqa: E402

torch.set_num_threads(1)

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, max_examples=100, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

from kaleido.models.testing import TRANSFORMER_CASES, TinyCase  # noqa: E402


@pytest.fixture(params=TRANSFORMER_CASES, ids=[c.name for c in TRANSFORMER_CASES])
def case(request) -> TinyCase:
    """Each family's tiny random transformer and its inputs."""
    return request.param


#: models whose self-attention sequence holds text tokens beside the video grid (``TinyCase.joint``)
JOINT_CASES = [c for c in TRANSFORMER_CASES if c.joint]


@pytest.fixture(params=JOINT_CASES, ids=[c.name for c in JOINT_CASES])
def joint_case(request) -> TinyCase:
    return request.param


@pytest.fixture
def wan_model() -> torch.nn.Module:
    """A fresh tiny random ``WanTransformer3DModel`` (seeded)."""
    return TRANSFORMER_CASES[0].build()
