/** The one HTTP client of the UI: typed from the server's OpenAPI document. */
import createClient, { type Middleware } from 'openapi-fetch'
import type { components, paths } from './schema'

export const CSRF_HEADER = 'X-CSRF-Token'
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS'])

let csrfToken: string | null = null

/** Remember the session's CSRF token (from `/api/auth/me` or the sign-in answer; null: none). */
export function setCsrfToken(token: string | null): void {
  csrfToken = token
}

/** The CSRF token that requests which change something send (null for a token caller). */
export function currentCsrfToken(): string | null {
  return csrfToken
}

/** What every error answer of the API holds (the document declares it on each operation). */
export type ErrorBody = components['schemas']['ErrorBody']

function isErrorBody(body: unknown): body is ErrorBody {
  if (typeof body !== 'object' || body === null) return false
  const { type, message } = body as Partial<ErrorBody>
  return typeof type === 'string' && typeof message === 'string'
}

/** An error the API answered (an `ErrorBody`), or an answer that is none (a proxy's page, ...). */
export class ApiError extends Error {
  readonly status: number
  readonly type: string
  readonly hint: string | null
  readonly problems: string[]

  constructor(status: number, body: unknown) {
    const error = isErrorBody(body) ? body : null
    super(error?.message ?? `The server answered ${status}.`)
    this.name = 'ApiError'
    this.status = status
    this.type = error?.type ?? 'Error'
    this.hint = error?.hint ?? null
    this.problems = error?.problems ?? []
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
