/**
 * The copilot beside the flow editor: the conversation about this flow, a message box, the
 * turn in flight (its tool calls, the test runs it waits for), and each change it proposes
 * as a diff to accept (load the draft into the editor) or reject (put the editor's text back).
 */
import { useQueryClient } from '@tanstack/react-query'
import { useCallback, useEffect, useId, useRef, useState } from 'react'
import { conversationKey, useConversation, useForgetConversation, useSendMessage } from '../../api/copilot'
import { draftKey, fetchDraft, useSaveDraft } from '../../api/drafts'
import { flowText } from '../../lib/flowYaml'
import { ErrorBox } from '../ErrorBox'
import { CopilotMessages } from './CopilotMessages'
import { LiveTurn } from './LiveTurn'
import { type Decision, ProposedChange } from './ProposedChange'
import { latestProposal, type Proposal } from './proposals'
import './copilot.css'

type Props = {
  path: string
  /** The editor's text now (what Reject puts back). */
  text: string
  /** Save what the editor has not saved yet (the copilot reads the draft); false: it is not saved. */
  prepare: () => Promise<boolean>
  /** Show `text` in the editor as the saved draft. */
  onLoad: (text: string) => void
  onClose: () => void
}

export function CopilotPanel({ path, text, prepare, onLoad, onClose }: Props) {
  const client = useQueryClient()
  const talk = useConversation(path)
  const send = useSendMessage(path)
  const forget = useForgetConversation(path)
  const save = useSaveDraft(path)
  const [message, setMessage] = useState('')
  const [started, setStarted] = useState<string | null>(null)
  // The editor's text before this session's last turn: what rejecting its change restores.
  const [before, setBefore] = useState<string | null>(null)
  const [decided, setDecided] = useState<Record<string, Decision>>({})
  const [applying, setApplying] = useState(false)
  const [applyError, setApplyError] = useState<unknown>(null)
  const [notSaved, setNotSaved] = useState(false)
  const boxId = useId()
  const panel = useRef<HTMLElement>(null)

  const running = talk.data?.running ?? started
  const busy = !!running || send.isPending
  const latest = talk.data ? latestProposal(talk.data.messages) : null

  // The latest of the conversation in view: what the copilot just said or asks for.
  const shown = talk.data?.messages.length ?? 0
  useEffect(() => {
    const el = panel.current
    if (el) el.scrollTop = el.scrollHeight
  }, [shown, running])

  const onFinished = useCallback(() => {
    setStarted(null)
    void client.invalidateQueries({ queryKey: conversationKey(path) })
  }, [client, path])

  const onSend = async (event: React.FormEvent) => {
    event.preventDefault()
    const asked = message.trim()
    if (!asked || busy) return
    setNotSaved(false)
    if (!(await prepare())) {
      setNotSaved(true)
      return
    }
    setBefore(text)
    send.mutate(asked, {
      onSuccess: (turn) => {
        setStarted(turn.run_id)
        setMessage('')
      },
    })
  }

  const apply = async (key: string, decision: Decision) => {
    setApplying(true)
    setApplyError(null)
    try {
      if (decision === 'accepted') {
        const draft = await fetchDraft(path)
        client.setQueryData(draftKey(path), draft)
        if (draft) onLoad(flowText(draft.value))
      } else if (before !== null) {
        await save.mutateAsync({ kind: 'flow', value: before })
        onLoad(before)
      }
      setDecided((d) => ({ ...d, [key]: decision }))
    } catch (error) {
      setApplyError(error)
    } finally {
      setApplying(false)
    }
  }

  const renderProposal = (proposal: Proposal) => (
    <ProposedChange
      proposal={proposal}
      open={proposal.key === latest && before !== null && !running}
      decided={decided[proposal.key]}
      busy={applying}
      error={proposal.key === latest ? applyError : null}
      onAccept={() => void apply(proposal.key, 'accepted')}
      onReject={() => void apply(proposal.key, 'rejected')}
    />
  )

  const onForget = () => {
    if (!window.confirm('Start a new conversation? The copilot forgets this one.')) return
    forget.mutate(undefined, { onSuccess: () => setDecided({}) })
  }

  return (
    <aside className="cp-panel" aria-labelledby="cp-title" ref={panel}>
      <header className="cp-head">
        <h2 id="cp-title">Copilot</h2>
        <div className="buttons">
          <button type="button" className="small" onClick={onForget} disabled={busy || forget.isPending}>
            New conversation
          </button>
          <button type="button" className="small" onClick={onClose}>
            Close
          </button>
        </div>
      </header>
      <ErrorBox error={talk.error} title="Conversation not loaded" />
      <ErrorBox error={forget.error} title="Not forgotten" />
      {talk.data && <CopilotMessages messages={talk.data.messages} renderProposal={renderProposal} />}
      {running && <LiveTurn key={running} runId={running} onFinished={onFinished} />}
      <form className="cp-form" onSubmit={(e) => void onSend(e)}>
        <label htmlFor={boxId}>Message to the copilot</label>
        <textarea
          id={boxId}
          rows={3}
          value={message}
          onChange={(e) => setMessage(e.target.value)}
          placeholder="Add a step that…"
        />
        <div className="buttons">
          <button type="submit" className="primary" disabled={busy || !message.trim()}>
            Send
          </button>
        </div>
        {notSaved && <p role="alert" className="error-box">Fix the draft's problems first: the copilot reads your saved draft.</p>}
        <ErrorBox error={send.error} title="Not sent" />
      </form>
    </aside>
  )
}
