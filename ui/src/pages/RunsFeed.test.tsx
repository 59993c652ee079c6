import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRoute, createRouter } from '@tanstack/react-router'
import { act, render, screen } from '@testing-library/react'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { FALLBACK_POLL, pollFor } from '../api/runFeed'
import type { RunItem } from '../api/types'
import { RunsPage } from './RunsPage'
import { FakeEventSource } from '../testing/fakeEventSource'

function running(id: string): RunItem {
  return {
    id, flow: 'hello', status: 'running', created_at: 1_700_000_000, finished_at: null, run_as: 'ada',
    path: `f/demo/${id}`, version: 1, draft: false, cost_usd: null, model_calls: 0, unpriced_calls: 0,
  }
}

function show() {
  const rootRoute = createRootRoute()
  const authed = createRoute({ getParentRoute: () => rootRoute, id: 'authed' })
  const runs = createRoute({ getParentRoute: () => authed, path: '/runs', component: RunsPage })
  const router = createRouter({
    routeTree: rootRoute.addChildren([authed.addChildren([runs])]),
    history: createMemoryHistory({ initialEntries: ['/runs'] }),
  })
  render(
    <QueryClientProvider client={new QueryClient()}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

let fetch: ReturnType<typeof vi.fn>
let status = 'running'

beforeEach(() => {
  FakeEventSource.made = []
  status = 'running'
  vi.stubGlobal('EventSource', FakeEventSource)
  fetch = vi.fn(async (_request: Request) => {
    const body = { runs: [{ ...running('r1'), status }], next_cursor: null }
    return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } })
  })
  vi.stubGlobal('fetch', fetch)
})

afterEach(() => vi.unstubAllGlobals())

describe('RunsPage over the runs feed', () => {
  it('reads the list again on a feed message, and does not poll while the feed is live', async () => {
    show()
    expect(await screen.findByRole('link', { name: 'f/demo/r1' })).toBeInTheDocument()
    const [source] = FakeEventSource.made
    expect(source!.url).toBe('/api/runs/feed')
    act(() => source!.open())
    expect(await screen.findByRole('status', { name: 'The list updates as runs change' })).toHaveTextContent('Live')
    // Opening reads the list once more (changes before the feed was open).
    await vi.waitFor(() => expect(fetch).toHaveBeenCalledTimes(2))

    // A running run used to be polled every 3 s: with the feed live, nothing is.
    await act(() => sleep(3500))
    expect(fetch).toHaveBeenCalledTimes(2)

    status = 'succeeded'
    act(() => source!.send('run_finished', { id: 9, run_id: 'r1', kind: 'run_finished', status: 'succeeded' }))
    expect(await screen.findByText('succeeded')).toBeInTheDocument()
    expect(fetch).toHaveBeenCalledTimes(3)
    expect(new URL((fetch.mock.calls.at(-1)![0] as Request).url).pathname).toBe('/api/runs')
  }, 10_000)

  it('reads a burst of changes once, then again after the burst', async () => {
    show()
    await screen.findByRole('link', { name: 'f/demo/r1' })
    const [source] = FakeEventSource.made
    act(() => source!.open())
    await vi.waitFor(() => expect(fetch).toHaveBeenCalledTimes(2))
    await act(() => sleep(600))
    act(() => {
      for (let id = 1; id <= 5; id++) source!.send('run_queued', { id, run_id: `r${id}`, kind: 'run_queued' })
    })
    await vi.waitFor(() => expect(fetch).toHaveBeenCalledTimes(3))
    await act(() => sleep(700))
    expect(fetch).toHaveBeenCalledTimes(3)
  }, 10_000)

  it('says when the feed is down, and then polls slowly', async () => {
    show()
    await screen.findByRole('link', { name: 'f/demo/r1' })
    const [source] = FakeEventSource.made
    act(() => source!.open())
    expect(await screen.findByText('Live')).toBeInTheDocument()
    act(() => source!.fail())
    expect(await screen.findByText('Reconnecting…')).toBeInTheDocument()
    expect(screen.queryByText('Live')).not.toBeInTheDocument()
    expect(pollFor('down')).toBe(FALLBACK_POLL)
    expect(pollFor('live')).toBe(false)
    expect(pollFor('unsupported')).toBeUndefined()
  })
})
