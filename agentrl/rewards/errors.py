"""The reward layer's two exceptions: ``Unscorable`` (a reward could not score: not "wrong") and
``RewardConfigError`` (a reward spec is wrong, found when it is loaded)."""

from agentrl.errors import AgentrlError


class Unscorable(Exception):
    """This trajectory could not be scored; ``cause`` says why (timeout, judge down, bad value...)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class RewardConfigError(AgentrlError, ValueError):
    """A reward spec or its options are wrong; raised when the reward is loaded, not when it runs."""
