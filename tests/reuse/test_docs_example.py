"""The worked example of docs/algorithm.md §3, number by number."""

import torch

from kaleido.reuse import ChannelGroups, ReuseConfig, TokenGrid, anchor_index, decide, int8_group_products


def test_worked_example_of_the_docs():
    grid = TokenGrid(1, 1, 4)
    groups = ChannelGroups((3,), ("w",), ("c",))
    A_q = torch.tensor([[10, -4, 7], [11, -4, 6], [12, -3, 6], [30, -3, 6]], dtype=torch.int8)
    mm = decide(A_q, grid, groups, ReuseConfig(2, 8, low_bits=4))
    assert mm.modes[:, 0].tolist() == [0, 2, 1, 0]
    assert anchor_index(mm)[:, 0].tolist() == [0, 0, 2, 3]
    assert mm.pack().tolist() == [24]
    b = torch.tensor([[1], [2], [3]], dtype=torch.int8)
    assert int8_group_products(A_q, b, mm)[0][:, 0].tolist() == [23, 23, 24, 42]
    assert (A_q.long() @ b.long())[:, 0].tolist() == [23, 21, 24, 42]
    ops = mm.op_counts(1)
    assert (ops.total_mac8, ops.total_mac_low, ops.total_skipped, ops.dense_macs) == (6, 3, 3, 12)
    assert ops.equiv8_macs == 7.5 and ops.saved_fraction == 0.375
    # without the drift rule (comparing with w1's own operand) w2 would have been FULL
    assert int((A_q[2].long() - A_q[1].long()).abs().max()) < 2
