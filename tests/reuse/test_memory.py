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


def test_scratch_reuses_one_buffer_and_grows():
    from kaleido.reuse.memory import Scratch

    s = Scratch()
    a = s.like(torch.empty(4, 8))
    assert a.shape == (4, 8) and a.dtype == torch.float32 and a.is_contiguous() and s.nbytes() == 128
    b = s.like(torch.empty(2, 3, dtype=torch.float64).t())  # any layout in: a contiguous tensor out
    assert b.shape == (3, 2) and b.dtype == torch.float64 and b.is_contiguous()
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()  # the same memory
    c = s.like(torch.empty(10, 10))  # larger: a new buffer
    assert s.nbytes() == 400 and c.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
    s.clear()
    assert s.nbytes() == 0 and c.shape == (10, 10)  # a view handed out keeps its memory


def test_scratch_keeps_nothing_off_the_cpu():
    from kaleido.reuse.memory import Scratch

    s = Scratch()
    t = s.like(torch.empty(4, 8, device="meta"))
    assert t.device.type == "meta" and t.shape == (4, 8) and s.nbytes() == 0
