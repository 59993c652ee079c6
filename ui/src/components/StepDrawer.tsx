/** One step of a run: its definition, attempts, logs (live), events and, for agents, the transcript. */
import { Link } from '@tanstack/react-router'
import { Fragment } from 'react'
import type { Approval, RunEvent, RunWait } from '../api/types'
import { ApprovalCard } from './ApprovalCard'
import type { FlowStep } from '../lib/flowSteps'
import { formatDuration, formatTime } from '../lib/format'
import type { StepState } from '../lib/stepStates'
import { Json } from './Json'
import { Journal } from './run/Journal'
import { StepIO } from './run/StepIO'
import { Transcript } from './run/Transcript'
import { StatusBadge } from './StatusBadge'

type Props = {
  runId: string
  step: FlowStep
  state: StepState | undefined
  events: RunEvent[]
  waits: RunWait[]
  /** The run's pending waits the caller may decide. */
  approvals: Approval[]
  /** Whether the run's earlier events were left out (the page opened with its latest ones). */
  truncated?: boolean
  /** Whether the run is queued, running or waiting (its step's transcript and journal are refetched). */
  active?: boolean
  /** What the step answered, when it is known: the run's result, for its last step. */
  output?: { value: unknown } | null
  onClose: () => void
}

export function StepDrawer({
  runId,
  step,
  state,
  events,
  waits,
  approvals,
  truncated = false,
  active = false,
  output = null,
  onClose,
}: Props) {
  // Each event names its job (attempt): the step's own are those of its jobs in this run.
  const attemptOf = new Map((state?.jobs ?? []).map((job) => [job.id, job.attempt]))
  const mine = events.filter(
    (e) => (e.job_id != null && attemptOf.has(e.job_id)) || (e.step_id === step.id && e.run_id === runId),
  )
  const logs = mine.filter((e) => e.kind === 'log')
  const attempts = new Set(logs.map((e) => e.job_id)).size
  const mineToDecide = approvals.filter((a) => a.step_id === step.id && a.run_id === runId)
  const wait = mineToDecide.length ? undefined : waits.find((w) => w.step === step.id && w.approval_id)
  const isAgent = step.kind === 'ai_agent'
  return (
    <aside className="drawer" aria-label={`Step ${step.id}`}>
      <header className="drawer-head">
        <h2>
          {step.id} <span className="muted">{step.kind}</span>
        </h2>
        <StatusBadge status={state?.status ?? 'pending'} label="Step status" />
        <button type="button" className="small" onClick={onClose}>
          Close
        </button>
      </header>
      {step.summary && <p>{step.summary}</p>}
      {wait && (
        <p className="notice">
          Waiting: {wait.reason}{' '}
          <Link to="/approvals" search={{ run: runId }}>
            Decide in Approvals
          </Link>
        </p>
      )}

      {mineToDecide.map((a) => (
        <ApprovalCard key={a.id} approval={a} />
      ))}

      <StepIO runId={runId} step={step} state={state} runOutput={output} />

      <section>
        <h3>Attempts</h3>
        {!state ? (
          <p className="muted">Not started.</p>
        ) : (
          <table className="table compact">
            <thead>
              <tr>
                <th>#</th>
                <th>Status</th>
                <th>Started</th>
                <th>Duration</th>
                <th>Worker</th>
              </tr>
            </thead>
            <tbody>
              {state.jobs.map((job) => (
                <Fragment key={job.id}>
                  <tr>
                    <td>{job.attempt}</td>
                    <td>
                      <StatusBadge status={job.status} />
                    </td>
                    <td>{formatTime(job.started_at)}</td>
                    <td>
                      {job.started_at == null
                        ? '—'
                        : formatDuration((job.finished_at ?? Date.now() / 1000) - job.started_at)}
                    </td>
                    <td className="small-text">{job.worker ?? '—'}</td>
                  </tr>
                  {job.error && (
                    <tr>
                      <td colSpan={5}>
                        <JobError error={job.error} />
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        )}
      </section>

      <section>
        <h3>Logs</h3>
        {truncated && <p className="muted small-text">Only the run's latest events are shown here.</p>}
        {logs.length === 0 ? (
          <p className="muted">Nothing printed.</p>
        ) : (
          <pre className="logs" aria-label="Logs" tabIndex={0}>
            {logs.map((e) => {
              const text = typeof e.data.text === 'string' ? e.data.text : ''
              const stream = e.data.stream === 'stderr' ? 'stderr' : 'stdout'
              const attempt = e.job_id != null ? attemptOf.get(e.job_id) : undefined
              return (
                <span key={e.id} className={`log-${stream}`} data-job-id={e.job_id ?? undefined}>
                  {attempts > 1 && attempt !== undefined && <em className="muted">[attempt {attempt}] </em>}
                  {text}
                  {e.data.truncated === true && <em> [cut: the whole chunk is in the run's logs]</em>}
                </span>
              )
            })}
          </pre>
        )}
      </section>

      {isAgent && <Transcript runId={runId} stepId={step.id} active={active} />}
      {isAgent && <Journal runId={runId} stepId={step.id} active={active} />}

      <section>
        <h3>Events</h3>
        {mine.length === 0 ? (
          <p className="muted">None yet.</p>
        ) : (
          <ol className="events">
            {mine
              .filter((e) => e.kind !== 'log')
              .map((e) => (
                <li key={e.id} data-job-id={e.job_id ?? undefined}>
                  <span className="muted">{formatTime(e.at)}</span> <code>{e.kind}</code>
                  {e.job_id != null && attemptOf.has(e.job_id) && (
                    <span className="muted"> #{attemptOf.get(e.job_id)}</span>
                  )}{' '}
                  {eventSummary(e)}
                </li>
              ))}
          </ol>
        )}
      </section>
    </aside>
  )
}

function eventSummary(e: RunEvent): string {
  const d = e.data
  switch (e.kind) {
    case 'step_started':
      return `attempt ${String(d.attempt ?? '')}`
    case 'step_finished': {
      const error = d.error as { type?: unknown; message?: unknown } | null | undefined
      return `${String(d.status ?? '')}${error ? `: ${String(error.type ?? 'Error')}: ${String(error.message ?? '')}` : ''}`
    }
    case 'step_retrying':
      return `next attempt ${String(d.attempt ?? '')}`
    case 'wait_requested':
      return `${String(d.kind ?? '')}: ${String(d.message ?? '')}`
    case 'wait_decided':
      return `${String(d.status ?? '')} by ${String(d.decided_by ?? '—')}${d.comment ? `: ${String(d.comment)}` : ''}`
    case 'usage':
      return `${String(d.model ?? '')} ${String(d.input_tokens ?? '')}→${String(d.output_tokens ?? '')} tokens`
    default:
      return ''
  }
}

/** A failed attempt's error: its type and message, and the traceback on demand. */
function JobError({ error }: { error: Record<string, unknown> }) {
  const type = typeof error.type === 'string' ? error.type : 'Error'
  const message = typeof error.message === 'string' ? error.message : ''
  const traceback = typeof error.traceback === 'string' ? error.traceback : null
  return (
    <details className="job-error">
      <summary>
        <strong>{type}</strong>
        {message && `: ${message}`}
      </summary>
      {traceback ? <pre className="code">{traceback}</pre> : <Json value={error} />}
    </details>
  )
}
