// @vitest-environment node
import { describe, expect, it } from 'vitest'
import { layoutDag } from './dagLayout'
import { flowSteps } from './flowSteps'

describe('layoutDag', () => {
  it('gives every step a position and every dependency an edge', () => {
    const { nodes, edges } = layoutDag([
      { id: 'a', needs: [] },
      { id: 'b', needs: [] },
      { id: 'c', needs: ['a', 'b'] },
    ])
    expect(nodes.map((n) => n.id)).toEqual(['a', 'b', 'c'])
    for (const node of nodes) {
      expect(Number.isFinite(node.x)).toBe(true)
      expect(Number.isFinite(node.y)).toBe(true)
    }
    expect(edges).toEqual([
      { id: 'a->c', source: 'a', target: 'c' },
      { id: 'b->c', source: 'b', target: 'c' },
    ])
  })

  it('ranks dependents below what they need', () => {
    const { nodes } = layoutDag([
      { id: 'fetch', needs: [] },
      { id: 'check', needs: ['fetch'] },
      { id: 'side', needs: ['fetch'] },
      { id: 'end', needs: ['check', 'side'] },
    ])
    const y = Object.fromEntries(nodes.map((n) => [n.id, n.y]))
    expect(y.check).toBeGreaterThan(y.fetch!)
    expect(y.side).toBeGreaterThan(y.fetch!)
    expect(y.check).toBe(y.side)
    expect(y.end).toBeGreaterThan(y.check!)
    const x = Object.fromEntries(nodes.map((n) => [n.id, n.x]))
    expect(x.check).not.toBe(x.side)
  })

  it('ignores needs on unknown steps', () => {
    const { nodes, edges } = layoutDag([{ id: 'a', needs: ['ghost'] }])
    expect(nodes).toHaveLength(1)
    expect(edges).toEqual([])
  })
})

describe('flowSteps', () => {
  it('makes each step need the one before unless it says otherwise', () => {
    const steps = flowSteps({
      steps: [
        { id: 'a', script: 'def main(): pass' },
        { id: 'b', identity: {}, needs: [] },
        { id: 'c', approval: { message: 'ok?' }, needs: ['a', 'b'] },
        { id: 'd', identity: {} },
      ],
    })
    expect(steps.map((s) => [s.id, s.kind, s.needs])).toEqual([
      ['a', 'script', []],
      ['b', 'identity', []],
      ['c', 'approval', ['a', 'b']],
      ['d', 'identity', ['c']],
    ])
  })

  it('reads a definition as the engine stores it, every kind key null but its own', () => {
    const unset = { script: null, identity: null, flow: null, branch: null, parallel: null, for_each: null }
    const steps = flowSteps({
      steps: [
        { ...unset, id: 'a', needs: null, approval: null, script: { code: 'def main(): pass' } },
        { ...unset, id: 'b', needs: null, approval: { message: 'ok?' } },
      ],
    })
    expect(steps.map((s) => [s.id, s.kind, s.needs])).toEqual([
      ['a', 'script', []],
      ['b', 'approval', ['a']],
    ])
  })

  it('reads nothing from something that is not a flow document', () => {
    expect(flowSteps('steps: []')).toEqual([])
    expect(flowSteps(null)).toEqual([])
  })
})
