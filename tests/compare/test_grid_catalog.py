"""The comparison's one registry of sweep grids."""

import pytest

from kaleido.compare.grids import GRIDS, STACKS, method_grid, register_grid
from kaleido.compare.grids.policy import QK_ONLY, calibrated_config_name, is_few_step
from kaleido.techniques import TECHNIQUES


def test_every_technique_has_one_grid_and_only_step_caches_stack():
    missing, stale = set(TECHNIQUES) - set(GRIDS), set(GRIDS) - set(TECHNIQUES)
    assert not missing, f"no sweep grid for {sorted(missing)}: register one in kaleido.compare.grids.catalog"
    assert not stale, f"sweep grids of unregistered techniques {sorted(stale)}"
    assert set(STACKS) <= {n for n, t in TECHNIQUES.items() if t.is_step_cache} and STACKS
    with pytest.raises(ValueError, match="already has a sweep grid"):
        register_grid("tome", GRIDS["tome"])


def test_the_stack_grid_gathers_every_step_caches_stacks_in_registry_order():
    # where a cache has no points (MagCache without ratios for the tiny teacher at 4 steps) it heads no stack
    assert "magcache" not in {s["techniques"][0]["technique"] for s in method_grid("tiny", 4, ["stack"])["stack"]}
    got = method_grid("tiny-turbo", 4, ["stack"])["stack"]  # MagCache has ratios there
    want = [s for n in TECHNIQUES if n in STACKS for s in STACKS[n]("tiny-turbo", 4, None)]
    assert got == want and len(got) >= 6
    heads = [s["techniques"][0]["technique"] for s in got]
    assert heads == sorted(heads, key=list(TECHNIQUES).index)
    assert all(s["techniques"][1]["technique"] == "kaleido" for s in got)


def test_the_policy():
    assert is_few_step(8) and not is_few_step(9) and not is_few_step(None)
    assert calibrated_config_name("tiny-rcm", 4) == "tiny-rcm-default"
    assert calibrated_config_name("tiny", 8) == "tiny-8-steps" and calibrated_config_name("tiny", 25) == "tiny-default"
    assert calibrated_config_name("random-wan", 4) is None
    assert QK_ONLY == dict(cross_qk=False, proj=False, ffn=False)
