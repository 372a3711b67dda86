"""gloo's address, on a cluster of several machines: the interface that holds this Ray node's address.

Every verl process group has a gloo part (all of it on CPU, ``cpu:gloo`` beside NCCL on GPUs). gloo gives its
peers the address its host name resolves to, and on many machines (Debian's and Ubuntu's ``/etc/hosts``, most
containers) that is a loopback address: ranks on other machines then try to connect to 127.0.0.1 and the run
fails with ``Gloo connectFullMesh failed ... remote=[127.0.0.1]``. Ray already knows the address the other
nodes reach this one at, so, unless the user set ``GLOO_SOCKET_IFNAME``, a process group is made on the
interface that holds it (``lo`` on a one-machine cluster at 127.0.0.1).
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import torch.distributed

logger = logging.getLogger("agentrl.verl.gloo")


def interface_for(ip: str) -> str | None:
    """The name of the network interface that holds ``ip``, or None."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == ip for a in addrs):
            return name
    return None


def node_interface() -> str | None:
    """The interface of this Ray node's address, when this process is in a Ray cluster."""
    try:
        import ray

        if not ray.is_initialized():
            return None
        ip = ray.util.get_node_ip_address().strip("[]")
    except Exception:  # not a Ray worker: gloo's own choice stands
        return None
    return interface_for(ip)


def _with_node_interface(init: Any) -> Any:
    @functools.wraps(init)  # keeps the name of what it wraps (the CPU platform's wrapper, or torch's own)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if not os.environ.get("GLOO_SOCKET_IFNAME"):
            name = node_interface()
            if name:
                os.environ["GLOO_SOCKET_IFNAME"] = name
                logger.info("agentrl: gloo uses %s, the interface of this Ray node's address", name)
        return init(*args, **kwargs)

    init_process_group._agentrl_gloo = True
    return init_process_group


def install() -> None:
    """Wrap ``torch.distributed.init_process_group`` (once) so that gloo binds the Ray node's interface."""
    if not getattr(torch.distributed.init_process_group, "_agentrl_gloo", False):
        torch.distributed.init_process_group = _with_node_interface(torch.distributed.init_process_group)
