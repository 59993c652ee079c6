/** The caller's drafts: read, save (autosave calls it), discard, deploy, and what a deploy takes along. */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { ApiError, api, unwrap } from './client'
import type { components } from './schema'

export type Draft = components['schemas']['DraftOut']
export type DraftIn = components['schemas']['DraftIn']

export const draftKey = (path: string) => ['drafts', path] as const

/** The caller's draft of `path`, or null when there is none (the API answers 404). */
export async function fetchDraft(path: string): Promise<Draft | null> {
  try {
    return await unwrap(api.GET('/api/drafts/{path}', { params: { path: { path } } }))
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null
    throw error
  }
}

export function useDraft(path: string) {
  return useQuery({ queryKey: draftKey(path), queryFn: () => fetchDraft(path) })
}

/** The caller's drafts, without their values. */
export function useDrafts() {
  return useQuery({ queryKey: ['drafts'], queryFn: () => unwrap(api.GET('/api/drafts')) })
}

export function useSaveDraft(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (body: DraftIn) => unwrap(api.PUT('/api/drafts/{path}', { params: { path: { path } }, body })),
    onSuccess: (draft) => {
      client.setQueryData(draftKey(path), draft)
      void client.invalidateQueries({ queryKey: ['drafts'], exact: true })
    },
  })
}

export function useDiscardDraft(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: () => unwrap(api.DELETE('/api/drafts/{path}', { params: { path: { path } } })),
    onSuccess: () => {
      client.setQueryData(draftKey(path), null)
      void client.invalidateQueries({ queryKey: ['drafts'] })
    },
  })
}

/** The agents the flow at `path` links that the caller has drafts of. */
export function useLinkedDrafts(path: string, enabled = true) {
  return useQuery({
    queryKey: ['drafts', path, 'linked'],
    queryFn: () => unwrap(api.GET('/api/linked-drafts/{path}', { params: { path: { path } } })),
    enabled,
  })
}

/** Deploy the caller's draft of `path` (and the drafts of the `agents` named) as new versions. */
export function useDeploy(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (body: { message?: string; agents?: string[] }) =>
      unwrap(
        api.POST('/api/deploy/{path}', {
          params: { path: { path } },
          body: { message: body.message ?? '', agents: body.agents ?? [] },
        }),
      ),
    onSuccess: async () => {
      await Promise.all([
        client.invalidateQueries({ queryKey: ['drafts'] }),
        client.invalidateQueries({ queryKey: ['items'] }),
      ])
    },
  })
}
