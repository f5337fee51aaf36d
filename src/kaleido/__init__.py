"""Kaleido: channel-wise partial-result reuse for video diffusion transformers.

Parts (one sub-package each):

* :mod:`kaleido.reuse` - the reuse decision and the reuse GEMM / attention (SPEC §2-4);
* :mod:`kaleido.integrations` - the drop-in for diffusers' vDiT models;
* :mod:`kaleido.tiny` - the miniature Wan pipeline trained here and shipped;
* :mod:`kaleido.hw` - the accelerator simulator (SPEC §5);
* :mod:`kaleido.cli` - the ``kaleido`` command.
"""

__version__ = "0.1.0"
