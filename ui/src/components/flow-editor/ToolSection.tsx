/** One tool of a linked step: its input overrides (`tool_inputs`) and, read-only, its code. */
import { useQuery } from '@tanstack/react-query'
import { useId } from 'react'
import { api, unwrap } from '../../api/client'
import { mainParameters, type ToolInfo } from '../../lib/flowSchemaTools'
import { ErrorBox } from '../ErrorBox'
import { ToolInputsEditor } from './ToolInputsEditor'

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export function ToolSection({
  tool,
  bound,
  value,
  onChange,
}: {
  tool: ToolInfo
  bound: Record<string, unknown>
  value: Record<string, unknown>
  onChange: (value: Record<string, unknown>) => void
}) {
  const titleId = useId()
  // A workspace script tool: its parameters are that script's.
  const script = useQuery({
    queryKey: ['items', tool.scriptPath, 'version', null],
    queryFn: () => unwrap(api.GET('/api/items/{path}', { params: { path: { path: tool.scriptPath! }, query: {} } })),
    enabled: tool.scriptPath !== null,
  })
  const code = tool.code ?? (typeof script.data?.value === 'string' ? script.data.value : null)
  const schema = tool.schema ?? (code ? mainParameters(code) : null)
  return (
    <section className="fe-tool-section" aria-labelledby={titleId} data-testid={`tool-inputs-${tool.name}`}>
      <h4 id={titleId}>
        Inputs of <span className="mono">{tool.name}</span>
      </h4>
      <ErrorBox error={script.error} title={`Could not read ${tool.scriptPath}`} />
      {Object.keys(value).length > 0 && <p className="field-help">This flow overrides {Object.keys(value).join(', ')}.</p>}
      <ToolInputsEditor tool={tool.name} schema={schema} bound={isObject(bound) ? bound : {}} value={value} onChange={onChange} />
      {code && (
        <details>
          <summary>Code of {tool.name}</summary>
          <pre className="code">{code}</pre>
        </details>
      )}
    </section>
  )
}
