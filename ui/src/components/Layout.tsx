/** The page frame: the navigation, who is signed in, and the current screen. */
import { Link, Outlet, useNavigate } from '@tanstack/react-router'
import { useMe, useSignOut } from '../api/auth'
import { ErrorBox } from './ErrorBox'

export function Layout() {
  const me = useMe()
  const signOut = useSignOut()
  const navigate = useNavigate()
  const user = me.data
  return (
    <div className="app">
      <header className="topbar">
        <span className="brand">Tidemill</span>
        {user && (
          <>
            <nav aria-label="Main">
              <Link to="/runs" activeProps={{ className: 'active' }}>
                Runs
              </Link>
              <Link to="/approvals" activeProps={{ className: 'active' }}>
                Approvals
              </Link>
              <Link to="/workspace" activeProps={{ className: 'active' }}>
                Workspace
              </Link>
              <Link to="/folders" activeProps={{ className: 'active' }}>
                Folders
              </Link>
              <Link to="/people" activeProps={{ className: 'active' }}>
                People
              </Link>
              <Link to="/tokens" activeProps={{ className: 'active' }}>
                Tokens
              </Link>
              {user.is_admin && (
                <Link to="/audit" activeProps={{ className: 'active' }}>
                  Audit
                </Link>
              )}
            </nav>
            <span className="whoami" title={user.groups.length ? `Groups: ${user.groups.join(', ')}` : undefined}>
              Signed in as <strong data-testid="current-user">{user.user}</strong>
              {user.is_admin && <span className="badge">admin</span>}
            </span>
            <button
              type="button"
              className="small"
              disabled={signOut.isPending}
              onClick={() => signOut.mutate(undefined, { onSettled: () => void navigate({ to: '/sign-in' }) })}
            >
              Sign out
            </button>
          </>
        )}
      </header>
      <ErrorBox error={signOut.error} title="Signing out failed" />
      <main>
        <Outlet />
      </main>
    </div>
  )
}
