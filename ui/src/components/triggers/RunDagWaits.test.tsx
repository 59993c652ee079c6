import { render, screen } from '@testing-library/react'
import { beforeAll, describe, expect, it, vi } from 'vitest'
import type { RunWait } from '../../api/types'
import type { FlowStep } from '../../lib/flowSteps'
import { stepStates } from '../../lib/stepStates'
import { RunDag } from '../RunDag'
import { withWaits } from './waits'

beforeAll(() => {
  vi.stubGlobal(
    'ResizeObserver',
    class {
      observe() {}
      unobserve() {}
      disconnect() {}
    },
  )
})

const STEPS: FlowStep[] = [
  { id: 'nap', kind: 'sleep', summary: '', needs: [], inputs: {} },
  { id: 'go', kind: 'wait_for_event', summary: '', needs: ['nap'], inputs: {} },
  { id: 'ok', kind: 'approval', summary: '', needs: ['go'], inputs: {} },
]
function job(id: number, step: string) {
  return { id, run_id: 'r1', step_id: step, attempt: 1, status: 'waiting', run_at: 0, worker: null, created_at: 0, started_at: 1, finished_at: null, error: null }
}
const WAITS: RunWait[] = [
  { kind: 'sleep', step: 'nap', run_id: 'r1', reason: 'sleeping', commands: [], details: {}, children: [] },
  { kind: 'event', step: 'go', run_id: 'r1', reason: 'event', commands: [], details: { name: 'go', key: 'k' }, children: [] },
  { kind: 'approval', step: 'ok', run_id: 'r1', reason: 'a decision', commands: [], details: {}, children: [] },
]

describe('the DAG of a waiting run', () => {
  it('shows sleeping and event-waiting steps as such, an approval as the generic waiting', async () => {
    const states = withWaits(stepStates('r1', [job(1, 'nap'), job(2, 'go'), job(3, 'ok')], 10), WAITS, 'r1')
    render(
      <div style={{ width: 800, height: 600 }}>
        <RunDag steps={STEPS} states={states} selected={null} ended={false} onSelect={() => {}} />
      </div>,
    )
    const nap = await screen.findByTestId('step-nap')
    expect(nap).toHaveAttribute('data-status', 'sleeping')
    expect(nap).toHaveTextContent('sleeping')
    expect(nap.querySelector('svg.icon-clock')).not.toBeNull()
    const go = screen.getByTestId('step-go')
    expect(go).toHaveAttribute('data-status', 'waiting_event')
    expect(go).toHaveTextContent('waiting for event')
    expect(go.querySelector('svg.icon-bell')).not.toBeNull()
    expect(screen.getByTestId('step-ok')).toHaveAttribute('data-status', 'waiting')
    expect(screen.getByTestId('step-ok')).toHaveTextContent('waiting')
    expect(screen.getByTestId('step-ok').querySelector('svg')).toBeNull()
  })
})
