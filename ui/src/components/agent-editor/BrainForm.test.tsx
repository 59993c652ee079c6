import { fireEvent, render, screen, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { useState } from 'react'
import { describe, expect, it } from 'vitest'
import { type Agent, FORM_KEYS } from './agentValue'
import { BrainForm } from './BrainForm'
import { RawKeys } from './RawKeys'
import { ToolsList } from './ToolsList'

// CodeMirror (a code tool's editor) measures text ranges, which jsdom does not lay out.
Range.prototype.getClientRects ??= () => [] as unknown as DOMRectList
Range.prototype.getBoundingClientRect ??= () => new DOMRect()

const AGENT: Agent = {
  model: 'openai:gpt-4o-mini',
  system: 'You triage tickets.\nBe brief.',
  max_iterations: 6,
  limits: { max_tool_calls: 5, on_exceeded: 'ask' },
  output_schema: { type: 'object', properties: { label: { type: 'string' } } },
  memory: { kind: 'window', context_length: 20 },
  approval_timeout: '1d',
  tools: [
    { name: 'lookup', script: 'def main(id: str):\n    return id\n', inputs: { region: 'eu' }, idempotent: false },
    { name: 'refund', flow: 'f/support/refund', requires_approval: true, approvers: ['dana'] },
    { name: 'fetch', mcp: { command: 'uvx', args: ['mcp-server-fetch'] } },
  ],
}

/** The editor's parts over one value, as the page composes them; `seen` holds each value they produced. */
function Editor({ initial, seen }: { initial: Agent; seen: Agent[] }) {
  const [value, setValue] = useState(initial)
  const edit = (next: Agent) => {
    seen.push(next)
    setValue(next)
  }
  return (
    <>
      <BrainForm value={value} onChange={edit} />
      <ToolsList value={value} onChange={edit} />
      <RawKeys value={value} covered={FORM_KEYS} onChange={edit} label="Other keys of the agent (YAML)" />
    </>
  )
}

function last(seen: Agent[]): Agent {
  expect(seen.length).toBeGreaterThan(0)
  return seen[seen.length - 1]!
}

describe('the agent form', () => {
  it('changes only the key edited, keeping the keys it does not show', () => {
    const seen: Agent[] = []
    render(<Editor initial={AGENT} seen={seen} />)
    fireEvent.change(screen.getByLabelText('System prompt'), { target: { value: 'You answer tickets.\nBe brief.' } })
    expect(last(seen)).toEqual({ ...AGENT, system: 'You answer tickets.\nBe brief.' })

    fireEvent.change(screen.getByLabelText('Max iterations'), { target: { value: '' } })
    const { max_iterations: _dropped, ...rest } = AGENT
    expect(last(seen)).toEqual({ ...rest, system: 'You answer tickets.\nBe brief.' })

    fireEvent.change(screen.getByLabelText('Max total tokens'), { target: { value: '5000' } })
    expect(last(seen).limits).toEqual({ max_tool_calls: 5, on_exceeded: 'ask', max_total_tokens: 5000 })
    expect(last(seen).output_schema).toBe(AGENT.output_schema)
  })

  it('writes the provider as a resource reference and shows its path', () => {
    const seen: Agent[] = []
    render(<Editor initial={{ ...AGENT, provider: '$res:f/ai/openai' }} seen={seen} />)
    const provider = screen.getByLabelText('Provider resource')
    expect(provider).toHaveValue('f/ai/openai')
    fireEvent.change(provider, { target: { value: 'f/ai/anthropic' } })
    expect(last(seen).provider).toBe('$res:f/ai/anthropic')
    fireEvent.change(provider, { target: { value: '' } })
    expect('provider' in last(seen)).toBe(false)
  })

  it('edits a tool without touching its other keys or the other tools', async () => {
    const seen: Agent[] = []
    render(<Editor initial={AGENT} seen={seen} />)
    const refund = screen.getByRole('article', { name: 'refund' })
    expect(within(refund).getByLabelText('Flow path')).toHaveValue('f/support/refund')
    await userEvent.click(within(refund).getByLabelText('Requires approval'))
    const tools = last(seen).tools as Agent[]
    expect(tools[1]).toEqual({ name: 'refund', flow: 'f/support/refund', approvers: ['dana'] })
    expect(tools[0]).toBe((AGENT.tools as Agent[])[0])
    expect(tools[2]).toBe((AGENT.tools as Agent[])[2])

    // A definition the form does not edit is shown, and kept, as YAML.
    const fetch = screen.getByRole('article', { name: 'fetch' })
    expect(within(fetch).getByLabelText('Runs')).toHaveValue('other')
    expect(within(fetch).getByLabelText('Other keys of fetch (YAML)')).toHaveValue(
      'mcp:\n  command: uvx\n  args:\n    - mcp-server-fetch\n',
    )
  })

  it('adds and removes tools', async () => {
    const seen: Agent[] = []
    render(<Editor initial={AGENT} seen={seen} />)
    await userEvent.click(screen.getByRole('button', { name: 'Add a tool' }))
    const added = (last(seen).tools as Agent[])[3]!
    expect(added.name).toBe('tool')
    expect(typeof added.script).toBe('string')
    await userEvent.click(screen.getByRole('button', { name: 'Remove lookup' }))
    expect((last(seen).tools as Agent[]).map((t) => t.name)).toEqual(['refund', 'fetch', 'tool'])
  })

  it('switches what a tool runs, keeping its bindings', () => {
    const seen: Agent[] = []
    render(<Editor initial={AGENT} seen={seen} />)
    const lookup = screen.getByRole('article', { name: 'lookup' })
    fireEvent.change(within(lookup).getByLabelText('Runs'), { target: { value: 'script' } })
    fireEvent.change(within(lookup).getByLabelText('Script path'), { target: { value: 'f/support/lookup' } })
    expect((last(seen).tools as Agent[])[0]).toEqual({
      name: 'lookup',
      script: { path: 'f/support/lookup' },
      inputs: { region: 'eu' },
      idempotent: false,
    })
  })

  it('edits the other keys as YAML; text that does not parse is kept and not applied', () => {
    const seen: Agent[] = []
    render(<Editor initial={AGENT} seen={seen} />)
    const raw = screen.getByLabelText('Other keys of the agent (YAML)')
    expect((raw as HTMLTextAreaElement).value).toContain('approval_timeout: 1d')
    expect((raw as HTMLTextAreaElement).value).not.toContain('system')

    fireEvent.change(raw, { target: { value: 'memory: {kind: off' } })
    expect(seen).toHaveLength(0)
    expect(raw).toHaveValue('memory: {kind: off')
    expect(raw).toHaveAttribute('aria-invalid', 'true')
    expect(screen.getByRole('alert')).toHaveTextContent('Not valid YAML')

    fireEvent.change(raw, { target: { value: 'system: hi' } })
    expect(seen).toHaveLength(0)
    expect(screen.getByRole('alert')).toHaveTextContent('Edit system in the form, not here.')

    fireEvent.change(raw, { target: { value: 'memory: {kind: "off"}\ntemperature_note: x' } })
    const { output_schema: _o, approval_timeout: _a, memory: _m, ...formKeys } = AGENT
    expect(last(seen)).toEqual({ ...formKeys, memory: { kind: 'off' }, temperature_note: 'x' })
    expect(raw).toHaveValue('memory: {kind: "off"}\ntemperature_note: x')
    expect(screen.queryByRole('alert')).toBeNull()
  })
})
