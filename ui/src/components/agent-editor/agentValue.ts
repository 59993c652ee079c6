/**
 * An agent (an `ai_agent` resource's value) as the editor reads it: the keys the
 * form edits, and the rest, which the raw view edits and every change keeps.
 * Every helper returns a new object that differs from its input only in the keys
 * it was asked to change, so a round trip through the editor loses nothing.
 */

export type Agent = Record<string, unknown>
export type Tool = Record<string, unknown>

/** The agent keys the brain form and the tools list edit; the raw view edits the others. */
export const FORM_KEYS = ['model', 'provider', 'system', 'temperature', 'max_iterations', 'limits', 'tools'] as const

/** The keys of `limits` the form edits (others stay as they are). */
export const LIMIT_KEYS = [
  'max_tool_calls',
  'max_requests',
  'max_input_tokens',
  'max_output_tokens',
  'max_total_tokens',
] as const

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** `object` with `key` set to `value`, or without `key` when `value` is undefined. */
export function withKey<T extends Record<string, unknown>>(object: T, key: string, value: unknown): T {
  const next: Record<string, unknown> = { ...object }
  if (value === undefined) delete next[key]
  else next[key] = value
  return next as T
}

/** The keys of `object` that are not in `covered`. */
export function otherKeys(object: Record<string, unknown>, covered: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(object).filter(([key]) => !covered.includes(key)))
}

/**
 * `object` with its keys outside `covered` replaced by `others`, in their
 * original order where they were already there.
 */
export function withOtherKeys<T extends Record<string, unknown>>(
  object: T,
  covered: readonly string[],
  others: Record<string, unknown>,
): T {
  const next: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(object)) {
    if (covered.includes(key)) next[key] = value
    else if (key in others) next[key] = others[key]
  }
  for (const [key, value] of Object.entries(others)) if (!(key in next)) next[key] = value
  return next as T
}

/** `limits` with one bound changed (undefined: no bound); an emptied `limits` is dropped. */
export function withLimit(agent: Agent, key: string, value: unknown): Agent {
  const limits = withKey(isObject(agent.limits) ? agent.limits : {}, key, value)
  return withKey(agent, 'limits', Object.keys(limits).length > 0 ? limits : undefined)
}

export function toolsOf(agent: Agent): Tool[] {
  return Array.isArray(agent.tools) ? agent.tools.map((t) => (isObject(t) ? t : {})) : []
}

export function withTool(agent: Agent, index: number, tool: Tool): Agent {
  return { ...agent, tools: toolsOf(agent).map((t, i) => (i === index ? tool : t)) }
}

export function withoutTool(agent: Agent, index: number): Agent {
  return { ...agent, tools: toolsOf(agent).filter((_, i) => i !== index) }
}

/** How a tool runs, as the tools list edits it; `other` is edited in the tool's raw view. */
export type ToolKind = 'code' | 'script' | 'function' | 'flow' | 'agent' | 'mcp' | 'other'

export const TOOL_KINDS: { kind: Exclude<ToolKind, 'other'>; label: string; field: string }[] = [
  { kind: 'code', label: 'Python code', field: 'Code' },
  { kind: 'script', label: 'Workspace script', field: 'Script path' },
  { kind: 'function', label: 'Python function (module:function)', field: 'Function' },
  { kind: 'flow', label: 'Workspace flow', field: 'Flow path' },
  { kind: 'agent', label: 'Saved agent', field: 'Agent path' },
  { kind: 'mcp', label: 'MCP server resource', field: 'MCP resource' },
]

/** The keys that say what a tool runs: a tool has exactly one of them. */
export const KIND_KEYS = ['script', 'function', 'flow', 'agent', 'mcp'] as const

export function toolKind(tool: Tool): ToolKind {
  const present = KIND_KEYS.filter((key) => tool[key] !== undefined && tool[key] !== null)
  if (present.length !== 1) return 'other'
  const value = tool[present[0]!]
  switch (present[0]) {
    case 'script':
      if (typeof value === 'string') return 'code'
      return isObject(value) && typeof value.path === 'string' && Object.keys(value).length === 1 ? 'script' : 'other'
    case 'function':
      return typeof value === 'string' ? 'function' : 'other'
    case 'flow':
      return typeof value === 'string' || (isObject(value) && onlyKey(value, 'path')) ? 'flow' : 'other'
    case 'agent':
      return isObject(value) && onlyKey(value, 'agent') ? 'agent' : 'other'
    case 'mcp':
      // `tools` and the timeouts stay on a resource's tool: edited in the raw view, kept here.
      return isObject(value) && typeof value.resource === 'string' && !('command' in value) && !('url' in value)
        ? 'mcp'
        : 'other'
    default:
      return 'other'
  }
}

function onlyKey(value: Record<string, unknown>, key: string): boolean {
  const keys = Object.keys(value)
  return keys.length === 1 && keys[0] === key && typeof value[key] === 'string'
}

/** What the tools list shows in the kind's one field: the code, or the path it names. */
export function kindText(tool: Tool, kind: ToolKind): string {
  const pick = (value: unknown, key: string) => (isObject(value) ? String(value[key] ?? '') : String(value ?? ''))
  switch (kind) {
    case 'code':
    case 'function':
      return String(tool[kind === 'code' ? 'script' : 'function'] ?? '')
    case 'script':
      return pick(tool.script, 'path')
    case 'flow':
      return pick(tool.flow, 'path')
    case 'agent':
      return pick(tool.agent, 'agent')
    case 'mcp':
      return pick(tool.mcp, 'resource')
    default:
      return ''
  }
}

/** `tool` running `text` as `kind`: its other kind keys removed, everything else kept. */
export function withKind(tool: Tool, kind: Exclude<ToolKind, 'other'>, text: string): Tool {
  const next = Object.fromEntries(Object.entries(tool).filter(([key]) => !(KIND_KEYS as readonly string[]).includes(key)))
  switch (kind) {
    case 'code':
      return { ...next, script: text }
    case 'script':
      return { ...next, script: { path: text } }
    case 'function':
      return { ...next, function: text }
    case 'flow':
      // Keep the shape it had (`flow: f/x` or `flow: {path: f/x}`).
      return { ...next, flow: isObject(tool.flow) ? { path: text } : text }
    case 'agent':
      return { ...next, agent: { agent: text } }
    case 'mcp': {
      const mcp = isObject(tool.mcp) && toolKind(tool) === 'mcp' ? tool.mcp : {}
      return { ...next, mcp: { ...mcp, resource: text } }
    }
  }
}

export const NEW_TOOL_CODE = 'def main(text: str) -> str:\n    """What the tool does, for the model."""\n    return text\n'

/** A name no tool of `tools` has yet: `tool`, `tool_2`, ... */
export function freshName(tools: Tool[]): string {
  const names = new Set(tools.map((t) => t.name))
  let n = 1
  while (names.has(n === 1 ? 'tool' : `tool_${n}`)) n++
  return n === 1 ? 'tool' : `tool_${n}`
}
