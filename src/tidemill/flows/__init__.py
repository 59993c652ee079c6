"""Flows: the definition format of workflows, in YAML, JSON or Python.

A flow is a list of steps. Each step has an `id`, one kind key (`script`,
`flow`, `branch`, `parallel`, `for_each`, `approval`, `sleep`,
`wait_for_event`, `identity`, `ai_action`, `ai_agent`), and optional `inputs`, `needs`, `retry`,
`timeout`, `skip_if` and `stop_after_if`. `Flow.load` reads a file, inlines
the files it names, and reports every problem at once as a
`FlowValidationError`.

Expressions (`{expr: ...}`, `skip_if`, `when`) are compiled once with
`compile_expression` and evaluated safely over plain data.

A `Schedule` (a workspace schedule item) runs a flow or script at the times
of a `Cron` expression in a time zone.
"""

from tidemill.flows._ai import (
    AgentLimits,
    AgentMemory,
    AgentQuestions,
    AIAction,
    MCPTools,
    ToolScript,
    placeholders,
)
from tidemill.flows._approval import Approval
from tidemill.flows._base import Expr, StepKind
from tidemill.flows._concurrency import Concurrency
from tidemill.flows._cron import Cron
from tidemill.flows._duration import parse_duration
from tidemill.flows._expr import Expression, compile_expression, evaluate_condition
from tidemill.flows._flow import Flow, Step, StepSettings
from tidemill.flows._identity import Identity
from tidemill.flows._inputs import evaluate_inputs
from tidemill.flows._load import WORKSPACE_PATH, Includes
from tidemill.flows._nesting import (
    AgentToolSpec,
    AIAgent,
    Body,
    Branch,
    Case,
    ForEach,
    Parallel,
    SubFlow,
)
from tidemill.flows._problems import Problem
from tidemill.flows._retry import Retry
from tidemill.flows._schedule import Schedule
from tidemill.flows._scope import Placement, resolved_needs
from tidemill.flows._script import ScriptStep
from tidemill.flows._waiting import Sleep, WaitForEvent, iso_time, wake_time

__all__ = [
    "WORKSPACE_PATH",
    "AIAction",
    "AIAgent",
    "AgentLimits",
    "AgentMemory",
    "AgentQuestions",
    "AgentToolSpec",
    "Approval",
    "Body",
    "Branch",
    "Case",
    "Concurrency",
    "Cron",
    "Expr",
    "Expression",
    "Flow",
    "ForEach",
    "Identity",
    "Includes",
    "MCPTools",
    "Parallel",
    "Placement",
    "Problem",
    "Retry",
    "Schedule",
    "ScriptStep",
    "Sleep",
    "Step",
    "StepKind",
    "StepSettings",
    "SubFlow",
    "ToolScript",
    "WaitForEvent",
    "compile_expression",
    "evaluate_condition",
    "evaluate_inputs",
    "iso_time",
    "parse_duration",
    "placeholders",
    "resolved_needs",
    "wake_time",
]
