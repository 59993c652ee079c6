// @vitest-environment node
import { describe, expect, it } from 'vitest'
import type { Job } from '../api/types'
import { stepStates } from './stepStates'

function job(over: Partial<Job>): Job {
  return {
    id: 1,
    run_id: 'r1',
    step_id: 'a',
    attempt: 1,
    status: 'succeeded',
    run_at: 0,
    worker: null,
    created_at: 0,
    started_at: 10,
    finished_at: 12,
    error: null,
    ...over,
  }
}

describe('stepStates', () => {
  it('takes each step’s latest attempt, counts attempts, and leaves out child runs', () => {
    const states = stepStates(
      'r1',
      [
        job({ id: 1, step_id: 'a', attempt: 1, status: 'failed' }),
        job({ id: 3, step_id: 'b', status: 'running', started_at: 20, finished_at: null }),
        job({ id: 2, step_id: 'a', attempt: 2, status: 'succeeded', started_at: 13, finished_at: 16 }),
        job({ id: 4, run_id: 'child', step_id: 'inner' }),
      ],
      25,
    )
    expect([...states.keys()].sort()).toEqual(['a', 'b'])
    expect(states.get('a')).toMatchObject({ status: 'succeeded', attempts: 2, duration: 3 })
    expect(states.get('b')).toMatchObject({ status: 'running', attempts: 1, duration: 5 })
  })
})
