import { fireEvent, render, screen } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { useState } from 'react'
import { describe, expect, it, vi } from 'vitest'
import { type JsonSchema, SchemaForm, schemaProblems } from './SchemaForm'

const REFUND: JsonSchema = {
  type: 'object',
  properties: {
    order: { type: 'string', description: 'The order id' },
    amount: { type: 'number' },
    count: { type: 'integer' },
    notify: { type: 'boolean' },
    reason: { enum: ['damaged', 'late', 'other'] },
    address: {
      type: 'object',
      properties: { city: { type: 'string' }, zip: { type: 'string' } },
      required: ['city'],
    },
    tags: { type: 'array', items: { type: 'string' } },
  },
  required: ['order', 'amount'],
}

function Harness({ initial, onValue }: { initial: unknown; onValue: (v: unknown) => void }) {
  const [value, setValue] = useState(initial)
  return (
    <SchemaForm
      schema={REFUND}
      value={value}
      label="Arguments"
      onChange={(next) => {
        setValue(next)
        onValue(next)
      }}
    />
  )
}

describe('SchemaForm', () => {
  it('builds a field per property and marks the required ones', () => {
    render(<Harness initial={{ order: 'A1', amount: 20 }} onValue={() => {}} />)
    expect(screen.getByLabelText(/^order/)).toHaveValue('A1')
    expect(screen.getByLabelText(/^order/)).toBeRequired()
    expect(screen.getByLabelText(/^amount/)).toHaveValue(20)
    expect(screen.getByLabelText(/^amount/)).toBeRequired()
    expect(screen.getByLabelText(/^count/)).not.toBeRequired()
    expect(screen.getByLabelText(/^notify/)).not.toBeChecked()
    expect(screen.getByLabelText(/^reason/).tagName).toBe('SELECT')
    expect(screen.getByRole('group', { name: /address/ })).toBeInTheDocument()
    expect(screen.getByLabelText(/^city/)).toBeRequired()
    expect(screen.getByText('The order id')).toBeInTheDocument()
  })

  it('produces the edited value', async () => {
    const user = userEvent.setup()
    const onValue = vi.fn()
    render(<Harness initial={{ order: 'A1', amount: 20 }} onValue={onValue} />)
    await user.clear(screen.getByLabelText(/^order/))
    await user.type(screen.getByLabelText(/^order/), 'B7')
    fireEvent.change(screen.getByLabelText(/^amount/), { target: { value: '12.5' } })
    fireEvent.change(screen.getByLabelText(/^count/), { target: { value: '3' } })
    await user.click(screen.getByLabelText(/^notify/))
    await user.selectOptions(screen.getByLabelText(/^reason/), 'late')
    await user.type(screen.getByLabelText(/^city/), 'Oslo')
    await user.click(screen.getByRole('button', { name: 'Add tags' }))
    await user.type(screen.getByLabelText(/^tags 1/), 'vip')
    expect(onValue).toHaveBeenLastCalledWith({
      order: 'B7',
      amount: 12.5,
      count: 3,
      notify: true,
      reason: 'late',
      address: { city: 'Oslo' },
      tags: ['vip'],
    })
  })

  it('does not pass on a fraction for an integer, and drops an emptied number', () => {
    const onValue = vi.fn()
    render(<Harness initial={{ order: 'A1', amount: 20, count: 2 }} onValue={onValue} />)
    fireEvent.change(screen.getByLabelText(/^count/), { target: { value: '2.5' } })
    expect(onValue).not.toHaveBeenCalled()
    expect(screen.getByText('A whole number, please.')).toBeInTheDocument()
    fireEvent.change(screen.getByLabelText(/^amount/), { target: { value: '' } })
    expect(onValue).toHaveBeenLastCalledWith({ order: 'A1', count: 2 })
  })

  it('removes an item of a list', async () => {
    const user = userEvent.setup()
    const onValue = vi.fn()
    render(<Harness initial={{ order: 'A1', amount: 1, tags: ['a', 'b'] }} onValue={onValue} />)
    await user.click(screen.getByRole('button', { name: 'Remove tags 1' }))
    expect(onValue).toHaveBeenLastCalledWith({ order: 'A1', amount: 1, tags: ['b'] })
  })

  it('edits what the schema does not describe as JSON', () => {
    const onValue = vi.fn()
    render(<SchemaForm schema={{}} value={{ a: 1 }} onChange={onValue} label="Arguments" />)
    fireEvent.change(screen.getByLabelText('Arguments (JSON)'), { target: { value: '{"a": 2}' } })
    expect(onValue).toHaveBeenLastCalledWith({ a: 2 })
  })
})

describe('schemaProblems', () => {
  it('names missing required fields and wrong types', () => {
    expect(schemaProblems(REFUND, { amount: 'x', address: {} })).toEqual([
      'order: is required',
      'amount: must be a number',
      'address.city: is required',
    ])
    expect(schemaProblems(REFUND, { order: 'A1', amount: 3, count: 1.5, reason: 'lost' })).toEqual([
      'count: must be a whole number',
      'reason: must be one of "damaged", "late", "other"',
    ])
    expect(schemaProblems(REFUND, { order: 'A1', amount: 3 })).toEqual([])
  })
})
