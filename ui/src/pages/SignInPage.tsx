import { useNavigate, useSearch } from '@tanstack/react-router'
import { type FormEvent, useState } from 'react'
import { useSignIn } from '../api/auth'
import { ErrorBox } from '../components/ErrorBox'

/** Only same-site paths are followed after signing in. */
function safeRedirect(target: string | undefined): string {
  return target && target.startsWith('/') && !target.startsWith('//') && !target.startsWith('/sign-in') ? target : '/runs'
}

export function SignInPage() {
  const { redirect } = useSearch({ from: '/sign-in' })
  const navigate = useNavigate()
  const signIn = useSignIn()
  const [user, setUser] = useState('')
  const [password, setPassword] = useState('')

  const submit = (e: FormEvent) => {
    e.preventDefault()
    signIn.mutate(
      { user: user.trim(), password },
      { onSuccess: () => void navigate({ href: safeRedirect(redirect), replace: true }) },
    )
  }

  return (
    <section className="sign-in">
      <h1>Sign in</h1>
      <form onSubmit={submit}>
        <div className="field">
          <label htmlFor="sign-in-user">Username</label>
          <input
            id="sign-in-user"
            name="username"
            autoComplete="username"
            value={user}
            required
            onChange={(e) => setUser(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="sign-in-password">Password</label>
          <input
            id="sign-in-password"
            name="password"
            type="password"
            autoComplete="current-password"
            value={password}
            required
            onChange={(e) => setPassword(e.target.value)}
          />
        </div>
        <ErrorBox error={signIn.error} />
        <button type="submit" className="primary" disabled={signIn.isPending}>
          Sign in
        </button>
      </form>
      <p className="muted small-text">
        Set a password with <code>tidemill ws password</code>. Scripts use personal access tokens instead.
      </p>
    </section>
  )
}
