/** A linked agent step's read-only card: the agent's brain and tools, with Edit and Unlink. */
import { Link } from '@tanstack/react-router'
import { useId } from 'react'
import { agentTools } from '../../lib/flowSchemaTools'
import { ErrorBox } from '../ErrorBox'
import type { LinkedAgent } from './useLinkedAgents'

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const EXPLAIN =
  'The model, system prompt and tools come from the agent: every flow linking it runs its changes. ' +
  "This step keeps only its own inputs (the user message, which tools it enables) and its tools' input overrides below."

export function LinkedAgentCard({
  link,
  agent,
  error,
  flowPath,
  onUnlink,
  unlinking,
}: {
  link: string
  agent: LinkedAgent | undefined
  error: unknown
  flowPath: string
  onUnlink: () => void
  unlinking: boolean
}) {
  const titleId = useId()
  const path = link.split('@')[0]!
  const brain = isObject(agent?.value) ? agent.value : {}
  const tools = agentTools(agent?.value)
  const memory = isObject(brain.memory) ? String(brain.memory.kind ?? '') : null
  return (
    <section className="card fe-linked" aria-labelledby={titleId}>
      <header>
        <h3 id={titleId}>
          Linked to <span className="mono">{link}</span>
        </h3>
        {agent?.draft && (
          <span className="badge status-waiting" title="Your draft of the agent: what a run of this draft uses">
            Draft
          </span>
        )}
        {agent && !agent.draft && agent.version !== null && <span className="badge">v{agent.version}</span>}
      </header>
      <p className="field-help" title={EXPLAIN}>
        {EXPLAIN}
      </p>
      <ErrorBox error={error} title={`Could not read ${path}`} />
      {agent && (
        <>
          <dl className="facts">
            <dt>Model</dt>
            <dd className="mono">{String(brain.model ?? '') || '—'}</dd>
            {brain.max_iterations != null && (
              <>
                <dt>Model calls at most</dt>
                <dd>{String(brain.max_iterations)}</dd>
              </>
            )}
            {brain.temperature != null && (
              <>
                <dt>Temperature</dt>
                <dd>{String(brain.temperature)}</dd>
              </>
            )}
            {memory && (
              <>
                <dt>Memory</dt>
                <dd>{memory}</dd>
              </>
            )}
          </dl>
          <h4>System prompt</h4>
          <pre className="code fe-system">{String(brain.system ?? '') || '(none)'}</pre>
          <h4>Tools</h4>
          {tools.length === 0 ? (
            <p className="muted">No tools.</p>
          ) : (
            <ul className="fe-tool-list">
              {tools.map((t) => (
                <li key={t.name}>
                  <span className="mono">{t.name}</span> <span className="muted">{t.kind}</span>
                  {t.requiresApproval && <span className="badge status-waiting">needs approval</span>}
                  {t.description && <span className="muted"> — {t.description}</span>}
                </li>
              ))}
            </ul>
          )}
        </>
      )}
      <div className="buttons">
        <Link to="/agents/$" params={{ _splat: path }} search={{ from: flowPath }} className="button-link">
          Edit the agent
        </Link>
        <button type="button" onClick={onUnlink} disabled={unlinking} title="Copy the agent's configuration into this step, as a one-off">
          {unlinking ? 'Unlinking…' : 'Unlink'}
        </button>
      </div>
    </section>
  )
}
