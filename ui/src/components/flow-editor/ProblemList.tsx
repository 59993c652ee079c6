/** The problems found in the flow's text, listed by line (the editor marks them too). */
import type { TextProblem } from '../../lib/flowYaml'
import { lineOf } from '../../lib/flowYamlProblems'

const SOURCES = { yaml: 'YAML', schema: 'schema', server: 'server check' } as const

export function ProblemList({ text, problems, note }: { text: string; problems: readonly TextProblem[]; note?: string }) {
  return (
    <section className="fe-problems" aria-label="Problems">
      {problems.length === 0 ? (
        <p className="muted">No problems found.{note ? ` ${note}` : ''}</p>
      ) : (
        <ul>
          {problems.map((p, i) => (
            <li key={i} className={p.severity === 'error' ? 'fe-bad' : undefined}>
              Line {lineOf(text, p.from)}: {p.message} <span className="muted">({SOURCES[p.source]})</span>
            </li>
          ))}
        </ul>
      )}
      {problems.length > 0 && note && <p className="muted">{note}</p>}
    </section>
  )
}
