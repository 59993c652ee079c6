/**
 * A grant on one item (not its folder). The API lists only folders' grants,
 * so an item's are given or revoked here, not listed.
 */
import { useState } from 'react'
import { ROLES, type Role, useGrant } from '../../api/people'
import { ErrorBox } from '../ErrorBox'

export function ItemGrantForm({ grantees }: { grantees: string[] }) {
  const grant = useGrant()
  const [target, setTarget] = useState('')
  const [grantee, setGrantee] = useState('')
  const [role, setRole] = useState<Role | 'none'>('viewer')
  const done = grant.isSuccess && grant.data
  return (
    <form
      className="admin-form"
      aria-label="Grant a role on one item"
      onSubmit={(e) => {
        e.preventDefault()
        grant.mutate({ target: target.trim(), grantee: grantee.trim(), role: role === 'none' ? null : role })
      }}
    >
      <h2>A grant on one item</h2>
      <p className="muted small-text">
        An item grant reaches that item only. Grants on items are not listed here: the API lists folders' grants.
      </p>
      <div className="row">
        <div className="field">
          <label htmlFor="item-grant-path">Item path</label>
          <input id="item-grant-path" className="mono" placeholder="f/folder/name" value={target} required onChange={(e) => setTarget(e.target.value)} />
        </div>
        <div className="field">
          <label htmlFor="item-grant-who">User or g/group</label>
          <input id="item-grant-who" list="item-grant-list" value={grantee} required onChange={(e) => setGrantee(e.target.value)} />
          <datalist id="item-grant-list">
            {grantees.map((g) => (
              <option key={g} value={g} />
            ))}
          </datalist>
        </div>
        <div className="field">
          <label htmlFor="item-grant-role">Role</label>
          <select id="item-grant-role" value={role} onChange={(e) => setRole(e.target.value as Role | 'none')}>
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
            <option value="none">none (revoke)</option>
          </select>
        </div>
        <button type="submit" className="primary" disabled={grant.isPending || !target.trim() || !grantee.trim()}>
          Apply
        </button>
      </div>
      {done && (
        <p role="status">
          {done.role ? `${done.grantee} is now ${done.role} of ${done.target}.` : `${done.grantee} has no grant on ${done.target} any more.`}
        </p>
      )}
      <ErrorBox error={grant.error} title="Grant not changed" />
    </form>
  )
}
