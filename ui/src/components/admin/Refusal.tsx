/** A screen the API keeps from the caller: said plainly, with the API's own words below. */
import type { ReactNode } from 'react'
import { ApiError } from '../../api/client'

export function isRefusal(error: unknown): boolean {
  return error instanceof ApiError && error.status === 403
}

export function Refusal({ title, children, error }: { title: string; children: ReactNode; error?: unknown }) {
  return (
    <div className="notice admin-refusal" role="status">
      <strong>{title}</strong>
      <p>{children}</p>
      {error instanceof Error && <p className="muted small-text">The server said: {error.message}</p>}
    </div>
  )
}
