import { describe, expect, it } from 'vitest'
import { isTimeZone, relativeTime, toSeconds, zoneTime } from './time'

describe('trigger times', () => {
  it('reads seconds and ISO text alike', () => {
    expect(toSeconds(1_700_000_000)).toBe(1_700_000_000)
    expect(toSeconds('1970-01-01T00:01:00Z')).toBe(60)
    expect(toSeconds('tomorrow')).toBeNull()
    expect(toSeconds(null)).toBeNull()
  })

  it('says how far a time is, in the largest unit that fits', () => {
    expect(relativeTime(1000 + 7200, 1000)).toBe('in 2 h')
    expect(relativeTime(1000 + 300, 1000)).toBe('in 5 min')
    expect(relativeTime(1000 + 40, 1000)).toBe('in 40 s')
    expect(relativeTime(1000 - 3 * 86400, 1000)).toBe('3 d ago')
    expect(relativeTime(1000.2, 1000)).toBe('now')
  })

  it('shows a time on the clock of a zone, and knows which zones exist', () => {
    // 2026-01-15 08:00 UTC is 09:00 in Paris (winter time) and 03:00 in New York.
    const at = Date.UTC(2026, 0, 15, 8, 0, 0) / 1000
    expect(zoneTime(at, 'Europe/Paris')).toBe('2026-01-15 09:00 Europe/Paris')
    expect(zoneTime(at, 'America/New_York')).toBe('2026-01-15 03:00 America/New_York')
    expect(zoneTime(at + 5, 'UTC')).toBe('2026-01-15 08:00:05 UTC')
    expect(isTimeZone('Europe/Paris')).toBe(true)
    expect(isTimeZone('Mars/Olympus')).toBe(false)
    expect(isTimeZone('')).toBe(false)
  })
})
