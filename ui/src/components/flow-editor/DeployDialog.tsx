/**
 * Confirm deploying the caller's draft of a flow: a message, and each linked agent the
 * caller has a draft of, checked to deploy along (unchecked: its draft is kept, and the
 * flow runs the agent as deployed).
 */
import { useEffect, useId, useRef, useState } from 'react'
import { useDeploy, useLinkedDrafts } from '../../api/drafts'
import type { Item } from '../../api/types'
import { ErrorBox } from '../ErrorBox'

export function DeployDialog({
  path,
  onClose,
  onDeployed,
  prepare,
}: {
  path: string
  onClose: () => void
  onDeployed: (item: Item) => void
  /** Run before deploying (the editor saves what it has not saved yet); false stops. */
  prepare?: () => Promise<boolean>
}) {
  const titleId = useId()
  const messageId = useId()
  const linked = useLinkedDrafts(path)
  const deploy = useDeploy(path)
  const [message, setMessage] = useState('')
  const [left, setLeft] = useState<ReadonlySet<string>>(new Set())
  const first = useRef<HTMLInputElement>(null)
  useEffect(() => first.current?.focus(), [])
  const agents = linked.data?.agents ?? []
  const toggle = (agent: string, on: boolean) => {
    const next = new Set(left)
    if (on) next.delete(agent)
    else next.add(agent)
    setLeft(next)
  }
  return (
    <div className="fe-backdrop">
      <div
        className="fe-dialog card"
        role="dialog"
        aria-modal="true"
        aria-labelledby={titleId}
        onKeyDown={(e) => {
          if (e.key === 'Escape' && !deploy.isPending) onClose()
        }}
      >
        <h2 id={titleId}>
          Deploy <span className="mono">{path}</span>
        </h2>
        <form
          onSubmit={async (e) => {
            e.preventDefault()
            if (prepare && !(await prepare())) return
            deploy.mutate(
              { message, agents: agents.filter((a) => !left.has(a)) },
              { onSuccess: (item) => onDeployed(item) },
            )
          }}
        >
          <div className="field">
            <label htmlFor={messageId}>What changed (optional)</label>
            <input id={messageId} ref={first} value={message} onChange={(e) => setMessage(e.target.value)} />
          </div>
          <ErrorBox error={linked.error} title="Could not list the linked agents' drafts" />
          {linked.isPending && <p className="muted">Looking for drafts of the linked agents…</p>}
          {agents.length > 0 && (
            <fieldset>
              <legend>Deploy your drafts of the agents it links too</legend>
              {agents.map((agent) => (
                <div className="field field-check" key={agent}>
                  <input
                    id={`${messageId}-${agent}`}
                    type="checkbox"
                    checked={!left.has(agent)}
                    onChange={(e) => toggle(agent, e.target.checked)}
                  />
                  <label htmlFor={`${messageId}-${agent}`} className="mono">
                    {agent}
                  </label>
                </div>
              ))}
              <small className="field-help">
                An agent left out keeps your draft; the flow runs it as deployed, and so do the other flows linking it.
              </small>
            </fieldset>
          )}
          {linked.data && agents.length === 0 && <p className="muted">No drafts of the agents it links.</p>}
          <ErrorBox error={deploy.error} title="Not deployed" />
          <div className="buttons">
            <button type="submit" className="primary" disabled={deploy.isPending || linked.isPending}>
              {deploy.isPending ? 'Deploying…' : 'Deploy'}
            </button>
            <button type="button" onClick={onClose} disabled={deploy.isPending}>
              Cancel
            </button>
          </div>
        </form>
      </div>
    </div>
  )
}
