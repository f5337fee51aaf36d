"""The per-group verdict of the paper's axis claim with its noise over prompts (kaleido.characterize.verdict)."""

import torch

from kaleido.characterize.neighbours import DELTA_BINS
from kaleido.characterize.verdict import group_verdicts


def _hist(medians_t, medians_h, medians_w):
    """(G=3, 3 axes, bins) histograms whose median along each axis is the given int8 value, per group."""
    h = torch.zeros(3, 3, DELTA_BINS, dtype=torch.int64)
    for g, meds in enumerate(zip(medians_t, medians_h, medians_w)):
        for j, m in enumerate(meds):
            h[g, j, m] = 10
    return h


def _runs(per_prompt):
    """per_prompt: list of (t-group medians along t/h/w, h-group ..., w-group ...)."""
    return {((f"prompt {i}", 0), "self_q"): _hist(*[[g[a] for g in groups] for a in range(3)])
            for i, groups in enumerate(per_prompt)}


NAMES = {"self_q": ("t", "h", "w")}


def test_clear_paper_axes_hold():
    # t-group best along h/w, h- and w-groups best along t, by 10 units on every prompt
    runs = _runs([((30, 20, 21), (20, 30, 31), (20, 31, 30))] * 3 + [((31, 21, 20), (21, 30, 30), (19, 30, 31))])
    vs = {v.group: v for v in group_verdicts(runs, NAMES)}
    assert {g: v.verdict for g, v in vs.items()} == {"t": "holds", "h": "holds", "w": "holds"}
    assert vs["t"].best_axis in ("h", "w") and vs["h"].best_axis == "t"
    assert vs["h"].paper_gap > 9 and vs["h"].paper_gap_ci95[0] > 0
    assert vs["t"].prompts == 4 and "HOLDS" in vs["t"].statement()


def test_opposite_axes_do_not_hold():
    runs = _runs([((20, 30, 30), (30, 20, 30), (30, 30, 20))] * 4)
    assert {v.verdict for v in group_verdicts(runs, NAMES)} == {"does not hold"}


def test_a_flip_between_prompts_is_undecided():
    # the h-group's best axis alternates between t and w from prompt to prompt
    runs = _runs([((30, 20, 20), (20, 30, 22), (20, 30, 30)), ((30, 20, 20), (22, 30, 20), (20, 30, 30))] * 2)
    vs = {v.group: v for v in group_verdicts(runs, NAMES)}
    assert vs["h"].verdict == "undecided"
    assert vs["t"].verdict == "holds"


def test_one_prompt_is_undecided():
    runs = _runs([((30, 20, 20), (20, 30, 30), (20, 30, 30))])
    assert {v.verdict for v in group_verdicts(runs, NAMES)} == {"undecided"}


def test_positive_mean_gap_inside_the_noise_is_undecided():
    # the h-group's gap is +3 on two prompts, -1 on the other two: mean +1, interval straddles 0
    runs = _runs([((30, 20, 20), (20, 30, 23), (20, 30, 30)), ((30, 20, 20), (23, 30, 22), (20, 30, 30))] * 2)
    vs = {v.group: v for v in group_verdicts(runs, NAMES)}
    assert vs["h"].paper_gap > 0 and vs["h"].paper_gap_ci95[0] < 0
    assert vs["h"].verdict == "undecided"
