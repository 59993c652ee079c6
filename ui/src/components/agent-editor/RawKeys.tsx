/**
 * The keys of an object that the form does not edit, as YAML text (JSON is YAML too).
 * Text that does not parse is kept as typed and shown as invalid; nothing is applied
 * until it parses, so the object never loses a key to a half-typed edit.
 */
import { useId, useState } from 'react'
import { parse, stringify } from 'yaml'
import { isObject, otherKeys, withOtherKeys } from './agentValue'

type Props<T extends Record<string, unknown>> = {
  value: T
  /** The keys the form edits: not shown here, and refused if written here. */
  covered: readonly string[]
  onChange: (value: T) => void
  label: string
  help?: string
}

function text(others: Record<string, unknown>): string {
  return Object.keys(others).length === 0 ? '' : stringify(others, { lineWidth: 0 })
}

/** The keys `source` writes, or why it cannot be applied. */
export function parseKeys(source: string, covered: readonly string[]): Record<string, unknown> | string {
  let parsed: unknown
  try {
    parsed = source.trim() === '' ? {} : parse(source)
  } catch (error) {
    return `Not valid YAML: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`
  }
  if (parsed === null || parsed === undefined) return {}
  if (!isObject(parsed)) return 'Write keys and their values (key: value), one a line.'
  const taken = Object.keys(parsed).filter((key) => covered.includes(key))
  if (taken.length > 0) return `Edit ${taken.join(', ')} in the form, not here.`
  return parsed
}

export function RawKeys<T extends Record<string, unknown>>({ value, covered, onChange, label, help }: Props<T>) {
  const id = useId()
  const current = text(otherKeys(value, covered))
  const [draft, setDraft] = useState(current)
  const [shown, setShown] = useState(current)
  const [problem, setProblem] = useState<string | null>(null)
  // A change from outside (a discarded draft, a restored version): show it.
  if (current !== shown) {
    setShown(current)
    setDraft(current)
    setProblem(null)
  }
  return (
    <div className="field raw-keys">
      <label htmlFor={id} className="field-label">
        {label}
      </label>
      {help && (
        <span className="field-help" id={`${id}-help`}>
          {help}
        </span>
      )}
      <textarea
        id={id}
        rows={Math.min(20, Math.max(4, draft.split('\n').length + 1))}
        value={draft}
        spellCheck={false}
        aria-invalid={problem !== null}
        aria-describedby={[help ? `${id}-help` : '', problem ? `${id}-problem` : ''].join(' ').trim() || undefined}
        onChange={(e) => {
          const source = e.target.value
          setDraft(source)
          const keys = parseKeys(source, covered)
          if (typeof keys === 'string') {
            setProblem(keys)
            return
          }
          setProblem(null)
          const next = withOtherKeys(value, covered, keys)
          setShown(text(otherKeys(next, covered)))
          onChange(next)
        }}
      />
      {problem && (
        <span className="field-error" id={`${id}-problem`} role="alert">
          {problem} (not applied: the last valid keys are kept)
        </span>
      )}
    </div>
  )
}
