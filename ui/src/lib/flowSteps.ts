/** The top-level steps of a flow document and what each needs (`needs`, default: the step before). */

export const STEP_KINDS = [
  'script',
  'identity',
  'flow',
  'branch',
  'parallel',
  'for_each',
  'approval',
  'ai_action',
  'ai_agent',
  'sleep',
  'wait_for_event',
] as const

export interface FlowStep {
  id: string
  kind: string
  summary: string
  needs: string[]
  inputs: Record<string, unknown>
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Read the steps of a flow document (an object with `steps`), as written or as the engine
 * stores it (every field, unset ones null); unknown shapes give `[]`. */
export function flowSteps(document: unknown): FlowStep[] {
  if (!isObject(document) || !Array.isArray(document.steps)) return []
  const steps: FlowStep[] = []
  let previous: string | null = null
  for (const raw of document.steps) {
    if (!isObject(raw) || typeof raw.id !== 'string') continue
    // A stored definition (`GET /api/runs/{id}/flow`) has every kind's key, null but its own.
    const kind = STEP_KINDS.find((k) => raw[k] != null) ?? 'step'
    let needs: string[]
    if (Array.isArray(raw.needs)) needs = raw.needs.filter((n): n is string => typeof n === 'string')
    else needs = previous === null ? [] : [previous]
    steps.push({
      id: raw.id,
      kind,
      summary: typeof raw.summary === 'string' ? raw.summary : '',
      needs,
      inputs: isObject(raw.inputs) ? raw.inputs : {},
    })
    previous = raw.id
  }
  return steps
}
