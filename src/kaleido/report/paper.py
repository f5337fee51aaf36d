"""Figures reported in the Kaleido paper (Miao et al., 2026), as summarised in ../shared/paper.

These are the paper's numbers, typed here only to be shown *beside* ours and always
labelled "from the paper"; nothing in the comparison is computed from them.
"""

PAPER_FIGURES = [
    ("PSNR vs dense, HunyuanVideo", "29.9 dB"),
    ("PSNR vs dense, Wan 2.1", "24.5 dB"),
    ("PSNR gain over approximation-based accelerators (Cambricon-D)", "> 17 dB"),
    ("Quality vs MInference and Sparse VideoGen", "better PSNR / SSIM / LPIPS"),
    ("Speedup over AdapTiV / EXION-class accelerators", "up to 5.9x"),
    ("Speedup over an NVIDIA A100", "6.6x"),
    ("Energy savings over an NVIDIA A100", "16.0x"),
    ("PE utilisation without -> with the data dispatcher", "~69% -> ~85%"),
    ("Self-attention share of vDiT runtime", "~68%"),
]
