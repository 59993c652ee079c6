"""`Blueprint`: what an `AgentBuilder` has gathered, and the runtime built from it.

The builder's fluent methods fill in a blueprint, already resolved from
strings into objects; `build()` makes the agent out of it: an
`AgentRuntime`, a `SupervisorRuntime` with specialists, or a `GraphRuntime`
for `.graph()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from tidemill.agents._delegation import ROUTING_PROMPT, AgentTool, Delegation
from tidemill.agents._facade import Closeable
from tidemill.agents._limits import UsageLimits
from tidemill.agents._output import OutputSpec
from tidemill.agents._runtime import AgentRuntime
from tidemill.agents._supervisor import SupervisorRuntime
from tidemill.agents.checkpoint import Checkpointer, MemoryCheckpointer
from tidemill.agents.guardrails import Guardrail
from tidemill.agents.memory import Memory
from tidemill.agents.tracing import Tracer
from tidemill.errors import ConfigurationError
from tidemill.llm import Model
from tidemill.tools import ToolRegistry

if TYPE_CHECKING:
    from tidemill.agents.graph import GraphRuntime

__all__ = ["Blueprint"]


@dataclass
class Blueprint:
    """An agent's configuration, as the builder's methods set it; see `AgentBuilder`.

    Most fields are set by the builder method of their name; `registry` by
    `tool()` and `mcp()`, `parallel` and `max_parallel` by `parallel_tools()`,
    `approval` by `human_in_the_loop()`, `specialists` by `agent()`.
    """

    model: Model | None = None
    registry: ToolRegistry = field(default_factory=ToolRegistry)
    system: str | None = None
    name: str | None = None
    description: str | None = None
    routing_prompt: str = ROUTING_PROMPT
    max_iterations: int = 10
    tool_call_retries: int = 2
    parallel: bool = True
    max_parallel: int = 8
    approval: bool = False
    checkpointer: Checkpointer | None = None
    limits: UsageLimits = field(default_factory=UsageLimits)
    output: OutputSpec | None = None
    memory: Memory | None = None
    specialists: dict[str, AgentTool] = field(default_factory=dict)
    delegation: Delegation = field(default_factory=Delegation)
    guardrail: Guardrail | None = None
    tracer: Tracer | None = None
    graph: bool = False
    _bound: tuple[Memory, Checkpointer, Memory] | None = field(default=None, repr=False)

    def build(self, *, owned: list[Closeable] | None = None) -> AgentRuntime | GraphRuntime:
        """Build the agent this blueprint describes; a `SupervisorRuntime` with specialists.

        `owned` is what the runtime's `aclose()` closes: what the builder made.
        A memory that keeps data of its own (vector recall) is bound to the
        checkpointer here, so its data lives beside the journals; the bound
        copy joins `owned`.

        Raises:
            ConfigurationError: When no model was chosen.
            MissingDependencyError: For `.graph()` without the `graph` extra.
        """
        if self.model is None:
            raise ConfigurationError(
                "The agent has no model.",
                hint="Choose one with .llm('provider:model'), or .llm('fake') offline.",
            )
        if self.checkpointer is None:
            # Kept across rebuilds, so a pause survives a later configuration change.
            self.checkpointer = MemoryCheckpointer()
        owned = [] if owned is None else owned
        memory = self._memory_for(self.checkpointer, owned)
        if self.graph:
            return self._build_graph(self.model, self.checkpointer, memory, owned)
        options: dict[str, Any] = {}
        runtime: type[AgentRuntime] = AgentRuntime
        if self.specialists:
            runtime = SupervisorRuntime
            options["routing_prompt"] = self.routing_prompt
        return runtime(
            model=self.model,
            tools=self.registry,
            system_prompt=self.system,
            name=self.name or ("supervisor" if self.specialists else "agent"),
            description=self.description,
            owned=owned,
            **options,
            max_iterations=self.max_iterations,
            tool_call_retries=self.tool_call_retries,
            parallel_tools=self.parallel,
            max_parallel=self.max_parallel,
            require_approval=self.approval,
            checkpointer=self.checkpointer,
            limits=self.limits,
            output=self.output,
            memory=memory,
            specialists=list(self.specialists.values()),
            delegation=self.delegation,
            guardrail=self.guardrail,
            tracer=self.tracer,
        )

    def _memory_for(self, checkpointer: Checkpointer, owned: list[Closeable]) -> Memory | None:
        """The memory, bound to `checkpointer` if it keeps data of its own; bound once."""
        memory = self.memory
        bind = getattr(memory, "bound", None)
        if memory is None or not callable(bind):
            return memory
        if self._bound is not None and self._bound[0] is memory and self._bound[1] is checkpointer:
            return self._bound[2]
        bound = cast(Memory, bind(checkpointer))
        if bound is not memory and callable(getattr(bound, "aclose", None)):
            owned.append(cast(Closeable, bound))
        self._bound = (memory, checkpointer, bound)
        return bound

    def _build_graph(
        self,
        model: Model,
        checkpointer: Checkpointer,
        memory: Memory | None,
        owned: Sequence[Closeable],
    ) -> GraphRuntime:
        from tidemill.agents.graph import GraphRuntime

        return GraphRuntime(
            model=model,
            tools=self.registry,
            system_prompt=self.system,
            name=self.name or ("supervisor" if self.specialists else "agent"),
            description=self.description,
            max_iterations=self.max_iterations,
            tool_call_retries=self.tool_call_retries,
            parallel_tools=self.parallel,
            max_parallel=self.max_parallel,
            require_approval=self.approval,
            checkpointer=checkpointer,
            limits=self.limits,
            output=self.output,
            memory=memory,
            specialists=list(self.specialists.values()),
            delegation=self.delegation,
            routing_prompt=self.routing_prompt,
            guardrail=self.guardrail,
            tracer=self.tracer,
            owned=owned,
        )
