/** A button that copies a text (a command, a URL) to the clipboard, and says whether it could. */
import { useState } from 'react'

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState<'yes' | 'failed' | null>(null)
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text)
      setCopied('yes')
    } catch {
      setCopied('failed')
    }
  }
  return (
    <>
      <button type="button" className="small" aria-label={label} onClick={() => void copy()}>
        Copy
      </button>
      <span role="status" className="small-text copy-status">
        {copied === 'yes' && 'Copied.'}
        {copied === 'failed' && 'The browser did not let the page copy: select the text and copy it.'}
      </span>
    </>
  )
}

/** A command (or any one line of text) with a copy button beside it. */
export function CopyLine({ text, label }: { text: string; label: string }) {
  return (
    <div className="copy-line">
      <code className="mono">{text}</code>
      <CopyButton text={text} label={label} />
    </div>
  )
}
