import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRoute, createRouter } from '@tanstack/react-router'
import { render, screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { NewValueForm, newValueBody } from './NewValueForm'
import { on, stubFetch } from './testing'

function show() {
  const rootRoute = createRootRoute()
  const home = createRoute({ getParentRoute: () => rootRoute, path: '/', component: () => <NewValueForm folders={['ops']} /> })
  const item = createRoute({ getParentRoute: () => rootRoute, path: '/workspace/$', component: () => <p>item page</p> })
  const router = createRouter({ routeTree: rootRoute.addChildren([home, item]), history: createMemoryHistory({ initialEntries: ['/'] }) })
  const client = new QueryClient({ defaultOptions: { queries: { retry: false }, mutations: { retry: false } } })
  render(
    <QueryClientProvider client={client}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
  return router
}

afterEach(() => vi.unstubAllGlobals())

describe('a new variable or resource', () => {
  it('writes a secret that does not exist yet, then opens it', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(
      on('PUT', '/api/items/f/ops/key', { body: { path: 'f/ops/key', kind: 'variable', secret: true, value: null } }),
    )
    const router = show()
    await user.type(await screen.findByLabelText('Path'), 'key')
    await user.selectOptions(screen.getByLabelText('Kind'), 'secret')
    const field = screen.getByLabelText('Secret value')
    expect(field).toHaveAttribute('type', 'password')
    await user.type(field, 'sk-typed')
    expect(document.body.innerHTML).not.toContain('sk-typed')
    await user.click(screen.getByRole('button', { name: 'Create' }))
    await waitFor(() => expect(router.state.location.pathname).toBe('/workspace/f/ops/key'))
    expect(calls.map((c) => c.method)).toEqual(['GET', 'PUT']) // looked first: it was not there
    expect(calls[1]!.body).toEqual({ kind: 'variable', value: 'sk-typed', secret: true, base_version: 0 })
  })

  it('refuses a path that is taken, keeping what was typed', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(on('GET', '/api/items/f/ops/region', { body: { path: 'f/ops/region', kind: 'variable' } }))
    show()
    await user.type(await screen.findByLabelText('Path'), 'region')
    await user.type(screen.getByLabelText('Value'), 'eu')
    await user.click(screen.getByRole('button', { name: 'Create' }))
    expect(await screen.findByRole('alert')).toHaveTextContent('There is already an item at f/ops/region.')
    expect(calls.some((c) => c.method === 'PUT')).toBe(false)
    expect(screen.getByLabelText('Value')).toHaveValue('eu')
  })

  it('needs a resource’s type and JSON value', () => {
    expect(newValueBody('resource', '{"a": 1}', '')).toBeInstanceOf(Error)
    expect(newValueBody('resource', '{nope', 'openai')).toBeInstanceOf(Error)
    expect(newValueBody('resource', '{"a": 1}', ' openai ')).toEqual({
      kind: 'resource',
      value: { a: 1 },
      resource_type: 'openai',
      base_version: 0,
    })
  })
})
