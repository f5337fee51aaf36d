"""The ranking at matched quality: each method's most-saving setting with mean PSNR >= 30 dB."""

from kaleido.compare.analysis import SettingAggregate, ranking_at_quality


def agg(method, settings, psnr, total):
    return SettingAggregate(method, settings, 16, psnr, 0.9, psnr - 5, 0.5, 0.5, total,
                            psnr_ci95=(psnr - 1, psnr + 1), total_saved_ci95=(total - 0.01, total + 0.01), prompts=8)


def test_each_method_counts_its_best_setting_at_the_level_and_stacks_count_as_their_pair():
    ts_k = {"techniques": [{"technique": "taylorseer"}, {"technique": "kaleido", "theta1": 8}]}
    aggs = [agg("kaleido", {"theta1": 8}, 40.0, 0.03), agg("kaleido", {"theta1": 16}, 30.5, 0.11),
            agg("kaleido", {"theta1": 32}, 22.0, 0.21),  # saves more but under the level: not counted
            agg("taylorseer", {}, 34.0, 0.60), agg("stack", ts_k, 31.0, 0.62), agg("tome", {"ratio": 0.3}, 25.0, 0.3)]
    ranking = ranking_at_quality(aggs, 30.0)
    assert [r.method for r in ranking] == ["taylorseer + kaleido", "taylorseer", "kaleido", "tome"]
    assert ranking[2].best.settings == {"theta1": 16} and ranking[2].best.total_saved == 0.11
    assert ranking[-1].best is None and ranking[-1].best_psnr == 25.0
    assert ranking_at_quality(aggs, 35.0)[0].method == "kaleido"  # only kaleido theta1=8 reaches 35 dB


def test_equal_savings_pick_the_higher_psnr_as_the_accelerator_table_does():
    from kaleido.report.accel import representatives

    aggs = [agg("kaleido", {"theta1": 8}, 31.0, 0.2), agg("kaleido", {"theta1": 9}, 33.0, 0.2)]
    (r,) = ranking_at_quality(aggs, 30.0)
    assert r.best.settings == {"theta1": 9}
    # the simulated speedup attached to the ranking row is that of the same setting
    assert representatives(aggs, 30.0)[0].settings == r.best.settings
