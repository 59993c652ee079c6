import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { PeoplePage } from '../../pages/PeoplePage'
import { on, renderWithClient, stubFetch } from './testing'

const USERS = [
  { name: 'ada', is_admin: true, disabled: false, groups: [], created_at: 1 },
  { name: 'bob', is_admin: false, disabled: false, groups: [], created_at: 2 },
]

afterEach(() => vi.unstubAllGlobals())

describe('people, for an admin', () => {
  it('changes a user, sets a password and fills a group, by the routes the API has', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(
      on('GET', '/api/auth/me', { body: { user: 'ada', is_admin: true, groups: [], via: 'session', scopes: null, expires_at: null, csrf: null } }),
      on('GET', '/api/users', { body: USERS }),
      on('GET', '/api/groups', { body: [{ name: 'ops', summary: '', members: [] }] }),
      on('PATCH', '/api/users/bob', { body: { ...USERS[1], is_admin: true } }),
      on('PUT', '/api/users/bob/password', { status: 204 }),
      on('PUT', '/api/groups/ops/members/bob', { status: 204 }),
      on('PATCH', '/api/users/ada', {
        status: 409,
        body: { type: 'WorkspaceError', message: 'ada is the last active admin.', hint: 'Make another admin first.' },
      }),
    )
    renderWithClient(<PeoplePage />)
    await user.click(await screen.findByRole('button', { name: 'Make bob an admin' }))
    await user.click(screen.getByRole('button', { name: 'Disable bob' }))
    await user.click(screen.getByRole('button', { name: 'Set the password of bob' }))
    await user.type(screen.getByLabelText('New password for bob'), 'a long new password')
    await user.click(screen.getByRole('button', { name: 'Save the password' }))
    await waitFor(() => expect(screen.queryByLabelText('New password for bob')).toBeNull())

    const ops = screen.getByRole('article', { name: 'g/ops' })
    await user.selectOptions(within(ops).getByLabelText('Add a member to ops'), 'bob')
    await user.click(within(ops).getByRole('button', { name: 'Add to ops' }))

    await user.click(screen.getByRole('button', { name: 'Remove admin from ada' }))
    expect(await screen.findByRole('alert')).toHaveTextContent('ada is the last active admin.')
    // You cannot disable yourself from here.
    expect(screen.queryByRole('button', { name: 'Disable ada' })).toBeNull()

    const changes = calls.filter((c) => c.method !== 'GET').map((c) => [c.method, c.path, c.body])
    expect(changes).toEqual([
      ['PATCH', '/api/users/bob', { admin: true }],
      ['PATCH', '/api/users/bob', { disabled: true }],
      ['PUT', '/api/users/bob/password', { password: 'a long new password' }],
      ['PUT', '/api/groups/ops/members/bob', undefined],
      ['PATCH', '/api/users/ada', { admin: false }],
    ])
  })
})
