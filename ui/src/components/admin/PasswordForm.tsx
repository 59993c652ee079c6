/** Set a user's password (admins: anyone's); the password is sent, never shown or kept. */
import { useId, useState } from 'react'
import { useSetPassword } from '../../api/people'
import { ErrorBox } from '../ErrorBox'

export function PasswordForm({ user, onDone }: { user: string; onDone: () => void }) {
  const set = useSetPassword()
  const [password, setPassword] = useState('')
  const id = useId()
  return (
    <form
      className="admin-inline-form"
      aria-label={`Set the password of ${user}`}
      onSubmit={(e) => {
        e.preventDefault()
        set.mutate({ name: user, password }, {
          onSuccess: () => {
            setPassword('')
            onDone()
          },
        })
      }}
    >
      <label htmlFor={id}>New password for {user}</label>
      <input
        id={id}
        type="password"
        autoComplete="new-password"
        value={password}
        required
        onChange={(e) => setPassword(e.target.value)}
      />
      <button type="submit" className="small primary" disabled={set.isPending || !password}>
        Save the password
      </button>
      <button type="button" className="small" onClick={onDone}>
        Cancel
      </button>
      <ErrorBox error={set.error} title="Password not set" />
    </form>
  )
}
