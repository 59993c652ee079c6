import { screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Item } from '../../api/types'
import { on, renderWithClient, stubFetch } from '../admin/testing'
import { ValueEditor } from '../ValueEditor'

const BASE = {
  description: 'longer words',
  updated_by: 'ada',
  updated_at: 1_800_000_000,
  secret: false,
  deleted: false,
}
const REGION: Item = { ...BASE, path: 'f/ops/region', kind: 'variable', summary: 'Where', version: 0, resource_type: null, value: 'eu-west-1' }
const SCHEMA = {
  type: 'object',
  properties: { url: { type: 'string' }, retries: { type: 'integer' } },
  required: ['url'],
}
const RESOURCE: Item = {
  ...BASE,
  path: 'f/ops/api',
  kind: 'resource',
  summary: 'The API',
  version: 4,
  resource_type: 'f/ops/api_type',
  value: { url: 'http://a', retries: 1 },
}

afterEach(() => vi.unstubAllGlobals())

describe('the variable editor', () => {
  it('saves the new text, keeping the summary and description', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(
      on('GET', '/api/items/f/ops/region', { body: REGION }),
      on('PUT', '/api/items/f/ops/region', { body: { ...REGION, value: 'eu-north-1' } }),
    )
    const onDone = vi.fn()
    renderWithClient(<ValueEditor item={REGION} onDone={onDone} />)
    const save = screen.getByRole('button', { name: 'Save' })
    expect(save).toBeDisabled() // nothing changed yet
    await user.clear(screen.getByLabelText('Value of f/ops/region'))
    await user.type(screen.getByLabelText('Value of f/ops/region'), 'eu-north-1')
    await user.click(save)
    await waitFor(() => expect(onDone).toHaveBeenCalled())
    expect(calls.find((c) => c.method === 'PUT')?.body).toEqual({
      kind: 'variable',
      value: 'eu-north-1',
      summary: 'Where',
      description: 'longer words',
      resource_type: null,
      base_version: 0,
    })
  })
})

describe('the resource editor', () => {
  it('builds a form from its type’s schema and saves as the next version', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(
      on('GET', '/api/items/f/ops/api_type', {
        body: { ...BASE, path: 'f/ops/api_type', kind: 'resource_type', summary: '', version: 0, resource_type: null, value: SCHEMA },
      }),
      on('PUT', '/api/items/f/ops/api', { body: { ...RESOURCE, version: 5 } }),
    )
    const onDone = vi.fn()
    renderWithClient(<ValueEditor item={RESOURCE} onDone={onDone} />)
    expect(screen.getByText('f/ops/api_type')).toBeInTheDocument()
    const url = await screen.findByLabelText(/^url/)
    await user.clear(url)
    await user.type(url, 'http://b')
    await user.click(screen.getByRole('button', { name: 'Save as v5' }))
    await waitFor(() => expect(onDone).toHaveBeenCalled())
    expect(calls.find((c) => c.method === 'PUT')?.body).toEqual({
      kind: 'resource',
      value: { url: 'http://b', retries: 1 },
      resource_type: 'f/ops/api_type',
      summary: 'The API',
      description: 'longer words',
      message: '',
      base_version: 4,
    })
  })

  it('shows a conflict and keeps the edit', async () => {
    const user = userEvent.setup()
    stubFetch(
      on('GET', '/api/items/f/ops/api_type', {
        body: { ...BASE, path: 'f/ops/api_type', kind: 'resource_type', summary: '', version: 0, resource_type: null, value: SCHEMA },
      }),
      on('PUT', '/api/items/f/ops/api', {
        status: 409,
        body: { type: 'VersionConflict', message: 'f/ops/api is at version 5, not 4.', hint: 'Read it again and reapply the change.' },
      }),
    )
    const onDone = vi.fn()
    renderWithClient(<ValueEditor item={RESOURCE} onDone={onDone} />)
    const url = await screen.findByLabelText(/^url/)
    await user.clear(url)
    await user.type(url, 'http://c')
    await user.click(screen.getByRole('button', { name: 'Save as v5' }))
    expect(await screen.findByRole('alert')).toHaveTextContent('f/ops/api is at version 5, not 4.')
    expect(screen.getByLabelText(/^url/)).toHaveValue('http://c')
    expect(onDone).not.toHaveBeenCalled()
  })

  it('edits a resource of a built-in type as JSON, saying the server checks it', async () => {
    const calls = stubFetch()
    const llm: Item = { ...RESOURCE, resource_type: 'openai', value: { api_key: '$var:f/ops/key' } }
    renderWithClient(<ValueEditor item={llm} onDone={() => {}} />)
    expect(screen.getByText(/edited as JSON; the server checks it against its type/)).toBeInTheDocument()
    expect(screen.queryByRole('group', { name: 'Edit as' })).toBeNull()
    expect(calls).toHaveLength(0) // a built-in type is no item to fetch
  })
})
