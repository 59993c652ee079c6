/** The DAG of a run's steps (React Flow, laid out with dagre), each with its status. */
import {
  Background,
  Controls,
  type Edge,
  Handle,
  type Node,
  type NodeProps,
  Position,
  ReactFlow,
  useNodesInitialized,
  useReactFlow,
} from '@xyflow/react'
import '@xyflow/react/dist/style.css'

import { type RefObject, useEffect, useMemo, useRef } from 'react'
import { layoutDag } from '../lib/dagLayout'
import type { FlowStep } from '../lib/flowSteps'
import { formatDuration } from '../lib/format'
import type { StepState } from '../lib/stepStates'

type StepData = {
  step: FlowStep
  state: StepState | undefined
  selected: boolean
  /** The run ended: a step with no job never ran. */
  ended: boolean
}
type StepNode = Node<StepData, 'step'>

function StepNodeView({ data }: NodeProps<StepNode>) {
  const { step, state, selected, ended } = data
  const status = state?.status ?? (ended ? 'not_run' : 'pending')
  return (
    // A click (or Enter on the button) reaches React Flow's onNodeClick.
    <button
      type="button"
      className={`dag-node status-${status}${selected ? ' selected' : ''}`}
      data-testid={`step-${step.id}`}
      data-status={status}
      aria-pressed={selected}
      title={step.summary || undefined}
    >
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <span className="dag-node-title">
        <strong>{step.id}</strong> <span className="muted">{step.kind}</span>
      </span>
      <span className="dag-node-meta">
        <span className={`badge status-${status}`}>{status.replace('_', ' ')}</span>
        {state && state.attempts > 1 && <span title={`${state.attempts} attempts`}>×{state.attempts}</span>}
        {state?.duration != null && <span>{formatDuration(state.duration)}</span>}
      </span>
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </button>
  )
}

const NODE_TYPES = { step: StepNodeView }
const FIT = { maxZoom: 1.2, padding: 0.15 }

/** Keep the whole graph in view when its steps change or its pane is resized (a drawer opens). */
function FitToPane({ pane, shape }: { pane: RefObject<HTMLDivElement | null>; shape: string }) {
  const { fitView } = useReactFlow()
  const ready = useNodesInitialized()
  useEffect(() => {
    if (ready) void fitView(FIT)
  }, [ready, shape, fitView])
  useEffect(() => {
    const element = pane.current
    if (!element || typeof ResizeObserver === 'undefined') return
    const observer = new ResizeObserver(() => void fitView(FIT))
    observer.observe(element)
    return () => observer.disconnect()
  }, [pane, fitView])
  return null
}

export function RunDag({
  steps,
  states,
  selected,
  ended,
  onSelect,
}: {
  steps: FlowStep[]
  states: Map<string, StepState>
  selected: string | null
  ended: boolean
  onSelect: (id: string) => void
}) {
  const layout = useMemo(() => layoutDag(steps), [steps])
  const pane = useRef<HTMLDivElement>(null)
  const shape = layout.edges.map((e) => e.id).join(',') + '|' + steps.map((s) => s.id).join(',')
  const nodes: StepNode[] = layout.nodes.map((pos, i) => ({
    id: pos.id,
    type: 'step',
    position: { x: pos.x, y: pos.y },
    data: { step: steps[i]!, state: states.get(pos.id), selected: selected === pos.id, ended },
    draggable: false,
    connectable: false,
  }))
  const edges: Edge[] = layout.edges.map((e) => ({
    ...e,
    animated: states.get(e.target)?.status === 'running',
  }))
  return (
    <div className="dag" aria-label="Steps of the run" ref={pane}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={NODE_TYPES}
        onNodeClick={(_, node) => onSelect(node.id)}
        fitView
        fitViewOptions={FIT}
        nodesDraggable={false}
        nodesConnectable={false}
        elementsSelectable={false}
        minZoom={0.2}
      >
        <FitToPane pane={pane} shape={shape} />
        <Background />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  )
}
