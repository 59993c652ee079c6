/** An agent step's journal: each entry, and whether the step's latest attempt replayed it (read it
 * back instead of doing it again) or ran it live. */
import { type JournalEntry, useJournal } from '../../api/runs'
import { formatTime } from '../../lib/format'
import { journalSummary } from '../../lib/journalSummary'
import { ErrorBox } from '../ErrorBox'
import { Json } from '../Json'
import './run.css'

export function JournalList({ entries }: { entries: readonly JournalEntry[] }) {
  if (entries.length === 0) return <p className="muted">Nothing recorded yet.</p>
  const replayed = entries.filter((e) => e.replayed).length
  return (
    <>
      <p className="muted small-text">
        {replayed} of {entries.length} replayed from the journal, {entries.length - replayed} ran live.
      </p>
      <ol className="journal" aria-label="Journal entries">
        {entries.map((e) => (
          <li key={e.seq} className={e.replayed ? 'replayed' : 'live-entry'} data-seq={e.seq} data-replayed={e.replayed}>
            <span className={`journal-mark ${e.replayed ? 'is-replayed' : 'is-live'}`}>
              {e.replayed ? 'replayed' : 'ran live'}
            </span>{' '}
            <span className="muted">#{e.seq}</span> <code>{e.kind}</code>{' '}
            <time className="muted small-text" dateTime={new Date(e.at * 1000).toISOString()}>
              {formatTime(e.at)}
            </time>
            <details>
              <summary>{journalSummary(e.kind, e.data) || 'details'}</summary>
              <Json value={e.data} />
            </details>
          </li>
        ))}
      </ol>
    </>
  )
}

export function Journal({ runId, stepId, active }: { runId: string; stepId: string; active: boolean }) {
  const journal = useJournal(runId, stepId, active)
  return (
    <section aria-labelledby={`journal-${stepId}`}>
      <h3 id={`journal-${stepId}`}>Journal</h3>
      {journal.error ? (
        <ErrorBox error={journal.error} />
      ) : journal.isPending ? (
        <p className="muted">Loading…</p>
      ) : (
        <JournalList entries={journal.data} />
      )}
    </section>
  )
}
