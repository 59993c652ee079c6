/** A schedule's history of fires: when, what became of it, its run (and handler run), how that ended. */
import { Link } from '@tanstack/react-router'
import type { Fire } from '../../api/triggers'
import { StatusBadge } from '../StatusBadge'
import { localTime, toSeconds } from './time'

export function FiresTable({ fires, path }: { fires: readonly Fire[]; path: string }) {
  if (fires.length === 0) return <p className="muted">It has not fired yet.</p>
  return (
    <table className="table compact" aria-label={`Fires of ${path}`}>
      <thead>
        <tr>
          <th>Due at</th>
          <th>Status</th>
          <th>Run</th>
          <th>Outcome</th>
          <th>Error</th>
        </tr>
      </thead>
      <tbody>
        {fires.map((fire) => {
          const at = toSeconds(fire.fire_at)
          return (
            <tr key={String(fire.fire_at)} data-fire-status={fire.status}>
              <td>{at === null ? String(fire.fire_at) : localTime(at)}</td>
              <td>
                <StatusBadge status={fire.status} />
              </td>
              <td>
                {fire.run_id ? (
                  <Link to="/runs/$runId" params={{ runId: fire.run_id }} search={{}} className="mono">
                    {fire.run_id}
                  </Link>
                ) : (
                  <span className="muted">—</span>
                )}
                {fire.handler_id && (
                  <>
                    {' '}
                    (handler:{' '}
                    <Link to="/runs/$runId" params={{ runId: fire.handler_id }} search={{}} className="mono">
                      {fire.handler_id}
                    </Link>
                    )
                  </>
                )}
              </td>
              <td>{fire.outcome ? <StatusBadge status={fire.outcome} /> : <span className="muted">—</span>}</td>
              <td>{fire.error ?? <span className="muted">—</span>}</td>
            </tr>
          )
        })}
      </tbody>
    </table>
  )
}
