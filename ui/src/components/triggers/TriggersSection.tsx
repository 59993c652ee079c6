/**
 * The triggers of a flow (or script) on its item page: the schedules that run it, each with its
 * next fire or paused, a form for a new one, and (flows) its webhook.
 */
import { Link } from '@tanstack/react-router'
import { type Schedule, useSchedules } from '../../api/triggers'
import { useNow } from '../../lib/useNow'
import { ErrorBox } from '../ErrorBox'
import { cronInWords } from './cron'
import { NewScheduleForm } from './NewScheduleForm'
import { localTime, relativeTime, toSeconds } from './time'
import { WebhookPanel } from './WebhookPanel'
import './triggers.css'

/** The schedules whose target is `path`, by path. */
export function schedulesOf(schedules: readonly Schedule[], path: string): Schedule[] {
  return schedules.filter((s) => s.target === path).sort((a, b) => a.path.localeCompare(b.path))
}

function ScheduleLine({ schedule, now }: { schedule: Schedule; now: number }) {
  const next = toSeconds(schedule.next_fires[0])
  const words = cronInWords(schedule.cron)
  return (
    <li data-testid={`schedule-${schedule.path}`}>
      <Link to="/workspace/$" params={{ _splat: schedule.path }} search={{}} className="mono">
        {schedule.path}
      </Link>
      : {words ?? <code>{schedule.cron}</code>} ({schedule.timezone}){' '}
      {!schedule.enabled ? (
        <span className="badge status-waiting">paused</span>
      ) : next !== null ? (
        <span>
          — next {localTime(next)} ({relativeTime(next, now)})
        </span>
      ) : (
        <span className="muted">— no next fire</span>
      )}
    </li>
  )
}

export function TriggersSection({
  path,
  kind,
  inputSchema,
}: {
  path: string
  kind: string
  inputSchema?: Record<string, unknown> | null
}) {
  const schedules = useSchedules()
  const now = useNow(false)
  const folder = path.includes('/') ? path.slice(0, path.lastIndexOf('/') + 1) : ''
  const mine = schedulesOf(schedules.data ?? [], path)
  return (
    <section className="triggers" aria-labelledby="triggers-head">
      <h2 id="triggers-head">Triggers</h2>
      <h3>Schedules</h3>
      <ErrorBox error={schedules.error} />
      {schedules.isPending && <p className="muted">Loading…</p>}
      {schedules.data && mine.length === 0 && <p className="muted">No schedule runs this {kind}.</p>}
      {mine.length > 0 && (
        <ul className="schedules" aria-label={`Schedules of ${path}`}>
          {mine.map((s) => (
            <ScheduleLine key={s.path} schedule={s} now={now} />
          ))}
        </ul>
      )}
      <details>
        <summary>New schedule for this {kind}</summary>
        <NewScheduleForm prefix={folder} target={path} />
      </details>
      {kind === 'flow' && <WebhookPanel path={path} inputSchema={inputSchema} />}
    </section>
  )
}
