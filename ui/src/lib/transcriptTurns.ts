/** An agent step's conversation as turns: each assistant turn with its tool calls, their results,
 * approvals and the model call (usage row) that produced it. */
import type { Approval, Message, Usage } from '../api/types'

type ToolCallMsg = Message['tool_calls'][number]

export interface ToolCallView {
  call: ToolCallMsg
  /** The tool's answer (a `tool` message naming this call's id); undefined while it runs or waits. */
  result: Message | undefined
  /** The wait for a person's decision on this call (a `tool_call` approval whose `request_id` is its id). */
  approval: Approval | undefined
}

export type Turn =
  | { kind: 'message'; message: Message }
  | { kind: 'assistant'; message: Message; index: number; calls: ToolCallView[]; usage: Usage | undefined }
  /** A tool result naming no call of the transcript. */
  | { kind: 'orphan'; message: Message }

export interface Turns {
  turns: Turn[]
  /** Whether the model calls could not be matched one to one with the assistant turns. */
  usageMismatch: boolean
  /** Model calls that failed (no assistant turn came of them). */
  failedCalls: Usage[]
}

/** The tool call approvals of a step, by the id of the call they are about. */
export function approvalsByCall(approvals: readonly Approval[], runId: string, stepId: string): Map<string, Approval> {
  const byCall = new Map<string, Approval>()
  for (const a of approvals) {
    if (a.kind !== 'tool_call' || a.run_id !== runId || a.step_id !== stepId) continue
    const id = a.details?.request_id
    // A call asked about again (after a crash) has a newer approval: the last one wins.
    if (typeof id === 'string') byCall.set(id, a)
  }
  return byCall
}

export function transcriptTurns(
  messages: readonly Message[],
  usage: readonly Usage[],
  approvals: ReadonlyMap<string, Approval>,
): Turns {
  const results = new Map<string, Message>()
  for (const m of messages) if (m.role === 'tool' && m.tool_call_id) results.set(m.tool_call_id, m)
  const calls = new Set(messages.flatMap((m) => m.tool_calls.map((c) => c.id)))
  // The n-th assistant turn is the n-th model call that answered. A failed call (its `error` set)
  // answered no turn, so it is left out of the matching and listed apart. When the counts still
  // differ (a step retried from scratch, whose earlier attempt's calls are recorded too, or usage
  // of a call not yet written), the turns are matched from the last call backwards, since the
  // transcript is the latest attempt's, and the caller says the figures may be off.
  const answered = usage.filter((u) => u.error == null)
  const assistants = messages.filter((m) => m.role === 'assistant').length
  const offset = answered.length - assistants
  const turns: Turn[] = []
  let index = 0
  for (const m of messages) {
    if (m.role === 'assistant') {
      turns.push({
        kind: 'assistant',
        message: m,
        index,
        usage: answered[index + Math.max(offset, 0)],
        calls: m.tool_calls.map((call) => ({ call, result: results.get(call.id ?? ''), approval: approvals.get(call.id ?? '') })),
      })
      index++
    } else if (m.role === 'tool') {
      if (!m.tool_call_id || !calls.has(m.tool_call_id)) turns.push({ kind: 'orphan', message: m })
    } else {
      turns.push({ kind: 'message', message: m })
    }
  }
  return { turns, usageMismatch: offset !== 0, failedCalls: usage.filter((u) => u.error != null) }
}

/** `value` as JSON with its object keys sorted: equal values give equal text. */
export function stableJson(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort)
    if (typeof v === 'object' && v !== null) {
      return Object.fromEntries(
        Object.keys(v)
          .sort()
          .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
      )
    }
    return v
  }
  return JSON.stringify(sort(value), null, 2)
}

/** The arguments a person approved the call with, when they differ from the model's; else null. */
export function editedArguments(approval: Approval | undefined, modelArgs: unknown): Record<string, unknown> | null {
  const decision = approval?.details?.decision
  if (typeof decision !== 'object' || decision === null) return null
  const args = (decision as Record<string, unknown>).arguments
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return null
  return stableJson(args) === stableJson(modelArgs) ? null : (args as Record<string, unknown>)
}
