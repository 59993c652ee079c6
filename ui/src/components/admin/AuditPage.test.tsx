import { screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { AuditPage } from '../../pages/AuditPage'
import { PeoplePage } from '../../pages/PeoplePage'
import { on, renderWithClient, stubFetch } from './testing'

const me = (user: string, is_admin: boolean) =>
  on('GET', '/api/auth/me', { body: { user, is_admin, groups: [], via: 'session', scopes: null, expires_at: null, csrf: null } })

const row = (id: number) => ({ id, at: 1_800_000_000 + id, actor: 'ada', action: 'item.write', path: `f/x/${id}`, details: {} })

afterEach(() => vi.unstubAllGlobals())

describe('the audit log', () => {
  it('tells a member it is for admins, without asking for it', async () => {
    const calls = stubFetch(me('bob', false))
    renderWithClient(<AuditPage />)
    expect(await screen.findByText('Only workspace admins read the audit log.')).toBeInTheDocument()
    expect(calls.some((c) => c.path === '/api/audit')).toBe(false)
  })

  it('filters, and loads the next page after the last id seen', async () => {
    const user = userEvent.setup()
    const asked: URLSearchParams[] = []
    stubFetch(me('ada', true), (request) => {
      const url = new URL(request.url)
      if (url.pathname !== '/api/audit') return undefined
      asked.push(url.searchParams)
      const after = Number(url.searchParams.get('after'))
      return { body: after === 0 ? Array.from({ length: 100 }, (_, i) => row(i + 1)) : [row(101)] }
    })
    renderWithClient(<AuditPage />)
    await user.type(await screen.findByLabelText('Actor'), 'ada')
    await user.type(screen.getByLabelText('Path starts with'), ' f/x/ ')
    await user.click(screen.getByRole('button', { name: 'Filter' }))
    expect(await screen.findByText('100 rows, oldest first; more below.')).toBeInTheDocument()
    const last = asked[asked.length - 1]!
    expect(Object.fromEntries(last)).toEqual({ actor: 'ada', path: 'f/x/', after: '0', limit: '100' })
    await user.click(screen.getByRole('button', { name: 'Load more' }))
    expect(await screen.findByText('f/x/101')).toBeInTheDocument()
    expect(asked[asked.length - 1]!.get('after')).toBe('100')
    await waitFor(() => expect(screen.queryByRole('button', { name: 'Load more' })).toBeNull())
  })
})

describe('people, for a member', () => {
  it('lists users and groups with nothing to change', async () => {
    stubFetch(
      me('bob', false),
      on('GET', '/api/users', { body: [{ name: 'ada', is_admin: true, disabled: false, groups: ['ops'], created_at: 1 }] }),
      on('GET', '/api/groups', { body: [{ name: 'ops', summary: 'On call', members: ['ada'] }] }),
    )
    renderWithClient(<PeoplePage />)
    expect(await screen.findByRole('list', { name: 'Members of ops' })).toHaveTextContent('ada')
    expect(screen.getByRole('table', { name: 'Users' })).toHaveTextContent('admin')
    expect(screen.queryByRole('form')).toBeNull()
    expect(screen.queryByRole('button')).toBeNull()
    expect(screen.getByText(/Only workspace admins change users and groups/)).toBeInTheDocument()
  })
})
