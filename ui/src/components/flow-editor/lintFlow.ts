/**
 * The server's own checks of a flow (`POST /api/lint/{path}`), as saving the caller's
 * draft would run them: what the schema cannot say (the scripts and agents it names,
 * expressions, step ids). Nothing is stored.
 */
import { api, unwrap } from '../../api/client'
import type { components } from '../../api/schema'

export type LintAnswer = components['schemas']['LintOut']

export function lintFlow(path: string, text: string, signal?: AbortSignal): Promise<LintAnswer> {
  return unwrap(api.POST('/api/lint/{path}', { params: { path: { path } }, body: { value: text }, signal }))
}
