/**
 * Replace a secret variable's value. The browser never has the current one
 * (the API answers null), and this editor never shows or keeps one: it
 * takes a new value in an empty password field and writes it with
 * `secret: true`, then forgets it. The field is uncontrolled: React mirrors
 * a controlled input's value into its `value` attribute, which would put the
 * typed secret in the page's markup.
 */
import { useId, useRef, useState } from 'react'
import type { Item } from '../../api/types'
import { ErrorBox } from '../ErrorBox'
import { SummaryField } from './SummaryField'
import { useSaveValue } from './useSaveValue'

export function SecretEditor({ item, onDone }: { item: Item; onDone: () => void }) {
  const field = useRef<HTMLInputElement>(null)
  const [typed, setTyped] = useState(false)
  const [summary, setSummary] = useState(item.summary)
  const save = useSaveValue(item, () => {
    if (field.current) field.current.value = ''
    setTyped(false)
    onDone()
  })
  const id = useId()
  return (
    <form
      className="item-editor value-editor"
      aria-label={`Replace the secret ${item.path}`}
      onSubmit={(e) => {
        e.preventDefault()
        save.mutate({ value: field.current?.value ?? '', secret: true, summary, description: item.description })
      }}
    >
      <p className="muted">The current value is never shown. Saving replaces it; there is no undo and no history.</p>
      <div className="field">
        <label htmlFor={id}>New value of {item.path}</label>
        <input
          id={id}
          type="password"
          autoComplete="new-password"
          spellCheck={false}
          ref={field}
          required
          onChange={(e) => setTyped(e.target.value !== '')}
        />
      </div>
      <SummaryField value={summary} onChange={setSummary} />
      <ErrorBox error={save.error} title="Not saved" />
      <div className="buttons">
        <button type="submit" className="primary" disabled={save.isPending || !typed}>
          Save the new secret
        </button>
        <button type="button" onClick={onDone} disabled={save.isPending}>
          Cancel
        </button>
      </div>
    </form>
  )
}
