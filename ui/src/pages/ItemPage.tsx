import { Link, useNavigate, useParams, useSearch } from '@tanstack/react-router'
import { lazy, Suspense, useEffect, useState } from 'react'
import { useDiff, useHistory, useItem, useRestore } from '../api/items'
import type { Item } from '../api/types'
import { DiffView } from '../components/DiffView'
import { ErrorBox } from '../components/ErrorBox'
import { HistoryDrawer } from '../components/HistoryDrawer'
import { InputSchema } from '../components/InputSchema'
import { StartRun } from '../components/StartRun'
import { ScheduleView } from '../components/triggers/ScheduleView'
import { TriggersSection } from '../components/triggers/TriggersSection'
import { editable } from '../lib/editable'
import { editsValue } from '../components/value/write'
import { Json } from '../components/Json'
import { formatTime } from '../lib/format'

// CodeMirror is large: load it when someone edits.
const ItemEditor = lazy(() => import('../components/ItemEditor'))

function Value({ item }: { item: Item }) {
  if (item.secret) return <p className="muted">A secret: its value is never shown.</p>
  if (typeof item.value === 'string') return <pre className="code">{item.value}</pre>
  return <Json value={item.value} />
}

export function ItemPage() {
  const { _splat } = useParams({ from: '/authed/workspace/$' })
  const path = _splat ?? ''
  const { version } = useSearch({ from: '/authed/workspace/$' })
  const navigate = useNavigate({ from: '/workspace/$' })
  const item = useItem(path, version)
  const current = useItem(path)
  const history = useHistory(path)
  const restore = useRestore(path)
  const latest = current.data?.version ?? null
  const [oldV, setOldV] = useState<number | null>(null)
  const [newV, setNewV] = useState<number | null>(null)
  const [editing, setEditing] = useState(false)
  const [historyOpen, setHistoryOpen] = useState(false)
  // Start by comparing the latest version with the one before it.
  useEffect(() => {
    const versions = history.data?.map((v) => v.version) ?? []
    if (oldV === null && versions.length >= 2) {
      setNewV(versions[0]!)
      setOldV(versions[1]!)
    }
  }, [history.data, oldV])
  const diff = useDiff(path, oldV, newV === latest ? null : newV)
  const folder = path.includes('/') ? path.slice(0, path.lastIndexOf('/') + 1) : ''

  if (item.isPending) return <p className="muted">Loading…</p>
  if (item.error) return <ErrorBox error={item.error} />
  const it = item.data
  return (
    <section className="item-page">
      <p className="crumbs">
        <Link to="/workspace" search={{}}>
          Workspace
        </Link>{' '}
        /{' '}
        <Link to="/workspace" search={{ prefix: folder }}>
          {folder}
        </Link>
      </p>
      <div className="page-head">
        <h1 className="mono">{it.path}</h1>
        <span className="badge">{it.kind}</span>
        {it.deleted && <span className="badge status-failed">deleted</span>}
        {it.resource_type === 'ai_agent' && !it.deleted && (
          <Link to="/agents/$" params={{ _splat: it.path }} search={{}}>
            Open in the agent editor
          </Link>
        )}
        {it.kind === 'flow' && !it.deleted && (
          <Link to="/edit/$" params={{ _splat: it.path }}>
            Open in the flow editor
          </Link>
        )}
      </div>
      {it.summary && <p className="lead">{it.summary}</p>}
      {it.description && <p>{it.description}</p>}
      <dl className="facts">
        <dt>Version</dt>
        <dd>
          {it.version || '—'}
          {version && latest !== null && version !== latest && (
            <>
              {' '}
              (an old one;{' '}
              <Link to="/workspace/$" params={{ _splat: path }} search={{}}>
                see the current
              </Link>
              )
            </>
          )}
        </dd>
        <dt>Updated</dt>
        <dd>
          {formatTime(it.updated_at)} by {it.updated_by}
        </dd>
        {it.resource_type && (
          <>
            <dt>Resource type</dt>
            <dd>{it.resource_type}</dd>
          </>
        )}
      </dl>
      {it.input_schema && (
        <section>
          <h2>Inputs</h2>
          <InputSchema schema={it.input_schema} path={it.path} />
        </section>
      )}
      {it.kind === 'flow' && !it.deleted && (
        <section>
          <h2>Run it</h2>
          <p>
            <Link to="/runs" search={{ path: it.path }}>
              Runs of this flow
            </Link>
          </p>
          {!version && <StartRun path={it.path} document={it.value} />}
        </section>
      )}
      {(it.kind === 'flow' || it.kind === 'script') && !it.deleted && !version && (
        <TriggersSection path={it.path} kind={it.kind} inputSchema={it.input_schema} />
      )}
      {it.kind === 'schedule' && !it.deleted && !version && <ScheduleView path={it.path} />}
      <div className="section-head">
        <h2>{it.kind === 'script' ? 'Code' : it.kind === 'flow' ? 'Flow' : 'Value'}</h2>
        {!editing && !version && (editable(it) || editsValue(it)) && (
          <button type="button" className="small" onClick={() => setEditing(true)}>
            {it.secret ? 'Replace the secret' : 'Edit'}
          </button>
        )}
      </div>
      {editing && !version ? (
        <Suspense fallback={<p className="muted">Loading the editor…</p>}>
          <ItemEditor
            item={it}
            onDone={() => {
              setEditing(false)
              setOldV(null)
            }}
          />
        </Suspense>
      ) : (
        <Value item={it} />
      )}

      <div className="section-head">
        <h2>Versions</h2>
        {history.data && history.data.length > 0 && (
          <button type="button" className="small" onClick={() => setHistoryOpen(true)}>
            History…
          </button>
        )}
      </div>
      {historyOpen && <HistoryDrawer path={path} onClose={() => setHistoryOpen(false)} />}
      <ErrorBox error={history.error ?? restore.error} />
      {history.data && history.data.length === 0 && <p className="muted">This kind of item keeps no versions.</p>}
      {history.data && history.data.length > 0 && (
        <table className="table compact versions">
          <thead>
            <tr>
              <th>Version</th>
              <th>Old</th>
              <th>New</th>
              <th>Message</th>
              <th>By</th>
              <th>At</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {history.data.map((v) => (
              <tr key={v.version}>
                <td>
                  <Link to="/workspace/$" params={{ _splat: path }} search={{ version: v.version }}>
                    v{v.version}
                  </Link>
                  {v.version === latest && <span className="badge">current</span>}
                </td>
                <td>
                  <input
                    type="radio"
                    name="old-version"
                    aria-label={`Compare from version ${v.version}`}
                    checked={oldV === v.version}
                    onChange={() => setOldV(v.version)}
                  />
                </td>
                <td>
                  <input
                    type="radio"
                    name="new-version"
                    aria-label={`Compare to version ${v.version}`}
                    checked={newV === v.version}
                    onChange={() => setNewV(v.version)}
                  />
                </td>
                <td>{v.message || <span className="muted">—</span>}</td>
                <td>{v.created_by}</td>
                <td>{formatTime(v.created_at)}</td>
                <td>
                  {v.version !== latest && (
                    <button
                      type="button"
                      className="small"
                      disabled={restore.isPending}
                      onClick={() => {
                        if (window.confirm(`Write version ${v.version} of ${path} forward as a new version?`))
                          restore.mutate(v.version, { onSuccess: () => void navigate({ search: {} }) })
                      }}
                    >
                      Restore v{v.version}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {oldV !== null && newV !== null && (
        <section>
          <h3>
            Changes from v{oldV} to v{newV}
          </h3>
          <ErrorBox error={diff.error} />
          {diff.data && <DiffView diff={diff.data.diff} oldLabel={`v${oldV}`} newLabel={`v${newV}`} />}
        </section>
      )}
    </section>
  )
}
