/** Save an edited variable or resource: names the version it started from; a 409 keeps the edit. */
import { useMutation } from '@tanstack/react-query'
import type { Item } from '../../api/types'
import { unversionedConflict, useWriteItem, type WriteIn } from './write'

export function useSaveValue(item: Item, onSaved: () => void) {
  const write = useWriteItem(item.path)
  return useMutation({
    mutationFn: async (body: Omit<WriteIn, 'kind' | 'base_version' | 'resource_type'>) => {
      if (item.version === 0) {
        const conflict = await unversionedConflict(item)
        if (conflict) throw conflict
      }
      return write.mutateAsync({
        kind: item.kind,
        resource_type: item.resource_type,
        base_version: item.version,
        ...body,
      })
    },
    onSuccess: () => onSaved(),
  })
}
