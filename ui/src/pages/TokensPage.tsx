/** The caller's personal access tokens: list, make (its text shown once), revoke. */
import { useState } from 'react'
import { type NewToken, useTokens } from '../api/people'
import { NewTokenForm } from '../components/admin/NewTokenForm'
import { TokenCreated } from '../components/admin/TokenCreated'
import { TokensTable } from '../components/admin/TokensTable'
import '../components/admin/admin.css'
import { ErrorBox } from '../components/ErrorBox'

export function TokensPage() {
  const tokens = useTokens()
  // Only here, in this page's state: leaving the page or dismissing it forgets the token's text.
  const [made, setMade] = useState<NewToken | null>(null)
  return (
    <section>
      <div className="page-head">
        <h1>Tokens</h1>
      </div>
      <p className="muted">Personal access tokens act as you from scripts and tools, within their scopes.</p>
      {made ? <TokenCreated made={made} onDone={() => setMade(null)} /> : <NewTokenForm onMade={setMade} />}
      <h2>Your tokens</h2>
      <ErrorBox error={tokens.error} />
      {tokens.isPending && <p className="muted">Loading…</p>}
      {tokens.data?.length === 0 && <p className="muted">You have no tokens.</p>}
      {tokens.data && tokens.data.length > 0 && <TokensTable tokens={tokens.data} />}
    </section>
  )
}
