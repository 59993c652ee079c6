/**
 * A schedule item's page body: its settings in words, whom it runs as, enabled or paused (with
 * Pause / Resume), its next fires and its history of fires.
 */
import { Link } from '@tanstack/react-router'
import { type Schedule, useSchedule, useScheduleFires, useScheduleSwitch } from '../../api/triggers'
import { useNow } from '../../lib/useNow'
import { ErrorBox } from '../ErrorBox'
import { Json } from '../Json'
import { cronInWords } from './cron'
import { FiresTable } from './FiresTable'
import { NextFires } from './NextFires'
import './triggers.css'

const CATCH_UP: Record<string, string> = {
  latest: 'latest: after a downtime, run the most recent missed fire and skip the others',
  all: 'all: after a downtime, run every missed fire, oldest first',
  skip: 'skip: after a downtime, run none of the missed fires',
}

function ItemLink({ path }: { path: string }) {
  return (
    <Link to="/workspace/$" params={{ _splat: path }} search={{}} className="mono">
      {path}
    </Link>
  )
}

/** The settings of `schedule`, and its switch. */
export function ScheduleSpec({ schedule }: { schedule: Schedule }) {
  const toggle = useScheduleSwitch(schedule.path)
  const words = cronInWords(schedule.cron)
  return (
    <>
      <div className="schedule-state">
        <span
          className={`badge ${schedule.enabled ? 'status-succeeded' : 'status-waiting'}`}
          aria-label={`Schedule state: ${schedule.enabled ? 'enabled' : 'paused'}`}
          data-testid="schedule-state"
        >
          {schedule.enabled ? 'enabled' : 'paused'}
        </span>
        {schedule.enabled ? (
          <button type="button" className="small" disabled={toggle.isPending} onClick={() => toggle.mutate('pause')}>
            Pause
          </button>
        ) : (
          <button type="button" className="small" disabled={toggle.isPending} onClick={() => toggle.mutate('resume')}>
            Resume
          </button>
        )}
      </div>
      <ErrorBox error={toggle.error} />
      <dl className="facts" data-testid="schedule-spec">
        <dt>When</dt>
        <dd>
          {words && <>{words}, </>}
          <code>{schedule.cron}</code> in {schedule.timezone}
        </dd>
        <dt>Runs</dt>
        <dd>
          <ItemLink path={schedule.target} />
        </dd>
        <dt>As</dt>
        <dd>{schedule.owner} (who saved it last)</dd>
        <dt>Catch-up</dt>
        <dd>{CATCH_UP[schedule.catch_up] ?? schedule.catch_up}</dd>
        <dt>On failure</dt>
        <dd>{schedule.on_failure ? <ItemLink path={schedule.on_failure} /> : <span className="muted">—</span>}</dd>
        <dt>On recovery</dt>
        <dd>{schedule.on_recovery ? <ItemLink path={schedule.on_recovery} /> : <span className="muted">—</span>}</dd>
      </dl>
      {schedule.inputs && Object.keys(schedule.inputs).length > 0 ? (
        <>
          <h3>Inputs of each run</h3>
          <Json value={schedule.inputs} label={`Inputs of ${schedule.path}`} />
        </>
      ) : (
        <p className="muted">Each run gets no input.</p>
      )}
    </>
  )
}

export function ScheduleView({ path }: { path: string }) {
  const schedule = useSchedule(path)
  const fires = useScheduleFires(path)
  const now = useNow(false)
  if (schedule.isPending) return <p className="muted">Loading the schedule…</p>
  if (schedule.error) return <ErrorBox error={schedule.error} />
  const s = schedule.data
  return (
    <section className="schedule" aria-labelledby="schedule-head">
      <h2 id="schedule-head">Schedule</h2>
      <ScheduleSpec schedule={s} />
      <h3>Next fires</h3>
      <NextFires fires={s.next_fires} zone={s.timezone} enabled={s.enabled} now={now} />
      <h3>Fires</h3>
      <ErrorBox error={fires.error} />
      {fires.isPending ? <p className="muted">Loading…</p> : fires.data && <FiresTable fires={fires.data} path={path} />}
    </section>
  )
}
