/**
 * The agent's brain: model, provider, system prompt, iterations and limits.
 * Each field changes its own key only (an emptied field drops its key, so the
 * server's default applies); every other key of the agent is passed through.
 */
import { useId } from 'react'
import { type Agent, LIMIT_KEYS, isObject, withKey, withLimit } from './agentValue'

type Props = { value: Agent; onChange: (value: Agent) => void }

const RES = '$res:'

const LIMIT_LABELS: Record<(typeof LIMIT_KEYS)[number], string> = {
  max_tool_calls: 'Max tool calls',
  max_requests: 'Max model requests',
  max_input_tokens: 'Max input tokens',
  max_output_tokens: 'Max output tokens',
  max_total_tokens: 'Max total tokens',
}

function shown(value: unknown): string {
  return value === undefined || value === null ? '' : String(value)
}

/** A number field's text as a value: blank drops the key; text that is no number is kept for the server to name. */
function numberOf(text: string): unknown {
  if (text.trim() === '') return undefined
  const n = Number(text)
  return Number.isFinite(n) ? n : text
}

function NumberField({ label, value, onChange, min, step, help }: {
  label: string
  value: unknown
  onChange: (value: unknown) => void
  min?: number
  step?: number | 'any'
  help?: string
}) {
  const id = useId()
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        type="number"
        min={min}
        step={step}
        value={shown(value)}
        aria-describedby={help ? `${id}-help` : undefined}
        onChange={(e) => onChange(numberOf(e.target.value))}
      />
      {help && (
        <span className="field-help" id={`${id}-help`}>
          {help}
        </span>
      )}
    </div>
  )
}

export function BrainForm({ value, onChange }: Props) {
  const id = useId()
  const limits = isObject(value.limits) ? value.limits : {}
  const provider = typeof value.provider === 'string' ? value.provider : ''
  return (
    <fieldset className="brain-form">
      <legend>Brain</legend>
      <div className="brain-row">
        <div className="field">
          <label htmlFor={`${id}-model`}>Model</label>
          <input
            id={`${id}-model`}
            value={shown(value.model)}
            placeholder="openai:gpt-4o-mini"
            aria-describedby={`${id}-model-help`}
            onChange={(e) => onChange(withKey(value, 'model', e.target.value === '' ? undefined : e.target.value))}
          />
          <span className="field-help" id={`${id}-model-help`}>
            A model spec: vendor:model, or fake
          </span>
        </div>
        <div className="field">
          <label htmlFor={`${id}-provider`}>Provider resource</label>
          <input
            id={`${id}-provider`}
            className="mono"
            value={provider.startsWith(RES) ? provider.slice(RES.length) : provider}
            placeholder="f/ai/openai"
            aria-describedby={`${id}-provider-help`}
            onChange={(e) => {
              const path = e.target.value.trim()
              onChange(withKey(value, 'provider', path === '' ? undefined : path.startsWith(RES) ? path : RES + path))
            }}
          />
          <span className="field-help" id={`${id}-provider-help`}>
            Optional: the workspace path of a provider resource (its key, base URL and headers)
          </span>
        </div>
      </div>
      <div className="field">
        <label htmlFor={`${id}-system`}>System prompt</label>
        <textarea
          id={`${id}-system`}
          rows={6}
          className="system-prompt"
          value={shown(value.system)}
          onChange={(e) => onChange(withKey(value, 'system', e.target.value === '' ? undefined : e.target.value))}
        />
      </div>
      <div className="brain-row">
        <NumberField
          label="Max iterations"
          value={value.max_iterations}
          min={1}
          help="Model calls before the step fails (default 10)"
          onChange={(v) => onChange(withKey(value, 'max_iterations', v))}
        />
        <NumberField
          label="Temperature"
          value={value.temperature}
          min={0}
          step="any"
          help="0 to 2; blank: the model's"
          onChange={(v) => onChange(withKey(value, 'temperature', v))}
        />
      </div>
      <fieldset>
        <legend>Limits</legend>
        <p className="field-help">Blank: no bound.</p>
        <div className="brain-row">
          {LIMIT_KEYS.map((key) => (
            <NumberField
              key={key}
              label={LIMIT_LABELS[key]}
              value={limits[key]}
              min={1}
              onChange={(v) => onChange(withLimit(value, key, v))}
            />
          ))}
          <div className="field">
            <label htmlFor={`${id}-duration`}>Max duration</label>
            <input
              id={`${id}-duration`}
              value={shown(limits.max_duration)}
              placeholder="5m"
              onChange={(e) => onChange(withLimit(value, 'max_duration', e.target.value === '' ? undefined : e.target.value))}
            />
          </div>
          <div className="field">
            <label htmlFor={`${id}-exceeded`}>When a limit is reached</label>
            <select
              id={`${id}-exceeded`}
              value={shown(limits.on_exceeded)}
              onChange={(e) => onChange(withLimit(value, 'on_exceeded', e.target.value === '' ? undefined : e.target.value))}
            >
              <option value="">Fail (the default)</option>
              <option value="fail">Fail</option>
              <option value="ask">Ask a person for more</option>
            </select>
          </div>
        </div>
      </fieldset>
    </fieldset>
  )
}
