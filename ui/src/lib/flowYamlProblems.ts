/** Everything wrong with a flow's YAML text, each problem placed on the text it is about. */
import type { Document } from 'yaml'
import { schemaProblems } from './flowSchema'
import { type ParsedFlow, parseFlow, problemRange, stepPath, stepRange, type TextProblem } from './flowYaml'

/** What the server's lint (`POST /api/lint/{path}`) answers for each problem. */
export interface LintProblem {
  step: string | null
  field: string
  message: string
}

/** The YAML's syntax errors, or (when it parses) what the flow's JSON Schema says of it. */
export function localProblems(text: string): ParsedFlow {
  const parsed = parseFlow(text)
  if (parsed.value === null) return parsed
  const schema = schemaProblems(parsed.value).map(
    (p): TextProblem => ({
      ...problemRange(parsed.doc, text, p.path, p.key),
      severity: 'error',
      message: p.path.length > 0 ? `${p.path.join('.')}: ${p.message}` : p.message,
      source: 'schema',
    }),
  )
  return { ...parsed, problems: [...parsed.problems, ...schema] }
}

/**
 * A server problem on its step's line (narrowed to its field when the YAML has it),
 * or on the first line when it names no step the text has.
 */
export function lintTextProblems(doc: Document, text: string, value: unknown, problems: readonly LintProblem[]): TextProblem[] {
  return problems.map((p) => {
    let range = p.step ? stepRange(doc, text, value, p.step) : null
    const path = p.step ? stepPath(value, p.step) : null
    if (range && path && p.field) {
      const fieldPath = p.field.split('.').map((s) => (/^\d+$/.test(s) ? Number(s) : s))
      const narrowed = problemRange(doc, text, [...path, ...fieldPath])
      const whole = problemRange(doc, text, path)
      if (narrowed.from !== whole.from) range = narrowed
    }
    const where = range ?? { from: 0, to: Math.max(0, Math.min(text.indexOf('\n') < 0 ? text.length : text.indexOf('\n'), text.length)) }
    const label = [p.step, p.field].filter(Boolean).join('.')
    return { ...where, severity: 'error', message: label ? `${label}: ${p.message}` : p.message, source: 'server' }
  })
}

/** The line (1-based) a position is on, for the problems list. */
export function lineOf(text: string, offset: number): number {
  let line = 1
  for (let i = 0; i < offset && i < text.length; i++) if (text[i] === '\n') line++
  return line
}
