/** What a DAG node can expand into: an agent step's tool calls, and the steps its sub-flows,
 * branches and loops ran (jobs of child runs, grouped under the top-level step that started them). */
import type { Job, Message, RunEvent } from '../api/types'

export interface ChildNode {
  id: string
  /** The node it hangs from: the top-level step's id, or another child's. */
  parent: string
  label: string
  detail: string
  status: string
}

export interface NodeChildren {
  /** What the toggle says it shows, e.g. `2 tool calls`. */
  label: string
  nodes: ChildNode[]
}

/** An agent's tool calls as child nodes, each done, failed or waiting (no result yet). */
export function toolCallNodes(stepId: string, messages: readonly Message[]): ChildNode[] {
  const results = new Map(messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id ?? '', m]))
  const nodes: ChildNode[] = []
  let previous = stepId
  for (const m of messages) {
    for (const [i, call] of m.tool_calls.entries()) {
      const result = results.get(call.id ?? '')
      const id = `${stepId}::call::${call.id ?? `${nodes.length}-${i}`}`
      nodes.push({
        id,
        // Calls follow one another: each hangs from the one before.
        parent: previous,
        label: call.name,
        detail: Object.entries(call.arguments ?? {})
          .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
          .join(', '),
        status: result ? (result.is_error ? 'failed' : 'succeeded') : 'waiting',
      })
      previous = id
    }
  }
  return nodes
}

/**
 * The child runs' steps under the top-level step that started each child run.
 *
 * The jobs API names each job's run but not the run's parent: that comes from the child
 * run's `run_started` event (`parent_id`, `parent_job`). A child run whose event is not at
 * hand (left out of a long run's event tail) is grouped by its run id under `orphans`.
 */
export function subRunChildren(
  runId: string,
  jobs: readonly Job[],
  events: readonly RunEvent[],
): { byStep: Map<string, ChildNode[]>; orphans: Map<string, ChildNode[]> } {
  const parentJob = new Map<string, number>()
  for (const e of events) {
    if (e.kind === 'run_started' && e.run_id !== runId && typeof e.data.parent_job === 'number') {
      parentJob.set(e.run_id, e.data.parent_job)
    }
  }
  const jobById = new Map(jobs.map((j) => [j.id, j]))
  // The latest attempt of each (child run, step).
  const latest = new Map<string, Job>()
  for (const job of jobs) {
    if (job.run_id === runId) continue
    const key = `${job.run_id}/${job.step_id}`
    const seen = latest.get(key)
    if (!seen || seen.attempt < job.attempt) latest.set(key, job)
  }
  const nodeId = (job: Job) => (job.run_id === runId ? job.step_id : `${job.run_id}/${job.step_id}`)
  /** The top-level step a child run descends from (null: unknown). */
  const topStep = (child: string, depth = 0): string | null => {
    const parent = jobById.get(parentJob.get(child) ?? -1)
    if (!parent || depth > 50) return null
    return parent.run_id === runId ? parent.step_id : topStep(parent.run_id, depth + 1)
  }
  const byStep = new Map<string, ChildNode[]>()
  const orphans = new Map<string, ChildNode[]>()
  for (const job of latest.values()) {
    const parent = jobById.get(parentJob.get(job.run_id) ?? -1)
    const top = topStep(job.run_id)
    const node: ChildNode = {
      id: nodeId(job),
      parent: parent ? nodeId(parent) : '',
      label: job.step_id,
      detail: `run ${job.run_id.slice(-6)}${job.attempt > 1 ? ` · ${job.attempt} attempts` : ''}`,
      status: job.status,
    }
    const into = top == null ? orphans : byStep
    const key = top ?? job.run_id
    into.set(key, [...(into.get(key) ?? []), node])
  }
  return { byStep, orphans }
}
