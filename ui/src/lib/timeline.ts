/** The rows of a run's timeline: a bar per step attempt (queued or paused, then running) and per wait. */
import type { Approval, Job, RunWait } from '../api/types'

export interface TimelineRow {
  key: string
  step: string
  kind: 'attempt' | 'wait'
  /** For an attempt: `attempt N`; for a wait: what it waits for. */
  label: string
  status: string
  start: number
  end: number
  /** Whether it goes on (its end is now). */
  open: boolean
  /** For an attempt: when it (last) started running; before, it was queued, or paused for a wait
   * (an agent that waits for a decision stops, and starts again once it is made); null: not started. */
  started: number | null
}

export interface Bar {
  /** Percentages of the timeline's width. */
  left: number
  width: number
  /** The part of an attempt's bar before its latest start, as a percentage of the bar. */
  queued: number
}

/** The rows, earliest first; open ones end at `now`. Waits are the run's approvals (decided or not)
 * and the waits with a start (`since`) that are no approval (a retry's delay, ...). */
export function timelineRows(
  runId: string,
  jobs: readonly Job[],
  approvals: readonly Approval[],
  waits: readonly RunWait[],
  now: number,
): TimelineRow[] {
  const rows: TimelineRow[] = []
  for (const job of jobs) {
    const open = job.finished_at == null
    rows.push({
      key: `job-${job.id}`,
      step: job.run_id === runId ? job.step_id : `${job.step_id} (in ${job.run_id.slice(0, 8)}…)`,
      kind: 'attempt',
      label: `attempt ${job.attempt}`,
      status: job.status,
      start: job.created_at,
      end: Math.max(job.finished_at ?? now, job.created_at),
      open,
      started: job.started_at,
    })
  }
  for (const a of approvals) {
    rows.push({
      key: `approval-${a.id}`,
      step: a.step_id,
      kind: 'wait',
      label: a.kind === 'tool_call' ? `approval of ${String(a.details?.tool ?? 'a tool call')}` : `${a.kind} wait`,
      status: a.status,
      start: a.created_at,
      end: Math.max(a.decided_at ?? now, a.created_at),
      open: a.decided_at == null,
      started: null,
    })
  }
  for (const [i, w] of waits.entries()) {
    if (w.approval_id || w.since == null) continue
    rows.push({
      key: `wait-${i}`,
      step: w.step ?? '—',
      kind: 'wait',
      label: w.kind,
      status: 'waiting',
      start: w.since,
      end: Math.max(w.until ?? now, w.since),
      open: true,
      started: null,
    })
  }
  return rows.sort((a, b) => a.start - b.start || (a.kind === b.kind ? 0 : a.kind === 'attempt' ? -1 : 1))
}

/** Where each row's bar lies between the earliest start and the latest end (each at least 0.5% wide). */
export function timelineBars(rows: readonly TimelineRow[]): { from: number; to: number; bars: Bar[] } {
  if (rows.length === 0) return { from: 0, to: 0, bars: [] }
  const from = Math.min(...rows.map((r) => r.start))
  const to = Math.max(...rows.map((r) => r.end))
  const span = to - from || 1
  const bars = rows.map((r) => {
    const left = ((r.start - from) / span) * 100
    const width = Math.max(((r.end - r.start) / span) * 100, 0.5)
    const length = r.end - r.start
    const queuedFor = r.started == null ? (r.kind === 'attempt' ? length : 0) : Math.min(r.started - r.start, length)
    return {
      left: Math.min(left, 99.5),
      width: Math.min(width, 100 - Math.min(left, 99.5)),
      queued: length > 0 ? (Math.max(queuedFor, 0) / length) * 100 : 0,
    }
  })
  return { from, to, bars }
}
