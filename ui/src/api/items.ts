import { keepPreviousData, useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { api, unwrap } from './client'

const PAGE = 200

/** The readable items under `prefix`, by path, a page at a time (`after` = last path). */
export function useItems(prefix: string) {
  return useInfiniteQuery({
    queryKey: ['items', 'list', prefix],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(api.GET('/api/items', { params: { query: { prefix, after: pageParam, limit: PAGE } } })),
    getNextPageParam: (last) => (last.length === PAGE ? last[last.length - 1]?.path : undefined),
  })
}

export function useSearch(q: string) {
  return useQuery({
    queryKey: ['items', 'search', q],
    queryFn: () => unwrap(api.GET('/api/search', { params: { query: { q, limit: 50 } } })),
    enabled: q.trim().length > 0,
    placeholderData: keepPreviousData,
  })
}

export function useItem(path: string, version?: number) {
  return useQuery({
    queryKey: ['items', path, 'version', version ?? null],
    queryFn: () =>
      unwrap(api.GET('/api/items/{path}', { params: { path: { path }, query: version ? { version } : {} } })),
  })
}

export function useHistory(path: string) {
  return useQuery({
    queryKey: ['items', path, 'history'],
    queryFn: () => unwrap(api.GET('/api/history/{path}', { params: { path: { path } } })),
  })
}

export function useDiff(path: string, oldVersion: number | null, newVersion: number | null) {
  return useQuery({
    queryKey: ['items', path, 'diff', oldVersion, newVersion],
    queryFn: () =>
      unwrap(
        api.GET('/api/diff/{path}', {
          params: { path: { path }, query: { old: oldVersion ?? 0, new: newVersion ?? undefined } },
        }),
      ),
    enabled: oldVersion !== null,
  })
}

export function useRestore(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (version: number) =>
      unwrap(api.POST('/api/restore/{path}', { params: { path: { path } }, body: { version, message: `Restore version ${version}` } })),
    onSuccess: () => client.invalidateQueries({ queryKey: ['items'] }),
  })
}

/** The folders the caller can reach. */
export function useFolders() {
  return useQuery({
    queryKey: ['folders'],
    queryFn: () => unwrap(api.GET('/api/folders')),
    staleTime: 60_000,
  })
}
