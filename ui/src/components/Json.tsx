/** A JSON value, pretty-printed; it scrolls when long, so it takes focus (keyboard users scroll it too). */
export function Json({ value, label = 'JSON value' }: { value: unknown; label?: string }) {
  const text = value === undefined ? '—' : JSON.stringify(value, null, 2)
  return (
    <pre className="json" tabIndex={0} aria-label={label}>
      {text}
    </pre>
  )
}
