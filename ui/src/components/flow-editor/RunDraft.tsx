/** Run the caller's draft of the flow, its input filled in a form built from the draft's input schema. */
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { Link } from '@tanstack/react-router'
import { useState } from 'react'
import { api, unwrap } from '../../api/client'
import { ErrorBox } from '../ErrorBox'
import { type JsonSchema, SchemaForm, schemaProblems } from '../SchemaForm'

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export function RunDraft({
  path,
  document,
  prepare,
  onStarted,
}: {
  path: string
  document: unknown
  /** Save what the editor has not saved yet; false: do not run. */
  prepare: () => Promise<boolean>
  onStarted: (runId: string) => void
}) {
  const schema: JsonSchema | null = isObject(document) && isObject(document.inputs) ? (document.inputs as JsonSchema) : null
  const [inputs, setInputs] = useState<unknown>({})
  const client = useQueryClient()
  const start = useMutation({
    mutationFn: async () => {
      if (!(await prepare())) return null
      return unwrap(
        api.POST('/api/runs', { body: { path, inputs: isObject(inputs) ? inputs : {}, draft: true, memory_id: null } }),
      )
    },
    onSuccess: (run) => {
      if (!run) return
      void client.invalidateQueries({ queryKey: ['runs'] })
      onStarted(run.id)
    },
  })
  const problems = schema ? schemaProblems(schema, inputs) : []
  const hasFields = schema !== null && Object.keys(schema.properties ?? {}).length > 0
  return (
    <form
      className="start-run"
      aria-label={`Run the draft of ${path}`}
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
      <ErrorBox error={start.error} title="Not started" />
      {start.data && (
        <p>
          Started{' '}
          <Link to="/runs/$runId" params={{ runId: start.data.id }} search={{}}>
            run {start.data.id}
          </Link>
          .
        </p>
      )}
      <button type="submit" className="primary" disabled={start.isPending || problems.length > 0}>
        Run the draft
      </button>
    </form>
  )
}
