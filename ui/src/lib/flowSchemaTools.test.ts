import { agentTools, mainParameters } from './flowSchemaTools'

describe('mainParameters', () => {
  it("reads main's parameters, hints and defaults", () => {
    const code = [
      'import json',
      'def helper(x): ...',
      'def main(order_id: str, amount: float, count: int = 2, note: Optional[str] = None,',
      '         tags: list[str] = [], opts: dict[str, int] | None = None, *, flag: bool = True, **rest) -> dict:',
      '    return {}',
    ].join('\n')
    expect(mainParameters(code)).toEqual({
      type: 'object',
      properties: {
        order_id: { type: 'string' },
        amount: { type: 'number' },
        count: { type: 'integer', default: 2 },
        note: { type: 'string' },
        tags: { type: 'array' },
        opts: { type: 'object' },
        flag: { type: 'boolean', default: true },
      },
      required: ['order_id', 'amount'],
    })
    expect(mainParameters('x = 1')).toBeNull()
  })
})

describe('agentTools', () => {
  it("describes an agent's tools with their input schemas where it can", () => {
    const tools = agentTools({
      model: 'fake',
      tools: [
        { name: 'lookup', script: 'def main(order_id: str):\n    pass\n' },
        { name: 'refund', requires_approval: true, script: { path: 'f/tools/refund' } },
        { name: 'sub', flow: { inputs: { type: 'object', properties: { q: { type: 'string' } } }, steps: [] } },
        { name: 'fn', function: 'pkg.mod:fn' },
      ],
    })
    expect(tools.map((t) => [t.name, t.kind, t.requiresApproval])).toEqual([
      ['lookup', 'script', false],
      ['refund', 'script', true],
      ['sub', 'flow', false],
      ['fn', 'function', false],
    ])
    expect(tools[0]!.schema).toEqual({ type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] })
    expect(tools[1]).toMatchObject({ scriptPath: 'f/tools/refund', schema: null })
    expect(tools[2]!.schema).toMatchObject({ properties: { q: { type: 'string' } } })
    expect(tools[3]!.schema).toBeNull()
    expect(agentTools(null)).toEqual([])
  })
})
