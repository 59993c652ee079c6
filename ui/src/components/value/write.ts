/** Writing a variable or a resource, and what the editors need to know about them. */
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { ApiError, api, unwrap } from '../../api/client'
import type { components } from '../../api/schema'
import type { Item } from '../../api/types'

export type WriteIn = components['schemas']['WriteIn']

/** Whether the value editor edits this item: a variable, a secret, a resource or a resource type. */
export function editsValue(item: Item): boolean {
  return !item.deleted && (item.kind === 'variable' || item.kind === 'resource' || item.kind === 'resource_type')
}

/** Write the item at `path` (its answer never holds a secret's value) and refresh what shows it. */
export function useWriteItem(path: string) {
  const client = useQueryClient()
  return useMutation({
    mutationFn: (body: WriteIn) => unwrap(api.PUT('/api/items/{path}', { params: { path: { path } }, body })),
    onSuccess: () => client.invalidateQueries({ queryKey: ['items'] }),
  })
}

/**
 * Variables and resource types keep no versions (they stay at 0), so
 * `base_version` cannot tell whether one changed since it was read: compare
 * when and by whom it was last written instead, just before writing.
 * Answers null when unchanged.
 */
export async function unversionedConflict(item: Item): Promise<ApiError | null> {
  const now = await unwrap(api.GET('/api/items/{path}', { params: { path: { path: item.path } } }))
  if (now.updated_at === item.updated_at && now.updated_by === item.updated_by) return null
  return new ApiError(409, {
    type: 'VersionConflict',
    message: `${item.path} was changed by ${now.updated_by} since you opened it.`,
    hint: 'Your text is kept here: copy it, reload the page, and reapply it.',
  })
}

/** Whether an item already exists at `path` (that the caller may read). */
export async function exists(path: string): Promise<boolean> {
  try {
    await unwrap(api.GET('/api/items/{path}', { params: { path: { path } } }))
    return true
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return false
    throw error
  }
}
