/** The editor of a variable (text), a secret (write-only), a resource or a resource type (JSON). */
import type { Item } from '../api/types'
import { ResourceEditor } from './value/ResourceEditor'
import { SecretEditor } from './value/SecretEditor'
import { VariableEditor } from './value/VariableEditor'

export function ValueEditor({ item, onDone }: { item: Item; onDone: () => void }) {
  if (item.kind === 'variable') {
    return item.secret ? <SecretEditor item={item} onDone={onDone} /> : <VariableEditor item={item} onDone={onDone} />
  }
  return <ResourceEditor item={item} onDone={onDone} />
}
