import { fireEvent, render, screen } from '@testing-library/react'
import { useState } from 'react'
import { beforeAll, describe, expect, it, vi } from 'vitest'
import type { FlowStep } from '../lib/flowSteps'
import type { NodeChildren } from '../lib/runChildren'
import { RunDag } from './RunDag'

beforeAll(() => {
  // jsdom measures nothing: React Flow needs a ResizeObserver, and keeps unmeasured nodes hidden
  // (whose accessible names the queries cannot compute: they find the toggle by its label).
  vi.stubGlobal(
    'ResizeObserver',
    class {
      observe() {}
      unobserve() {}
      disconnect() {}
    },
  )
})

const STEPS: FlowStep[] = [{ id: 'answer', kind: 'ai_agent', summary: '', needs: [], inputs: {} }]
const CALLS: NodeChildren = {
  label: '1 tool call',
  nodes: [{ id: 'answer::call::c1', parent: 'answer', label: 'lookup_order', detail: 'order_id="A-1"', status: 'succeeded' }],
}

function Harness({ onSelect }: { onSelect: (id: string) => void }) {
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set())
  return (
    <div style={{ width: 800, height: 600 }}>
      <RunDag
        steps={STEPS}
        states={new Map([['answer', { status: 'succeeded', attempts: 2, duration: 1.5, jobs: [] }]])}
        selected={null}
        ended
        onSelect={onSelect}
        expandable={new Map([['answer', CALLS]])}
        expanded={expanded}
        onToggle={(id) => setExpanded((prev) => (prev.has(id) ? new Set() : new Set([id])))}
      />
    </div>
  )
}

describe('RunDag', () => {
  it('shows attempts and duration, and expands a step into its children without selecting it', async () => {
    const onSelect = vi.fn()
    render(<Harness onSelect={onSelect} />)
    const node = await screen.findByTestId('step-answer')
    expect(node).toHaveTextContent('×2')
    expect(node).toHaveTextContent('1.5 s')
    expect(screen.queryByTestId('child-answer::call::c1')).not.toBeInTheDocument()

    fireEvent.click(screen.getByLabelText('Show 1 tool call of answer'))
    const child = await screen.findByTestId('child-answer::call::c1')
    expect(child).toHaveTextContent('lookup_order')
    expect(child).toHaveAttribute('data-status', 'succeeded')
    expect(onSelect).not.toHaveBeenCalled()
    expect(screen.getByLabelText('Hide 1 tool call of answer')).toHaveAttribute('aria-expanded', 'true')

    // A child node selects the step it belongs to.
    fireEvent.click(child)
    expect(onSelect).toHaveBeenCalledWith('answer')
  })

  it('renders as before without the expand props', async () => {
    render(<RunDag steps={STEPS} states={new Map()} selected={null} ended={false} onSelect={() => {}} />)
    expect(await screen.findByTestId('step-answer')).toHaveAttribute('data-status', 'pending')
    expect(screen.queryByLabelText(/tool call/)).not.toBeInTheDocument()
  })
})
