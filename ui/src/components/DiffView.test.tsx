import { render, screen } from '@testing-library/react'
import { createTwoFilesPatch } from 'diff'
import { describe, expect, it } from 'vitest'
import { DiffView, diffLines } from './DiffView'

const OLD = 'def main(name):\n    return "hi " + name\n# end\n'
const NEW = 'def main(name):\n    return "hello " + name\n# end\n'
const PATCH = createTwoFilesPatch('f/team/greet@1', 'f/team/greet@2', OLD, NEW)

describe('diffLines', () => {
  it('numbers the old and new lines of each hunk', () => {
    const lines = diffLines(PATCH)
    expect(lines[0]?.kind).toBe('hunk')
    expect(lines.filter((l) => l.kind === 'remove')).toEqual([
      { kind: 'remove', text: '    return "hi " + name', oldNo: 2, newNo: null },
    ])
    expect(lines.filter((l) => l.kind === 'add')).toEqual([
      { kind: 'add', text: '    return "hello " + name', oldNo: null, newNo: 2 },
    ])
    expect(lines.filter((l) => l.kind === 'context').map((l) => [l.oldNo, l.newNo])).toEqual([
      [1, 1],
      [3, 3],
    ])
  })

  it('colours a diff it cannot parse by each line’s first character', () => {
    const lines = diffLines('model: a -> b\n- tool: old\n+ tool: new\n')
    expect(lines.map((l) => l.kind)).toEqual(['context', 'remove', 'add'])
  })
})

describe('DiffView', () => {
  it('shows what was added and removed', () => {
    render(<DiffView diff={PATCH} oldLabel="version 1" newLabel="version 2" />)
    expect(screen.getByText(/version 1 → version 2/)).toBeInTheDocument()
    const added = document.querySelectorAll('tr[data-kind="add"]')
    const removed = document.querySelectorAll('tr[data-kind="remove"]')
    expect(added).toHaveLength(1)
    expect(removed).toHaveLength(1)
    expect(added[0]).toHaveTextContent(/added: \+\s*return "hello " \+ name/)
    expect(removed[0]).toHaveTextContent('return "hi " + name')
  })

  it('says so when nothing differs', () => {
    render(<DiffView diff="" oldLabel="version 3" newLabel="version 3" />)
    expect(screen.getByText('No differences between version 3 and version 3.')).toBeInTheDocument()
  })
})
