import { cursorPlace } from './flowYamlPath'

/** The place at the `|` of `text`. */
function at(text: string) {
  const offset = text.indexOf('|')
  return cursorPlace(text.replace('|', ''), offset)
}

describe('cursorPlace', () => {
  it('finds a key position at the top level and inside a list item', () => {
    expect(at('summary: x\nst|')).toMatchObject({ path: [], kind: 'key', prefix: 'st', siblings: ['summary'] })
    const text = 'steps:\n  - id: a\n    identity: true\n  - id: b\n    sc|\n    needs: [a]\n'
    expect(at(text)).toMatchObject({ path: ['steps', 1], kind: 'key', prefix: 'sc', siblings: ['id', 'needs'] })
  })

  it('follows nested mappings and a new list item', () => {
    const text = 'steps:\n  - id: a\n    ai_agent:\n      agent: f/x/y\n      tool_inputs:\n        lookup:\n          |'
    expect(at(text)).toMatchObject({ path: ['steps', 0, 'ai_agent', 'tool_inputs', 'lookup'], kind: 'key', prefix: '' })
    expect(at('steps:\n  - id: a\n  - |')).toMatchObject({ path: ['steps', 1], kind: 'key', siblings: [] })
  })

  it('finds a value position with its key', () => {
    const text = 'steps:\n  - id: a\n    ai_agent:\n      tools:\n        - name: t\n          run: p|'
    expect(at(text)).toMatchObject({ path: ['steps', 0, 'ai_agent', 'tools', 0, 'run'], kind: 'value', prefix: 'p' })
  })

  it('is nothing in the middle of a value', () => {
    expect(at('summary: two words|')).toBeNull()
  })
})
