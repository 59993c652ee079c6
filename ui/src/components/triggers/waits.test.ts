import { describe, expect, it } from 'vitest'
import type { RunWait } from '../../api/types'
import type { StepState } from '../../lib/stepStates'
import { describeWait, eventOf, statusLook, withWaits } from './waits'

const NOW = 1_800_000_000

function wait(kind: string, extra: Partial<RunWait> = {}): RunWait {
  return { kind, step: 'pause', run_id: 'r1', reason: `${kind} reason`, commands: [], details: {}, children: [], ...extra }
}

function state(status: string): StepState {
  return { status, attempts: 1, duration: 2, jobs: [] }
}

describe('describeWait', () => {
  it('says until when a run sleeps, in local time and how soon', () => {
    const text = describeWait(wait('sleep', { until: NOW + 7200 }), NOW)
    expect(text).toBe(`Sleeping until ${new Date((NOW + 7200) * 1000).toLocaleString()} (in 2 h)`)
  })

  it('reads the time from the details when `until` is missing', () => {
    const iso = new Date((NOW + 600) * 1000).toISOString()
    expect(describeWait(wait('sleep', { until: null, details: { until: iso } }), NOW)).toMatch(/\(in 10 min\)$/)
  })

  it('names the event and its key, with the deadline if there is one', () => {
    const event = wait('event', { details: { name: 'order_paid', key: 'A-1', path: 'f/shop/order' } })
    expect(describeWait(event, NOW)).toBe('Waiting for event order_paid with key A-1')
    const timed = { ...event, until: NOW + 86400 }
    expect(describeWait(timed, NOW)).toBe(
      `Waiting for event order_paid with key A-1 (until ${new Date((NOW + 86400) * 1000).toLocaleString()} (in 1 d))`,
    )
    expect(eventOf(event)).toEqual({ name: 'order_paid', key: 'A-1', path: 'f/shop/order' })
    expect(eventOf(wait('sleep'))).toBeNull()
  })

  it('says when a run submitted for later starts', () => {
    expect(describeWait(wait('start', { until: NOW + 300 }), NOW)).toBe(
      `Starts at ${new Date((NOW + 300) * 1000).toLocaleString()} (in 5 min)`,
    )
  })

  it('says what the server says of other waits', () => {
    expect(describeWait(wait('queued', { reason: 'queued; no worker has claimed it yet' }), NOW)).toBe(
      'Queued; no worker has claimed it yet',
    )
  })
})

describe('withWaits', () => {
  it('marks sleeping, event-waiting and later-starting steps of this run, and no other', () => {
    const states = new Map([
      ['pause', state('waiting')],
      ['ask', state('waiting')],
      ['first', state('queued')],
      ['done', state('succeeded')],
    ])
    const waits = [
      wait('sleep', { step: 'pause' }),
      wait('event', { step: 'ask', details: { name: 'go', key: 'k' } }),
      wait('start', { step: 'first' }),
      wait('approval', { step: 'done' }),
      wait('sleep', { step: 'pause', run_id: 'child' }),
    ]
    const marked = withWaits(states, waits, 'r1')
    expect(marked.get('pause')?.status).toBe('sleeping')
    expect(marked.get('ask')?.status).toBe('waiting_event')
    expect(marked.get('first')?.status).toBe('scheduled')
    expect(marked.get('done')?.status).toBe('succeeded')
    expect(marked.get('pause')?.attempts).toBe(1)
    expect(states.get('pause')?.status).toBe('waiting') // the map given is left as it was
  })

  it('looks each such status distinct from the generic waiting', () => {
    expect(statusLook('sleeping')).toEqual({ icon: 'clock', label: 'sleeping' })
    expect(statusLook('waiting_event')).toEqual({ icon: 'bell', label: 'waiting for event' })
    expect(statusLook('not_run')).toEqual({ icon: null, label: 'not run' })
  })
})
