"""The run contract: what ``agentrl train`` hands verl's workers, as one typed, validated object.

    spec = RunSpec(run_dir="/runs/demo", tools=["calculator"], rewards=[{"name": "math"}], agent=AgentSettings())
    spec.write("/runs/demo/agentrl_spec.json")
    RunSpec.read("/runs/demo/agentrl_spec.json").agent.max_turns   # 4

The runner writes it once, after every check passed; each agent-loop worker reads it back and validates
it again, so a worker never indexes a free dict. Anything that builds an agent loop outside verl
(a local engine, a test) constructs a ``RunSpec`` directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, ValidationError

from agentrl.config import AgentrlSettings, AgentSettings, CreditSettings, ToolsSetting
from agentrl.errors import AgentrlError

VERSION = 1


class SpecError(AgentrlError):
    """The spec file is missing, from another agentrl version, or not valid."""


class RunSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = VERSION
    run_dir: str
    tools: ToolsSetting = None  # the config's agentrl.tools as written, inline endpoint lists included
    tool_allow: Optional[dict[str, list[str]]] = None
    rewards: list[Union[str, dict[str, Any]]]
    agent: AgentSettings = AgentSettings()
    credit: CreditSettings = CreditSettings()  # how the trainer spreads rewards over turns (agentrl.credit)

    @classmethod
    def from_settings(cls, settings: AgentrlSettings, run_dir: Path | str) -> "RunSpec":
        return cls(run_dir=str(run_dir), tools=settings.tools, tool_allow=settings.tool_allow,
                   rewards=settings.rewards, agent=settings.agent, credit=settings.credit)

    def write(self, path: Path | str) -> None:
        Path(path).write_text(self.model_dump_json(indent=2))

    @classmethod
    def read(cls, path: Path | str) -> "RunSpec":
        try:
            spec = cls.model_validate_json(Path(path).read_text())
        except OSError as exc:
            raise SpecError(f"run spec {path} cannot be read ({exc.strerror}); start the run with `agentrl train`") from None
        except ValidationError as exc:
            raise SpecError(f"run spec {path} is not valid for this agentrl ({exc.error_count()} errors: "
                            f"{exc.errors()[0]['msg']}); rerun `agentrl train` to rewrite it") from None
        if spec.version != VERSION:
            raise SpecError(f"run spec {path} has version {spec.version}, this agentrl reads {VERSION}; "
                            f"rerun `agentrl train` to rewrite it")
        return spec
