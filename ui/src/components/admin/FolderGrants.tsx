/**
 * Who may do what in a folder: its grants, and, for the folder's admins, a
 * form to grant a user or `g/<group>` a role, change it, or revoke it.
 */
import { useId, useState } from 'react'
import { type Folder, ROLES, type Role, useGrant } from '../../api/people'
import { ErrorBox } from '../ErrorBox'

type Props = {
  folder: Folder
  /** Whether the caller may change the folder's grants (an admin of it). */
  manage: boolean
  /** Users and `g/<group>`s to suggest. */
  grantees: string[]
}

export function FolderGrants({ folder, manage, grantees }: Props) {
  const grant = useGrant()
  const target = `f/${folder.name}`
  const roles = Object.entries(folder.roles).sort(([a], [b]) => a.localeCompare(b))
  const set = (grantee: string, role: Role | null, done?: () => void) =>
    grant.mutate({ target, grantee, role }, { onSuccess: () => done?.() })
  return (
    <div className="folder-grants">
      {roles.length === 0 ? (
        <p className="muted">No grants: only workspace admins reach {target}/.</p>
      ) : (
        <table className="table compact" aria-label={`Grants on ${target}`}>
          <thead>
            <tr>
              <th>Who</th>
              <th>Role</th>
              {manage && <th>Revoke</th>}
            </tr>
          </thead>
          <tbody>
            {roles.map(([grantee, role]) => (
              <tr key={grantee} data-grantee={grantee}>
                <td className="mono">{grantee}</td>
                <td>
                  {manage ? (
                    <select
                      aria-label={`Role of ${grantee} on ${target}`}
                      value={role}
                      disabled={grant.isPending}
                      onChange={(e) => set(grantee, e.target.value as Role)}
                    >
                      {ROLES.map((r) => (
                        <option key={r} value={r}>
                          {r}
                        </option>
                      ))}
                    </select>
                  ) : (
                    <span className="badge">{role}</span>
                  )}
                </td>
                {manage && (
                  <td>
                    <button type="button" className="small danger" disabled={grant.isPending} onClick={() => set(grantee, null)}>
                      Revoke {grantee}
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {manage && <GrantForm target={target} grantees={grantees} onGrant={set} pending={grant.isPending} />}
      <ErrorBox error={grant.error} title="Grant not changed" />
    </div>
  )
}

type GrantFormProps = {
  target: string
  grantees: string[]
  /** Called with what to grant; `done` once it is granted (the form is then cleared). */
  onGrant: (grantee: string, role: Role, done: () => void) => void
  pending: boolean
}

/** Grant someone a role on `target`: a name typed or picked (users, `g/<group>`s), and a role. */
export function GrantForm({ target, grantees, onGrant, pending }: GrantFormProps) {
  const id = useId()
  const [grantee, setGrantee] = useState('')
  const [role, setRole] = useState<Role>('viewer')
  return (
    <form
      className="admin-inline-form"
      aria-label={`Grant a role on ${target}`}
      onSubmit={(e) => {
        e.preventDefault()
        const who = grantee.trim()
        if (!who) return
        onGrant(who, role, () => setGrantee(''))
      }}
    >
      <label htmlFor={`${id}-who`}>User or g/group</label>
      <input id={`${id}-who`} list={`${id}-list`} value={grantee} required onChange={(e) => setGrantee(e.target.value)} />
      <datalist id={`${id}-list`}>
        {grantees.map((g) => (
          <option key={g} value={g} />
        ))}
      </datalist>
      <label htmlFor={`${id}-role`}>Role</label>
      <select id={`${id}-role`} value={role} onChange={(e) => setRole(e.target.value as Role)}>
        {ROLES.map((r) => (
          <option key={r} value={r}>
            {r}
          </option>
        ))}
      </select>
      <button type="submit" className="small primary" disabled={pending || !grantee.trim()}>
        Grant
      </button>
    </form>
  )
}
