import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { RunWait } from '../../api/types'
import { on, stubFetch } from '../admin/testing'
import { renderRouted } from './testing'
import { WaitList } from './WaitList'

const NOW = 1_800_000_000
const EVENT: RunWait = {
  kind: 'event',
  step: 'wait_go',
  run_id: 'r1',
  reason: "waiting for the event 'go' with key 'A-1'",
  commands: ['tidemill events send go --key A-1 --path f/demo/wait'],
  details: { name: 'go', key: 'A-1', path: 'f/demo/wait' },
  children: [],
}
const SLEEP: RunWait = { ...EVENT, kind: 'sleep', step: 'nap', commands: [], details: {}, until: NOW + 7200 }

afterEach(() => vi.unstubAllGlobals())

describe('WaitList', () => {
  it('says what each wait is for, in words', async () => {
    stubFetch()
    renderRouted(<WaitList waits={[SLEEP, EVENT]} now={NOW} runPath="f/demo/wait" />)
    const sleep = await screen.findByTestId('wait-sleep')
    expect(sleep).toHaveTextContent(/nap: Sleeping until .* \(in 2 h\)/)
    const event = screen.getByTestId('wait-event')
    expect(event).toHaveTextContent('wait_go: Waiting for event go with key A-1')
    expect(within(event).getByText('tidemill events send go --key A-1 --path f/demo/wait')).toBeInTheDocument()
  })

  it('copies the command that sends the event', async () => {
    const user = userEvent.setup()
    stubFetch()
    const writeText = vi.fn(async () => {})
    renderRouted(<WaitList waits={[EVENT]} now={NOW} runPath="f/demo/wait" />)
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true })
    await user.click(await screen.findByRole('button', { name: /^Copy the command/ }))
    expect(writeText).toHaveBeenCalledWith('tidemill events send go --key A-1 --path f/demo/wait')
    expect(await screen.findByText('Copied.')).toBeInTheDocument()
  })

  it('sends the event with the payload typed, and says whom it reached', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(
      on('POST', '/api/events', {
        status: 202,
        body: { event_id: 7, delivered_to: ['r1'], kept_until: null, duplicate: false },
      }),
    )
    renderRouted(<WaitList waits={[EVENT]} now={NOW} runPath="f/demo/wait" />)
    const form = await screen.findByRole('form', { name: 'Send event go' })
    const payload = within(form).getByLabelText('Payload (JSON)')
    await user.clear(payload)
    await user.type(payload, '{{"paid": true}')
    await user.click(within(form).getByRole('button', { name: 'Send event' }))
    expect(await within(form).findByText('Sent: delivered to 1 waiting run.')).toBeInTheDocument()
    expect(calls).toEqual([
      { method: 'POST', path: '/api/events', body: { name: 'go', key: 'A-1', payload: { paid: true }, path: 'f/demo/wait' } },
    ])
  })

  it('refuses a payload that is not JSON, sending nothing', async () => {
    const user = userEvent.setup()
    const calls = stubFetch()
    renderRouted(<WaitList waits={[EVENT]} now={NOW} runPath="f/demo/wait" />)
    const form = await screen.findByRole('form', { name: 'Send event go' })
    const payload = within(form).getByLabelText('Payload (JSON)')
    await user.clear(payload)
    await user.type(payload, 'paid')
    await user.click(within(form).getByRole('button', { name: 'Send event' }))
    expect(await within(form).findByRole('alert')).toHaveTextContent('The payload is not JSON')
    await waitFor(() => expect(payload).toHaveAttribute('aria-invalid', 'true'))
    expect(calls).toEqual([])
  })
})
