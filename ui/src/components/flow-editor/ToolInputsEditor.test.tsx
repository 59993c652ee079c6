import { fireEvent, render, screen } from '@testing-library/react'
import { useState } from 'react'
import { describe, expect, it, vi } from 'vitest'
import type { JsonSchema } from '../SchemaForm'
import { ToolInputsEditor } from './ToolInputsEditor'

const SCHEMA: JsonSchema = {
  type: 'object',
  properties: { order_id: { type: 'string' }, amount: { type: 'number' } },
  required: ['order_id', 'amount'],
}

function Harness({ onChange, initial = {} }: { onChange: (v: Record<string, unknown>) => void; initial?: Record<string, unknown> }) {
  const [value, setValue] = useState(initial)
  return (
    <ToolInputsEditor
      tool="refund"
      schema={SCHEMA}
      bound={{ amount: 10 }}
      value={value}
      onChange={(next) => {
        setValue(next)
        onChange(next)
      }}
    />
  )
}

describe('ToolInputsEditor', () => {
  it('overrides an argument with a value or an expression, and goes back to the agent', () => {
    const onChange = vi.fn()
    render(<Harness onChange={onChange} />)
    expect(screen.getByText(/The agent binds it to/)).toHaveTextContent('10')
    fireEvent.change(screen.getByLabelText('order_id of refund: where it comes from'), { target: { value: 'value' } })
    fireEvent.change(screen.getByLabelText('order_id of refund'), { target: { value: 'A-1' } })
    expect(onChange).toHaveBeenLastCalledWith({ order_id: 'A-1' })
    fireEvent.change(screen.getByLabelText('amount of refund: where it comes from'), { target: { value: 'expr' } })
    fireEvent.change(screen.getByLabelText('amount of refund: expression'), { target: { value: 'flow_input.amount' } })
    expect(onChange).toHaveBeenLastCalledWith({ order_id: 'A-1', amount: { expr: 'flow_input.amount' } })
    fireEvent.change(screen.getByLabelText('order_id of refund: where it comes from'), { target: { value: 'inherit' } })
    expect(onChange).toHaveBeenLastCalledWith({ amount: { expr: 'flow_input.amount' } })
  })

  it('reads an expression override back as one', () => {
    render(<Harness onChange={vi.fn()} initial={{ amount: { expr: 'results.a.b' } }} />)
    expect(screen.getByLabelText('amount of refund: where it comes from')).toHaveValue('expr')
    expect(screen.getByLabelText('amount of refund: expression')).toHaveValue('results.a.b')
  })

  it('edits a tool of unknown arguments as JSON, refusing what is not an object', () => {
    const onChange = vi.fn()
    render(<ToolInputsEditor tool="fn" schema={null} bound={{}} value={{}} onChange={onChange} />)
    const box = screen.getByLabelText(/Inputs of fn \(JSON/)
    fireEvent.change(box, { target: { value: '[1]' } })
    expect(screen.getByText('an object of argument names, please')).toBeInTheDocument()
    expect(onChange).not.toHaveBeenCalled()
    fireEvent.change(box, { target: { value: '{"q": {"expr": "flow_input.q"}}' } })
    expect(onChange).toHaveBeenLastCalledWith({ q: { expr: 'flow_input.q' } })
  })
})
