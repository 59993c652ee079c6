import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRoute, createRouter } from '@tanstack/react-router'
import { render, screen, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Run } from '../api/types'
import { RunsPage } from './RunsPage'

function run(id: string, status: string): Run {
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
  }
}

function show() {
  // The page reads its route's search (`/authed/runs`): mount it at the same ids.
  const rootRoute = createRootRoute()
  const authed = createRoute({ getParentRoute: () => rootRoute, id: 'authed' })
  const runs = createRoute({
    getParentRoute: () => authed,
    path: '/runs',
    validateSearch: (s: Record<string, unknown>) => ({
      status: typeof s.status === 'string' ? (s.status as Run['status']) : undefined,
      path: typeof s.path === 'string' ? s.path : undefined,
    }),
    component: RunsPage,
  })
  const router = createRouter({
    routeTree: rootRoute.addChildren([authed.addChildren([runs])]),
    history: createMemoryHistory({ initialEntries: ['/runs?status=succeeded'] }),
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

    await user.click(screen.getByRole('button', { name: 'Load more' }))
    expect(await screen.findByRole('link', { name: 'f/demo/older' })).toBeInTheDocument()
    expect(new URL(fetch.mock.calls.at(-1)![0].url).searchParams.get('cursor')).toBe('CUR1')
    expect(screen.queryByRole('button', { name: 'Load more' })).not.toBeInTheDocument()
  })
})
