/** Every user of the workspace; an admin changes their role, disables them, sets their password. */
import { useState } from 'react'
import { type User, useChangeUser } from '../../api/people'
import { formatTime } from '../../lib/format'
import { ErrorBox } from '../ErrorBox'
import { PasswordForm } from './PasswordForm'

function UserActions({ user, me }: { user: User; me: string }) {
  const change = useChangeUser()
  const [password, setPassword] = useState(false)
  const busy = change.isPending
  return (
    <>
      <div className="admin-actions">
        <button type="button" className="small" disabled={busy} onClick={() => change.mutate({ name: user.name, admin: !user.is_admin })}>
          {user.is_admin ? `Remove admin from ${user.name}` : `Make ${user.name} an admin`}
        </button>
        {user.name !== me && (
          <button
            type="button"
            className={user.disabled ? 'small' : 'small danger'}
            disabled={busy}
            onClick={() => change.mutate({ name: user.name, disabled: !user.disabled })}
          >
            {user.disabled ? `Enable ${user.name}` : `Disable ${user.name}`}
          </button>
        )}
        {!password && (
          <button type="button" className="small" onClick={() => setPassword(true)}>
            Set the password of {user.name}
          </button>
        )}
      </div>
      {password && <PasswordForm user={user.name} onDone={() => setPassword(false)} />}
      <ErrorBox error={change.error} title="Not changed" />
    </>
  )
}

export function UsersTable({ users, manage, me }: { users: User[]; manage: boolean; me: string }) {
  return (
    <table className="table" aria-label="Users">
      <thead>
        <tr>
          <th>Name</th>
          <th>Role</th>
          <th>Groups</th>
          <th>Added</th>
          {manage && <th>Change</th>}
        </tr>
      </thead>
      <tbody>
        {users.map((u) => (
          <tr key={u.name} data-user={u.name}>
            <td className="mono">
              {u.name}
              {u.name === me && <span className="muted"> (you)</span>}
            </td>
            <td>
              {u.is_admin ? <span className="badge status-running">admin</span> : <span className="badge">member</span>}
              {u.disabled && <span className="badge status-failed">disabled</span>}
            </td>
            <td>{u.groups.length ? u.groups.join(', ') : <span className="muted">—</span>}</td>
            <td>{formatTime(u.created_at)}</td>
            {manage && (
              <td>
                <UserActions user={u} me={me} />
              </td>
            )}
          </tr>
        ))}
      </tbody>
    </table>
  )
}
