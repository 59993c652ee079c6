import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Schedule } from '../../api/triggers'
import { on, stubFetch } from '../admin/testing'
import { renderRouted } from './testing'
import { TriggersSection, schedulesOf } from './TriggersSection'
import { curlExample, hookScope, hookUrl } from './webhook'

function schedule(path: string, target: string, extra: Partial<Schedule> = {}): Schedule {
  return {
    path,
    cron: '0 9 * * *',
    timezone: 'UTC',
    target,
    inputs: {},
    enabled: true,
    catch_up: 'latest',
    on_failure: null,
    on_recovery: null,
    owner: 'ada',
    version: 1,
    updated_at: '2029-12-01T10:00:00Z',
    next_fires: ['2030-01-15T09:00:00Z'],
    ...extra,
  }
}
const SCHEDULES = [
  schedule('f/demo/morning', 'f/demo/hello'),
  schedule('f/demo/other', 'f/demo/approve'),
  schedule('f/ops/paused', 'f/demo/hello', { enabled: false, next_fires: [] }),
]
const SCHEMA = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }

afterEach(() => vi.unstubAllGlobals())

describe('the webhook’s words', () => {
  it('name the URL, the one scope a token needs, and a curl call with an example body', () => {
    expect(hookUrl('https://tm.example', 'f/demo/hello')).toBe('https://tm.example/hooks/f/demo/hello')
    expect(hookScope('f/demo/hello')).toBe('hooks:write:f/demo/hello')
    const curl = curlExample('https://tm.example', 'f/demo/hello', SCHEMA)
    expect(curl).toContain("curl -X POST 'https://tm.example/hooks/f/demo/hello?wait=30s'")
    expect(curl).toContain('Authorization: Bearer $TIDEMILL_HOOK_TOKEN')
    expect(curl).toContain('Idempotency-Key')
    expect(curl).toContain(`-d '{"name":"..."}'`)
  })
})

describe('TriggersSection', () => {
  it('lists the schedules that run this flow, each with its next fire or paused', async () => {
    stubFetch(on('GET', '/api/schedules', { body: SCHEDULES }))
    expect(schedulesOf(SCHEDULES, 'f/demo/hello').map((s) => s.path)).toEqual(['f/demo/morning', 'f/ops/paused'])
    renderRouted(<TriggersSection path="f/demo/hello" kind="flow" inputSchema={SCHEMA} />)
    const list = await screen.findByRole('list', { name: 'Schedules of f/demo/hello' })
    const items = within(list).getAllByRole('listitem')
    expect(items).toHaveLength(2)
    expect(items[0]).toHaveTextContent('f/demo/morning: every day at 09:00 (UTC)')
    expect(items[0]).toHaveTextContent(`next ${new Date(Date.parse('2030-01-15T09:00:00Z')).toLocaleString()}`)
    expect(items[1]).toHaveTextContent('paused')
    expect(within(list).getByRole('link', { name: 'f/demo/morning' })).toHaveAttribute('href', '/workspace/f/demo/morning')
    expect(screen.getByText('New schedule for this flow')).toBeInTheDocument()
    expect(screen.getByText(`${window.location.origin}/hooks/f/demo/hello`)).toBeInTheDocument()
  })

  it('says when no schedule runs it, and shows no webhook for a script', async () => {
    stubFetch(on('GET', '/api/schedules', { body: SCHEDULES }))
    renderRouted(<TriggersSection path="f/demo/greet" kind="script" />)
    expect(await screen.findByText('No schedule runs this script.')).toBeInTheDocument()
    expect(screen.queryByRole('heading', { name: 'Webhook' })).not.toBeInTheDocument()
  })

  it('makes a token with the single scope of this flow’s webhook, and shows it once', async () => {
    const user = userEvent.setup()
    const made = {
      token: 'tm_secret_text',
      info: { id: 't1', name: 'webhook f/demo/hello', scopes: ['hooks:write:f/demo/hello'], prefix: 'tm_sec' },
    }
    const calls = stubFetch(on('GET', '/api/schedules', { body: [] }), on('POST', '/api/auth/tokens', { status: 201, body: made }))
    renderRouted(<TriggersSection path="f/demo/hello" kind="flow" inputSchema={SCHEMA} />)
    await user.click(await screen.findByRole('button', { name: 'Create webhook token' }))
    expect(await screen.findByTestId('new-token')).toHaveValue('tm_secret_text')
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({
      name: 'webhook f/demo/hello',
      scopes: ['hooks:write:f/demo/hello'],
      expires_in_days: 365,
    })
    await user.click(screen.getByRole('button', { name: 'I have copied it' }))
    await waitFor(() => expect(screen.queryByTestId('new-token')).not.toBeInTheDocument())
    expect(screen.getByRole('button', { name: 'Create webhook token' })).toBeInTheDocument()
  })
})
