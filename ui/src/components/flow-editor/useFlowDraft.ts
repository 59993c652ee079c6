/**
 * The flow's text in the editor, opened from the caller's draft (else the deployed flow,
 * else a template), and autosaved as the caller's draft a moment after each change.
 * Text that does not parse as YAML is not sent: the last saved draft stays as it was.
 */
import { useCallback, useEffect, useRef, useState } from 'react'
import { ApiError } from '../../api/client'
import { useDraft, useSaveDraft } from '../../api/drafts'
import { useItem } from '../../api/items'
import { flowText, parseFlow } from '../../lib/flowYaml'

export const AUTOSAVE_MS = 800

/** A new flow's first text: one step, so that it is a flow the server accepts. */
export function newFlowText(path: string): string {
  const name = path.split('/').pop() ?? 'flow'
  return [
    `summary: ${name}`,
    'inputs:',
    '  type: object',
    '  properties:',
    '    name:',
    '      type: string',
    'steps:',
    '  - id: start',
    '    identity: true',
    '',
  ].join('\n')
}

export type SaveState =
  | { state: 'clean'; hasDraft: boolean }
  | { state: 'pending' }
  | { state: 'saving' }
  | { state: 'saved' }
  | { state: 'unparsable' }
  | { state: 'refused'; error: unknown }

export function useFlowDraft(path: string) {
  const draft = useDraft(path)
  const item = useItem(path)
  const save = useSaveDraft(path)
  const itemMissing = item.error instanceof ApiError && item.error.status === 404
  const loading = draft.isPending || (item.isPending && !draft.data)
  const loadError = draft.error ?? (itemMissing ? null : item.error && !draft.data ? item.error : null)
  const [text, setTextState] = useState<string | null>(null)
  const saved = useRef<string | null>(null)
  const [status, setStatus] = useState<SaveState>({ state: 'clean', hasDraft: false })

  // Open once: the draft, else the deployed flow, else a template.
  useEffect(() => {
    if (text !== null || loading || loadError) return
    const opened = draft.data ? flowText(draft.data.value) : item.data ? flowText(item.data.value) : newFlowText(path)
    saved.current = draft.data ? opened : null
    setTextState(opened)
    setStatus({ state: 'clean', hasDraft: !!draft.data })
  }, [text, loading, loadError, draft.data, item.data, path])

  const saveNow = useCallback(
    async (value: string): Promise<boolean> => {
      if (parseFlow(value).value === null) {
        setStatus({ state: 'unparsable' })
        return false
      }
      setStatus({ state: 'saving' })
      try {
        await save.mutateAsync({ kind: 'flow', value })
        saved.current = value
        setStatus({ state: 'saved' })
        return true
      } catch (error) {
        setStatus({ state: 'refused', error })
        return false
      }
    },
    [save],
  )

  // Autosave a moment after the last change.
  useEffect(() => {
    if (text === null || text === saved.current || status.state === 'clean') return
    const timer = setTimeout(() => void saveNow(text), AUTOSAVE_MS)
    return () => clearTimeout(timer)
    // Only a change of the text restarts the wait.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [text])

  const setText = useCallback((value: string) => {
    setTextState(value)
    // Back to what is saved (an undo): nothing to save.
    setStatus(value === saved.current ? { state: 'saved' } : { state: 'pending' })
  }, [])

  /** Save now what is not saved yet (before a run, a deploy, an unlink); false: it is not saved. */
  const flush = useCallback(async () => {
    if (text === null) return false
    if (text === saved.current) return true
    return saveNow(text)
  }, [text, saveNow])

  /** Show `value` as the saved draft (after the server changed it), or the deployed flow (null: no draft). */
  const replace = useCallback((value: string, hasDraft: boolean) => {
    saved.current = hasDraft ? value : null
    setTextState(value)
    setStatus({ state: 'clean', hasDraft })
  }, [])

  return {
    text,
    setText,
    status,
    flush,
    replace,
    loading,
    loadError,
    deployed: item.data ?? null,
    isNew: itemMissing,
  }
}
