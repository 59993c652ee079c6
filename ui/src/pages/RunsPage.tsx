import { Link, useNavigate, useSearch } from '@tanstack/react-router'
import { type FormEvent, useEffect, useState } from 'react'
import { useRunPages } from '../api/runs'
import type { Run, RunStatus } from '../api/types'
import { ErrorBox } from '../components/ErrorBox'
import { StatusBadge } from '../components/StatusBadge'
import { elapsed, formatDuration, formatTime } from '../lib/format'

const STATUSES: RunStatus[] = ['queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled']

export function RunsPage() {
  const search = useSearch({ from: '/authed/runs' })
  const navigate = useNavigate({ from: '/runs' })
  const [path, setPath] = useState(search.path ?? '')
  useEffect(() => setPath(search.path ?? ''), [search.path])
  const runs = useRunPages({ status: search.status, path: search.path })
  const rows = runs.data?.pages.flatMap((p) => p.runs) ?? []

  const applyPath = (e: FormEvent) => {
    e.preventDefault()
    void navigate({ search: (s) => ({ ...s, path: path.trim() || undefined }) })
  }

  return (
    <section>
      <div className="page-head">
        <h1>Runs</h1>
        <span className="muted small-text" aria-live="polite">
          {runs.isFetching ? 'Refreshing…' : 'Up to date'}
        </span>
      </div>
      <form className="filters" onSubmit={applyPath} role="search" aria-label="Filter runs">
        <div className="field inline">
          <label htmlFor="runs-status">Status</label>
          <select
            id="runs-status"
            value={search.status ?? ''}
            onChange={(e) =>
              void navigate({ search: (s) => ({ ...s, status: (e.target.value || undefined) as RunStatus | undefined }) })
            }
          >
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div className="field inline">
          <label htmlFor="runs-path">Flow path</label>
          <input id="runs-path" placeholder="f/team/flow" value={path} onChange={(e) => setPath(e.target.value)} />
        </div>
        <button type="submit" className="small">
          Filter
        </button>
        {(search.status || search.path) && (
          <button type="button" className="small link" onClick={() => void navigate({ search: {} })}>
            Clear filters
          </button>
        )}
      </form>
      <ErrorBox error={runs.error} />
      {runs.isPending ? (
        <p className="muted">Loading runs…</p>
      ) : rows.length === 0 ? (
        <p className="muted">No runs{search.status || search.path ? ' match these filters' : ' yet'}.</p>
      ) : (
        <table className="table runs">
          <thead>
            <tr>
              <th>Flow</th>
              <th>Status</th>
              <th>Started by</th>
              <th>Started at</th>
              <th>Duration</th>
              <th>Version</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((run) => (
              <RunRow key={run.id} run={run} />
            ))}
          </tbody>
        </table>
      )}
      {runs.hasNextPage && (
        <button
          type="button"
          className="load-more"
          disabled={runs.isFetchingNextPage}
          onClick={() => void runs.fetchNextPage()}
        >
          {runs.isFetchingNextPage ? 'Loading…' : 'Load more'}
        </button>
      )}
    </section>
  )
}

function RunRow({ run }: { run: Run }) {
  return (
    <tr data-run-id={run.id}>
      <td>
        <Link to="/runs/$runId" params={{ runId: run.id }} search={{}}>
          {run.path ?? run.flow}
        </Link>
        {run.draft && <span className="badge">draft</span>}
      </td>
      <td>
        <StatusBadge status={run.status} />
      </td>
      <td>{run.run_as ?? '—'}</td>
      <td>{formatTime(run.created_at)}</td>
      <td>{formatDuration(elapsed(run.created_at, run.finished_at))}</td>
      <td>{run.version ? `v${run.version}` : run.draft ? 'draft' : '—'}</td>
    </tr>
  )
}
