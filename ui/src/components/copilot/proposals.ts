/** The flow changes a copilot turn proposed: its `set_flow` / `patch_flow` results that saved a draft. */
import type { Message } from '../../api/types'

export const PROPOSING = new Set(['set_flow', 'patch_flow'])

export type Proposal = { key: string; path: string; diff: string }

/** The proposal a tool result holds, or null (another tool, a refusal, not JSON). */
export function proposalOf(name: string | null | undefined, content: string, isError: boolean, key: string): Proposal | null {
  if (!name || !PROPOSING.has(name) || isError) return null
  try {
    const value: unknown = JSON.parse(content)
    if (typeof value !== 'object' || value === null) return null
    const { diff, path } = value as { diff?: unknown; path?: unknown }
    if (typeof diff !== 'string') return null
    return { key, path: typeof path === 'string' ? path : '', diff }
  } catch {
    return null
  }
}

/** The key of the conversation's latest proposal (the one Accept / Reject applies to), or null. */
export function latestProposal(messages: Message[]): string | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (!m || m.role !== 'tool') continue
    const found = proposalOf(m.name, m.content, m.is_error, m.tool_call_id ?? String(i))
    if (found) return found.key
  }
  return null
}
