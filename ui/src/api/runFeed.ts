import { useQueryClient } from '@tanstack/react-query'
import { useEffect, useState } from 'react'

/** The kinds `GET /api/runs/feed` sends: each a change of a run's status as shown. */
export const FEED_KINDS = ['run_queued', 'run_started', 'run_finished', 'wait_requested', 'wait_decided']

/** The most often the runs list is read again while changes come (ms). */
export const REFRESH_EVERY = 500

/** How often the list is polled while the feed is down (ms). */
export const FALLBACK_POLL = 60_000

/**
 * `live`: the feed is open; `connecting`: not yet; `down`: it failed (the browser retries it);
 * `unsupported`: no EventSource here (the list polls as it would without the feed).
 */
export type FeedState = 'connecting' | 'live' | 'down' | 'unsupported'

/**
 * Follow the runs feed (`GET /api/runs/feed`) while mounted, and read the runs
 * lists again (at most every `REFRESH_EVERY` ms) when a run changes.
 *
 * The list is also read again each time the feed opens: changes made before it
 * was open (the first time) or while it was down are not in the list yet. The
 * browser's EventSource reconnects by itself, with `Last-Event-ID`.
 */
export function useRunFeed(): FeedState {
  const [state, setState] = useState<FeedState>(() =>
    typeof EventSource === 'undefined' ? 'unsupported' : 'connecting',
  )
  const client = useQueryClient()

  useEffect(() => {
    if (typeof EventSource === 'undefined') return
    const source = new EventSource('/api/runs/feed')
    let pending: number | undefined
    let last = 0
    const refresh = () => {
      if (pending !== undefined) return
      const wait = Math.max(0, last + REFRESH_EVERY - Date.now())
      pending = window.setTimeout(() => {
        pending = undefined
        last = Date.now()
        void client.invalidateQueries({ queryKey: ['runs', 'list'] })
      }, wait)
    }
    for (const kind of FEED_KINDS) source.addEventListener(kind, refresh)
    source.onmessage = refresh
    source.onopen = () => {
      setState('live')
      refresh()
    }
    source.onerror = () => setState(source.readyState === EventSource.OPEN ? 'live' : 'down')
    return () => {
      if (pending !== undefined) window.clearTimeout(pending)
      source.close()
    }
  }, [client])

  return state
}

/** The list's refetch interval for a feed state: none while live, a slow poll while down. */
export function pollFor(state: FeedState): number | false | undefined {
  if (state === 'live' || state === 'connecting') return false
  return state === 'down' ? FALLBACK_POLL : undefined
}
