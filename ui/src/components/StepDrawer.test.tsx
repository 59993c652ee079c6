import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render as renderBare, screen, waitFor, within } from '@testing-library/react'
import type { ReactElement } from 'react'
import { afterEach, describe, expect, it, vi } from 'vitest'
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

function answer(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
}

/** The API's record of a job: `recorded` as the worker stored it (null: it stored none). */
function serveJob(recorded: { inputs: unknown; result: unknown } | null) {
  const fetch = vi.fn(async (request: Request) => {
    const match = new URL(request.url).pathname.match(/^\/api\/runs\/R\/jobs\/(\d+)$/)
    if (!match) return answer({ type: 'NotFound', message: 'no route' }, 404)
    return answer({ ...job(Number(match[1]), 2), inputs: recorded?.inputs ?? null, result: recorded?.result ?? null })
  })
  vi.stubGlobal('fetch', fetch)
  return fetch
}

afterEach(() => vi.unstubAllGlobals())

function render(ui: ReactElement) {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return renderBare(<QueryClientProvider client={client}>{ui}</QueryClientProvider>)
}

function log(id: number, run_id: string, job_id: number, text: string): RunEvent {
  return { id, run_id, step_id: 'greet', job_id, kind: 'log', data: { text, stream: 'stdout' }, at: 1 }
}

describe('StepDrawer', () => {
  it("shows the logs of the step's own jobs, each with its attempt", () => {
    serveJob(null)
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

  it("shows the run's result as its last step's output, and its declared inputs, when the job recorded none", async () => {
    const fetch = serveJob(null)
    render(
      <StepDrawer runId="R" step={step} state={state} events={[]} waits={[]} approvals={[]} output={{ value: 'hello ada' }} onClose={() => {}} />,
    )
    await waitFor(() => expect(fetch).toHaveBeenCalled())
    const output = screen.getByRole('region', { name: 'Output' })
    expect(within(output).getByText('"hello ada"')).toBeInTheDocument()
    expect(screen.getByText(/"expr": "flow_input.name"/)).toBeInTheDocument()
  })

  it('shows the inputs and output its attempt recorded, secrets masked by the worker', async () => {
    serveJob({ inputs: { name: 'ada', token: '***' }, result: 'hello ada ***' })
    render(<StepDrawer runId="R" step={step} state={state} events={[]} waits={[]} approvals={[]} onClose={() => {}} />)
    const inputs = screen.getByRole('region', { name: 'Inputs' })
    expect(await within(inputs).findByText(/"token": "\*\*\*"/)).toBeInTheDocument()
    expect(within(inputs).getByText(/As attempt 2 ran with them/)).toBeInTheDocument()
    expect(within(screen.getByRole('region', { name: 'Output' })).getByText('"hello ada ***"')).toBeInTheDocument()
  })

  it('says when a step records no output of its own', async () => {
    const fetch = serveJob(null)
    render(<StepDrawer runId="R" step={step} state={state} events={[]} waits={[]} approvals={[]} onClose={() => {}} />)
    await waitFor(() => expect(fetch).toHaveBeenCalled())
    expect(screen.getByRole('region', { name: 'Output' })).toHaveTextContent('This step records no output of its own.')
  })

  it('asks nothing before the step ended', () => {
    const fetch = serveJob(null)
    const running = { ...state, status: 'running', jobs: [{ ...job(7, 1), status: 'running', finished_at: null }] }
    render(<StepDrawer runId="R" step={step} state={running} events={[]} waits={[]} approvals={[]} onClose={() => {}} />)
    expect(screen.getByRole('region', { name: 'Output' })).toHaveTextContent('None yet.')
    expect(fetch).not.toHaveBeenCalled()
  })
})
