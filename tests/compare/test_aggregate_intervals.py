"""compare.analysis.aggregate gives each setting a 95% bootstrap interval over prompts (seeds averaged first)."""

from kaleido.compare.analysis import aggregate


def _row(prompt, seed, psnr, saved):
    return {"method": "kaleido", "prompt": prompt, "seed": seed, "point": {"method": "kaleido", "settings": {"t": 1}},
            "quality": {"psnr": psnr, "ssim": 0.9},
            "report": {"saved_fraction": {"self_qk": saved}, "total_saved_fraction": saved, "estimate_macs": 0,
                       "op_counts": {"self_qk": {"dense_macs": 100, "equiv8_macs": 100 * (1 - saved)}}}}


def test_interval_is_over_prompts_with_seeds_averaged():
    rows = [_row("a", 0, 30.0, 0.5), _row("a", 1, 32.0, 0.5), _row("b", 0, 20.0, 0.3), _row("b", 1, 22.0, 0.3)]
    (a,) = aggregate(rows)
    assert a.prompts == 2 and a.n == 4
    assert a.psnr == 26.0
    lo, hi = a.psnr_ci95
    # two prompts with means 31 and 21: every resample's mean is 21, 26 or 31
    assert 21.0 <= lo <= 26.0 <= hi <= 31.0 and lo < hi
    assert 0.3 <= a.total_saved_ci95[0] < a.total_saved_ci95[1] <= 0.5


def test_one_prompt_gives_a_point_interval():
    (a,) = aggregate([_row("a", 0, 30.0, 0.5), _row("a", 1, 28.0, 0.5)])
    assert a.psnr_ci95 == (29.0, 29.0) and a.prompts == 1
