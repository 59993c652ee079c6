/** The caller's tokens (never their secrets), each revocable until it is revoked. */
import { type Token, useRevokeToken } from '../../api/people'
import { formatTime } from '../../lib/format'
import { ErrorBox } from '../ErrorBox'

function state(token: Token, now: number): { label: string; className: string } {
  if (token.revoked_at !== null) return { label: 'revoked', className: 'status-failed' }
  if (token.expires_at !== null && token.expires_at <= now) return { label: 'expired', className: 'status-cancelled' }
  return { label: 'active', className: 'status-succeeded' }
}

export function TokensTable({ tokens }: { tokens: Token[] }) {
  const revoke = useRevokeToken()
  const now = Date.now() / 1000
  return (
    <>
      <ErrorBox error={revoke.error} title="Not revoked" />
      <table className="table" aria-label="Your tokens">
        <thead>
          <tr>
            <th>Name</th>
            <th>Token</th>
            <th>Scopes</th>
            <th>Created</th>
            <th>Expires</th>
            <th>Last used</th>
            <th>State</th>
            <th>Revoke</th>
          </tr>
        </thead>
        <tbody>
          {tokens.map((t) => {
            const s = state(t, now)
            return (
              <tr key={t.id} data-token-id={t.id}>
                <td>{t.name}</td>
                <td className="mono">{t.prefix}…</td>
                <td className="mono">{t.scopes.join(' ')}</td>
                <td>{formatTime(t.created_at)}</td>
                <td>{t.expires_at === null ? 'never' : formatTime(t.expires_at)}</td>
                <td>{t.last_used_at === null ? <span className="muted">never</span> : formatTime(t.last_used_at)}</td>
                <td>
                  <span className={`badge ${s.className}`}>{s.label}</span>
                </td>
                <td>
                  {t.revoked_at === null && (
                    <button
                      type="button"
                      className="small danger"
                      disabled={revoke.isPending}
                      onClick={() => {
                        if (window.confirm(`Revoke the token ${t.name}? Whatever uses it is refused from now on.`)) revoke.mutate(t.id)
                      }}
                    >
                      Revoke {t.name}
                    </button>
                  )}
                </td>
              </tr>
            )
          })}
        </tbody>
      </table>
    </>
  )
}
