"""The OpenAI-compatible endpoint an agent written with any framework talks to, one address per rollout.

    from agentrl.endpoint import shared_server
    with shared_server().rollout(handler) as (base_url, api_key):
        await my_agent(row, base_url, api_key)

:mod:`agentrl.endpoint.shapes` reads and writes OpenAI's chat-completions shapes, :mod:`agentrl.endpoint.responses`
the Responses API's (the OpenAI Agents SDK's default model class),
:mod:`agentrl.endpoint.server` serves them on loopback, :mod:`agentrl.endpoint.tokens` keeps each rollout's
exact tokens; the rollout behind an address is built by ``agentrl.verl.program_loop``.
"""

from agentrl.endpoint.server import EndpointServer, shared_server

__all__ = ["EndpointServer", "shared_server"]
