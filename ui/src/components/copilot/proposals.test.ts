import { describe, expect, it } from 'vitest'
import type { Message } from '../../api/types'
import { latestProposal, proposalOf } from './proposals'

const saved = JSON.stringify({ path: 'f/a/b', saved: 'as your draft (not deployed)', diff: '--- a\n+++ b\n' })

function tool(name: string, content: string, id: string, isError = false): Message {
  return { role: 'tool', name, content, tool_call_id: id, is_error: isError, tool_calls: [], images: [], reasoning: [] }
}

describe('proposals', () => {
  it('reads a saved set_flow / patch_flow result, and nothing else', () => {
    expect(proposalOf('set_flow', saved, false, 'k')).toEqual({ key: 'k', path: 'f/a/b', diff: '--- a\n+++ b\n' })
    expect(proposalOf('patch_flow', saved, false, 'k')?.path).toBe('f/a/b')
    expect(proposalOf('set_flow', saved, true, 'k')).toBeNull() // refused: nothing was saved
    expect(proposalOf('show_flow', saved, false, 'k')).toBeNull()
    expect(proposalOf('set_flow', 'The flow does not validate', false, 'k')).toBeNull()
  })

  it("finds the conversation's latest proposal", () => {
    const messages = [tool('set_flow', saved, 'one'), tool('search_flows', '[]', 'two'), tool('patch_flow', saved, 'three'), tool('set_flow', saved, 'four', true)]
    expect(latestProposal(messages)).toBe('three')
    expect(latestProposal([])).toBeNull()
  })
})
