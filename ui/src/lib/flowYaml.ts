/**
 * A flow's YAML text: parse it (keeping positions), find the text of a value or a
 * step, and change a linked step's `tool_inputs` without rewriting the rest.
 */
import { type Document, isMap, isPair, isScalar, isSeq, type Node, parseDocument, stringify } from 'yaml'
import type { Segment } from './flowSchema'

export interface Range {
  from: number
  to: number
}

export interface TextProblem extends Range {
  severity: 'error' | 'warning'
  message: string
  /** Who found it: the YAML parser, the flow's JSON Schema, or the server. */
  source: 'yaml' | 'schema' | 'server'
}

export interface ParsedFlow {
  doc: Document.Parsed
  /** The document's value; null when the YAML does not parse. */
  value: unknown
  problems: TextProblem[]
}

function clamp(range: Range, length: number): Range {
  const from = Math.max(0, Math.min(range.from, length))
  return { from, to: Math.max(from, Math.min(range.to, length)) }
}

export function parseFlow(text: string): ParsedFlow {
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true })
  const problems: TextProblem[] = [
    ...doc.errors.map((e) => ({ ...clamp({ from: e.pos[0], to: e.pos[1] }, text.length), severity: 'error' as const, message: e.message, source: 'yaml' as const })),
    ...doc.warnings.map((e) => ({ ...clamp({ from: e.pos[0], to: e.pos[1] }, text.length), severity: 'warning' as const, message: e.message, source: 'yaml' as const })),
  ]
  const value = doc.errors.length > 0 ? null : (doc.toJS() as unknown)
  return { doc, value, problems }
}

/** The YAML text of a flow document (what a draft or an item holds). */
export function flowText(value: unknown): string {
  return typeof value === 'string' ? value : stringify(value, { lineWidth: 0 })
}

function pairOf(map: Node, key: Segment) {
  if (!isMap(map)) return undefined
  return map.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(key))
}

/** The node at `path`, or the deepest node on the way there (and how far it got). */
export function nodeAt(doc: Document, path: readonly Segment[]): { node: Node | null; depth: number; keyNode: Node | null } {
  let node = (doc.contents as Node | null) ?? null
  let keyNode: Node | null = null
  for (let depth = 0; depth < path.length; depth++) {
    const segment = path[depth]!
    let next: Node | null = null
    if (isSeq(node) && typeof segment === 'number') next = (node.items[segment] as Node | undefined) ?? null
    else if (node && isMap(node)) {
      const pair = pairOf(node, segment)
      if (pair) {
        keyNode = (pair.key as Node) ?? null
        next = (pair.value as Node | null) ?? keyNode
      }
    }
    if (!next) return { node, depth, keyNode }
    node = next
  }
  return { node, depth: path.length, keyNode }
}

function rangeOf(node: Node | null | undefined): Range | null {
  return node?.range ? { from: node.range[0], to: node.range[1] } : null
}

/** Only the first line of a range: a whole mapping underlined says less than its head. */
function firstLine(text: string, range: Range): Range {
  const end = text.indexOf('\n', range.from)
  return { from: range.from, to: end < 0 || end > range.to ? range.to : end }
}

/** The text a schema problem is about: an unknown key's own name, else the value at `path`. */
export function problemRange(doc: Document, text: string, path: readonly Segment[], key?: string): Range {
  const { node, depth } = nodeAt(doc, path)
  if (key !== undefined && depth === path.length && node && isMap(node)) {
    const pair = pairOf(node, key)
    const range = rangeOf(pair?.key as Node | undefined)
    if (range) return range
  }
  const range = rangeOf(node) ?? { from: 0, to: 0 }
  const line = firstLine(text, range)
  return line.to > line.from ? line : { from: line.from, to: Math.min(text.length, line.from + 1) }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Where the step `id` is in a flow document, searching nested steps (branches, loops) too. */
export function stepPath(value: unknown, id: string): Segment[] | null {
  const search = (node: unknown, path: Segment[]): Segment[] | null => {
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const found = search(node[i], [...path, i])
        if (found) return found
      }
      return null
    }
    if (!isObject(node)) return null
    if (node.id === id && path.length >= 2 && path[path.length - 2] === 'steps') return path
    for (const [key, child] of Object.entries(node)) {
      const found = search(child, [...path, key])
      if (found) return found
    }
    return null
  }
  return search(value, [])
}

/** The line of the step `id` (its `id:` entry), or null when there is no such step. */
export function stepRange(doc: Document, text: string, value: unknown, id: string): Range | null {
  const path = stepPath(value, id)
  if (!path) return null
  return problemRange(doc, text, [...path, 'id'])
}

/** A linked step's `tool_inputs` for `tool` (an empty object when it has none). */
export function toolInputs(value: unknown, stepId: string, tool: string): Record<string, unknown> {
  const path = stepPath(value, stepId)
  let node: unknown = value
  for (const segment of path ?? []) node = (node as Record<string, unknown>)[segment]
  const agent = isObject(node) ? node.ai_agent : undefined
  const all = isObject(agent) ? agent.tool_inputs : undefined
  const inputs = isObject(all) ? all[tool] : undefined
  return isObject(inputs) ? inputs : {}
}

/**
 * `text` with the step's `ai_agent.tool_inputs[tool]` set to `inputs` (removed when empty,
 * and `tool_inputs` with it when no tool is left); comments and the rest stay as written.
 * Null when the text does not parse or has no such step.
 */
export function setToolInputs(text: string, stepId: string, tool: string, inputs: Record<string, unknown>): string | null {
  const { doc, value } = parseFlow(text)
  if (value === null) return null
  const path = stepPath(value, stepId)
  if (!path) return null
  const all = [...path, 'ai_agent', 'tool_inputs']
  if (Object.keys(inputs).length > 0) doc.setIn([...all, tool], doc.createNode(inputs))
  else if (doc.hasIn([...all, tool])) {
    doc.deleteIn([...all, tool])
    const left = doc.getIn(all)
    if (isMap(left) && left.items.length === 0) doc.deleteIn(all)
  }
  return doc.toString({ lineWidth: 0 })
}
