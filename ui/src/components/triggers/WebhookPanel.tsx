/** A flow's webhook: its URL, a curl example, and a token for it alone (its text shown once). */
import { useState } from 'react'
import { type NewToken, useCreateToken } from '../../api/people'
import { TokenCreated } from '../admin/TokenCreated'
import { ErrorBox } from '../ErrorBox'
import { CopyButton, CopyLine } from './CopyButton'
import { curlExample, hookScope, hookUrl } from './webhook'

export function WebhookPanel({ path, inputSchema }: { path: string; inputSchema?: Record<string, unknown> | null }) {
  const origin = window.location.origin
  const create = useCreateToken()
  // Only in this component's state: dismissing it (or leaving the page) forgets the token's text.
  const [made, setMade] = useState<NewToken | null>(null)
  const curl = curlExample(origin, path, inputSchema)
  const makeToken = () =>
    create.mutate(
      { name: `webhook ${path}`, scopes: [hookScope(path)], expires_in_days: 365 },
      {
        onSuccess: (token) => {
          create.reset() // the answer holds the token's text: keep it only where it is shown
          setMade(token)
        },
      },
    )
  return (
    <section className="webhook" aria-labelledby="webhook-head">
      <h3 id="webhook-head">Webhook</h3>
      <p>
        A <code>POST</code> to this URL starts the flow, its JSON body the input (checked against the flow’s
        input schema). Send an <code>Idempotency-Key</code> header to make retries safe; <code>?wait=30s</code>{' '}
        answers the result when the run ends within the wait.
      </p>
      <CopyLine text={hookUrl(origin, path)} label="Copy the webhook URL" />
      <pre className="code" aria-label={`curl example for ${path}`}>
        {curl}
      </pre>
      <CopyButton text={curl} label="Copy the curl example" />
      {made ? (
        <TokenCreated made={made} onDone={() => setMade(null)} />
      ) : (
        <p>
          <button type="button" className="small" disabled={create.isPending} onClick={makeToken}>
            Create webhook token
          </button>{' '}
          <span className="muted small-text">
            A token of yours with the one scope <code>{hookScope(path)}</code>, for a year.
          </span>
        </p>
      )}
      <ErrorBox error={create.error} title="Not made" />
    </section>
  )
}
