/** Send the event a waiting run waits for: its name and key fixed, a JSON payload typed here. */
import { type FormEvent, useId, useState } from 'react'
import { useSendEvent } from '../../api/triggers'
import { ErrorBox } from '../ErrorBox'

/** The payload as typed: a JSON value (empty: null), or what is wrong with it. */
export function parsePayload(text: string): { value: unknown } | { problem: string } {
  if (text.trim() === '') return { value: null }
  try {
    return { value: JSON.parse(text) as unknown }
  } catch (error) {
    return { problem: `The payload is not JSON: ${error instanceof Error ? error.message : String(error)}` }
  }
}

export function SendEventForm({ name, eventKey, path }: { name: string; eventKey: string; path: string | null }) {
  const id = useId()
  const send = useSendEvent()
  const [payload, setPayload] = useState('{}')
  const [problem, setProblem] = useState<string | null>(null)
  const submit = (e: FormEvent) => {
    e.preventDefault()
    const parsed = parsePayload(payload)
    if ('problem' in parsed) {
      setProblem(parsed.problem)
      return
    }
    setProblem(null)
    send.mutate({ name, key: eventKey, payload: parsed.value, path })
  }
  const sent = send.data
  return (
    <form className="send-event" aria-label={`Send event ${name}`} onSubmit={submit}>
      <div className="field">
        <label htmlFor={`${id}-payload`}>Payload (JSON)</label>
        <textarea
          id={`${id}-payload`}
          className="mono"
          rows={3}
          value={payload}
          onChange={(e) => setPayload(e.target.value)}
          aria-invalid={problem ? true : undefined}
        />
      </div>
      <ErrorBox error={problem ? new Error(problem) : send.error} title={problem ? undefined : 'Not sent'} />
      <button type="submit" className="primary small" disabled={send.isPending}>
        Send event
      </button>
      <p role="status" className="small-text">
        {sent &&
          (sent.duplicate
            ? 'Already sent (the same dedupe id): nothing new was delivered.'
            : sent.delivered_to.length > 0
              ? `Sent: delivered to ${sent.delivered_to.length} waiting run${sent.delivered_to.length === 1 ? '' : 's'}.`
              : 'Sent: no run waited for it; it is kept for one that comes to wait.')}
      </p>
    </form>
  )
}
