"""agentrl-calculator: a small MCP server with arithmetic tools, for agents learning to use tools.

Run it over stdio with ``python -m agentrl_calculator`` or over streamable HTTP with
``python -m agentrl_calculator --http --port 8765`` (served at ``http://127.0.0.1:8765/mcp``).
Installed, it registers itself with agentrl as the tool server ``"calculator"``.
"""

__version__ = "0.1.0"
