/** What to offer at the cursor of a flow's YAML: the keys the schema allows there, or a key's listed values. */
import { keysAt, valuesAt } from './flowSchema'
import { cursorPlace } from './flowYamlPath'

export interface Suggestion {
  label: string
  /** The text written when it is picked. */
  apply: string
  type: 'property' | 'enum'
  info: string
}

export function flowSuggestions(text: string, offset: number): { from: number; options: Suggestion[] } | null {
  const place = cursorPlace(text, offset)
  if (!place) return null
  if (place.kind === 'value') {
    const options = valuesAt(place.path)
      .map((v) => (typeof v === 'string' ? v : JSON.stringify(v)))
      .filter((v) => v.startsWith(place.prefix))
      .map((v): Suggestion => ({ label: v, apply: v, type: 'enum', info: '' }))
    return options.length ? { from: place.from, options } : null
  }
  const taken = new Set(place.siblings)
  const options = keysAt(place.path)
    .filter((k) => !taken.has(k.key) && k.key.startsWith(place.prefix))
    .map((k): Suggestion => ({ label: k.key, apply: `${k.key}:${k.block ? '' : ' '}`, type: 'property', info: k.description }))
  return options.length ? { from: place.from, options } : null
}
