/** Rows of the audit log: when, who, what, on which path, and the details. */
import type { AuditRow } from '../../api/people'
import { formatTime } from '../../lib/format'

export function AuditTable({ rows }: { rows: AuditRow[] }) {
  return (
    <table className="table compact" aria-label="Audit log">
      <thead>
        <tr>
          <th>#</th>
          <th>At</th>
          <th>Actor</th>
          <th>Action</th>
          <th>Path</th>
          <th>Details</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={r.id} data-audit-id={r.id} data-action={r.action}>
            <td className="muted">{r.id}</td>
            <td>{formatTime(r.at)}</td>
            <td className="mono">{r.actor}</td>
            <td className="mono">{r.action}</td>
            <td className="mono">{r.path ?? <span className="muted">—</span>}</td>
            <td className="audit-details">{Object.keys(r.details).length ? JSON.stringify(r.details) : ''}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}
