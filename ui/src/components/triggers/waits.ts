/**
 * What a waiting run waits for, in words, and the look of the DAG's steps that wait for time
 * (`sleep`), for an event (`wait_for_event`) or for a run's later start.
 */
import type { RunWait } from '../../api/types'
import type { StepState } from '../../lib/stepStates'
import type { WaitIcon } from './icons'
import { localTime, relativeTime, toSeconds } from './time'

/** The wait's end (its `until`, or the time its details name), in seconds; null: none. */
export function waitUntil(wait: RunWait): number | null {
  return toSeconds(wait.until) ?? toSeconds(wait.details?.until) ?? toSeconds(wait.details?.deadline)
}

function text(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null
}

/** An event wait's name and key (null when it is no event wait). */
export function eventOf(wait: RunWait): { name: string; key: string; path: string | null } | null {
  if (wait.kind !== 'event') return null
  const name = text(wait.details?.name)
  if (name === null) return null
  return { name, key: text(wait.details?.key) ?? '', path: text(wait.details?.path) }
}

/** `local time (in 2 h)`. */
function when(seconds: number, now: number): string {
  return `${localTime(seconds)} (${relativeTime(seconds, now)})`
}

/**
 * The wait in one sentence: "Sleeping until <local time> (in 2 h)", "Waiting for event
 * `order_paid` with key `A-1` (until ...)", "Starts at <local time> (in 5 min)"; other
 * kinds say what the server says (`reason`).
 */
export function describeWait(wait: RunWait, now: number): string {
  const until = waitUntil(wait)
  if (wait.kind === 'sleep') return until === null ? 'Sleeping' : `Sleeping until ${when(until, now)}`
  if (wait.kind === 'start') return until === null ? 'Starts later' : `Starts at ${when(until, now)}`
  const event = eventOf(wait)
  if (event) {
    const key = event.key ? ` with key ${event.key}` : ''
    return `Waiting for event ${event.name}${key}${until === null ? '' : ` (until ${when(until, now)})`}`
  }
  const reason = wait.reason.trim()
  return reason ? reason.charAt(0).toUpperCase() + reason.slice(1) : wait.kind
}

/** The statuses a waiting step shows in the DAG instead of the generic `waiting`. */
const STEP_STATUS: Record<string, string> = { sleep: 'sleeping', event: 'waiting_event', start: 'scheduled' }

/** What a step status looks like: an icon (decorative) and its words. */
export function statusLook(status: string): { icon: WaitIcon | null; label: string } {
  if (status === 'sleeping') return { icon: 'clock', label: 'sleeping' }
  if (status === 'waiting_event') return { icon: 'bell', label: 'waiting for event' }
  if (status === 'scheduled') return { icon: 'calendar', label: 'scheduled' }
  return { icon: null, label: status.replace('_', ' ') }
}

/** The icon of a wait of this kind (null: none). */
export function waitIcon(kind: string): WaitIcon | null {
  return kind === 'sleep' ? 'clock' : kind === 'event' ? 'bell' : kind === 'start' ? 'calendar' : null
}

/**
 * The step states of run `runId` with its sleeping, event-waiting and not-yet-started steps
 * marked as such (`sleeping`, `waiting_event`, `scheduled`); the others as they were.
 */
export function withWaits(
  states: ReadonlyMap<string, StepState>,
  waits: readonly RunWait[],
  runId: string,
): Map<string, StepState> {
  const out = new Map(states)
  for (const wait of waits) {
    const status = STEP_STATUS[wait.kind]
    if (!status || wait.run_id !== runId || !wait.step) continue
    const state = out.get(wait.step)
    if (state && (state.status === 'succeeded' || state.status === 'failed')) continue
    out.set(wait.step, { ...(state ?? { attempts: 0, duration: null, jobs: [] }), status })
  }
  return out
}
