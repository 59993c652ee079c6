import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render, screen, within } from '@testing-library/react'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { JournalEntry } from '../../api/runs'
import { Journal, JournalList } from './Journal'

const ENTRIES: JournalEntry[] = [
  { seq: 1, kind: 'user_message', at: 1_700_000_000, replayed: true, data: { messages: [{ role: 'user', content: 'A-1001 broke' }] } },
  {
    seq: 2, kind: 'model_response', at: 1_700_000_001, replayed: true,
    data: { response: { message: { content: 'I will refund it.', tool_calls: [{ name: 'issue_refund' }] } } },
  },
  { seq: 3, kind: 'approval_decided', at: 1_700_000_060, replayed: false, data: { call_id: 'c', decision: { action: 'approve', actor: 'ada', arguments: { amount: 100 } } } },
  { seq: 4, kind: 'tool_finished', at: 1_700_000_061, replayed: false, data: { result: { name: 'issue_refund', content: 'refunded 100.00 EUR' } } },
] // prettier-ignore

afterEach(() => vi.unstubAllGlobals())

describe('Journal', () => {
  it('marks each entry replayed or ran live, in words, with its kind, time and a summary', () => {
    render(<JournalList entries={ENTRIES} />)
    const items = within(screen.getByRole('list', { name: 'Journal entries' })).getAllByRole('listitem')
    expect(items.map((li) => li.querySelector('.journal-mark')!.textContent)).toEqual([
      'replayed',
      'replayed',
      'ran live',
      'ran live',
    ])
    expect(items[1]).toHaveTextContent('model_response')
    expect(items[1]).toHaveTextContent('I will refund it. — calls issue_refund')
    expect(items[2]).toHaveTextContent('approve by ada (arguments edited)')
    expect(items[3]).toHaveTextContent('issue_refund: refunded 100.00 EUR')
    expect(items[0]).toHaveTextContent(new Date(1_700_000_000_000).toLocaleString())
    expect(screen.getByText('2 of 4 replayed from the journal, 2 ran live.')).toBeInTheDocument()
  })

  it('reads the step’s journal, and shows the API’s error when it cannot', async () => {
    const fetch = vi.fn(async (request: Request) =>
      new URL(request.url).pathname === '/api/runs/R/steps/answer/journal'
        ? new Response(JSON.stringify(ENTRIES.slice(0, 1)), { status: 200 })
        : new Response(JSON.stringify({ type: 'RunNotFound', message: 'No run X.', hint: null }), { status: 404 }),
    )
    vi.stubGlobal('fetch', fetch)
    const client = new QueryClient()
    const { unmount } = render(
      <QueryClientProvider client={client}>
        <Journal runId="R" stepId="answer" active={false} />
      </QueryClientProvider>,
    )
    expect(await screen.findByText('replayed')).toBeInTheDocument()
    unmount()
    render(
      <QueryClientProvider client={client}>
        <Journal runId="X" stepId="answer" active={false} />
      </QueryClientProvider>,
    )
    expect(await screen.findByRole('alert')).toHaveTextContent('No run X.')
  })
})
