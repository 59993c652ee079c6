/** What running an item takes, from its JSON Schema: each input's name, type, whether it is required, and what it is. */

type Property = { type?: unknown; description?: unknown; default?: unknown; enum?: unknown }

function typeOf(property: Property): string {
  if (Array.isArray(property.enum)) return `one of ${property.enum.map((v) => JSON.stringify(v)).join(', ')}`
  if (typeof property.type === 'string') return property.type
  if (Array.isArray(property.type)) return property.type.join(' or ')
  return 'any'
}

export function InputSchema({ schema, path }: { schema: Record<string, unknown>; path: string }) {
  const properties =
    typeof schema.properties === 'object' && schema.properties !== null
      ? (schema.properties as Record<string, Property>)
      : {}
  const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : [])
  const names = Object.keys(properties)
  if (names.length === 0) return <p className="muted">It takes no inputs.</p>
  return (
    <table className="table compact" aria-label={`Inputs of ${path}`}>
      <thead>
        <tr>
          <th>Input</th>
          <th>Type</th>
          <th>Required</th>
          <th>Description</th>
        </tr>
      </thead>
      <tbody>
        {names.map((name) => {
          const property = properties[name] ?? {}
          return (
            <tr key={name}>
              <td className="mono">{name}</td>
              <td>{typeOf(property)}</td>
              <td>{required.has(name) ? 'yes' : property.default !== undefined ? `no (default ${JSON.stringify(property.default)})` : 'no'}</td>
              <td>{typeof property.description === 'string' ? property.description : ''}</td>
            </tr>
          )
        })}
      </tbody>
    </table>
  )
}
