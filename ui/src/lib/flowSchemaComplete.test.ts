import { flowSuggestions } from './flowSchemaComplete'

function at(text: string) {
  return flowSuggestions(text.replace('|', ''), text.indexOf('|'))
}

describe('flowSuggestions', () => {
  it("offers a step's keys not yet written, with their descriptions", () => {
    const found = at('steps:\n  - id: a\n    re|\n')!
    expect(found.from).toBe('steps:\n  - id: a\n    '.length)
    expect(found.options.map((o) => o.label)).toEqual(['retry'])
    expect(found.options[0]).toMatchObject({ apply: 'retry:', type: 'property', info: 'Retries when the step fails.' })
    const labels = at('steps:\n  - id: a\n    |')!.options.map((o) => o.label)
    expect(labels).toContain('ai_agent')
    expect(labels).not.toContain('id')
  })

  it('offers the values of an enum and completes a scalar key with a space', () => {
    const text = 'steps:\n  - id: a\n    ai_agent:\n      tools:\n        - name: t\n          run: |'
    expect(at(text)!.options.map((o) => o.label)).toEqual(['pool', 'child', 'in_process'])
    expect(at('steps:\n  - id: a\n    ai_agent:\n      mod|')!.options).toEqual([
      expect.objectContaining({ label: 'model', apply: 'model: ' }),
    ])
  })

  it('offers nothing where the schema has nothing', () => {
    expect(at('summary: |')).toBeNull()
    expect(at('steps:\n  - id: a\n    zzz|')).toBeNull()
  })
})
