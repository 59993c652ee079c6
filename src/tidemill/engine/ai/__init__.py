"""The durable agent host: how a worker runs `ai_agent` and `ai_action` steps.

An `ai_agent` step is an agent of `tidemill.agents` whose journal lives in the
run's store; the modules here give it its tools (scripts, child runs, MCP,
specialists), its pauses (approvals, questions, budgets, reconciliation) and
its usage records. `ai_action` is the single model call.
"""
