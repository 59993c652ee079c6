/** What a waiting run waits for, each wait in words; an event wait with its command and a form to send it.
 *
 * A person's decision links nowhere from here: the run page's notice above opens its approvals. */
import type { RunWait } from '../../api/types'
import { CopyLine } from './CopyButton'
import { SendEventForm } from './SendEventForm'
import { Icon } from './icons'
import { describeWait, eventOf, waitIcon } from './waits'
import './triggers.css'

function WaitEntry({ wait, now, runPath }: { wait: RunWait; now: number; runPath: string | null }) {
  const event = eventOf(wait)
  const icon = waitIcon(wait.kind)
  return (
    <li className={`wait wait-${wait.kind}`} data-testid={`wait-${wait.kind}`}>
      <p>
        {icon && (
          <>
            <Icon name={icon} />{' '}
          </>
        )}
        {wait.step && (
          <>
            <span className="mono">{wait.step}</span>:{' '}
          </>
        )}
        {event ? <EventWords wait={wait} now={now} /> : describeWait(wait, now)}
      </p>
      {(wait.commands ?? []).map((command) => (
        <CopyLine key={command} text={command} label={`Copy the command: ${command}`} />
      ))}
      {event && <SendEventForm name={event.name} eventKey={event.key} path={event.path ?? runPath} />}
    </li>
  )
}

/** "Waiting for event `name` with key `key` (until ...)", the name and key as code. */
function EventWords({ wait, now }: { wait: RunWait; now: number }) {
  const event = eventOf(wait)!
  const text = describeWait(wait, now)
  const until = text.indexOf(' (until ')
  return (
    <span>
      Waiting for event <code>{event.name}</code>
      {event.key && (
        <>
          {' '}
          with key <code>{event.key}</code>
        </>
      )}
      {until >= 0 && text.slice(until)}
    </span>
  )
}

/** Every wait of the run (its child runs' after it), in words. */
export function WaitList({ waits, now, runPath }: { waits: readonly RunWait[]; now: number; runPath: string | null }) {
  const all: RunWait[] = []
  const walk = (list: readonly RunWait[]) => {
    for (const w of list) {
      all.push(w)
      walk(w.children ?? [])
    }
  }
  walk(waits)
  return (
    <ul className="waits">
      {all.map((w, i) => (
        <WaitEntry key={`${w.run_id}-${w.step ?? ''}-${w.kind}-${i}`} wait={w} now={now} runPath={runPath} />
      ))}
    </ul>
  )
}
