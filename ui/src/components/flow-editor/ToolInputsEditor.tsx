/**
 * One tool's input overrides on a linked step (`tool_inputs[<tool>]`): per argument, the
 * agent's own binding, a value (a form field from the argument's schema) or an expression.
 */
import { useId, useState } from 'react'
import { type JsonSchema, SchemaForm, emptyValue } from '../SchemaForm'

type Mode = 'inherit' | 'value' | 'expr'

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function modeOf(value: unknown): Mode {
  if (value === undefined) return 'inherit'
  return isObject(value) && typeof value.expr === 'string' && Object.keys(value).length === 1 ? 'expr' : 'value'
}

function Argument({
  tool,
  name,
  schema,
  value,
  bound,
  onChange,
}: {
  tool: string
  name: string
  schema: JsonSchema
  value: unknown
  bound: unknown
  onChange: (value: unknown) => void
}) {
  const id = useId()
  const mode = modeOf(value)
  return (
    <div className="fe-argument">
      <div className="field">
        <label htmlFor={`${id}-mode`}>
          <span className="mono">{name}</span>
          {schema.type ? <span className="muted"> ({String(schema.type)})</span> : null}
        </label>
        <select
          id={`${id}-mode`}
          aria-label={`${name} of ${tool}: where it comes from`}
          value={mode}
          onChange={(e) => {
            const next = e.target.value as Mode
            if (next === 'inherit') onChange(undefined)
            else if (next === 'expr') onChange({ expr: '' })
            else onChange(emptyValue(schema) ?? '')
          }}
        >
          <option value="inherit">{bound === undefined ? 'The model fills it' : 'As the agent binds it'}</option>
          <option value="value">A value</option>
          <option value="expr">An expression</option>
        </select>
        {mode === 'inherit' && bound !== undefined && (
          <small className="field-help">
            The agent binds it to <code>{JSON.stringify(bound)}</code>.
          </small>
        )}
      </div>
      {mode === 'value' && <SchemaForm schema={schema} value={value} onChange={onChange} label={`${name} of ${tool}`} />}
      {mode === 'expr' && (
        <div className="field">
          <label htmlFor={`${id}-expr`}>{`${name} of ${tool}: expression`}</label>
          <input
            id={`${id}-expr`}
            className="mono"
            placeholder="flow_input.order_id"
            value={isObject(value) ? String(value.expr ?? '') : ''}
            onChange={(e) => onChange({ expr: e.target.value })}
          />
        </div>
      )}
    </div>
  )
}

function JsonInputs({ tool, value, onChange }: { tool: string; value: Record<string, unknown>; onChange: (v: Record<string, unknown>) => void }) {
  const id = useId()
  const [text, setText] = useState(() => (Object.keys(value).length ? JSON.stringify(value, null, 2) : ''))
  const [bad, setBad] = useState<string | null>(null)
  return (
    <div className="field">
      <label htmlFor={id}>Inputs of {tool} (JSON: values, or {'{"expr": …}'})</label>
      <textarea
        id={id}
        rows={4}
        value={text}
        aria-invalid={bad ? true : undefined}
        onChange={(e) => {
          setText(e.target.value)
          if (e.target.value.trim() === '') {
            setBad(null)
            onChange({})
            return
          }
          try {
            const parsed: unknown = JSON.parse(e.target.value)
            if (!isObject(parsed)) throw new Error('an object of argument names, please')
            setBad(null)
            onChange(parsed)
          } catch (error) {
            setBad(error instanceof SyntaxError ? 'Not valid JSON.' : String((error as Error).message))
          }
        }}
      />
      {bad && <small className="field-error">{bad}</small>}
    </div>
  )
}

export function ToolInputsEditor({
  tool,
  schema,
  bound,
  value,
  onChange,
}: {
  tool: string
  /** The tool's arguments (null: unknown, edited as JSON). */
  schema: JsonSchema | null
  /** What the agent itself binds (its tool's `inputs`). */
  bound: Record<string, unknown>
  value: Record<string, unknown>
  onChange: (value: Record<string, unknown>) => void
}) {
  const properties = Object.entries(schema?.properties ?? {})
  if (!schema || properties.length === 0) return <JsonInputs tool={tool} value={value} onChange={onChange} />
  const set = (name: string, next: unknown) => {
    const copy = { ...value }
    if (next === undefined) delete copy[name]
    else copy[name] = next
    onChange(copy)
  }
  return (
    <div className="fe-tool-inputs">
      {properties.map(([name, sub]) => (
        <Argument
          key={name}
          tool={tool}
          name={name}
          schema={sub}
          value={value[name]}
          bound={bound[name]}
          onChange={(next) => set(name, next)}
        />
      ))}
    </div>
  )
}
