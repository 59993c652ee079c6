/**
 * The flow's JSON Schema (`schemas/flow.schema.json`, bundled with the editor's chunk):
 * what keys and values it allows at a place in a flow document, and what is wrong with one.
 */
import type { ErrorObject } from 'ajv'
import schemaJson from '../../../schemas/flow.schema.json'
import validate from './flowSchemaValidate.gen.js'

export type Segment = string | number

export type Schema = {
  $ref?: string
  type?: string | string[]
  description?: string
  properties?: Record<string, Schema>
  additionalProperties?: boolean | Schema
  items?: Schema
  anyOf?: Schema[]
  oneOf?: Schema[]
  allOf?: Schema[]
  enum?: unknown[]
  const?: unknown
  required?: string[]
  [key: string]: unknown
}

export const FLOW_SCHEMA = schemaJson as Schema

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The schema a local `$ref` (`#/$defs/Step`) points to. */
function deref(schema: Schema, root: Schema): Schema {
  let current = schema
  for (let hops = 0; current.$ref && hops < 32; hops++) {
    const parts = current.$ref.replace(/^#\//, '').split('/')
    let target: unknown = root
    for (const part of parts) target = isObject(target) ? target[part] : undefined
    if (!isObject(target)) return {}
    // Keep the referring schema's own description, which is usually the more specific.
    current = { ...(target as Schema), description: current.description ?? (target as Schema).description }
  }
  return current
}

/** The concrete alternatives a schema allows (its `$ref`s followed, `anyOf`/`oneOf` flattened). */
export function alternatives(schema: Schema, root: Schema = FLOW_SCHEMA): Schema[] {
  const resolved = deref(schema, root)
  const options = resolved.anyOf ?? resolved.oneOf
  if (!options) return [resolved]
  return options.flatMap((option) =>
    alternatives({ ...option, description: option.description ?? resolved.description }, root),
  )
}

function child(schema: Schema, segment: Segment): Schema[] {
  if (typeof segment === 'number') return schema.items ? [schema.items] : []
  const property = schema.properties?.[segment]
  if (property) return [property]
  return isObject(schema.additionalProperties) ? [schema.additionalProperties as Schema] : []
}

/** The schemas that may describe the value at `path` (empty: the schema allows nothing there). */
export function schemasAt(path: readonly Segment[], root: Schema = FLOW_SCHEMA): Schema[] {
  let current = alternatives(root, root)
  for (const segment of path) current = current.flatMap((s) => child(s, segment).flatMap((c) => alternatives(c, root)))
  return current
}

export interface KeyInfo {
  key: string
  description: string
  /** The value opens a block (a mapping or a list) rather than sitting on the key's line. */
  block: boolean
}

function opensBlock(schema: Schema, root: Schema): boolean {
  return alternatives(schema, root).some((s) => s.type === 'object' || s.type === 'array' || !!s.properties)
}

/** The keys a mapping at `path` may have, with their descriptions. */
export function keysAt(path: readonly Segment[], root: Schema = FLOW_SCHEMA): KeyInfo[] {
  const keys = new Map<string, KeyInfo>()
  for (const schema of schemasAt(path, root)) {
    for (const [key, sub] of Object.entries(schema.properties ?? {})) {
      if (keys.has(key)) continue
      keys.set(key, { key, description: sub.description ?? deref(sub, root).description ?? '', block: opensBlock(sub, root) })
    }
  }
  return [...keys.values()]
}

/** The values the schema lists for `path`: enums, consts and booleans. */
export function valuesAt(path: readonly Segment[], root: Schema = FLOW_SCHEMA): unknown[] {
  const values: unknown[] = []
  const add = (value: unknown) => {
    if (!values.some((v) => JSON.stringify(v) === JSON.stringify(value))) values.push(value)
  }
  for (const schema of schemasAt(path, root)) {
    for (const value of schema.enum ?? []) add(value)
    if (schema.const !== undefined) add(schema.const)
    if (schema.type === 'boolean') {
      add(true)
      add(false)
    }
  }
  return values
}

export interface SchemaProblem {
  /** Where the offending value is (for an unknown key: the mapping holding it). */
  path: Segment[]
  /** The key it is about, when it is about a key of the mapping at `path`. */
  key?: string
  message: string
}

function pointer(instancePath: string, value: unknown): Segment[] {
  if (instancePath === '') return []
  const path: Segment[] = []
  let current = value
  for (const raw of instancePath.slice(1).split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    const segment = Array.isArray(current) && /^\d+$/.test(part) ? Number(part) : part
    path.push(segment)
    current = isObject(current) || Array.isArray(current) ? (current as Record<string, unknown>)[segment] : undefined
  }
  return path
}

function readable(errors: ErrorObject[]): { key?: string; message: string }[] {
  const types = errors.filter((e) => e.keyword === 'type').map((e) => String(e.params.type))
  const out: { key?: string; message: string }[] = []
  if (types.length > 0) {
    const named = [...new Set(types.filter((t) => t !== 'null'))]
    out.push({ message: `must be ${named.length ? named.join(' or ') : 'null'}` })
  }
  for (const e of errors) {
    if (e.keyword === 'type' || e.keyword === 'anyOf' || e.keyword === 'oneOf' || e.keyword === 'if') continue
    if (e.keyword === 'additionalProperties') {
      const key = String(e.params.additionalProperty)
      out.push({ key, message: `unknown key \`${key}\`` })
    } else if (e.keyword === 'required') {
      out.push({ message: `missing \`${String(e.params.missingProperty)}\`` })
    } else if (e.keyword === 'enum') {
      out.push({ message: `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}` })
    } else {
      out.push({ message: e.message ?? e.keyword })
    }
  }
  return out
}

/**
 * ajv's errors, made readable: an `anyOf` reports every branch, so a place with a
 * precise error (an unknown key, a missing one) drops the type errors of the branches
 * it did not take, and the `anyOf` itself.
 */
export function schemaProblems(value: unknown): SchemaProblem[] {
  if (validate(value)) return []
  const errors = validate.errors ?? []
  const byPath = new Map<string, ErrorObject[]>()
  for (const error of errors) byPath.set(error.instancePath, [...(byPath.get(error.instancePath) ?? []), error])
  const paths = [...byPath.keys()]
  const problems: SchemaProblem[] = []
  for (const [where, here] of byPath) {
    const deeper = paths.some((p) => p !== where && p.startsWith(`${where}/`))
    const precise = here.filter((e) => !['type', 'anyOf', 'oneOf', 'const', 'if'].includes(e.keyword))
    // A type mismatch where a deeper error says what is wrong: the branch taken is the object one.
    const kept = precise.length > 0 || deeper ? precise : here
    for (const { key, message } of readable(kept)) problems.push({ path: pointer(where, value), key, message })
  }
  return problems
}
