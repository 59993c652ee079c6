/** The selected step: for a linked agent step, its agent's card and its tools' input overrides. */
import { useId } from 'react'
import { agentTools } from '../../lib/flowSchemaTools'
import type { FlowStep } from '../../lib/flowSteps'
import { Json } from '../Json'
import { LinkedAgentCard } from './LinkedAgentCard'
import { ToolSection } from './ToolSection'
import type { LinkedAgent } from './useLinkedAgents'

export function StepPanel({
  step,
  link,
  agent,
  agentError,
  flowPath,
  toolInputs,
  onToolInputs,
  onUnlink,
  unlinking,
  onClose,
}: {
  step: FlowStep
  link: string | null
  agent: LinkedAgent | undefined
  agentError: unknown
  flowPath: string
  /** The step's `tool_inputs` for a tool. */
  toolInputs: (tool: string) => Record<string, unknown>
  onToolInputs: (tool: string, value: Record<string, unknown>) => void
  onUnlink: () => void
  unlinking: boolean
  onClose: () => void
}) {
  const titleId = useId()
  const tools = agentTools(agent?.value)
  return (
    <aside className="fe-panel" aria-labelledby={titleId}>
      <div className="drawer-head">
        <h2 id={titleId}>
          Step <span className="mono">{step.id}</span>
        </h2>
        <span className="badge">{step.kind}</span>
        <button type="button" className="small" onClick={onClose}>
          Close
        </button>
      </div>
      {step.summary && <p>{step.summary}</p>}
      {link ? (
        <>
          <LinkedAgentCard
            link={link}
            agent={agent}
            error={agentError}
            flowPath={flowPath}
            onUnlink={onUnlink}
            unlinking={unlinking}
          />
          <h3>Step inputs</h3>
          <Json value={step.inputs} />
          {tools.length > 0 && <h3>Tool inputs of this flow</h3>}
          {tools.map((tool) => (
            <ToolSection
              key={tool.name}
              tool={tool}
              bound={tool.inputs}
              value={toolInputs(tool.name)}
              onChange={(value) => onToolInputs(tool.name, value)}
            />
          ))}
        </>
      ) : (
        <>
          <p className="muted">Edit this step in the YAML.</p>
          <dl className="facts">
            <dt>Needs</dt>
            <dd>{step.needs.length ? step.needs.join(', ') : '—'}</dd>
          </dl>
          <h3>Inputs</h3>
          <Json value={step.inputs} />
        </>
      )}
    </aside>
  )
}
