import { screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { TokensPage } from '../../pages/TokensPage'
import { on, renderWithClient, stubFetch } from './testing'

const SECRET = 'tm_pat_abc123_s3cr3t-text-of-the-token'
const INFO = {
  id: 'abc123',
  prefix: 'tm_pat_abc123',
  name: 'ci',
  scopes: ['items:read'],
  created_at: 1_800_000_000,
  expires_at: 1_800_000_000 + 30 * 86400,
  last_used_at: null,
  revoked_at: null,
}

afterEach(() => vi.unstubAllGlobals())

describe('a token just made', () => {
  it('is shown once, with a copy button and a warning, then only listed without its text', async () => {
    const user = userEvent.setup()
    let made = false
    const calls = stubFetch(
      on('POST', '/api/auth/tokens', { status: 201, body: { token: SECRET, info: INFO } }),
      (request) => {
        if (request.method !== 'GET' || new URL(request.url).pathname !== '/api/auth/tokens') return undefined
        return { body: made ? [INFO] : [] }
      },
    )
    const writeText = vi.fn(async () => {})
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true })
    renderWithClient(<TokensPage />)
    expect(await screen.findByText('You have no tokens.')).toBeInTheDocument()

    await user.type(screen.getByLabelText('Token name'), 'ci')
    await user.type(screen.getByLabelText('Scopes'), 'items:read')
    await user.selectOptions(screen.getByLabelText('Expires in'), '7 days')
    made = true
    await user.click(screen.getByRole('button', { name: 'Make the token' }))

    const shown = await screen.findByLabelText('The token ci')
    expect(shown).toHaveValue(SECRET)
    expect(screen.getByText(/it will not be shown again/)).toBeInTheDocument()
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ name: 'ci', scopes: ['items:read'], expires_in_days: 7 })

    await user.click(screen.getByRole('button', { name: 'Copy the token' }))
    expect(writeText).toHaveBeenCalledWith(SECRET)
    expect(await screen.findByText('Copied.')).toBeInTheDocument()

    // The list shows the new token by its prefix; once dismissed, its text is nowhere on the page.
    const row = await screen.findByRole('row', { name: /ci tm_pat_abc123/ })
    expect(row).not.toHaveTextContent(SECRET)
    await user.click(screen.getByRole('button', { name: 'I have copied it' }))
    await waitFor(() => expect(screen.queryByLabelText('The token ci')).toBeNull())
    expect(document.body.innerHTML).not.toContain('s3cr3t-text-of-the-token')
    expect(screen.getByRole('form', { name: 'Make a token' })).toBeInTheDocument()
  })

  it('says why when the server refuses to make it, keeping what was typed', async () => {
    const user = userEvent.setup()
    stubFetch(
      on('GET', '/api/auth/tokens', { body: [] }),
      on('POST', '/api/auth/tokens', {
        status: 422,
        body: { type: 'InvalidValue', message: "The scope 'nope' has no action.", hint: 'Write domain:action.' },
      }),
    )
    renderWithClient(<TokensPage />)
    await user.type(screen.getByLabelText('Token name'), 'bad')
    await user.type(screen.getByLabelText('Scopes'), 'nope')
    await user.click(screen.getByRole('button', { name: 'Make the token' }))
    expect(await screen.findByRole('alert')).toHaveTextContent("The scope 'nope' has no action.")
    expect(screen.getByLabelText('Token name')).toHaveValue('bad')
    expect(screen.queryByLabelText('The token bad')).toBeNull()
  })
})
