/** One tool of the agent: its name, what it runs, whether a person approves its calls, and its other keys. */
import { useId } from 'react'
import { CodeEditor } from '../CodeEditor'
import { KIND_KEYS, NEW_TOOL_CODE, TOOL_KINDS, type Tool, type ToolKind, kindText, toolKind, withKey, withKind } from './agentValue'
import { RawKeys } from './RawKeys'

type Props = {
  tool: Tool
  index: number
  onChange: (tool: Tool) => void
  onRemove: () => void
}

const OWN_KEYS = ['name', 'description', 'requires_approval']

export function ToolCard({ tool, index, onChange, onRemove }: Props) {
  const id = useId()
  const kind = toolKind(tool)
  const name = typeof tool.name === 'string' && tool.name !== '' ? tool.name : `tool ${index + 1}`
  const field = TOOL_KINDS.find((k) => k.kind === kind)
  // A kind the form edits covers its key; any other definition stays in the YAML below.
  const covered = kind === 'other' ? OWN_KEYS : [...OWN_KEYS, ...KIND_KEYS]
  return (
    <article className="card tool-card" aria-labelledby={`${id}-title`}>
      <header>
        <h3 id={`${id}-title`} className="mono">
          {name}
        </h3>
        <button type="button" className="small danger" onClick={onRemove}>
          Remove {name}
        </button>
      </header>
      <div className="brain-row">
        <div className="field">
          <label htmlFor={`${id}-name`}>Name</label>
          <input
            id={`${id}-name`}
            className="mono"
            value={String(tool.name ?? '')}
            onChange={(e) => onChange({ ...tool, name: e.target.value })}
          />
        </div>
        <div className="field">
          <label htmlFor={`${id}-kind`}>Runs</label>
          <select
            id={`${id}-kind`}
            value={kind}
            onChange={(e) => {
              const next = e.target.value as Exclude<ToolKind, 'other'>
              onChange(withKind(tool, next, next === 'code' ? NEW_TOOL_CODE : ''))
            }}
          >
            {TOOL_KINDS.map((k) => (
              <option key={k.kind} value={k.kind}>
                {k.label}
              </option>
            ))}
            <option value="other" disabled>
              Another definition (edited as YAML)
            </option>
          </select>
        </div>
        <div className="field field-check tool-approval">
          <input
            id={`${id}-approval`}
            type="checkbox"
            checked={tool.requires_approval === true}
            onChange={(e) => onChange(withKey(tool, 'requires_approval', e.target.checked ? true : undefined))}
          />
          <label htmlFor={`${id}-approval`}>Requires approval</label>
        </div>
      </div>
      <div className="field">
        <label htmlFor={`${id}-description`}>Description</label>
        <input
          id={`${id}-description`}
          value={String(tool.description ?? '')}
          placeholder="Default: main's docstring, or the flow's summary"
          onChange={(e) => onChange(withKey(tool, 'description', e.target.value === '' ? undefined : e.target.value))}
        />
      </div>
      {kind === 'code' && (
        <div className="field">
          <span className="field-label">Code</span>
          <CodeEditor
            value={kindText(tool, kind)}
            onChange={(code) => onChange(withKind(tool, 'code', code))}
            language="python"
            label={`Code of tool ${index + 1}`}
          />
        </div>
      )}
      {field && kind !== 'code' && (
        <div className="field">
          <label htmlFor={`${id}-target`}>{field.field}</label>
          <input
            id={`${id}-target`}
            className="mono"
            value={kindText(tool, kind)}
            placeholder={kind === 'function' ? 'package.module:function' : 'f/<folder>/<name>'}
            onChange={(e) => onChange(withKind(tool, field.kind, e.target.value))}
          />
        </div>
      )}
      {kind === 'other' && (
        <p className="notice small-text">
          The form does not edit this tool&apos;s definition: edit it in its other keys below.
        </p>
      )}
      <details open={kind === 'other'}>
        <summary>Other keys of {name}</summary>
        <RawKeys
          value={tool}
          covered={covered}
          onChange={onChange}
          label={`Other keys of ${name} (YAML)`}
          help="inputs, approvers, idempotent, run, ..."
        />
      </details>
    </article>
  )
}
