/**
 * Where the cursor is in a block-style YAML text, read from indentation alone, so that
 * it works while the line being typed does not parse yet: the path of the mapping the
 * cursor's line belongs to, whether it is at a key or at a key's value, and the keys
 * already written beside it.
 */
import type { Segment } from './flowSchema'

export interface CursorPlace {
  /** The mapping the line is an entry of (key position), or the key's own path (value position). */
  path: Segment[]
  kind: 'key' | 'value'
  /** The word typed so far, and where it starts. */
  prefix: string
  from: number
  /** Keys the mapping already has (key position only). */
  siblings: string[]
}

interface Line {
  /** Columns of the `- ` indicators that start the line, left to right. */
  dashes: number[]
  /** The column of the line's key, if it has one. */
  keyColumn: number | null
  key: string | null
  /** The key's value is on the next lines (nothing after the colon). */
  opens: boolean
  /** The column of the first content after the dashes. */
  content: number
  blank: boolean
}

const KEY = /^([A-Za-z_][\w-]*|"[^"]*"|'[^']*')\s*:(\s|$)/

function readLine(text: string): Line {
  let column = 0
  while (text[column] === ' ') column++
  const dashes: number[] = []
  while (text[column] === '-' && (text[column + 1] === ' ' || column + 1 === text.length)) {
    dashes.push(column)
    column++
    while (text[column] === ' ') column++
  }
  const rest = text.slice(column)
  const blank = rest.trim() === '' || rest.trimStart().startsWith('#')
  const match = KEY.exec(rest)
  if (!match) return { dashes, keyColumn: null, key: null, opens: false, content: column, blank: blank && dashes.length === 0 }
  const after = rest.slice(match[0].length).replace(/#.*$/, '').trim()
  return { dashes, keyColumn: column, key: match[1]!.replace(/^["']|["']$/g, ''), opens: after === '', content: column, blank: false }
}

/** Indices of the list item whose dash is at `column` on line `at`: count its earlier siblings. */
function indexOf(lines: Line[], at: number, column: number): number {
  let index = 0
  for (let i = at - 1; i >= 0; i--) {
    const line = lines[i]!
    if (line.blank) continue
    const first = line.dashes[0] ?? line.content
    if (first < column) break
    if (first === column && line.dashes[0] === column) index++
  }
  return index
}

export function cursorPlace(text: string, offset: number): CursorPlace | null {
  const lineStart = text.lastIndexOf('\n', offset - 1) + 1
  const before = text.slice(lineStart, offset)
  const nextBreak = text.indexOf('\n', offset)
  const current = text.slice(lineStart, nextBreak < 0 ? text.length : nextBreak)
  const allLines = text.slice(0, lineStart).split('\n')
  allLines.pop() // the empty piece after the last line break before this line
  const lines = allLines.map(readLine)

  const head = readLine(before)
  const word = /[\w-]*$/.exec(before)![0]
  const valueMatch = /^(\s*(?:-\s+)*)([A-Za-z_][\w-]*)\s*:\s+([\w-]*)$/.exec(before)
  const keyMatch = /^(\s*(?:-\s+)*)([\w-]*)$/.exec(before)
  if (!valueMatch && !keyMatch) return null

  const path: Segment[] = []
  const own = head.dashes
  // Climb from the line's first column: each line above that starts left of it is a
  // parent (a key that opens a block, or a list item's dash); for a line without dashes,
  // lines with a key at its column, before the first parent, are its siblings.
  let column = own[0] ?? head.content
  const siblings: string[] = []
  let climbed = false
  for (let i = lines.length - 1; i >= 0 && !(climbed && column === 0); i--) {
    const line = lines[i]!
    if (line.blank) continue
    if (line.keyColumn === null && line.dashes.length === 0) {
      if (line.content < column) break // a scalar, a block scalar's text: no mapping of ours
      continue
    }
    if (!climbed && own.length === 0 && line.keyColumn === column && line.key) siblings.push(line.key)
    const positions = [
      ...line.dashes.map((c) => ({ column: c, key: null as string | null })),
      ...(line.keyColumn !== null && line.opens ? [{ column: line.keyColumn, key: line.key }] : []),
    ].sort((a, b) => b.column - a.column)
    let moved = false
    for (const position of positions) {
      if (position.column >= column) continue
      path.unshift(position.key ?? indexOf(lines, i, position.column))
      column = position.column
      moved = true
    }
    if (moved) climbed = true
    else if ((line.dashes[0] ?? line.keyColumn ?? line.content) < column) break
  }
  // The line's own dashes start a new item of a list, after the items above it.
  if (own.length > 0) path.push(indexOf([...lines, head], lines.length, own[0]!))

  if (!valueMatch) {
    // Keys written after the cursor's line in the same mapping count as siblings too.
    for (const line of text.slice(nextBreak < 0 ? text.length : nextBreak + 1).split('\n').map(readLine)) {
      if (line.blank) continue
      if ((line.dashes[0] ?? line.content) < head.content) break
      if (line.keyColumn === head.content && line.dashes.length === 0 && line.key) siblings.push(line.key)
    }
    const currentKey = readLine(current).key
    return { path, kind: 'key', prefix: word, from: offset - word.length, siblings: siblings.filter((k) => k !== currentKey) }
  }
  return { path: [...path, valueMatch[2]!], kind: 'value', prefix: word, from: offset - word.length, siblings: [] }
}
