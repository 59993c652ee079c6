"""Executing one claimed step: what each step kind does with its inputs.

A leaf step (a script, an identity) runs here and returns an `Outcome`. A
container step (branch, parallel, for_each, flow) returns a `SpawnPlan`: the
child runs to start. An approval step returns an `ApprovalPlan`; a `sleep`
or `wait_for_event` step a `WaitPlan` (or, a time already past, an
`Outcome`). Failures
in expressions or inputs become failed outcomes, never worker errors.

A leaf step's `$var:` and `$res:` references (in its inputs, and in an AI
step's `provider` and `api_key`) are resolved here, as the run's identity
(`References`), after its inputs are evaluated; a reference that cannot be
resolved fails the step, not retryable, and gives it no value. A container
step passes its references on unresolved: its child runs' steps resolve
them, so no resolved value is stored in a child's input.

A linked `ai_agent` step (`agent: f/x/y`) runs as the inline step its
workspace agent makes of it (`_linked`: read as the run's identity when the
job starts, and kept for the job); an agent step's tools resolve their own
bound references when they are called (`StepEnv.resolve`).
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable
from typing import Any

from tidemill.engine._outcome import Outcome, SpawnPlan, WaitPlan
from tidemill.engine._step_env import ApprovalPlan, StepEnv, StepInfo, call_in_process
from tidemill.engine.ai._child_runs import ChildWait
from tidemill.engine.scripts._pool import ScriptCall, ScriptPool
from tidemill.engine.workers._masking import carried_secrets
from tidemill.engine.workers._references import (
    RESOLVING_KINDS,
    References,
    model_settings,
    step_references,
)
from tidemill.errors import (
    ConfigurationError,
    ExpressionError,
    FlowInputError,
    TidemillError,
    WorkspaceError,
)
from tidemill.flows import (
    Expr,
    Step,
    compile_expression,
    evaluate_condition,
    evaluate_inputs,
    iso_time,
    wake_time,
)
from tidemill.workspace import DEFAULT_WORKSPACE

__all__ = ["RESOLVING_KINDS", "execute", "stop_requested"]


def _failed(error: BaseException, *, retryable: bool = True) -> Outcome:
    return Outcome(
        "failed", error={"type": type(error).__name__, "message": str(error)}, retryable=retryable
    )


async def execute(
    step: Step,
    context: dict[str, Any],
    env: StepEnv,
    references: References | None = None,
) -> Outcome | SpawnPlan | ApprovalPlan | ChildWait | WaitPlan:
    """Execute one step with the values its expressions see.

    `references` resolves a leaf step's `$var:`/`$res:` references as the
    run's identity; None: a step that has some fails (nothing may resolve them).
    """
    job, run = env.job, env.run
    if run.masked:  # an earlier step returned a secret: mask it here too
        masked = await env.store.transact(lambda tx: tx.masked_results(run.id))
        env.secrets.add(carried_secrets(context.get("results") or {}, masked))
    try:
        if step.skip_if is not None and evaluate_condition(
            compile_expression(step.skip_if), context
        ):
            return Outcome("skipped")
        inputs = evaluate_inputs(step, context)
    except ExpressionError as exc:
        return _failed(exc, retryable=False)
    info = StepInfo(run.id, step.id, job.attempt, f"{run.id}:{step.id}")
    kind = step.kind
    if kind in RESOLVING_KINDS:
        resolved = await _resolve(step, inputs, env, references)
        if isinstance(resolved, Outcome):
            return resolved
        inputs, env = resolved
    done = await _leaf(step, inputs, context, env, references, info)
    if done is not None:
        if isinstance(done, Outcome):
            done.inputs = inputs  # what the step was called with: shown, masked (`shown_copy`)
        return done
    if kind in ("sleep", "wait_for_event"):
        return plan_wait(step, context, time.time())
    if kind == "approval":
        settings = step.approval
        assert settings is not None
        return ApprovalPlan(
            settings.message,
            list(settings.approvers),
            settings.timeout,
            settings.on_timeout,
            allow_self_approval=settings.allow_self_approval,
        )
    try:
        return _plan(step, inputs, context)
    except (ExpressionError, FlowInputError) as exc:
        return _failed(exc, retryable=False)


def plan_wait(step: Step, context: dict[str, Any], now: float) -> Outcome | WaitPlan:
    """What a `sleep` or `wait_for_event` step waits for, its expressions evaluated at `now`.

    A sleep whose time is already past succeeds at once; an expression that
    fails, or names no time or no usable key, fails the step (not retryable).
    """
    try:
        if step.sleep is not None:
            settings = step.sleep
            if settings.for_ is not None:
                return WaitPlan("sleep", now + settings.for_)
            assert settings.until is not None
            value = compile_expression(settings.until).evaluate(context)
            try:
                due = wake_time(value)
            except ValueError as exc:
                raise ExpressionError(
                    settings.until, f"`until` gave {exc}", hint="Make it an ISO 8601 time."
                ) from None
            if due <= now:
                return Outcome("succeeded", {"until": iso_time(due)})
            return WaitPlan("sleep", due)
        waiting = step.wait_for_event
        assert waiting is not None
        key = "" if waiting.key is None else compile_expression(waiting.key).evaluate(context)
        if isinstance(key, bool) or not isinstance(key, str | int | float):
            raise ExpressionError(
                waiting.key or "",
                f"the event key is {key!r}; it must be a string or a number",
                hint="Point `key` at a string or number, e.g. flow_input.order_id.",
            )
        due_at = None if waiting.timeout is None else now + waiting.timeout
        return WaitPlan("event", due_at, waiting.name, str(key))
    except ExpressionError as exc:
        return _failed(exc, retryable=False)


async def _leaf(
    step: Step,
    inputs: dict[str, Any],
    context: dict[str, Any],
    env: StepEnv,
    references: References | None,
    info: StepInfo,
) -> Outcome | ApprovalPlan | ChildWait | None:
    """Execute a leaf step (identity, script, AI); None for the other kinds."""
    kind = step.kind
    if kind == "identity":
        result = inputs if step.inputs else context.get("previous_result")
        # An identity step passes values on: a secret it was given is not kept in its result.
        return Outcome("succeeded", env.secrets.mask_value(result))
    if kind == "script":
        return await _script(step, inputs, info, env.pool, env.on_output)
    if kind == "ai_action":
        from tidemill.engine.ai._action import run_ai_action

        return await run_ai_action(step, inputs, context, env)
    if kind == "ai_agent":
        from tidemill.engine.ai._agent import run_ai_agent

        assert step.ai_agent is not None
        if step.ai_agent.agent is not None:
            from tidemill.engine.workers._linked import link_step

            linked = await link_step(step, env, references)
            if isinstance(linked, Outcome):
                return linked
            step, env = linked
        env = _with_resolver(step, env, references)
        return await run_ai_agent(step, inputs, context, env)
    return None


async def _resolve(
    step: Step, inputs: dict[str, Any], env: StepEnv, references: References | None
) -> tuple[dict[str, Any], StepEnv] | Outcome:
    """The step's inputs and env with its references resolved, or the failure to."""
    if not step_references(inputs, model_settings(step)):
        return inputs, env
    try:
        if references is None:
            raise ConfigurationError(
                f"Step {step.id!r} uses workspace references ($var:/$res:), and nothing "
                "here resolves them.",
                hint="Run it on a worker (engine.worker(), tidemill worker).",
            )
        resolved = await references.resolve(env.run, env.job, step, inputs)
    except (WorkspaceError, ConfigurationError) as exc:
        return Outcome("failed", error=_described(exc), retryable=False)
    env.secrets.add(resolved.secrets)
    if resolved.credentials is not None:
        env = dataclasses.replace(env, credentials=resolved.credentials)
    return resolved.inputs, env


