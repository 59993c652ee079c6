import { fireEvent, screen, waitFor } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { on, stubFetch } from '../admin/testing'
import { StartRun } from '../StartRun'
import { renderRouted } from './testing'

afterEach(() => vi.unstubAllGlobals())

describe('StartRun, later', () => {
  it('submits the run with the local time it is to start at, in seconds since the epoch', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(on('POST', '/api/runs', { status: 201, body: { id: 'run-9', status: 'queued' } }))
    const { router } = renderRouted(<StartRun path="f/demo/nightly" document={{ steps: [] }} />)
    const when = await screen.findByLabelText('Start at (optional)')
    fireEvent.change(when, { target: { value: '2030-01-15T09:30' } })
    await user.click(screen.getByRole('button', { name: 'Start it later' }))
    await waitFor(() => expect(router.state.location.pathname).toBe('/runs/run-9'))
    expect(calls[0]?.body).toEqual({
      path: 'f/demo/nightly',
      inputs: {},
      draft: false,
      memory_id: null,
      start_at: new Date(2030, 0, 15, 9, 30).getTime() / 1000,
    })
  })
})
