"""Is there a GPU? Answered without importing verl (the CPU plugin is only chosen when there is none)."""

import shutil


def has_accelerator() -> bool:
    """True when a CUDA/ROCm GPU is visible: then verl's own platforms and vLLM are used."""
    try:
        import torch

        if torch.cuda.is_available():
            return True
    except ImportError:
        pass
    return shutil.which("nvidia-smi") is not None or shutil.which("rocm-smi") is not None
