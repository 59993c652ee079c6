/** An error as the API answered it: its message, its hint, and any problems it lists. */
import { ApiError } from '../api/client'

export function ErrorBox({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null
  const api = error instanceof ApiError ? error : null
  const message = error instanceof Error ? error.message : String(error)
  return (
    <div className="error-box" role="alert">
      {title && <strong>{title}: </strong>}
      <span>{message}</span>
      {api?.hint && <p className="hint">{api.hint}</p>}
      {api && api.problems.length > 0 && (
        <ul>
          {api.problems.map((p, i) => (
            <li key={i}>{p}</li>
          ))}
        </ul>
      )}
    </div>
  )
}
