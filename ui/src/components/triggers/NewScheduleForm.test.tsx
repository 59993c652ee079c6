import { screen, waitFor, within } from '@testing-library/react'
import userEvent from '@testing-library/user-event'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { on, stubFetch } from '../admin/testing'
import { NewScheduleForm } from './NewScheduleForm'
import { type ScheduleFields, cronProblem, scheduleProblems, scheduleValue } from './scheduleForm'
import { renderRouted } from './testing'

const FIELDS: ScheduleFields = {
  path: 'f/demo/morning',
  cron: '0 9 * * *',
  timezone: 'Europe/Paris',
  target: 'f/demo/hello',
  inputsText: '{"name": "Ada"}',
  inputsValue: null,
  catchUp: 'latest',
  enabled: true,
  onFailure: '',
  onRecovery: '',
}
const HELLO_ITEM = {
  path: 'f/demo/hello',
  kind: 'flow',
  version: 1,
  value: {},
  input_schema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
}

afterEach(() => vi.unstubAllGlobals())

describe('the new schedule’s fields', () => {
  it('find nothing wrong with a good schedule, and make its item value', () => {
    expect(scheduleProblems(FIELDS)).toEqual({})
    expect(scheduleValue(FIELDS)).toEqual({
      cron: '0 9 * * *',
      timezone: 'Europe/Paris',
      target: 'f/demo/hello',
      inputs: { name: 'Ada' },
      enabled: true,
      catch_up: 'latest',
      on_failure: null,
      on_recovery: null,
    })
  })

  it('say what is wrong with each field', () => {
    const problems = scheduleProblems({
      ...FIELDS,
      path: 'morning',
      cron: '0 9 * *',
      timezone: 'Mars/Olympus',
      target: '',
      inputsText: '[1]',
      onFailure: 'alert',
    })
    expect(Object.keys(problems).sort()).toEqual(['cron', 'inputs', 'onFailure', 'path', 'target', 'timezone'])
    expect(problems.cron).toMatch(/has 5 fields .* this has 4/)
    expect(problems.timezone).toMatch(/Mars\/Olympus is no IANA time zone/)
    expect(problems.inputs).toMatch(/JSON object/)
    expect(scheduleProblems({ ...FIELDS, inputsText: '{name' }).inputs).toMatch(/not JSON/)
  })

  it('take cron aliases and six fields, and refuse unknown aliases', () => {
    expect(cronProblem('@daily')).toBeNull()
    expect(cronProblem('*/5 * * * * *')).toBeNull()
    expect(cronProblem('@reboot')).toMatch(/no cron alias/)
    expect(cronProblem(' ')).toMatch(/Say when it fires/)
  })
})

describe('NewScheduleForm', () => {
  it('shows the problems and writes nothing while the form is wrong', async () => {
    const user = userEvent.setup()
    const calls = stubFetch()
    renderRouted(<NewScheduleForm prefix="f/demo/" />)
    const form = await screen.findByRole('form', { name: 'New schedule' })
    await user.clear(within(form).getByLabelText('Cron'))
    await user.type(within(form).getByLabelText('Cron'), '0 25')
    await user.clear(within(form).getByLabelText('Time zone'))
    await user.type(within(form).getByLabelText('Time zone'), 'Nowhere')
    await user.click(within(form).getByRole('button', { name: 'Create the schedule' }))
    expect(within(form).getByLabelText('Schedule path')).toHaveAttribute('aria-invalid', 'true')
    expect(within(form).getByLabelText('Cron')).toHaveAccessibleDescription(/this has 2/)
    expect(within(form).getByLabelText('Time zone')).toHaveAccessibleDescription(/Nowhere is no IANA time zone/)
    expect(within(form).getByLabelText('Flow or script to run')).toHaveAttribute('aria-invalid', 'true')
    expect(calls.filter((c) => c.method !== 'GET')).toEqual([])
  })

  it('writes a schedule item with inputs from the target’s own input form, then opens it', async () => {
    const user = userEvent.setup()
    const calls = stubFetch(
      on('GET', '/api/items/f/demo/hello', { body: HELLO_ITEM }),
      on('PUT', '/api/items/f/demo/morning', { body: { ...HELLO_ITEM, path: 'f/demo/morning', kind: 'schedule' } }),
    )
    const { router } = renderRouted(<NewScheduleForm prefix="f/demo/" />)
    const form = await screen.findByRole('form', { name: 'New schedule' })
    await user.type(within(form).getByLabelText('Schedule path'), 'morning')
    await user.type(within(form).getByLabelText('Flow or script to run'), 'f/demo/hello')
    await user.clear(within(form).getByLabelText('Time zone'))
    await user.type(within(form).getByLabelText('Time zone'), 'Europe/Paris')
    expect(within(form).getByText('Fires every day at 09:00.')).toBeInTheDocument()
    // The target's input schema gives the inputs a form of their own.
    const name = await within(form).findByLabelText(/^name/, {}, { timeout: 3000 })
    await user.type(name, 'Ada')
    await user.selectOptions(within(form).getByLabelText('Catch-up'), 'skip')
    await user.click(within(form).getByRole('button', { name: 'Create the schedule' }))
    await waitFor(() => expect(router.state.location.pathname).toBe('/workspace/f/demo/morning'))
    expect(calls.find((c) => c.method === 'PUT')).toEqual({
      method: 'PUT',
      path: '/api/items/f/demo/morning',
      body: {
        kind: 'schedule',
        base_version: 0,
        message: 'New schedule',
        value: {
          cron: '0 9 * * *',
          timezone: 'Europe/Paris',
          target: 'f/demo/hello',
          inputs: { name: 'Ada' },
          enabled: true,
          catch_up: 'skip',
          on_failure: null,
          on_recovery: null,
        },
      },
    })
  })

  it('shows the server’s refusal with its problems', async () => {
    const user = userEvent.setup()
    stubFetch(
      on('PUT', '/api/items/f/demo/nightly', {
        status: 422,
        body: {
          type: 'InvalidSchedule',
          message: "Schedule '0 25 * * *' is not valid",
          hint: 'Hours go from 0 to 23.',
          problems: ['hour: 25 is out of range'],
        },
      }),
    )
    renderRouted(<NewScheduleForm prefix="f/demo/" target="f/demo/greet" />)
    const form = await screen.findByRole('form', { name: 'New schedule' })
    expect(within(form).queryByLabelText('Flow or script to run')).not.toBeInTheDocument()
    await user.type(within(form).getByLabelText('Schedule path'), 'nightly')
    await user.clear(within(form).getByLabelText('Time zone'))
    await user.type(within(form).getByLabelText('Time zone'), 'UTC')
    await user.click(within(form).getByRole('button', { name: 'Create the schedule' }))
    const alert = await within(form).findByRole('alert')
    expect(alert).toHaveTextContent("Not created: Schedule '0 25 * * *' is not valid")
    expect(alert).toHaveTextContent('Hours go from 0 to 23.')
    expect(alert).toHaveTextContent('hour: 25 is out of range')
  })
})
