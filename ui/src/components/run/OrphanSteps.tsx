import type { ChildNode } from '../../lib/runChildren'

/** Steps of child runs whose parent step is not known (their `run_started` event was not read). */
export function OrphanSteps({ orphans }: { orphans: Map<string, ChildNode[]> }) {
  return (
    <section aria-labelledby="orphans-head">
      <h2 id="orphans-head">Steps of runs inside this one</h2>
      <ul className="waits">
        {[...orphans].map(([run, nodes]) => (
          <li key={run}>
            <span className="mono">{run}</span>:{' '}
            {nodes.map((n) => `${n.label} (${n.status})`).join(', ')}
          </li>
        ))}
      </ul>
    </section>
  )
}
