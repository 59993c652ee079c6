import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRoute, createRouter } from '@tanstack/react-router'
import { render, screen } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { describe, expect, it } from 'vitest'
import { NewItemPanel, flowPathProblem } from './NewItemPanel'

function mount() {
  const root = createRootRoute()
  const home = createRoute({
    getParentRoute: () => root,
    path: '/',
    component: () => <NewItemPanel folders={['demo']} prefix="" />,
  })
  const editor = createRoute({ getParentRoute: () => root, path: '/edit/$', component: () => <p>the editor</p> })
  const router = createRouter({
    routeTree: root.addChildren([home, editor]),
    history: createMemoryHistory({ initialEntries: ['/'] }),
  })
  render(
    <QueryClientProvider client={new QueryClient()}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
  return router
}

describe('flowPathProblem', () => {
  it('takes f/<folder>/<name> and u/<user>/<name>, deeper ones too', () => {
    expect(flowPathProblem('f/demo/triage')).toBeNull()
    expect(flowPathProblem('u/ada/notes/daily')).toBeNull()
  })
  it('refuses other shapes', () => {
    for (const bad of ['triage', 'f/demo', 'f/demo/', 'x/demo/triage', 'f//triage'])
      expect(flowPathProblem(bad)).toMatch(/f\/<folder>\/<name>/)
  })
})

describe('NewItemPanel', () => {
  it('opens the flow editor at the path typed', async () => {
    const router = mount()
    const user = userEvent.setup()
    await user.click(await screen.findByText('New…'))
    const field = screen.getByLabelText('New flow at')
    expect(field).toHaveValue('f/demo/')
    await user.type(field, 'invoices')
    await user.click(screen.getByRole('button', { name: 'Open in the flow editor' }))
    expect(await screen.findByText('the editor')).toBeInTheDocument()
    expect(router.state.location.pathname).toBe('/edit/f/demo/invoices')
  })

  it('says what is wrong with a path and stays', async () => {
    const router = mount()
    const user = userEvent.setup()
    await user.click(await screen.findByText('New…'))
    await user.click(screen.getByRole('button', { name: 'Open in the flow editor' }))
    expect(screen.getByRole('alert')).toHaveTextContent('A path is f/<folder>/<name>')
    expect(router.state.location.pathname).toBe('/')
  })
})
