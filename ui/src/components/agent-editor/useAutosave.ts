/**
 * Autosave of the caller's draft of an agent: each edit (re)starts a short timer,
 * and when it fires the latest value is PUT as the draft. One save is in flight
 * at a time; edits made meanwhile are saved right after it, so the last edit
 * always wins. A refused save leaves the stored draft as it was (the server
 * keeps the last good one) and the editor's value as the user typed it.
 */
import { useCallback, useEffect, useRef, useState } from 'react'
import { useSaveDraft } from '../../api/drafts'
import type { Agent } from './agentValue'

export type SaveStatus = 'idle' | 'pending' | 'saving' | 'saved' | 'error'

type Meta = { summary: string; description: string }

export const AUTOSAVE_DELAY = 700

export function useAutosave(path: string, meta: Meta, delay = AUTOSAVE_DELAY) {
  const save = useSaveDraft(path)
  const mutate = useRef(save.mutateAsync)
  mutate.current = save.mutateAsync
  const metaRef = useRef(meta)
  metaRef.current = meta
  const [status, setStatus] = useState<SaveStatus>('idle')
  const [error, setError] = useState<unknown>(null)
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null)
  const waiting = useRef<Agent | null>(null)
  const running = useRef<Promise<void> | null>(null)
  const failed = useRef(false)

  const drain = useCallback(async () => {
    while (waiting.current) {
      const value = waiting.current
      waiting.current = null
      setStatus('saving')
      try {
        // The summary and description go with it: a deploy writes what the draft holds.
        await mutate.current({ kind: 'resource', resource_type: 'ai_agent', value, ...metaRef.current })
        failed.current = false
        if (!waiting.current) {
          setError(null)
          setStatus('saved')
        }
      } catch (failure) {
        failed.current = true
        if (!waiting.current) {
          setError(failure)
          setStatus('error')
        }
      }
    }
  }, [])

  /** Save what is waiting now, and wait for it: whether the draft holds the last edit (before a deploy). */
  const flush = useCallback(async (): Promise<boolean> => {
    if (timer.current) clearTimeout(timer.current)
    timer.current = null
    while (running.current || waiting.current) {
      if (!running.current) running.current = drain().finally(() => (running.current = null))
      await running.current
    }
    return !failed.current
  }, [drain])

  /** An edit: save `value` once the user pauses. */
  const schedule = useCallback(
    (value: Agent) => {
      waiting.current = value
      setStatus((s) => (s === 'saving' ? s : 'pending'))
      if (timer.current) clearTimeout(timer.current)
      timer.current = setTimeout(() => void flush(), delay)
    },
    [delay, flush],
  )

  /** Forget unsaved edits (the draft is being discarded). */
  const cancel = useCallback(() => {
    if (timer.current) clearTimeout(timer.current)
    timer.current = null
    waiting.current = null
    setStatus('idle')
    setError(null)
  }, [])

  /** The draft is gone (deployed): nothing to report unless an edit is on its way. */
  const settle = useCallback(() => {
    if (!waiting.current && !running.current) setStatus('idle')
  }, [])

  // Leaving the page saves what is still waiting.
  useEffect(() => () => void flush(), [flush])

  const busy = status === 'pending' || status === 'saving'
  return { status, error, busy, schedule, flush, cancel, settle }
}
