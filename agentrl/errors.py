"""The one base class for errors a user sees.

    from agentrl.errors import AgentrlError

    class DatasetError(AgentrlError): ...

The ``agentrl`` command prints any ``AgentrlError`` as ``agentrl: error: <message>`` and exits 2, so a
message must say where the problem is (file, line, key) and how to fix it. Errors that are not the
user's to fix (a bug, an infrastructure failure scored as unscorable) do not derive from it.
"""

from __future__ import annotations


class AgentrlError(Exception):
    """A problem the user can fix: bad config, bad data, an unknown plugin name, a broken reward file."""