def _with_resolver(step: Step, env: StepEnv, references: References | None) -> StepEnv:
    """`env` with `resolve` and `workspace`: an agent's tools act as the run's identity."""
    run, who = env.run, env.run.run_as
    if references is None or who is None:
        return env
    name = str((run.source or {}).get("workspace") or DEFAULT_WORKSPACE)
    workspace = references.workspace(name, who)
    purpose = f"run {run.root_id} step {step.id}"

    async def resolve(value: Any) -> tuple[Any, set[str]]:
        resolved = await workspace.resolve(value, purpose=purpose)
        return resolved.value, set(resolved.secrets)

    return dataclasses.replace(env, resolve=resolve, workspace=workspace)


def _described(error: BaseException) -> dict[str, Any]:
    """An error as a step's: its type, message and hint (which never quote a secret)."""
    message = error.message if isinstance(error, TidemillError) else str(error)
    described: dict[str, Any] = {"type": type(error).__name__, "message": message}
    if isinstance(error, TidemillError) and error.hint:
        described["hint"] = error.hint
    return described


def stop_requested(step: Step, context: dict[str, Any], result: Any) -> bool:
    """True when the step's `stop_after_if` holds for its result."""
    if step.stop_after_if is None:
        return False
    return evaluate_condition(compile_expression(step.stop_after_if), {**context, "result": result})


