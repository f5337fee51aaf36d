"""The side-by-side video names its panels in the image: dense | Kaleido | |difference| x4."""

import numpy as np

from kaleido.video_io import label_band, side_by_side


def test_panels_are_labelled_above_and_the_video_is_unchanged_below():
    rng = np.random.default_rng(0)
    a = rng.random((3, 64, 64, 3)).astype(np.float32)
    b = np.clip(a + 0.05, 0, 1)
    plain = side_by_side(a, b, scale=4)
    labelled = side_by_side(a, b, scale=4, labels=("dense", "Kaleido"))
    band = labelled.shape[1] - plain.shape[1]
    assert plain.shape == (3, 256, 3 * 256 + 2 * 2, 3) and 10 <= band <= 30
    assert (labelled[:, band:] == plain).all()
    top = labelled[0, :band].min(axis=2)  # dark pixels = text
    for i in range(3):  # each panel has text above it, and its label is centred (not run over the separator)
        cols = top[:, i * 258 : i * 258 + 256]
        assert (cols < 100).any(), f"panel {i} has no label"
        xs = np.nonzero((cols < 100).any(axis=0))[0]
        assert abs((xs.min() + xs.max()) / 2 - 128) < 12
    assert (labelled[:, :band] == labelled[:1, :band]).all()  # the same band on every frame


def test_labels_differ_and_shrink_to_fit():
    wide = label_band(["dense", "Kaleido", "|difference| x4"], 256, 2)
    assert wide.dtype == np.uint8 and wide.shape[1] == 3 * 256 + 4
    small = label_band(["dense", "Kaleido", "|difference| x4"], 32, 2)
    assert small.shape[0] < wide.shape[0] and small.shape[1] == 3 * 32 + 4
    for i in range(3):  # text stays inside its own panel
        seg = small[:, i * 34 : i * 34 + 32].min(axis=2)
        assert (seg < 128).any()
    gaps = small[:, [32, 33, 66, 67]]
    assert (gaps == 255).all()


def test_the_difference_panel_label_follows_the_gain():
    a = np.zeros((1, 64, 64, 3), np.uint8)
    x2 = side_by_side(a, a, diff_gain=2.0, labels=("dense", "Kaleido"))
    x4 = side_by_side(a, a, diff_gain=4.0, labels=("dense", "Kaleido"))
    band = x4.shape[1] - 64
    assert (x2[:, :band, 132:] != x4[:, :band, 132:]).any()  # "x2" vs "x4" above the third panel
    assert (x2[:, :band, :130] == x4[:, :band, :130]).all()
    assert side_by_side(a, a, diff_gain=None).shape[2] == 2 * 64 + 2


def test_generate_writes_the_labelled_side_by_side(tmp_path):
    """``kaleido generate``'s side_by_side.gif carries the label band (on a tiny random Wan pipeline)."""
    from click.testing import CliRunner

    from kaleido.cli.main import cli
    from kaleido.models.testing import tiny_random_wan_pipeline
    from kaleido.video_io import read_video

    tiny_random_wan_pipeline().save_pretrained(str(tmp_path / "p"), safe_serialization=True)
    res = CliRunner().invoke(cli, ["generate", "--model", str(tmp_path / "p"), "--out", str(tmp_path / "o"), "--steps", "1",
                                   "--frames", "5", "--height", "32", "--width", "32", "--scale", "4",
                                   "--warmup-steps", "0", "--prompt", "a"])
    assert res.exit_code == 0, res.output
    v = read_video(tmp_path / "o" / "side_by_side.gif")
    assert v.shape[2] == 3 * 128 + 2 * 2 and v.shape[1] > 128  # 4x panels and a band above them
    assert (v[0, : v.shape[1] - 128].min(axis=2) < 100).any()  # text in the band
