/**
 * A form built from a JSON Schema: strings, numbers, integers, booleans, enums,
 * objects and arrays, with required fields marked. Anything else (or a schema
 * it cannot read) is edited as JSON text. It is controlled: `onChange` gets
 * the whole edited value.
 */
import { type ReactNode, useId, useState } from 'react'

export type JsonSchema = {
  type?: string | string[]
  title?: string
  description?: string
  enum?: unknown[]
  const?: unknown
  default?: unknown
  properties?: Record<string, JsonSchema>
  required?: string[]
  items?: JsonSchema
  minimum?: number
  maximum?: number
  [key: string]: unknown
}

type Props = {
  schema: JsonSchema
  value: unknown
  onChange: (value: unknown) => void
  /** Accessible name of the top-level field (objects use their property names). */
  label?: string
}

function typeOf(schema: JsonSchema): string | undefined {
  if (Array.isArray(schema.enum)) return 'enum'
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type
  if (type) return type
  if (schema.properties) return 'object'
  if (schema.items) return 'array'
  return undefined
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A starting value for a new field of this schema. */
export function emptyValue(schema: JsonSchema): unknown {
  if (schema.default !== undefined) return schema.default
  switch (typeOf(schema)) {
    case 'object':
      return {}
    case 'array':
      return []
    case 'boolean':
      return false
    case 'string':
      return ''
    case 'enum':
      return schema.enum?.[0]
    default:
      return undefined
  }
}

/** What is wrong with `value` against the parts of `schema` the form knows (required, types). */
export function schemaProblems(schema: JsonSchema, value: unknown, where = ''): string[] {
  const name = where || '(value)'
  const type = typeOf(schema)
  if (value === undefined) return []
  switch (type) {
    case 'object': {
      if (!isObject(value)) return [`${name}: must be an object`]
      const problems: string[] = []
      for (const key of schema.required ?? []) {
        const v = value[key]
        if (v === undefined || v === '') problems.push(`${where ? `${where}.` : ''}${key}: is required`)
      }
      for (const [key, sub] of Object.entries(schema.properties ?? {}))
        problems.push(...schemaProblems(sub, value[key], where ? `${where}.${key}` : key))
      return problems
    }
    case 'array':
      if (!Array.isArray(value)) return [`${name}: must be a list`]
      return schema.items ? value.flatMap((v, i) => schemaProblems(schema.items!, v, `${name}[${i}]`)) : []
    case 'integer':
      return Number.isInteger(value) ? [] : [`${name}: must be a whole number`]
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? [] : [`${name}: must be a number`]
    case 'string':
      return typeof value === 'string' ? [] : [`${name}: must be text`]
    case 'boolean':
      return typeof value === 'boolean' ? [] : [`${name}: must be true or false`]
    case 'enum':
      return schema.enum!.some((e) => JSON.stringify(e) === JSON.stringify(value))
        ? []
        : [`${name}: must be one of ${schema.enum!.map((e) => JSON.stringify(e)).join(', ')}`]
    default:
      return []
  }
}

export function SchemaForm({ schema, value, onChange, label = 'Value' }: Props) {
  return (
    <div className="schema-form">
      <Field schema={schema} value={value} onChange={onChange} label={label} required={false} />
    </div>
  )
}

type FieldProps = {
  schema: JsonSchema
  value: unknown
  onChange: (value: unknown) => void
  label: string
  required: boolean
}

function FieldLabel({ htmlFor, label, required }: { htmlFor?: string; label: string; required: boolean }) {
  return (
    <label htmlFor={htmlFor} className="field-label">
      {label}
      {required && (
        <span className="required" aria-hidden="true">
          {' '}
          *
        </span>
      )}
    </label>
  )
}

function Field({ schema, value, onChange, label, required }: FieldProps) {
  const id = useId()
  const type = typeOf(schema)
  const title = schema.title && schema.title !== label ? `${label} (${schema.title})` : label
  const help = schema.description ? <small className="field-help">{schema.description}</small> : null

  switch (type) {
    case 'object':
      return <ObjectField schema={schema} value={value} onChange={onChange} label={title} required={required} />
    case 'array':
      return <ArrayField schema={schema} value={value} onChange={onChange} label={title} required={required} />
    case 'boolean':
      return (
        <div className="field field-check">
          <input
            id={id}
            type="checkbox"
            checked={value === true}
            onChange={(e) => onChange(e.target.checked)}
          />
          <FieldLabel htmlFor={id} label={title} required={required} />
          {help}
        </div>
      )
    case 'enum': {
      const options = schema.enum ?? []
      const index = options.findIndex((o) => JSON.stringify(o) === JSON.stringify(value))
      return (
        <div className="field">
          <FieldLabel htmlFor={id} label={title} required={required} />
          <select
            id={id}
            value={index < 0 ? '' : String(index)}
            required={required}
            onChange={(e) => onChange(e.target.value === '' ? undefined : options[Number(e.target.value)])}
          >
            {(!required || index < 0) && <option value="">—</option>}
            {options.map((option, i) => (
              <option key={i} value={String(i)}>
                {typeof option === 'string' ? option : JSON.stringify(option)}
              </option>
            ))}
          </select>
          {help}
        </div>
      )
    }
    case 'number':
    case 'integer':
      return (
        <NumberField
          id={id}
          integer={type === 'integer'}
          schema={schema}
          value={value}
          onChange={onChange}
          label={title}
          required={required}
          help={help}
        />
      )
    case 'string':
      return (
        <div className="field">
          <FieldLabel htmlFor={id} label={title} required={required} />
          <input
            id={id}
            type="text"
            value={typeof value === 'string' ? value : ''}
            required={required}
            onChange={(e) => onChange(e.target.value)}
          />
          {help}
        </div>
      )
    default:
      return <JsonField id={id} value={value} onChange={onChange} label={title} required={required} help={help} />
  }
}

function NumberField(props: FieldProps & { id: string; integer: boolean; help: ReactNode }) {
  const { id, integer, schema, value, onChange, label, required, help } = props
  const [text, setText] = useState(typeof value === 'number' ? String(value) : '')
  const [bad, setBad] = useState(false)
  return (
    <div className="field">
      <FieldLabel htmlFor={id} label={label} required={required} />
      <input
        id={id}
        type="number"
        inputMode={integer ? 'numeric' : 'decimal'}
        step={integer ? 1 : 'any'}
        min={schema.minimum}
        max={schema.maximum}
        value={text}
        required={required}
        aria-invalid={bad || undefined}
        onChange={(e) => {
          const next = e.target.value
          setText(next)
          if (next.trim() === '') {
            setBad(false)
            onChange(undefined)
            return
          }
          const n = Number(next)
          const ok = Number.isFinite(n) && (!integer || Number.isInteger(n))
          setBad(!ok)
          if (ok) onChange(n)
        }}
      />
      {bad && <small className="field-error">{integer ? 'A whole number' : 'A number'}, please.</small>}
      {help}
    </div>
  )
}

function JsonField(props: Omit<FieldProps, 'schema'> & { id: string; help: ReactNode }) {
  const { id, value, onChange, label, required, help } = props
  const [text, setText] = useState(value === undefined ? '' : JSON.stringify(value, null, 2))
  const [bad, setBad] = useState(false)
  return (
    <div className="field">
      <FieldLabel htmlFor={id} label={`${label} (JSON)`} required={required} />
      <textarea
        id={id}
        rows={3}
        value={text}
        aria-invalid={bad || undefined}
        onChange={(e) => {
          setText(e.target.value)
          if (e.target.value.trim() === '') {
            setBad(false)
            onChange(undefined)
            return
          }
          try {
            onChange(JSON.parse(e.target.value))
            setBad(false)
          } catch {
            setBad(true)
          }
        }}
      />
      {bad && <small className="field-error">Not valid JSON.</small>}
      {help}
    </div>
  )
}

function ObjectField({ schema, value, onChange, label, required }: FieldProps) {
  const object = isObject(value) ? value : {}
  const properties = Object.entries(schema.properties ?? {})
  const requiredKeys = new Set(schema.required ?? [])
  const extra = Object.keys(object).filter((k) => !(k in (schema.properties ?? {})))
  const set = (key: string, next: unknown) => {
    const copy = { ...object }
    if (next === undefined) delete copy[key]
    else copy[key] = next
    onChange(copy)
  }
  return (
    <fieldset className="field-object">
      <legend>
        {label}
        {required && <span className="required"> *</span>}
      </legend>
      {schema.description && <small className="field-help">{schema.description}</small>}
      {properties.map(([key, sub]) => (
        <Field
          key={key}
          schema={sub}
          value={object[key]}
          onChange={(next) => set(key, next)}
          label={key}
          required={requiredKeys.has(key)}
        />
      ))}
      {extra.map((key) => (
        <Field key={key} schema={{}} value={object[key]} onChange={(next) => set(key, next)} label={key} required={false} />
      ))}
      {properties.length === 0 && extra.length === 0 && (
        <JsonField id={`${label}-json`} value={value} onChange={onChange} label={label} required={required} help={null} />
      )}
    </fieldset>
  )
}

function ArrayField({ schema, value, onChange, label, required }: FieldProps) {
  const list = Array.isArray(value) ? value : []
  const itemSchema = schema.items ?? {}
  return (
    <fieldset className="field-array">
      <legend>
        {label}
        {required && <span className="required"> *</span>}
      </legend>
      {list.map((item, i) => (
        <div className="array-item" key={i}>
          <Field
            schema={itemSchema}
            value={item}
            onChange={(next) => onChange(list.map((v, j) => (j === i ? next : v)))}
            label={`${label} ${i + 1}`}
            required={false}
          />
          <button type="button" className="small" onClick={() => onChange(list.filter((_, j) => j !== i))}>
            Remove {label} {i + 1}
          </button>
        </div>
      ))}
      <button type="button" className="small" onClick={() => onChange([...list, emptyValue(itemSchema)])}>
        Add {label}
      </button>
    </fieldset>
  )
}
