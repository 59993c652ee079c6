import { type QueryClient, useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { ApiError, api, setCsrfToken, unwrap } from './client'
import type { Me } from './types'

export const meKey = ['auth', 'me'] as const

/** Who is signed in (and remember their session's CSRF token); `null` when no one is (a 401). */
export async function fetchMe(): Promise<Me | null> {
  try {
    const me = await unwrap(api.GET('/api/auth/me'))
    setCsrfToken(me.csrf ?? null)
    return me
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      setCsrfToken(null)
      return null
    }
    throw err
  }
}

/** Drop every cached answer but `key`'s: what one user saw is not another's. */
function forgetAllBut(client: QueryClient, key: readonly unknown[]) {
  client.removeQueries({ predicate: (query) => JSON.stringify(query.queryKey) !== JSON.stringify(key) })
}

export function useMe() {
  return useQuery({ queryKey: meKey, queryFn: fetchMe, staleTime: 60_000 })
}

export function useSignIn() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (body: { user: string; password: string }) =>
      unwrap(api.POST('/api/auth/sign-in', { body })),
    onSuccess: async (session) => {
      setCsrfToken(session.csrf)
      forgetAllBut(client, meKey)
      client.setQueryData(meKey, await fetchMe())
    },
  })
}

export function useSignOut() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/sign-out')),
    onSettled: () => {
      setCsrfToken(null)
      forgetAllBut(client, meKey)
      client.setQueryData(meKey, null)
    },
  })
}
