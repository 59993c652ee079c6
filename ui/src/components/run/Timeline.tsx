/** A run's steps and waits over time: a bar per step attempt (lighter until its latest start) and per wait
 * (hatched), in a table that reads the same without the bars. */
import type { Approval, Job, RunWait } from '../../api/types'
import { formatDuration, formatTime } from '../../lib/format'
import { timelineBars, timelineRows } from '../../lib/timeline'
import './run.css'

type Props = { runId: string; jobs: readonly Job[]; approvals: readonly Approval[]; waits: readonly RunWait[]; now: number }

export function Timeline({ runId, jobs, approvals, waits, now }: Props) {
  const rows = timelineRows(runId, jobs, approvals, waits, now)
  if (rows.length === 0) return <p className="muted">Nothing has happened yet.</p>
  const { from, bars } = timelineBars(rows)
  return (
    <table className="table compact timeline" aria-label="Timeline of the steps and waits">
      <thead>
        <tr>
          <th scope="col">Step</th>
          <th scope="col">What</th>
          <th scope="col">From</th>
          <th scope="col">Took</th>
          <th scope="col" className="timeline-axis">
            Time (from {formatTime(from)})
          </th>
        </tr>
      </thead>
      <tbody>
        {rows.map((row, i) => {
          const bar = bars[i]!
          const took = `${formatDuration(row.end - row.start)}${row.open ? ' so far' : ''}`
          return (
            <tr key={row.key} data-kind={row.kind} data-testid={`timeline-${row.key}`}>
              <td className="mono">{row.step}</td>
              <td>
                {row.label} <span className="muted small-text">({row.status})</span>
              </td>
              <td className="small-text">{formatTime(row.start)}</td>
              <td className="small-text">{took}</td>
              <td className="timeline-track">
                <div
                  className={`timeline-bar ${row.kind === 'wait' ? 'is-wait' : `status-${row.status}`}`}
                  style={{ left: `${bar.left}%`, width: `${bar.width}%` }}
                  role="img"
                  aria-label={`${row.step} ${row.label}: ${formatTime(row.start)}, ${took}`}
                  title={`${row.label}: ${took}`}
                >
                  {row.kind === 'attempt' && bar.queued > 0 && (
                    <span className="timeline-queued" style={{ width: `${bar.queued}%` }} />
                  )}
                </div>
              </td>
            </tr>
          )
        })}
      </tbody>
    </table>
  )
}
