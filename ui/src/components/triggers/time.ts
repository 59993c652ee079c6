/** Times of triggers: the API's times (seconds since the epoch, or ISO text) in words. */

/** Seconds since the epoch, from a number of seconds or an ISO text (null: neither). */
export function toSeconds(value: unknown): number | null {
  if (typeof value === 'number' && Number.isFinite(value)) return value
  if (typeof value === 'string' && value !== '') {
    const ms = Date.parse(value)
    return Number.isNaN(ms) ? null : ms / 1000
  }
  return null
}

/** A time in the browser's zone: `12/4/2026, 6:00:00 PM`. */
export function localTime(seconds: number): string {
  return new Date(seconds * 1000).toLocaleString()
}

/** Whether `zone` is an IANA time zone this browser knows. */
export function isTimeZone(zone: string): boolean {
  if (zone.trim() === '') return false
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone })
    return true
  } catch {
    return false
  }
}

/** A time on the wall clock of `zone` (`2026-12-04 09:00 Europe/Paris`); the zone itself if unknown. */
export function zoneTime(seconds: number, zone: string): string {
  if (!isTimeZone(zone)) return `${localTime(seconds)} (${zone}?)`
  const parts = new Intl.DateTimeFormat('en-CA', {
    timeZone: zone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(new Date(seconds * 1000))
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? ''
  const secs = get('second') === '00' ? '' : `:${get('second')}`
  return `${get('year')}-${get('month')}-${get('day')} ${get('hour')}:${get('minute')}${secs} ${zone}`
}

/**
 * How far `seconds` is from `now`, in words: `in 2 h`, `in 5 min`, `in 40 s`, `3 d ago`, `now`.
 *
 * Rounded to the largest unit that fits (a day and a half is `in 2 d`).
 */
export function relativeTime(seconds: number, now: number): string {
  const delta = seconds - now
  const size = Math.abs(delta)
  let text: string
  if (size < 1) return 'now'
  if (size < 60) text = `${Math.round(size)} s`
  else if (size < 3600) text = `${Math.round(size / 60)} min`
  else if (size < 86400) text = `${Math.round(size / 3600)} h`
  else text = `${Math.round(size / 86400)} d`
  return delta > 0 ? `in ${text}` : `${text} ago`
}
