/**
 * The agents a flow's linked steps name, as the editor shows them: the caller's draft of
 * each when there is one (what a run of the flow's draft would use), else the deployed agent.
 */
import { useQueries } from '@tanstack/react-query'
import { useMemo } from 'react'
import { api, unwrap } from '../../api/client'
import { fetchDraft } from '../../api/drafts'
import type { FlowStep } from '../../lib/flowSteps'

export interface LinkedAgent {
  /** The path as the step names it (maybe pinned: `f/x/agent@3`). */
  link: string
  path: string
  /** The agent's definition (the `ai_agent` resource's value). */
  value: unknown
  draft: boolean
  version: number | null
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The agent a step links, or null for any other step. */
export function linkOf(step: FlowStep, document: unknown): string | null {
  if (!isObject(document) || !Array.isArray(document.steps)) return null
  const raw = document.steps.find((s) => isObject(s) && s.id === step.id)
  const agent = isObject(raw) && isObject(raw.ai_agent) ? raw.ai_agent.agent : null
  return typeof agent === 'string' && agent !== '' ? agent : null
}

export const linkedAgentKey = (link: string) => ['flow-editor', 'agent', link] as const

async function readAgent(link: string): Promise<LinkedAgent> {
  const [path, pin] = link.split('@') as [string, string | undefined]
  const version = pin && /^\d+$/.test(pin) ? Number(pin) : undefined
  // A pinned link runs that version: never a draft.
  const draft = version === undefined ? await fetchDraft(path) : null
  if (draft) return { link, path, value: draft.value, draft: true, version: null }
  const item = await unwrap(
    api.GET('/api/items/{path}', { params: { path: { path }, query: version ? { version } : {} } }),
  )
  return { link, path, value: item.value, draft: false, version: item.version }
}

/** Each linked step's agent (by step id), and the errors reading them (by link). */
export function useLinkedAgents(steps: FlowStep[], document: unknown) {
  const links = useMemo(() => {
    const byStep = new Map<string, string>()
    for (const step of steps) {
      const link = linkOf(step, document)
      if (link) byStep.set(step.id, link)
    }
    return byStep
  }, [steps, document])
  const unique = [...new Set(links.values())].sort()
  const results = useQueries({
    queries: unique.map((link) => ({ queryKey: linkedAgentKey(link), queryFn: () => readAgent(link), retry: false })),
  })
  // New maps only when an answer changes, so that the graph is laid out again only then.
  const signature = results.map((r) => `${r.dataUpdatedAt}:${r.errorUpdatedAt}`).join(',')
  return useMemo(() => {
    const agents = new Map<string, LinkedAgent>()
    const errors = new Map<string, unknown>()
    unique.forEach((link, i) => {
      const result = results[i]
      if (result?.data) agents.set(link, result.data)
      if (result?.error) errors.set(link, result.error)
    })
    return { links, agents, errors }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [links, unique.join(','), signature])
}
