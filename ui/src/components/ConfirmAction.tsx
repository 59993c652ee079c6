/** A button whose action needs a second, explicit click: it asks its question in place first. */
import { useEffect, useRef, useState } from 'react'

type Props = {
  /** The button's text. */
  label: string
  /** What is asked before acting (say what cannot be undone). */
  question: string
  /** The confirming button's text. */
  confirm: string
  onConfirm: () => void
  disabled?: boolean
  danger?: boolean
}

export function ConfirmAction({ label, question, confirm, onConfirm, disabled, danger }: Props) {
  const [asking, setAsking] = useState(false)
  const cancel = useRef<HTMLButtonElement>(null)
  // The safe choice has the focus: Enter twice does nothing harmful.
  useEffect(() => {
    if (asking) cancel.current?.focus()
  }, [asking])
  if (!asking)
    return (
      <button type="button" className={`small${danger ? ' danger' : ''}`} disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    )
  return (
    <span className="confirm-action" role="group" aria-label={label}>
      <span>{question}</span>
      <button
        type="button"
        className={`small${danger ? ' danger' : ' primary'}`}
        disabled={disabled}
        onClick={() => {
          setAsking(false)
          onConfirm()
        }}
      >
        {confirm}
      </button>
      <button type="button" className="small" ref={cancel} onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  )
}
