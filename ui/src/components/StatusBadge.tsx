/** A run's, step's or wait's status as a coloured badge; its text is the status itself. */
export function StatusBadge({ status, label }: { status: string; label?: string }) {
  return (
    <span className={`badge status-${status}`} data-status={status} aria-label={label ? `${label}: ${status}` : undefined}>
      {status}
    </span>
  )
}
