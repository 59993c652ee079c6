import { afterEach, describe, expect, it, vi } from 'vitest'
import { fetchMe } from './auth'
import { ApiError, api, currentCsrfToken, setCsrfToken, unwrap } from './client'
import type { Me } from './types'

const SESSION: Me = {
  user: 'olga',
  is_admin: false,
  groups: [],
  via: 'session',
  scopes: null,
  expires_at: Date.now() / 1000 + 3600,
  csrf: 'csrf-from-me',
}

function answer(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })
}

afterEach(() => {
  vi.unstubAllGlobals()
  setCsrfToken(null)
})

describe('fetchMe', () => {
  it("remembers a cookie session's CSRF token and sends it with a change", async () => {
    const fetch = vi.fn(async (_request: Request) => answer(SESSION))
    vi.stubGlobal('fetch', fetch)
    expect(await fetchMe()).toEqual(SESSION)
    expect(currentCsrfToken()).toBe('csrf-from-me')

    fetch.mockImplementation(async () => new Response(null, { status: 204 }))
    await unwrap(api.POST('/api/auth/sign-out'))
    expect(fetch.mock.calls[1]![0].headers.get('X-CSRF-Token')).toBe('csrf-from-me')
  })

  it('forgets the token for a token caller and for no one', async () => {
    setCsrfToken('stale')
    vi.stubGlobal('fetch', vi.fn(async () => answer({ ...SESSION, via: 'token', csrf: null })))
    expect((await fetchMe())?.via).toBe('token')
    expect(currentCsrfToken()).toBeNull()

    setCsrfToken('stale')
    vi.stubGlobal('fetch', vi.fn(async () => answer({ type: 'SignInFailed', message: 'Sign in first.' }, 401)))
    expect(await fetchMe()).toBeNull()
    expect(currentCsrfToken()).toBeNull()
  })
})

describe('ApiError', () => {
  it('reads an ErrorBody', () => {
    const error = new ApiError(422, {
      type: 'InvalidRequest',
      message: 'The request does not fit the API schema.',
      problems: ['at body.name: Field required'],
    })
    expect([error.type, error.message, error.hint, error.problems]).toEqual([
      'InvalidRequest',
      'The request does not fit the API schema.',
      null,
      ['at body.name: Field required'],
    ])
  })

  it('says what status answered when the body is no ErrorBody', () => {
    const error = new ApiError(502, '<html>Bad Gateway</html>')
    expect([error.type, error.message, error.hint, error.problems]).toEqual([
      'Error',
      'The server answered 502.',
      null,
      [],
    ])
  })
})
