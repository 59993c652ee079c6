import { parseFlow, setToolInputs, stepPath, toolInputs } from './flowYaml'

const FLOW = `# The support flow
steps:
  - id: answer
    ai_agent:
      agent: f/demo/assistant # linked
    inputs:
      user_message: { expr: flow_input.message }
`

describe('tool_inputs in the YAML', () => {
  it('writes a tool override under the step, keeping comments', () => {
    const text = setToolInputs(FLOW, 'answer', 'lookup_order', { order_id: 'A-1' })!
    expect(text).toContain('# The support flow')
    expect(text).toContain('agent: f/demo/assistant # linked')
    const { value } = parseFlow(text)
    expect(toolInputs(value, 'answer', 'lookup_order')).toEqual({ order_id: 'A-1' })
    expect(toolInputs(value, 'answer', 'issue_refund')).toEqual({})
  })

  it('changes one tool and drops tool_inputs when the last one is emptied', () => {
    let text = setToolInputs(FLOW, 'answer', 'lookup_order', { order_id: 'A-1' })!
    text = setToolInputs(text, 'answer', 'issue_refund', { amount: { expr: 'flow_input.amount' } })!
    text = setToolInputs(text, 'answer', 'lookup_order', { order_id: 'B-2' })!
    let value = parseFlow(text).value
    expect(toolInputs(value, 'answer', 'lookup_order')).toEqual({ order_id: 'B-2' })
    expect(toolInputs(value, 'answer', 'issue_refund')).toEqual({ amount: { expr: 'flow_input.amount' } })
    text = setToolInputs(text, 'answer', 'lookup_order', {})!
    text = setToolInputs(text, 'answer', 'issue_refund', {})!
    value = parseFlow(text).value
    expect(text).not.toContain('tool_inputs')
    expect(value).toEqual(parseFlow(FLOW).value)
  })

  it('finds nested steps and refuses text that does not parse', () => {
    const nested = { steps: [{ id: 'loop', for_each: { items: [], steps: [{ id: 'inner', identity: true }] } }] }
    expect(stepPath(nested, 'inner')).toEqual(['steps', 0, 'for_each', 'steps', 0])
    expect(stepPath(nested, 'nope')).toBeNull()
    expect(setToolInputs('steps: [', 'answer', 't', { a: 1 })).toBeNull()
    expect(setToolInputs(FLOW, 'nope', 't', { a: 1 })).toBeNull()
  })
})
