import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRouter } from '@tanstack/react-router'
import { render, screen, within } from '@testing-library/react'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Approval, Message, Usage } from '../../api/types'
import { transcriptTurns } from '../../lib/transcriptTurns'
import { Transcript } from './Transcript'

function msg(role: Message['role'], content: string, extra: Partial<Message> = {}): Message {
  return { role, content, images: [], reasoning: [], tool_calls: [], tool_call_id: null, name: null, is_error: false, ...extra }
}

const MESSAGES: Message[] = [
  msg('system', 'You are the support agent.'),
  msg('user', 'A-1001 arrived broken'),
  msg('assistant', 'Let me look it up.', {
    reasoning: [{ text: 'The customer wants a refund.' }],
    tool_calls: [{ id: 'call_lookup', name: 'lookup_order', arguments: { order_id: 'A-1001' } }],
  }),
  msg('tool', '{"paid": 129}', { tool_call_id: 'call_lookup', name: 'lookup_order' }),
  msg('assistant', 'I will refund it.', {
    tool_calls: [{ id: 'call_refund', name: 'issue_refund', arguments: { order_id: 'A-1001', amount: 129 } }],
  }),
  msg('tool', 'refunded 100.00 EUR on A-1001', { tool_call_id: 'call_refund', name: 'issue_refund' }),
  msg('assistant', 'Done: refunded 100.00 EUR on A-1001'),
]

function usage(n: number, extra: Partial<Usage> = {}): Usage {
  return {
    run_id: 'R', step_id: 'answer', job_id: 1, attempt: 1, model: `model-${n}`, provider: 'p',
    input_tokens: 10 * n, output_tokens: n, cost_usd: 0.001 * n, latency_ms: 100 * n, error: null, at: n, ...extra,
  } // prettier-ignore
}

const APPROVAL: Approval = {
  id: 'ap1', kind: 'tool_call', run_id: 'R', root_id: 'R', step_id: 'answer', path: 'f/demo/support',
  run_as: 'ada', message: 'issue_refund', approvers: [], allow_self_approval: true, status: 'approved',
  on_timeout: 'reject', created_at: 1_700_000_000, expires_at: null, decided_at: 1_700_000_060,
  decided_by: 'ada', comment: 'only 100',
  details: {
    request_id: 'call_refund', tool: 'issue_refund', arguments: { order_id: 'A-1001', amount: 129 },
    decision: { action: 'approve', arguments: { order_id: 'A-1001', amount: 100 }, actor: 'ada' },
  },
} // prettier-ignore

function json(body: unknown) {
  return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } })
}

function show(answers: Record<string, unknown>) {
  vi.stubGlobal(
    'fetch',
    vi.fn(async (request: Request) => {
      const url = new URL(request.url)
      const key = url.pathname + (url.pathname === '/api/approvals' ? url.search : '')
      if (!(key in answers)) throw new Error(`unexpected ${key}`)
      return json(answers[key])
    }),
  )
  const rootRoute = createRootRoute({ component: () => <Transcript runId="R" stepId="answer" active={false} /> })
  const router = createRouter({ routeTree: rootRoute, history: createMemoryHistory({ initialEntries: ['/'] }) })
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
}

afterEach(() => vi.unstubAllGlobals())

