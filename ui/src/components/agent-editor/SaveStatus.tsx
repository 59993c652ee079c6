/** Where the autosave stands, read out politely as it changes. */
import type { SaveStatus as Status } from './useAutosave'

const TEXT: Record<Status, string> = {
  idle: '',
  pending: 'Saving…',
  saving: 'Saving…',
  saved: 'Draft saved',
  error: 'Draft not saved',
}

export function SaveStatus({ status }: { status: Status }) {
  const tone = status === 'saved' ? ' saved' : status === 'error' ? ' failed' : ''
  return (
    <span className={`save-status${tone}`} role="status" aria-live="polite" data-testid="save-status">
      {TEXT[status] || <span className="muted">No unsaved changes</span>}
    </span>
  )
}
