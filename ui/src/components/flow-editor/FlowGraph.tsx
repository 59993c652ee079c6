/**
 * The flow's steps as a graph (the run graph's layout), with each linked agent step's
 * tools hanging off it as display-only nodes; clicking a tool selects its step.
 */
import {
  Background,
  Controls,
  type Edge,
  Handle,
  type Node,
  type NodeProps,
  Position,
  ReactFlow,
} from '@xyflow/react'
import '@xyflow/react/dist/style.css'
import { useMemo } from 'react'
import { layoutDag } from '../../lib/dagLayout'
import type { FlowStep } from '../../lib/flowSteps'

export interface GraphTool {
  name: string
  requiresApproval: boolean
}

/** What the graph shows of a linked step's agent. */
export interface GraphAgent {
  path: string
  draft: boolean
  tools: GraphTool[]
}

type StepData = { step: FlowStep; selected: boolean; agent: GraphAgent | null }
type ToolData = { step: string; tool: GraphTool; draft: boolean }
type StepNode = Node<StepData, 'step'>
type ToolNode = Node<ToolData, 'tool'>

function StepNodeView({ data }: NodeProps<StepNode>) {
  const { step, selected, agent } = data
  return (
    <button
      type="button"
      className={`dag-node fe-step${selected ? ' selected' : ''}`}
      data-testid={`flow-step-${step.id}`}
      aria-pressed={selected}
      title={step.summary || undefined}
    >
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <span className="dag-node-title">
        <strong>{step.id}</strong> <span className="muted">{step.kind}</span>
      </span>
      <span className="dag-node-meta">
        {agent ? <span className="mono">{agent.path}</span> : step.summary}
        {agent?.draft && <span className="badge status-waiting">Draft</span>}
      </span>
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </button>
  )
}

function ToolNodeView({ data }: NodeProps<ToolNode>) {
  const { tool, draft, step } = data
  return (
    <button type="button" className="dag-node fe-tool" data-testid={`flow-tool-${step}-${tool.name}`} title={`A tool of step ${step}`}>
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <span className="dag-node-title">
        <strong>{tool.name}</strong> <span className="muted">tool</span>
      </span>
      <span className="dag-node-meta">
        {tool.requiresApproval && <span>needs approval</span>}
        {draft && <span className="badge status-waiting">Draft</span>}
      </span>
    </button>
  )
}

const NODE_TYPES = { step: StepNodeView, tool: ToolNodeView }
const FIT = { maxZoom: 1.1, padding: 0.15 }

function toolId(step: string, tool: string) {
  return `tool:${step}:${tool}`
}

export function FlowGraph({
  steps,
  agents,
  selected,
  onSelect,
}: {
  steps: FlowStep[]
  /** The linked steps' agents, by step id. */
  agents: ReadonlyMap<string, GraphAgent>
  selected: string | null
  onSelect: (step: string) => void
}) {
  const { nodes, edges } = useMemo(() => {
    const tools = steps.flatMap((step) =>
      (agents.get(step.id)?.tools ?? []).map((tool) => ({ id: toolId(step.id, tool.name), needs: [step.id], step, tool })),
    )
    const layout = layoutDag([...steps, ...tools])
    const byId = new Map(layout.nodes.map((n) => [n.id, n]))
    const stepNodes: StepNode[] = steps.map((step) => ({
      id: step.id,
      type: 'step',
      position: byId.get(step.id)!,
      data: { step, selected: selected === step.id, agent: agents.get(step.id) ?? null },
      draggable: false,
      connectable: false,
    }))
    const toolNodes: ToolNode[] = tools.map((t) => ({
      id: t.id,
      type: 'tool',
      position: byId.get(t.id)!,
      data: { step: t.step.id, tool: t.tool, draft: agents.get(t.step.id)?.draft ?? false },
      draggable: false,
      connectable: false,
    }))
    const toolIds = new Set(tools.map((t) => t.id))
    const edges: Edge[] = layout.edges.map((e) => (toolIds.has(e.target) ? { ...e, className: 'fe-tool-edge' } : e))
    return { nodes: [...stepNodes, ...toolNodes], edges }
  }, [steps, agents, selected])
  // A new graph (a step or a tool came or went) is a new view, fitted to the pane; a
  // controlled React Flow does not refit by itself.
  const shape = nodes.map((n) => n.id).join(',')
  return (
    <div className="dag fe-graph" role="region" aria-label="Steps of the flow">
      <ReactFlow
        key={shape}
        nodes={nodes}
        edges={edges}
        nodeTypes={NODE_TYPES}
        onNodeClick={(_, node) => onSelect(node.type === 'tool' ? (node.data as ToolData).step : node.id)}
        fitView
        fitViewOptions={FIT}
        nodesDraggable={false}
        nodesConnectable={false}
        elementsSelectable={false}
        minZoom={0.2}
      >
        <Background />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  )
}
