/** Add a user (workspace admins): a name, and whether it is an admin. */
import { useState } from 'react'
import { useAddUser } from '../../api/people'
import { ErrorBox } from '../ErrorBox'

export function AddUserForm() {
  const add = useAddUser()
  const [name, setName] = useState('')
  const [admin, setAdmin] = useState(false)
  return (
    <form
      className="admin-form"
      aria-label="Add a user"
      onSubmit={(e) => {
        e.preventDefault()
        add.mutate({ name: name.trim(), admin }, {
          onSuccess: () => {
            setName('')
            setAdmin(false)
          },
        })
      }}
    >
      <h3>Add a user</h3>
      <div className="row">
        <div className="field">
          <label htmlFor="new-user-name">User name</label>
          <input id="new-user-name" value={name} required maxLength={64} onChange={(e) => setName(e.target.value)} />
        </div>
        <div className="field field-check">
          <input id="new-user-admin" type="checkbox" checked={admin} onChange={(e) => setAdmin(e.target.checked)} />
          <label htmlFor="new-user-admin">Workspace admin</label>
        </div>
        <button type="submit" className="primary" disabled={add.isPending || !name.trim()}>
          Add the user
        </button>
      </div>
      <p className="muted small-text">They sign in once they have a password (set it in the list below) or a token.</p>
      <ErrorBox error={add.error} title="Not added" />
    </form>
  )
}
