/** Small formatting helpers: times, durations, ages and money. */

export function formatTime(seconds: number | null | undefined): string {
  if (seconds == null) return '—'
  return new Date(seconds * 1000).toLocaleString()
}

export function formatDuration(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds)) return '—'
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`
  if (seconds < 60) return `${seconds.toFixed(1)} s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`
  const hours = Math.floor(minutes / 60)
  return `${hours} h ${minutes % 60} min`
}

/** The time from `start` to `end` (or now, while it goes on). */
export function elapsed(start: number | null | undefined, end: number | null | undefined, now = Date.now() / 1000) {
  if (start == null) return null
  return (end ?? now) - start
}

export function formatAge(seconds: number, now = Date.now() / 1000): string {
  const age = Math.max(0, now - seconds)
  if (age < 60) return `${Math.round(age)} s ago`
  if (age < 3600) return `${Math.round(age / 60)} min ago`
  if (age < 86400) return `${Math.round(age / 3600)} h ago`
  return `${Math.round(age / 86400)} d ago`
}

export function formatCost(usd: number | null | undefined): string {
  if (usd == null) return '—'
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`
}
