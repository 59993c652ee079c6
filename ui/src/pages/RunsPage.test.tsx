import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRoute, createRouter } from '@tanstack/react-router'
import { render, screen, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { RunItem } from '../api/types'
import { dayStart, folderPrefix } from '../lib/runFilters'
import { RunsPage } from './RunsPage'

function run(id: string, status: string): RunItem {
  return {
    id,
    flow: 'hello',
    status,
    created_at: 1_700_000_000,
    finished_at: status === 'succeeded' ? 1_700_000_002 : null,
    run_as: 'ada',
    path: `f/demo/${id}`,
    version: 1,
    draft: false,
    cost_usd: 0.125,
    model_calls: 2,
    unpriced_calls: 0,
  }
}

function show(url = '/runs?status=succeeded') {
  // The page reads its route's search (`/authed/runs`): mount it at the same ids.
  const rootRoute = createRootRoute()
  const authed = createRoute({ getParentRoute: () => rootRoute, id: 'authed' })
  const runs = createRoute({
    getParentRoute: () => authed,
    path: '/runs',
    validateSearch: (s: Record<string, unknown>) => ({
      status: typeof s.status === 'string' ? (s.status as RunItem['status']) : undefined,
      path: typeof s.path === 'string' ? s.path : undefined,
      folder: typeof s.folder === 'string' ? s.folder : undefined,
      by: typeof s.by === 'string' ? s.by : undefined,
      from: typeof s.from === 'string' ? s.from : undefined,
      to: typeof s.to === 'string' ? s.to : undefined,
    }),
    component: RunsPage,
  })
  const router = createRouter({
    routeTree: rootRoute.addChildren([authed.addChildren([runs])]),
    history: createMemoryHistory({ initialEntries: [url] }),
  })
  render(
    <QueryClientProvider client={new QueryClient()}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
}

afterEach(() => vi.unstubAllGlobals())

describe('RunsPage', () => {
  it('lists runs with their filter and loads the next keyset page', async () => {
    const user = userEvent.setup()
    const fetch = vi.fn(async (request: Request) => {
      const cursor = new URL(request.url).searchParams.get('cursor')
      const body = cursor
        ? { runs: [run('older', 'succeeded')], next_cursor: null }
        : { runs: [run('newer', 'succeeded')], next_cursor: 'CUR1' }
      return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } })
    })
    vi.stubGlobal('fetch', fetch)
    show()

    expect(await screen.findByRole('link', { name: 'f/demo/newer' })).toBeInTheDocument()
    const first = new URL(fetch.mock.calls[0]![0].url)
    expect(first.pathname).toBe('/api/runs')
    expect(first.searchParams.get('status')).toBe('succeeded')
    expect(first.searchParams.get('cursor')).toBeNull()
    const row = screen.getByRole('link', { name: 'f/demo/newer' }).closest('tr')!
    expect(within(row).getByText('succeeded')).toBeInTheDocument()
    expect(within(row).getByText('ada')).toBeInTheDocument()
    expect(within(row).getByText('2.0 s')).toBeInTheDocument()
    expect(within(row).getByText('$0.13')).toBeInTheDocument()

    await user.click(screen.getByRole('button', { name: 'Load more' }))
    expect(await screen.findByRole('link', { name: 'f/demo/older' })).toBeInTheDocument()
    expect(new URL(fetch.mock.calls.at(-1)![0].url).searchParams.get('cursor')).toBe('CUR1')
    expect(screen.queryByRole('button', { name: 'Load more' })).not.toBeInTheDocument()
  })

  it('says what a waiting run waits for when the API says so', async () => {
    const fetch = vi.fn(async (_request: Request) => {
      const body = {
        runs: [
          { ...run('asleep', 'waiting'), waiting_for: 'sleeping until 2026-12-24T08:00:00Z' },
          { ...run('approving', 'waiting'), waiting_for: null },
        ],
        next_cursor: null,
      }
      return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } })
    })
    vi.stubGlobal('fetch', fetch)
    show('/runs?status=waiting')

    const asleep = (await screen.findByRole('link', { name: 'f/demo/asleep' })).closest('tr')!
    expect(within(asleep).getByText('sleeping until 2026-12-24T08:00:00Z')).toBeInTheDocument()
    const approving = screen.getByRole('link', { name: 'f/demo/approving' }).closest('tr')!
    expect(within(approving).queryByText(/sleeping|event/)).not.toBeInTheDocument()
  })

  it('asks the API to filter by folder, who started the runs and a range of days', async () => {
    const user = userEvent.setup()
    const fetch = vi.fn(async (_request: Request) => {
      const body = { runs: [{ ...run('only', 'failed'), cost_usd: null, model_calls: 0 }], next_cursor: null }
      return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } })
    })
    vi.stubGlobal('fetch', fetch)
    show('/runs?folder=f/team&by=olga&from=2026-01-02&to=2026-01-03')

    const row = (await screen.findByRole('link', { name: 'f/demo/only' })).closest('tr')!
    expect(within(row).getByTitle('No model calls')).toHaveTextContent('—')
    const query = new URL(fetch.mock.calls[0]![0].url).searchParams
    expect(query.get('path_prefix')).toBe('f/team/')
    expect(query.get('started_by')).toBe('olga')
    expect(Number(query.get('started_after'))).toBe(new Date(2026, 0, 2).getTime() / 1000)
    expect(Number(query.get('started_before'))).toBe(new Date(2026, 0, 4).getTime() / 1000)
    expect(screen.getByLabelText('Folder')).toHaveValue('f/team')

    await user.clear(screen.getByLabelText('Started by'))
    await user.type(screen.getByLabelText('Started by'), 'max')
    await user.click(screen.getByRole('button', { name: 'Filter' }))
    await vi.waitFor(() =>
      expect(new URL(fetch.mock.calls.at(-1)![0].url).searchParams.get('started_by')).toBe('max'),
    )
  })

  it('reads a folder and days as the API takes them', () => {
    expect(folderPrefix('f/team')).toBe('f/team/')
    expect(folderPrefix(' u/max/notes ')).toBe('u/max/notes')
    expect(folderPrefix('')).toBeUndefined()
    expect(dayStart('2026-03-01', 1)).toBe(new Date(2026, 2, 2).getTime() / 1000)
    expect(dayStart(undefined)).toBeUndefined()
  })
})
