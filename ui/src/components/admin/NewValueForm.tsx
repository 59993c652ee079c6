/** Create a variable, a secret or a resource at a new path, then open it. */
import { useMutation } from '@tanstack/react-query'
import { useNavigate } from '@tanstack/react-router'
import { useRef, useState } from 'react'
import { ApiError } from '../../api/client'
import { ErrorBox } from '../ErrorBox'
import { exists, useWriteItem, type WriteIn } from '../value/write'

type Kind = 'variable' | 'secret' | 'resource'

/** The body to write, or an error saying what is wrong with the form. */
export function newValueBody(kind: Kind, value: string, resourceType: string): WriteIn | Error {
  if (kind !== 'resource') return { kind: 'variable', value, secret: kind === 'secret', base_version: 0 }
  if (!resourceType.trim()) return new Error('A resource needs its resource type (openai, ai_agent, or a resource_type item’s path).')
  try {
    return { kind: 'resource', value: JSON.parse(value || '{}'), resource_type: resourceType.trim(), base_version: 0 }
  } catch {
    return new Error('The value of a resource is JSON: it does not parse.')
  }
}

export function NewValueForm({ folders }: { folders: string[] }) {
  const navigate = useNavigate()
  const [path, setPath] = useState(folders[0] ? `f/${folders[0]}/` : 'f/')
  const [kind, setKind] = useState<Kind>('variable')
  const [value, setValue] = useState('')
  const [resourceType, setResourceType] = useState('')
  // Uncontrolled, so that the secret typed never lands in the input's `value` attribute.
  const secretField = useRef<HTMLInputElement>(null)
  const write = useWriteItem(path.trim())
  const create = useMutation({
    mutationFn: async () => {
      const body = newValueBody(kind, kind === 'secret' ? (secretField.current?.value ?? '') : value, resourceType)
      if (body instanceof Error) throw body
      // A variable stays at version 0, so base_version 0 would not refuse overwriting one.
      if (await exists(path.trim()))
        throw new ApiError(409, { type: 'Conflict', message: `There is already an item at ${path.trim()}.`, hint: 'Choose another path, or edit that item.' })
      return write.mutateAsync(body)
    },
    onSuccess: (item) => {
      setValue('')
      if (secretField.current) secretField.current.value = ''
      void navigate({ to: '/workspace/$', params: { _splat: item.path }, search: {} })
    },
  })
  return (
    <form
      className="admin-form"
      aria-label="New variable or resource"
      onSubmit={(e) => {
        e.preventDefault()
        create.mutate()
      }}
    >
      <h2>New variable, secret or resource</h2>
      <div className="row">
        <div className="field grow">
          <label htmlFor="new-value-path">Path</label>
          <input id="new-value-path" className="mono" value={path} required onChange={(e) => setPath(e.target.value)} />
        </div>
        <div className="field">
          <label htmlFor="new-value-kind">Kind</label>
          <select id="new-value-kind" value={kind} onChange={(e) => setKind(e.target.value as Kind)}>
            <option value="variable">variable</option>
            <option value="secret">secret variable</option>
            <option value="resource">resource</option>
          </select>
        </div>
        {kind === 'resource' && (
          <div className="field">
            <label htmlFor="new-value-type">Resource type</label>
            <input id="new-value-type" value={resourceType} required onChange={(e) => setResourceType(e.target.value)} />
          </div>
        )}
      </div>
      <div className="field">
        <label htmlFor="new-value-value">{kind === 'resource' ? 'Value (JSON)' : kind === 'secret' ? 'Secret value' : 'Value'}</label>
        {kind === 'secret' ? (
          <input id="new-value-value" type="password" autoComplete="new-password" ref={secretField} />
        ) : (
          <textarea id="new-value-value" rows={kind === 'resource' ? 6 : 2} value={value} onChange={(e) => setValue(e.target.value)} />
        )}
      </div>
      <ErrorBox error={create.error} title="Not created" />
      <div className="buttons">
        <button type="submit" className="primary" disabled={create.isPending || !path.trim()}>
          Create
        </button>
      </div>
    </form>
  )
}
