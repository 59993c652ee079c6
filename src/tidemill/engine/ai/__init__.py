"""The durable agent host: how a worker runs `ai_agent` and `ai_action` steps.

An `ai_agent` step is an agent of `tidemill.agents` whose journal lives in the
run's store (`tidemill.engine._journal`); the modules here give it its tools,
its pauses and its usage records. `ai_action` is the single model call.

- `_action`: the `ai_action` step, and the prompts, settings and errors both share;
  `_hints`: those errors' hints in a flow's words (`api_key: env:NAME`, not `api_key=`).
- `_agent`: an `ai_agent` step set up (tools, model, runtime); `_agent_step`:
  one execution of it, continuing its thread from the journal.
- Tools: `_tools` (scripts and functions, their schemas read by
  `tidemill.flows._signature`), `_child_tools` and
  `_child_runs` (flows and agents as child runs), `_mcp`, `_question`
  (`ask_person`), `_delegation`, `_admission` and `_specialist` (specialists).
- Pauses: `_pause` (`AgentPause`), and what a person's decision must match in
  the journal: `_approvals` (tool calls), `_question`, `_budget`
  (`on_exceeded: ask`), `_reconcile` (calls a crash cut short).
- Usage: `_usage` (one record per model call), `_lost_usage` (a dead worker's).
"""
