import type { Item } from '../api/types'

/** Whether the UI edits this kind of item yet: scripts (Python) and flows (YAML). */
export function editable(item: Item): boolean {
  return !item.deleted && (item.kind === 'script' || (item.kind === 'flow' && typeof item.value === 'object'))
}
