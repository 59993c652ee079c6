import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRoute, createRouter } from '@tanstack/react-router'
import { render, screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { StartRun } from './StartRun'

const HELLO = {
  steps: [{ id: 'greet', script: { path: 'f/demo/greet' } }],
  inputs: {
    type: 'object',
    properties: { name: { type: 'string' }, times: { type: 'integer' } },
    required: ['name'],
  },
}

function show(document: unknown) {
  const rootRoute = createRootRoute()
  const home = createRoute({
    getParentRoute: () => rootRoute,
    path: '/',
    component: () => <StartRun path="f/demo/hello" document={document} />,
  })
  const run = createRoute({ getParentRoute: () => rootRoute, path: '/runs/$runId', component: () => <p>run page</p> })
  const router = createRouter({
    routeTree: rootRoute.addChildren([home, run]),
    history: createMemoryHistory({ initialEntries: ['/'] }),
  })
  render(
    <QueryClientProvider client={new QueryClient()}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
  return router
}

afterEach(() => vi.unstubAllGlobals())

describe('StartRun', () => {
  it('submits the flow with the input its form built, then opens the run', async () => {
    const user = userEvent.setup()
    const fetch = vi.fn(
      async (_request: Request) =>
        new Response(JSON.stringify({ id: 'run-1', status: 'queued' }), {
          status: 201,
          headers: { 'Content-Type': 'application/json' },
        }),
    )
    vi.stubGlobal('fetch', fetch)
    const router = show(HELLO)
    const button = await screen.findByRole('button', { name: 'Start a run' })
    expect(button).toBeDisabled() // `name` is required
    await user.type(screen.getByLabelText(/^name/), 'Ada')
    await user.click(button)
    await waitFor(() => expect(router.state.location.pathname).toBe('/runs/run-1'))
    const request = fetch.mock.calls[0]![0]
    expect(new URL(request.url).pathname).toBe('/api/runs')
    expect(await request.json()).toEqual({ path: 'f/demo/hello', inputs: { name: 'Ada' }, draft: false, memory_id: null })
  })

  it('says so when the flow takes no input', async () => {
    show({ steps: [{ id: 'a', identity: {} }] })
    expect(await screen.findByText('This flow takes no input.')).toBeInTheDocument()
    expect(screen.getByRole('button', { name: 'Start a run' })).toBeEnabled()
  })
})
