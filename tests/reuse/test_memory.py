"""Fresh effective-operand tensors: torch.empty_like's shape, strides, dtype and device, large or small."""

import torch

from kaleido.reuse import memory


def test_empty_like_keeps_the_layout_of_large_and_small_tensors():
    for like in (torch.randn(3, 4).t(), torch.zeros(2, 1 << 20).transpose(0, 1)):  # 8 MiB: advised
        out = memory.empty_like(like)
        assert out.shape == like.shape and out.stride() == like.stride() and out.dtype == like.dtype
        assert out.data_ptr() != like.data_ptr()
        out.fill_(2.5)  # writable all through, advice or not
        assert float(out.sum()) == 2.5 * like.numel()
    flat = memory.empty(3 << 20, torch.float32, torch.device("cpu"))
    assert flat.shape == (3 << 20,) and flat.is_contiguous()


def test_other_devices_pass_through():
    out = memory.empty_like(torch.empty(4, 1 << 21, device="meta"))
    assert out.device.type == "meta" and out.shape == (4, 1 << 21)
