/**
 * Edit a resource (or a resource type's schema) as JSON, or, when the
 * resource's type is a `resource_type` item whose JSON Schema the API gives,
 * with a form built from that schema. The API checks the value against its
 * type and says what does not fit; nothing typed is lost on an error.
 * Built-in types (openai, ai_agent, ...) have no route that answers their
 * schema: those resources are edited as JSON.
 */
import { useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { api, unwrap } from '../../api/client'
import type { Item } from '../../api/types'
import { CodeEditor } from '../CodeEditor'
import { ErrorBox } from '../ErrorBox'
import { type JsonSchema, SchemaForm } from '../SchemaForm'
import { SummaryField } from './SummaryField'
import { useSaveValue } from './useSaveValue'

type Parsed = { ok: true; value: unknown } | { ok: false; error: string }

function parse(text: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) }
  }
}

const pretty = (value: unknown) => JSON.stringify(value ?? {}, null, 2)

/** The JSON Schema of a resource's type when it is a workspace item (a path); built-ins have none here. */
function useTypeSchema(resourceType: string | null) {
  const isItem = !!resourceType && resourceType.includes('/')
  return useQuery({
    queryKey: ['items', resourceType, 'version', null],
    queryFn: () => unwrap(api.GET('/api/items/{path}', { params: { path: { path: resourceType ?? '' } } })),
    enabled: isItem,
    select: (item) => (item.kind === 'resource_type' && typeof item.value === 'object' ? (item.value as JsonSchema) : null),
  })
}

export function ResourceEditor({ item, onDone }: { item: Item; onDone: () => void }) {
  const start = pretty(item.value)
  const [text, setText] = useState(start)
  const [summary, setSummary] = useState(item.summary)
  const [message, setMessage] = useState('')
  const typeSchema = useTypeSchema(item.kind === 'resource' ? item.resource_type : null)
  const schema = typeSchema.data ?? null
  const [mode, setMode] = useState<'form' | 'json'>('form')
  const save = useSaveValue(item, onDone)
  const parsed = parse(text)
  const formMode = schema !== null && mode === 'form' && parsed.ok
  const what = item.kind === 'resource_type' ? 'Schema' : 'Value'
  return (
    <form
      className="item-editor value-editor"
      aria-label={`Edit ${item.path}`}
      onSubmit={(e) => {
        e.preventDefault()
        if (parsed.ok) save.mutate({ value: parsed.value, summary, description: item.description, message })
      }}
    >
      {item.resource_type && (
        <p>
          Resource type: <code>{item.resource_type}</code>
          {schema === null && item.kind === 'resource' && (
            <span className="muted"> (edited as JSON; the server checks it against its type)</span>
          )}
        </p>
      )}
      {schema !== null && (
        <div className="buttons" role="group" aria-label="Edit as">
          <button type="button" className="small" aria-pressed={formMode} disabled={!parsed.ok} onClick={() => setMode('form')}>
            Form
          </button>
          <button type="button" className="small" aria-pressed={!formMode} onClick={() => setMode('json')}>
            JSON
          </button>
        </div>
      )}
      {typeSchema.isLoading ? (
        <p className="muted">Loading the type’s schema…</p>
      ) : formMode ? (
        <SchemaForm schema={schema} value={parsed.value} onChange={(v) => setText(pretty(v))} label={`${what} of ${item.path}`} />
      ) : (
        <CodeEditor value={text} onChange={setText} language="json" label={`${what} of ${item.path}`} />
      )}
      {!parsed.ok && (
        <p className="field-error" role="status">
          Not valid JSON: {parsed.error}
        </p>
      )}
      <SummaryField value={summary} onChange={setSummary} />
      {item.kind === 'resource' && (
        <div className="field">
          <label htmlFor={`message-${item.path}`}>What changed (optional)</label>
          <input id={`message-${item.path}`} value={message} onChange={(e) => setMessage(e.target.value)} />
        </div>
      )}
      <ErrorBox error={save.error} title="Not saved" />
      <div className="buttons">
        <button type="submit" className="primary" disabled={save.isPending || !parsed.ok || (text === start && summary === item.summary)}>
          {item.kind === 'resource' ? `Save as v${item.version + 1}` : 'Save'}
        </button>
        <button type="button" onClick={onDone} disabled={save.isPending}>
          Cancel
        </button>
      </div>
    </form>
  )
}
