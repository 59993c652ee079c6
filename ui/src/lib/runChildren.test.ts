import { describe, expect, it } from 'vitest'
import type { Job, Message, RunEvent } from '../api/types'
import { subRunChildren, toolCallNodes } from './runChildren'

function job(id: number, run: string, step: string, attempt = 1, status = 'succeeded'): Job {
  return {
    id, run_id: run, step_id: step, attempt, status, run_at: 1, worker: null, created_at: 1,
    started_at: 1, finished_at: 2, error: null,
  } // prettier-ignore
}

function started(run: string, parentJob: number): RunEvent {
  return { id: parentJob, run_id: run, step_id: null, job_id: null, kind: 'run_started', data: { parent_id: 'x', parent_job: parentJob }, at: 1 }
}

describe('subRunChildren', () => {
  it("groups child runs' steps under the top-level step that started them, nested ones too", () => {
    const jobs = [
      job(1, 'R', 'fan'),
      job(2, 'C1', 'body'),
      job(3, 'C1', 'body', 2, 'failed'),
      job(4, 'C2', 'inner'),
      job(5, 'C3', 'lost'),
    ]
    // C2 runs inside C1's `body` step (job 2); C3's parent is not known.
    const { byStep, orphans } = subRunChildren('R', jobs, [started('C1', 1), started('C2', 2)])
    expect(byStep.get('fan')).toEqual([
      { id: 'C1/body', parent: 'fan', label: 'body', detail: 'run C1 · 2 attempts', status: 'failed' },
      { id: 'C2/inner', parent: 'C1/body', label: 'inner', detail: 'run C2', status: 'succeeded' },
    ])
    expect([...orphans.keys()]).toEqual(['C3'])
  })
})

describe('toolCallNodes', () => {
  it('chains the calls, each done, failed or waiting for its result', () => {
    const base = { images: [], reasoning: [], tool_call_id: null, name: null, is_error: false, content: '' }
    const messages: Message[] = [
      { ...base, role: 'assistant', tool_calls: [{ id: 'a', name: 'lookup', arguments: { id: 1 } }, { id: 'b', name: 'bad' }] },
      { ...base, role: 'tool', tool_calls: [], tool_call_id: 'a' },
      { ...base, role: 'tool', tool_calls: [], tool_call_id: 'b', is_error: true },
      { ...base, role: 'assistant', tool_calls: [{ id: 'c', name: 'refund' }] },
    ]
    expect(toolCallNodes('agent', messages).map((n) => [n.id, n.parent, n.label, n.detail, n.status])).toEqual([
      ['agent::call::a', 'agent', 'lookup', 'id=1', 'succeeded'],
      ['agent::call::b', 'agent::call::a', 'bad', '', 'failed'],
      ['agent::call::c', 'agent::call::b', 'refund', '', 'waiting'],
    ])
  })
})
