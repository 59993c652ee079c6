/** The runs list's filters: from the page's URL (days, a folder) to what `GET /api/runs` takes. */
import type { RunFilters } from '../api/runs'
import type { RunStatus } from '../api/types'

/** Seconds since the epoch at the start of a local day (`YYYY-MM-DD`), `days` later. */
export function dayStart(value: string | undefined, days = 0): number | undefined {
  if (!value) return undefined
  const [y, m, d] = value.split('-').map(Number)
  return new Date(y!, m! - 1, d! + days).getTime() / 1000
}

/** A folder as the API takes it: `f/team` or `f/team/...`, with a trailing slash for a bare folder. */
export function folderPrefix(value: string | undefined): string | undefined {
  const v = value?.trim()
  if (!v) return undefined
  return v.split('/').filter(Boolean).length === 2 && !v.endsWith('/') ? `${v}/` : v
}

export type RunsSearch = { status?: RunStatus; path?: string; folder?: string; by?: string; from?: string; to?: string }

export function filtersOf(search: RunsSearch): RunFilters {
  return {
    status: search.status,
    path: search.path,
    path_prefix: folderPrefix(search.folder),
    started_by: search.by,
    started_after: dayStart(search.from),
    started_before: dayStart(search.to, 1),
  }
}
