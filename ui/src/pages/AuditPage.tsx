/** The workspace's audit log (workspace admins), filtered by actor, action and path, oldest first. */
import { type FormEvent, useState } from 'react'
import { useMe } from '../api/auth'
import { type AuditFilters, useAudit } from '../api/people'
import { AuditTable } from '../components/admin/AuditTable'
import { isRefusal, Refusal } from '../components/admin/Refusal'
import '../components/admin/admin.css'
import { ErrorBox } from '../components/ErrorBox'

function clean(filters: AuditFilters): AuditFilters {
  const out: AuditFilters = {}
  for (const key of ['actor', 'action', 'path'] as const) {
    const value = filters[key]?.trim()
    if (value) out[key] = value
  }
  return out
}

export function AuditPage() {
  const me = useMe()
  const admin = me.data?.is_admin === true
  const [draft, setDraft] = useState<AuditFilters>({})
  const [filters, setFilters] = useState<AuditFilters>({})
  const audit = useAudit(filters, admin)
  const rows = audit.data?.pages.flat() ?? []
  const submit = (e: FormEvent) => {
    e.preventDefault()
    setFilters(clean(draft))
  }
  const field = (key: keyof AuditFilters, label: string, placeholder: string) => (
    <div className="field inline">
      <label htmlFor={`audit-${key}`}>{label}</label>
      <input
        id={`audit-${key}`}
        placeholder={placeholder}
        value={draft[key] ?? ''}
        onChange={(e) => setDraft({ ...draft, [key]: e.target.value })}
      />
    </div>
  )
  return (
    <section>
      <div className="page-head">
        <h1>Audit log</h1>
      </div>
      {me.data && (!admin || isRefusal(audit.error)) ? (
        <Refusal title="Only workspace admins read the audit log." error={audit.error}>
          Ask a workspace admin if you need to know who changed what.
        </Refusal>
      ) : (
        <>
          <form className="filters" aria-label="Filter the audit log" onSubmit={submit}>
            {field('actor', 'Actor', 'ada')}
            {field('action', 'Action', 'item.write')}
            {field('path', 'Path starts with', 'f/team/')}
            <button type="submit" className="small">
              Filter
            </button>
          </form>
          <ErrorBox error={audit.error} />
          {audit.isPending && <p className="muted">Loading…</p>}
          {audit.isSuccess && rows.length === 0 && <p className="muted">Nothing in the log matches.</p>}
          {rows.length > 0 && (
            <>
              <p className="muted small-text">
                {rows.length === 1 ? '1 row' : `${rows.length} rows`}, oldest first{audit.hasNextPage ? '; more below' : ''}.
              </p>
              <AuditTable rows={rows} />
            </>
          )}
          {audit.hasNextPage && (
            <button type="button" className="load-more" disabled={audit.isFetchingNextPage} onClick={() => void audit.fetchNextPage()}>
              Load more
            </button>
          )}
        </>
      )}
    </section>
  )
}
