import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Folder } from '../../api/people'
import type { Me } from '../../api/types'
import { FolderGrants } from './FolderGrants'
import { roleOn } from './grants'
import { on, renderWithClient, stubFetch } from './testing'

const FOLDER: Folder = {
  name: 'billing',
  summary: '',
  roles: { bob: 'writer', 'g/ops': 'admin' },
  created_by: 'ada',
  created_at: 1_800_000_000,
}

afterEach(() => vi.unstubAllGlobals())

describe('a folder’s grants', () => {
  it('grants a group a role, changes a role and revokes one, naming the folder', async () => {
    const user = userEvent.setup()
    const calls = stubFetch((request) =>
      request.method === 'PUT' && new URL(request.url).pathname === '/api/grants' ? { body: {} } : undefined,
    )
    renderWithClient(<FolderGrants folder={FOLDER} manage grantees={['ada', 'bob', 'g/ops']} />)
    const form = screen.getByRole('form', { name: 'Grant a role on f/billing' })
    await user.type(within(form).getByLabelText('User or g/group'), 'g/support')
    await user.selectOptions(within(form).getByLabelText('Role'), 'viewer')
    await user.click(within(form).getByRole('button', { name: 'Grant' }))
    await waitFor(() => expect(calls).toHaveLength(1))
    expect(calls[0]).toEqual({ method: 'PUT', path: '/api/grants', body: { target: 'f/billing', grantee: 'g/support', role: 'viewer' } })
    await waitFor(() => expect(within(form).getByLabelText('User or g/group')).toHaveValue(''))

    await user.selectOptions(screen.getByLabelText('Role of bob on f/billing'), 'admin')
    await waitFor(() => expect(calls).toHaveLength(2))
    expect(calls[1]!.body).toEqual({ target: 'f/billing', grantee: 'bob', role: 'admin' })

    await user.click(screen.getByRole('button', { name: 'Revoke g/ops' }))
    await waitFor(() => expect(calls).toHaveLength(3))
    expect(calls[2]!.body).toEqual({ target: 'f/billing', grantee: 'g/ops', role: null })
  })

  it('shows the refusal and keeps the name typed', async () => {
    const user = userEvent.setup()
    stubFetch(on('PUT', '/api/grants', { status: 403, body: { type: 'PermissionDenied', message: 'bob may not change who may do what on f/billing.' } }))
    renderWithClient(<FolderGrants folder={FOLDER} manage grantees={[]} />)
    await user.type(screen.getByLabelText('User or g/group'), 'cy')
    await user.click(screen.getByRole('button', { name: 'Grant' }))
    expect(await screen.findByRole('alert')).toHaveTextContent('bob may not change who may do what on f/billing.')
    expect(screen.getByLabelText('User or g/group')).toHaveValue('cy')
  })

  it('is read-only for those who do not administer the folder', () => {
    renderWithClient(<FolderGrants folder={FOLDER} manage={false} grantees={[]} />)
    expect(screen.getByRole('table', { name: 'Grants on f/billing' })).toHaveTextContent('bobwriter')
    expect(screen.queryByRole('form')).toBeNull()
    expect(screen.queryByRole('button')).toBeNull()
  })

  it('finds the caller’s role through its groups', () => {
    const me = (user: string, groups: string[], is_admin = false): Me =>
      ({ user, groups, is_admin, via: 'session', scopes: null, expires_at: null, csrf: null }) as Me
    expect(roleOn(FOLDER, me('cy', ['ops']))).toBe('admin')
    expect(roleOn(FOLDER, me('bob', []))).toBe('writer')
    expect(roleOn(FOLDER, me('dan', ['sales']))).toBeNull()
    expect(roleOn(FOLDER, me('root', [], true))).toBe('admin')
  })
})
