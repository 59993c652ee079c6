/**
 * Make a schedule: its path, when it fires (cron and time zone), the flow or script it runs
 * with which inputs (the target's input form when it has an input schema, else JSON), its
 * catch-up policy and handlers. It is written as a workspace item of kind `schedule`.
 */
import { useQuery } from '@tanstack/react-query'
import { useNavigate } from '@tanstack/react-router'
import { type FormEvent, useId, useState } from 'react'
import { api, unwrap } from '../../api/client'
import { type ScheduleValue, useCreateSchedule } from '../../api/triggers'
import { ErrorBox } from '../ErrorBox'
import { useDebounced } from '../flow-editor/useDebounced'
import { type JsonSchema, SchemaForm, schemaProblems } from '../SchemaForm'
import { cronInWords } from './cron'
import { type FieldProblems, itemPathProblem, type ScheduleFields, scheduleProblems, scheduleValue } from './scheduleForm'
import { browserZone, COMMON_ZONES } from './zones'
import './triggers.css'

/** The input schema of the item at `path` (null: none, or not readable), once typing stops. */
function useTargetSchema(path: string): JsonSchema | null {
  const settled = useDebounced(path.trim(), 400)
  const item = useQuery({
    queryKey: ['items', settled, 'version', null],
    queryFn: () => unwrap(api.GET('/api/items/{path}', { params: { path: { path: settled } } })),
    enabled: itemPathProblem(settled) === null,
    retry: false,
  })
  const schema = item.data?.input_schema as JsonSchema | null | undefined
  return schema && typeof schema === 'object' && Object.keys(schema.properties ?? {}).length > 0 ? schema : null
}

function Problem({ id, text }: { id: string; text: string | undefined }) {
  return text ? (
    <p id={id} className="field-error">
      {text}
    </p>
  ) : null
}

