"""`SupervisorRuntime`: an agent that delegates to specialist agents.

It is the built-in loop with its specialists as tools (see `_delegation`)
and routing instructions in its system prompt. `AgentBuilder.build()`
returns one when `.agent(...)` added specialists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from tidemill.agents._delegation import ROUTING_PROMPT, AgentTool, Delegation, Worker, with_roster
from tidemill.agents._runtime import AgentRuntime
from tidemill.errors import ConfigurationError
from tidemill.llm import Model

__all__ = ["SupervisorRuntime"]


class SupervisorRuntime(AgentRuntime):
    """An agent that delegates to specialists, each a tool taking a task.

    Specialists come as `agents=` (workers by name, with `descriptions=`) or
    as ready `specialists=` (`AgentTool`s); a description left out is the
    worker's own. The system prompt is `system_prompt` (the supervisor's
    own instructions), then the routing instructions: `routing_prompt` with
    `{roster}` replaced by one line per specialist (`ROUTING_PROMPT` by
    default). Every other argument is `AgentRuntime`'s.

    Raises:
        ConfigurationError: Without any specialist, or with two of one name.

    Examples:
        >>> from tidemill import agent
        >>> from tidemill.llm import ScriptedModel
        >>> boss = SupervisorRuntime(
        ...     model=ScriptedModel(),
        ...     agents={"a": agent().llm("fake", responses=["A"])},
        ...     descriptions={"a": "Answers with A."},
        ... )
        >>> boss.broadcast("go")["a"].output
        'A'
        >>> boss.describe()["pattern"], boss.name
        ('supervisor', 'supervisor')
    """

    def __init__(
        self,
        *,
        model: Model,
        agents: Mapping[str, Worker] | None = None,
        descriptions: Mapping[str, str] | None = None,
        specialists: Sequence[AgentTool] = (),
        routing_prompt: str = ROUTING_PROMPT,
        name: str = "supervisor",
        delegation: Delegation | None = None,
        **options: Any,
    ) -> None:
        delegation = delegation or Delegation()
        notes = dict(descriptions or {})
        team = list(specialists) + [
            AgentTool(worker, name=key, description=notes.get(key, ""), delegation=delegation)
            for key, worker in (agents or {}).items()
        ]
        if not team:
            raise ConfigurationError(
                "A supervisor needs at least one specialist.",
                hint="Pass agents={'researcher': agent, ...}, "
                "or add one with .agent(name, worker).",
            )
        unknown = sorted(set(notes) - {tool.name for tool in team})
        if unknown:
            raise ConfigurationError(
                f"descriptions= names no specialist: {', '.join(unknown)}.",
                hint="Key descriptions by the names in agents=.",
            )
        self.routing_prompt = routing_prompt
        super().__init__(model=model, specialists=team, name=name, delegation=delegation, **options)

    def add_agent(self, name: str, worker: Worker, description: str = "") -> SupervisorRuntime:
        """Add a specialist after construction; later runs can delegate to it.

        Raises:
            ConfigurationError: When a tool or specialist already has the name.

        Examples:
            >>> from tidemill import agent
            >>> from tidemill.llm import ScriptedModel
            >>> boss = SupervisorRuntime(model=ScriptedModel(),
            ...                          agents={"a": agent().llm("fake")})
            >>> sorted(boss.add_agent("b", agent().llm("fake"), "Does B.").specialists)
            ['a', 'b']
        """
        if name in self.tools:
            raise ConfigurationError(f"A tool or specialist is already named {name!r}.")
        specialist = AgentTool(
            worker, name=name, description=description, delegation=self.delegation
        )
        self.specialists[name] = specialist
        self.tools.add(specialist)
        self._loop = dataclasses.replace(self._loop, system_prompt=self._instructions())
        return self

    def _instructions(self) -> str | None:
        return with_roster(self.system_prompt, self.specialists, self.routing_prompt)

    def describe(self) -> dict[str, JsonValue]:
        """The agent's description, with `pattern: "supervisor"` and each specialist's."""
        described = super().describe()
        described["pattern"] = "supervisor"
        described["team"] = {name: tool.description for name, tool in self.specialists.items()}
        return described
