/** The one HTTP client of the UI: typed from the server's OpenAPI document. */
import createClient, { type Middleware } from 'openapi-fetch'
import type { paths } from './schema'

export const CSRF_HEADER = 'X-CSRF-Token'
const CSRF_COOKIE = 'tidemill_csrf'
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS'])

let csrfToken: string | null = null

/** Remember the session's CSRF token (from the sign-in answer). */
export function setCsrfToken(token: string | null): void {
  csrfToken = token
}

/** The CSRF token: the one sign-in answered, else the session's readable cookie (after a reload). */
export function currentCsrfToken(): string | null {
  if (csrfToken) return csrfToken
  if (typeof document === 'undefined') return null
  for (const part of document.cookie.split(';')) {
    const [name, ...rest] = part.trim().split('=')
    if (name === CSRF_COOKIE) return decodeURIComponent(rest.join('='))
  }
  return null
}

/** An error the API answered: `{type, message, hint, problems}`. */
export class ApiError extends Error {
  readonly status: number
  readonly type: string
  readonly hint: string | null
  readonly problems: string[]

  constructor(status: number, body: unknown) {
    const obj = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
    const message = typeof obj.message === 'string' ? obj.message : `The server answered ${status}.`
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.type = typeof obj.type === 'string' ? obj.type : 'Error'
    this.hint = typeof obj.hint === 'string' ? obj.hint : null
    this.problems = Array.isArray(obj.problems) ? obj.problems.map(String) : []
  }
}

const csrf: Middleware = {
  onRequest({ request }) {
    if (!SAFE.has(request.method.toUpperCase())) {
      const token = currentCsrfToken()
      if (token) request.headers.set(CSRF_HEADER, token)
    }
    return request
  },
}

/** Item paths hold slashes: keep them as path segments, encoding each one. */
function itemPathSerializer(name: string, value: unknown): string {
  const text = String(value)
  return name === 'path' ? text.split('/').map(encodeURIComponent).join('/') : encodeURIComponent(text)
}

export const api = createClient<paths>({
  // Same origin as the page (absolute, so that tests' fetch resolves it too).
  baseUrl: typeof window === 'undefined' ? '' : window.location.origin,
  credentials: 'same-origin',
  // Looked up on each call, not captured once.
  fetch: (request) => globalThis.fetch(request),
  pathSerializer: (pathname, pathParams) =>
    pathname.replace(/\{([^}]+)\}/g, (_, name: string) => itemPathSerializer(name, pathParams[name])),
})
api.use(csrf)

/** The data of an openapi-fetch answer, or throw its error as an `ApiError`. */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await call
  if (!response.ok) throw new ApiError(response.status, error)
  return data as T
}
