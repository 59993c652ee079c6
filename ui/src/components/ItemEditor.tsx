/**
 * Edit a script (Python) or a flow (YAML) and save it as the item's next version;
 * variables, secrets and resources go to `ValueEditor`.
 * The write names the version it started from (`base_version`): if someone
 * saved meanwhile, the API refuses it (409) and nothing is lost here.
 */
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { stringify } from 'yaml'
import { api, unwrap } from '../api/client'
import type { Item } from '../api/types'
import { CodeEditor } from './CodeEditor'
import { ErrorBox } from './ErrorBox'
import { ValueEditor } from './ValueEditor'
import { editsValue } from './value/write'

function sourceOf(item: Item): string {
  if (typeof item.value === 'string') return item.value
  return stringify(item.value, { lineWidth: 0 })
}

export default function ItemEditor({ item, onDone }: { item: Item; onDone: () => void }) {
  if (editsValue(item)) return <ValueEditor item={item} onDone={onDone} />
  return <CodeItemEditor item={item} onDone={onDone} />
}

function CodeItemEditor({ item, onDone }: { item: Item; onDone: () => void }) {
  const client = useQueryClient()
  const [text, setText] = useState(() => sourceOf(item))
  const [message, setMessage] = useState('')
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PUT('/api/items/{path}', {
          params: { path: { path: item.path } },
          // A flow is sent as its YAML text: the server parses and checks it.
          body: { kind: item.kind, value: text, message, base_version: item.version },
        }),
      ),
    onSuccess: async () => {
      await client.invalidateQueries({ queryKey: ['items'] })
      onDone()
    },
  })
  const id = `message-${item.path}`
  return (
    <form
      className="item-editor"
      onSubmit={(e) => {
        e.preventDefault()
        save.mutate()
      }}
    >
      <CodeEditor
        value={text}
        onChange={setText}
        language={item.kind === 'script' ? 'python' : 'yaml'}
        label={`${item.kind === 'script' ? 'Code' : 'Flow'} of ${item.path}`}
      />
      <div className="field">
        <label htmlFor={id}>What changed (optional)</label>
        <input id={id} value={message} onChange={(e) => setMessage(e.target.value)} />
      </div>
      <ErrorBox error={save.error} title="Not saved" />
      <div className="buttons">
        <button type="submit" className="primary" disabled={save.isPending || text === sourceOf(item)}>
          Save as v{item.version + 1}
        </button>
        <button type="button" onClick={onDone} disabled={save.isPending}>
          Cancel
        </button>
      </div>
    </form>
  )
}
