import { useQueryClient } from '@tanstack/react-query'
import { useEffect, useRef, useState } from 'react'
import type { RunEvent } from './types'

/** Kinds after which the run's jobs, waits or status may have changed. */
const CHANGES = new Set([
  'run_started',
  'run_finished',
  'step_started',
  'step_finished',
  'step_retrying',
  'wait_requested',
  'wait_decided',
  'usage',
  'model_turn',
  'tool_result',
])

/** How many of a run's latest events a page opens with (`?tail=`): a long run's history is not replayed. */
export const TAIL = 1000

/**
 * Follow a run's events over SSE (`GET /api/runs/{id}/events`).
 *
 * `active`: whether the run is queued, running or waiting (from the run's status).
 * The browser's EventSource resumes with `Last-Event-ID` by itself when the
 * connection drops; the stream is closed once the run's own `run_finished`
 * arrives. It opens with the run's last `TAIL` events (`?tail=`), then
 * continues after the last one it saw (a reconnect's `Last-Event-ID` wins
 * over `tail`). Every event is kept (they carry the logs), and the queries
 * the event may change are refetched. `truncated`: events before the first
 * one kept were left out.
 */
export function useRunEvents(
  runId: string,
  active: boolean,
): { events: RunEvent[]; live: boolean; truncated: boolean } {
  const [events, setEvents] = useState<RunEvent[]>([])
  const [live, setLive] = useState(false)
  const [generation, setGeneration] = useState(0)
  const lastId = useRef(0)
  const finished = useRef(false)
  const client = useQueryClient()

  useEffect(() => {
    setEvents([])
    lastId.current = 0
    finished.current = false
  }, [runId])

  // A finished run that runs again (a retry) has new events: follow it again.
  useEffect(() => {
    if (active && finished.current) {
      finished.current = false
      setGeneration((g) => g + 1)
    }
  }, [active])

  useEffect(() => {
    if (typeof EventSource === 'undefined') return
    const start = lastId.current > 0 ? `after=${lastId.current}` : `tail=${TAIL}`
    const source = new EventSource(`/api/runs/${encodeURIComponent(runId)}/events?${start}`)
    let pending: number | undefined
    // Events are appended in batches: a finished run replays all its events at once.
    let buffer: RunEvent[] = []
    let flushing: number | undefined
    const flush = () => {
      flushing = undefined
      const batch = buffer
      buffer = []
      if (batch.length) setEvents((prev) => prev.concat(batch))
    }
    const refresh = () => {
      if (pending !== undefined) return
      pending = window.setTimeout(() => {
        pending = undefined
        void client.invalidateQueries({ queryKey: ['runs', runId] })
        void client.invalidateQueries({ queryKey: ['approvals'] })
      }, 250)
    }
    const onEvent = (message: MessageEvent<string>) => {
      let event: RunEvent
      try {
        event = JSON.parse(message.data) as RunEvent
      } catch {
        return
      }
      if (event.id <= lastId.current) return
      lastId.current = event.id
      buffer.push(event)
      if (flushing === undefined) flushing = window.setTimeout(flush, 100)
      if (CHANGES.has(event.kind)) refresh()
      if (event.kind === 'run_finished' && event.run_id === runId) {
        finished.current = true
        source.close()
        setLive(false)
        refresh()
        flush()
      }
    }
    // Named events (`event: <kind>`) do not reach onmessage: listen to each kind.
    const kinds = [
      ...CHANGES,
      'run_queued',
      'log',
      'agent_input',
      'tool_started',
    ]
    for (const kind of kinds) source.addEventListener(kind, onEvent as EventListener)
    source.onmessage = onEvent
    source.onopen = () => setLive(true)
    source.onerror = () => setLive(source.readyState === EventSource.OPEN)
    return () => {
      if (pending !== undefined) window.clearTimeout(pending)
      if (flushing !== undefined) window.clearTimeout(flushing)
      flush() // keep what arrived: the next stream starts after it
      source.close()
      setLive(false)
    }
  }, [runId, client, generation])

  // A tail of TAIL events that does not begin with the run's first one left earlier ones out.
  const truncated = events.length >= TAIL && events[0]?.kind !== 'run_queued'
  return { events, live, truncated }
}
