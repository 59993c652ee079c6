import { screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Item } from '../../api/types'
import { on, renderWithClient, stubFetch } from '../admin/testing'
import { ValueEditor } from '../ValueEditor'

const OLD = 'sk-old-plaintext-never-shown'
const NEW = 'sk-new-plaintext-typed-once'

const SECRET: Item = {
  path: 'f/demo/key',
  kind: 'variable',
  summary: 'The provider key',
  description: '',
  version: 0,
  updated_by: 'ada',
  updated_at: 1_800_000_000,
  resource_type: null,
  secret: true,
  deleted: false,
  // The API answers null; even were a value handed over, the editor must not show it.
  value: OLD,
}

afterEach(() => vi.unstubAllGlobals())

describe('the secret editor', () => {
  it('never renders the secret and writes the new value as a secret', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(
      on('GET', '/api/items/f/demo/key', { body: { ...SECRET, value: null } }),
      on('PUT', '/api/items/f/demo/key', { body: { ...SECRET, value: null, updated_at: 1_800_000_100 } }),
    )
    const onDone = vi.fn()
    renderWithClient(<ValueEditor item={SECRET} onDone={onDone} />)
    const input = screen.getByLabelText('New value of f/demo/key')
    expect(input).toHaveAttribute('type', 'password')
    expect(input).toHaveValue('')
    expect(document.body.innerHTML).not.toContain(OLD)

    await user.type(input, NEW)
    // A password field: its text is in the field's value, never in the page's markup.
    expect(document.body.innerHTML).not.toContain(NEW)
    await user.click(screen.getByRole('button', { name: 'Save the new secret' }))

    await waitFor(() => expect(onDone).toHaveBeenCalled())
    const put = calls.find((c) => c.method === 'PUT')
    expect(put?.body).toEqual({
      kind: 'variable',
      value: NEW,
      secret: true,
      summary: 'The provider key',
      description: '',
      resource_type: null,
      base_version: 0,
    })
    expect(input).toHaveValue('')
    expect(document.body.innerHTML).not.toContain(OLD)
    expect(document.body.innerHTML).not.toContain(NEW)
  })

  it('refuses to save over a change made since it was opened, keeping the form', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(on('GET', '/api/items/f/demo/key', { body: { ...SECRET, value: null, updated_by: 'bob', updated_at: 1_800_000_500 } }))
    const onDone = vi.fn()
    renderWithClient(<ValueEditor item={SECRET} onDone={onDone} />)
    await user.type(screen.getByLabelText('New value of f/demo/key'), NEW)
    await user.click(screen.getByRole('button', { name: 'Save the new secret' }))
    expect(await screen.findByRole('alert')).toHaveTextContent('f/demo/key was changed by bob since you opened it.')
    expect(calls.some((c) => c.method === 'PUT')).toBe(false)
    expect(onDone).not.toHaveBeenCalled()
    expect(document.body.innerHTML).not.toContain(NEW)
  })
})
