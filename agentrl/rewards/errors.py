"""The one exception a reward raises when it could not score (as opposed to "wrong")."""


class Unscorable(Exception):
    """This trajectory could not be scored; ``cause`` says why (timeout, judge down, bad value...)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause
