/** Test helpers of the admin screens: a query client around a component, a fetch that answers by route. */
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { render } from '@testing-library/react'
import type { ReactNode } from 'react'
import { vi } from 'vitest'

export function renderWithClient(node: ReactNode) {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false }, mutations: { retry: false } } })
  return render(<QueryClientProvider client={client}>{node}</QueryClientProvider>)
}

export type Route = (request: Request) => { status?: number; body?: unknown } | undefined

/** Stub `fetch`: each request goes to the first route answering it (else a 404); calls are recorded. */
export function stubFetch(...routes: Route[]) {
  const calls: { method: string; path: string; body: unknown }[] = []
  const fetch = vi.fn(async (request: Request) => {
    const text = await request.clone().text()
    calls.push({ method: request.method, path: new URL(request.url).pathname, body: text ? JSON.parse(text) : undefined })
    for (const route of routes) {
      const found = route(request)
      if (found) {
        const status = found.status ?? 200
        return new Response(status === 204 ? null : JSON.stringify(found.body ?? null), {
          status,
          headers: { 'Content-Type': 'application/json' },
        })
      }
    }
    return new Response(JSON.stringify({ type: 'NotFound', message: 'nothing here' }), { status: 404 })
  })
  vi.stubGlobal('fetch', fetch)
  return calls
}

export const on =
  (method: string, path: string, answer: { status?: number; body?: unknown }): Route =>
  (request) =>
    request.method === method && new URL(request.url).pathname === path ? answer : undefined
