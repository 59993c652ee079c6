/** A schedule's next fires: each in the browser's time, on the schedule's own clock, and how soon. */
import { localTime, relativeTime, toSeconds, zoneTime } from './time'

export function NextFires({
  fires,
  zone,
  enabled,
  now,
}: {
  fires: readonly (string | number)[]
  zone: string
  enabled: boolean
  now: number
}) {
  if (!enabled) return <p className="muted">Paused: it fires nothing until it is resumed.</p>
  const times = fires.map(toSeconds).filter((t): t is number => t !== null)
  if (times.length === 0) return <p className="muted">No next fire.</p>
  return (
    <ol className="next-fires" aria-label="Next fires">
      {times.map((t) => (
        <li key={t}>
          <time dateTime={new Date(t * 1000).toISOString()}>{localTime(t)}</time>
          <span className="muted">
            {zoneTime(t, zone)} · {relativeTime(t, now)}
          </span>
        </li>
      ))}
    </ol>
  )
}
