"""Heatmap numbers are black on light cells and white on dark ones."""

import matplotlib
import torch

from kaleido.characterize.plots import _annotate, _plt, text_colour


def test_text_colour_follows_cell_luminance():
    cmap = matplotlib.colormaps["viridis"]
    assert text_colour(cmap(1.0)) == "black"  # yellow
    assert text_colour(cmap(0.0)) == "white"  # dark purple
    assert text_colour((1, 1, 1, 1)) == "black" and text_colour((0, 0, 0, 1)) == "white"


def test_annotated_heatmap_uses_readable_colours():
    plt = _plt()
    fig, ax = plt.subplots()
    data = torch.tensor([[0.0, 100.0], [float("nan"), 50.0]])
    im = ax.imshow(data.numpy(), cmap="viridis_r")
    _annotate(ax, data, ".0f", im)
    colours = {t.get_text(): t.get_color() for t in ax.texts}
    plt.close(fig)
    assert colours["0"] == "black"  # viridis_r: the low end is yellow
    assert colours["100"] == "white"  # and the high end dark
    assert colours["n/a"] == "black"
