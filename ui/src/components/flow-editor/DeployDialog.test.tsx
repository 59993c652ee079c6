import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render, screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { DeployDialog } from './DeployDialog'

function answer(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
}

const ITEM = {
  path: 'f/demo/flow', kind: 'flow', summary: '', description: '', version: 3, updated_by: 'ada',
  updated_at: 0, resource_type: null, secret: false, deleted: false, value: { steps: [] },
}

/** Serve the linked drafts and the deploy; record what the deploy was sent. */
function serve(agents: string[], deploy: Response = answer(ITEM)) {
  const sent: unknown[] = []
  vi.stubGlobal(
    'fetch',
    vi.fn(async (request: Request) => {
      const url = new URL(request.url)
      if (url.pathname === '/api/linked-drafts/f/demo/flow') return answer({ path: 'f/demo/flow', agents })
      if (url.pathname === '/api/deploy/f/demo/flow' && request.method === 'POST') {
        sent.push(await request.json())
        return deploy
      }
      return answer({ type: 'NotFound', message: 'no' }, 404)
    }),
  )
  return sent
}

function show(props: Partial<Parameters<typeof DeployDialog>[0]> = {}) {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false }, mutations: { retry: false } } })
  const onDeployed = vi.fn()
  const onClose = vi.fn()
  render(
    <QueryClientProvider client={client}>
      <DeployDialog path="f/demo/flow" onClose={onClose} onDeployed={onDeployed} {...props} />
    </QueryClientProvider>,
  )
  return { onDeployed, onClose }
}

afterEach(() => vi.unstubAllGlobals())

describe('DeployDialog', () => {
  it('lists the linked agents with drafts, checked, and deploys the ones left checked', async () => {
    const sent = serve(['f/demo/a1', 'f/demo/a2'])
    const { onDeployed } = show()
    const dialog = screen.getByRole('dialog', { name: 'Deploy f/demo/flow' })
    expect(dialog).toBeInTheDocument()
    const a1 = await screen.findByRole('checkbox', { name: 'f/demo/a1' })
    const a2 = screen.getByRole('checkbox', { name: 'f/demo/a2' })
    expect(a1).toBeChecked()
    expect(a2).toBeChecked()
    await userEvent.click(a2)
    expect(a2).not.toBeChecked()
    await userEvent.type(screen.getByLabelText('What changed (optional)'), 'new prompt')
    await userEvent.click(screen.getByRole('button', { name: 'Deploy' }))
    await waitFor(() => expect(onDeployed).toHaveBeenCalledWith(expect.objectContaining({ version: 3 })))
    expect(sent).toEqual([{ message: 'new prompt', agents: ['f/demo/a1'] }])
  })

  it('says when no linked agent has a draft, and shows a refusal', async () => {
    const sent = serve([], answer({ type: 'NotFound', message: 'You have no draft of f/demo/flow.' }, 404))
    const { onDeployed } = show()
    expect(await screen.findByText('No drafts of the agents it links.')).toBeInTheDocument()
    expect(screen.queryByRole('checkbox')).toBeNull()
    await userEvent.click(screen.getByRole('button', { name: 'Deploy' }))
    expect(await screen.findByRole('alert')).toHaveTextContent('You have no draft of f/demo/flow.')
    expect(sent).toEqual([{ message: '', agents: [] }])
    expect(onDeployed).not.toHaveBeenCalled()
  })

  it('deploys nothing when preparing fails', async () => {
    const sent = serve(['f/demo/a1'])
    const prepare = vi.fn(async () => false)
    show({ prepare })
    await screen.findByRole('checkbox', { name: 'f/demo/a1' })
    await userEvent.click(screen.getByRole('button', { name: 'Deploy' }))
    await waitFor(() => expect(prepare).toHaveBeenCalled())
    expect(sent).toEqual([])
  })
})
