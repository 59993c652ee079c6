/** A change the copilot saved as the draft, as a diff; Accept loads it, Reject puts the previous text back. */
import { DiffView } from '../DiffView'
import { ErrorBox } from '../ErrorBox'
import type { Proposal } from './proposals'

export type Decision = 'accepted' | 'rejected'

type Props = {
  proposal: Proposal
  /** Whether it may still be accepted or rejected (the latest proposal, made while the editor was open). */
  open: boolean
  decided?: Decision
  busy: boolean
  error: unknown
  onAccept: () => void
  onReject: () => void
}

export function ProposedChange({ proposal, open, decided, busy, error, onAccept, onReject }: Props) {
  const headingId = `cp-change-${proposal.key}`
  return (
    <section className="cp-change" aria-labelledby={headingId}>
      <h3 id={headingId}>Proposed change{proposal.path && <> to <span className="mono">{proposal.path}</span></>}</h3>
      {proposal.diff === '(no change)' ? (
        <p className="muted">No change.</p>
      ) : (
        <DiffView diff={proposal.diff} oldLabel="before" newLabel="your draft" />
      )}
      {decided === 'accepted' && <p className="muted">Accepted: the editor shows it.</p>}
      {decided === 'rejected' && <p className="muted">Rejected: your previous text is the draft again.</p>}
      {open && !decided && (
        <div className="buttons">
          <button type="button" className="primary small" onClick={onAccept} disabled={busy}>
            Accept
          </button>
          <button type="button" className="small" onClick={onReject} disabled={busy}>
            Reject
          </button>
        </div>
      )}
      <ErrorBox error={error} title="Not applied" />
    </section>
  )
}
