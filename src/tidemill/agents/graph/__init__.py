"""The graph runtime: the agent as a LangGraph graph, on Tidemill's journal.

`GraphRuntime` runs the same agent as `AgentRuntime` (model, tools,
approvals, limits, memory, guardrails, structured output, specialists, the
same responses and errors) as a LangGraph `StateGraph` you can edit with
`native_graph()` and `recompile()`. `JournalSaver` is the LangGraph
checkpoint saver it uses, over any Tidemill `Checkpointer`; use it for
graphs of your own too. Needs `pip install 'tidemill[graph]'`.

Who owns what: `_runtime` (the public API: checks and journals the input
and the decisions), `_drive` (drives the compiled graph, turns how it
stopped into outcomes), `_nodes` (the `agent` and `tools` nodes and the
routing), `_state` (the graph's state and the per-run context), `_view`
(the graph's conversation as the memory sees it), `_saver` (LangGraph's
saver protocol over the journal), `_index` (a thread's checkpoints folded
from its journal), `_codec` (LangGraph values as JSON, never pickle).
"""

try:
    import langgraph.graph  # noqa: F401 - only to fail early, with the install command
except ImportError as exc:
    from tidemill.errors import MissingDependencyError

    raise MissingDependencyError(
        "langgraph", extra="graph", feature="The graph runtime (tidemill.agents.graph)"
    ) from exc

from tidemill.agents.graph._drive import GraphInput
from tidemill.agents.graph._runtime import AgentGraph, GraphRuntime
from tidemill.agents.graph._saver import JournalSaver, ThreadLog
from tidemill.agents.graph._state import GraphRun, GraphState, append_messages

__all__ = [
    "AgentGraph",
    "GraphInput",
    "GraphRun",
    "GraphRuntime",
    "GraphState",
    "JournalSaver",
    "ThreadLog",
    "append_messages",
]
