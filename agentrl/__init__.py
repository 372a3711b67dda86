"""agentrl."""
