/** An item's one-line summary, kept (or changed) when its value is saved. */
import { useId } from 'react'

export function SummaryField({ value, onChange }: { value: string; onChange: (value: string) => void }) {
  const id = useId()
  return (
    <div className="field">
      <label htmlFor={id}>Summary</label>
      <input id={id} value={value} maxLength={10_000} onChange={(e) => onChange(e.target.value)} />
    </div>
  )
}
