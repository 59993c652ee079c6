import { Link, useNavigate, useSearch } from '@tanstack/react-router'
import { type FormEvent, useEffect, useState } from 'react'
import { useMe } from '../api/auth'
import { useFolders, useItems, useSearch as useItemSearch } from '../api/items'
import { ErrorBox } from '../components/ErrorBox'
import { NewItemPanel } from '../components/NewItemPanel'
import { formatTime } from '../lib/format'

function ItemLink({ path }: { path: string }) {
  return (
    <Link to="/workspace/$" params={{ _splat: path }} search={{}} className="mono">
      {path}
    </Link>
  )
}

export function WorkspacePage() {
  const { q, prefix } = useSearch({ from: '/authed/workspace' })
  const navigate = useNavigate({ from: '/workspace' })
  const [query, setQuery] = useState(q ?? '')
  useEffect(() => setQuery(q ?? ''), [q])
  const me = useMe()
  const folders = useFolders()

  const submit = (e: FormEvent) => {
    e.preventDefault()
    void navigate({ search: (s) => ({ ...s, q: query.trim() || undefined }) })
  }
  const home = me.data ? `u/${me.data.user}/` : null

  return (
    <section>
      <div className="page-head">
        <h1>Workspace</h1>
      </div>
      <NewItemPanel folders={folders.data?.map((f) => f.name) ?? []} prefix={prefix ?? ''} />
      <form role="search" className="filters" onSubmit={submit} aria-label="Search the workspace">
        <div className="field inline grow">
          <label htmlFor="ws-search">Search</label>
          <input
            id="ws-search"
            type="search"
            placeholder="Paths, summaries, descriptions"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
          />
        </div>
        <button type="submit" className="small">
          Search
        </button>
      </form>
      <div className="workspace">
        <nav className="folders" aria-label="Folders">
          <h2>Folders</h2>
          <ErrorBox error={folders.error} />
          <ul>
            <li>
              <Link to="/workspace" search={{}} activeOptions={{ includeSearch: true }} activeProps={{ className: 'active' }}>
                Everything
              </Link>
            </li>
            {home && (
              <li>
                <Link to="/workspace" search={{ prefix: home }} activeOptions={{ includeSearch: true }} activeProps={{ className: 'active' }}>
                  {home} <span className="muted">(yours)</span>
                </Link>
              </li>
            )}
            {folders.data?.map((f) => (
              <li key={f.name}>
                <Link
                  to="/workspace"
                  search={{ prefix: `f/${f.name}/` }}
                  activeOptions={{ includeSearch: true }}
                  activeProps={{ className: 'active' }}
                  title={f.summary || undefined}
                >
                  f/{f.name}/
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <div className="grow">{q ? <SearchResults q={q} /> : <ItemList prefix={prefix ?? ''} />}</div>
      </div>
    </section>
  )
}

function SearchResults({ q }: { q: string }) {
  const hits = useItemSearch(q)
  return (
    <>
      <h2>Results for “{q}”</h2>
      <ErrorBox error={hits.error} />
      {hits.data?.length === 0 && <p className="muted">Nothing matches.</p>}
      <table className="table">
        <tbody>
          {hits.data?.map((hit) => (
            <tr key={hit.path}>
              <td>
                <ItemLink path={hit.path} />
              </td>
              <td>{hit.kind}</td>
              <td>{hit.summary}</td>
              <td className="muted">{Math.round(hit.score)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  )
}

function ItemList({ prefix }: { prefix: string }) {
  const items = useItems(prefix)
  const rows = items.data?.pages.flat() ?? []
  return (
    <>
      <h2>{prefix ? <span className="mono">{prefix}</span> : 'All items'}</h2>
      <ErrorBox error={items.error} />
      {items.isPending ? (
        <p className="muted">Loading…</p>
      ) : rows.length === 0 ? (
        <p className="muted">No items here.</p>
      ) : (
        <table className="table">
          <thead>
            <tr>
              <th>Path</th>
              <th>Kind</th>
              <th>Summary</th>
              <th>Version</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((item) => (
              <tr key={item.path}>
                <td>
                  <ItemLink path={item.path} />
                  {item.secret && <span className="badge">secret</span>}
                </td>
                <td>{item.kind}</td>
                <td>{item.summary}</td>
                <td>{item.version || '—'}</td>
                <td>
                  {formatTime(item.updated_at)} <span className="muted">by {item.updated_by}</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {items.hasNextPage && (
        <button type="button" className="load-more" disabled={items.isFetchingNextPage} onClick={() => void items.fetchNextPage()}>
          Load more
        </button>
      )}
    </>
  )
}
