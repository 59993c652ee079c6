/** Make a personal access token: a name, its scopes, and when it expires. */
import { useState } from 'react'
import type { NewToken, NewTokenIn } from '../../api/people'
import { useCreateToken } from '../../api/people'
import { ErrorBox } from '../ErrorBox'

const EXPIRIES: { label: string; days: number | null }[] = [
  { label: '7 days', days: 7 },
  { label: '30 days', days: 30 },
  { label: '90 days', days: 90 },
  { label: '1 year', days: 365 },
  { label: 'Never', days: null },
]

/** Scopes as typed (commas or spaces between them); none typed: everything (`*`). */
export function parseScopes(text: string): string[] {
  const scopes = text.split(/[\s,]+/).filter(Boolean)
  return scopes.length ? scopes : ['*']
}

export function NewTokenForm({ onMade }: { onMade: (made: NewToken) => void }) {
  const create = useCreateToken()
  const [name, setName] = useState('')
  const [scopes, setScopes] = useState('')
  const [expiry, setExpiry] = useState('30')
  return (
    <form
      className="admin-form"
      aria-label="Make a token"
      onSubmit={(e) => {
        e.preventDefault()
        const body: NewTokenIn = {
          name: name.trim(),
          scopes: parseScopes(scopes),
          expires_in_days: expiry === 'never' ? null : Number(expiry),
        }
        create.mutate(body, {
          onSuccess: (made) => {
            setName('')
            setScopes('')
            create.reset() // the answer holds the token's text: keep it only where it is shown
            onMade(made)
          },
        })
      }}
    >
      <h2>Make a token</h2>
      <div className="row">
        <div className="field">
          <label htmlFor="token-name">Token name</label>
          <input id="token-name" value={name} required maxLength={200} onChange={(e) => setName(e.target.value)} />
        </div>
        <div className="field grow">
          <label htmlFor="token-scopes">Scopes</label>
          <input
            id="token-scopes"
            className="mono"
            placeholder="* (everything you may do)"
            aria-describedby="token-scopes-help"
            value={scopes}
            onChange={(e) => setScopes(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="token-expiry">Expires in</label>
          <select id="token-expiry" value={expiry} onChange={(e) => setExpiry(e.target.value)}>
            {EXPIRIES.map((x) => (
              <option key={x.label} value={x.days === null ? 'never' : String(x.days)}>
                {x.label}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" className="primary" disabled={create.isPending || !name.trim()}>
          Make the token
        </button>
      </div>
      <p id="token-scopes-help" className="field-help">
        domain:action[:path glob], separated by spaces or commas: for example <code>items:read:f/team/*</code>{' '}
        <code>runs:write</code>. Domains: items, runs, approvals, people, audit, proxy, hooks (<code>hooks:write:f/team/flow</code> starts that flow by webhook); a scope narrows what you may do,
        never widens it.
      </p>
      <ErrorBox error={create.error} title="Not made" />
    </form>
  )
}