export function NewScheduleForm({ prefix, target: fixedTarget }: { prefix: string; target?: string }) {
  const id = useId()
  const navigate = useNavigate()
  const create = useCreateSchedule()
  const [fields, setFields] = useState<ScheduleFields>({
    path: prefix,
    cron: '0 9 * * *',
    timezone: browserZone(),
    target: fixedTarget ?? '',
    inputsText: '{}',
    inputsValue: null,
    catchUp: 'latest',
    enabled: true,
    onFailure: '',
    onRecovery: '',
  })
  const [shown, setShown] = useState<FieldProblems>({})
  const schema = useTargetSchema(fields.target)
  const set = (change: Partial<ScheduleFields>) => setFields((f) => ({ ...f, ...change }))
  // With the target's form, its value is what the form holds.
  const current: ScheduleFields = schema ? { ...fields, inputsValue: fields.inputsValue ?? {} } : { ...fields, inputsValue: null }
  const formProblems = schema && current.inputsValue ? schemaProblems(schema, current.inputsValue) : []
  const words = cronInWords(fields.cron)

  const submit = (e: FormEvent) => {
    e.preventDefault()
    const problems = scheduleProblems(current)
    if (formProblems.length > 0) problems.inputs = formProblems.join('; ')
    setShown(problems)
    if (Object.keys(problems).length > 0) return
    const value: ScheduleValue = scheduleValue(current)
    create.mutate(
      { path: current.path.trim(), value },
      { onSuccess: (item) => void navigate({ to: '/workspace/$', params: { _splat: item.path }, search: {} }) },
    )
  }
  const field = (name: keyof FieldProblems) => ({
    'aria-invalid': shown[name] ? true : undefined,
    'aria-describedby': shown[name] ? `${id}-${name}-problem` : undefined,
  })

  return (
    <form className="schedule-form" aria-label="New schedule" onSubmit={submit} noValidate>
      <h2>New schedule</h2>
      <div className="row">
        <div className="field">
          <label htmlFor={`${id}-path`}>Schedule path</label>
          <input id={`${id}-path`} className="mono" value={fields.path} onChange={(e) => set({ path: e.target.value })} {...field('path')} />
          <Problem id={`${id}-path-problem`} text={shown.path} />
        </div>
        {fixedTarget === undefined && (
          <div className="field">
            <label htmlFor={`${id}-target`}>Flow or script to run</label>
            <input
              id={`${id}-target`}
              className="mono"
              placeholder="f/folder/flow"
              value={fields.target}
              onChange={(e) => set({ target: e.target.value, inputsValue: null })}
              {...field('target')}
            />
            <Problem id={`${id}-target-problem`} text={shown.target} />
          </div>
        )}
      </div>
      <div className="row">
        <div className="field">
          <label htmlFor={`${id}-cron`}>Cron</label>
          <input
            id={`${id}-cron`}
            className="mono"
            value={fields.cron}
            onChange={(e) => set({ cron: e.target.value })}
            {...field('cron')}
            aria-describedby={shown.cron ? `${id}-cron-problem` : `${id}-cron-help`}
          />
          <p id={`${id}-cron-help`} className="field-help">
            {words ? `Fires ${words}.` : 'minute hour day month weekday (6 fields: seconds first), or @daily, @hourly…'}
          </p>
          <Problem id={`${id}-cron-problem`} text={shown.cron} />
        </div>
        <div className="field">
          <label htmlFor={`${id}-zone`}>Time zone</label>
          <input
            id={`${id}-zone`}
            list={`${id}-zones`}
            value={fields.timezone}
            onChange={(e) => set({ timezone: e.target.value })}
            {...field('timezone')}
          />
          <datalist id={`${id}-zones`}>
            {COMMON_ZONES.map((z) => (
              <option key={z} value={z} />
            ))}
          </datalist>
          <Problem id={`${id}-timezone-problem`} text={shown.timezone} />
        </div>
        <div className="field">
          <label htmlFor={`${id}-catch-up`}>Catch-up</label>
          <select
            id={`${id}-catch-up`}
            value={fields.catchUp}
            onChange={(e) => set({ catchUp: e.target.value as ScheduleFields['catchUp'] })}
          >
            <option value="latest">latest missed fire only (default)</option>
            <option value="all">every missed fire</option>
            <option value="skip">no missed fire</option>
          </select>
        </div>
      </div>
      <fieldset className="field">
        <legend className="field-label">Inputs of each run</legend>
        {schema ? (
          <SchemaForm schema={schema} value={current.inputsValue} onChange={(v) => set({ inputsValue: v as Record<string, unknown> })} label="Input" />
        ) : (
          <>
            <label htmlFor={`${id}-inputs`} className="visually-hidden">
              Inputs (JSON)
            </label>
            <textarea
              id={`${id}-inputs`}
              className="mono"
              rows={3}
              value={fields.inputsText}
              onChange={(e) => set({ inputsText: e.target.value })}
              {...field('inputs')}
            />
          </>
        )}
        <Problem id={`${id}-inputs-problem`} text={shown.inputs} />
      </fieldset>
      <details>
        <summary>Handlers and state</summary>
        <div className="row">
          <div className="field">
            <label htmlFor={`${id}-on-failure`}>On failure, run</label>
            <input id={`${id}-on-failure`} className="mono" placeholder="f/folder/flow" value={fields.onFailure} onChange={(e) => set({ onFailure: e.target.value })} {...field('onFailure')} />
            <Problem id={`${id}-onFailure-problem`} text={shown.onFailure} />
          </div>
          <div className="field">
            <label htmlFor={`${id}-on-recovery`}>On recovery, run</label>
            <input id={`${id}-on-recovery`} className="mono" placeholder="f/folder/flow" value={fields.onRecovery} onChange={(e) => set({ onRecovery: e.target.value })} {...field('onRecovery')} />
            <Problem id={`${id}-onRecovery-problem`} text={shown.onRecovery} />
          </div>
        </div>
        <label className="field field-check">
          <input type="checkbox" checked={!fields.enabled} onChange={(e) => set({ enabled: !e.target.checked })} />
          Start paused
        </label>
      </details>
      <ErrorBox error={create.error} title="Not created" />
      <button type="submit" className="primary" disabled={create.isPending}>
        Create the schedule
      </button>
    </form>
  )
}
