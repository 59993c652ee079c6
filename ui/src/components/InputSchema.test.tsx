import { render, screen, within } from '@testing-library/react'
import { describe, expect, it } from 'vitest'
import { InputSchema } from './InputSchema'

describe('InputSchema', () => {
  it('lists each input with its type, whether it is required, and its description', () => {
    render(
      <InputSchema
        path="f/demo/refund"
        schema={{
          type: 'object',
          properties: {
            order_id: { type: 'string', description: 'The order' },
            amount: { type: ['number', 'null'], default: 0 },
            currency: { enum: ['EUR', 'USD'] },
          },
          required: ['order_id'],
        }}
      />,
    )
    const rows = within(screen.getByRole('table', { name: 'Inputs of f/demo/refund' })).getAllByRole('row')
    expect(rows.map((r) => r.textContent)).toEqual([
      'InputTypeRequiredDescription',
      'order_idstringyesThe order',
      'amountnumber or nullno (default 0)',
      'currencyone of "EUR", "USD"no',
    ])
  })

  it('says so when nothing is needed', () => {
    render(<InputSchema path="f/demo/x" schema={{ type: 'object', properties: {} }} />)
    expect(screen.getByText('It takes no inputs.')).toBeInTheDocument()
  })
})
