/** One wait for a person's decision, with what it is about and the decisions it takes. */
import { Link } from '@tanstack/react-router'
import { useState } from 'react'
import { useDecide } from '../api/approvals'
import type { Approval } from '../api/types'
import { formatAge, formatTime } from '../lib/format'
import { ErrorBox } from './ErrorBox'
import { Json } from './Json'
import { type JsonSchema, SchemaForm, schemaProblems } from './SchemaForm'

const KIND_LABEL: Record<string, string> = {
  step: 'Approval step',
  tool_call: 'Tool call',
  question: 'Question',
  budget: 'Budget',
  reconcile: 'Interrupted tool call',
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export function ApprovalCard({ approval }: { approval: Approval }) {
  const a = approval
  const details = a.details ?? {}
  const headingId = `approval-${a.id}`
  return (
    <article className="card approval" aria-labelledby={headingId} data-approval-id={a.id}>
      <header>
        <h2 id={headingId}>{a.message || KIND_LABEL[a.kind] || a.kind}</h2>
        <span className="badge">{KIND_LABEL[a.kind] ?? a.kind}</span>
      </header>
      <dl className="facts">
        <dt>Run</dt>
        <dd>
          <Link to="/runs/$runId" params={{ runId: a.root_id }} search={{ step: a.root_id === a.run_id ? a.step_id : undefined }}>
            {a.path ?? a.root_id}
          </Link>
        </dd>
        <dt>Step</dt>
        <dd className="mono">{a.step_id}</dd>
        <dt>Started by</dt>
        <dd>{a.run_as ?? '—'}</dd>
        <dt>Waiting since</dt>
        <dd title={formatTime(a.created_at)}>{formatAge(a.created_at)}</dd>
        {a.expires_at != null && (
          <>
            <dt>Expires</dt>
            <dd>
              {formatTime(a.expires_at)} (then {a.on_timeout})
            </dd>
          </>
        )}
        <dt>Who may decide</dt>
        <dd>
          {a.approvers.length ? a.approvers.join(', ') : 'whoever sees the run'}
          {!a.allow_self_approval && ' (not the one who started it)'}
        </dd>
      </dl>
      {a.kind === 'step' && <Decide approval={a} />}
      {a.kind === 'tool_call' && <ToolCallDecision approval={a} details={details} />}
      {a.kind === 'question' && <AnswerQuestion approval={a} />}
      {a.kind === 'budget' && <ExtendBudget approval={a} details={details} />}
      {a.kind === 'reconcile' && <Reconcile approval={a} details={details} />}
    </article>
  )
}

/** Approve or reject, with a comment (for a tool call, the model's feedback). */
function Decide({
  approval,
  editedArguments,
  blocked,
}: {
  approval: Approval
  editedArguments?: Record<string, unknown> | null
  blocked?: boolean
}) {
  const decide = useDecide(approval.id)
  const [comment, setComment] = useState('')
  const id = `comment-${approval.id}`
  return (
    <div className="decision">
      <div className="field">
        <label htmlFor={id}>{approval.kind === 'tool_call' ? 'Feedback for the model (optional)' : 'Comment (optional)'}</label>
        <textarea id={id} rows={2} value={comment} onChange={(e) => setComment(e.target.value)} />
      </div>
      <ErrorBox error={decide.error} />
      <div className="buttons">
        <button
          type="button"
          className="primary"
          disabled={decide.isPending || blocked}
          onClick={() => decide.mutate({ action: 'approve', comment, edited_arguments: editedArguments ?? null })}
        >
          Approve
        </button>
        <button
          type="button"
          className="danger"
          disabled={decide.isPending}
          onClick={() => decide.mutate({ action: 'reject', comment })}
        >
          Reject
        </button>
      </div>
    </div>
  )
}

function ToolCallDecision({ approval, details }: { approval: Approval; details: Record<string, unknown> }) {
  const original = isObject(details.arguments) ? details.arguments : {}
  const schema: JsonSchema = isObject(details.parameters) ? (details.parameters as JsonSchema) : { type: 'object' }
  const [editing, setEditing] = useState(false)
  const [args, setArgs] = useState<unknown>(original)
  const problems = editing ? schemaProblems(schema, args) : []
  return (
    <>
      <p>
        The agent calls <code>{String(details.tool ?? '?')}</code> with:
      </p>
      {editing ? (
        <>
          <SchemaForm schema={schema} value={args} onChange={setArgs} label="Arguments" />
          {problems.length > 0 && (
            <ul className="field-error">
              {problems.map((p) => (
                <li key={p}>{p}</li>
              ))}
            </ul>
          )}
          <button
            type="button"
            className="small link"
            onClick={() => {
              setEditing(false)
              setArgs(original)
            }}
          >
            Keep the model’s arguments
          </button>
        </>
      ) : (
        <>
          <Json value={original} />
          <button type="button" className="small" onClick={() => setEditing(true)}>
            Edit arguments
          </button>
        </>
      )}
      <Decide
        approval={approval}
        editedArguments={editing && isObject(args) ? args : null}
        blocked={problems.length > 0}
      />
    </>
  )
}

function AnswerQuestion({ approval }: { approval: Approval }) {
  const decide = useDecide(approval.id)
  const [text, setText] = useState('')
  const id = `answer-${approval.id}`
  return (
    <form
      className="decision"
      onSubmit={(e) => {
        e.preventDefault()
        decide.mutate({ action: 'answer', text })
      }}
    >
      <div className="field">
        <label htmlFor={id}>Your answer</label>
        <textarea id={id} rows={3} required value={text} onChange={(e) => setText(e.target.value)} />
      </div>
      <ErrorBox error={decide.error} />
      <button type="submit" className="primary" disabled={decide.isPending || text.trim() === ''}>
        Answer
      </button>
    </form>
  )
}

function ExtendBudget({ approval, details }: { approval: Approval; details: Record<string, unknown> }) {
  const decide = useDecide(approval.id)
  const limit = typeof details.limit === 'number' ? details.limit : null
  const [next, setNext] = useState(limit == null ? '' : String(limit * 2))
  const n = Number(next)
  const valid = Number.isInteger(n) && n >= 1 && (limit == null || n > limit)
  const id = `limit-${approval.id}`
  return (
    <div className="decision">
      <p>
        The agent reached its <code>{String(details.bound ?? 'budget')}</code>: used {String(details.used ?? '?')} of{' '}
        {String(details.limit ?? '?')}.
      </p>
      <div className="field inline">
        <label htmlFor={id}>New limit</label>
        <input id={id} type="number" min={(limit ?? 0) + 1} step={1} value={next} onChange={(e) => setNext(e.target.value)} />
      </div>
      <ErrorBox error={decide.error} />
      <div className="buttons">
        <button
          type="button"
          className="primary"
          disabled={decide.isPending || !valid}
          onClick={() => decide.mutate({ action: 'extend', new_limit: n })}
        >
          Extend
        </button>
        <button
          type="button"
          className="danger"
          disabled={decide.isPending}
          onClick={() => decide.mutate({ action: 'extend', new_limit: null })}
        >
          Stop the agent
        </button>
      </div>
    </div>
  )
}

/** A tool call cut short by a crash: did it take effect, and what did it answer? */
function Reconcile({ approval, details }: { approval: Approval; details: Record<string, unknown> }) {
  const decide = useDecide(approval.id)
  const [result, setResult] = useState('')
  const id = `result-${approval.id}`
  return (
    <div className="decision">
      <p>A crash cut this tool call short; say whether it took effect before the agent goes on.</p>
      <Json value={details} />
      <div className="field">
        <label htmlFor={id}>What it answered, if it happened (optional)</label>
        <textarea id={id} rows={2} value={result} onChange={(e) => setResult(e.target.value)} />
      </div>
      <ErrorBox error={decide.error} />
      <div className="buttons">
        <button
          type="button"
          className="primary"
          disabled={decide.isPending}
          onClick={() => decide.mutate({ action: 'reconcile', happened: true, result })}
        >
          It happened
        </button>
        <button
          type="button"
          disabled={decide.isPending}
          onClick={() => decide.mutate({ action: 'reconcile', happened: false })}
        >
          It did not happen
        </button>
      </div>
    </div>
  )
}
