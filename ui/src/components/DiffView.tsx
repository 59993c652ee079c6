/** A unified diff (as the API's `GET /api/diff/{path}` answers it), shown line by line. */
import { parsePatch } from 'diff'

export type DiffLine = {
  kind: 'add' | 'remove' | 'context' | 'hunk' | 'meta'
  text: string
  oldNo: number | null
  newNo: number | null
}

/** The lines of a unified diff, with their old and new line numbers. */
export function diffLines(unified: string): DiffLine[] {
  const lines: DiffLine[] = []
  let patches: ReturnType<typeof parsePatch> = []
  try {
    patches = parsePatch(unified)
  } catch {
    patches = []
  }
  const hunks = patches.flatMap((p) => p.hunks)
  if (hunks.length === 0) {
    // Not a unified diff we can read (an agent's key-by-key comparison): colour by prefix.
    for (const text of unified.split('\n')) {
      if (text === '') continue
      const kind = text.startsWith('+') ? 'add' : text.startsWith('-') ? 'remove' : text.startsWith('@@') ? 'hunk' : 'context'
      lines.push({ kind, text, oldNo: null, newNo: null })
    }
    return lines
  }
  for (const hunk of hunks) {
    lines.push({
      kind: 'hunk',
      text: `@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@`,
      oldNo: null,
      newNo: null,
    })
    let oldNo = hunk.oldStart
    let newNo = hunk.newStart
    for (const line of hunk.lines) {
      const mark = line[0]
      const text = line.slice(1)
      if (mark === '+') lines.push({ kind: 'add', text, oldNo: null, newNo: newNo++ })
      else if (mark === '-') lines.push({ kind: 'remove', text, oldNo: oldNo++, newNo: null })
      else if (mark === '\\') lines.push({ kind: 'meta', text: line, oldNo: null, newNo: null })
      else lines.push({ kind: 'context', text, oldNo: oldNo++, newNo: newNo++ })
    }
  }
  return lines
}

const MARK: Record<DiffLine['kind'], string> = { add: '+', remove: '-', context: ' ', hunk: '', meta: '' }
const SPOKEN: Partial<Record<DiffLine['kind'], string>> = { add: 'added', remove: 'removed' }

export function DiffView({ diff, oldLabel, newLabel }: { diff: string; oldLabel: string; newLabel: string }) {
  const lines = diffLines(diff)
  if (lines.length === 0) return <p className="muted">No differences between {oldLabel} and {newLabel}.</p>
  const added = lines.filter((l) => l.kind === 'add').length
  const removed = lines.filter((l) => l.kind === 'remove').length
  return (
    <figure className="diff">
      <figcaption>
        {oldLabel} → {newLabel}: <span className="diff-added">+{added}</span>{' '}
        <span className="diff-removed">−{removed}</span>
      </figcaption>
      <table>
        <tbody>
          {lines.map((line, i) => (
            <tr key={i} className={`diff-${line.kind}`} data-kind={line.kind}>
              <td className="diff-no">{line.oldNo ?? ''}</td>
              <td className="diff-no">{line.newNo ?? ''}</td>
              <td className="diff-text">
                {SPOKEN[line.kind] && <span className="visually-hidden">{SPOKEN[line.kind]}: </span>}
                <span aria-hidden="true">{MARK[line.kind]}</span>
                {line.text}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  )
}
