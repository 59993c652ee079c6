import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider, createMemoryHistory, createRootRoute, createRouter } from '@tanstack/react-router'
import { render, screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { HistoryDrawer } from './HistoryDrawer'

const PATH = 'f/support/triage'

function version(n: number, message = '') {
  return {
    path: PATH,
    version: n,
    kind: 'resource',
    summary: '',
    description: '',
    message,
    created_by: 'ada',
    created_at: 1_700_000_000 + n,
    resource_type: 'ai_agent',
  }
}

function answer(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
}

/** A fake API: three versions, the diffs it was asked for, a restore that writes v4. */
function serve() {
  let versions = [version(3, 'tighter prompt'), version(2, 'add refund'), version(1, 'first')]
  const fetch = vi.fn(async (request: Request) => {
    const url = new URL(request.url)
    if (url.pathname === `/api/history/${PATH}` && request.method === 'GET') return answer(versions)
    if (url.pathname === `/api/history/${PATH}` && request.method === 'DELETE') {
      const dropped = versions.length - 1
      versions = versions.slice(0, 1)
      return answer({ path: PATH, dropped })
    }
    if (url.pathname === `/api/diff/${PATH}`) {
      const old = url.searchParams.get('old')
      const to = url.searchParams.get('new')
      return answer({ path: PATH, old: Number(old), new: Number(to), diff: `--- ${PATH}@${old}\n+++ ${PATH}@${to}\nsystem: 'v${old}' -> 'v${to}'\n` })
    }
    if (url.pathname === `/api/restore/${PATH}`) {
      versions = [version(4, 'restore'), ...versions]
      return answer({ ...version(4), value: {}, updated_by: 'ada', updated_at: 0, secret: false, deleted: false })
    }
    return answer({ type: 'NotFound', message: `no ${url.pathname}` }, 404)
  })
  vi.stubGlobal('fetch', fetch)
  return fetch
}

function show(onClose = () => {}) {
  const rootRoute = createRootRoute({
    component: () => (
      <>
        <button type="button">Opener</button>
        <HistoryDrawer path={PATH} onClose={onClose} />
      </>
    ),
  })
  const router = createRouter({ routeTree: rootRoute, history: createMemoryHistory({ initialEntries: ['/'] }) })
  const client = new QueryClient({ defaultOptions: { queries: { retry: false }, mutations: { retry: false } } })
  render(
    <QueryClientProvider client={client}>
      <RouterProvider router={router} />
    </QueryClientProvider>,
  )
}

function calls(fetch: ReturnType<typeof serve>, pathname: string, method = 'GET') {
  return fetch.mock.calls
    .map(([request]) => request)
    .filter((r) => new URL(r.url).pathname === pathname && r.method === method)
}

afterEach(() => vi.unstubAllGlobals())

describe('HistoryDrawer', () => {
  it('is a named dialog that takes the focus, lists the versions and closes on Escape', async () => {
    serve()
    const onClose = vi.fn()
    show(onClose)
    const dialog = await screen.findByRole('dialog', { name: `History of ${PATH}` })
    await waitFor(() => expect(dialog).toHaveFocus())
    const rows = await within(dialog).findAllByRole('row')
    // The header, then newest first, the current one marked.
    expect(rows.map((r) => r.getAttribute('data-version')).slice(1)).toEqual(['3', '2', '1'])
    expect(within(rows[1]!).getByText('current')).toBeInTheDocument()
    expect(within(rows[2]!).getByText('add refund')).toBeInTheDocument()
    expect(within(rows[1]!).queryByRole('button', { name: /Restore/ })).toBeNull()
    await userEvent.keyboard('{Escape}')
    expect(onClose).toHaveBeenCalledTimes(1)
  })

  it('compares the two versions chosen', async () => {
    const fetch = serve()
    const user = userEvent.setup()
    show()
    // By default, the newest against the one before it.
    expect(await screen.findByText("system: 'v2' -> 'v3'")).toBeInTheDocument()
    expect(calls(fetch, `/api/diff/${PATH}`).map((r) => new URL(r.url).search)).toEqual(['?old=2&new=3'])
    // An agent diff's header names the versions, which the caption says: it is no change.
    expect(screen.queryByText(`--- ${PATH}@2`)).toBeNull()
    expect(screen.getByText('v2 → v3:', { exact: false })).toBeInTheDocument()

    await user.click(screen.getByRole('radio', { name: 'Compare from v1' }))
    await user.click(screen.getByRole('radio', { name: 'Compare to v2' }))
    expect(await screen.findByText("system: 'v1' -> 'v2'")).toBeInTheDocument()
    expect(screen.getByRole('heading', { name: 'Changes from v1 to v2' })).toBeInTheDocument()
    const asked = calls(fetch, `/api/diff/${PATH}`).map((r) => new URL(r.url).search)
    expect(asked).toContain('?old=1&new=3')
    expect(asked[asked.length - 1]).toBe('?old=1&new=2')
  })

  it('restores a version once confirmed, and compares it with the new one', async () => {
    const fetch = serve()
    const user = userEvent.setup()
    show()
    await user.click(await screen.findByRole('button', { name: 'Restore v1' }))
    const ask = screen.getByRole('group', { name: 'Restore v1' })
    expect(ask).toHaveTextContent('Write v1 forward as v4?')
    expect(calls(fetch, `/api/restore/${PATH}`, 'POST')).toHaveLength(0)
    await user.click(within(ask).getByRole('button', { name: 'Restore' }))

    await waitFor(() => expect(calls(fetch, `/api/restore/${PATH}`, 'POST')).toHaveLength(1))
    expect(await calls(fetch, `/api/restore/${PATH}`, 'POST')[0]!.json()).toEqual({
      version: 1,
      message: 'Restore version 1',
    })
    expect(await screen.findByText('Restored v1 as v4.')).toBeInTheDocument()
    expect(await screen.findByRole('heading', { name: 'Changes from v1 to v4' })).toBeInTheDocument()
    expect(screen.getAllByRole('row').map((r) => r.getAttribute('data-version'))).toContain('4')
  })

  it('clears the past versions only after a confirmation; cancelling sends nothing', async () => {
    const fetch = serve()
    const user = userEvent.setup()
    show()
    await user.click(await screen.findByRole('button', { name: 'Clear past versions' }))
    await user.click(screen.getByRole('button', { name: 'Cancel' }))
    await user.click(screen.getByRole('button', { name: 'Clear past versions' }))
    expect(screen.getByRole('group', { name: 'Clear past versions' })).toHaveTextContent(
      `Drop the 2 past version(s) of ${PATH}, keeping v3?`,
    )
    expect(calls(fetch, `/api/history/${PATH}`, 'DELETE')).toHaveLength(0)
    await user.click(screen.getByRole('button', { name: 'Clear them' }))

    expect(await screen.findByText('Dropped 2 past version(s).')).toBeInTheDocument()
    expect(calls(fetch, `/api/history/${PATH}`, 'DELETE')).toHaveLength(1)
    await waitFor(() => expect(screen.getAllByRole('row')).toHaveLength(2))
  })
})
