/** The agent editor's head: where it was opened from, which agent, and which of its states it shows. */
import { Link } from '@tanstack/react-router'

type Props = {
  path: string
  from?: string
  summary: string
  hasDraft: boolean
  /** The deployed version (0: never deployed). */
  version: number
}

export function AgentHead({ path, from, summary, hasDraft, version }: Props) {
  return (
    <>
      <p className="crumbs">
        {from && (
          <>
            <Link to="/edit/$" params={{ _splat: from }}>
              Back to {from}
            </Link>{' '}
            ·{' '}
          </>
        )}
        <Link to="/workspace/$" params={{ _splat: path }} search={{}}>
          {path} in the workspace
        </Link>
      </p>
      <div className="page-head">
        <h1 className="mono">{path}</h1>
        <span className="badge">agent</span>
        {hasDraft ? (
          <span className="badge status-waiting" data-testid="draft-badge">
            Draft
          </span>
        ) : (
          <span className="badge status-succeeded">Deployed v{version}</span>
        )}
      </div>
      {summary && <p className="lead">{summary}</p>}
      <p className="notice agent-scope">
        This edits the agent itself: every flow that links <span className="mono">{path}</span>
        {from ? (
          <>
            {' '}
            (<span className="mono">{from}</span> among them)
          </>
        ) : null}{' '}
        uses it. Your changes are a draft only you see, which testing a flow runs; everyone&apos;s runs, and the
        run and flow pages, use the deployed agent until you deploy.
      </p>
      <dl className="facts">
        <dt>Showing</dt>
        <dd data-testid="agent-showing">
          {hasDraft ? 'your draft' : `deployed version ${version}`}
          {hasDraft && (version > 0 ? ` (deployed: version ${version})` : ' (never deployed)')}
        </dd>
      </dl>
    </>
  )
}
