/** Users, groups, folders and grants, the caller's tokens, and the audit log. */
import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, unwrap } from './client'
import type { components } from './schema'

type S = components['schemas']
export type User = S['UserOut']
export type Group = S['GroupOut']
export type Folder = S['FolderOut']
export type Role = 'viewer' | 'writer' | 'admin'
export type Token = S['TokenOut']
export type NewToken = S['NewTokenOut']
export type NewTokenIn = S['NewTokenIn']
export type AuditRow = S['AuditOut']

export const ROLES: readonly Role[] = ['viewer', 'writer', 'admin']

const usersKey = ['people', 'users'] as const
const groupsKey = ['people', 'groups'] as const
// The same key as `useFolders` in items.ts: the workspace's folder list follows changes here.
const foldersKey = ['folders'] as const
const tokensKey = ['tokens'] as const

export function useUsers() {
  return useQuery({ queryKey: usersKey, queryFn: () => unwrap(api.GET('/api/users')) })
}

export function useGroups() {
  return useQuery({ queryKey: groupsKey, queryFn: () => unwrap(api.GET('/api/groups')) })
}

/** A user's groups show in both lists: a change to either refreshes both. */
function usePeopleMutation<V, T>(mutationFn: (vars: V) => Promise<T>) {
  const client = useQueryClient()
  return useMutation({
    mutationFn,
    onSuccess: () => client.invalidateQueries({ queryKey: ['people'] }),
  })
}

export function useAddUser() {
  return usePeopleMutation((body: { name: string; admin: boolean }) => unwrap(api.POST('/api/users', { body })))
}

export function useChangeUser() {
  return usePeopleMutation(({ name, ...body }: { name: string; admin?: boolean; disabled?: boolean }) =>
    unwrap(api.PATCH('/api/users/{name}', { params: { path: { name } }, body })),
  )
}

export function useSetPassword() {
  // Nothing listed changes: no refetch.
  return useMutation({
    mutationFn: ({ name, password }: { name: string; password: string }) =>
      unwrap(api.PUT('/api/users/{name}/password', { params: { path: { name } }, body: { password } })),
  })
}

export function useAddGroup() {
  return usePeopleMutation((body: { name: string; summary: string }) => unwrap(api.POST('/api/groups', { body })))
}

export function useDeleteGroup() {
  return usePeopleMutation((name: string) => unwrap(api.DELETE('/api/groups/{name}', { params: { path: { name } } })))
}

export function useSetMember() {
  return usePeopleMutation(({ group, user, member }: { group: string; user: string; member: boolean }) => {
    const params = { path: { name: group, user } }
    return unwrap(member ? api.PUT('/api/groups/{name}/members/{user}', { params }) : api.DELETE('/api/groups/{name}/members/{user}', { params }))
  })
}

export function useAddFolder() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (body: { name: string; summary: string }) => unwrap(api.POST('/api/folders', { body })),
    onSuccess: () => client.invalidateQueries({ queryKey: foldersKey }),
  })
}

/** Give `grantee` a role on `target` (`f/<folder>` or an item's path); role null revokes it. */
export function useGrant() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (body: { target: string; grantee: string; role: Role | null }) => unwrap(api.PUT('/api/grants', { body })),
    onSuccess: () => client.invalidateQueries({ queryKey: foldersKey }),
  })
}

export function useTokens() {
  return useQuery({ queryKey: tokensKey, queryFn: () => unwrap(api.GET('/api/auth/tokens')) })
}

/** Make a token: its text is in the answer only, never cached (the list holds no secret). */
export function useCreateToken() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (body: NewTokenIn) => unwrap(api.POST('/api/auth/tokens', { body })),
    onSuccess: () => client.invalidateQueries({ queryKey: tokensKey }),
  })
}

export function useRevokeToken() {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/auth/tokens/{token_id}', { params: { path: { token_id: id } } })),
    onSuccess: () => client.invalidateQueries({ queryKey: tokensKey }),
  })
}

export type AuditFilters = { actor?: string; action?: string; path?: string }
export const AUDIT_PAGE = 100

/** The audit log, oldest first, a page at a time (`after` = the last id seen). */
export function useAudit(filters: AuditFilters, enabled: boolean) {
  return useInfiniteQuery({
    queryKey: ['audit', filters],
    initialPageParam: 0,
    queryFn: ({ pageParam }) =>
      unwrap(api.GET('/api/audit', { params: { query: { ...filters, after: pageParam, limit: AUDIT_PAGE } } })),
    getNextPageParam: (last) => (last.length === AUDIT_PAGE ? last[last.length - 1]?.id : undefined),
    enabled,
  })
}
