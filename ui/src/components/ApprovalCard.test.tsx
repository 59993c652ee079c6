import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRouter } from '@tanstack/react-router'
import { fireEvent, render, screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { setCsrfToken } from '../api/client'
import type { Approval } from '../api/types'
import { ApprovalCard } from './ApprovalCard'

const TOOL_CALL: Approval = {
  id: 'ap1',
  kind: 'tool_call',
  run_id: 'r1',
  root_id: 'r1',
  step_id: 'agent',
  path: 'f/support/refunds',
  run_as: 'max',
  message: 'refund {"order": "A1", "amount": 20}',
  approvers: [],
  allow_self_approval: true,
  status: 'pending',
  on_timeout: 'reject',
  created_at: Date.now() / 1000 - 120,
  expires_at: null,
  decided_at: null,
  decided_by: null,
  comment: null,
  details: {
    tool: 'refund',
    arguments: { order: 'A1', amount: 20 },
    parameters: {
      type: 'object',
      properties: { order: { type: 'string' }, amount: { type: 'number' } },
      required: ['order', 'amount'],
    },
  },
}

function show(approval: Approval) {
  const rootRoute = createRootRoute({ component: () => <ApprovalCard approval={approval} /> })
  const router = createRouter({ routeTree: rootRoute, history: createMemoryHistory({ initialEntries: ['/'] }) })
  const client = new QueryClient({ defaultOptions: { mutations: { retry: false } } })
  render(
    <QueryClientProvider client={client}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
}

function answer(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
}

afterEach(() => {
  vi.unstubAllGlobals()
  setCsrfToken(null)
})

describe('ApprovalCard', () => {
  it('approves a tool call with edited arguments, sending the CSRF token', async () => {
    const user = userEvent.setup()
    const fetch = vi.fn(async (_request: Request) => answer({ ...TOOL_CALL, status: 'approved' }))
    vi.stubGlobal('fetch', fetch)
    setCsrfToken('csrf-123')
    show(TOOL_CALL)

    expect(await screen.findByRole('article', { name: /refund/ })).toBeInTheDocument()
    await user.click(screen.getByRole('button', { name: 'Edit arguments' }))
    fireEvent.change(screen.getByLabelText(/^amount/), { target: { value: '15' } })
    await user.type(screen.getByLabelText('Feedback for the model (optional)'), 'partial refund')
    await user.click(screen.getByRole('button', { name: 'Approve' }))

    await waitFor(() => expect(fetch).toHaveBeenCalledTimes(1))
    const request = fetch.mock.calls[0]![0]
    expect(request.method).toBe('POST')
    expect(new URL(request.url).pathname).toBe('/api/approvals/ap1/approve')
    expect(request.headers.get('X-CSRF-Token')).toBe('csrf-123')
    expect(await request.json()).toEqual({
      comment: 'partial refund',
      edited_arguments: { order: 'A1', amount: 15 },
    })
  })

  it('will not approve arguments that miss a required field', async () => {
    const user = userEvent.setup()
    vi.stubGlobal('fetch', vi.fn())
    show(TOOL_CALL)
    await user.click(await screen.findByRole('button', { name: 'Edit arguments' }))
    await user.clear(screen.getByLabelText(/^order/))
    expect(screen.getByText('order: is required')).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Approve' })).toBeDisabled()
  })

  it('shows the API’s message and hint when a decision is refused', async () => {
    const user = userEvent.setup()
    vi.stubGlobal(
      'fetch',
      vi.fn(async () =>
        answer(
          { type: 'PermissionDenied', message: 'max may not decide this.', hint: 'Ask an approver.', problems: null },
          403,
        ),
      ),
    )
    show({ ...TOOL_CALL, kind: 'step', message: 'Ship it?', details: null })
    await user.click(await screen.findByRole('button', { name: 'Reject' }))
    const alert = await screen.findByRole('alert')
    expect(alert).toHaveTextContent('max may not decide this.')
    expect(alert).toHaveTextContent('Ask an approver.')
  })

  it('answers a question', async () => {
    const user = userEvent.setup()
    const fetch = vi.fn(async (_request: Request) => answer({ ...TOOL_CALL, status: 'approved' }))
    vi.stubGlobal('fetch', fetch)
    show({ ...TOOL_CALL, kind: 'question', message: 'Which order?', details: { question: 'Which order?' } })
    await user.type(await screen.findByLabelText('Your answer'), 'A1')
    await user.click(screen.getByRole('button', { name: 'Answer' }))
    await waitFor(() => expect(fetch).toHaveBeenCalledTimes(1))
    const request = fetch.mock.calls[0]![0]
    expect(new URL(request.url).pathname).toBe('/api/approvals/ap1/answer')
    expect(await request.json()).toEqual({ text: 'A1' })
  })

  it('extends a budget past its limit, or stops the agent', async () => {
    const user = userEvent.setup()
    const fetch = vi.fn(async (_request: Request) => answer({ ...TOOL_CALL, status: 'approved' }))
    vi.stubGlobal('fetch', fetch)
    show({ ...TOOL_CALL, kind: 'budget', message: 'Budget reached', details: { bound: 'max_requests', limit: 5, used: 5 } })
    const limit = await screen.findByLabelText('New limit')
    expect(limit).toHaveValue(10)
    await user.clear(limit)
    await user.type(limit, '4')
    expect(screen.getByRole('button', { name: 'Extend' })).toBeDisabled() // not above the limit
    await user.clear(limit)
    await user.type(limit, '8')
    await user.click(screen.getByRole('button', { name: 'Extend' }))
    await waitFor(() => expect(fetch).toHaveBeenCalledTimes(1))
    expect(await fetch.mock.calls[0]![0].json()).toEqual({ new_limit: 8 })
    await user.click(screen.getByRole('button', { name: 'Stop the agent' }))
    await waitFor(() => expect(fetch).toHaveBeenCalledTimes(2))
    expect(await fetch.mock.calls[1]![0].json()).toEqual({ new_limit: null })
  })
})
