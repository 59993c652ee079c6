/**
 * "New…" on the workspace page: a flow opens in the flow editor at the path given (nothing is
 * written until its draft is saved there); a variable, secret or resource is written at once.
 */
import { useNavigate } from '@tanstack/react-router'
import { type FormEvent, useState } from 'react'
import { NewValueForm } from './admin/NewValueForm'
import { ErrorBox } from './ErrorBox'
import { NewScheduleForm } from './triggers/NewScheduleForm'

/** What is wrong with the shape of a new flow's path (the server checks the rest when it saves). */
export function flowPathProblem(path: string): string | null {
  const parts = path.split('/')
  if (parts.length < 3 || (parts[0] !== 'f' && parts[0] !== 'u') || parts.some((part) => part === ''))
    return 'A path is f/<folder>/<name> (or u/<you>/<name>).'
  return null
}

export function NewItemPanel({ folders, prefix }: { folders: string[]; prefix: string }) {
  const navigate = useNavigate()
  const [path, setPath] = useState(prefix || (folders[0] ? `f/${folders[0]}/` : 'f/'))
  const [problem, setProblem] = useState<string | null>(null)
  const open = (e: FormEvent) => {
    e.preventDefault()
    const found = flowPathProblem(path.trim())
    setProblem(found)
    if (!found) void navigate({ to: '/edit/$', params: { _splat: path.trim() } })
  }
  return (
    <details className="new-item">
      <summary>New…</summary>
      <form className="filters" aria-label="New flow" onSubmit={open}>
        <div className="field inline grow">
          <label htmlFor="new-flow-path">New flow at</label>
          <input
            id="new-flow-path"
            value={path}
            onChange={(e) => setPath(e.target.value)}
            aria-invalid={problem ? true : undefined}
            aria-describedby={problem ? 'new-flow-problem' : undefined}
          />
        </div>
        <button type="submit" className="small">
          Open in the flow editor
        </button>
      </form>
      <div id="new-flow-problem">
        <ErrorBox error={problem ? new Error(problem) : null} />
      </div>
      {folders.length > 0 && <NewValueForm folders={folders} />}
      {folders.length > 0 && <NewScheduleForm prefix={prefix || `f/${folders[0]}/`} />}
    </details>
  )
}
