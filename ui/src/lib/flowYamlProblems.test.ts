import { parseFlow } from './flowYaml'
import { lineOf, lintTextProblems, localProblems } from './flowYamlProblems'

const FLOW = `summary: demo
steps:
  - id: fetch
    identity: true
  - id: answer
    ai_agent:
      agent: f/demo/assistant
    inputs:
      user_message: hi
`

function textAt(text: string, range: { from: number; to: number }) {
  return text.slice(range.from, range.to)
}

describe('localProblems', () => {
  it('places a YAML syntax error where the parser found it', () => {
    const text = 'steps:\n  - id: a\n    identity: [true\n'
    const { value, problems } = localProblems(text)
    expect(value).toBeNull()
    expect(problems.length).toBeGreaterThan(0)
    expect(problems[0]).toMatchObject({ source: 'yaml', severity: 'error' })
    expect(lineOf(text, problems[0]!.from)).toBeGreaterThanOrEqual(3)
  })

  it('places an unknown key on the key itself and a bad value on the value', () => {
    const text = FLOW.replace('    identity: true\n', '    identity: true\n    bogus_key: 1\n')
    const { problems } = localProblems(text)
    expect(problems).toHaveLength(1)
    expect(problems[0]).toMatchObject({ source: 'schema', message: 'steps.0: unknown key `bogus_key`' })
    expect(textAt(text, problems[0]!)).toBe('bogus_key')

    const bad = FLOW.replace('agent: f/demo/assistant', 'agent: 42')
    const [problem] = localProblems(bad).problems
    expect(problem).toMatchObject({ message: 'steps.1.ai_agent.agent: must be string' })
    expect(textAt(bad, problem!)).toBe('42')
  })

  it('has nothing to say of a good flow', () => {
    expect(localProblems(FLOW).problems).toEqual([])
  })
})

describe('lintTextProblems', () => {
  const { doc, value } = parseFlow(FLOW)

  it("puts a step's problem on its step's line, or on its field", () => {
    const [onStep, onField] = lintTextProblems(doc, FLOW, value, [
      { step: 'answer', field: '', message: 'needs a model' },
      { step: 'answer', field: 'ai_agent.agent', message: 'no such agent' },
    ])
    expect(lineOf(FLOW, onStep!.from)).toBe(5)
    expect(onStep).toMatchObject({ source: 'server', message: 'answer: needs a model' })
    expect(textAt(FLOW, onField!)).toBe('f/demo/assistant')
    expect(onField!.message).toBe('answer.ai_agent.agent: no such agent')
  })

  it('puts a problem of no step (or of an unknown one) on the first line', () => {
    const [flow, unknown] = lintTextProblems(doc, FLOW, value, [
      { step: null, field: 'result', message: 'bad result' },
      { step: 'gone', field: '', message: 'what step?' },
    ])
    expect(flow).toMatchObject({ from: 0, to: 'summary: demo'.length, message: 'result: bad result' })
    expect(lineOf(FLOW, unknown!.from)).toBe(1)
  })
})
