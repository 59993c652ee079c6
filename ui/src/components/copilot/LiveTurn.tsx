/**
 * The turn in flight, from its run's events: each tool call as it runs (and whether it is
 * done), and the test runs it waits for, to approve or reject here.
 */
import { useEffect } from 'react'
import { usePendingApprovals } from '../../api/approvals'
import { useRunEvents } from '../../api/events'
import type { RunEvent } from '../../api/types'
import { TestRunApproval } from './TestRunApproval'

type Call = { id: string; name: string; done: boolean; failed: boolean }

type ToolCallData = { id?: string; name?: string }
type ResultData = { tool_call_id?: string | null; name?: string; is_error?: boolean }

/** The tool calls the events show, in order, each marked done once its result arrived. */
export function toolCalls(events: RunEvent[]): Call[] {
  const calls: Call[] = []
  for (const event of events) {
    if (event.kind === 'model_turn') {
      const response = event.data.response as { message?: { tool_calls?: ToolCallData[] } } | undefined
      for (const call of response?.message?.tool_calls ?? []) {
        calls.push({ id: call.id ?? String(calls.length), name: call.name ?? '?', done: false, failed: false })
      }
    } else if (event.kind === 'tool_result') {
      const result = event.data.result as ResultData | undefined
      const call = calls.find((c) => c.id === result?.tool_call_id) ?? calls.find((c) => !c.done && c.name === result?.name)
      if (call) {
        call.done = true
        call.failed = !!result?.is_error
      }
    }
  }
  return calls
}

export function LiveTurn({ runId, onFinished }: { runId: string; onFinished: () => void }) {
  const { events } = useRunEvents(runId, true)
  const finished = events.some((e) => e.kind === 'run_finished' && e.run_id === runId)
  const approvals = usePendingApprovals(runId, !finished)
  const calls = toolCalls(events)
  const waiting = (approvals.data ?? []).filter((a) => a.kind === 'tool_call' && a.status === 'pending')
  const asked = new Set(waiting.map((a) => String(a.details?.tool ?? '')))

  useEffect(() => {
    if (finished) onFinished()
  }, [finished, onFinished])

  return (
    <div className="cp-live" aria-live="polite">
      {!finished && <p className="muted">The copilot is working…</p>}
      {calls.length > 0 && (
        <ul className="cp-calls" aria-label="Tool calls of this turn">
          {calls.map((call) => (
            <li key={call.id} data-state={call.failed ? 'failed' : call.done ? 'done' : 'running'}>
              <code>{call.name}</code>{' '}
              <span className="muted">
                {call.failed ? 'refused' : call.done ? 'done' : asked.has(call.name) ? 'waiting for you' : 'running…'}
              </span>
            </li>
          ))}
        </ul>
      )}
      {waiting.map((a) => (
        <TestRunApproval key={a.id} approval={a} />
      ))}
    </div>
  )
}
