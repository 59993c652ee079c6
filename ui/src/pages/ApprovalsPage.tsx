import { Link, useSearch } from '@tanstack/react-router'
import { usePendingApprovals } from '../api/approvals'
import { ApprovalCard } from '../components/ApprovalCard'
import { ErrorBox } from '../components/ErrorBox'

export function ApprovalsPage() {
  const { run } = useSearch({ from: '/authed/approvals' })
  const approvals = usePendingApprovals(run)
  const list = approvals.data ?? []
  return (
    <section>
      <div className="page-head">
        <h1>Approvals</h1>
        {run && (
          <span className="muted">
            of run <span className="mono">{run}</span> ·{' '}
            <Link to="/approvals" search={{}}>
              show all
            </Link>
          </span>
        )}
      </div>
      <p className="muted">Everything waiting for a decision you may make, oldest first.</p>
      <ErrorBox error={approvals.error} />
      {approvals.isPending ? (
        <p className="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p className="empty">Nothing waits for you.</p>
      ) : (
        <div className="cards">
          {list.map((a) => (
            <ApprovalCard key={a.id} approval={a} />
          ))}
        </div>
      )}
    </section>
  )
}
