import pytest
import torch

from kaleido.reuse import ChannelGroups, quantize, quantize_columns
from kaleido.reuse.quant import group_scale

GROUPS = ChannelGroups.from_rope(6, 4, 6)


@pytest.mark.parametrize("granularity, scale_shape", [("group", (2, 3, 1, 16)), ("head", (2, 3, 1, 1)), ("tensor", (1, 1, 1, 1))])
def test_quantize_shapes_and_error(granularity, scale_shape):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 16) * torch.tensor([1.0] * 6 + [5.0] * 4 + [0.1] * 6)
    x_q, s = quantize(x, GROUPS, granularity)
    assert x_q.dtype == torch.int8 and x_q.shape == x.shape
    assert tuple(s.shape) == scale_shape
    assert int(x_q.abs().max()) <= 127
    # symmetric rounding: error at most half a step
    assert bool(((x_q.float() * s - x).abs() <= s / 2 + 1e-6).all())


def test_group_scale_is_per_matrix_and_group():
    x = torch.zeros(2, 4, 16)
    x[0, 1, 0] = 127.0  # group t, matrix 0
    x[1, 2, 10] = -2.54  # group w, matrix 1
    x_q, s = quantize(x, GROUPS, "group")
    assert float(group_scale(s, GROUPS, 0)[0].item()) == 1.0
    assert float(group_scale(s, GROUPS, 2)[1].item()) == pytest.approx(0.02)
    assert int(x_q[0, 1, 0]) == 127 and int(x_q[1, 2, 10]) == -127
    # all-zero groups get scale 1 (no division by zero)
    assert float(group_scale(s, GROUPS, 1)[0].item()) == 1.0


def test_quantize_rejects_bad_input():
    x = torch.randn(5, 16)
    x[2, 3] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        quantize(x, GROUPS)
    with pytest.raises(ValueError, match="sum to 16 channels but the quantised operand has 12"):
        quantize(torch.randn(5, 12), GROUPS)
    with pytest.raises(ValueError, match="granularity"):
        quantize(torch.randn(5, 16), GROUPS, "row")
    with pytest.raises(ValueError, match="floating-point"):
        quantize(torch.ones(5, 16, dtype=torch.int8), GROUPS)
    b = torch.randn(16, 3)
    b[0, 0] = float("inf")
    with pytest.raises(ValueError, match="operand B"):
        quantize_columns(b)


def test_quantize_columns():
    b = torch.randn(3, 16, 5)
    b_q, s = quantize_columns(b)
    assert s.shape == (3, 1, 5) and b_q.dtype == torch.int8
    assert bool((b_q.abs().amax(dim=-2) == 127).all())
    _, s_t = quantize_columns(b, "tensor")
    assert s_t.shape == (1, 1, 1)
