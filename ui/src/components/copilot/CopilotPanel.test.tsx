import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { act, render, screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { CopilotPanel } from './CopilotPanel'
import { FakeEventSource } from '../../testing/fakeEventSource'

const PATH = 'f/demo/cp'
const BEFORE = 'summary: one\nsteps:\n  - id: a\n    identity: true\n'
const PROPOSED = { summary: 'two', steps: [{ id: 'a', identity: true }, { id: 'b', identity: true }] }
const DIFF = `--- ${PATH} (before)\n+++ ${PATH} (your draft)\n@@ -1,2 +1,2 @@\n-summary: one\n+summary: two\n steps:\n`

let nextEvent = 1
function event(kind: string, data: object) {
  return { id: nextEvent++, run_id: 't1', step_id: 'copilot', job_id: null, kind, data, at: 0 }
}

function answer(body: unknown, status = 200) {
  return new Response(body === null ? null : JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
}

type Msg = Record<string, unknown>
const user = (content: string): Msg => ({ role: 'user', content, tool_calls: [], is_error: false })
const said = (content: string, calls: string[] = []): Msg => ({
  role: 'assistant',
  content,
  tool_calls: calls.map((name, i) => ({ id: `c${i}`, name, arguments: {} })),
  is_error: false,
})
const result = (name: string, content: string, id: string): Msg => ({ role: 'tool', name, content, tool_call_id: id, tool_calls: [], is_error: false })

const approval = {
  id: 'a1', kind: 'tool_call', run_id: 't1', root_id: 't1', step_id: 'copilot', path: 'u/ada/copilot', run_as: 'ada',
  message: '', approvers: [], allow_self_approval: true, status: 'pending', on_timeout: 'reject', created_at: 0,
  expires_at: null, decided_at: null, decided_by: null, comment: null,
  details: { tool: 'test_run_flow', arguments: { inputs: { name: 'Ada' } } },
}

/** A fake copilot API: a turn starts running; `finish` ends it with `after` as its messages. */
function serve() {
  const state = {
    messages: [] as Msg[],
    running: null as string | null,
    approvals: [] as unknown[],
    /** A turn another tab started, that this one has not seen yet. */
    elsewhere: null as string | null,
    bodies: [] as unknown[],
  }
  const fetch = vi.fn(async (request: Request) => {
    const url = new URL(request.url)
    const method = request.method
    if (url.pathname === `/api/copilot/${PATH}/messages` && method === 'POST') {
      const body = (await request.json()) as { message: string }
      state.bodies.push(body)
      const busy = state.running ?? state.elsewhere
      if (busy) return answer({ type: 'RunStateError', message: `The previous turn of this conversation (run ${busy}) has not ended yet.` }, 409)
      state.messages.push(user(body.message))
      state.running = 't1'
      return answer({ run_id: 't1', conversation: 'c1' }, 201)
    }
    if (url.pathname === `/api/copilot/${PATH}` && method === 'GET') {
      return answer({ conversation: 'c1', flow: PATH, messages: state.messages, runs: [], running: state.running, pending_approvals: [] })
    }
    if (url.pathname === `/api/copilot/${PATH}` && method === 'DELETE') {
      state.messages = []
      return answer(null, 204)
    }
    if (url.pathname === '/api/approvals') return answer(state.approvals)
    if (url.pathname.startsWith('/api/approvals/a1/')) {
      state.approvals = []
      return answer({ ...approval, status: url.pathname.endsWith('approve') ? 'approved' : 'rejected' })
    }
    const draft = { path: PATH, owner: 'ada', kind: 'flow', summary: '', description: '', updated_at: 0, resource_type: null }
    if (url.pathname === `/api/drafts/${PATH}` && method === 'GET') return answer({ ...draft, value: PROPOSED })
    if (url.pathname === `/api/drafts/${PATH}` && method === 'PUT') {
      const body = (await request.json()) as { value: unknown }
      state.bodies.push(body)
      return answer({ ...draft, value: body.value })
    }
    return answer({ type: 'NotFound', message: `no ${method} ${url.pathname}` }, 404)
  })
  vi.stubGlobal('fetch', fetch)
  return { fetch, state }
}

function calls(fetch: ReturnType<typeof serve>['fetch'], pathname: string, method: string) {
  return fetch.mock.calls.map(([r]) => r as Request).filter((r) => new URL(r.url).pathname === pathname && r.method === method)
}

function show() {
  const onLoad = vi.fn()
  const prepare = vi.fn(async () => true)
  const client = new QueryClient({ defaultOptions: { queries: { retry: false }, mutations: { retry: false } } })
  render(
    <QueryClientProvider client={client}>
      <CopilotPanel path={PATH} text={BEFORE} prepare={prepare} onLoad={onLoad} onClose={() => {}} />
    </QueryClientProvider>,
  )
  return { onLoad, prepare }
}

async function ask(text: string) {
  await userEvent.type(await screen.findByLabelText('Message to the copilot'), text)
  await userEvent.click(screen.getByRole('button', { name: 'Send' }))
}

async function stream() {
  await waitFor(() => expect(FakeEventSource.made.some((s) => s.url.startsWith('/api/runs/t1/events'))).toBe(true))
  return FakeEventSource.made.find((s) => s.url.startsWith('/api/runs/t1/events'))!
}

beforeEach(() => {
  FakeEventSource.made = []
  vi.stubGlobal('EventSource', FakeEventSource)
})
afterEach(() => vi.unstubAllGlobals())

describe('CopilotPanel', () => {
  it('posts a message, shows the turn, and keeps Send disabled while it runs', async () => {
    const { fetch, state } = serve()
    const { prepare } = show()
    await ask('add a step')
    await waitFor(() => expect(calls(fetch, `/api/copilot/${PATH}/messages`, 'POST')).toHaveLength(1))
    expect(state.bodies).toEqual([{ message: 'add a step', model: null }])
    expect(prepare).toHaveBeenCalled()
    const conversation = await screen.findByRole('list', { name: 'Conversation' })
    expect(await within(conversation).findByText('add a step')).toBeInTheDocument()
    expect(await screen.findByText('The copilot is working…')).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Send' })).toBeDisabled()
  })

  it("shows the server's 409 when a turn is already in flight", async () => {
    const { state } = serve()
    state.elsewhere = 't0'
    show()
    await ask('hello')
    const alert = await screen.findByRole('alert')
    expect(alert).toHaveTextContent('Not sent: The previous turn of this conversation (run t0) has not ended yet.')
    // Nothing is lost: the message stays in the box to send again.
    expect(screen.getByLabelText('Message to the copilot')).toHaveValue('hello')
  })

  it('shows each tool call of the turn as its events arrive', async () => {
    serve()
    show()
    await ask('add a step')
    const source = await stream()
    act(() => source.send('model_turn', event('model_turn', { response: { message: { role: 'assistant', content: '', tool_calls: [{ id: 'x1', name: 'search_flows', arguments: {} }] } } })))
    const list = await screen.findByRole('list', { name: 'Tool calls of this turn' })
    expect(await within(list).findByText('search_flows')).toBeInTheDocument()
    expect(within(list).getByText('running…')).toBeInTheDocument()
    act(() => source.send('tool_result', event('tool_result', { result: { tool_call_id: 'x1', name: 'search_flows', content: '[]', is_error: false } })))
    expect(await within(list).findByText('done')).toBeInTheDocument()
  })

  it('asks before a test run, and approves or rejects it through the approvals API', async () => {
    const { fetch, state } = serve()
    state.approvals = [approval]
    show()
    await ask('test it')
    const source = await stream()
    act(() => source.send('model_turn', event('model_turn', { response: { message: { role: 'assistant', content: '', tool_calls: [{ id: 'x2', name: 'test_run_flow', arguments: {} }] } } })))
    const card = await screen.findByRole('region', { name: 'Run test_run_flow?' })
    const list = await screen.findByRole('list', { name: 'Tool calls of this turn' })
    expect(await within(list).findByText('waiting for you')).toBeInTheDocument()
    await userEvent.click(within(card).getByRole('button', { name: 'Approve' }))
    await waitFor(() => expect(calls(fetch, '/api/approvals/a1/approve', 'POST')).toHaveLength(1))
    expect(calls(fetch, '/api/approvals', 'GET').every((r) => new URL(r.url).searchParams.get('run_id') === 't1')).toBe(true)

    state.approvals = [{ ...approval }]
    const again = await screen.findByRole('region', { name: 'Run test_run_flow?' }, { timeout: 7000 })
    await userEvent.click(within(again).getByRole('button', { name: 'Reject' }))
    await waitFor(() => expect(calls(fetch, '/api/approvals/a1/reject', 'POST')).toHaveLength(1))
  }, 10_000)

  async function proposed() {
    const served = serve()
    const shown = show()
    await ask('add a step')
    const source = await stream()
    served.state.messages.push(said('', ['set_flow']), result('set_flow', JSON.stringify({ path: PATH, saved: 'as your draft', diff: DIFF }), 'c0'), said('Added b.'))
    served.state.running = null
    act(() => source.send('run_finished', event('run_finished', { status: 'succeeded' })))
    const change = await screen.findByRole('region', { name: `Proposed change to ${PATH}` }, { timeout: 3000 })
    expect(within(change).getByText('summary: two')).toBeInTheDocument()
    expect(within(change).getByText('summary: one')).toBeInTheDocument()
    return { ...served, ...shown, change }
  }

  it('shows a proposed change as a diff; Accept loads the draft into the editor', async () => {
    const { fetch, onLoad, change } = await proposed()
    await userEvent.click(within(change).getByRole('button', { name: 'Accept' }))
    await waitFor(() => expect(onLoad).toHaveBeenCalledWith('summary: two\nsteps:\n  - id: a\n    identity: true\n  - id: b\n    identity: true\n'))
    expect(calls(fetch, `/api/drafts/${PATH}`, 'PUT')).toHaveLength(0)
    expect(await within(change).findByText('Accepted: the editor shows it.')).toBeInTheDocument()
    expect(within(change).queryByRole('button', { name: 'Accept' })).not.toBeInTheDocument()
  })

  it("Reject writes the editor's previous text back as the draft", async () => {
    const { fetch, state, onLoad, change } = await proposed()
    await userEvent.click(within(change).getByRole('button', { name: 'Reject' }))
    await waitFor(() => expect(calls(fetch, `/api/drafts/${PATH}`, 'PUT')).toHaveLength(1))
    expect(state.bodies.at(-1)).toEqual({ kind: 'flow', value: BEFORE })
    expect(onLoad).toHaveBeenCalledWith(BEFORE)
  })

  it('New conversation forgets it (DELETE), after asking', async () => {
    const { fetch, state } = serve()
    state.messages = [user('add a step'), said('Added b.')]
    vi.stubGlobal('confirm', vi.fn(() => true))
    show()
    const conversation = await screen.findByRole('list', { name: 'Conversation' })
    expect(within(conversation).getByText('Added b.')).toBeInTheDocument()
    await userEvent.click(screen.getByRole('button', { name: 'New conversation' }))
    await waitFor(() => expect(calls(fetch, `/api/copilot/${PATH}`, 'DELETE')).toHaveLength(1))
    expect(await screen.findByText(/Ask the copilot to build or change this flow/)).toBeInTheDocument()
    expect(screen.queryByText('Added b.')).not.toBeInTheDocument()
  })
})
