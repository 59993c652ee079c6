/** The new-schedule form's fields, what is wrong with them, and the schedule item they make. */
import type { ScheduleValue } from '../../api/triggers'
import { isTimeZone } from './time'

export interface ScheduleFields {
  path: string
  cron: string
  timezone: string
  target: string
  /** The inputs as JSON text (when the target's input form is not used). */
  inputsText: string
  /** The inputs from the target's input form (null: typed as JSON). */
  inputsValue: Record<string, unknown> | null
  catchUp: ScheduleValue['catch_up']
  enabled: boolean
  onFailure: string
  onRecovery: string
}

export type FieldProblems = Partial<Record<'path' | 'cron' | 'timezone' | 'target' | 'inputs' | 'onFailure' | 'onRecovery', string>>

const ALIASES = new Set(['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'])

/** What is wrong with a cron expression's shape (the server checks each field's values). */
export function cronProblem(cron: string): string | null {
  const text = cron.trim()
  if (text === '') return 'Say when it fires: a cron expression such as 0 9 * * 1-5.'
  if (text.startsWith('@')) return ALIASES.has(text.toLowerCase()) ? null : `${text} is no cron alias (@hourly, @daily, @weekly, @monthly, @yearly).`
  const n = text.split(/\s+/).length
  if (n !== 5 && n !== 6) return `A cron expression has 5 fields (minute hour day month weekday), or 6 with the seconds first; this has ${n}.`
  return null
}

/** What is wrong with the shape of an item path (the server checks the rest). */
export function itemPathProblem(path: string): string | null {
  const parts = path.split('/')
  if (parts.length < 3 || (parts[0] !== 'f' && parts[0] !== 'u') || parts.some((part) => part === ''))
    return 'A path is f/<folder>/<name> (or u/<you>/<name>).'
  return null
}

function pathProblem(path: string, what: string): string | null {
  const problem = itemPathProblem(path.trim())
  return problem ? `${what}: ${problem}` : null
}

/** The inputs of each run, or what is wrong with them. */
export function parseInputs(fields: Pick<ScheduleFields, 'inputsText' | 'inputsValue'>): Record<string, unknown> | string {
  if (fields.inputsValue !== null) return fields.inputsValue
  const text = fields.inputsText.trim()
  if (text === '') return {}
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'The inputs are a JSON object: {"name": "value"}.'
    return value as Record<string, unknown>
  } catch {
    return 'The inputs are not JSON: they do not parse.'
  }
}

/** Each field's problem (none: the form can be sent). */
export function scheduleProblems(fields: ScheduleFields): FieldProblems {
  const problems: FieldProblems = {}
  const path = pathProblem(fields.path, 'The schedule’s path')
  if (path) problems.path = path
  const cron = cronProblem(fields.cron)
  if (cron) problems.cron = cron
  if (!isTimeZone(fields.timezone.trim()))
    problems.timezone = `${fields.timezone.trim() || 'An empty zone'} is no IANA time zone (such as Europe/Paris or UTC).`
  const target = pathProblem(fields.target, 'The target')
  if (target) problems.target = target
  const inputs = parseInputs(fields)
  if (typeof inputs === 'string') problems.inputs = inputs
  if (fields.onFailure.trim()) {
    const p = pathProblem(fields.onFailure, 'The failure handler')
    if (p) problems.onFailure = p
  }
  if (fields.onRecovery.trim()) {
    const p = pathProblem(fields.onRecovery, 'The recovery handler')
    if (p) problems.onRecovery = p
  }
  return problems
}

/** The schedule item's value the fields make (check `scheduleProblems` first). */
export function scheduleValue(fields: ScheduleFields): ScheduleValue {
  const inputs = parseInputs(fields)
  return {
    cron: fields.cron.trim(),
    timezone: fields.timezone.trim(),
    target: fields.target.trim(),
    inputs: typeof inputs === 'string' ? {} : inputs,
    enabled: fields.enabled,
    catch_up: fields.catchUp,
    on_failure: fields.onFailure.trim() || null,
    on_recovery: fields.onRecovery.trim() || null,
  }
}
