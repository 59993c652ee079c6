/** Each step's state in a run, from its jobs (one per attempt) and what it waits for. */
import type { Job } from '../api/types'

export interface StepState {
  status: string
  attempts: number
  /** Seconds the latest attempt ran (so far, while it runs); null before it starts. */
  duration: number | null
  jobs: Job[]
}

/** The state of each step of run `runId` (its own jobs, not its child runs'), by step id. */
export function stepStates(runId: string, jobs: readonly Job[], now = Date.now() / 1000): Map<string, StepState> {
  const byStep = new Map<string, Job[]>()
  for (const job of jobs) {
    if (job.run_id !== runId) continue
    const list = byStep.get(job.step_id) ?? []
    list.push(job)
    byStep.set(job.step_id, list)
  }
  const states = new Map<string, StepState>()
  for (const [step, list] of byStep) {
    list.sort((a, b) => a.attempt - b.attempt || a.id - b.id)
    const last = list[list.length - 1]!
    const duration = last.started_at == null ? null : (last.finished_at ?? now) - last.started_at
    states.set(step, { status: last.status, attempts: list.length, duration, jobs: list })
  }
  return states
}
