/** Start a run of a workspace flow, its input filled in a form built from the flow's input schema. */
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useNavigate } from '@tanstack/react-router'
import { useState } from 'react'
import { api, unwrap } from '../api/client'
import { ErrorBox } from './ErrorBox'
import { type JsonSchema, SchemaForm, schemaProblems } from './SchemaForm'

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export function StartRun({ path, document }: { path: string; document: unknown }) {
  const schema: JsonSchema | null = isObject(document) && isObject(document.inputs) ? (document.inputs as JsonSchema) : null
  const [inputs, setInputs] = useState<unknown>({})
  // Empty: now; else a local date and time to start it at (the run waits, holding no worker).
  const [startAt, setStartAt] = useState('')
  const client = useQueryClient()
  const navigate = useNavigate()
  const start = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/runs', {
          body: {
            path,
            inputs: isObject(inputs) ? inputs : {},
            draft: false,
            memory_id: null,
            ...(startAt ? { start_at: new Date(startAt).getTime() / 1000 } : {}),
          },
        }),
      ),
    onSuccess: (run) => {
      void client.invalidateQueries({ queryKey: ['runs'] })
      void navigate({ to: '/runs/$runId', params: { runId: run.id }, search: {} })
    },
  })
  const problems = schema ? schemaProblems(schema, inputs) : []
  const hasFields = schema !== null && Object.keys(schema.properties ?? {}).length > 0
  return (
    <form
      className="start-run"
      aria-label={`Run ${path}`}
      onSubmit={(e) => {
        e.preventDefault()
        start.mutate()
      }}
    >
      {hasFields ? (
        <SchemaForm schema={schema} value={inputs} onChange={setInputs} label="Input" />
      ) : (
        <p className="muted">This flow takes no input.</p>
      )}
      <div className="field inline">
        <label htmlFor={`start-at-${path}`}>Start at (optional)</label>
        <input id={`start-at-${path}`} type="datetime-local" value={startAt} onChange={(e) => setStartAt(e.target.value)} />
      </div>
      <ErrorBox error={start.error} title="Not started" />
      <button type="submit" className="primary" disabled={start.isPending || problems.length > 0}>
        {startAt ? 'Start it later' : 'Start a run'}
      </button>
    </form>
  )
}
