/** Lay out steps and their dependencies top to bottom with dagre. */
import dagre from '@dagrejs/dagre'

export interface DagInput {
  id: string
  needs: readonly string[]
}

export interface Positioned {
  id: string
  x: number
  y: number
}

export interface DagEdge {
  id: string
  source: string
  target: string
}

export const NODE_WIDTH = 200
export const NODE_HEIGHT = 64

/**
 * Positions (top-left corners) for each step, and an edge from each step to each step that needs it.
 * Needs naming no known step are left out.
 */
export function layoutDag(steps: readonly DagInput[]): { nodes: Positioned[]; edges: DagEdge[] } {
  const graph = new dagre.graphlib.Graph()
  graph.setGraph({ rankdir: 'TB', nodesep: 40, ranksep: 56, marginx: 16, marginy: 16 })
  graph.setDefaultEdgeLabel(() => ({}))
  const known = new Set(steps.map((s) => s.id))
  for (const step of steps) graph.setNode(step.id, { width: NODE_WIDTH, height: NODE_HEIGHT })
  const edges: DagEdge[] = []
  for (const step of steps) {
    for (const need of step.needs) {
      if (!known.has(need) || need === step.id) continue
      graph.setEdge(need, step.id)
      edges.push({ id: `${need}->${step.id}`, source: need, target: step.id })
    }
  }
  dagre.layout(graph)
  const nodes = steps.map((step) => {
    const node = graph.node(step.id)
    return { id: step.id, x: node.x - NODE_WIDTH / 2, y: node.y - NODE_HEIGHT / 2 }
  })
  return { nodes, edges }
}
