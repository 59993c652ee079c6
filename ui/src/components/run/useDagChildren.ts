/** What the run's DAG nodes expand into, and which are expanded: agent steps into their tool calls
 * (read from a transcript when the node is first expanded), container steps into their child runs'
 * steps; plus the child runs whose parent step is not known. */
import { useMemo, useState } from 'react'
import { useTranscripts } from '../../api/runs'
import type { Job, RunEvent } from '../../api/types'
import type { FlowStep } from '../../lib/flowSteps'
import { type NodeChildren, subRunChildren, toolCallNodes } from '../../lib/runChildren'

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`

const NONE: readonly Job[] = []

export function useDagChildren(
  runId: string,
  steps: readonly FlowStep[],
  jobs: readonly Job[] | undefined,
  events: readonly RunEvent[],
) {
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set())
  const toggle = (id: string) =>
    setExpanded((prev) => {
      const next = new Set(prev)
      if (!next.delete(id)) next.add(id)
      return next
    })
  const agents = steps.filter((s) => s.kind === 'ai_agent').map((s) => s.id)
  const transcripts = useTranscripts(
    runId,
    agents.filter((id) => expanded.has(id)),
  )
  const subRuns = useMemo(() => subRunChildren(runId, jobs ?? NONE, events), [runId, jobs, events])
  const expandable = new Map<string, NodeChildren>()
  for (const id of agents) {
    const transcript = transcripts.get(id)
    const calls = toolCallNodes(id, transcript ?? [])
    expandable.set(id, { label: transcript ? plural(calls.length, 'tool call') : 'tool calls', nodes: calls })
  }
  for (const [id, nodes] of subRuns.byStep) expandable.set(id, { label: plural(nodes.length, 'sub-step'), nodes })
  return { expandable, expanded, toggle, orphans: subRuns.orphans }
}