def _plan(step: Step, inputs: dict[str, Any], context: dict[str, Any]) -> SpawnPlan:
    base = {"flow_input": context.get("flow_input", {})}
    if step.for_each is not None:
        items_spec = step.for_each.items
        items = (
            compile_expression(items_spec.expr).evaluate(context)
            if isinstance(items_spec, Expr)
            else items_spec
        )
        if not isinstance(items, list):
            raise ExpressionError(
                items_spec.expr if isinstance(items_spec, Expr) else repr(items_spec),
                f"for_each items must be a list, not {type(items).__name__}",
            )
        contexts = [{**base, "iter": {"value": v, "index": i}} for i, v in enumerate(items)]
        return SpawnPlan(
            ["body"] * len(items), contexts, items=items,
            parallelism=step.for_each.parallelism, empty_result=[],
        )  # fmt: skip
    if step.parallel is not None:
        n = len(step.parallel.branches)
        return SpawnPlan([f"branch:{i}" for i in range(n)], [dict(base) for _ in range(n)])
    if step.branch is not None:
        for index, case in enumerate(step.branch.branches):
            if evaluate_condition(compile_expression(case.when), context):
                return SpawnPlan([f"case:{index}"], [base])
        if step.branch.default:
            return SpawnPlan(["default"], [base])
        return SpawnPlan([], [])
    if step.flow is not None and step.flow.flow is not None:
        checked = step.flow.flow.validate_input(inputs)
        return SpawnPlan(["flow"], [{"flow_input": checked}])
    raise ExpressionError(step.id, f"step kind {step.kind!r} cannot run here")


async def _script(
    step: Step,
    inputs: dict[str, Any],
    info: StepInfo,
    pool: Callable[[], ScriptPool],
    on_output: Callable[[str, str], None] | None,
) -> Outcome:
    """Run a script step in the pool (or in the worker, `in_process`).

    With `on_output`, what it prints goes there as it is written, and the
    outcome carries no logs; else the outcome carries them.
    """
    settings = step.script
    assert settings is not None
    if settings.in_process and settings.function:
        return await _in_process(settings.function, inputs, info, step.timeout)
    call = ScriptCall(
        code=settings.code,
        function=None if settings.code else settings.function,
        args=inputs,
        env={
            "TIDEMILL_RUN_ID": info.run_id,
            "TIDEMILL_STEP_ID": info.step_id,
            "TIDEMILL_ATTEMPT": str(info.attempt),
            "TIDEMILL_IDEMPOTENCY_KEY": info.idempotency_key,
        },
        timeout=step.timeout,
    )
    outcome = await pool().run(call, on_output=on_output)
    logs = tuple(
        (name, text)
        for name, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr))
        if text and on_output is None
    )
    if outcome.ok:
        return Outcome("succeeded", outcome.result, logs=logs)
    error = dict(outcome.error or {"type": "Error", "message": "the script failed"})
    retryable = error.get("type") not in ("SyntaxError", "NoMain", "ImportError")
    return Outcome("failed", error=error, retryable=retryable, logs=logs)


async def _in_process(
    reference: str, inputs: dict[str, Any], info: StepInfo, limit: float | None
) -> Outcome:
    """Run an in-process script step: its function's result, or its failure."""
    try:
        result = await call_in_process(reference, inputs, info, limit)
    except TimeoutError:
        return Outcome(
            "failed",
            error={"type": "Timeout", "message": f"the step ran longer than {limit} s"},
        )
    except Exception as exc:
        return Outcome(
            "failed",
            error={
                "type": type(exc).__name__,
                "message": str(exc),
                "traceback": traceback.format_exc(),
            },
        )
    return Outcome("succeeded", result)
