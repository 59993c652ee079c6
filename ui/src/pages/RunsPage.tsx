import { Link, useNavigate, useSearch } from '@tanstack/react-router'
import { type FormEvent, useEffect, useState } from 'react'
import { type FeedState, pollFor, useRunFeed } from '../api/runFeed'
import { useRunPages } from '../api/runs'
import type { RunItem, RunStatus } from '../api/types'
import { ErrorBox } from '../components/ErrorBox'
import { StatusBadge } from '../components/StatusBadge'
import { elapsed, formatCost, formatDuration, formatTime } from '../lib/format'
import { type RunsSearch, filtersOf } from '../lib/runFilters'

const STATUSES: RunStatus[] = ['queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled']

export function RunsPage() {
  const search: RunsSearch = useSearch({ from: '/authed/runs' })
  const navigate = useNavigate({ from: '/runs' })
  const [path, setPath] = useState(search.path ?? '')
  const [folder, setFolder] = useState(search.folder ?? '')
  const [by, setBy] = useState(search.by ?? '')
  const [from, setFrom] = useState(search.from ?? '')
  const [to, setTo] = useState(search.to ?? '')
  useEffect(() => setPath(search.path ?? ''), [search.path])
  useEffect(() => setFolder(search.folder ?? ''), [search.folder])
  useEffect(() => setBy(search.by ?? ''), [search.by])
  useEffect(() => setFrom(search.from ?? ''), [search.from])
  useEffect(() => setTo(search.to ?? ''), [search.to])
  const feed = useRunFeed()
  const runs = useRunPages(filtersOf(search), pollFor(feed))
  const rows = runs.data?.pages.flatMap((p) => p.runs) ?? []
  const filtered = Boolean(search.status || search.path || search.folder || search.by || search.from || search.to)

  const applyPath = (e: FormEvent) => {
    e.preventDefault()
    void navigate({
      search: (s) => ({
        ...s,
        path: path.trim() || undefined,
        folder: folder.trim() || undefined,
        by: by.trim() || undefined,
        from: from || undefined,
        to: to || undefined,
      }),
    })
  }

  return (
    <section>
      <div className="page-head">
        <h1>Runs</h1>
        <span className="muted small-text" aria-live="polite">
          {runs.isFetching ? 'Refreshing…' : 'Up to date'}
        </span>
        <FeedStatus state={feed} />
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
        <div className="field inline">
          <label htmlFor="runs-folder">Folder</label>
          <input
            id="runs-folder"
            placeholder="f/team/"
            pattern="[a-z]/[^/]+(/.*)?"
            title="A folder, like f/team/ or u/max/"
            value={folder}
            onChange={(e) => setFolder(e.target.value)}
          />
        </div>
        <div className="field inline">
          <label htmlFor="runs-by">Started by</label>
          <input id="runs-by" placeholder="user" value={by} onChange={(e) => setBy(e.target.value)} />
        </div>
        <div className="field inline">
          <label htmlFor="runs-from">From</label>
          <input id="runs-from" type="date" value={from} onChange={(e) => setFrom(e.target.value)} />
        </div>
        <div className="field inline">
          <label htmlFor="runs-to">To</label>
          <input id="runs-to" type="date" value={to} onChange={(e) => setTo(e.target.value)} />
        </div>
        <button type="submit" className="small">
          Filter
        </button>
        {filtered && (
          <button type="button" className="small link" onClick={() => void navigate({ search: {} })}>
            Clear filters
          </button>
        )}
      </form>
      <ErrorBox error={runs.error} />
      {runs.isPending ? (
        <p className="muted">Loading runs…</p>
      ) : rows.length === 0 ? (
        <p className="muted">No runs{filtered ? ' match these filters' : ' yet'}.</p>
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
              <th>Cost</th>
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

function FeedStatus({ state }: { state: FeedState }) {
  if (state === 'live')
    return (
      <span className="badge status-succeeded" role="status" title="The list updates as runs change">
        Live
      </span>
    )
  if (state === 'down')
    return (
      <span className="muted small-text" role="status" title="The list is read again every minute">
        Reconnecting…
      </span>
    )
  return null
}

function RunRow({ run }: { run: RunItem }) {
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
        {run.waiting_for && <div className="muted small-text">{run.waiting_for}</div>}
      </td>
      <td>{run.run_as ?? '—'}</td>
      <td>{formatTime(run.created_at)}</td>
      <td>{formatDuration(elapsed(run.created_at, run.finished_at))}</td>
      <td>{run.version ? `v${run.version}` : run.draft ? 'draft' : '—'}</td>
      <td title={costTitle(run)}>
        {formatCost(run.cost_usd)}
        {run.cost_usd != null && (run.unpriced_calls ?? 0) > 0 && '+'}
      </td>
    </tr>
  )
}

function costTitle(run: RunItem): string | undefined {
  const calls = run.model_calls ?? 0
  if (calls === 0) return 'No model calls'
  const unpriced = run.unpriced_calls ?? 0
  return `${calls} model call${calls === 1 ? '' : 's'}${unpriced ? `, ${unpriced} not priced (left out)` : ''}`
}
