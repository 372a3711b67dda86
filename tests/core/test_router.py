"""agentrl's request router (agentrl/verl/router.py) against verl's own GlobalRequestLoadBalancer: the same
server for the same sequence of calls, every method of verl's router protocol, and a process that imports
neither verl nor torch."""

from __future__ import annotations

import inspect
import random
import subprocess
import sys

import pytest
import yaml

from agentrl.verl.router import CONFIG, Router

verl_router = pytest.importorskip("verl.workers.rollout.router")


def test_the_config_names_this_class_as_verl_resolves_it():
    found = verl_router._resolve_router_class(yaml.safe_load(CONFIG.read_text())["router_class"])
    assert found is Router


def test_every_method_of_verls_router_protocol_with_its_parameters():
    protocol = verl_router.RequestLoadBalancer
    wanted = {n for n, f in vars(protocol).items() if callable(f) and not n.startswith("_")}
    assert wanted >= {"acquire_server", "release_server", "add_servers", "remove_servers", "clear_sticky_cache"}
    for name in wanted | {"get_inflight_count"}:
        ours = getattr(Router, name, None)
        theirs = getattr(protocol, name, None) or getattr(verl_router.GlobalRequestLoadBalancer, name)
        assert ours is not None, name
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name


def test_the_same_choices_as_verls_balancer_for_the_same_calls():
    """A random sequence of acquires (new and repeated request ids), releases, added and removed servers and
    cleared caches, on both, with ties broken by the same random state: every answer equal."""
    servers = {f"s{i}": f"handle-{i}" for i in range(3)}
    theirs = verl_router.GlobalRequestLoadBalancer(servers=servers, max_cache_size=50)
    ours = Router(servers, {"max_cache_size": 50})
    ops, held, answers = random.Random(7), [], 0
    for n in range(4000):
        op = ops.random()
        if op < 0.55:
            rid = f"r{ops.randrange(120)}"  # ids repeat (a rollout's turns) and fall out of the 50-entry cache
            random.seed(n)
            got = theirs.acquire_server(rid)
            random.seed(n)
            assert ours.acquire_server(rid) == got, n
            held.append(got[0])
            answers += 1
        elif op < 0.9 and held:
            sid = held.pop(ops.randrange(len(held)))
            theirs.release_server(sid)
            ours.release_server(sid)
        elif op < 0.93:
            extra = {f"s{ops.randrange(5)}": "handle-x"}
            theirs.add_servers(extra)
            ours.add_servers(extra)
        elif op < 0.96 and len(theirs.get_all_servers()) > 1:
            gone = [ops.choice(theirs.get_all_servers())]
            theirs.remove_servers(gone)
            ours.remove_servers(gone)
        else:
            assert ours.clear_sticky_cache() == theirs.clear_sticky_cache()
        assert ours.get_status() == theirs.get_status(), n
        assert set(ours._sticky) == set(theirs._request_id_to_server), n  # the same ids remembered (and evicted)
        assert ours.get_total_inflight() == theirs.get_total_inflight()
    assert answers > 2000
    theirs.remove_servers(theirs.get_all_servers())
    ours.remove_servers(ours.get_all_servers())
    with pytest.raises(RuntimeError, match="No available servers"):
        ours.acquire_server("r-none")


def test_its_module_imports_neither_verl_nor_torch():
    """Nor does the module of the CPU rollout's server, whose handles the router is given: a process that receives
    an actor handle imports the module of the actor's class (Ray reads its methods from there)."""
    code = ("import sys, agentrl.verl.router, agentrl.verl.cpu.server; "
            "print(sorted(m for m in ('verl', 'torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_cpu_plan_selects_it():
    from agentrl.verl.args import CPU_DEFAULTS

    assert CPU_DEFAULTS["actor_rollout_ref.rollout.router_config_path"] == str(CONFIG) and CONFIG.is_absolute()
