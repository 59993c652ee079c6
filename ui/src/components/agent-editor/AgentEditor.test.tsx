import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRouter } from '@tanstack/react-router'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { AgentEditor } from './AgentEditor'

Range.prototype.getClientRects ??= () => [] as unknown as DOMRectList
Range.prototype.getBoundingClientRect ??= () => new DOMRect()

const PATH = 'f/demo/triage'
const DEPLOYED = {
  model: 'fake',
  system: 'You triage.\nLook first.',
  max_iterations: 6,
  memory: { kind: 'window', context_length: 10 },
  tools: [{ name: 'lookup', script: 'def main(id: str):\n    return id\n' }],
}

function answer(body: unknown, status = 200) {
  return new Response(body === undefined ? null : JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json' },
  })
}

function itemOut(version: number, value: unknown) {
  return {
    path: PATH, kind: 'resource', summary: 'Triage tickets', description: '', version, updated_by: 'ada',
    updated_at: 1_700_000_000, resource_type: 'ai_agent', secret: false, deleted: false, value,
  } // prettier-ignore
}

type Stored = { value: unknown; summary: string } | null

/** A fake API that validates drafts as the server does (here: max_iterations of at least 1). */
function serve(initialDraft: Stored = null) {
  const state = { version: 3, value: DEPLOYED as unknown, draft: initialDraft }
  const fetch = vi.fn(async (request: Request) => {
    const url = new URL(request.url)
    const method = request.method
    if (url.pathname === `/api/items/${PATH}`) return answer(itemOut(state.version, state.value))
    if (url.pathname === `/api/drafts/${PATH}`) {
      if (method === 'GET')
        return state.draft
          ? answer({ ...itemOut(0, state.draft.value), owner: 'ada', summary: state.draft.summary })
          : answer({ type: 'ItemNotFound', message: `No draft at ${PATH}.` }, 404)
      if (method === 'DELETE') {
        state.draft = null
        return answer(undefined, 204)
      }
      const body = await request.clone().json()
      if (body.value.max_iterations < 1)
        return answer(
          {
            type: 'InvalidValue',
            message: `${PATH} is not a valid agent: at max_iterations: Input should be greater than or equal to 1`,
            hint: 'An agent holds the keys of an inline ai_agent step.',
            problems: ['at max_iterations: Input should be greater than or equal to 1'],
          },
          422,
        )
      state.draft = { value: body.value, summary: body.summary }
      return answer({ ...itemOut(0, body.value), owner: 'ada' })
    }
    if (url.pathname === `/api/deploy/${PATH}` && state.draft) {
      state.version += 1
      state.value = state.draft.value
      state.draft = null
      return answer(itemOut(state.version, state.value))
    }
    return answer({ type: 'NotFound', message: `no ${method} ${url.pathname}` }, 404)
  })
  vi.stubGlobal('fetch', fetch)
  return { fetch, state }
}

