/** An agent step's conversation: turns, reasoning (collapsed), tool calls with their results,
 * each turn's model, tokens, latency and cost, and the approvals at their calls. */
import { Link } from '@tanstack/react-router'
import { createTwoFilesPatch } from 'diff'
import { useMemo } from 'react'
import { useRunApprovals, useRunUsage, useTranscript } from '../../api/runs'
import type { Message, Usage } from '../../api/types'
import { formatCost, formatTime } from '../../lib/format'
import { type ToolCallView, approvalsByCall, editedArguments, stableJson, transcriptTurns } from '../../lib/transcriptTurns'
import { DiffView } from '../DiffView'
import { ErrorBox } from '../ErrorBox'
import { Json } from '../Json'
import './run.css'

export function Transcript({ runId, stepId, active }: { runId: string; stepId: string; active: boolean }) {
  const transcript = useTranscript(runId, stepId, true)
  const usage = useRunUsage(runId)
  const approvals = useRunApprovals(runId, active)
  const { turns, usageMismatch, failedCalls } = useMemo(() => {
    const mine = (usage.data ?? []).filter((u) => u.run_id === runId && u.step_id === stepId)
    return transcriptTurns(transcript.data ?? [], mine, approvalsByCall(approvals.data ?? [], runId, stepId))
  }, [transcript.data, usage.data, approvals.data, runId, stepId])
  return (
    <section aria-labelledby={`transcript-${stepId}`}>
      <h3 id={`transcript-${stepId}`}>Transcript</h3>
      <ErrorBox error={transcript.error ?? usage.error ?? approvals.error} />
      {transcript.data?.length === 0 && <p className="muted">The agent has not started.</p>}
      {usageMismatch && (
        <p className="muted small-text">
          The model calls recorded do not line up one to one with the turns (a retried attempt, or a call not yet
          recorded): the per-turn figures are matched from the latest call back and may be off.
        </p>
      )}
      {failedCalls.length > 0 && (
        <p className="muted small-text">
          {failedCalls.length} model call{failedCalls.length === 1 ? '' : 's'} failed:{' '}
          {failedCalls.map((u) => u.error).join('; ')}
        </p>
      )}
      <ol className="transcript" aria-label="Turns">
        {turns.map((turn, i) => {
          if (turn.kind === 'assistant') {
            return (
              <li key={i} className="msg msg-assistant" data-testid={`turn-${turn.index}`}>
                <header className="turn-head">
                  <strong>assistant</strong> <span className="muted">turn {turn.index + 1}</span>
                  <UsageFacts usage={turn.usage} />
                </header>
                <Reasoning message={turn.message} />
                {turn.message.content && <p>{turn.message.content}</p>}
                {turn.calls.map((c) => (
                  <ToolCallBlock key={c.call.id ?? c.call.name} runId={runId} view={c} />
                ))}
              </li>
            )
          }
          const m = turn.message
          return (
            <li key={i} className={`msg msg-${m.role}`}>
              <strong>{turn.kind === 'orphan' ? 'tool result' : m.role}</strong>
              {m.name && <span className="muted"> {m.name}</span>}
              {m.content && <p>{m.content}</p>}
            </li>
          )
        })}
      </ol>
    </section>
  )
}

function UsageFacts({ usage }: { usage: Usage | undefined }) {
  if (!usage) return <span className="muted small-text">no model call recorded</span>
  return (
    <span className="turn-usage small-text" data-testid="turn-usage">
      <span>{usage.model}</span>
      <span title="input → output tokens">
        {usage.input_tokens} → {usage.output_tokens} tokens
      </span>
      <span>{Math.round(usage.latency_ms)} ms</span>
      <span>{formatCost(usage.cost_usd)}</span>
    </span>
  )
}

function Reasoning({ message }: { message: Message }) {
  const text = message.reasoning
    .map((r) => r.text)
    .filter(Boolean)
    .join('\n\n')
  const redacted = message.reasoning.some((r) => r.redacted_data)
  if (!text && !redacted) return null
  return (
    <details className="reasoning">
      <summary>Reasoning</summary>
      {text && <p>{text}</p>}
      {redacted && <p className="muted">Part of it is encrypted by the provider.</p>}
    </details>
  )
}

function ToolCallBlock({ runId, view }: { runId: string; view: ToolCallView }) {
  const { call, result, approval } = view
  const edited = editedArguments(approval, call.arguments ?? {})
  return (
    <div className="tool-call" data-testid={`tool-call-${call.name}`} data-call-id={call.id}>
      <p>
        Calls <code>{call.name}</code> with:
      </p>
      <Json value={call.arguments ?? {}} />
      {approval && (
        <div className="inline-approval" role="group" aria-label={`Approval of ${call.name}`}>
          {approval.status === 'pending' ? (
            <p>
              Waiting for approval since {formatTime(approval.created_at)}.{' '}
              <Link to="/approvals" search={{ run: runId }}>
                Decide in Approvals
              </Link>
            </p>
          ) : (
            <p>
              <strong>{approval.status}</strong> by {approval.decided_by ?? '—'} at {formatTime(approval.decided_at)}
              {approval.comment && <>: “{approval.comment}”</>}
            </p>
          )}
          {edited && (
            <DiffView
              diff={createTwoFilesPatch('model', 'approved', stableJson(call.arguments ?? {}) + '\n', stableJson(edited) + '\n')}
              oldLabel="the model's arguments"
              newLabel="as approved"
            />
          )}
        </div>
      )}
      {result ? (
        <div className={`tool-result${result.is_error ? ' is-error' : ''}`}>
          <strong>{result.is_error ? 'Error' : 'Result'}</strong>
          <pre className="json">{result.content}</pre>
        </div>
      ) : (
        <p className="muted">No result yet.</p>
      )}
    </div>
  )
}
