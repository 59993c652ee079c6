/**
 * The agent editor: the caller's draft of an `ai_agent` resource (or, with none,
 * the deployed agent), autosaved as it is edited, deployed as its next version.
 */
import { useState } from 'react'
import { ApiError } from '../../api/client'
import { useDeploy, useDiscardDraft, useDraft } from '../../api/drafts'
import { useItem } from '../../api/items'
import { ConfirmAction } from '../ConfirmAction'
import { ErrorBox } from '../ErrorBox'
import { HistoryDrawer } from '../HistoryDrawer'
import { AgentHead } from './AgentHead'
import { type Agent, FORM_KEYS, isObject } from './agentValue'
import { BrainForm } from './BrainForm'
import { RawKeys } from './RawKeys'
import { SaveStatus } from './SaveStatus'
import { ToolsList } from './ToolsList'
import { useAutosave } from './useAutosave'
import './AgentEditor.css'

type Props = {
  path: string
  /** The flow the editor was opened over (a link back to its editor). */
  from?: string
  /** Milliseconds of quiet before an edit is saved. */
  delay?: number
}

function notFound(error: unknown): boolean {
  return error instanceof ApiError && error.status === 404
}

export function AgentEditor({ path, from, delay }: Props) {
  const item = useItem(path)
  const draft = useDraft(path)
  const discard = useDiscardDraft(path)
  const deploy = useDeploy(path)
  const deployed = item.data ?? null
  const meta = {
    summary: draft.data?.summary || deployed?.summary || '',
    description: draft.data?.description || deployed?.description || '',
  }
  const autosave = useAutosave(path, meta, delay)
  const [value, setValue] = useState<Agent | null>(null)
  const [loaded, setLoaded] = useState<string | null>(null)
  const [message, setMessage] = useState('')
  const [historyOpen, setHistoryOpen] = useState(false)
  const settling = autosave.busy || deploy.isPending || discard.isPending

  // What the form shows follows the draft, else the deployed version; never while
  // an edit is on its way (the user's text wins), and an own save changes nothing.
  const source = draft.data ? 'draft' : deployed ? `v${deployed.version}` : null
  if (source && source !== loaded && !settling) {
    const next = draft.data ? draft.data.value : deployed?.value
    if (loaded === null || source !== 'draft') setValue(isObject(next) ? next : null)
    setLoaded(source)
  }

  if (item.isPending || draft.isPending) return <p className="muted">Loading…</p>
  if (draft.error) return <ErrorBox error={draft.error} />
  if (item.error && !(notFound(item.error) && draft.data)) return <ErrorBox error={item.error} />
  const resourceType = draft.data ? draft.data.resource_type : deployed?.resource_type
  if (resourceType !== 'ai_agent' || value === null)
    return (
      <ErrorBox
        error={new Error(`${path} is not an agent (a resource of type ai_agent): open it in the workspace instead.`)}
      />
    )

  const edit = (next: Agent) => {
    setValue(next)
    autosave.schedule(next)
  }
  const hasDraft = draft.data !== null
  const version = deployed?.version ?? 0
  return (
    <section className="agent-editor">
      <AgentHead path={path} from={from} summary={meta.summary} hasDraft={hasDraft} version={version} />
      <div className="agent-toolbar" role="group" aria-label="Draft">
        <SaveStatus status={autosave.status} />
        <button type="button" className="small" onClick={() => setHistoryOpen(true)} disabled={version === 0}>
          History
        </button>
        {hasDraft && (
          <ConfirmAction
            label="Discard draft"
            question={`Drop your draft and go back to version ${version}?`}
            confirm="Discard"
            danger
            disabled={settling}
            onConfirm={() => {
              autosave.cancel()
              discard.mutate()
            }}
          />
        )}
        <div className="field inline">
          <label htmlFor="agent-deploy-message">What changed</label>
          <input id="agent-deploy-message" value={message} onChange={(e) => setMessage(e.target.value)} />
        </div>
        <button
          type="button"
          className="primary"
          // A refused edit is on screen but not in the draft: deploy what is shown, or nothing.
          disabled={deploy.isPending || discard.isPending || autosave.status === 'error' || (!hasDraft && !autosave.busy)}
          onClick={async () => {
            if (await autosave.flush())
              deploy.mutate(
                { message },
                {
                  onSuccess: () => {
                    setMessage('')
                    autosave.settle()
                  },
                },
              )
          }}
        >
          Deploy
        </button>
      </div>
      {autosave.status === 'error' && (
        <>
          <ErrorBox error={autosave.error} title="Draft not saved" />
          <p className="small-text muted">
            Your text is kept here and your last saved draft is unchanged; fix the problem and it saves again.
          </p>
        </>
      )}
      <ErrorBox error={deploy.error} title="Not deployed" />
      <ErrorBox error={discard.error} title="Draft not discarded" />
      <BrainForm value={value} onChange={edit} />
      <ToolsList value={value} onChange={edit} />
      <section aria-labelledby="agent-other-title">
        <h2 id="agent-other-title">Other settings</h2>
        <RawKeys
          value={value}
          covered={FORM_KEYS}
          onChange={edit}
          label="Other keys of the agent (YAML)"
          help="Keys the form does not edit (output_schema, memory, questions, approval_timeout, specialists, …): kept as they are."
        />
      </section>
      {historyOpen && <HistoryDrawer path={path} onClose={() => setHistoryOpen(false)} />}
    </section>
  )
}
