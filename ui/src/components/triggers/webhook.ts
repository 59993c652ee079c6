/** A flow's webhook: its URL, the scope of a token that may call it, and a curl example. */

/** The scope a token needs to start the flow at `path` by webhook, and no more. */
export function hookScope(path: string): string {
  return `hooks:write:${path}`
}

/** `<origin>/hooks/<path>`, each segment of the path encoded. */
export function hookUrl(origin: string, path: string): string {
  return `${origin}/hooks/${path.split('/').map(encodeURIComponent).join('/')}`
}

function example(schema: Record<string, unknown> | null | undefined): Record<string, unknown> {
  const properties = schema?.properties
  if (typeof properties !== 'object' || properties === null) return {}
  const body: Record<string, unknown> = {}
  for (const [name, raw] of Object.entries(properties as Record<string, Record<string, unknown>>)) {
    const type = Array.isArray(raw?.type) ? raw.type[0] : raw?.type
    if (raw && 'default' in raw) body[name] = raw.default
    else if (Array.isArray(raw?.enum) && raw.enum.length > 0) body[name] = raw.enum[0]
    else if (type === 'integer' || type === 'number') body[name] = 0
    else if (type === 'boolean') body[name] = false
    else if (type === 'array') body[name] = []
    else if (type === 'object') body[name] = {}
    else body[name] = '...'
  }
  return body
}

/** A curl command that starts the flow and waits up to 30 s for its result. */
export function curlExample(origin: string, path: string, inputSchema?: Record<string, unknown> | null): string {
  const body = JSON.stringify(example(inputSchema)).replaceAll("'", "'\\''")
  return [
    `curl -X POST '${hookUrl(origin, path)}?wait=30s' \\`,
    `  -H "Authorization: Bearer $TIDEMILL_HOOK_TOKEN" \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -H "Idempotency-Key: $(uuidgen)" \\`,
    `  -d '${body}'`,
  ].join('\n')
}
