/** A test run the copilot asks for, waiting for the user's go-ahead (a `tool_call` approval). */
import { useDecide } from '../../api/approvals'
import type { Approval } from '../../api/types'
import { ErrorBox } from '../ErrorBox'
import { Json } from '../Json'

export function TestRunApproval({ approval }: { approval: Approval }) {
  const decide = useDecide(approval.id)
  const details = approval.details ?? {}
  const tool = String(details.tool ?? 'a tool')
  const headingId = `cp-approval-${approval.id}`
  return (
    <section className="cp-approval" aria-labelledby={headingId} data-approval-id={approval.id}>
      <h3 id={headingId}>
        Run <code>{tool}</code>?
      </h3>
      <p className="muted">A test run has effects: the copilot waits for you.</p>
      {details.arguments != null && <Json value={details.arguments} label={`The arguments of ${tool}`} />}
      <div className="buttons">
        <button
          type="button"
          className="primary small"
          disabled={decide.isPending}
          onClick={() => decide.mutate({ action: 'approve' })}
        >
          Approve
        </button>
        <button
          type="button"
          className="small"
          disabled={decide.isPending}
          onClick={() => decide.mutate({ action: 'reject', comment: 'The user refused this test run.' })}
        >
          Reject
        </button>
      </div>
      <ErrorBox error={decide.error} title="Not decided" />
    </section>
  )
}
