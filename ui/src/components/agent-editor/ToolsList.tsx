/** The agent's tools: each one's card, and adding or removing one. */
import { type Agent, NEW_TOOL_CODE, freshName, toolsOf, withTool, withoutTool } from './agentValue'
import { ToolCard } from './ToolCard'

type Props = { value: Agent; onChange: (value: Agent) => void }

export function ToolsList({ value, onChange }: Props) {
  const tools = toolsOf(value)
  return (
    <section className="tools-list" aria-labelledby="agent-tools-title">
      <div className="section-head">
        <h2 id="agent-tools-title">Tools</h2>
        <button
          type="button"
          className="small"
          onClick={() => onChange({ ...value, tools: [...tools, { name: freshName(tools), script: NEW_TOOL_CODE }] })}
        >
          Add a tool
        </button>
      </div>
      {tools.length === 0 && <p className="muted">No tools: the model only answers.</p>}
      {tools.map((tool, index) => (
        // Tools have no ids: a card is its position (a removed tool's card goes with it).
        <ToolCard
          key={index}
          tool={tool}
          index={index}
          onChange={(next) => onChange(withTool(value, index, next))}
          onRemove={() => onChange(withoutTool(value, index))}
        />
      ))}
    </section>
  )
}
