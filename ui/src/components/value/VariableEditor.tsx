/** Edit a (not secret) variable's text. */
import { useId, useState } from 'react'
import type { Item } from '../../api/types'
import { ErrorBox } from '../ErrorBox'
import { SummaryField } from './SummaryField'
import { useSaveValue } from './useSaveValue'

export function VariableEditor({ item, onDone }: { item: Item; onDone: () => void }) {
  const start = typeof item.value === 'string' ? item.value : ''
  const [text, setText] = useState(start)
  const [summary, setSummary] = useState(item.summary)
  const save = useSaveValue(item, onDone)
  const id = useId()
  return (
    <form
      className="item-editor value-editor"
      aria-label={`Edit ${item.path}`}
      onSubmit={(e) => {
        e.preventDefault()
        save.mutate({ value: text, summary, description: item.description })
      }}
    >
      <div className="field">
        <label htmlFor={id}>Value of {item.path}</label>
        <textarea id={id} rows={Math.min(12, Math.max(2, text.split('\n').length + 1))} value={text} onChange={(e) => setText(e.target.value)} />
      </div>
      <SummaryField value={summary} onChange={setSummary} />
      <ErrorBox error={save.error} title="Not saved" />
      <div className="buttons">
        <button type="submit" className="primary" disabled={save.isPending || (text === start && summary === item.summary)}>
          Save
        </button>
        <button type="button" onClick={onDone} disabled={save.isPending}>
          Cancel
        </button>
      </div>
    </form>
  )
}
