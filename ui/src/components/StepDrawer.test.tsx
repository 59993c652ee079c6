import { render, screen, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import type { Job, RunEvent } from '../api/types'
import { StepDrawer } from './StepDrawer'

function job(id: number, attempt: number): Job {
  return {
    id,
    run_id: 'R',
    step_id: 'greet',
    attempt,
    status: attempt === 1 ? 'failed' : 'succeeded',
    run_at: 1,
    worker: 'w',
    created_at: 1,
    started_at: 1,
    finished_at: 2,
    error: null,
  }
}

function log(id: number, run_id: string, job_id: number, text: string): RunEvent {
  return { id, run_id, step_id: 'greet', job_id, kind: 'log', data: { text, stream: 'stdout' }, at: 1 }
}

describe('StepDrawer', () => {
  it("shows the logs of the step's own jobs, each with its attempt", () => {
    const jobs = [job(7, 1), job(9, 2)]
    const events = [
      log(1, 'R', 7, 'first try'),
      log(2, 'R', 9, 'second try'),
      log(3, 'child', 11, 'a loop body step of the same name'),
    ]
    render(
      <StepDrawer
        runId="R"
        step={{ id: 'greet', kind: 'script', summary: '', needs: [], inputs: {} }}
        state={{ status: 'succeeded', attempts: 2, duration: 1, jobs }}
        events={events}
        waits={[]}
        approvals={[]}
        truncated
        onClose={() => {}}
      />,
    )
    const logs = within(screen.getByLabelText('Logs'))
    expect(logs.getByText('first try').closest('[data-job-id]')).toHaveAttribute('data-job-id', '7')
    expect(logs.getByText('[attempt 2]')).toBeInTheDocument()
    expect(logs.queryByText('a loop body step of the same name')).not.toBeInTheDocument()
    expect(screen.getByText("Only the run's latest events are shown here.")).toBeInTheDocument()
  })
})

describe('StepDrawer output', () => {
  const step = { id: 'greet', kind: 'script', summary: '', needs: [], inputs: { name: { expr: 'flow_input.name' } } }
  const state = { status: 'succeeded', attempts: 1, duration: 1, jobs: [job(7, 2)] }

  it("shows the run's result as its last step's output, and its declared inputs", () => {
    render(
      <StepDrawer runId="R" step={step} state={state} events={[]} waits={[]} approvals={[]} output={{ value: 'hello ada' }} onClose={() => {}} />,
    )
    const output = screen.getByRole('heading', { name: 'Output' }).parentElement!
    expect(within(output).getByText('"hello ada"')).toBeInTheDocument()
    expect(screen.getByText(/"expr": "flow_input.name"/)).toBeInTheDocument()
  })

  it('says where the output of another step went', () => {
    render(<StepDrawer runId="R" step={step} state={state} events={[]} waits={[]} approvals={[]} onClose={() => {}} />)
    const output = screen.getByRole('heading', { name: 'Output' }).parentElement!
    expect(output).toHaveTextContent('Passed on to the next steps')
  })
})
