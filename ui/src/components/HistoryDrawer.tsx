/**
 * An item's versions in a drawer (a modal dialog): compare any two, restore one
 * (written forward as a new version: history stays append-only), or clear the
 * past versions (the current one stays), each after a confirmation.
 */
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { Link } from '@tanstack/react-router'
import { type KeyboardEvent, useEffect, useId, useRef, useState } from 'react'
import { api, unwrap } from '../api/client'
import { useDiff, useHistory, useRestore } from '../api/items'
import { formatTime } from '../lib/format'
import { ConfirmAction } from './ConfirmAction'
import { DiffView } from './DiffView'
import { ErrorBox } from './ErrorBox'
import './HistoryDrawer.css'

type Props = { path: string; onClose: () => void }

function useClearHistory(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/history/{path}', { params: { path: { path } } })),
    onSuccess: () => client.invalidateQueries({ queryKey: ['items', path] }),
  })
}

/**
 * An agent's key-by-key comparison opens with a `---`/`+++` header naming the two
 * versions (the caption names them too); without hunks, DiffView would count it as a change.
 */
export function withoutHeader(diff: string): string {
  const lines = diff.split('\n')
  if (lines.some((line) => line.startsWith('@@'))) return diff
  if (lines[0]?.startsWith('--- ') && lines[1]?.startsWith('+++ ')) return lines.slice(2).join('\n')
  return diff
}

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]), select, textarea, [tabindex]:not([tabindex="-1"])'

/** Keep Tab inside the dialog (it is modal). */
function trapTab(event: KeyboardEvent<HTMLElement>) {
  if (event.key !== 'Tab') return
  const items = Array.from(event.currentTarget.querySelectorAll<HTMLElement>(FOCUSABLE))
  const first = items[0]
  const last = items[items.length - 1]
  if (!first || !last) return
  if (event.shiftKey && document.activeElement === first) {
    event.preventDefault()
    last.focus()
  } else if (!event.shiftKey && document.activeElement === last) {
    event.preventDefault()
    first.focus()
  }
}

export function HistoryDrawer({ path, onClose }: Props) {
  const titleId = useId()
  const dialog = useRef<HTMLDivElement>(null)
  const history = useHistory(path)
  const restore = useRestore(path)
  const clear = useClearHistory(path)
  const [pair, setPair] = useState<{ old: number; new: number } | null>(null)
  const [done, setDone] = useState<string | null>(null)
  const versions = history.data ?? []
  const latest = versions[0]?.version ?? null
  // Until two are chosen: the newest against the one before it.
  const chosen = pair ?? (versions.length >= 2 ? { old: versions[1]!.version, new: versions[0]!.version } : null)
  const diff = useDiff(path, chosen?.old ?? null, chosen?.new ?? null)

  // Focus moves into the dialog, and back where it was when it closes.
  useEffect(() => {
    const before = document.activeElement as HTMLElement | null
    dialog.current?.focus()
    return () => before?.focus?.()
  }, [])
  useEffect(() => {
    const onKey = (event: globalThis.KeyboardEvent) => {
      if (event.key === 'Escape') onClose()
    }
    document.addEventListener('keydown', onKey)
    return () => document.removeEventListener('keydown', onKey)
  }, [onClose])

  return (
    <div className="history-backdrop" onClick={(e) => e.target === e.currentTarget && onClose()}>
      <div
        ref={dialog}
        className="history-drawer"
        role="dialog"
        aria-modal="true"
        aria-labelledby={titleId}
        tabIndex={-1}
        onKeyDown={trapTab}
      >
        <div className="drawer-head">
          <h2 id={titleId}>
            History of <span className="mono">{path}</span>
          </h2>
          <button type="button" className="small" onClick={onClose}>
            Close
          </button>
        </div>
        <ErrorBox error={history.error} />
        <ErrorBox error={restore.error} title="Not restored" />
        <ErrorBox error={clear.error} title="Not cleared" />
        {done && (
          <p className="notice" role="status">
            {done}
          </p>
        )}
        {history.isPending && <p className="muted">Loading the versions…</p>}
        {history.data && versions.length === 0 && <p className="muted">This item keeps no versions.</p>}
        {versions.length > 0 && (
          <table className="table compact history-versions">
            <caption className="visually-hidden">Versions of {path}, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Version</th>
                <th scope="col">From</th>
                <th scope="col">To</th>
                <th scope="col">Message</th>
                <th scope="col">By, when</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {versions.map((v) => (
                <tr key={v.version} data-version={v.version}>
                  <td>
                    <Link to="/workspace/$" params={{ _splat: path }} search={{ version: v.version }}>
                      v{v.version}
                    </Link>
                    {v.version === latest && <span className="badge">current</span>}
                  </td>
                  <td>
                    <input
                      type="radio"
                      name={`${titleId}-old`}
                      aria-label={`Compare from v${v.version}`}
                      checked={chosen?.old === v.version}
                      onChange={() => setPair({ old: v.version, new: chosen?.new ?? latest ?? v.version })}
                    />
                  </td>
                  <td>
                    <input
                      type="radio"
                      name={`${titleId}-new`}
                      aria-label={`Compare to v${v.version}`}
                      checked={chosen?.new === v.version}
                      onChange={() => setPair({ old: chosen?.old ?? v.version, new: v.version })}
                    />
                  </td>
                  <td>{v.message || <span className="muted">—</span>}</td>
                  <td className="small-text">
                    {v.created_by}, {formatTime(v.created_at)}
                  </td>
                  <td>
                    {v.version !== latest && (
                      <ConfirmAction
                        label={`Restore v${v.version}`}
                        question={`Write v${v.version} forward as v${(latest ?? 0) + 1}?`}
                        confirm="Restore"
                        disabled={restore.isPending}
                        onConfirm={() =>
                          restore.mutate(v.version, {
                            onSuccess: (item) => {
                              setDone(`Restored v${v.version} as v${item.version}.`)
                              setPair({ old: v.version, new: item.version })
                            },
                          })
                        }
                      />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {chosen && (
          <section aria-labelledby={`${titleId}-diff`}>
            <h3 id={`${titleId}-diff`}>
              Changes from v{chosen.old} to v{chosen.new}
            </h3>
            <ErrorBox error={diff.error} />
            {diff.isPending && <p className="muted">Comparing…</p>}
            {diff.data && <DiffView diff={withoutHeader(diff.data.diff)} oldLabel={`v${chosen.old}`} newLabel={`v${chosen.new}`} />}
          </section>
        )}
        {versions.length > 1 && (
          <section className="history-clear" aria-label="Clear past versions">
            <p className="small-text muted">
              A past version can hold a credential written inline; clearing drops every version but the current one.
            </p>
            <ConfirmAction
              label="Clear past versions"
              question={`Drop the ${versions.length - 1} past version(s) of ${path}, keeping v${latest}? This cannot be undone.`}
              confirm="Clear them"
              danger
              disabled={clear.isPending}
              onConfirm={() =>
                clear.mutate(undefined, {
                  onSuccess: (answer) => {
                    setDone(`Dropped ${answer.dropped} past version(s).`)
                    setPair(null)
                  },
                })
              }
            />
          </section>
        )}
      </div>
    </div>
  )
}
