"""Is there a GPU? Answered without importing verl (the CPU plugin is only chosen when there is none)."""

import os
import shutil

# A GPU that torch could use shows up as one of these device nodes (NVIDIA, ROCm, WSL's GPU bridge).
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
GPU_TOOLS = ("nvidia-smi", "rocm-smi")


def gpu_visible() -> bool:
    """A GPU device node or driver tool is present: cheap, and never imports torch."""
    return any(os.path.exists(node) for node in GPU_DEVICE_NODES) or any(shutil.which(t) for t in GPU_TOOLS)


def has_accelerator() -> bool:
    """True when a CUDA/ROCm GPU is visible: then verl's own platforms and vLLM are used."""
    if not gpu_visible():
        # no GPU device and no driver tool: no accelerator, known without importing torch (about a
        # second of `agentrl train`'s pre-flight on a 2-core machine)
        return False
    try:
        import torch

        if torch.cuda.is_available():
            return True
    except ImportError:
        pass
    return any(shutil.which(t) for t in GPU_TOOLS)
