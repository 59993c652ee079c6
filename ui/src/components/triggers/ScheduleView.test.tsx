import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Fire, Schedule } from '../../api/triggers'
import { on, stubFetch } from '../admin/testing'
import { FiresTable } from './FiresTable'
import { ScheduleView } from './ScheduleView'
import { renderRouted } from './testing'

const NEXT = ['2030-01-15T08:00:00Z', '2030-01-16T08:00:00Z']
const SCHEDULE: Schedule = {
  path: 'f/demo/morning',
  cron: '0 9 * * *',
  timezone: 'Europe/Paris',
  target: 'f/demo/hello',
  inputs: { name: 'Ada' },
  enabled: true,
  catch_up: 'latest',
  on_failure: 'f/demo/alert',
  on_recovery: null,
  owner: 'ada',
  version: 1,
  updated_at: '2029-12-01T10:00:00Z',
  next_fires: NEXT,
}
const FIRES: Fire[] = [
  { fire_at: '2029-12-02T08:00:00Z', status: 'started', run_id: 'run-2', outcome: 'failed', handler_id: 'run-3', error: null },
  { fire_at: '2029-12-01T08:00:00Z', status: 'failed', run_id: null, outcome: null, handler_id: null, error: 'f/demo/hello: not found' },
]
const PATH = '/api/schedules/f/demo/morning'

afterEach(() => vi.unstubAllGlobals())

describe('ScheduleView', () => {
  it('shows the spec in words, the owner, the next fires in both zones, and the fires', async () => {
    stubFetch(on('GET', PATH, { body: SCHEDULE }), on('GET', `${PATH}/fires`, { body: FIRES }))
    renderRouted(<ScheduleView path="f/demo/morning" />)
    const facts = await screen.findByTestId('schedule-spec')
    expect(facts).toHaveTextContent('every day at 09:00, 0 9 * * * in Europe/Paris')
    expect(within(facts).getByRole('link', { name: 'f/demo/hello' })).toHaveAttribute('href', '/workspace/f/demo/hello')
    expect(within(facts).getByRole('link', { name: 'f/demo/alert' })).toBeInTheDocument()
    expect(facts).toHaveTextContent('ada (who saved it last)')
    expect(facts).toHaveTextContent('latest: after a downtime')
    expect(screen.getByLabelText('Inputs of f/demo/morning')).toHaveTextContent('"name": "Ada"')
    const next = screen.getByRole('list', { name: 'Next fires' })
    const items = within(next).getAllByRole('listitem')
    expect(items).toHaveLength(2)
    expect(items[0]).toHaveTextContent(new Date(Date.parse(NEXT[0]!)).toLocaleString())
    expect(items[0]).toHaveTextContent('2030-01-15 09:00 Europe/Paris')
    expect(screen.getByTestId('schedule-state')).toHaveTextContent('enabled')
    expect(await screen.findByRole('table', { name: 'Fires of f/demo/morning' })).toBeInTheDocument()
  })

  it('pauses, then resumes, showing the state the server answers', async () => {
    const user = userEvent.setup()
    let current = SCHEDULE
    const calls = stubFetch(
      (request) => {
        const path = new URL(request.url).pathname
        if (request.method === 'POST' && path === `${PATH}/pause`) current = { ...SCHEDULE, enabled: false, next_fires: [] }
        if (request.method === 'POST' && path === `${PATH}/resume`) current = SCHEDULE
        return path === PATH || path.startsWith(`${PATH}/p`) || path.startsWith(`${PATH}/r`) ? { body: current } : undefined
      },
      on('GET', `${PATH}/fires`, { body: [] }),
    )
    renderRouted(<ScheduleView path="f/demo/morning" />)
    await user.click(await screen.findByRole('button', { name: 'Pause' }))
    await waitFor(() => expect(screen.getByTestId('schedule-state')).toHaveTextContent('paused'))
    expect(screen.getByText('Paused: it fires nothing until it is resumed.')).toBeInTheDocument()
    await user.click(screen.getByRole('button', { name: 'Resume' }))
    await waitFor(() => expect(screen.getByTestId('schedule-state')).toHaveTextContent('enabled'))
    expect(screen.getAllByRole('listitem')).toHaveLength(2)
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.path)).toEqual([`${PATH}/pause`, `${PATH}/resume`])
  })

  it('shows the API’s error when the schedule cannot be read', async () => {
    stubFetch(on('GET', PATH, { status: 404, body: { type: 'NotFound', message: 'No schedule at f/demo/morning.', hint: 'Check the path.' } }))
    renderRouted(<ScheduleView path="f/demo/morning" />)
    const alert = await screen.findByRole('alert')
    expect(alert).toHaveTextContent('No schedule at f/demo/morning.')
    expect(alert).toHaveTextContent('Check the path.')
  })
})

describe('FiresTable', () => {
  it('lists each fire: when, its status, its run and handler run, the outcome and the error', async () => {
    renderRouted(<FiresTable fires={FIRES} path="f/demo/morning" />)
    const table = await screen.findByRole('table', { name: 'Fires of f/demo/morning' })
    const rows = within(table).getAllByRole('row').slice(1)
    expect(rows).toHaveLength(2)
    expect(rows[0]).toHaveTextContent(new Date(Date.parse('2029-12-02T08:00:00Z')).toLocaleString())
    expect(rows[0]).toHaveAttribute('data-fire-status', 'started')
    expect(within(rows[0]!).getByRole('link', { name: 'run-2' })).toHaveAttribute('href', '/runs/run-2')
    expect(within(rows[0]!).getByRole('link', { name: 'run-3' })).toHaveAttribute('href', '/runs/run-3')
    expect(rows[0]).toHaveTextContent('failed')
    expect(rows[1]).toHaveTextContent('f/demo/hello: not found')
    expect(within(rows[1]!).queryByRole('link')).not.toBeInTheDocument()
  })

  it('says so when there is no fire yet', async () => {
    renderRouted(<FiresTable fires={[]} path="f/demo/morning" />)
    expect(await screen.findByText('It has not fired yet.')).toBeInTheDocument()
  })
})
