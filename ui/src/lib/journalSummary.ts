/** A one-line summary of an agent journal entry's data, by its kind (the engine's journal events). */

function obj(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
}

function clip(text: string, max = 120): string {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

function callNames(calls: unknown): string {
  return Array.isArray(calls) ? calls.map((c) => String(obj(c).name ?? '?')).join(', ') : ''
}

export function journalSummary(kind: string, data: Record<string, unknown>): string {
  switch (kind) {
    case 'user_message': {
      const messages = Array.isArray(data.messages) ? data.messages : []
      return clip(messages.map((m) => String(obj(m).content ?? '')).join(' / '))
    }
    case 'model_response': {
      const message = obj(obj(data.response).message)
      const calls = callNames(message.tool_calls)
      const text = typeof message.content === 'string' ? message.content : ''
      return clip([text, calls && `calls ${calls}`].filter(Boolean).join(' — '))
    }
    case 'tool_started':
      return `${String(obj(data.call).name ?? '?')} (attempt ${String(data.attempt ?? 1)})`
    case 'tool_finished': {
      const result = obj(data.result)
      return clip(`${String(result.name ?? '?')}${result.is_error ? ' failed' : ''}: ${String(result.content ?? '')}`)
    }
    case 'approval_requested':
      return `asks to approve ${callNames(data.calls)}`
    case 'approval_decided': {
      const decision = obj(data.decision)
      const who = decision.actor ? ` by ${String(decision.actor)}` : ''
      return `${String(decision.action ?? 'decided')}${who}${decision.arguments ? ' (arguments edited)' : ''}`
    }
    case 'correction':
    case 'output_rejected':
      return clip(String(data.feedback ?? ''))
    case 'finished':
      return clip(typeof data.output === 'string' ? data.output : JSON.stringify(data.output))
    case 'failed':
      return clip(`${String(data.reason ?? '')}: ${String(data.message ?? '')}`)
    default:
      return clip(
        Object.keys(data)
          .filter((k) => k !== 'schema_version' && k !== 'kind')
          .join(', '),
      )
  }
}
