/**
 * A token just made, shown this once: its text, a button to copy it, and a
 * warning that it will not be shown again. Dismissing it forgets the text.
 */
import { useState } from 'react'
import type { NewToken } from '../../api/people'

export function TokenCreated({ made, onDone }: { made: NewToken; onDone: () => void }) {
  const [copied, setCopied] = useState<'yes' | 'failed' | null>(null)
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(made.token)
      setCopied('yes')
    } catch {
      setCopied('failed')
    }
  }
  return (
    <section className="token-once" aria-labelledby="token-once-heading">
      <h2 id="token-once-heading">Your new token “{made.info.name}”</h2>
      <p className="warning">Copy it now: it will not be shown again.</p>
      <div className="token-text">
        <label htmlFor="token-once-text" className="visually-hidden">
          The token {made.info.name}
        </label>
        <input id="token-once-text" readOnly value={made.token} data-testid="new-token" onFocus={(e) => e.target.select()} />
        <button type="button" className="small" onClick={() => void copy()}>
          Copy the token
        </button>
      </div>
      <p role="status" className="small-text">
        {copied === 'yes' && 'Copied.'}
        {copied === 'failed' && 'The browser did not let the page copy: select the text and copy it yourself.'}
      </p>
      <p className="small-text">
        Send it as <code>Authorization: Bearer …</code>. Its scopes: {made.info.scopes.join(', ')}.
      </p>
      <div className="buttons">
        <button type="button" className="primary" onClick={onDone}>
          I have copied it
        </button>
      </div>
    </section>
  )
}
