/** `/agents/<agent path>?from=<flow path>`: the agent editor (see components/agent-editor/). */
import { useParams, useSearch } from '@tanstack/react-router'
import { AgentEditor } from '../components/agent-editor/AgentEditor'

export function AgentEditorPage() {
  const { _splat } = useParams({ from: '/authed/agents/$' })
  const { from } = useSearch({ from: '/authed/agents/$' })
  const path = _splat ?? ''
  // A new editor per agent: nothing of one agent's edits carries over to another's.
  return <AgentEditor key={path} path={path} from={from} />
}
