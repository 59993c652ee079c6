/** Where the caller's draft stands: saved, saving, or why it is not. */
import { ErrorBox } from '../ErrorBox'
import type { SaveState } from './useFlowDraft'

export function SaveStatus({ status, isNew }: { status: SaveState; isNew: boolean }) {
  let text: string
  switch (status.state) {
    case 'clean':
      text = status.hasDraft ? 'Your draft' : isNew ? 'A new flow: not saved yet' : 'No draft: the deployed flow'
      break
    case 'pending':
      text = 'Unsaved changes'
      break
    case 'saving':
      text = 'Saving…'
      break
    case 'saved':
      text = 'Saved draft'
      break
    case 'unparsable':
      text = 'Not saved: the YAML does not parse (your last saved draft is kept)'
      break
    case 'refused':
      text = 'Draft not saved'
      break
  }
  return (
    <div className="fe-save">
      <span role="status" data-testid="save-status" className={status.state === 'unparsable' || status.state === 'refused' ? 'fe-bad' : 'muted'}>
        {text}
      </span>
      {status.state === 'refused' && <ErrorBox error={status.error} title="The server refused the draft" />}
    </div>
  )
}
