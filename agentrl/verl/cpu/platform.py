"""A verl platform for CPU-only machines.

verl 0.9 knows nvidia, npu and rocm platforms and falls back to "nvidia" when it finds none. This one
is picked on a machine with no accelerator (or forced with ``VERL_PLATFORM=cpu``): its device is
"cpu", its collective backend gloo, and its Ray resource is a *logical* GPU that agentrl declares at
``ray.init`` so verl's GPU-counting resource pools work unchanged.
"""

from __future__ import annotations

import os
import types
from contextlib import contextmanager
from typing import Any, Optional

import torch
import torch.distributed

from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

from agentrl.verl.cpu.detect import has_accelerator

NAME = "cpu"


def _cpu_device_module() -> types.ModuleType:
    """A stand-in for ``torch.cuda`` with the calls verl makes, answered for the CPU."""
    mod = types.ModuleType("agentrl_cpu_device")
    mod.is_available = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: "cpu"
    mod.set_device = lambda *a, **k: None
    mod.synchronize = lambda *a, **k: None
    mod.empty_cache = lambda: None
    mod.manual_seed = torch.manual_seed
    mod.manual_seed_all = torch.manual_seed
    mod.get_rng_state = lambda *a, **k: torch.get_rng_state()
    mod.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    mod.memory_allocated = lambda *a, **k: 0
    mod.memory_reserved = lambda *a, **k: 0
    mod.max_memory_allocated = lambda *a, **k: 0
    mod.max_memory_reserved = lambda *a, **k: 0
    mod.reset_peak_memory_stats = lambda *a, **k: None
    mod.mem_get_info = lambda *a, **k: (os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
                                        os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    mod.Stream = lambda *a, **k: None
    mod.current_stream = lambda *a, **k: None
    mod.stream = lambda *a, **k: _null()
    mod.Event = _CpuEvent
    mod.is_bf16_supported = lambda *a, **k: True
    mod.get_device_name = lambda *a, **k: "cpu"
    mod.get_device_properties = lambda *a, **k: types.SimpleNamespace(name="cpu", total_memory=mod.mem_get_info()[1])
    mod.memory = types.SimpleNamespace(_set_allocator_settings=lambda s: None)
    return mod


@contextmanager
def _null():
    yield


class _CpuEvent:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import time

        self._t = time.perf_counter
        self._at = 0.0

    def record(self, *a: Any) -> None:
        self._at = self._t()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: "_CpuEvent") -> float:
        return (other._at - self._at) * 1000.0


_DEVICE_MODULE = _cpu_device_module()


@PlatformRegistry.register(platform=NAME)
class PlatformCPU(PlatformBase):
    """verl platform for training on the CPU (gloo collectives, logical Ray GPU)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return not has_accelerator()

    def current_device(self) -> str:  # verl does model.to(current_device())
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def cudart(self) -> Any:
        return None


_original_init_process_group = torch.distributed.init_process_group


def _init_process_group_cpu(*args: Any, **kwargs: Any) -> Any:
    """verl asks for ``cpu:gloo,<device>:<backend>``; on CPU that is ``cpu:gloo,cpu:gloo``,
    which torch rejects as a duplicate. Collapse it to plain gloo."""
    backend = kwargs.get("backend", args[0] if args else None)
    if isinstance(backend, str) and "," in backend:
        parts = {p.strip() for p in backend.split(",")}
        if parts == {"cpu:gloo"}:
            if args:
                args = ("gloo",) + tuple(args[1:])
            else:
                kwargs["backend"] = "gloo"
    return _original_init_process_group(*args, **kwargs)


def _unpinned_offload() -> None:
    """verl builds its reference model (``kl_coef > 0``) with ``CPUOffloadPolicy(pin_memory=True)``; pinned
    memory needs an accelerator, and on the CPU the parameters are already where the policy puts them."""
    from torch.distributed.fsdp import CPUOffloadPolicy

    if getattr(CPUOffloadPolicy.__init__, "_agentrl_unpinned", False):
        return
    original = CPUOffloadPolicy.__init__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.pin_memory = False

    __init__._agentrl_unpinned = True
    CPUOffloadPolicy.__init__ = __init__


def activate() -> None:
    """Make this process train on the CPU: called by the verl plugin when no accelerator is present."""
    if torch.distributed.init_process_group is not _init_process_group_cpu:
        torch.distributed.init_process_group = _init_process_group_cpu
    _unpinned_offload()
    # verl's engine registry is keyed by device; its FSDP engine is device-agnostic through
    # get_device_name(), so select it by its CUDA key.
    os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
