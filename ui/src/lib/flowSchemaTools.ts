/**
 * The input schema of an agent's tool, as far as the UI can tell: a script tool's
 * arguments are its `main`'s parameters (the server reads them the same way, from the
 * type hints); a flow tool's are its flow's input schema. Null: unknown (edit as JSON).
 */
import type { JsonSchema } from '../components/SchemaForm'

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Split `text` at top-level commas (not those inside brackets or strings). */
function splitTop(text: string): string[] {
  const parts: string[] = []
  let depth = 0
  let quote: string | null = null
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quote) {
      if (c === '\\') i++
      else if (c === quote) quote = null
    } else if (c === '"' || c === "'") quote = c
    else if ('([{'.includes(c)) depth++
    else if (')]}'.includes(c)) depth--
    else if (c === ',' && depth === 0) {
      parts.push(text.slice(start, i))
      start = i + 1
    }
  }
  parts.push(text.slice(start))
  return parts.map((p) => p.trim()).filter(Boolean)
}

function typeSchema(hint: string): JsonSchema {
  let h = hint.trim().replace(/^["']|["']$/g, '')
  const optional = /^Optional\[(.*)\]$/.exec(h)
  if (optional) h = optional[1]!
  const union = splitTop(h.replace(/\|/g, ',')).filter((t) => t !== 'None')
  if (union.length === 1) h = union[0]!
  const base = h.replace(/\[.*$/, '').replace(/^typing\./, '')
  switch (base) {
    case 'str':
      return { type: 'string' }
    case 'int':
      return { type: 'integer' }
    case 'float':
      return { type: 'number' }
    case 'bool':
      return { type: 'boolean' }
    case 'dict':
    case 'Dict':
      return { type: 'object' }
    case 'list':
    case 'List':
      return { type: 'array' }
    default:
      return {}
  }
}

function pythonValue(text: string): unknown {
  const t = text.trim()
  if (t === 'None') return undefined
  if (t === 'True') return true
  if (t === 'False') return false
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t)
  const quoted = /^(["'])(.*)\1$/.exec(t)
  return quoted ? quoted[2] : undefined
}

/** The parameters of the top-level `def main(...)` of Python source, as a JSON Schema. */
export function mainParameters(code: string): JsonSchema | null {
  const start = /^(?:async\s+)?def\s+main\s*\(/m.exec(code)
  if (!start) return null
  let depth = 1
  let i = start.index + start[0].length
  const from = i
  for (; i < code.length && depth > 0; i++) {
    if (code[i] === '(') depth++
    else if (code[i] === ')') depth--
  }
  const properties: Record<string, JsonSchema> = {}
  const required: string[] = []
  for (const raw of splitTop(code.slice(from, i - 1).replace(/#.*$/gm, ''))) {
    if (raw === '/' || raw === '*' || raw.startsWith('**') || raw.startsWith('*')) continue
    const [left, defaultText] = splitAt(raw, '=')
    const [name, hint] = splitAt(left, ':')
    if (!/^[A-Za-z_]\w*$/.test(name)) continue
    const schema = hint ? typeSchema(hint) : {}
    const fallback = defaultText === undefined ? undefined : pythonValue(defaultText)
    properties[name] = fallback === undefined ? schema : { ...schema, default: fallback }
    if (defaultText === undefined) required.push(name)
  }
  return { type: 'object', properties, required }
}

function splitAt(text: string, sep: string): [string, string | undefined] {
  const index = text.indexOf(sep)
  return index < 0 ? [text.trim(), undefined] : [text.slice(0, index).trim(), text.slice(index + 1).trim()]
}

export interface ToolInfo {
  name: string
  description: string
  requiresApproval: boolean
  /** What it runs, in a word: script, workspace script, function, flow, agent, mcp. */
  kind: string
  /** A workspace script the tool runs (its parameters are that script's). */
  scriptPath: string | null
  /** Its code when the agent holds it inline. */
  code: string | null
  schema: JsonSchema | null
  /** The arguments the agent itself binds (hidden from the model). */
  inputs: Record<string, unknown>
}

/** The tools of an agent's definition (an `ai_agent` resource's value). */
export function agentTools(agent: unknown): ToolInfo[] {
  if (!isObject(agent) || !Array.isArray(agent.tools)) return []
  return agent.tools.filter(isObject).map((tool): ToolInfo => {
    const script = tool.script
    const code = typeof script === 'string' ? script : isObject(script) && typeof script.code === 'string' ? script.code : null
    const scriptPath = isObject(script) && typeof script.path === 'string' ? script.path : null
    const flow = isObject(tool.flow) ? tool.flow : null
    const kind = code || scriptPath ? 'script' : (['function', 'flow', 'agent', 'mcp'].find((k) => tool[k] != null) ?? 'tool')
    let schema: JsonSchema | null = code ? mainParameters(code) : null
    if (!schema && flow && isObject(flow.inputs)) schema = flow.inputs as JsonSchema
    if (!schema && kind === 'agent') schema = { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] }
    return {
      name: String(tool.name ?? ''),
      description: typeof tool.description === 'string' ? tool.description : '',
      requiresApproval: tool.requires_approval === true,
      kind,
      scriptPath,
      code,
      schema,
      inputs: isObject(tool.inputs) ? tool.inputs : {},
    }
  })
}
