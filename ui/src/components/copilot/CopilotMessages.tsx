/** The conversation as the server keeps it: the user's messages, the copilot's answers, its tool calls. */
import type { ReactNode } from 'react'
import type { Message } from '../../api/types'
import { type Proposal, proposalOf } from './proposals'

type Props = {
  messages: Message[]
  /** How a proposed change is shown (with its Accept / Reject). */
  renderProposal: (proposal: Proposal) => ReactNode
}

export function CopilotMessages({ messages, renderProposal }: Props) {
  if (messages.length === 0) {
    return <p className="muted">Ask the copilot to build or change this flow: it proposes a draft you accept or reject.</p>
  }
  return (
    <ol className="cp-messages" aria-label="Conversation">
      {messages.map((m, i) => (
        <li key={i} className={`cp-${m.role}`}>
          <MessageBody message={m} index={i} renderProposal={renderProposal} />
        </li>
      ))}
    </ol>
  )
}

function MessageBody({ message: m, index, renderProposal }: { message: Message; index: number; renderProposal: Props['renderProposal'] }) {
  if (m.role === 'user') {
    return (
      <>
        <span className="cp-who">You</span>
        <p className="cp-text">{m.content}</p>
      </>
    )
  }
  if (m.role === 'tool') {
    const proposal = proposalOf(m.name, m.content, m.is_error, m.tool_call_id ?? String(index))
    if (proposal) return renderProposal(proposal)
    return (
      <details className="cp-result">
        <summary>
          <code>{m.name ?? 'tool'}</code> {m.is_error ? 'refused' : 'answered'}
        </summary>
        <pre className="code">{m.content}</pre>
      </details>
    )
  }
  return (
    <>
      <span className="cp-who">Copilot</span>
      {m.content && <p className="cp-text">{m.content}</p>}
      {m.tool_calls.length > 0 && (
        <ul className="cp-calls" aria-label="Tool calls">
          {m.tool_calls.map((call, j) => (
            <li key={call.id ?? j}>
              Called <code>{call.name}</code>
            </li>
          ))}
        </ul>
      )}
    </>
  )
}
