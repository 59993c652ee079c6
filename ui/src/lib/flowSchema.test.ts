import { keysAt, schemaProblems, valuesAt } from './flowSchema'

describe('the flow schema', () => {
  it('lists the keys valid at a path, through $ref and anyOf', () => {
    const top = keysAt([]).map((k) => k.key)
    expect(top).toEqual(expect.arrayContaining(['steps', 'inputs', 'summary', 'result']))
    const step = keysAt(['steps', 0]).map((k) => k.key)
    expect(step).toEqual(expect.arrayContaining(['id', 'ai_agent', 'script', 'needs', 'retry']))
    expect(step).not.toContain('steps')
    // `ai_agent` is `anyOf: [$ref AIAgent, null]`.
    const agent = keysAt(['steps', 3, 'ai_agent'])
    expect(agent.map((k) => k.key)).toEqual(expect.arrayContaining(['agent', 'tool_inputs', 'tools', 'model']))
    expect(agent.find((k) => k.key === 'tools')).toMatchObject({ block: true })
    expect(agent.find((k) => k.key === 'model')).toMatchObject({ block: false, description: expect.stringContaining('model') })
    expect(keysAt(['steps', 0, 'ai_agent', 'tools', 0]).map((k) => k.key)).toContain('requires_approval')
    expect(keysAt(['nonsense', 'here'])).toEqual([])
  })

  it('lists enum values and booleans', () => {
    expect(valuesAt(['steps', 0, 'ai_agent', 'tools', 0, 'run'])).toEqual(['pool', 'child', 'in_process'])
    expect(valuesAt(['steps', 0, 'ai_agent', 'tools', 0, 'requires_approval'])).toEqual([true, false])
    expect(valuesAt(['summary'])).toEqual([])
  })

  it('says what is wrong, without the anyOf branches not taken', () => {
    expect(schemaProblems({ steps: [{ id: 'a', identity: true }] })).toEqual([])
    expect(schemaProblems({ steps: [{ id: 'a', identity: true, bogus: 1 }] })).toEqual([
      { path: ['steps', 0], key: 'bogus', message: 'unknown key `bogus`' },
    ])
    expect(schemaProblems({ steps: [{ id: 'a', ai_agent: { agent: 5 } }] })).toEqual([
      { path: ['steps', 0, 'ai_agent', 'agent'], message: 'must be string' },
    ])
    expect(schemaProblems({ steps: [{ id: 'a', script: 5 }] })).toEqual([
      { path: ['steps', 0, 'script'], message: 'must be object or string' },
    ])
    expect(schemaProblems({ summary: 'x' })).toEqual([{ path: [], message: 'missing `steps`' }])
  })
})
