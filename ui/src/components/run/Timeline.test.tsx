import { render, screen, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Approval, Job, RunWait } from '../../api/types'
import { timelineBars, timelineRows } from '../../lib/timeline'
import { Timeline } from './Timeline'

function job(id: number, step: string, attempt: number, created: number, started: number | null, finished: number | null, run = 'R'): Job {
  return {
    id, run_id: run, step_id: step, attempt, status: finished == null ? 'running' : 'succeeded', run_at: created,
    worker: null, created_at: created, started_at: started, finished_at: finished, error: null,
  } // prettier-ignore
}

const APPROVAL: Approval = {
  id: 'ap1', kind: 'tool_call', run_id: 'R', root_id: 'R', step_id: 'agent', path: null, run_as: 'ada',
  message: '', approvers: [], allow_self_approval: true, status: 'approved', on_timeout: 'reject',
  created_at: 120, expires_at: null, decided_at: 160, decided_by: 'ada', comment: null,
  details: { tool: 'issue_refund' },
} // prettier-ignore

describe('timeline', () => {
  it('places each attempt and wait between the earliest start and the latest end', () => {
    const rows = timelineRows('R', [job(1, 'a', 1, 100, 110, 150), job(2, 'agent', 1, 150, 150, 200)], [APPROVAL], [], 999)
    expect(rows.map((r) => r.key)).toEqual(['job-1', 'approval-ap1', 'job-2'])
    const { from, to, bars } = timelineBars(rows)
    expect([from, to]).toEqual([100, 200])
    expect(bars[0]).toEqual({ left: 0, width: 50, queued: 20 }) // 10 s of its 50 queued
    expect(bars[1]).toEqual({ left: 20, width: 40, queued: 0 })
    expect(bars[2]).toEqual({ left: 50, width: 50, queued: 0 })
  })

  it('ends what goes on at now, and gives an instant a visible width', () => {
    const waits = [{ kind: 'retry', step: 'a', run_id: 'R', reason: 'next attempt', since: 140, until: null } as RunWait]
    const rows = timelineRows('R', [job(1, 'a', 1, 100, 100, 100), job(2, 'a', 2, 140, null, null)], [], waits, 200)
    const { bars } = timelineBars(rows)
    expect(rows.map((r) => [r.key, r.open, r.end])).toEqual([
      ['job-1', false, 100],
      ['job-2', true, 200],
      ['wait-0', true, 200],
    ])
    expect(bars[0]!.width).toBe(0.5)
    expect(bars[1]).toEqual({ left: 40, width: 60, queued: 100 }) // not started: all of it queued
  })

  it('renders a row per bar, with the times in words and waits told apart', () => {
    render(<Timeline runId="R" jobs={[job(1, 'a', 1, 100, 110, 200)]} approvals={[APPROVAL]} waits={[]} now={999} />)
    const table = screen.getByRole('table', { name: 'Timeline of the steps and waits' })
    const rows = within(table).getAllByRole('row').slice(1)
    expect(rows.map((r) => r.getAttribute('data-kind'))).toEqual(['attempt', 'wait'])
    const bar = within(rows[1]!).getByRole('img')
    expect(bar).toHaveAccessibleName(`agent approval of issue_refund: ${new Date(120_000).toLocaleString()}, 40.0 s`)
    expect(bar).toHaveClass('is-wait')
    expect(bar).toHaveStyle({ left: '20%', width: '40%' })
  })
})