describe('Transcript', () => {
  it('shows turns with their usage, reasoning collapsed, calls with results, and the edited approval', async () => {
    show({
      '/api/runs/R/steps/answer/transcript': MESSAGES,
      // A call of another step is not this step's.
      '/api/runs/R/usage': [usage(1), usage(9, { step_id: 'other' }), usage(2), usage(3)],
      '/api/approvals?status=any&run_id=R': [APPROVAL],
    })
    const second = await screen.findByTestId('turn-1')
    const first = screen.getByTestId('turn-0')
    expect(within(first).getByTestId('turn-usage')).toHaveTextContent('model-1')
    expect(within(first).getByTestId('turn-usage')).toHaveTextContent('10 → 1 tokens')
    expect(within(first).getByTestId('turn-usage')).toHaveTextContent('100 ms')
    expect(await within(second).findByText('model-2')).toBeInTheDocument()
    expect(within(screen.getByTestId('turn-2')).getByTestId('turn-usage')).toHaveTextContent('30 → 3 tokens')

    // Reasoning is collapsed in a <details>.
    const reasoning = within(first).getByText('Reasoning').closest('details')!
    expect(reasoning).not.toHaveAttribute('open')
    expect(reasoning).toHaveTextContent('The customer wants a refund.')

    // Each call shows its arguments and its result, matched by id.
    const lookup = within(first).getByTestId('tool-call-lookup_order')
    expect(lookup).toHaveTextContent('"order_id": "A-1001"')
    expect(lookup).toHaveTextContent('{"paid": 129}')
    const refund = within(second).getByTestId('tool-call-issue_refund')
    expect(refund).toHaveTextContent('refunded 100.00 EUR on A-1001')

    // The approval at its call: who, when, the comment, and the diff of the edited arguments.
    const approval = await within(refund).findByRole('group', { name: 'Approval of issue_refund' })
    expect(approval).toHaveTextContent('approved by ada')
    expect(approval).toHaveTextContent(new Date(1_700_000_060_000).toLocaleString())
    expect(approval).toHaveTextContent('only 100')
    const diff = approval.querySelector('figure.diff')!
    expect(diff.querySelector('tr[data-kind="remove"]')).toHaveTextContent('"amount": 129')
    expect(diff.querySelector('tr[data-kind="add"]')).toHaveTextContent('"amount": 100')
    expect(within(first).queryByRole('group', { name: /^Approval/ })).not.toBeInTheDocument()
  })

  it('shows no diff when the approver kept the arguments, and a pending wait with a link', async () => {
    const kept = { ...APPROVAL, details: { ...APPROVAL.details, decision: { action: 'approve', arguments: { amount: 129, order_id: 'A-1001' } } } }
    const pending = { ...APPROVAL, id: 'ap2', status: 'pending', decided_at: null, decided_by: null, comment: null, details: { request_id: 'call_lookup' } }
    show({
      '/api/runs/R/steps/answer/transcript': MESSAGES.slice(0, 5),
      '/api/runs/R/usage': [usage(1), usage(2)],
      '/api/approvals?status=any&run_id=R': [kept, pending],
    })
    const refund = await screen.findByRole('group', { name: 'Approval of issue_refund' })
    expect(refund).toHaveTextContent('approved by ada')
    expect(refund.querySelector('figure.diff')).toBeNull()
    const lookup = await screen.findByRole('group', { name: 'Approval of lookup_order' })
    expect(within(lookup).getByRole('link', { name: 'Decide in Approvals' })).toBeInTheDocument()
    expect(screen.getByTestId('tool-call-issue_refund')).toHaveTextContent('No result yet.')
  })
})

describe('transcriptTurns', () => {
  const assistants = (m: readonly Message[]) => transcriptTurns(m, [], new Map()).turns.filter((t) => t.kind === 'assistant')

  it('leaves failed model calls out of the matching and lists them', () => {
    const { turns, usageMismatch, failedCalls } = transcriptTurns(
      MESSAGES,
      [usage(1), usage(5, { error: 'timeout' }), usage(2), usage(3)],
      new Map(),
    )
    const models = turns.flatMap((t) => (t.kind === 'assistant' ? [t.usage?.model] : []))
    expect(models).toEqual(['model-1', 'model-2', 'model-3'])
    expect(usageMismatch).toBe(false)
    expect(failedCalls.map((u) => u.error)).toEqual(['timeout'])
  })

  it('matches from the latest call back when earlier attempts recorded more calls', () => {
    const { turns, usageMismatch } = transcriptTurns(MESSAGES, [usage(7), usage(1), usage(2), usage(3)], new Map())
    expect(turns.flatMap((t) => (t.kind === 'assistant' ? [t.usage?.model] : []))).toEqual(['model-1', 'model-2', 'model-3'])
    expect(usageMismatch).toBe(true)
  })

  it('keeps a result naming no call of the transcript, and tool results out of the turns otherwise', () => {
    const orphan = msg('tool', 'stray', { tool_call_id: 'nope' })
    const { turns } = transcriptTurns([...MESSAGES, orphan], [], new Map())
    expect(turns.filter((t) => t.kind === 'orphan').map((t) => t.message.content)).toEqual(['stray'])
    expect(turns.filter((t) => t.kind !== 'orphan').every((t) => t.message.role !== 'tool')).toBe(true)
    expect(assistants(MESSAGES)).toHaveLength(3)
  })
})
