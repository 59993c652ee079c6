/** The DAG of a run's steps (React Flow, laid out with dagre), each with its status, attempts and
 * duration; a step with children (an agent's tool calls, a sub-flow's steps) expands into them. */
import {
  Background,
  Controls,
  type Edge,
  Handle,
  type Node,
  type NodeChange,
  type NodeProps,
  Position,
  ReactFlow,
  useNodesInitialized,
  useReactFlow,
} from '@xyflow/react'
import '@xyflow/react/dist/style.css'

import { type RefObject, useCallback, useEffect, useMemo, useRef } from 'react'
import { layoutDag } from '../lib/dagLayout'
import type { FlowStep } from '../lib/flowSteps'
import { formatDuration } from '../lib/format'
import type { ChildNode, NodeChildren } from '../lib/runChildren'
import type { StepState } from '../lib/stepStates'
import { Icon } from './triggers/icons'
import { statusLook } from './triggers/waits'
import './run/run.css'

type StepData = {
  step: FlowStep
  state: StepState | undefined
  selected: boolean
  /** The run ended: a step with no job never ran. */
  ended: boolean
  /** What it expands into, if anything, and whether it is expanded. */
  children?: NodeChildren
  expanded: boolean
  onToggle?: (id: string) => void
}
type StepNode = Node<StepData, 'step'>
type ChildData = { child: ChildNode }
type ChildFlowNode = Node<ChildData, 'child'>

function StepNodeView({ data }: NodeProps<StepNode>) {
  const { step, state, selected, ended, children, expanded, onToggle } = data
  const status = state?.status ?? (ended ? 'not_run' : 'pending')
  return (
    <>
      {/* A click (or Enter on the button) reaches React Flow's onNodeClick. */}
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
          <StatusLabel status={status} />
          {state && (
            <span title={`${state.attempts} attempt${state.attempts === 1 ? '' : 's'}`} data-testid="attempts">
              ×{state.attempts}
            </span>
          )}
          {state?.duration != null && <span data-testid="duration">{formatDuration(state.duration)}</span>}
        </span>
        <Handle type="source" position={Position.Bottom} isConnectable={false} />
      </button>
      {children && onToggle && (
        <ExpandToggle stepId={step.id} label={children.label} expanded={expanded} onToggle={onToggle} />
      )}
    </>
  )
}

/** A step's status badge: its words, and an icon for a step that waits for time or an event. */
function StatusLabel({ status }: { status: string }) {
  const { icon, label } = statusLook(status)
  return (
    <span className={`badge status-${status}`}>
      {icon && <Icon name={icon} />}
      {label}
    </span>
  )
}

/** Beside the node's button (a button holds no other): shows or hides what the step expands into. */
function ExpandToggle({
  stepId,
  label,
  expanded,
  onToggle,
}: {
  stepId: string
  label: string
  expanded: boolean
  onToggle: (id: string) => void
}) {
  return (
    <button
      type="button"
      className="dag-node-toggle nodrag"
      aria-expanded={expanded}
      aria-label={`${expanded ? 'Hide' : 'Show'} ${label} of ${stepId}`}
      onClick={(e) => {
        // Not a click on the node: it must not open (or close) the step's drawer.
        e.stopPropagation()
        onToggle(stepId)
      }}
    >
      {expanded ? '−' : '+'} {label}
    </button>
  )
}

function ChildNodeView({ data }: NodeProps<ChildFlowNode>) {
  const { child } = data
  return (
    <div className={`dag-node dag-child status-${child.status}`} data-testid={`child-${child.id}`} data-status={child.status}>
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <span className="dag-node-title">
        <strong>{child.label}</strong>
      </span>
      <span className="dag-node-meta">
        <span className={`badge status-${child.status}`}>{child.status.replace('_', ' ')}</span>
        <span className="dag-child-detail" title={child.detail}>
          {child.detail}
        </span>
      </span>
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </div>
  )
}

const NODE_TYPES = { step: StepNodeView, child: ChildNodeView }
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
  expandable,
  expanded,
  onToggle,
}: {
  steps: FlowStep[]
  states: Map<string, StepState>
  selected: string | null
  ended: boolean
  /** Called with a top-level step's id (a child node selects the step it belongs to). */
  onSelect: (id: string) => void
  /** The steps that expand, and into what (optional: without it no step expands). */
  expandable?: ReadonlyMap<string, NodeChildren>
  expanded?: ReadonlySet<string>
  onToggle?: (id: string) => void
}) {
  const shown = useMemo(() => {
    const list: ChildNode[] = []
    for (const [id, c] of expandable ?? []) if (expanded?.has(id)) list.push(...c.nodes)
    return list
  }, [expandable, expanded])
  const layout = useMemo(
    () => layoutDag([...steps, ...shown.map((c) => ({ id: c.id, needs: [c.parent] }))]),
    [steps, shown],
  )
  const pane = useRef<HTMLDivElement>(null)
  // React Flow forgets a node's measured size when it gets a new node object (each render
  // here): it hides the node until it is measured again, and refits the view. Handing back
  // the sizes it reported keeps nodes shown and the view still while the run moves.
  const sizes = useRef(new Map<string, { width: number; height: number }>())
  const onNodesChange = useCallback((changes: NodeChange[]) => {
    for (const change of changes)
      if (change.type === 'dimensions' && change.dimensions) sizes.current.set(change.id, change.dimensions)
  }, [])
  const shape = layout.edges.map((e) => e.id).join(',') + '|' + layout.nodes.map((n) => n.id).join(',')
  // Each child node's top-level step: a click on it selects that step.
  const topOf = new Map<string, string>()
  for (const [id, c] of expandable ?? []) for (const node of c.nodes) topOf.set(node.id, id)
  const nodes: (StepNode | ChildFlowNode)[] = layout.nodes.map((pos, i) =>
    i < steps.length
      ? {
          id: pos.id,
          type: 'step' as const,
          position: { x: pos.x, y: pos.y },
          measured: sizes.current.get(pos.id),
          data: {
            step: steps[i]!,
            state: states.get(pos.id),
            selected: selected === pos.id,
            ended,
            children: expandable?.get(pos.id),
            expanded: expanded?.has(pos.id) ?? false,
            onToggle,
          },
          draggable: false,
          connectable: false,
        }
      : {
          id: pos.id,
          type: 'child' as const,
          position: { x: pos.x, y: pos.y },
          measured: sizes.current.get(pos.id),
          data: { child: shown[i - steps.length]! },
          draggable: false,
          connectable: false,
        },
  )
  const childIds = new Set(shown.map((c) => c.id))
  const edges: Edge[] = layout.edges.map((e) => ({
    ...e,
    animated: states.get(e.target)?.status === 'running',
    className: childIds.has(e.target) ? 'dag-child-edge' : undefined,
  }))
  return (
    <div className="dag" aria-label="Steps of the run" ref={pane}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={NODE_TYPES}
        onNodesChange={onNodesChange}
        onNodeClick={(_, node) => onSelect(topOf.get(node.id) ?? node.id)}
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