function show() {
  const rootRoute = createRootRoute({ component: () => <AgentEditor path={PATH} from="f/demo/support" delay={40} /> })
  const router = createRouter({ routeTree: rootRoute, history: createMemoryHistory({ initialEntries: ['/'] }) })
  const client = new QueryClient({ defaultOptions: { queries: { retry: false }, mutations: { retry: false } } })
  render(
    <QueryClientProvider client={client}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
}

function puts(fetch: ReturnType<typeof serve>['fetch']) {
  return fetch.mock.calls.map(([r]) => r).filter((r) => r.method === 'PUT')
}

afterEach(() => vi.unstubAllGlobals())

describe('AgentEditor', () => {
  it('autosaves an edit as the draft once the user pauses, and says so', async () => {
    const { fetch, state } = serve()
    show()
    const system = await screen.findByLabelText('System prompt')
    expect(system).toHaveValue(DEPLOYED.system)
    expect(screen.getByText('Deployed v3')).toBeInTheDocument()
    expect(screen.getByTestId('agent-showing')).toHaveTextContent('deployed version 3')
    expect(screen.getByRole('link', { name: 'Back to f/demo/support' })).toHaveAttribute('href', '/edit/f/demo/support')

    fireEvent.change(system, { target: { value: 'You route.\nLook first.' } })
    fireEvent.change(system, { target: { value: 'You route tickets.\nLook first.' } })
    expect(screen.getByRole('status')).toHaveTextContent('Saving…')
    await waitFor(() => expect(screen.getByRole('status')).toHaveTextContent('Draft saved'))

    // One save, of the last text, with every other key and the summary as they were.
    expect(puts(fetch)).toHaveLength(1)
    expect(await puts(fetch)[0]!.json()).toEqual({
      kind: 'resource',
      resource_type: 'ai_agent',
      summary: 'Triage tickets',
      description: '',
      value: { ...DEPLOYED, system: 'You route tickets.\nLook first.' },
    })
    expect(state.version).toBe(3)
    expect(screen.getByTestId('draft-badge')).toHaveTextContent('Draft')
    expect(screen.getByTestId('agent-showing')).toHaveTextContent('your draft (deployed: version 3)')
  })

  it("shows the server's refusal, keeps the user's text and the last good draft, and saves once fixed", async () => {
    const { fetch, state } = serve()
    show()
    fireEvent.change(await screen.findByLabelText('System prompt'), { target: { value: 'Good one.' } })
    await waitFor(() => expect(screen.getByRole('status')).toHaveTextContent('Draft saved'))

    const iterations = screen.getByLabelText('Max iterations')
    fireEvent.change(iterations, { target: { value: '0' } })
    const refusal = await screen.findByRole('alert')
    expect(refusal).toHaveTextContent('Draft not saved')
    expect(within(refusal).getByRole('listitem')).toHaveTextContent('at max_iterations: Input should be greater')
    expect(screen.getByRole('status')).toHaveTextContent('Draft not saved')
    expect(iterations).toHaveValue(0)
    expect(state.draft?.value).toEqual({ ...DEPLOYED, system: 'Good one.' })
    expect(screen.getByRole('button', { name: 'Deploy' })).toBeDisabled()

    fireEvent.change(iterations, { target: { value: '4' } })
    await waitFor(() => expect(screen.getByRole('status')).toHaveTextContent('Draft saved'))
    expect(screen.queryByRole('alert')).toBeNull()
    expect(screen.getByRole('button', { name: 'Deploy' })).toBeEnabled()
    expect(state.draft?.value).toEqual({ ...DEPLOYED, system: 'Good one.', max_iterations: 4 })
    expect(puts(fetch)).toHaveLength(3)
  })

  it('opens the draft when there is one, and discards it back to the deployed agent', async () => {
    const { fetch } = serve({ value: { ...DEPLOYED, system: 'Drafted.' }, summary: 'Triage tickets' })
    const user = userEvent.setup()
    show()
    expect(await screen.findByLabelText('System prompt')).toHaveValue('Drafted.')
    expect(screen.getByTestId('draft-badge')).toBeInTheDocument()

    await user.click(screen.getByRole('button', { name: 'Discard draft' }))
    await user.click(screen.getByRole('button', { name: 'Discard' }))
    await waitFor(() => expect(screen.getByLabelText('System prompt')).toHaveValue(DEPLOYED.system))
    expect(screen.getByText('Deployed v3')).toBeInTheDocument()
    expect(fetch.mock.calls.some(([r]) => r.method === 'DELETE')).toBe(true)
    expect(puts(fetch)).toHaveLength(0)
  })

  it('deploys the draft, pending edit included, as the next version', async () => {
    const { fetch, state } = serve()
    const user = userEvent.setup()
    show()
    fireEvent.change(await screen.findByLabelText('System prompt'), { target: { value: 'Deploy me.' } })
    await user.type(screen.getByLabelText('What changed'), 'new prompt')
    await user.click(screen.getByRole('button', { name: 'Deploy' }))

    await waitFor(() => expect(screen.getByText('Deployed v4')).toBeInTheDocument())
    const deploy = fetch.mock.calls.map(([r]) => r).find((r) => r.method === 'POST')!
    expect(new URL(deploy.url).pathname).toBe(`/api/deploy/${PATH}`)
    expect(await deploy.json()).toEqual({ message: 'new prompt', agents: [] })
    expect(state.value).toEqual({ ...DEPLOYED, system: 'Deploy me.' })
    expect(screen.getByLabelText('System prompt')).toHaveValue('Deploy me.')
    expect(screen.queryByTestId('draft-badge')).toBeNull()
    expect(screen.getByRole('status')).toHaveTextContent('No unsaved changes')
  })
})
